"""The op table: every canonical IR op (``compiler.ir``) with its shape function, float kernel and lowering rule.

Adding an op is one ``_define`` line here (plus its functions in ``shapes``, ``floatops.kernels`` and, if an
engine can run it, ``lowering``) and the frontend lines that map framework ops onto it. Shape inference,
the float reference and the lowering pass all look ops up here, so an op cannot be known to one and missing
from another.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

from compiler import lowering, shapes
from compiler.ir import Graph, Node
from compiler.lowering import LowerRule
from compiler.shapes import ShapeFn
from floatops.kernels import KERNELS, Kernel
from golden.registry import Registry


@dataclass(frozen=True)
class OpDef:
    """One canonical op. ``lower`` is None for ops only the CPU runs (Softmax, Identity)."""

    name: str
    shape: ShapeFn
    float_kernel: Kernel
    lower: LowerRule | None = None


OPS: Registry[OpDef] = Registry("IR op")


def _define(names: tuple[str, ...], shape: ShapeFn, lower: LowerRule | None = None) -> None:
    for name in names:
        OPS.add(name, OpDef(name, shape, KERNELS[name], lower))


_define(("Conv",), shapes.conv, lowering.lower_conv)
_define(("ConvTranspose",), shapes.conv_transpose, lowering.lower_conv)
_define(("Gemm",), shapes.gemm, lowering.lower_conv)
_define(("MaxPool", "AveragePool"), shapes.pool, lowering.lower_pool)
_define(("GlobalMaxPool", "GlobalAveragePool"), shapes.global_pool, lowering.lower_pool)
_define(("Relu", "Sigmoid", "Tanh", "Clip", "LeakyRelu"), shapes.same, lowering.lower_sdp)
_define(("PRelu", "ChannelAffine"), shapes.per_channel, lowering.lower_sdp)
_define(("Add", "Mul", "Max"), shapes.binary, lowering.lower_sdp)
_define(("LRN",), shapes.same, lowering.lower_lrn)
_define(("Identity", "Softmax"), shapes.same)
_define(("Concat",), shapes.concat, lowering.lower_concat)
_define(("Split",), shapes.split, lowering.lower_slice)
_define(("Slice",), shapes.slice_, lowering.lower_slice)
_define(("Flatten",), shapes.flatten, lowering.lower_reshape)
_define(("Reshape",), shapes.reshape, lowering.lower_reshape)
_define(("Transpose",), shapes.transpose)  # channel shuffles are folded away by canonicalize; the rest: CPU


def infer_shapes(g: Graph, ops: Iterable[Node] | None = None) -> Graph:
    """Fill ``g.shapes`` for every node output, in order; raise a CompileError naming the node."""
    for c, v in g.consts.items():
        g.shapes[c] = tuple(v.shape)
    for n in ops if ops is not None else g.nodes:
        if n.op not in OPS:
            if n.outputs and all(o in g.shapes for o in n.outputs):
                continue  # engine ops carry their shapes already
            raise g.error(n, f"unsupported op {n.op}")
        missing = [t for t in n.inputs if t and t not in g.shapes]
        if missing:
            raise g.error(n, f"input {missing[0]!r} has no known shape")
        outs = OPS[n.op].shape(g, n, [g.shapes[t] for t in n.inputs if t])
        for o, shp in zip(n.outputs, outs):
            g.shapes[o] = tuple(int(v) for v in shp)
    return g
