"""Equalize the ranges of concat inputs, so one int8 scale fits all of them.

The inputs of a channel concat share its buffer and therefore its int8 scale (``quantize.tensor_scales``), the
largest input's range. In DenseNet a block's buffer gathers a dozen conv outputs whose ranges differ by 10x
(its convs have no BN after them: BN-ReLU-Conv reads the concat): the small ones kept 3 or 4 bits, and the
network's cosine against float fell to 0.76.

The fix changes no float result. A concat input ``m`` made by a conv, possibly through ReLU or pooling (which
commute with a positive factor), is multiplied by ``alpha_m = T / range_m`` (T: the largest range of the group)
by scaling that conv's kernels and bias; every reader of ``m`` or of the concats holding it divides it back out
per channel: a BatchNorm/affine reader in its per-channel scale, a conv reader in its weights. Calibrated ranges
and channel means of the scaled tensors are scaled to match, so calibration does not run again. Groups with any
other reader (a pool, an activation, a graph output) are left as they are.
"""
from __future__ import annotations

import numpy as np

from compiler.ir import Graph, Node
from compiler.passes import CompileContext
from compiler.passes.quantize import AVG_POOL_HEADROOM

#: Ops that commute with multiplying their input by a positive factor, between a conv and a concat input.
HOMOGENEOUS = frozenset({"Relu", "MaxPool", "AveragePool", "GlobalAveragePool", "GlobalMaxPool", "Identity"})
#: Largest factor applied (the readers' per-channel multipliers share one shift: keep them within 6 bits).
MAX_ALPHA = 64.0


def _cube(g: Graph, t: str) -> bool:
    s = g.shapes.get(t)
    return s is not None and len(s) == 4 and t not in g.consts


def _components(g: Graph) -> list[list[Node]]:
    """Channel concats grouped by shared inputs (their buffers share one scale)."""
    cats = [n for n in g.nodes if n.op == "Concat" and int(n.attrs.get("axis", 1)) % 4 == 1
            and all(_cube(g, t) for t in n.inputs)]
    groups: list[list[Node]] = []
    for n in cats:
        joined = [grp for grp in groups if any(set(n.inputs) & set(m.inputs) for m in grp)]
        merged = [n] + [m for grp in joined for m in grp]
        groups = [grp for grp in groups if grp not in joined] + [merged]
    return groups


def _chain(g: Graph, m: str) -> list[str] | None:
    """Tensors from a conv's output to ``m`` (inclusive) through homogeneous ops each read only by the next,
    or None."""
    path = [m]
    t = m
    while True:
        p = g.producer(t)
        if p is None:
            return None
        if p.op == "Conv":
            return path
        if p.op not in HOMOGENEOUS:
            return None
        t = p.inputs[0]
        if t in g.outputs or len(g.consumers(t)) != 1:
            return None
        path.insert(0, t)


def _compensable(n: Node, g: Graph) -> bool:
    if n.op == "ChannelAffine":
        return True
    return n.op == "Conv" and n.inputs[1] in g.consts


def equalize_concats(g: Graph, ctx: CompileContext) -> Graph:
    amax = ctx.amax
    changed = 0
    if ctx.fixed_scales:  # a pre-quantized model's scales and int8 weights are kept as they are
        return g
    for group in _components(g):
        outputs = {n.outputs[0] for n in group}
        members = list(dict.fromkeys(t for n in group for t in n.inputs))
        names = {n.name for n in group}
        readers_ok = all(c.name in names or _compensable(c, g) for t in members for c in g.consumers(t)) \
            and all(_compensable(c, g) for t in outputs for c in g.consumers(t)) \
            and not (set(members) | outputs) & set(g.outputs)
        if not readers_ok or any(t not in amax for t in members):
            continue
        top = max(float(amax[t]) for t in members)
        alpha: dict[str, float] = {}
        chains: dict[str, list[str]] = {}
        for m in members:
            chain = _chain(g, m)
            r = float(amax[m])
            if chain is None or r <= 0.0 or any(t in ctx.table_ranges for t in chain):
                continue
            if g.producer(m).op == "AveragePool":  # its range gets the quantizer's wrap headroom: leave room
                r *= AVG_POOL_HEADROOM
            a = min(top / r, MAX_ALPHA)
            if abs(a - 1.0) > 0.05:
                alpha[m] = a
                chains[m] = chain
        if not alpha:
            continue
        for m, a in alpha.items():
            chain = chains[m]
            _scale_conv(g, g.producer(chain[0]), a)
            for t in chain:
                amax[t] = float(amax[t]) * a
                if t in ctx.channel_mean:
                    ctx.channel_mean[t] = np.asarray(ctx.channel_mean[t]) * a
                h = ctx.histograms.get(t)
                if h is not None and getattr(h, "top", 0.0):
                    h.top *= a
        changed += len(alpha)
        for n in group:
            factors = np.concatenate([np.full(g.shapes[t][1], alpha.get(t, 1.0)) for t in n.inputs])
            amax[n.outputs[0]] = max(float(amax[t]) for t in n.inputs)
            if n.outputs[0] in ctx.channel_mean:
                ctx.channel_mean[n.outputs[0]] = np.asarray(ctx.channel_mean[n.outputs[0]]) * factors
            for c in g.consumers(n.outputs[0]):
                _divide_input(g, c, factors)
        for m, a in alpha.items():
            for c in g.consumers(m):
                if c.name not in names:
                    _divide_input(g, c, np.full(g.shapes[m][1], a))
    if changed:
        ctx.log(f"  {changed} concat input(s) rescaled to their concat's range (one int8 scale fits them all)")
    return g


def _new_const(g: Graph, base: str, v: np.ndarray) -> str:
    name = g.fresh(f"{base}_eq")
    g.consts[name] = v
    g.shapes[name] = v.shape
    return name


def _scale_conv(g: Graph, conv: Node, a: float) -> None:
    w = g.consts[conv.inputs[1]]
    conv.inputs[1] = _new_const(g, conv.inputs[1], (w.astype(np.float64) * a).astype(w.dtype))
    if len(conv.inputs) > 2 and conv.inputs[2]:
        b = g.consts[conv.inputs[2]]
        conv.inputs[2] = _new_const(g, conv.inputs[2], (b.astype(np.float64) * a).astype(b.dtype))


def _divide_input(g: Graph, n: Node, d: np.ndarray) -> None:
    """Make ``n`` compute on ``x * d`` (per input channel) what it computed on ``x``."""
    if n.op == "ChannelAffine":
        s = g.consts[n.inputs[1]]
        full = np.broadcast_to(s.astype(np.float64).reshape(-1), d.shape) if s.size == 1 else s.astype(np.float64).reshape(-1)
        n.inputs[1] = _new_const(g, n.inputs[1], (full / d).astype(s.dtype))
        return
    w = g.consts[n.inputs[1]]
    k, cg = w.shape[:2]
    groups = int(n.attrs.get("group", 1))
    per_group = k // groups
    out = w.astype(np.float64).copy()
    for i in range(groups):
        out[i * per_group:(i + 1) * per_group] /= d[i * cg:(i + 1) * cg].reshape(1, cg, *([1] * (w.ndim - 2)))
    n.inputs[1] = _new_const(g, n.inputs[1], out.astype(w.dtype))
