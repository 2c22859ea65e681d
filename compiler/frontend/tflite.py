"""TFLite frontend: a ``.tflite`` flatbuffer (float32, or full-integer int8 as TensorFlow Lite's converter and
ai-edge-quantizer write it) read with the ``tflite`` package's schema accessors, producing the same canonical
IR as the other frontends.

TFLite computes channels-last (NHWC); the IR and the DLA are channels-first, so 4-D tensors become NCHW, conv
kernels (OHWI) and depthwise kernels (1HWC) are transposed, channel axes are remapped, and a FULLY_CONNECTED
reading a flattened cube has its columns permuted from TFLite's (h, w, c) order to the IR's (c, h, w).
``SAME`` padding is TensorFlow's (the odd pixel at the end; average pooling divides by the in-image count). A
zero PAD is folded into the convolution or pooling reading it, as the DLA has no pad operation.

An int8 model keeps its quantization, like a pre-quantized ONNX model (``onnx_quant``): the IR stays float
(weights are the model's int8 values times their scales), activation scales go to ``Graph.quant_scales`` and
per-output-channel weight scales to the conv's or FC's ``weight_scale``, so the compiler neither calibrates
those tensors nor re-rounds the weights. The DLA's int8 is symmetric: a tensor with another zero point than 0
(128 for uint8), as TFLite's converter writes them, gives its range instead (``Graph.range_hints``), which
calibrates a symmetric network close to the model's arithmetic but not bit-comparable with it;
ai-edge-quantizer writes symmetric activations with ``activation_tensor_config.symmetric = true``.

Each builtin operator is one registration in ``OPS``; an operator without one, or an option a handler does
not take, is a one-line ``CompileError`` naming the file, the operator's output tensor and its type.
"""
from __future__ import annotations

import struct
from pathlib import Path
from typing import Any, Callable

import numpy as np

from compiler.errors import CompileError, node_where
from compiler.frontend.keras_h5 import same_pads
from compiler.frontend.naming import FreshNames
from compiler.frontend.weights import non_finite
from compiler.ir import Graph, Node, Shape
from compiler.ops import infer_shapes
from golden.registry import Registry

Handler = Callable[["_Converter", "_Op"], str]
#: TFLite builtin operator name (``tflite.BuiltinOperator``) -> handler(converter, op) -> IR output tensor.
OPS: Registry[Handler] = Registry("TFLite operator")
op = OPS.register

#: TFLite tensor types read as numbers (``tflite.TensorType``).
_NUMPY = {0: np.float32, 1: np.float16, 2: np.int32, 3: np.uint8, 4: np.int64, 7: np.int16, 9: np.int8,
          10: np.float64}
_TYPE_NAMES = {0: "float32", 1: "float16", 2: "int32", 3: "uint8", 4: "int64", 5: "string", 6: "bool", 7: "int16",
               9: "int8", 10: "float64"}
#: Fused activations (``tflite.ActivationFunctionType``).
_FUSED = {0: None, 1: "relu", 2: "relu_n1_to_1", 3: "relu6", 4: "tanh"}


class _Op:
    """One TFLite operator: its name (first output tensor), type, inputs/outputs (tensor indices, -1 absent)
    and builtin options table (or None)."""

    def __init__(self, kind: str, inputs: list[int], outputs: list[int], options: Any, index: int) -> None:
        self.kind, self.inputs, self.outputs, self.options, self.index = kind, inputs, outputs, options, index

    def opts(self, cls_name: str) -> Any:
        import tflite

        o = getattr(tflite, cls_name)()
        if self.options is not None:
            o.Init(self.options.Bytes, self.options.Pos)
            return o
        o.Init(bytearray(8), 0)  # no table: every field reads as its schema default
        return o


class _Converter:
    """One model's conversion: the IR graph, the IR tensor of every TFLite activation tensor, constants, and
    where a 2-D tensor is a flattened NHWC cube (so a FULLY_CONNECTED reading it can reorder its columns)."""

    def __init__(self, path: Path, buf: bytes, model: Any) -> None:
        self.source = str(path)
        self.buf = buf
        self.model = model
        self.sg = model.Subgraphs(0)
        self.g = Graph(name=path.stem, source=self.source)
        self.fresh = FreshNames(self.g)
        self.ir: dict[int, str] = {}  # TFLite tensor index -> IR tensor
        self.flat_of: dict[str, tuple[int, int, int]] = {}
        #: PAD outputs, folded into the conv or pool reading them: IR name -> (input, pads (t, l, b, r))
        self.padded: dict[str, tuple[str, tuple[int, int, int, int]]] = {}
        self.here = ""
        self.kind = ""

    # ---- errors ---------------------------------------------------------------------------------------------
    def err(self, msg: str) -> CompileError:
        return CompileError(node_where(self.source, self.here, self.kind), msg)

    # ---- tensors ----------------------------------------------------------------------------------------------
    def tensor(self, i: int) -> Any:
        return self.sg.Tensors(i)

    def name(self, i: int) -> str:
        raw = self.tensor(i).Name()
        return raw.decode("utf-8", "replace") if raw else f"t{i}"

    def type_name(self, i: int) -> str:
        return _TYPE_NAMES.get(self.tensor(i).Type(), f"type {self.tensor(i).Type()}")

    def tflite_shape(self, i: int) -> tuple[int, ...]:
        t = self.tensor(i)
        return tuple(int(d) for d in t.ShapeAsNumpy()) if t.ShapeLength() else ()

    def data(self, i: int) -> np.ndarray | None:
        """A constant tensor's values (TFLite shape), or None for an activation."""
        t = self.tensor(i)
        b = self.model.Buffers(t.Buffer()) if t.Buffer() < self.model.BuffersLength() else None
        if b is None:
            return None
        if b.Offset() > 1:  # stored after the flatbuffer (models over 2 GB)
            raw = self.buf[b.Offset(): b.Offset() + b.Size()]
        elif b.DataLength():
            raw = b.DataAsNumpy().tobytes()
        else:
            return None
        dtype = _NUMPY.get(t.Type())
        if dtype is None:
            raise self.err(f"constant {self.name(i)!r} of type {self.type_name(i)} is not supported")
        shape = self.tflite_shape(i)
        if len(raw) != int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize:
            raise self.err(f"constant {self.name(i)!r}: {len(raw)} bytes for shape {list(shape)} of "
                           f"{self.type_name(i)}")
        return np.frombuffer(raw, dtype=dtype).reshape(shape)

    def quant(self, i: int) -> tuple[np.ndarray, np.ndarray, int] | None:
        """(scales, zero points, quantized dimension) of a quantized tensor, or None."""
        q = self.tensor(i).Quantization()
        if q is None or not q.ScaleLength():
            return None
        zp = q.ZeroPointAsNumpy() if q.ZeroPointLength() else np.zeros(q.ScaleLength(), np.int64)
        return q.ScaleAsNumpy().astype(np.float64), np.asarray(zp, dtype=np.int64), int(q.QuantizedDimension())

    def real(self, i: int, what: str) -> np.ndarray:
        """A constant operand as float64 (an int8/int32 one dequantized), TFLite layout."""
        v = self.data(i)
        if v is None:
            raise self.err(f"{what} {self.name(i)!r} must be a constant")
        if v.dtype.kind in "iu":
            q = self.quant(i)
            if q is None:
                if v.dtype == np.int32 and what == "bias":
                    raise self.err(f"int32 bias {self.name(i)!r} has no scale")
                return v.astype(np.float64)
            scale, zp, dim = q
            shape = [1] * v.ndim
            if scale.size > 1:
                if v.ndim == 0 or scale.size != v.shape[dim]:
                    raise self.err(f"{what} {self.name(i)!r}: {scale.size} scales along dimension {dim} of "
                                   f"{list(v.shape)}")
                shape[dim] = scale.size
            z = zp.reshape(shape) if zp.size == scale.size and scale.size > 1 else zp.reshape(-1)[0]
            if v.dtype == np.int8 and np.any(zp != 0):
                raise self.err(f"{what} {self.name(i)!r} has asymmetric zero points: quantize weights "
                               f"symmetrically")
            return (v.astype(np.float64) - z) * scale.reshape(shape if scale.size > 1 else ())
        if why := non_finite(v):
            raise self.err(f"{what} {self.name(i)!r} {why}")
        return v.astype(np.float64)

    def weight_scales(self, i: int, dim: int, channels: int) -> np.ndarray | None:
        """Per-output-channel scales of an int8 weight quantized along ``dim`` (TFLite layout)."""
        q = self.quant(i)
        v = self.data(i)
        if q is None or v is None or v.dtype != np.int8:
            return None
        scale, _, qdim = q
        if scale.size == 1:
            return np.full(channels, scale[0])
        return scale if qdim == dim and scale.size == channels else None

    def input(self, o: _Op, j: int = 0) -> str:
        """The IR tensor of the op's ``j``-th (activation) input."""
        i = o.inputs[j] if j < len(o.inputs) else -1
        if i < 0 or i not in self.ir:
            raise self.err(f"input {j} ({self.name(i) if i >= 0 else 'absent'}) is not an activation produced "
                           f"by an earlier operator")
        t = self.ir[i]
        if t in self.padded and o.kind not in _READS_PADDING:
            raise self.err("reads a PAD output: only convolutions and pooling can take the padding over (the "
                           "DLA has no pad operation)")
        return t

    def const(self, base: str, value: np.ndarray) -> str:
        name = self.fresh(f"{self.here}/{base}")
        self.g.consts[name] = np.ascontiguousarray(value, dtype=np.float32)
        self.g.shapes[name] = tuple(self.g.consts[name].shape)
        return name

    def add(self, op_name: str, inputs: list[str], out: str | None = None, **attrs: Any) -> str:
        out = out or self.fresh(f"{self.here}/{op_name.lower()}")
        node = Node(self.fresh(f"{self.here}/{op_name}"), op_name, list(inputs), [out], dict(attrs))
        self.g.nodes.append(node)
        try:
            infer_shapes(self.g, [node])
        except CompileError as e:
            raise self.err(e.msg) from None
        if inputs and inputs[0] in self.flat_of and op_name in _KEEPS_FLAT:
            self.flat_of[out] = self.flat_of[inputs[0]]
        return out

    def shape(self, t: str) -> Shape:
        if t in self.padded:
            src, (pt, pl, pb, pr) = self.padded[t]
            n, ch, h, w = self.g.shapes[src]
            return (n, ch, h + pt + pb, w + pl + pr)
        return self.g.shapes[t]

    def activation(self, y: str, fused: int) -> str:
        kind = _FUSED.get(fused, "?")
        if kind is None:
            return y
        if kind == "relu":
            return self.add("Relu", [y])
        if kind == "relu6":
            return self.add("Clip", [y], min=0.0, max=6.0)
        if kind == "relu_n1_to_1":
            return self.add("Clip", [y], min=-1.0, max=1.0)
        if kind == "tanh":
            return self.add("Tanh", [y])
        raise self.err(f"unsupported fused activation {fused} (NONE, RELU, RELU_N1_TO_1, RELU6, TANH)")

    def channel_axis(self, axis: int, rank: int) -> int:
        axis = axis % rank
        return {0: 0, 1: 2, 2: 3, 3: 1}[axis] if rank == 4 else axis


_KEEPS_FLAT = frozenset({"Identity", "Relu", "Clip", "Sigmoid", "Tanh", "LeakyRelu"})
#: Operators that fold a PAD before them into their own padding.
_READS_PADDING = frozenset({"CONV_2D", "DEPTHWISE_CONV_2D", "MAX_POOL_2D", "AVERAGE_POOL_2D", "PAD", "PADV2"})


def _padding(c: _Converter, x: str, mode: int, kernel, stride, dilation=(1, 1)) -> tuple[int, int, int, int]:
    if mode == 1:  # VALID
        return (0, 0, 0, 0)
    if mode == 0:  # SAME
        return same_pads(c.shape(x)[2:], kernel, stride, dilation)
    raise c.err(f"unsupported padding {mode} (SAME, VALID)")


def _cube(c: _Converter, x: str) -> None:
    if len(c.shape(x)) != 4:
        raise c.err(f"needs a 4-D (N, H, W, C) input, got {len(c.shape(x))}-D")


def _unpad(c: _Converter, x: str) -> tuple[str, tuple[int, int, int, int]]:
    return c.padded.get(x, (x, (0, 0, 0, 0)))


def _bias(c: _Converter, o: _Op, channels: int) -> str | None:
    if len(o.inputs) < 3 or o.inputs[2] < 0:
        return None
    b = c.real(o.inputs[2], "bias").reshape(-1)
    if b.size != channels:
        raise c.err(f"bias of {b.size} values for {channels} output channels")
    return c.const("B", b)


def _conv_node(c: _Converter, o: _Op, x: str, w: np.ndarray, groups: int, opts: Any, scales: np.ndarray | None,
               ) -> str:
    kernel, stride = (w.shape[2], w.shape[3]), (opts.StrideH(), opts.StrideW())
    dilation = (max(opts.DilationHFactor(), 1), max(opts.DilationWFactor(), 1))
    if min(stride) < 1:
        raise c.err(f"stride {list(stride)} must be positive")
    pads = _padding(c, x, opts.Padding(), kernel, stride, dilation)
    x, zero = _unpad(c, x)
    inputs = [x, c.const("W", w)]
    if (b := _bias(c, o, w.shape[0])) is not None:
        inputs.append(b)
    attrs: dict[str, Any] = dict(strides=stride, pads=tuple(a + z for a, z in zip(pads, zero)), dilations=dilation,
                                 group=groups)
    if scales is not None:
        attrs["weight_scale"] = scales
    y = c.add("Conv", inputs, **attrs)
    return c.activation(y, opts.FusedActivationFunction())


@op("CONV_2D")
def _conv(c: _Converter, o: _Op) -> str:
    x = c.input(o)
    _cube(c, x)
    w = c.real(o.inputs[1], "kernel")
    if w.ndim != 4:
        raise c.err(f"kernel of shape {list(w.shape)} is not (filters, kh, kw, C/groups)")
    ch = c.shape(x)[1]
    if w.shape[3] < 1 or ch % w.shape[3]:
        raise c.err(f"kernel reads {w.shape[3]} channels per group of an input with {ch}")
    scales = c.weight_scales(o.inputs[1], 0, w.shape[0])
    return _conv_node(c, o, x, w.transpose(0, 3, 1, 2), ch // w.shape[3], o.opts("Conv2DOptions"), scales)


@op("DEPTHWISE_CONV_2D")
def _depthwise(c: _Converter, o: _Op) -> str:
    x = c.input(o)
    _cube(c, x)
    w = c.real(o.inputs[1], "kernel")  # (1, kh, kw, C * multiplier), output channel c * multiplier + m
    ch = c.shape(x)[1]
    if w.ndim != 4 or w.shape[0] != 1 or w.shape[3] % ch:
        raise c.err(f"kernel of shape {list(w.shape)} is not (1, kh, kw, {ch} x depth multiplier)")
    scales = c.weight_scales(o.inputs[1], 3, w.shape[3])
    ir_w = w[0].transpose(2, 0, 1)[:, None]
    return _conv_node(c, o, x, ir_w, ch, o.opts("DepthwiseConv2DOptions"), scales)


@op("FULLY_CONNECTED")
def _fully_connected(c: _Converter, o: _Op) -> str:
    opts = o.opts("FullyConnectedOptions")
    if opts.WeightsFormat() != 0:
        raise c.err(f"weights format {opts.WeightsFormat()} (only DEFAULT)")
    x = c.input(o)
    w = c.real(o.inputs[1], "kernel")  # (units, in)
    if w.ndim != 2:
        raise c.err(f"kernel of shape {list(w.shape)} is not (units, input features)")
    if len(c.shape(x)) == 4:  # TFLite flattens the NHWC cube itself
        x = _flatten(c, x)
    if len(c.shape(x)) != 2 or c.shape(x)[1] != w.shape[1]:
        raise c.err(f"reads {list(c.shape(x))} with a kernel of {w.shape[1]} input features")
    scales = c.weight_scales(o.inputs[1], 0, w.shape[0])
    if x in c.flat_of:  # columns in TFLite's (h, w, c) order -> the IR's (c, h, w)
        ch, h, wd = c.flat_of[x]
        w = w.reshape(-1, h, wd, ch).transpose(0, 3, 1, 2).reshape(w.shape[0], -1)
    inputs = [x, c.const("W", w)]
    if (b := _bias(c, o, w.shape[0])) is not None:
        inputs.append(b)
    y = c.add("Gemm", inputs, **({"weight_scale": scales} if scales is not None else {}))
    return c.activation(y, opts.FusedActivationFunction())


def _flatten(c: _Converter, x: str) -> str:
    shape = c.shape(x)
    y = c.add("Flatten", [x], axis=1)
    if len(shape) == 4 and shape[2] * shape[3] > 1:
        c.flat_of[y] = (shape[1], shape[2], shape[3])
    return y


def _pool(c: _Converter, o: _Op, kind: str) -> str:
    x = c.input(o)
    _cube(c, x)
    opts = o.opts("Pool2DOptions")
    kernel, stride = (opts.FilterHeight(), opts.FilterWidth()), (opts.StrideH(), opts.StrideW())
    if min(kernel) < 1 or min(stride) < 1:
        raise c.err(f"filter {list(kernel)} and stride {list(stride)} must be positive")
    pads = _padding(c, x, opts.Padding(), kernel, stride)
    x, zero = _unpad(c, x)
    attrs: dict[str, Any] = dict(kernel=kernel, strides=stride, pads=tuple(a + z for a, z in zip(pads, zero)))
    if kind == "AveragePool":
        attrs["count_include_pad"] = False  # TensorFlow divides by the in-image count
        if any(zero):
            attrs["divisor_pads"] = zero  # a PAD's zeros are in the image
    elif any(zero) and not _nonnegative(c, x):
        raise c.err("max pooling over a PAD of values that may be negative (the zeros would win; supported "
                    "after a ReLU)")
    return c.activation(c.add(kind, [x], **attrs), opts.FusedActivationFunction())


def _nonnegative(c: _Converter, t: str) -> bool:
    producer = next((n for n in reversed(c.g.nodes) if t in n.outputs), None)
    return producer is not None and (producer.op == "Relu" or (
        producer.op == "Clip" and producer.attrs.get("min") is not None and producer.attrs["min"] >= 0.0))


@op("MAX_POOL_2D")
def _max_pool(c: _Converter, o: _Op) -> str:
    return _pool(c, o, "MaxPool")


@op("AVERAGE_POOL_2D")
def _avg_pool(c: _Converter, o: _Op) -> str:
    return _pool(c, o, "AveragePool")


@op("PAD", "PADV2")
def _pad(c: _Converter, o: _Op) -> str:
    """Folded into the convolution or pooling that reads it."""
    x = c.input(o)
    _cube(c, x)
    p = c.data(o.inputs[1]) if len(o.inputs) > 1 and o.inputs[1] >= 0 else None
    if p is None or p.shape != (4, 2):
        raise c.err("paddings must be a constant (4, 2)")
    if np.any(p[0] != 0) or np.any(p[3] != 0) or np.any(p < 0):
        raise c.err(f"pads batch or channels, or crops ({p.tolist()}): only non-negative H and W padding")
    if len(o.inputs) > 2 and o.inputs[2] >= 0:
        value = c.data(o.inputs[2])
        if value is None or np.any(value.astype(np.float64) != 0):
            raise c.err("pads with a value other than zero")
    src, (pt, pl, pb, pr) = _unpad(c, x)
    out = c.fresh(c.here)
    c.padded[out] = (src, (pt + int(p[1, 0]), pl + int(p[2, 0]), pb + int(p[1, 1]), pr + int(p[2, 1])))
    return out


def _binary(c: _Converter, o: _Op, kind: str, options: str) -> str:
    opts = o.opts(options)
    if len(o.inputs) != 2:
        raise c.err(f"needs two inputs, got {len(o.inputs)}")
    consts = [c.data(i) for i in o.inputs]
    if consts[1] is not None and consts[0] is None:  # activation with a per-channel constant: an affine
        x = c.input(o, 0)
        v = c.real(o.inputs[1], "operand").reshape(-1)
        ch = c.shape(x)[1]
        if v.size not in (1, ch):
            raise c.err(f"constant operand of {v.size} values broadcast over {ch} channels (1 or {ch})")
        v = np.broadcast_to(v, (ch,))
        scale, bias = (v, np.zeros(ch)) if kind == "Mul" else (np.ones(ch), v)
        y = c.add("ChannelAffine", [x, c.const("scale", scale), c.const("bias", bias)])
        return c.activation(y, opts.FusedActivationFunction())
    a, b = c.input(o, 0), c.input(o, 1)
    if c.shape(a) != c.shape(b):
        raise c.err(f"broadcasting {list(c.shape(a))} with {list(c.shape(b))} is not supported")
    return c.activation(c.add(kind, [a, b]), opts.FusedActivationFunction())


@op("ADD")
def _add(c: _Converter, o: _Op) -> str:
    return _binary(c, o, "Add", "AddOptions")


@op("MUL")
def _mul(c: _Converter, o: _Op) -> str:
    return _binary(c, o, "Mul", "MulOptions")


@op("MAXIMUM")
def _maximum(c: _Converter, o: _Op) -> str:
    a, b = c.input(o, 0), c.input(o, 1)
    if c.shape(a) != c.shape(b):
        raise c.err(f"broadcasting {list(c.shape(a))} with {list(c.shape(b))} is not supported")
    return c.add("Max", [a, b])


@op("CONCATENATION")
def _concat(c: _Converter, o: _Op) -> str:
    opts = o.opts("ConcatenationOptions")
    xs = [c.input(o, j) for j in range(len(o.inputs))]
    y = c.add("Concat", xs, axis=c.channel_axis(opts.Axis(), len(c.shape(xs[0]))))
    return c.activation(y, opts.FusedActivationFunction())


@op("RESHAPE", "SQUEEZE")
def _reshape(c: _Converter, o: _Op) -> str:
    x = c.input(o)
    src = c.shape(x)
    out = c.tflite_shape(o.outputs[0])
    if len(out) == 2 and out[0] == src[0] and int(np.prod(src)) == out[1]:
        return _flatten(c, x) if len(src) == 4 else c.add("Identity", [x])
    nhwc = (src[0], src[2], src[3], src[1]) if len(src) == 4 else src
    if tuple(out) == tuple(nhwc):
        return c.add("Identity", [x])
    raise c.err(f"reshape of {list(nhwc)} to {list(out)}: only flattening to (N, features) is supported")


@op("MEAN")
def _mean(c: _Converter, o: _Op) -> str:
    x = c.input(o)
    _cube(c, x)
    axes = c.data(o.inputs[1]) if len(o.inputs) > 1 else None
    if axes is None or sorted(int(a) % 4 for a in np.asarray(axes).reshape(-1)) != [1, 2]:
        raise c.err(f"mean over axes {None if axes is None else np.asarray(axes).tolist()}: only over H and W "
                    f"([1, 2], global average pooling)")
    y = c.add("GlobalAveragePool", [x])
    return y if o.opts("ReducerOptions").KeepDims() else c.add("Flatten", [y], axis=1)


@op("SOFTMAX")
def _softmax(c: _Converter, o: _Op) -> str:
    beta = o.opts("SoftmaxOptions").Beta()
    if beta != 1.0:
        raise c.err(f"softmax beta {beta} (only 1)")
    x = c.input(o)
    rank = len(c.shape(x))
    return c.add("Softmax", [x], axis=1 if rank in (2, 4) else rank - 1)


@op("RELU")
def _relu(c: _Converter, o: _Op) -> str:
    return c.add("Relu", [c.input(o)])


@op("RELU6")
def _relu6(c: _Converter, o: _Op) -> str:
    return c.add("Clip", [c.input(o)], min=0.0, max=6.0)


@op("RELU_N1_TO_1")
def _relu1(c: _Converter, o: _Op) -> str:
    return c.add("Clip", [c.input(o)], min=-1.0, max=1.0)


@op("LOGISTIC")
def _logistic(c: _Converter, o: _Op) -> str:
    return c.add("Sigmoid", [c.input(o)])


@op("TANH")
def _tanh(c: _Converter, o: _Op) -> str:
    return c.add("Tanh", [c.input(o)])


@op("LEAKY_RELU")
def _leaky(c: _Converter, o: _Op) -> str:
    return c.add("LeakyRelu", [c.input(o)], alpha=float(o.opts("LeakyReluOptions").Alpha()))


@op("QUANTIZE", "DEQUANTIZE")
def _quantize(c: _Converter, o: _Op) -> str:
    """Float <-> int8 at the model's edges: the IR is float, the int8 tensor's scale is recorded."""
    x = c.input(o)
    a, b = (c.quant(o.inputs[0]), c.quant(o.outputs[0]))
    if a is not None and b is not None and c.type_name(o.inputs[0]) != "float32" \
            and c.type_name(o.outputs[0]) != "float32" and not np.array_equal(a[0], b[0]):
        raise c.err("re-quantizes from one scale to another (the DLA keeps one scale per tensor)")
    return c.add("Identity", [x])


# ---- the model --------------------------------------------------------------------------------------------------
def _builtin_names() -> dict[int, str]:
    import tflite

    return {v: k for k, v in vars(tflite.BuiltinOperator).items() if not k.startswith("_") and isinstance(v, int)}


def _ir_shape(c: _Converter, i: int) -> Shape:
    shape = c.tflite_shape(i)
    if len(shape) == 4:
        n, h, w, ch = shape
        return (n, ch, h, w)
    if len(shape) == 2:
        return shape
    raise c.err(f"input {c.name(i)!r} of shape {list(shape)}: only (N, H, W, C) images and (N, features) vectors")


def _record_scale(c: _Converter, i: int) -> None:
    """An int8 activation's scale into ``quant_scales`` (symmetric), or its range into ``range_hints``
    (asymmetric)."""
    kind = c.type_name(i)
    if kind in ("float32", "float16"):
        return
    q = c.quant(i)
    if kind not in ("int8", "uint8"):
        raise c.err(f"tensor {c.name(i)!r} is {kind}: only float32 and int8 activations are supported (compile "
                    f"the float model with --precision int16 for 16-bit)")
    if q is None:
        raise c.err(f"{kind} tensor {c.name(i)!r} has no quantization scale")
    scale, zp, _ = q
    if scale.size != 1:
        raise c.err(f"tensor {c.name(i)!r} has per-axis activation scales (the DLA's activations have one)")
    symmetric = 128 if kind == "uint8" else 0
    if not np.isfinite(scale[0]) or scale[0] <= 0:
        raise c.err(f"tensor {c.name(i)!r} has scale {scale[0]}, not a positive number")
    z = int(zp.reshape(-1)[0])
    if z == symmetric:  # kept exactly (``compiler.model_scales`` carries it to the views around)
        c.g.quant_scales.setdefault(c.ir[i], float(scale[0]))
    else:  # TFLite's converter's asymmetric int8: the range it covers calibrates the symmetric network
        lo, hi = (-128, 127) if kind == "int8" else (0, 255)
        c.g.range_hints.setdefault(c.ir[i], float(scale[0]) * max(abs(lo - z), abs(hi - z)))


#: Operators whose output the CPU computes in float: the int8 grid TFLite gives it (softmax's 1/256) is moot.
_FLOAT_OUT = frozenset({"SOFTMAX"})


def load_bytes(buf: bytes, path: Path) -> Graph:
    import tflite

    src = str(path)
    if len(buf) < 8 or buf[4:8] != b"TFL3":
        raise CompileError(src, f"not a TFLite flatbuffer (file identifier {bytes(buf[4:8])!r}, expected b'TFL3')")
    try:
        model = tflite.Model.GetRootAs(buf, 0)
        if model.SubgraphsLength() < 1:
            raise CompileError(src, "the model has no subgraph")
        c = _Converter(path, buf, model)
        names = _builtin_names()
        ops: list[_Op] = []
        for j in range(c.sg.OperatorsLength()):
            fo = c.sg.Operators(j)
            if fo.OpcodeIndex() >= model.OperatorCodesLength():
                raise CompileError(src, f"operator {j} names operator code {fo.OpcodeIndex()} of "
                                        f"{model.OperatorCodesLength()}")
            oc = model.OperatorCodes(fo.OpcodeIndex())
            code = max(oc.BuiltinCode(), oc.DeprecatedBuiltinCode())
            kind = names.get(code, f"builtin {code}")
            if kind == "CUSTOM":
                kind = f"CUSTOM {(oc.CustomCode() or b'').decode('utf-8', 'replace')}"
            ins = [int(i) for i in fo.InputsAsNumpy()] if fo.InputsLength() else []
            outs = [int(i) for i in fo.OutputsAsNumpy()] if fo.OutputsLength() else []
            if any(i >= c.sg.TensorsLength() for i in ins + outs) or not outs:
                raise CompileError(src, f"operator {j} ({kind}) names a tensor out of range or has no output")
            ops.append(_Op(kind, ins, outs, fo.BuiltinOptions(), j))
        for i in (int(i) for i in c.sg.InputsAsNumpy()):
            c.here, c.kind = c.name(i), "input"
            name = c.fresh(c.name(i))
            c.g.inputs.append(name)
            c.g.shapes[name] = _ir_shape(c, i)
            c.ir[i] = name
            _record_scale(c, i)
        for o in ops:
            c.here, c.kind = c.name(o.outputs[0]), o.kind
            if o.kind not in OPS:
                raise c.err(f"unsupported TFLite operator (supported: {', '.join(sorted(OPS))})")
            if len(o.outputs) != 1:
                raise c.err(f"{len(o.outputs)} outputs (one supported)")
            y = OPS[o.kind](c, o)
            if y in c.padded:
                c.ir[o.outputs[0]] = y
                continue
            c.ir[o.outputs[0]] = y
            if o.kind not in _FLOAT_OUT:
                _record_scale(c, o.outputs[0])
            want = c.tflite_shape(o.outputs[0])
            got = c.shape(y)
            nhwc = (got[0], got[2], got[3], got[1]) if len(got) == 4 else got
            if want and tuple(want) != tuple(nhwc):
                raise c.err(f"computes {list(nhwc)} where the model declares {list(want)}")
        for i in (int(i) for i in c.sg.OutputsAsNumpy()):
            if i not in c.ir:
                raise CompileError(src, f"model output {c.name(i)!r} is never produced")
            if c.ir[i] in c.padded:
                raise CompileError(src, f"model output {c.name(i)!r} is a PAD output (not supported)")
            c.g.outputs.append(c.ir[i])
    except CompileError:
        raise
    except (IndexError, ValueError, TypeError, AttributeError, OverflowError, UnicodeError, struct.error) as e:
        raise CompileError(src, f"corrupt TFLite flatbuffer ({type(e).__name__}: {e})") from None
    if not c.g.inputs or not c.g.outputs:
        raise CompileError(src, "the model has no input or no output")
    return infer_shapes(c.g)


def load(path: str | Path) -> Graph:
    """Convert a ``.tflite`` file to a shape-inferred canonical ``Graph``."""
    path = Path(path)
    try:
        buf = path.read_bytes()
    except OSError as e:
        raise CompileError(str(path), f"cannot read ({e.strerror or e})") from None
    return load_bytes(buf, path)


def load_file(path: Path, weights: Path | None, seed: int) -> Graph:
    """``compiler.frontend.load_model``'s entry: a .tflite file carries its weights."""
    return load(path)
