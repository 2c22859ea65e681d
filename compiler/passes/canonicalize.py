"""Canonicalize: drop identities, merge chained per-channel affines, make every tensor single-producer."""
from __future__ import annotations

import numpy as np

from compiler.ir import Graph
from compiler.passes import CompileContext


def _vec(g: Graph, name: str, c: int) -> np.ndarray:
    v = g.consts[name].astype(np.float64).ravel()
    return np.full(c, v[0]) if v.size == 1 else v


def canonicalize(g: Graph, ctx: CompileContext) -> Graph:
    g.toposort()
    for n in list(g.nodes):
        if n.op == "Identity" or (n.op == "Reshape" and g.shapes[n.inputs[0]] == g.shapes[n.outputs[0]]):
            src, dst = n.inputs[0], n.outputs[0]
            g.remove(n)
            prod = g.producer(src)
            if dst in g.outputs and prod is not None and src not in g.outputs:
                # Keep the model's output name: the producer now writes ``dst`` directly.
                prod.outputs = [dst if t == src else t for t in prod.outputs]
                g.replace_uses(src, dst)
            else:
                g.replace_uses(dst, src)
    # ChannelAffine(ChannelAffine(x)) -> one ChannelAffine, when the inner result has no other use.
    changed = True
    while changed:
        changed = False
        for n in g.nodes:
            if n.op != "ChannelAffine":
                continue
            prod = g.producer(n.inputs[0])
            if prod is None or prod.op != "ChannelAffine" or len(g.consumers(prod.outputs[0])) != 1 \
                    or prod.outputs[0] in g.outputs:
                continue
            c = g.shapes[n.inputs[0]][1]
            s1, b1 = _vec(g, prod.inputs[1], c), _vec(g, prod.inputs[2], c)
            s2, b2 = _vec(g, n.inputs[1], c), _vec(g, n.inputs[2], c)
            sname, bname = g.fresh(n.name + "_scale"), g.fresh(n.name + "_bias")
            g.consts[sname] = (s1 * s2).astype(np.float32)
            g.consts[bname] = (b1 * s2 + b2).astype(np.float32)
            g.shapes[sname] = g.shapes[bname] = (c,)
            n.inputs = [prod.inputs[0], sname, bname]
            g.remove(prod)
            changed = True
            break
    g.prune()
    return g
