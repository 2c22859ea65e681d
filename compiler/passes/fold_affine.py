"""Fold a per-channel affine (BatchNorm, Scale) that follows a Conv/Gemm into its weights and bias,
in float, before quantization -- as NVDLA's compiler folds BN+Scale."""
from __future__ import annotations

import numpy as np

from compiler.ir import Graph
from compiler.passes import CompileContext


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
        wname, bname = g.fresh(prod.name + "_wfold"), g.fresh(prod.name + "_bfold")
        g.consts[wname] = (w * scale.reshape((k,) + (1,) * (w.ndim - 1))).astype(np.float32)
        g.consts[bname] = (b * scale + bias).astype(np.float32)
        g.shapes[wname], g.shapes[bname] = tuple(w.shape), (k,)
        prod.inputs = [prod.inputs[0], wname, bname]
        out = n.outputs[0]
        g.remove(n)
        prod.outputs = [out]
    g.prune()
    return g
