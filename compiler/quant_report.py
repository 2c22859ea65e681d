"""Per-layer quantization report: where a compiled network's int8 accuracy goes.

For every activation a DLA operation writes, from the calibration histogram of its float values
(``CompileContext.histograms``) and the scale the compiler chose: the range, the share of values clipped by
int8 saturation, and the signal-to-quantization-noise ratio of representing that tensor alone in int8
(rounding noise ``scale^2 / 12`` inside the range, the clipped excess outside). A low SQNR names the layer
whose range (calibration method, outliers) or scale sharing (concats, residual adds) costs accuracy; errors
that propagate from earlier layers are not counted twice.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np

from compiler.ir import Graph
from compiler.passes import CompileContext


@dataclass
class LayerQuant:
    tensor: str
    layer: str
    op: str
    scale: float
    range: float  # 127 * scale
    seen_max: float  # largest |value| in calibration
    clipped: float  # share of values beyond the range
    sqnr_db: float


def _stats(hist, scale: float) -> tuple[float, float, float]:
    """(clipped share, SQNR dB, largest |value|) of a histogram quantized at ``scale``."""
    counts = hist.counts.astype(np.float64)
    total = counts.sum() + hist.zeros  # zeros are exact in int8
    if total == 0 or hist.top == 0.0:
        return 0.0, math.inf, 0.0
    width = hist.top / counts.size
    mid = (np.arange(counts.size) + 0.5) * width
    signal = float((counts * mid ** 2).sum())
    limit = 127.0 * scale
    inside = mid <= limit
    noise = float(counts[inside].sum() * scale ** 2 / 12.0 + (counts[~inside] * (mid[~inside] - limit) ** 2).sum())
    clipped = float(counts[~inside].sum() / total)
    sqnr = math.inf if noise == 0 else 10.0 * math.log10(max(signal, 1e-300) / noise)
    last = int(np.flatnonzero(counts)[-1]) + 1 if counts.any() else 0
    return clipped, sqnr, last * width


def quant_report(g: Graph, ctx: CompileContext) -> list[LayerQuant]:
    """One entry per tensor a DLA operation writes, worst SQNR first."""
    rows = []
    for n in g.nodes:
        if not n.op.startswith("dla."):
            continue
        for t in n.outputs:
            hist = ctx.histograms.get(t)
            if hist is None or t not in ctx.scales:
                continue
            scale = float(ctx.scales[t])
            clipped, sqnr, seen = _stats(hist, scale)
            rows.append(LayerQuant(t, ",".join(n.attrs.get("layers", [n.name])), n.op, scale, 127.0 * scale, seen,
                                   clipped, sqnr))
    rows.sort(key=lambda r: r.sqnr_db)
    return rows


def as_json(rows: list[LayerQuant]) -> list[dict]:
    return [{k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in asdict(r).items()}
            for r in rows]
