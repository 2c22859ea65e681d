"""Output shapes of the canonical IR ops, one function per op family, each raising a CompileError that
names the node. ``compiler.ops`` binds them to op names; ``compiler.ops.infer_shapes`` runs them."""
from __future__ import annotations

import math
from typing import Callable

import numpy as np

from compiler.ir import Graph, Node, Shape

ShapeFn = Callable[[Graph, Node, list[Shape]], list[Shape]]


def _need_4d(g: Graph, n: Node, s: Shape) -> None:
    if len(s) != 4:
        raise g.error(n, f"expects a 4-D NCHW input, got shape {list(s)}")


def _weights(g: Graph, n: Node, ndim: int) -> np.ndarray:
    """The node's constant weight tensor (input 1) of ``ndim`` dimensions."""
    w = g.consts.get(n.inputs[1])
    if w is None or w.ndim != ndim:
        raise g.error(n, f"weights must be a constant {ndim}-D tensor")
    return w


def conv_out(size: int, k: int, stride: int, pad0: int, pad1: int, dil: int) -> int:
    return (size + pad0 + pad1 - ((k - 1) * dil + 1)) // stride + 1


def conv(g: Graph, n: Node, s: list[Shape]) -> list[Shape]:
    x = s[0]
    _need_4d(g, n, x)
    w = _weights(g, n, 4)
    grp = int(n.attrs.get("group", 1))
    if x[1] != w.shape[1] * grp:
        raise g.error(n, f"input has {x[1]} channels but weights expect {w.shape[1]} x group {grp}")
    if w.shape[0] % grp:
        raise g.error(n, f"{w.shape[0]} outputs are not divisible by group {grp}")
    if len(n.inputs) > 2 and n.inputs[2] and g.consts[n.inputs[2]].size != w.shape[0]:
        raise g.error(n, f"bias has {g.consts[n.inputs[2]].size} values for {w.shape[0]} outputs")
    (sy, sx), (pt, pl, pb, pr), (dy, dx) = n.attrs["strides"], n.attrs["pads"], n.attrs["dilations"]
    oh = conv_out(x[2], w.shape[2], sy, pt, pb, dy)
    ow = conv_out(x[3], w.shape[3], sx, pl, pr, dx)
    if oh < 1 or ow < 1:
        raise g.error(n, f"kernel {w.shape[2]}x{w.shape[3]} does not fit the {x[2]}x{x[3]} input")
    return [(x[0], w.shape[0], oh, ow)]


def conv_transpose(g: Graph, n: Node, s: list[Shape]) -> list[Shape]:
    x = s[0]
    _need_4d(g, n, x)
    w = _weights(g, n, 4)
    grp = int(n.attrs.get("group", 1))
    if x[1] != w.shape[0]:
        raise g.error(n, f"input has {x[1]} channels but weights expect {w.shape[0]}")
    (sy, sx), (pt, pl, pb, pr), (dy, dx) = n.attrs["strides"], n.attrs["pads"], n.attrs["dilations"]
    oph, opw = n.attrs.get("output_padding", (0, 0))
    oh = (x[2] - 1) * sy - pt - pb + (w.shape[2] - 1) * dy + 1 + oph
    ow = (x[3] - 1) * sx - pl - pr + (w.shape[3] - 1) * dx + 1 + opw
    if oh < 1 or ow < 1:
        raise g.error(n, "output would be empty")
    return [(x[0], w.shape[1] * grp, oh, ow)]


def gemm(g: Graph, n: Node, s: list[Shape]) -> list[Shape]:
    x = s[0]
    w = _weights(g, n, 2)
    if len(x) != 2 or x[1] != w.shape[1]:
        raise g.error(n, f"input shape {list(x)} does not match weights {list(w.shape)} (K, C)")
    return [(x[0], w.shape[0])]


def pool(g: Graph, n: Node, s: list[Shape]) -> list[Shape]:
    x = s[0]
    _need_4d(g, n, x)
    (kh, kw), (sy, sx), (pt, pl, pb, pr) = n.attrs["kernel"], n.attrs["strides"], n.attrs["pads"]
    oh, ow = conv_out(x[2], kh, sy, pt, pb, 1), conv_out(x[3], kw, sx, pl, pr, 1)
    if oh < 1 or ow < 1:
        raise g.error(n, f"kernel {kh}x{kw} does not fit the {x[2]}x{x[3]} input")
    return [(x[0], x[1], oh, ow)]


def global_pool(g: Graph, n: Node, s: list[Shape]) -> list[Shape]:
    _need_4d(g, n, s[0])
    return [(s[0][0], s[0][1], 1, 1)]


def same(g: Graph, n: Node, s: list[Shape]) -> list[Shape]:
    if n.op == "LRN":
        _need_4d(g, n, s[0])
    return [s[0]]


def per_channel(g: Graph, n: Node, s: list[Shape]) -> list[Shape]:
    c = s[0][1] if len(s[0]) > 1 else 1
    for t in n.inputs[1:]:
        v = g.consts.get(t)
        if v is None:
            raise g.error(n, f"{t!r} must be a constant")
        if v.size not in (1, c):
            raise g.error(n, f"{t!r} has {v.size} values for {c} channels")
    return [s[0]]


def binary(g: Graph, n: Node, s: list[Shape]) -> list[Shape]:
    if len(s) != 2:
        raise g.error(n, f"takes 2 inputs, got {len(s)}")
    if s[0] != s[1]:
        raise g.error(n, f"input shapes {list(s[0])} and {list(s[1])} differ")
    return [s[0]]


def concat(g: Graph, n: Node, s: list[Shape]) -> list[Shape]:
    axis = int(n.attrs.get("axis", 1)) % len(s[0])
    for t in s[1:]:
        if len(t) != len(s[0]) or any(a != b for i, (a, b) in enumerate(zip(t, s[0])) if i != axis):
            raise g.error(n, f"input shapes {[list(x) for x in s]} differ outside axis {axis}")
    out = list(s[0])
    out[axis] = sum(t[axis] for t in s)
    return [tuple(out)]


def split(g: Graph, n: Node, s: list[Shape]) -> list[Shape]:
    axis = int(n.attrs.get("axis", 1)) % len(s[0])
    sizes = list(n.attrs["split"])
    if sum(sizes) != s[0][axis] or len(sizes) != len(n.outputs):
        raise g.error(n, f"split sizes {sizes} do not cover axis {axis} of {list(s[0])}")
    outs = []
    for k in sizes:
        o = list(s[0])
        o[axis] = k
        outs.append(tuple(o))
    return outs


def slice_(g: Graph, n: Node, s: list[Shape]) -> list[Shape]:
    axis = int(n.attrs.get("axis", 1)) % len(s[0])
    start, end = int(n.attrs["start"]), int(n.attrs["end"])
    if not 0 <= start < end <= s[0][axis]:
        raise g.error(n, f"slice [{start}:{end}) is outside axis {axis} of {list(s[0])}")
    o = list(s[0])
    o[axis] = end - start
    return [tuple(o)]


def flatten(g: Graph, n: Node, s: list[Shape]) -> list[Shape]:
    axis = int(n.attrs.get("axis", 1))
    x = s[0]
    return [(math.prod(x[:axis]), math.prod(x[axis:]))]  # exact: int64 would wrap a huge cube to negative


def transpose(g: Graph, n: Node, s: list[Shape]) -> list[Shape]:
    perm = tuple(int(v) for v in n.attrs["perm"])
    if sorted(perm) != list(range(len(s[0]))):
        raise g.error(n, f"perm {list(perm)} is not a permutation of the {len(s[0])} axes")
    if perm[0] != 0:
        raise g.error(n, f"perm {list(perm)} moves the batch axis; only permutations keeping axis 0 are supported")
    return [tuple(s[0][i] for i in perm)]


def reshape(g: Graph, n: Node, s: list[Shape]) -> list[Shape]:
    shape = tuple(int(v) for v in n.attrs["shape"])
    if math.prod(shape) != math.prod(s[0]):
        raise g.error(n, f"cannot reshape {list(s[0])} to {list(shape)}")
    return [shape]
