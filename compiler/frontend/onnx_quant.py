"""Pre-quantized ONNX models: QDQ (QuantizeLinear/DequantizeLinear around float ops) and QOperator (QLinearConv,
QLinearMatMul, QGemm, QLinearAdd, ...), as onnxruntime's quantizer and PyTorch's exporter write them.

The IR stays float: an int8 tensor q at scale s is the float tensor s * q, and the model's scales are kept
(``Graph.quant_scales`` for activations, ``weight_scale`` on Conv/Gemm for per-filter weight scales) so the
compiler uses them instead of calibrating, and re-quantizes the model's weights to exactly its own int8 values.

The DLA's int8 tensors are symmetric: a zero point must be 0 (int8), or 128 for uint8 (the same values shifted,
folded exactly); any other zero point, per-axis activation scales, or 16-bit quantization types are refused
with the reason. Constant weights behind a DequantizeLinear are folded (by the importer's constant folding)
and their per-output-channel scales recorded here first.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import onnx

from compiler.frontend.onnx_registry import CONVERTERS, attrs as _attrs, converts as _converts

_Importer = Any  # compiler.frontend.onnx._Importer (not imported: it imports this module)


def _conv(im: _Importer, node: onnx.NodeProto, name: str) -> None:
    CONVERTERS["Conv"](im, node, name)


def _gemm(im: _Importer, node: onnx.NodeProto, name: str) -> None:
    CONVERTERS["Gemm"](im, node, name)


def _pool(im: _Importer, node: onnx.NodeProto, name: str) -> None:
    CONVERTERS[node.op_type](im, node, name)

#: com.microsoft ops of onnxruntime's QOperator format this frontend converts.
MS_OPS = frozenset({"QLinearAdd", "QLinearMul", "QGemm", "QLinearGlobalAveragePool", "QLinearAveragePool",
                    "QLinearConcat", "QLinearSoftmax", "QLinearSigmoid", "QLinearLeakyRelu"})


def _scale_zp(im: _Importer, node: onnx.NodeProto, scale: str, zp: str | None, what: str) -> float:
    """A per-tensor activation scale whose zero point the DLA's symmetric int8 can hold."""
    s = im.need_const(node, scale, f"{what} scale")
    if np.size(s) != 1:
        raise im.err(node, f"per-axis {what} scales are not supported (the DLA's activations have one scale; "
                           f"onnxruntime quantizes an unfolded BatchNorm's output per channel: fold it first with "
                           f"onnxruntime.quantization.shape_inference.quant_pre_process)")
    z = im.const(zp) if zp else None
    if z is not None:
        value = int(np.asarray(z).reshape(-1)[0])
        if z.dtype == np.uint8 and value == 128:
            pass  # uint8 - 128 is int8: the same grid, folded exactly
        elif z.dtype not in (np.int8, np.uint8):
            raise im.err(node, f"{what} zero point of type {z.dtype}: only 8-bit quantization is supported")
        elif value != 0:
            raise im.err(node, f"{what} zero point {value} ({z.dtype}): the DLA's int8 tensors are symmetric; "
                               f"quantize with symmetric activations (onnxruntime: ActivationSymmetric=True)")
    scale_value = float(np.asarray(s).reshape(-1)[0])
    if not np.isfinite(scale_value) or scale_value <= 0:
        raise im.err(node, f"{what} scale {scale_value} is not a positive number")
    return scale_value


def _record(im: _Importer, tensor: str, scale: float) -> None:
    im.g.quant_scales.setdefault(tensor, scale)


def record_weight_scales(im: _Importer, node: onnx.NodeProto) -> None:
    """Before a DequantizeLinear of constants is folded: the per-output-channel scales of int8 weights (axis
    0, as Conv weights and transposed Gemm weights hold them)."""
    q = im.const(node.input[0])
    s = im.const(node.input[1])
    if q is None or s is None or q.dtype != np.int8 or q.ndim < 2:
        return
    zp = im.const(node.input[2]) if len(node.input) > 2 and node.input[2] else None
    if zp is not None and np.any(np.asarray(zp) != 0):
        raise im.err(node, "asymmetric weight zero points are not supported (quantize weights symmetrically)")
    axis = int(_attrs(node).get("axis", 1)) % q.ndim
    scale = np.asarray(s, dtype=np.float64).reshape(-1)
    if scale.size == 1:
        scale = np.full(q.shape[0], scale[0])
    elif axis != 0 or scale.size != q.shape[0]:
        return  # another axis: leave the scale to the compiler
    im.weight_scales[node.output[0]] = scale


def fold_constant(im: _Importer, node: onnx.NodeProto) -> None:
    """QuantizeLinear/DequantizeLinear of constants (weights, biases), computed here: onnx's reference
    evaluator lacks some of their opsets. Per-axis scales broadcast along ``axis``; Q rounds half to even and
    saturates to its zero point's type."""
    x = im.raw[node.input[0]]
    s = np.asarray(im.raw[node.input[1]], dtype=np.float64)
    zp = np.asarray(im.raw[node.input[2]]) if len(node.input) > 2 and node.input[2] else None
    axis = int(_attrs(node).get("axis", 1)) % max(x.ndim, 1)
    shape = [1] * x.ndim
    if s.size > 1:
        shape[axis] = s.size
    s = s.reshape(shape) if s.size > 1 else s.reshape(())
    z = zp.astype(np.float64).reshape(shape if zp.size > 1 else ()) if zp is not None else 0.0
    if node.op_type == "DequantizeLinear":
        im.raw[node.output[0]] = ((x.astype(np.float64) - z) * s).astype(np.float32)
        return
    dtype = zp.dtype if zp is not None else np.dtype(np.uint8)
    info = np.iinfo(dtype)
    im.raw[node.output[0]] = np.clip(np.rint(x.astype(np.float64) / s) + z, info.min, info.max).astype(dtype)


# ---- QDQ --------------------------------------------------------------------------------------------------------
@_converts("QuantizeLinear")
def _quantize(im: _Importer, node: onnx.NodeProto, name: str) -> None:
    if len(node.input) < 3 or not node.input[2]:  # ONNX's default: uint8, zero point 0 (0..255)
        raise im.err(node, "no zero point: uint8 with zero point 0 is not symmetric (give an int8 zero point 0)")
    s = _scale_zp(im, node, node.input[1], node.input[2], "activation")
    if int(_attrs(node).get("saturate", 1)) != 1:
        raise im.err(node, "saturate=0 is not supported")
    _record(im, node.input[0], s)
    _record(im, node.output[0], s)
    im.emit("Identity", [node.input[0]], [node.output[0]])


@_converts("DequantizeLinear")
def _dequantize(im: _Importer, node: onnx.NodeProto, name: str) -> None:
    producer = next((n for n in reversed(im.g.nodes) if node.input[0] in n.outputs), None)
    if producer is not None and producer.op == "Softmax":  # the CPU computes it in float: its grid is moot
        im.emit("Identity", [node.input[0]], [node.output[0]])
        return
    s = _scale_zp(im, node, node.input[1], node.input[2] if len(node.input) > 2 else None, "activation")
    _record(im, node.input[0], s)
    _record(im, node.output[0], s)
    im.emit("Identity", [node.input[0]], [node.output[0]])


# ---- QOperator ---------------------------------------------------------------------------------------------------
def _dequantized(im: _Importer, node: onnx.NodeProto, q: str, scale: str, zp: str | None, base: str,
                 axis: int = 0) -> tuple[str, np.ndarray]:
    """A constant int8 operand as float (q * scale per ``axis``), its name, and its per-``axis`` scales."""
    values = im.need_const(node, q, base)
    s = np.asarray(im.need_const(node, scale, f"{base} scale"), dtype=np.float64).reshape(-1)
    z = im.const(zp) if zp else None
    if z is not None and np.any(np.asarray(z) != 0):
        raise im.err(node, f"asymmetric {base} zero points are not supported")
    shape = [1] * values.ndim
    if s.size > 1:
        shape[axis] = s.size
    real = values.astype(np.float64) * s.reshape(shape)
    per = s if s.size > 1 else np.full(values.shape[axis], s[0])
    name = im.fresh(base)
    im.raw[name] = real.astype(np.float32)  # a constant the float converters read
    return name, per


def _alias(node: onnx.NodeProto, inputs: list[str], outputs: list[str]) -> onnx.NodeProto:
    """A float node standing for a QLinear one, for the float converters."""
    return onnx.helper.make_node(node.op_type.replace("QLinear", "").replace("QGemm", "Gemm"), inputs, outputs,
                                 name=node.name, **{a.name: onnx.helper.get_attribute_value(a) for a in node.attribute
                                                    if a.name not in ("domain",)})


@_converts("QLinearConv")
def _qlinear_conv(im: _Importer, node: onnx.NodeProto, name: str) -> None:
    i = list(node.input) + [""] * (9 - len(node.input))
    _record(im, i[0], _scale_zp(im, node, i[1], i[2], "input"))
    w, per = _dequantized(im, node, i[3], i[4], i[5], f"{name}_W")
    inputs = [i[0], w]
    if i[8]:  # int32 bias at input scale x weight scale
        x_s = im.g.quant_scales[i[0]]
        bias_name = im.fresh(f"{name}_B")
        im.raw[bias_name] = (im.need_const(node, i[8], "bias").astype(np.float64) * x_s * per).astype(np.float32)
        inputs.append(bias_name)
    y_s = _scale_zp(im, node, i[6], i[7], "output")
    _record(im, node.output[0], y_s)
    im.weight_scales[w] = per
    _conv(im, _alias(node, inputs, [node.output[0]]), name)


@_converts("QLinearMatMul")
def _qlinear_matmul(im: _Importer, node: onnx.NodeProto, name: str) -> None:
    a, a_s, a_zp, b, b_s, b_zp, y_s, y_zp = node.input
    _record(im, a, _scale_zp(im, node, a_s, a_zp, "input"))
    w, per = _dequantized(im, node, b, b_s, b_zp, f"{name}_B", axis=1)
    _record(im, node.output[0], _scale_zp(im, node, y_s, y_zp, "output"))
    wt = im.weight(im.raw[w].T, f"{name}_W")
    im.weight_scales[wt] = per
    im.emit("Gemm", [a, wt], [node.output[0]])


@_converts("QGemm")
def _qgemm(im: _Importer, node: onnx.NodeProto, name: str) -> None:
    i = list(node.input) + [""] * (9 - len(node.input))
    a = _attrs(node)
    _record(im, i[0], _scale_zp(im, node, i[1], i[2], "input"))
    trans_b = int(a.get("transB", 0))
    w, per = _dequantized(im, node, i[3], i[4], i[5], f"{name}_B", axis=0 if trans_b else 1)
    inputs = [i[0], w]
    if i[6]:
        bias_name = im.fresh(f"{name}_C")
        im.raw[bias_name] = (im.need_const(node, i[6], "bias").astype(np.float64) * im.g.quant_scales[i[0]]
                             * per).astype(np.float32)
        inputs.append(bias_name)
    if i[7]:
        _record(im, node.output[0], _scale_zp(im, node, i[7], i[8], "output"))
    im.weight_scales[w] = per
    gemm = onnx.helper.make_node("Gemm", inputs, [node.output[0]], name=node.name, transB=trans_b,
                                 alpha=float(a.get("alpha", 1.0)))
    _gemm(im, gemm, name)


def _binary(im: _Importer, node: onnx.NodeProto, op: str) -> None:
    a, a_s, a_zp, b, b_s, b_zp, y_s, y_zp = (list(node.input) + [""] * 8)[:8]
    _record(im, a, _scale_zp(im, node, a_s, a_zp, "input A"))
    _record(im, b, _scale_zp(im, node, b_s, b_zp, "input B"))
    _record(im, node.output[0], _scale_zp(im, node, y_s, y_zp, "output"))
    if im.shape(node, a) != im.shape(node, b):
        raise im.err(node, f"broadcasting {list(im.shape(node, a))} with {list(im.shape(node, b))} is not supported")
    im.emit(op, [a, b], [node.output[0]])


@_converts("QLinearAdd")
def _qlinear_add(im: _Importer, node: onnx.NodeProto, name: str) -> None:
    _binary(im, node, "Add")


@_converts("QLinearMul")
def _qlinear_mul(im: _Importer, node: onnx.NodeProto, name: str) -> None:
    _binary(im, node, "Mul")


def _unary(im: _Importer, node: onnx.NodeProto, op: str, attrs: dict[str, Any] | None = None) -> None:
    x, x_s, x_zp, y_s, y_zp = (list(node.input) + [""] * 5)[:5]
    _record(im, x, _scale_zp(im, node, x_s, x_zp, "input"))
    _record(im, node.output[0], _scale_zp(im, node, y_s, y_zp, "output"))
    im.emit(op, [x], [node.output[0]], attrs)


@_converts("QLinearGlobalAveragePool")
def _qlinear_gap(im: _Importer, node: onnx.NodeProto, name: str) -> None:
    if int(_attrs(node).get("channels_last", 0)):
        raise im.err(node, "channels_last=1 is not supported")
    _unary(im, node, "GlobalAveragePool")


@_converts("QLinearSigmoid")
def _qlinear_sigmoid(im: _Importer, node: onnx.NodeProto, name: str) -> None:
    _unary(im, node, "Sigmoid")


@_converts("QLinearLeakyRelu")
def _qlinear_leaky(im: _Importer, node: onnx.NodeProto, name: str) -> None:
    _unary(im, node, "LeakyRelu", {"alpha": float(_attrs(node).get("alpha", 0.01))})


@_converts("QLinearSoftmax")
def _qlinear_softmax(im: _Importer, node: onnx.NodeProto, name: str) -> None:
    x, x_s, x_zp, y_s, y_zp = (list(node.input) + [""] * 5)[:5]
    _record(im, x, _scale_zp(im, node, x_s, x_zp, "input"))
    axis = int(_attrs(node).get("axis", -1)) % len(im.shape(node, x))
    im.emit("Softmax", [x], [node.output[0]], {"axis": axis})  # (on the CPU, in float: no output scale needed)


@_converts("QLinearAveragePool")
def _qlinear_avgpool(im: _Importer, node: onnx.NodeProto, name: str) -> None:
    x, x_s, x_zp, y_s, y_zp = (list(node.input) + [""] * 5)[:5]
    _record(im, x, _scale_zp(im, node, x_s, x_zp, "input"))
    _record(im, node.output[0], _scale_zp(im, node, y_s, y_zp, "output"))
    _pool(im, onnx.helper.make_node("AveragePool", [x], [node.output[0]], name=node.name,
                                    **{a.name: onnx.helper.get_attribute_value(a) for a in node.attribute
                                       if a.name != "channels_last"}), name)


@_converts("QLinearConcat")
def _qlinear_concat(im: _Importer, node: onnx.NodeProto, name: str) -> None:
    y_s, y_zp, *rest = node.input
    _record(im, node.output[0], _scale_zp(im, node, y_s, y_zp, "output"))
    xs = []
    for j in range(0, len(rest), 3):
        _record(im, rest[j], _scale_zp(im, node, rest[j + 1], rest[j + 2], "input"))
        xs.append(rest[j])
    im.emit("Concat", xs, [node.output[0]], {"axis": int(_attrs(node).get("axis", 1)) % len(im.shape(node, xs[0]))})
