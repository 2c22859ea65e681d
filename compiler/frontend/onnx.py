"""ONNX frontend: an ONNX model -> the canonical float IR of ``compiler.ir`` (see its docstring for the ops).

One converter per ONNX op type in ``_CONVERTERS``. Shapes are inferred node by node while converting, because
several ONNX ops only become canonical with the input shape known (Squeeze/Unsqueeze -> Reshape, Reshape's
0/-1, Slice's clamped ends, SAME padding, ceil-mode pooling). Nodes whose inputs are all constants (including
``Shape`` of a tensor whose shape is now static) are folded with ONNX's reference evaluator, so the shape
arithmetic exporters emit around Reshape/Flatten never reaches the IR.

Every failure is a one-line ``CompileError`` naming the file and, for node problems, the node and its type.
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import helper, numpy_helper

from compiler.errors import CompileError, node_where
from compiler.frontend.weights import non_finite
from compiler.ir import Graph, Node, Shape
from compiler.ops import infer_shapes
from dlaio.inputs import not_a_file
from golden.budget import MemoryBudgetError, check_size
from compiler.frontend.onnx_quant import MS_OPS, fold_constant, record_weight_scales  # (registers QDQ/QOperator)
from compiler.frontend.onnx_registry import CONVERTERS, attrs, converts

_FLOAT_TYPES = {onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16, onnx.TensorProto.DOUBLE, onnx.TensorProto.BFLOAT16}
# Ops never folded even with constant inputs: their value is not a function of the inputs.
_UNFOLDABLE = {"RandomNormalLike", "RandomUniformLike", "Bernoulli", "Multinomial"}

#: The newest default opset a model may import: the newest the installed onnx defines. Its checker, shape
#: inference and reference evaluator (constant folding) know no later semantics, and an op may change
#: meaning in any opset, so a model claiming a newer one (a typo, a future exporter) is refused up front.
NEWEST_OPSET = onnx.defs.onnx_opset_version()

_CONVERTERS = CONVERTERS
_converts = converts
_attrs = attrs


def _one_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return (text[0] if text else type(e).__name__)[:200]


def load(model: Path | str | onnx.ModelProto, *, source: str | None = None) -> Graph:
    """Convert an ONNX file or in-memory ModelProto to a shape-inferred canonical ``Graph``.

    ``source`` names the model in errors; it defaults to the file path (or the graph's name in memory).
    """
    if isinstance(model, onnx.ModelProto):
        proto = model
        src = source or (model.graph.name or "onnx-model")
        name = model.graph.name or "net"
        _precheck(proto, src)
        _check(model, src)
    else:
        path = Path(model)
        src = source or str(path)
        name = path.stem
        why = not_a_file(path)
        if why:
            raise CompileError(src, why)
        # The checker reads the file itself (serializing a 100 MB proto back costs more) and runs before
        # Python loads it, so the two copies of a big model are never in memory at once (VGG-19: 1.7 -> 1.2 GB).
        # Its verdict is kept until the file has been read: unreadable files and too-new opsets are named first.
        try:
            _check(str(path), src)
            invalid = None
        except CompileError as e:
            invalid = e
        try:
            proto = onnx.load(str(path))
        except Exception as e:  # DecodeError, truncated external data, ...
            raise CompileError(src, f"not a readable ONNX model ({type(e).__name__}: {_one_line(e)})") from None
        _precheck(proto, src)
        if invalid is not None:
            raise invalid
    return _Importer(proto, src, name).run()


def _precheck(proto: onnx.ModelProto, src: str) -> None:
    """What the ONNX checker would report less clearly: no graph, an opset newer than ours."""
    if not proto.HasField("graph") or not proto.graph.node or not proto.graph.output:
        raise CompileError(src, "not an ONNX model (no graph with nodes and outputs)")
    opset = _default_opset(proto)
    if opset > NEWEST_OPSET:
        raise CompileError(src, f"opset {opset} is newer than the newest this compiler supports ({NEWEST_OPSET}); "
                                f"export the model with opset {NEWEST_OPSET} or older")


def _check(checkable: onnx.ModelProto | str, src: str) -> None:
    try:
        onnx.checker.check_model(checkable)
    except Exception as e:  # ValidationError
        raise CompileError(src, f"invalid ONNX model: {_one_line(e)}") from None


def _default_opset(model: onnx.ModelProto) -> int:
    """The version of the default (ai.onnx) operator set the model imports; 1 when it names none."""
    return next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 1)


def _pair(v: Any, default: tuple[int, int]) -> tuple[int, int]:
    if v is None:
        return default
    v = [int(i) for i in v]
    return (v[0], v[1]) if len(v) == 2 else (v[0], v[0])


def channel_vector(c: np.ndarray, xshape: Shape) -> np.ndarray | None:
    """``c`` as a (C,) vector if ONNX broadcasting applies it per channel (axis 1) or as a scalar, else None.

    Accepts (C,1,1), (1,C,1,1), (1,), () ... against an NCHW x and (C,), (1,C) against an (N, C) x.
    """
    rank = len(xshape)
    if rank < 2 or c.ndim > rank:
        return None
    full = (1,) * (rank - c.ndim) + tuple(c.shape)
    if any(d != 1 and not (i == 1 and d == xshape[1]) for i, d in enumerate(full)):
        return None
    return np.broadcast_to(c.reshape(-1).astype(np.float64), (xshape[1],)).copy()


class _Importer:
    """State of one conversion: the IR graph being built and the raw (any dtype) constants seen so far."""

    def __init__(self, model: onnx.ModelProto, source: str, name: str) -> None:
        self.model = model
        self.opset = _default_opset(model)
        self.g = Graph(name=name, source=source)
        self.raw: dict[str, np.ndarray] = {}
        #: Per-output-channel scales of a pre-quantized model's int8 weights, by float constant name.
        self.weight_scales: dict[str, np.ndarray] = {}
        self.node_names: set[str] = set()
        gr = model.graph
        self.taken: set[str] = {t.name for t in gr.initializer} | {t.name for t in gr.input}
        self.taken |= {t.name for t in gr.output} | {t.name for t in gr.value_info}
        for n in gr.node:
            self.taken.update(n.input)
            self.taken.update(n.output)
            self.taken.add(n.name)
        self._current: tuple[str, str] = ("", "")  # (IR name, ONNX op) of the node being converted
        self._named = False  # whether an IR node already took the current ONNX node's name
        self._input_shapes: dict[str, Shape] = {}
        #: tensors some node or the graph output reads (an optional output nobody reads can be dropped)
        self.read: set[str] = {t for n in gr.node for t in n.input} | {t.name for t in gr.output}

    # ---- naming -----------------------------------------------------------------------------------------------
    def fresh(self, base: str) -> str:
        """A tensor/node name used nowhere in the ONNX graph nor in the IR so far."""
        name, i = base, 1
        while name in self.taken:
            name, i = f"{base}_{i}", i + 1
        self.taken.add(name)
        return name

    def _node_name(self, node: onnx.NodeProto, index: int) -> str:
        base = node.name or f"{node.op_type}_{index}"
        name, i = base, 1
        while name in self.node_names:
            name, i = f"{base}_{i}", i + 1
        self.node_names.add(name)
        self.taken.add(name)
        return name

    # ---- errors -----------------------------------------------------------------------------------------------
    def err(self, node: onnx.NodeProto, msg: str) -> CompileError:
        return CompileError(node_where(self.g.source, self._current[0], node.op_type), msg)

    # ---- tensors ----------------------------------------------------------------------------------------------
    def const(self, t: str) -> np.ndarray | None:
        return self.raw.get(t) if t else None

    def need_const(self, node: onnx.NodeProto, t: str, what: str) -> np.ndarray:
        v = self.const(t)
        if v is None:
            raise self.err(node, f"{what} ({t!r}) must be a constant")
        return v

    def shape(self, node: onnx.NodeProto, t: str) -> Shape:
        if t in self.g.shapes:
            return self.g.shapes[t]
        if t in self.raw:
            return tuple(self.raw[t].shape)
        raise self.err(node, f"input {t!r} is never produced")

    def use(self, t: str) -> str:
        """Name of ``t`` as an IR input, registering a raw constant as a float32 weight when needed."""
        if t in self.raw and t not in self.g.consts:
            self.g.consts[t] = self.raw[t].astype(np.float32)
        return t

    def weight(self, value: np.ndarray, base: str) -> str:
        name = self.fresh(base)
        with np.errstate(over="ignore", invalid="ignore"):
            self.g.consts[name] = np.ascontiguousarray(value, dtype=np.float32)
        if why := non_finite(self.g.consts[name]):  # finite in the file, not once folded (BN: gamma / sqrt(var))
            raise CompileError(node_where(self.g.source, *self._current), f"folded weight {name!r} {why}")
        return name

    def emit(self, op: str, inputs: list[str], outputs: list[str], attrs: dict[str, Any] | None = None) -> Node:
        """Append an IR node (the first per ONNX node takes its name) and infer its output shapes."""
        base = self._current[0]
        name = self.fresh(f"{base}/{op.lower()}") if self._named else base
        self._named = True
        node = Node(name, op, [self.use(t) for t in inputs], list(outputs), dict(attrs or {}))
        if op in ("Conv", "Gemm") and len(inputs) > 1 and inputs[1] in self.weight_scales:
            node.attrs["weight_scale"] = self.weight_scales[inputs[1]]  # a pre-quantized model's, kept
        self.g.nodes.append(node)
        infer_shapes(self.g, [node])
        return node

    # ---- driver -----------------------------------------------------------------------------------------------
    def run(self) -> Graph:
        gr = self.model.graph
        for init in gr.initializer:
            try:
                self.raw[init.name] = numpy_helper.to_array(init)
            except Exception as e:  # dims that do not match the data, an unknown data type, ...
                raise CompileError(self.g.source, f"initializer {init.name!r}: {_one_line(e)}") from None
            if why := non_finite(self.raw[init.name]):
                raise CompileError(self.g.source, f"initializer {init.name!r} {why}")
        for vi in gr.input:
            if vi.name in self.raw:
                continue  # an initializer listed as an input (IR < 4) is a weight, not a feed
            self.g.inputs.append(vi.name)
            self._input_shapes[vi.name] = self.g.shapes[vi.name] = self._input_shape(vi)
        for i, node in enumerate(gr.node):
            self._current = (self._node_name(node, i), node.op_type)
            self._named = False
            self._convert(node)
        for t in gr.output:
            if t.name not in self.g.shapes:
                why = "is a constant" if t.name in self.raw else "is never produced"
                raise CompileError(self.g.source, f"graph output {t.name!r} {why}")
            self.g.outputs.append(t.name)
        used = {t for n in self.g.nodes for t in n.inputs}
        self.g.consts = {k: v for k, v in self.g.consts.items() if k in used}
        self.g.shapes = dict(self._input_shapes)
        return infer_shapes(self.g)

    def _input_shape(self, vi: onnx.ValueInfoProto) -> Shape:
        tt = vi.type.tensor_type
        if not vi.type.HasField("tensor_type") or tt.elem_type not in _FLOAT_TYPES:
            raise CompileError(self.g.source, f"graph input {vi.name!r} is not a float tensor")
        if not tt.HasField("shape"):
            raise CompileError(self.g.source, f"graph input {vi.name!r} has no shape")
        dims = []
        for i, d in enumerate(tt.shape.dim):
            if d.HasField("dim_value") and d.dim_value > 0:
                dims.append(int(d.dim_value))
            elif i == 0:
                dims.append(1)  # dynamic or zero batch: compile for one sample
            else:
                raise CompileError(self.g.source, f"graph input {vi.name!r} has dynamic dimension {i}")
        elements = 1
        for d in dims:
            elements *= d
        try:  # before any shape arithmetic: numpy's int64 would wrap a 2^63 dim into a negative layer size
            check_size(f"graph input {vi.name!r} {dims} (float32)", elements * 4)
        except MemoryBudgetError as exc:
            raise CompileError(self.g.source, str(exc)) from None
        return tuple(dims)

    def _convert(self, node: onnx.NodeProto) -> None:
        if node.domain not in ("", "ai.onnx") and not (node.domain == "com.microsoft" and node.op_type in MS_OPS):
            raise self.err(node, f"unsupported op (domain {node.domain!r})")
        if node.op_type in ("QuantizeLinear", "DequantizeLinear") and all(t in self.raw for t in node.input if t):
            if node.op_type == "DequantizeLinear":
                record_weight_scales(self, node)
            fold_constant(self, node)
            return
        if node.op_type == "Constant":
            self.raw[node.output[0]] = self._constant_value(node)
            if why := non_finite(self.raw[node.output[0]]):
                raise self.err(node, f"constant {node.output[0]!r} {why}")
            return
        ins = [t for t in node.input if t]
        if node.op_type in ("Shape", "Size") and ins and ins[0] in self.g.shapes:
            self._fold_shape(node)
            return
        if ins and all(t in self.raw for t in ins) and node.op_type not in _UNFOLDABLE:
            self._check_fold_size(node)
            self._fold(node)
            return
        conv = _CONVERTERS.get(node.op_type)
        if conv is None:
            raise self.err(node, "unsupported op")
        try:
            conv(self, node, self._current[0])
        except CompileError:
            raise
        except Exception as e:  # malformed attributes and the like
            raise self.err(node, f"cannot convert: {_one_line(e)}") from None

    def _constant_value(self, node: onnx.NodeProto) -> np.ndarray:
        a = _attrs(node)
        if "value" in a:
            return numpy_helper.to_array(a["value"])
        for key, dtype in (("value_float", np.float32), ("value_floats", np.float32),
                           ("value_int", np.int64), ("value_ints", np.int64)):
            if key in a:
                return np.array(a[key], dtype=dtype)
        raise self.err(node, "only tensor, float(s) and int(s) constants are supported")

    def _fold_shape(self, node: onnx.NodeProto) -> None:
        s = self.g.shapes[node.input[0]]
        if node.op_type == "Size":
            self.raw[node.output[0]] = np.array(int(np.prod(s, dtype=np.int64)), dtype=np.int64)
            return
        a = _attrs(node)
        start, end = int(a.get("start", 0)), a.get("end")
        self.raw[node.output[0]] = np.array(s[start : None if end is None else int(end)], dtype=np.int64)

    def _check_fold_size(self, node: onnx.NodeProto) -> None:
        """Refuse, before evaluating it, a constant whose size comes from values rather than from the file
        (``ConstantOfShape([20000, 20000])`` is a few bytes of model and 3 GB of array)."""
        values = [self.raw[t] for t in node.input if t]
        try:
            if node.op_type == "ConstantOfShape":
                dims = [int(d) for d in np.asarray(values[0]).reshape(-1)]
            elif node.op_type == "Expand" and len(values) == 2:
                dims = list(np.broadcast_shapes(values[0].shape, tuple(int(d) for d in np.asarray(values[1]).reshape(-1))))
            elif node.op_type == "Tile" and len(values) >= 2:
                dims = [int(a) * int(b) for a, b in zip(values[0].shape, np.asarray(values[1]).reshape(-1))]
            else:
                return
        except (ValueError, TypeError):
            return  # a malformed node: the evaluator words the error
        n = 1
        for d in dims:
            n *= max(d, 0)
        try:
            check_size(f"constant of shape {dims} (float64)", n * 8)
        except MemoryBudgetError as exc:
            raise self.err(node, str(exc)) from None

    def _fold(self, node: onnx.NodeProto) -> None:
        """Evaluate an all-constant node once with ONNX's reference evaluator."""
        from onnx.reference import ReferenceEvaluator

        names = list(dict.fromkeys(t for t in node.input if t))
        inputs = [helper.make_tensor_value_info(t, helper.np_dtype_to_tensor_dtype(self.raw[t].dtype),
                                                self.raw[t].shape) for t in names]
        outputs = [helper.make_empty_tensor_value_info(t) for t in node.output if t]
        graph = helper.make_graph([node], "fold", inputs, outputs)
        model = helper.make_model(graph, opset_imports=list(self.model.opset_import))
        try:
            values = ReferenceEvaluator(model).run(None, {t: self.raw[t] for t in names})
        except Exception as e:
            raise self.err(node, f"cannot fold constant inputs: {_one_line(e)}") from None
        for t, v in zip([t for t in node.output if t], values):
            self.raw[t] = np.asarray(v)


# ---- convolution ---------------------------------------------------------------------------------------------
def _same_pads(size: int, k: int, stride: int, dil: int, upper: bool) -> tuple[int, int]:
    """SAME_UPPER/SAME_LOWER: output ceil(size/stride); the odd pixel of padding goes at the end/start."""
    out = -(-size // stride)
    total = max(0, (out - 1) * stride + (k - 1) * dil + 1 - size)
    return (total // 2, total - total // 2) if upper else (total - total // 2, total // 2)


def _spatial_pads(im: _Importer, node: onnx.NodeProto, a: dict[str, Any], xs: Shape,
                  kernel: tuple[int, int], strides: tuple[int, int], dil: tuple[int, int]) -> tuple[int, int, int, int]:
    auto = a.get("auto_pad", "NOTSET")
    if auto in ("SAME_UPPER", "SAME_LOWER"):
        (t, b), (l, r) = (_same_pads(xs[2 + i], kernel[i], strides[i], dil[i], auto == "SAME_UPPER") for i in (0, 1))
        return (t, l, b, r)
    if auto == "VALID":
        return (0, 0, 0, 0)
    if auto != "NOTSET":
        raise im.err(node, f"unknown auto_pad {auto!r}")
    pads = [int(p) for p in a.get("pads", (0, 0, 0, 0))]
    if len(pads) != 4 or min(pads) < 0:
        raise im.err(node, f"pads {pads} are not 4 non-negative values (t, l, b, r)")
    return (pads[0], pads[1], pads[2], pads[3])


def _conv_operands(im: _Importer, node: onnx.NodeProto) -> tuple[Shape, np.ndarray, list[str]]:
    xs = im.shape(node, node.input[0])
    if len(xs) != 4:
        raise im.err(node, f"only 2-D convolution (a 4-D NCHW input) is supported, got shape {list(xs)}")
    w = im.need_const(node, node.input[1], "weights")
    if w.ndim != 4:
        raise im.err(node, f"weights must be 4-D, got shape {list(w.shape)}")
    inputs = [node.input[0], node.input[1]]
    if len(node.input) > 2 and node.input[2]:
        im.need_const(node, node.input[2], "bias")
        inputs.append(node.input[2])
    return xs, w, inputs


@_converts("Conv")
def _conv(im: _Importer, node: onnx.NodeProto, name: str) -> None:
    a = _attrs(node)
    xs, w, inputs = _conv_operands(im, node)
    kernel = (int(w.shape[2]), int(w.shape[3]))
    strides, dil = _pair(a.get("strides"), (1, 1)), _pair(a.get("dilations"), (1, 1))
    pads = _spatial_pads(im, node, a, xs, kernel, strides, dil)
    im.emit("Conv", inputs, [node.output[0]],
            dict(strides=strides, pads=pads, dilations=dil, group=int(a.get("group", 1))))


@_converts("ConvTranspose")
def _conv_transpose(im: _Importer, node: onnx.NodeProto, name: str) -> None:
    """Pads come from ``pads``, or from ``output_shape``/SAME as ONNX specifies: total padding
    stride*(in-1) + output_padding + (k-1)*dil + 1 - out, the odd pixel at the start unless SAME_UPPER."""
    a = _attrs(node)
    xs, w, inputs = _conv_operands(im, node)
    kernel = (int(w.shape[2]), int(w.shape[3]))
    strides, dil = _pair(a.get("strides"), (1, 1)), _pair(a.get("dilations"), (1, 1))
    out_pad = list(_pair(a.get("output_padding"), (0, 0)))
    auto = a.get("auto_pad", "NOTSET")
    out_shape = a.get("output_shape")
    if out_shape is not None or auto in ("SAME_UPPER", "SAME_LOWER"):
        want = [int(v) for v in out_shape][-2:] if out_shape is not None else [xs[2] * strides[0], xs[3] * strides[1]]
        begin, end = [0, 0], [0, 0]
        for i in (0, 1):
            total = strides[i] * (xs[2 + i] - 1) + out_pad[i] + (kernel[i] - 1) * dil[i] + 1 - want[i]
            half = total // 2
            begin[i], end[i] = (half, total - half) if auto == "SAME_UPPER" else (total - half, half)
            if end[i] < 0:  # a larger output than the kernel covers: zero rows at the end
                out_pad[i] -= end[i]
                end[i] = 0
            if begin[i] < 0:
                raise im.err(node, f"output_shape {want} is not reachable from input {list(xs)}")
        pads = (begin[0], begin[1], end[0], end[1])
    else:
        pads = _spatial_pads(im, node, a, xs, kernel, strides, dil)
    im.emit("ConvTranspose", inputs, [node.output[0]],
            dict(strides=strides, pads=pads, dilations=dil, group=int(a.get("group", 1)),
                 output_padding=(out_pad[0], out_pad[1])))


@_converts("Gemm")
def _gemm(im: _Importer, node: onnx.NodeProto, name: str) -> None:
    """alpha, beta and transB fold into the constants so the IR always reads y = x @ W.T + B."""
    a = _attrs(node)
    if int(a.get("transA", 0)):
        raise im.err(node, "transA=1 is not supported")
    b = im.need_const(node, node.input[1], "B (weights)")
    if b.ndim != 2:
        raise im.err(node, f"B must be 2-D, got shape {list(b.shape)}")
    w = b if int(a.get("transB", 0)) else b.T
    if float(a.get("alpha", 1.0)) != 1.0:  # (only then a float64 copy: VGG's FC6 alone is 400 MB of float32)
        w = w.astype(np.float64) * float(a["alpha"])
    inputs = [node.input[0], im.weight(w, f"{name}_W")]
    if node.input[1] in im.weight_scales and w.shape[0] == im.weight_scales[node.input[1]].size:
        im.weight_scales[inputs[1]] = im.weight_scales[node.input[1]] * abs(float(a.get("alpha", 1.0)))
    if len(node.input) > 2 and node.input[2]:
        c = im.need_const(node, node.input[2], "C (bias)").astype(np.float64) * float(a.get("beta", 1.0))
        if c.size not in (1, w.shape[0]):
            raise im.err(node, f"C of shape {list(c.shape)} is not a per-output bias for {w.shape[0]} outputs")
        inputs.append(im.weight(np.broadcast_to(c.reshape(-1), (w.shape[0],)), f"{name}_B"))
    im.emit("Gemm", inputs, [node.output[0]])


@_converts("MatMul")
def _matmul(im: _Importer, node: onnx.NodeProto, name: str) -> None:
    b = im.need_const(node, node.input[1], "B (weights)")
    if b.ndim != 2:
        raise im.err(node, f"only a constant 2-D B is supported, got shape {list(b.shape)}")
    im.emit("Gemm", [node.input[0], im.weight(b.T, f"{name}_W")], [node.output[0]])


# ---- pooling -------------------------------------------------------------------------------------------------
@_converts("MaxPool", "AveragePool")
def _pool(im: _Importer, node: onnx.NodeProto, name: str) -> None:
    """ceil_mode becomes extra bottom/right padding (ONNX's rule: the last window starts inside the input or
    its leading padding), which is exactly how the IR spells Caffe's ceil-mode pooling."""
    a = _attrs(node)
    xs = im.shape(node, node.input[0])
    if len(xs) != 4:
        raise im.err(node, f"only 2-D pooling (a 4-D NCHW input) is supported, got shape {list(xs)}")
    if any(int(d) != 1 for d in a.get("dilations", (1, 1))):
        raise im.err(node, "dilations != 1 are not supported")
    if len(node.output) > 1 and node.output[1]:
        raise im.err(node, "the Indices output is not supported")
    if len(a.get("kernel_shape", ())) != 2:
        raise im.err(node, "kernel_shape must give 2 sizes")
    kernel = _pair(a["kernel_shape"], (0, 0))
    strides = _pair(a.get("strides"), (1, 1))
    pads = list(_spatial_pads(im, node, a, xs, kernel, strides, (1, 1)))
    ceil_mode = int(a.get("ceil_mode", 0)) and a.get("auto_pad", "NOTSET") == "NOTSET"
    extra = [0, 0]
    for i in (0, 1):
        size, p0, p1 = xs[2 + i], pads[i], pads[2 + i]
        if ceil_mode:
            out = math.ceil((size + p0 + p1 - kernel[i]) / strides[i]) + 1
            if (out - 1) * strides[i] >= size + p0:
                out -= 1
            extra[i] = max(0, (out - 1) * strides[i] + kernel[i] - (size + p0 + p1))
    attrs: dict[str, Any] = dict(kernel=kernel, strides=strides,
                                 pads=(pads[0], pads[1], pads[2] + extra[0], pads[3] + extra[1]))
    if node.op_type == "AveragePool":
        include = bool(int(a.get("count_include_pad", 0)))
        if include and any(extra):
            # ONNX (like Caffe) clips ceil-mode windows at the padded border: the divisor counts the explicit
            # padding but not the overhang.
            include = False
            if any(pads):
                attrs["divisor_pads"] = tuple(pads)
        attrs["count_include_pad"] = include
    im.emit(node.op_type, [node.input[0]], [node.output[0]], attrs)


@_converts("GlobalMaxPool", "GlobalAveragePool", "Relu", "Sigmoid", "Tanh")
def _unary(im: _Importer, node: onnx.NodeProto, name: str) -> None:
    im.emit(node.op_type, [node.input[0]], [node.output[0]])


@_converts("Dropout", "Identity")
def _identity(im: _Importer, node: onnx.NodeProto, name: str) -> None:
    """Inference Dropout is the identity; its mask output (opset 7-11 exporters write one) is all ones, and
    only refused when something reads it."""
    if len(node.output) > 1 and node.output[1] in im.read:
        raise im.err(node, f"the mask output {node.output[1]!r} is read; only the data output is supported")
    im.emit("Identity", [node.input[0]], [node.output[0]])


# ---- activations ---------------------------------------------------------------------------------------------
@_converts("PRelu")
def _prelu(im: _Importer, node: onnx.NodeProto, name: str) -> None:
    slope = im.need_const(node, node.input[1], "slope")
    xs = im.shape(node, node.input[0])
    v = channel_vector(slope, xs)
    if v is None:
        raise im.err(node, f"slope of shape {list(slope.shape)} is not per-channel for input {list(xs)}")
    v = v[:1] if slope.size == 1 else v
    im.emit("PRelu", [node.input[0], im.weight(v, f"{name}_slope")], [node.output[0]])


@_converts("LeakyRelu")
def _leaky_relu(im: _Importer, node: onnx.NodeProto, name: str) -> None:
    im.emit("LeakyRelu", [node.input[0]], [node.output[0]], dict(alpha=float(_attrs(node).get("alpha", 0.01))))


@_converts("Clip")
def _clip(im: _Importer, node: onnx.NodeProto, name: str) -> None:
    bounds: list[float | None] = [None, None]
    if im.opset < 11:
        a = _attrs(node)
        bounds = [a.get("min"), a.get("max")]
    else:
        for i in (1, 2):
            if len(node.input) > i and node.input[i]:
                bounds[i - 1] = float(im.need_const(node, node.input[i], ("min", "max")[i - 1]).reshape(-1)[0])
    lo, hi = (None if v is None else float(v) for v in bounds)
    im.emit("Clip", [node.input[0]], [node.output[0]], dict(min=lo, max=hi))


@_converts("BatchNormalization")
def _batch_norm(im: _Importer, node: onnx.NodeProto, name: str) -> None:
    """Inference BN folds to y = x * gamma/sqrt(var+eps) + (beta - mean*gamma/sqrt(var+eps))."""
    a = _attrs(node)
    if int(a.get("training_mode", 0)):
        raise im.err(node, "training_mode=1 is not supported")
    gamma, beta, mean, var = (im.need_const(node, t, what).astype(np.float64).reshape(-1)
                              for t, what in zip(node.input[1:5], ("scale", "B", "mean", "var")))
    eps = float(a.get("epsilon", 1e-5))
    if np.any(var + eps <= 0):
        k = int(np.argmax(var + eps <= 0))
        raise im.err(node, f"var {node.input[4]!r} is {var[k]:g} at channel {k}: var + epsilon ({eps:g}) must be "
                           "> 0 (a variance is never negative)")
    scale = gamma / np.sqrt(var + eps)
    im.emit("ChannelAffine", [node.input[0], im.weight(scale, f"{name}_scale"),
                              im.weight(beta - mean * scale, f"{name}_bias")], [node.output[0]])


# ---- binary element-wise -------------------------------------------------------------------------------------
@_converts("Add", "Sum", "Mul", "Max", "Min", "Sub", "Div")
def _binary(im: _Importer, node: onnx.NodeProto, name: str) -> None:
    """Tensor-tensor (same shape) -> Add/Mul/Max; a scalar or per-channel constant operand -> ChannelAffine
    (or Clip for Max/Min with a scalar)."""
    op = node.op_type
    ins = list(node.input)
    if len(ins) == 1:
        im.emit("Identity", ins, [node.output[0]])
        return
    consts = [im.const(t) for t in ins]
    tensor_op = {"Add": "Add", "Sum": "Add", "Mul": "Mul", "Max": "Max"}.get(op)
    if all(c is None for c in consts):
        if tensor_op is None:
            raise im.err(node, "unsupported op (only with a constant operand)")
        acc = ins[0]
        for i, t in enumerate(ins[1:]):
            out = node.output[0] if i == len(ins) - 2 else im.fresh(f"{name}_partial")
            im.emit(tensor_op, [acc, t], [out])
            acc = out
        return
    if len(ins) != 2:
        raise im.err(node, f"a constant operand is supported with 2 inputs, got {len(ins)}")
    swapped = consts[1] is None
    x, c = (ins[1], consts[0]) if swapped else (ins[0], consts[1])
    if swapped and op == "Div":
        raise im.err(node, "dividing a constant by a tensor is not supported")
    xs = im.shape(node, x)
    v = channel_vector(c, xs)
    if v is None:
        raise im.err(node, f"constant operand of shape {list(c.shape)} is neither a scalar nor per-channel "
                           f"for input {list(xs)}")
    if op in ("Max", "Min"):
        if np.ptp(v) != 0:
            raise im.err(node, "a per-channel constant bound is not supported (only a scalar)")
        bound = float(v[0])
        attrs = dict(min=bound, max=None) if op == "Max" else dict(min=None, max=bound)
        im.emit("Clip", [x], [node.output[0]], attrs)
        return
    ones, zeros = np.ones_like(v), np.zeros_like(v)
    scale, bias = {
        "Add": (ones, v), "Sum": (ones, v), "Mul": (v, zeros), "Div": (1.0 / v, zeros),
        "Sub": (-ones, v) if swapped else (ones, -v),
    }[op]
    im.emit("ChannelAffine", [x, im.weight(scale, f"{name}_scale"), im.weight(bias, f"{name}_bias")],
            [node.output[0]])


# ---- tensor plumbing -----------------------------------------------------------------------------------------
def _axis(im: _Importer, node: onnx.NodeProto, axis: int, rank: int) -> int:
    if not -rank <= axis < rank:
        raise im.err(node, f"axis {axis} is out of range for rank {rank}")
    return axis % rank


@_converts("Concat")
def _concat(im: _Importer, node: onnx.NodeProto, name: str) -> None:
    rank = len(im.shape(node, node.input[0]))
    axis = _axis(im, node, int(_attrs(node)["axis"]), rank)
    im.emit("Concat", list(node.input), [node.output[0]], dict(axis=axis))


@_converts("Split")
def _split(im: _Importer, node: onnx.NodeProto, name: str) -> None:
    a = _attrs(node)
    xs = im.shape(node, node.input[0])
    axis = _axis(im, node, int(a.get("axis", 0)), len(xs))
    dim, n = xs[axis], len(node.output)
    if len(node.input) > 1 and node.input[1]:
        sizes = [int(v) for v in im.need_const(node, node.input[1], "split").reshape(-1)]
    elif "split" in a:
        sizes = [int(v) for v in a["split"]]
    elif "num_outputs" in a:
        chunk = -(-dim // int(a["num_outputs"]))
        sizes = [chunk] * (n - 1) + [dim - chunk * (n - 1)]
    else:
        if dim % n:
            raise im.err(node, f"axis {axis} of size {dim} does not split evenly into {n} outputs")
        sizes = [dim // n] * n
    outputs = [t or im.fresh(f"{name}_unused") for t in node.output]
    im.emit("Split", [node.input[0]], outputs, dict(axis=axis, split=tuple(sizes)))


@_converts("Slice")
def _slice(im: _Importer, node: onnx.NodeProto, name: str) -> None:
    xs = im.shape(node, node.input[0])
    if im.opset < 10:
        a = _attrs(node)
        starts, ends, axes, steps = a["starts"], a["ends"], a.get("axes"), None
    else:
        opt = [im.need_const(node, t, what).reshape(-1).tolist() if t else None
               for t, what in zip(list(node.input[1:]) + [""] * 4, ("starts", "ends", "axes", "steps"))]
        starts, ends, axes, steps = opt[:4]
    axes = list(range(len(starts))) if axes is None else axes
    if steps is not None and any(int(s) != 1 for s in steps):
        raise im.err(node, f"steps {steps} are not supported (only 1)")
    cut: list[tuple[int, int, int]] = []
    for ax, s, e in zip(axes, starts, ends):
        ax = _axis(im, node, int(ax), len(xs))
        dim = xs[ax]
        s, e = int(s), int(e)
        s = min(max(s + dim if s < 0 else s, 0), dim)
        e = min(max(e + dim if e < 0 else e, 0), dim)
        if s >= e:
            raise im.err(node, f"slice [{s}:{e}) of axis {ax} is empty")
        if (s, e) != (0, dim):
            cut.append((ax, s, e))
    if len(cut) > 1:
        raise im.err(node, f"slicing more than one axis ({[c[0] for c in cut]}) is not supported")
    if not cut:
        im.emit("Identity", [node.input[0]], [node.output[0]])
        return
    ax, s, e = cut[0]
    im.emit("Slice", [node.input[0]], [node.output[0]], dict(axis=ax, start=s, end=e))


@_converts("Flatten")
def _flatten(im: _Importer, node: onnx.NodeProto, name: str) -> None:
    rank = len(im.shape(node, node.input[0]))
    axis = int(_attrs(node).get("axis", 1))
    if not -rank <= axis <= rank:
        raise im.err(node, f"axis {axis} is out of range for rank {rank}")
    im.emit("Flatten", [node.input[0]], [node.output[0]], dict(axis=axis + rank if axis < 0 else axis))


@_converts("Reshape")
def _reshape(im: _Importer, node: onnx.NodeProto, name: str) -> None:
    a = _attrs(node)
    xs = im.shape(node, node.input[0])
    if len(node.input) > 1 and node.input[1]:
        shape = [int(v) for v in im.need_const(node, node.input[1], "shape").reshape(-1)]
    elif "shape" in a:
        shape = [int(v) for v in a["shape"]]
    else:
        raise im.err(node, "no target shape")
    if not int(a.get("allowzero", 0)):
        shape = [xs[i] if v == 0 and i < len(xs) else v for i, v in enumerate(shape)]
    if shape.count(-1) > 1:
        raise im.err(node, f"shape {shape} has more than one -1")
    total = int(np.prod(xs, dtype=np.int64))
    if -1 in shape:
        known = int(np.prod([v for v in shape if v != -1], dtype=np.int64))
        if known == 0 or total % known:
            raise im.err(node, f"cannot reshape {list(xs)} to {shape}")
        shape[shape.index(-1)] = total // known
    _emit_reshape(im, node, xs, shape)


def _emit_reshape(im: _Importer, node: onnx.NodeProto, xs: Shape, shape: list[int]) -> None:
    if tuple(shape) == tuple(xs):
        im.emit("Identity", [node.input[0]], [node.output[0]])
    else:
        im.emit("Reshape", [node.input[0]], [node.output[0]], dict(shape=tuple(int(v) for v in shape)))


def _axes(im: _Importer, node: onnx.NodeProto) -> list[int] | None:
    if im.opset >= 13:
        if len(node.input) > 1 and node.input[1]:
            return [int(v) for v in im.need_const(node, node.input[1], "axes").reshape(-1)]
        return None
    axes = _attrs(node).get("axes")
    return None if axes is None else [int(v) for v in axes]


@_converts("Transpose")
def _transpose(im: _Importer, node: onnx.NodeProto, name: str) -> None:
    rank = len(im.shape(node, node.input[0]))
    perm = [int(v) for v in _attrs(node).get("perm", list(range(rank))[::-1])]
    im.emit("Transpose", [node.input[0]], [node.output[0]], dict(perm=tuple(perm)))


@_converts("Squeeze")
def _squeeze(im: _Importer, node: onnx.NodeProto, name: str) -> None:
    xs = im.shape(node, node.input[0])
    axes = _axes(im, node)
    drop = {i for i, d in enumerate(xs) if d == 1} if axes is None else {_axis(im, node, a, len(xs)) for a in axes}
    if any(xs[i] != 1 for i in drop):
        raise im.err(node, f"cannot squeeze axes {sorted(drop)} of shape {list(xs)}")
    _emit_reshape(im, node, xs, [d for i, d in enumerate(xs) if i not in drop])


@_converts("Unsqueeze")
def _unsqueeze(im: _Importer, node: onnx.NodeProto, name: str) -> None:
    xs = im.shape(node, node.input[0])
    axes = _axes(im, node)
    if axes is None:
        raise im.err(node, "no axes")
    rank = len(xs) + len(axes)
    put = sorted(_axis(im, node, a, rank) for a in axes)
    shape = list(xs)
    for i in put:
        shape.insert(i, 1)
    _emit_reshape(im, node, xs, shape)


# ---- normalization -------------------------------------------------------------------------------------------
@_converts("LRN")
def _lrn(im: _Importer, node: onnx.NodeProto, name: str) -> None:
    a = _attrs(node)
    im.emit("LRN", [node.input[0]], [node.output[0]],
            dict(size=int(a["size"]), alpha=float(a.get("alpha", 1e-4)), beta=float(a.get("beta", 0.75)),
                 bias=float(a.get("bias", 1.0))))


@_converts("Softmax")
def _softmax(im: _Importer, node: onnx.NodeProto, name: str) -> None:
    """Before opset 13 Softmax works on the input coerced to 2-D at ``axis``: then it becomes
    Reshape -> Softmax(axis 1) -> Reshape unless only the last axis is reduced anyway."""
    xs = im.shape(node, node.input[0])
    rank = len(xs)
    axis = _axis(im, node, int(_attrs(node).get("axis", 1 if im.opset < 13 else -1)), rank)
    if im.opset >= 13 or axis == rank - 1 or all(d == 1 for d in xs[axis + 1:]):
        im.emit("Softmax", [node.input[0]], [node.output[0]], dict(axis=axis))
        return
    rows = int(np.prod(xs[:axis], dtype=np.int64))
    flat, soft = im.fresh(f"{name}_2d"), im.fresh(f"{name}_2d_softmax")
    im.emit("Reshape", [node.input[0]], [flat], dict(shape=(rows, int(np.prod(xs, dtype=np.int64)) // rows)))
    im.emit("Softmax", [flat], [soft], dict(axis=1))
    im.emit("Reshape", [soft], [node.output[0]], dict(shape=tuple(xs)))


def load_file(path: Path, weights: Path | None, seed: int) -> Graph:
    """``compiler.frontend.load_model``'s entry: an ONNX file carries its weights."""
    return load(path)
