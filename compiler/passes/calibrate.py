"""Calibration: run the float graph on the calibration inputs and record each tensor's absolute maximum."""
from __future__ import annotations

import numpy as np

from compiler.float_exec import run_float
from compiler.ir import Graph
from compiler.passes import CompileContext


def calibrate(g: Graph, ctx: CompileContext) -> Graph:
    feeds = ctx.calib_inputs
    amax: dict[str, float] = dict(ctx.amax)  # a calibration table's entries win
    table = set(amax)
    ctx.log(f"calibrating on {len(feeds)} input(s)")
    sums: dict[str, np.ndarray] = {}
    for feed in feeds:
        values = run_float(g, feed, keep=True)
        for t, v in values.items():
            if t in g.consts:
                continue
            if np.ndim(v) >= 2:  # per-channel mean, for the compiler's bias correction
                axes = (0,) + tuple(range(2, np.ndim(v)))
                sums[t] = sums.get(t, 0.0) + np.mean(v, axis=axes)
            if t in table:
                continue
            amax[t] = max(amax.get(t, 0.0), float(np.max(np.abs(v))) if np.size(v) else 0.0)
    ctx.amax = amax
    ctx.channel_mean = {t: s / max(len(feeds), 1) for t, s in sums.items()}
    return g
