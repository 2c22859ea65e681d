"""Fold channel shuffles (Reshape -> Transpose -> Reshape that only reorders channels, as ShuffleNet's exporters
write them) into the convolution that produces the shuffled channels, so no Transpose reaches the CPU.

``y[j] = x[perm[j]]`` is the same as computing ``x`` with its output channels already in ``perm`` order: the
producing conv's kernels (and bias) are reordered, and so are the parameters of the per-channel ops between it
and the shuffle (BN, ReLU, PRelu). A grouped producer becomes a dense conv with block-diagonal kernels in
shuffled order, which is what the engines run for a grouped conv anyway (``lowering.block_diagonal``). When no
such producer exists (the shuffled tensor is a network input, or is read elsewhere), the shuffle becomes a 1x1
conv with a 0/1 permutation kernel: still on the DLA, and exact, since each output is one input times one.
Any other Transpose stays a CPU op.
"""
from __future__ import annotations

import numpy as np

from compiler.ir import Graph, Node
from compiler.lowering import block_diagonal
from compiler.passes import CompileContext

#: Per-channel ops a permutation passes through: their per-channel constant inputs are reordered with it.
CHANNELWISE = ("Relu", "Clip", "LeakyRelu", "Sigmoid", "Tanh", "PRelu", "ChannelAffine")


def channel_permutation(g: Graph, chain: list[Node]) -> np.ndarray | None:
    """``perm`` with out[:, j] = in[:, perm[j]] if ``chain`` (Reshape/Transpose nodes) maps an (N, C, H, W) cube
    onto the same shape by moving whole channels, else None."""
    src, dst = g.shapes[chain[0].inputs[0]], g.shapes[chain[-1].outputs[0]]
    if len(src) != 4 or src != dst or src[0] != 1:
        return None
    _, c, h, w = src
    idx = np.arange(c * h * w, dtype=np.int64).reshape(src)
    for n in chain:
        idx = idx.reshape(n.attrs["shape"]) if n.op == "Reshape" else np.transpose(idx, n.attrs["perm"])
    idx = idx.reshape(c, h * w)
    perm = idx[:, 0] // (h * w)
    if np.any(idx != perm[:, None] * (h * w) + np.arange(h * w)):
        return None
    return perm


def _shuffle_chain(g: Graph, t: Node) -> list[Node] | None:
    """The Reshape -> Transpose -> Reshape chain around Transpose ``t``, each link read only by the next."""
    before, after = g.producer(t.inputs[0]), g.consumers(t.outputs[0])
    if before is None or before.op != "Reshape" or len(after) != 1 or after[0].op != "Reshape":
        return None
    if len(g.consumers(before.outputs[0])) != 1 or {before.outputs[0], t.outputs[0]} & set(g.outputs):
        return None
    return [before, t, after[0]]


def _producer_path(g: Graph, x: str) -> list[Node] | None:
    """The Conv producing ``x`` and the per-channel ops from it to ``x``, each output read only by the next
    (so reordering their channels changes nothing else), or None."""
    path: list[Node] = []
    t = x
    while True:
        if t in g.outputs or len(g.consumers(t)) != 1:
            return None
        n = g.producer(t)
        if n is None:
            return None
        path.insert(0, n)
        if n.op == "Conv":
            return path
        if n.op not in CHANNELWISE:
            return None
        t = n.inputs[0]


def _reordered(g: Graph, name: str, perm: np.ndarray, base: str) -> str:
    """A new constant holding ``name`` with its first axis in ``perm`` order (a scalar stays as it is)."""
    v = g.consts[name]
    if v.size == 1:
        return name
    fresh = g.fresh(base)
    g.consts[fresh] = np.ascontiguousarray(v.reshape(v.shape[0], *v.shape[1:])[perm])
    g.shapes[fresh] = g.consts[fresh].shape
    return fresh


def _permute_path(g: Graph, path: list[Node], perm: np.ndarray) -> None:
    conv = path[0]
    w = g.consts[conv.inputs[1]].astype(np.float32)
    group = int(conv.attrs.get("group", 1))
    if group > 1:
        w = block_diagonal(w, group)
        conv.attrs["group"] = 1
    wname = g.fresh(f"{conv.name}_W_shuffled")
    g.consts[wname] = np.ascontiguousarray(w[perm])
    g.shapes[wname] = g.consts[wname].shape
    conv.inputs[1] = wname
    if len(conv.inputs) > 2 and conv.inputs[2]:
        conv.inputs[2] = _reordered(g, conv.inputs[2], perm, f"{conv.name}_B_shuffled")
    for n in path[1:]:
        n.inputs[1:] = [_reordered(g, t, perm, f"{n.name}_{i}_shuffled") if t in g.consts else t
                        for i, t in enumerate(n.inputs[1:], 1)]


def fold_shuffle(g: Graph, ctx: CompileContext) -> Graph:
    for t in [n for n in g.nodes if n.op == "Transpose"]:
        if t not in g.nodes:
            continue
        chain = _shuffle_chain(g, t)
        perm = channel_permutation(g, chain) if chain else None
        if perm is None:
            continue
        x, y = chain[0].inputs[0], chain[-1].outputs[0]
        path = _producer_path(g, x)  # x's one reader is still the chain's first Reshape
        for n in chain:
            g.remove(n)
        if path is not None:
            _permute_path(g, path, perm)
            last = path[-1]
            last.outputs = [y if o == x else o for o in last.outputs]
            g.shapes[y] = g.shapes[x]
            ctx.log(f"  {t.name}: channel shuffle folded into {path[0].name}'s kernel order")
        else:
            c = g.shapes[x][1]
            wname = g.fresh(f"{t.name}_permutation")
            w = np.zeros((c, c, 1, 1), dtype=np.float32)
            w[np.arange(c), perm] = 1.0
            g.consts[wname] = w
            g.shapes[wname] = w.shape
            g.nodes.append(Node(t.name, "Conv", [x, wname], [y],
                                dict(strides=(1, 1), pads=(0, 0, 0, 0), dilations=(1, 1), group=1)))
            ctx.log(f"  {t.name}: channel shuffle as a 1x1 permutation conv")
    g.toposort()
    g.prune()
    return g
