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

#: Ops whose input's channel means the quantize pass's bias correction reads (a Gemm reads its Flatten's input).
MEAN_READERS = frozenset({"Conv", "ConvTranspose", "Gemm", "Flatten"})
#: Calibration samples run through the network at once (bigger matmuls; bounded im2col buffers).
BATCH = 8


def _batches(feeds: list[dict[str, np.ndarray]], size: int):
    for i in range(0, len(feeds), size):
        chunk = feeds[i:i + size]
        yield {t: np.concatenate([np.asarray(f[t], dtype=np.float32) for f in chunk]) for t in chunk[0]}


#: Ops whose output holds the input's values (so it takes the input's scale when a model gives none).
_MOVES = frozenset({"Identity", "Flatten", "Reshape", "MaxPool", "GlobalMaxPool", "Transpose", "Slice", "Split"})


def _model_ranges(g: Graph, amax: dict[str, float]) -> bool:
    """A pre-quantized model's scales carried over the ops that move values; True if every activation then
    has a range (no calibration is needed)."""
    for n in g.nodes:
        if n.op in _MOVES and n.inputs[0] in amax:
            for t in n.outputs:
                amax.setdefault(t, amax[n.inputs[0]])
        elif n.op == "Concat" and all(t in amax for t in n.inputs):
            amax.setdefault(n.outputs[0], max(amax[t] for t in n.inputs))
    for n in reversed(g.nodes):  # and back: the float op before a QuantizeLinear-ed Flatten (QOperator graphs)
        if n.op in _MOVES and len(n.outputs) == 1 and n.outputs[0] in amax:
            amax.setdefault(n.inputs[0], amax[n.outputs[0]])
    tensors = set(g.inputs) | {t for n in g.nodes for t in n.outputs}
    return all(t in amax for t in tensors)


def calibrate(g: Graph, ctx: CompileContext) -> Graph:
    feeds = ctx.calib_inputs
    amax: dict[str, float] = dict(ctx.amax)  # a calibration table's entries win
    table = set(amax)
    ctx.table_ranges = table
    if ctx.fixed_scales:
        if _model_ranges(g, amax) and not ctx.keep_histograms:
            ctx.log(f"scales from the model for all {len(amax)} tensors: no calibration")
            ctx.amax, ctx.channel_mean, ctx.histograms = amax, {}, {}
            ctx.calibrated = dict(amax)
            return g
        table = set(amax)
        ctx.log(f"scales from the model for {len(table)} tensors; calibrating the others")
    ctx.log(f"calibrating on {len(feeds)} input(s)")
    sums: dict[str, np.ndarray] = {}
    hists: dict[str, AbsHistogram] = {}
    method = getattr(ctx, "calib_method", "minmax")
    histogram = method != "minmax" or ctx.keep_histograms
    mean_wanted = {n.inputs[0] for n in g.nodes if n.op in MEAN_READERS and n.inputs}
    nonnegative = {t for n in g.nodes if n.op == "Relu" for t in n.outputs}  # (their max is their range)

    def observe(t: str, v: np.ndarray) -> None:
        if not v.size:
            return
        if v.ndim >= 2 and t in mean_wanted:  # per-channel mean, for the compiler's bias correction
            axes = (0, *range(2, v.ndim))  # in any memory layout: float_exec's convs leave theirs channels-last
            per_sample = v.sum(axis=axes, dtype=np.float64) / (v[0, 0].size or 1)
            sums[t] = sums.get(t, 0.0) + per_sample
        if t in table:
            return
        if histogram:  # (also the quantization report's)
            amax[t] = max(amax.get(t, 0.0), hists.setdefault(t, AbsHistogram()).add(v))
        elif t in nonnegative:
            amax[t] = max(amax.get(t, 0.0), float(v.max()))
        else:
            amax[t] = max(amax.get(t, 0.0), float(v.max()), -float(v.min()))

    for batch in _batches(feeds, BATCH):
        run_float(g, batch, dtype=np.float32, observe=observe)
    if method != "minmax":
        for t, h in hists.items():
            amax[t] = choose(method, h, amax[t])
    ctx.amax = amax
    ctx.calibrated = dict(amax)
    ctx.histograms = hists
    ctx.channel_mean = {t: s / max(len(feeds), 1) for t, s in sums.items()}
    return g
