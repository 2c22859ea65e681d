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
                          kernel, padding included, as Caffe does), divisor_pads (AveragePool, optional:
                          the padding the divisor counts, Caffe/ONNX ceil mode with padding; see
                          ``floatops.kernels.average_divisor_pads``)
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
Transpose                 [x]; perm (axis 0, the batch, stays first)
Identity                  [x] (Dropout, Caffe Split)
LRN                       [x]; size, alpha, beta, bias (ONNX: x / (bias + alpha/size * sum x^2)^beta)
Softmax                   [x]; axis
========================  ==========================================================================

Conv and Gemm may carry ``weight_scale`` (K,): a pre-quantized model's per-filter weight scales, kept by the
quantizer. Weights are float32 numpy arrays in ``Graph.consts``; every tensor's shape is in ``Graph.shapes``
after ``infer_shapes``. Engine ops produced by lowering (``dla.*``/``cpu.*``) live in the same graph.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

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
    #: Activation scales a pre-quantized model gives (QuantizeLinear/QLinear* ops): tensor -> real value of one
    #: int8 step. The compiler keeps them instead of calibrating those tensors.
    quant_scales: dict[str, float] = field(default_factory=dict)
    #: Activation ranges (largest magnitude) a model gives that the DLA's symmetric int8 cannot keep as scales
    #: (asymmetric zero points): they replace calibration for those tensors, as a calibration table would.
    range_hints: dict[str, float] = field(default_factory=dict)

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
    if hasattr(v, "dump_form"):  # typed SDP post-ops print as the dicts they once were
        return _brief(v.dump_form())
    if isinstance(v, dict):
        return {k: _brief(x) for k, x in v.items() if not str(k).startswith("_")}
    if isinstance(v, (int, float, str, bool)) or v is None:
        return v
    return f"<{type(v).__name__}>"
