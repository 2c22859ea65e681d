"""Calibration: run the float graph on the calibration inputs and record each tensor's absolute maximum (and
per-channel mean, for bias correction).

The inputs run in batches of ``BATCH`` through a float32 streaming run (``run_float(observe=...)``): a tensor is
reduced to its range and channel means as soon as it is computed and freed after its last reader, so memory is
the live activations of one batch, not every activation of every sample. ``ctx.calib_method`` picks the
range from what was seen (``compiler.calib_range``: minmax, percentile, entropy).
"""
from __future__ import annotations

import numpy as np

from compiler.calib_range import AbsHistogram, choose
from compiler.float_exec import run_float
from compiler.ir import Graph
from compiler.passes import CompileContext

#: Calibration samples run through the network at once (bigger matmuls; bounded im2col buffers).
BATCH = 8


def _batches(feeds: list[dict[str, np.ndarray]], size: int):
    for i in range(0, len(feeds), size):
        chunk = feeds[i:i + size]
        yield {t: np.concatenate([np.asarray(f[t], dtype=np.float32) for f in chunk]) for t in chunk[0]}


def calibrate(g: Graph, ctx: CompileContext) -> Graph:
    feeds = ctx.calib_inputs
    amax: dict[str, float] = dict(ctx.amax)  # a calibration table's entries win
    table = set(amax)
    ctx.log(f"calibrating on {len(feeds)} input(s)")
    sums: dict[str, np.ndarray] = {}
    hists: dict[str, AbsHistogram] = {}
    method = getattr(ctx, "calib_method", "minmax")

    def observe(t: str, v: np.ndarray) -> None:
        if not v.size:
            return
        if v.ndim >= 2:  # per-channel mean, for the compiler's bias correction
            rows = v.reshape(v.shape[0], v.shape[1], -1)
            per_sample = rows.sum(axis=2).sum(axis=0).astype(np.float64) / rows.shape[2]
            sums[t] = sums.get(t, 0.0) + per_sample
        if t not in table:
            amax[t] = max(amax.get(t, 0.0), float(v.max()), -float(v.min()))
            hists.setdefault(t, AbsHistogram()).add(v)  # also for the quantization report

    for batch in _batches(feeds, BATCH):
        run_float(g, batch, dtype=np.float32, observe=observe)
    if method != "minmax":
        for t, h in hists.items():
            amax[t] = choose(method, h, amax[t])
    ctx.amax = amax
    ctx.histograms = hists
    ctx.channel_mean = {t: s / max(len(feeds), 1) for t, s in sums.items()}
    return g
