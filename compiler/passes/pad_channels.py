"""Pad the channels of concat inputs to whole memory atoms, so every channel concat can be a view.

A concat is zero-copy only when each input starts on a memory atom of the output (``lowering.concat_families``):
the producer then writes its surfaces straight into the shared buffer. Inception v1's 4a concat (192 + 208 + 48
+ 64 channels) and ShuffleNet's shortcut concats (24 + 216, 240 + 240) do not on configs with 32-channel atoms,
and used to run on the CPU. Here such a concat's inputs get physical channel counts rounded up to the atom: the
real channels keep their order, the extra ones ("holes") are zero.

A tensor's layout (real channel -> physical channel) is shared by every tensor reached through per-channel ops
(ReLU, pooling, affine, element-wise ops of equal shapes): those form one *class*. A class is produced by convs,
which place their kernels at the physical channels (zero kernels and bias in the holes), or by a concat, whose
layout is its inputs' laid end to end. Convs reading a class take zero weights at its holes; per-channel
constants get zeros there. Holes thus hold zeros throughout (calibration ranges are unchanged) and are never
read as data. A class the rewrite cannot reach (a graph input or output, or a reader that is not a conv,
per-channel op or concat) keeps its layout, and so do the concats that would need it: those stay as they were.
"""
from __future__ import annotations

import numpy as np

from compiler.ir import Graph, Node
from compiler.lowering import block_diagonal
from compiler.passes import CompileContext
from compiler.unionfind import UnionFind

#: Ops whose output has the channel layout of their activation input(s).
UNARY = frozenset({"Relu", "Clip", "LeakyRelu", "Sigmoid", "Tanh", "PRelu", "ChannelAffine", "MaxPool",
                   "AveragePool", "GlobalAveragePool", "GlobalMaxPool", "Identity"})
BINARY = frozenset({"Add", "Mul", "Max"})


def _is_cube(g: Graph, t: str) -> bool:
    s = g.shapes.get(t)
    return s is not None and len(s) == 4 and s[0] == 1 and t not in g.consts


def _channel_concat(g: Graph, n: Node) -> bool:
    return n.op == "Concat" and int(n.attrs.get("axis", 1)) % 4 == 1 and all(_is_cube(g, t) for t in n.inputs) \
        and len(set(n.inputs)) == len(n.inputs)


def _const_channel_ok(g: Graph, n: Node, t: str, c: int) -> bool:
    """A constant operand of a per-channel op that the rewrite can widen (a scalar, or one value per channel)."""
    v = g.consts[t]
    if v.size == 1:
        return True
    if n.op in ("ChannelAffine", "PRelu"):
        return v.size == c
    return v.ndim >= 3 and v.shape[-3] == c and v.size == c  # (C, 1, 1) or (1, C, 1, 1)


def _classes(g: Graph) -> tuple[UnionFind, set[str]]:
    """The classes, and the roots of those that must keep their layout (pinned)."""
    uf = UnionFind()
    pinned: set[str] = set()
    for n in g.nodes:
        acts = [t for t in n.inputs if t and t not in g.consts]
        if n.op in UNARY | BINARY and n.outputs and _is_cube(g, n.outputs[0]) \
                and all(_is_cube(g, t) and (g.shapes[t] == g.shapes[n.outputs[0]] if n.op in BINARY
                                            else g.shapes[t][1] == g.shapes[n.outputs[0]][1]) for t in acts) \
                and all(_const_channel_ok(g, n, t, g.shapes[n.outputs[0]][1]) for t in n.inputs if t in g.consts):
            for t in acts:
                uf.union(t, n.outputs[0])
        elif not (n.op == "Conv" or _channel_concat(g, n) or _flatten_to_fc(g, n)):
            pinned.update(t for t in acts + list(n.outputs) if _is_cube(g, t))  # reads or writes real channels
    pinned.update(t for t in list(g.inputs) + list(g.outputs) if _is_cube(g, t))
    return uf, {uf.find(t) for t in pinned}


def _flatten_to_fc(g: Graph, n: Node) -> bool:
    """A Flatten of a cube read only by fully connected layers with constant weights (their weight columns
    can follow the cube's physical channels)."""
    if n.op != "Flatten" or not _is_cube(g, n.inputs[0]) or int(n.attrs.get("axis", 1)) != 1 \
            or n.outputs[0] in g.outputs:
        return False
    readers = g.consumers(n.outputs[0])
    return bool(readers) and all(r.op == "Gemm" and r.inputs[0] == n.outputs[0] and r.inputs[1] in g.consts
                                 and len(g.consumers(r.inputs[1])) == 1 for r in readers)


Layout = tuple[np.ndarray, int]  # physical channel of each real channel, physical channel count


def _layouts(g: Graph, uf: UnionFind, pinned: set[str], fix: list[Node], atom: int) -> dict[str, Layout] | Node:
    """Class root -> layout when every input of the concats in ``fix`` (topological order) is padded to whole
    atoms; or the first concat whose padding would reach a pinned class or conflict with another concat."""
    layouts: dict[str, Layout] = {}
    for n in fix:
        parts, off = [], 0
        for t in n.inputs:
            root = uf.find(t)
            idx, phys = layouts.get(root, (np.arange(g.shapes[t][1], dtype=np.int64), g.shapes[t][1]))
            phys = -(-phys // atom) * atom
            if root in pinned and phys != g.shapes[t][1]:
                return n
            layouts[root] = (idx, phys)
            parts.append(idx + off)
            off += phys
        root = uf.find(n.outputs[0])
        idx = np.concatenate(parts)
        if root in layouts and not np.array_equal(layouts[root][0], idx):
            return n  # another concat of the same class lays it out differently
        if root in pinned and off != idx.size:
            return n
        layouts[root] = (idx, off)
    return {root: lo for root, lo in layouts.items() if lo[1] != lo[0].size}


def pad_channels(g: Graph, ctx: CompileContext) -> Graph:
    atom = ctx.atom
    cats = [n for n in g.nodes if _channel_concat(g, n)]
    fix = [n for n in cats if np.any(np.cumsum([g.shapes[t][1] for t in n.inputs])[:-1] % atom)]
    if not fix:
        return g
    uf, pinned = _classes(g)

    def closure(seed: list[Node]) -> list[Node]:
        """``seed`` and every concat sharing a class with it, transitively: a concat reading or writing a class
        being padded lays its inputs out too, so they are padded together or not at all."""
        group = list(seed)
        while True:
            touched = {uf.find(t) for n in group for t in (*n.inputs, *n.outputs)}
            grown = [n for n in cats if n in group or any(uf.find(t) in touched for t in (*n.inputs, *n.outputs))]
            if len(grown) == len(group):
                return grown
            group = grown

    while fix:
        fix = closure(fix)
        result = _layouts(g, uf, pinned, fix, atom)
        if isinstance(result, dict):
            break
        dropped = closure([result])
        ctx.log(f"  {', '.join(n.name for n in dropped if n in fix)}: concat inputs stay unpadded (a graph input or "
                f"output, or a reader other than a conv, per-channel op, concat or FC, sees the channels of "
                f"{result.name}'s tensors); unaligned ones stay copies")
        cats = [n for n in cats if n not in dropped]
        fix = [n for n in fix if n not in dropped]
    if not fix or not result:
        return g
    _rewrite(g, uf, result)
    ctx.log(f"  {len(fix)} concat(s): inputs padded to whole {atom}-channel atoms "
            f"({sum(p - idx.size for idx, p in result.values())} zero channels in {len(result)} tensor classes)")
    return g


def _rewrite(g: Graph, uf: UnionFind, layouts: dict[str, Layout]) -> None:
    def layout(t: str) -> Layout | None:
        if not t or t in g.consts or not _is_cube(g, t):
            return None
        return layouts.get(uf.find(t))

    new_shapes: dict[str, tuple] = {}
    for n in g.nodes:
        if n.op == "Conv":
            _widen_conv(g, n, layout(n.inputs[0]), layout(n.outputs[0]))
        elif n.op == "Flatten" and (lo := layout(n.inputs[0])) is not None:
            _widen_fc(g, n, lo)
        elif n.op in UNARY | BINARY and (lo := layout(n.outputs[0])) is not None:
            for i, t in enumerate(n.inputs):
                if t in g.consts and g.consts[t].size > 1:
                    n.inputs[i] = _widen_const(g, t, lo)
        for t in (*n.inputs, *n.outputs):
            if (lo := layout(t)) is not None:
                s = g.shapes[t]
                new_shapes[t] = (s[0], lo[1], s[2], s[3])
    g.shapes.update(new_shapes)


def _widen_const(g: Graph, name: str, lo: Layout) -> str:
    """A per-channel constant with zeros at the holes (new name: constants may be shared)."""
    idx, phys = lo
    v = g.consts[name]
    out = np.zeros(phys, dtype=v.dtype)
    out[idx] = v.reshape(-1)
    shape = list(v.shape)
    if v.ndim >= 3:
        shape[-3] = phys
    else:
        shape = [phys]
    fresh = g.fresh(f"{name}_padded")
    g.consts[fresh] = out.reshape(shape)
    g.shapes[fresh] = tuple(shape)
    return fresh


def _widen_conv(g: Graph, n: Node, src: Layout | None, dst: Layout | None) -> None:
    """Kernels (and bias) at the output's physical channels, weights at the input's physical channels; a grouped
    conv becomes the dense block-diagonal conv the engines run for it anyway."""
    if src is None and dst is None:
        return
    w = g.consts[n.inputs[1]]
    group = int(n.attrs.get("group", 1))
    if group > 1:
        w = block_diagonal(w, group)
        n.attrs["group"] = 1
    if dst is not None:
        idx, phys = dst
        out = np.zeros((phys, *w.shape[1:]), dtype=w.dtype)
        out[idx] = w
        w = out
        if "weight_scale" in n.attrs:  # a pre-quantized model's per-filter scales. The zero kernels take the
            # real ones' smallest: any scale computes their 0, but one far from the others' would set the SDP
            # multipliers' shared shift and cost the real channels their precision.
            real = np.asarray(n.attrs["weight_scale"], dtype=np.float64)
            scale = np.full(phys, float(real.min()) if real.size else 1.0)
            scale[idx] = real
            n.attrs["weight_scale"] = scale
        if len(n.inputs) > 2 and n.inputs[2]:
            n.inputs[2] = _widen_const(g, n.inputs[2], dst)
    if src is not None:
        idx, phys = src
        out = np.zeros((w.shape[0], phys, *w.shape[2:]), dtype=w.dtype)
        out[:, idx] = w
        w = out
    name = g.fresh(f"{n.inputs[1]}_padded")
    g.consts[name], g.shapes[name] = w, w.shape
    n.inputs[1] = name


def _widen_fc(g: Graph, flat: Node, lo: Layout) -> None:
    """The Flatten of a padded cube: its readers' weight columns move to the physical (c, h, w) positions."""
    idx, phys = lo
    _, c, h, w = g.shapes[flat.inputs[0]]
    for r in g.consumers(flat.outputs[0]):
        wt = g.consts[r.inputs[1]]
        cube = wt.reshape(wt.shape[0], c, h, w)
        out = np.zeros((wt.shape[0], phys, h, w), dtype=wt.dtype)
        out[:, idx] = cube
        name = g.fresh(f"{r.inputs[1]}_padded")
        g.consts[name] = out.reshape(wt.shape[0], phys * h * w)
        g.shapes[name] = g.consts[name].shape
        r.inputs[1] = name
    g.shapes[flat.outputs[0]] = (g.shapes[flat.outputs[0]][0], phys * h * w)
