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
    for feed in feeds:
        values = run_float(g, feed, keep=True)
        for t, v in values.items():
            if t in table or t in g.consts:
                continue
            amax[t] = max(amax.get(t, 0.0), float(np.max(np.abs(v))) if np.size(v) else 0.0)
    ctx.amax = amax
    return g
