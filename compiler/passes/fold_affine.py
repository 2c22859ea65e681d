"""Fold a per-channel affine (BatchNorm, Scale) that follows a Conv/Gemm into its weights and bias,
in float, before quantization -- as NVDLA's compiler folds BN+Scale."""
from __future__ import annotations

import numpy as np

from compiler.ir import Graph
from compiler.passes import CompileContext

F32_MAX = float(np.finfo(np.float32).max)


def fold_affine(g: Graph, ctx: CompileContext) -> Graph:
    for n in list(g.nodes):
        if n.op != "ChannelAffine":
            continue
        prod = g.producer(n.inputs[0])
        if prod is None or prod.op not in ("Conv", "Gemm") or len(g.consumers(prod.outputs[0])) != 1 \
                or prod.outputs[0] in g.outputs:
            continue
        w = g.consts[prod.inputs[1]].astype(np.float64)
        k = w.shape[0]
        scale = g.consts[n.inputs[1]].astype(np.float64).ravel()
        bias = g.consts[n.inputs[2]].astype(np.float64).ravel()
        scale = np.full(k, scale[0]) if scale.size == 1 else scale
        bias = np.full(k, bias[0]) if bias.size == 1 else bias
        b = g.consts[prod.inputs[2]].astype(np.float64) if len(prod.inputs) > 2 and prod.inputs[2] else np.zeros(k)
        folded_w, folded_b = w * scale.reshape((k,) + (1,) * (w.ndim - 1)), b * scale + bias
        for what, values in (("weights", folded_w), ("bias", folded_b)):
            if not np.all(np.abs(values) <= F32_MAX):  # also NaN; float32 is what the weights are stored in
                raise g.error(prod, f"folding {n.name!r} into its {what} overflows float32 (|value| up to "
                                    f"{float(np.nanmax(np.abs(values))):.3g})")
        wname, bname = g.fresh(prod.name + "_wfold"), g.fresh(prod.name + "_bfold")
        g.consts[wname] = folded_w.astype(np.float32)
        g.consts[bname] = folded_b.astype(np.float32)
        g.shapes[wname], g.shapes[bname] = tuple(w.shape), (k,)
        prod.inputs = [prod.inputs[0], wname, bname]
        out = n.outputs[0]
        g.remove(n)
        prod.outputs = [out]
    g.prune()
    return g
