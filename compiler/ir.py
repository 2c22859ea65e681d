"""The compiler's graph IR: a canonical, framework-neutral float graph that both frontends produce.

Canonical ops and their conventions (frontends must emit exactly these; everything is float NCHW):

========================  ==========================================================================
op                        inputs / attrs
========================  ==========================================================================
Conv                      [x, W (K, C/group, R, S), B (K)?]; strides (sy, sx), pads (t, l, b, r),
                          dilations (dy, dx), group
ConvTranspose             [x, W (C, K/group, R, S), B (K)?]; strides, pads (t, l, b, r), dilations,
                          group, output_padding (h, w)
Gemm                      [x (N, C), W (K, C), B (K)?]; y = x @ W.T + B (alpha/beta/transpose folded)
MaxPool, AveragePool      [x]; kernel (kh, kw), strides, pads (t, l, b, r) (Caffe's ceil-mode extra rows
                          already added to b/r), count_include_pad (AveragePool: divide by the whole
                          kernel, padding included, as Caffe does)
GlobalMaxPool,            [x]
GlobalAveragePool
Relu, Sigmoid, Tanh       [x]
Clip                      [x]; min, max (float or None)
PRelu                     [x, slope (C,) or (1,)]
LeakyRelu                 [x]; alpha
ChannelAffine             [x, scale (C,), bias (C,)]: y = x * scale[c] + bias[c] (BatchNorm, Scale, Bias)
Add, Mul, Max             [a, b] of the same shape
Concat                    [x0, x1, ...]; axis
Split                     [x] -> several outputs; axis, split (sizes)
Slice                     [x]; axis, start, end (one output)
Flatten                   [x]; axis (output is 2-D)
Reshape                   [x]; shape (concrete, same element count)
Identity                  [x] (Dropout, Caffe Split)
LRN                       [x]; size, alpha, beta, bias (ONNX: x / (bias + alpha/size * sum x^2)^beta)
Softmax                   [x]; axis
========================  ==========================================================================

Weights are float32 numpy arrays in ``Graph.consts``; every tensor's shape is in ``Graph.shapes``
after ``infer_shapes``. Engine ops produced by lowering (``dla.*``/``cpu.*``) live in the same graph.
"""
from __future__ import annotations

import copy
import math
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

import numpy as np

from compiler.errors import CompileError, node_where

Shape = tuple[int, ...]


@dataclass
class Node:
    name: str
    op: str
    inputs: list[str]
    outputs: list[str]
    attrs: dict[str, Any] = field(default_factory=dict)

    def __repr__(self) -> str:
        return f"{self.op}({self.name}: {', '.join(self.inputs)} -> {', '.join(self.outputs)})"


@dataclass
class Graph:
    name: str = "net"
    source: str = ""  # the model file, for error messages
    inputs: list[str] = field(default_factory=list)
    outputs: list[str] = field(default_factory=list)
    nodes: list[Node] = field(default_factory=list)
    shapes: dict[str, Shape] = field(default_factory=dict)
    consts: dict[str, np.ndarray] = field(default_factory=dict)

    # ---- queries ----------------------------------------------------------------------------------
    def where(self, node: Node) -> str:
        return node_where(self.source, node.name, node.op)

    def error(self, node: Node, msg: str) -> CompileError:
        return CompileError(self.where(node), msg)

    def producer(self, tensor: str) -> Node | None:
        for n in self.nodes:
            if tensor in n.outputs:
                return n
        return None

    def consumers(self, tensor: str) -> list[Node]:
        return [n for n in self.nodes if tensor in n.inputs]

    def is_const(self, tensor: str) -> bool:
        return tensor in self.consts

    def fresh(self, base: str) -> str:
        """A tensor/node name not used yet."""
        used = set(self.shapes) | set(self.consts) | {n.name for n in self.nodes}
        for n in self.nodes:
            used.update(n.outputs)
        if base not in used:
            return base
        i = 1
        while f"{base}_{i}" in used:
            i += 1
        return f"{base}_{i}"

    def copy(self) -> "Graph":
        return copy.deepcopy(self)

    # ---- edits --------------------------------------------------------------------------------------
    def replace_uses(self, old: str, new: str) -> None:
        """Point every consumer (and the graph outputs) of ``old`` at ``new``."""
        for n in self.nodes:
            n.inputs = [new if t == old else t for t in n.inputs]
        self.outputs = [new if t == old else t for t in self.outputs]

    def remove(self, node: Node) -> None:
        self.nodes.remove(node)

    def prune(self) -> None:
        """Drop nodes whose outputs nobody uses, and unused constants."""
        changed = True
        while changed:
            changed = False
            live = set(self.outputs)
            for n in self.nodes:
                live.update(n.inputs)
            for n in list(self.nodes):
                if not any(o in live for o in n.outputs):
                    self.nodes.remove(n)
                    changed = True
        used = {t for n in self.nodes for t in n.inputs}
        for c in list(self.consts):
            if c not in used:
                del self.consts[c]

    def toposort(self) -> None:
        """Order nodes so every input is produced before use; raise naming a node on a cycle."""
        ready = set(self.inputs) | set(self.consts)
        pending = list(self.nodes)
        ordered: list[Node] = []
        while pending:
            progress = False
            for n in list(pending):
                if all(t in ready or t == "" for t in n.inputs):
                    ordered.append(n)
                    ready.update(n.outputs)
                    pending.remove(n)
                    progress = True
            if not progress:
                n = pending[0]
                missing = [t for t in n.inputs if t not in ready]
                raise self.error(n, f"input {missing[0]!r} is never produced (or the graph has a cycle)")
        self.nodes = ordered

    def dump(self) -> str:
        """Readable text form, one node per line, for ``--dump-passes``."""
        lines = [f"graph {self.name} inputs={self.inputs} outputs={self.outputs}"]
        for t in self.inputs:
            lines.append(f"  input {t}: {self.shapes.get(t)}")
        for n in self.nodes:
            outs = ", ".join(f"{o}{list(self.shapes.get(o, ()))}" for o in n.outputs)
            ins = ", ".join(f"{i}{list(self.consts[i].shape)}*" if i in self.consts else i for i in n.inputs)
            attrs = {k: _brief(v) for k, v in n.attrs.items() if not k.startswith("_") and k != "layers"}
            lines.append(f"  {n.name}: {n.op}({ins}) -> {outs} {attrs if attrs else ''}".rstrip())
        return "\n".join(lines)


def _brief(v: Any) -> Any:
    """Short text form of an attribute for dumps: arrays and parameter objects by shape/type only."""
    if isinstance(v, np.ndarray):
        return f"<{v.dtype}{list(v.shape)}>"
    if isinstance(v, (list, tuple)):
        return type(v)(_brief(x) for x in v)
    if isinstance(v, dict):
        return {k: _brief(x) for k, x in v.items() if not str(k).startswith("_")}
    if isinstance(v, (int, float, str, bool)) or v is None:
        return v
    return f"<{type(v).__name__}>"


# ---- shape inference ----------------------------------------------------------------------------------
ShapeFn = Callable[[Graph, Node, list[Shape]], list[Shape]]
SHAPE_FNS: dict[str, ShapeFn] = {}


def shape_fn(*ops: str) -> Callable[[ShapeFn], ShapeFn]:
    def deco(fn: ShapeFn) -> ShapeFn:
        for op in ops:
            SHAPE_FNS[op] = fn
        return fn

    return deco


def _need_4d(g: Graph, n: Node, s: Shape) -> None:
    if len(s) != 4:
        raise g.error(n, f"expects a 4-D NCHW input, got shape {list(s)}")


def conv_out(size: int, k: int, stride: int, pad0: int, pad1: int, dil: int) -> int:
    return (size + pad0 + pad1 - ((k - 1) * dil + 1)) // stride + 1


@shape_fn("Conv")
def _conv(g: Graph, n: Node, s: list[Shape]) -> list[Shape]:
    x = s[0]
    _need_4d(g, n, x)
    w = g.consts.get(n.inputs[1])
    if w is None or w.ndim != 4:
        raise g.error(n, "weights must be a constant 4-D tensor")
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


@shape_fn("ConvTranspose")
def _deconv(g: Graph, n: Node, s: list[Shape]) -> list[Shape]:
    x = s[0]
    _need_4d(g, n, x)
    w = g.consts.get(n.inputs[1])
    if w is None or w.ndim != 4:
        raise g.error(n, "weights must be a constant 4-D tensor")
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


@shape_fn("Gemm")
def _gemm(g: Graph, n: Node, s: list[Shape]) -> list[Shape]:
    x = s[0]
    w = g.consts.get(n.inputs[1])
    if w is None or w.ndim != 2:
        raise g.error(n, "weights must be a constant 2-D tensor")
    if len(x) != 2 or x[1] != w.shape[1]:
        raise g.error(n, f"input shape {list(x)} does not match weights {list(w.shape)} (K, C)")
    return [(x[0], w.shape[0])]


@shape_fn("MaxPool", "AveragePool")
def _pool(g: Graph, n: Node, s: list[Shape]) -> list[Shape]:
    x = s[0]
    _need_4d(g, n, x)
    (kh, kw), (sy, sx), (pt, pl, pb, pr) = n.attrs["kernel"], n.attrs["strides"], n.attrs["pads"]
    oh, ow = conv_out(x[2], kh, sy, pt, pb, 1), conv_out(x[3], kw, sx, pl, pr, 1)
    if oh < 1 or ow < 1:
        raise g.error(n, f"kernel {kh}x{kw} does not fit the {x[2]}x{x[3]} input")
    return [(x[0], x[1], oh, ow)]


@shape_fn("GlobalMaxPool", "GlobalAveragePool")
def _gpool(g: Graph, n: Node, s: list[Shape]) -> list[Shape]:
    _need_4d(g, n, s[0])
    return [(s[0][0], s[0][1], 1, 1)]


@shape_fn("Relu", "Sigmoid", "Tanh", "Clip", "LeakyRelu", "Identity", "Softmax", "LRN")
def _same(g: Graph, n: Node, s: list[Shape]) -> list[Shape]:
    if n.op == "LRN":
        _need_4d(g, n, s[0])
    return [s[0]]


@shape_fn("PRelu", "ChannelAffine")
def _per_channel(g: Graph, n: Node, s: list[Shape]) -> list[Shape]:
    c = s[0][1] if len(s[0]) > 1 else 1
    for t in n.inputs[1:]:
        v = g.consts.get(t)
        if v is None:
            raise g.error(n, f"{t!r} must be a constant")
        if v.size not in (1, c):
            raise g.error(n, f"{t!r} has {v.size} values for {c} channels")
    return [s[0]]


@shape_fn("Add", "Mul", "Max")
def _binary(g: Graph, n: Node, s: list[Shape]) -> list[Shape]:
    if len(s) != 2:
        raise g.error(n, f"takes 2 inputs, got {len(s)}")
    if s[0] != s[1]:
        raise g.error(n, f"input shapes {list(s[0])} and {list(s[1])} differ")
    return [s[0]]


@shape_fn("Concat")
def _concat(g: Graph, n: Node, s: list[Shape]) -> list[Shape]:
    axis = int(n.attrs.get("axis", 1)) % len(s[0])
    for t in s[1:]:
        if len(t) != len(s[0]) or any(a != b for i, (a, b) in enumerate(zip(t, s[0])) if i != axis):
            raise g.error(n, f"input shapes {[list(x) for x in s]} differ outside axis {axis}")
    out = list(s[0])
    out[axis] = sum(t[axis] for t in s)
    return [tuple(out)]


@shape_fn("Split")
def _split(g: Graph, n: Node, s: list[Shape]) -> list[Shape]:
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


@shape_fn("Slice")
def _slice(g: Graph, n: Node, s: list[Shape]) -> list[Shape]:
    axis = int(n.attrs.get("axis", 1)) % len(s[0])
    start, end = int(n.attrs["start"]), int(n.attrs["end"])
    if not 0 <= start < end <= s[0][axis]:
        raise g.error(n, f"slice [{start}:{end}) is outside axis {axis} of {list(s[0])}")
    o = list(s[0])
    o[axis] = end - start
    return [tuple(o)]


@shape_fn("Flatten")
def _flatten(g: Graph, n: Node, s: list[Shape]) -> list[Shape]:
    axis = int(n.attrs.get("axis", 1))
    x = s[0]
    return [(math.prod(x[:axis]), math.prod(x[axis:]))]  # exact: int64 would wrap a huge cube to negative


@shape_fn("Reshape")
def _reshape(g: Graph, n: Node, s: list[Shape]) -> list[Shape]:
    shape = tuple(int(v) for v in n.attrs["shape"])
    if math.prod(shape) != math.prod(s[0]):
        raise g.error(n, f"cannot reshape {list(s[0])} to {list(shape)}")
    return [shape]


def infer_shapes(g: Graph, ops: Iterable[Node] | None = None) -> Graph:
    """Fill ``g.shapes`` for every node output, in order; raise a CompileError naming the node."""
    for c, v in g.consts.items():
        g.shapes[c] = tuple(v.shape)
    for n in ops if ops is not None else g.nodes:
        fn = SHAPE_FNS.get(n.op)
        if fn is None:
            if n.outputs and all(o in g.shapes for o in n.outputs):
                continue  # engine ops carry their shapes already
            raise g.error(n, f"unsupported op {n.op}")
        missing = [t for t in n.inputs if t and t not in g.shapes]
        if missing:
            raise g.error(n, f"input {missing[0]!r} has no known shape")
        outs = fn(g, n, [g.shapes[t] for t in n.inputs if t])
        for o, shp in zip(n.outputs, outs):
            g.shapes[o] = tuple(int(v) for v in shp)
    return g
