"""PNNX frontend: ``model.pnnx.param`` + ``model.pnnx.bin``, the graph format of PyTorch's pnnx exporter (and of
ncnn and KuiperInfer, which load it), producing the same canonical IR as the other frontends.

The param file is text: a magic line (7767517), "<operators> <operands>", then one line per operator:
``type name n_in n_out in... out... key=value... @attr=(shape)type... #operand=(shape)type...``. Parameters
are None, True/False, ints, floats, strings and tuples/lists of them; ``@attr`` names a tensor stored in the
bin file, a zip archive (stored, uncompressed) whose entry ``<operator>.<attr>`` holds its raw little-endian
data. PyTorch computes NCHW, like the IR, so no layout conversion is needed.

Each PNNX operator type is one registration in ``OPERATORS``; anything else is a one-line ``CompileError``
naming the file, the operator and its type.
"""
from __future__ import annotations

import re
import zipfile
from pathlib import Path
from typing import Any, Callable

import numpy as np

from compiler.errors import CompileError, node_where
from compiler.frontend.naming import FreshNames
from compiler.frontend.weights import non_finite
from compiler.ir import Graph, Node, Shape
from compiler.ops import infer_shapes
from golden.registry import Registry

MAGIC = 7767517
#: PNNX element type names -> numpy dtypes (the ones weights come in).
DTYPES = {"f32": np.float32, "f64": np.float64, "f16": np.float16, "i32": np.int32, "i64": np.int64,
          "i16": np.int16, "i8": np.int8, "u8": np.uint8}

Handler = Callable[["_Op"], None]
#: PNNX operator type -> handler(op).
OPERATORS: Registry[Handler] = Registry("PNNX operator")
operator = OPERATORS.register


def parse_value(text: str) -> Any:
    """A PNNX parameter value: None, bool, int, float, string, or a tuple of them."""
    if text in ("None", "()", "[]"):
        return None
    if text in ("True", "False"):
        return text == "True"
    if text[:1] in "([" and text[-1:] in ")]":
        return tuple(parse_value(e) for e in text[1:-1].split(","))
    if re.fullmatch(r"-?\d+", text):
        return int(text)
    try:
        return float(text)
    except ValueError:
        return text


class _Op:
    """One operator line being converted: its parameters, attribute tensors and IR tensors."""

    def __init__(self, conv: "_Converter", kind: str, name: str, inputs: list[str], outputs: list[str],
                 params: dict[str, Any], attrs: dict[str, np.ndarray]) -> None:
        self.conv, self.kind, self.name = conv, kind, name
        self.inputs, self.outputs, self.params, self.attrs = inputs, outputs, params, attrs

    def err(self, msg: str) -> CompileError:
        return CompileError(node_where(self.conv.source, self.name, self.kind), msg)

    def param(self, key: str, default: Any = ...) -> Any:
        if key in self.params:
            return self.params[key]
        if default is ...:
            raise self.err(f"parameter {key!r} is missing")
        return default

    def pair(self, key: str, default: Any = ...) -> tuple[int, int]:
        v = self.param(key, default)
        v = v if isinstance(v, tuple) else (v, v)
        if len(v) != 2 or not all(isinstance(i, int) for i in v):
            raise self.err(f"parameter {key}={v} is not one or two integers")
        return int(v[0]), int(v[-1])

    def attr(self, key: str) -> np.ndarray:
        if key not in self.attrs:
            raise self.err(f"attribute @{key} is missing")
        return self.attrs[key]

    def shape(self, t: str) -> Shape:
        return self.conv.g.shapes[t]

    def const(self, key: str, value: np.ndarray) -> str:
        g = self.conv.g
        name = self.conv.fresh(f"{self.name}.{key}")
        g.consts[name] = np.ascontiguousarray(value, dtype=np.float32)
        g.shapes[name] = tuple(g.consts[name].shape)
        return name

    def emit(self, op: str, inputs: list[str], output: str | None = None, **attrs: Any) -> str:
        """Append an IR node writing ``output`` (the operator's own output by default)."""
        g = self.conv.g
        out = output or self.conv.fresh(f"{self.name}/{op.lower()}")
        node = Node(self.conv.fresh(f"{self.name}/{op.lower()}" if output is None else self.name), op, list(inputs),
                    [out], dict(attrs))
        g.nodes.append(node)
        try:
            infer_shapes(g, [node])
        except CompileError as e:
            raise self.err(e.msg) from None
        return out

    def one(self, op: str, inputs: list[str] | None = None, **attrs: Any) -> None:
        """The operator as one IR node from its inputs to its output."""
        if len(self.outputs) != 1:
            raise self.err(f"{len(self.outputs)} outputs (one expected)")
        self.emit(op, inputs if inputs is not None else self.inputs[:1], self.outputs[0], **attrs)


class _Converter:
    def __init__(self, source: str, name: str) -> None:
        self.source = source
        self.g = Graph(name=name, source=source)
        self.fresh = FreshNames(self.g)


# ---- operators -----------------------------------------------------------------------------------------------
@operator("pnnx.Output")
def _output(op: _Op) -> None:
    op.conv.g.outputs.extend(op.inputs)


@operator("nn.Conv2d", "F.conv2d")
def _conv(op: _Op) -> None:
    if op.param("padding_mode", "zeros") != "zeros":
        raise op.err(f"padding_mode={op.param('padding_mode')} is not supported (zeros only)")
    w = op.attr("weight")
    if w.ndim != 4:
        raise op.err(f"weight of shape {list(w.shape)} is not (out, in/groups, kh, kw)")
    padding = op.param("padding", 0)
    stride, dilation = op.pair("stride", 1), op.pair("dilation", 1)
    if padding == "same":
        if stride != (1, 1):
            raise op.err("padding='same' with a stride (PyTorch refuses it too)")
        total = [d * (k - 1) for d, k in zip(dilation, w.shape[2:])]
        pads = (total[0] // 2, total[1] // 2, total[0] - total[0] // 2, total[1] - total[1] // 2)
    elif padding == "valid":
        pads = (0, 0, 0, 0)
    else:
        ph, pw = op.pair("padding", 0)
        pads = (ph, pw, ph, pw)
    inputs = [op.inputs[0], op.const("weight", w)]
    if op.param("bias", "bias" in op.attrs) and "bias" in op.attrs:
        inputs.append(op.const("bias", op.attr("bias")))
    op.one("Conv", inputs, strides=stride, pads=pads, dilations=dilation, group=int(op.param("groups", 1)))


@operator("nn.Linear", "F.linear")
def _linear(op: _Op) -> None:
    x = op.inputs[0]
    if len(op.shape(x)) != 2:
        raise op.err(f"Linear on a {len(op.shape(x))}-D input (flatten it first)")
    inputs = [x, op.const("weight", op.attr("weight"))]
    if op.param("bias", "bias" in op.attrs) and "bias" in op.attrs:
        inputs.append(op.const("bias", op.attr("bias")))
    op.one("Gemm", inputs)


@operator("nn.BatchNorm2d")
def _batch_norm(op: _Op) -> None:
    mean = op.attr("running_mean").astype(np.float64)
    var = op.attr("running_var").astype(np.float64)
    gamma = op.attr("weight").astype(np.float64) if op.param("affine", True) else np.ones_like(mean)
    beta = op.attr("bias").astype(np.float64) if op.param("affine", True) else np.zeros_like(mean)
    if np.any(var < 0):
        raise op.err("negative running_var")
    scale = gamma / np.sqrt(var + float(op.param("eps", 1e-5)))
    op.one("ChannelAffine", [op.inputs[0], op.const("scale", scale), op.const("shift", beta - mean * scale)])


@operator("nn.ReLU", "F.relu")
def _relu(op: _Op) -> None:
    op.one("Relu")


@operator("nn.ReLU6", "F.relu6")
def _relu6(op: _Op) -> None:
    op.one("Clip", min=0.0, max=6.0)


@operator("nn.Hardtanh", "F.hardtanh")
def _hardtanh(op: _Op) -> None:
    op.one("Clip", min=float(op.param("min_val", -1.0)), max=float(op.param("max_val", 1.0)))


@operator("nn.LeakyReLU", "F.leaky_relu")
def _leaky(op: _Op) -> None:
    op.one("LeakyRelu", alpha=float(op.param("negative_slope", 0.01)))


@operator("nn.Sigmoid", "F.sigmoid", "torch.sigmoid")
def _sigmoid(op: _Op) -> None:
    op.one("Sigmoid")


@operator("nn.Tanh", "F.tanh", "torch.tanh")
def _tanh(op: _Op) -> None:
    op.one("Tanh")


@operator("nn.Dropout", "nn.Dropout2d", "F.dropout", "nn.Identity")
def _identity(op: _Op) -> None:
    op.one("Identity")


def _pool(op: _Op, kind: str) -> None:
    kernel = op.pair("kernel_size")
    stride = op.pair("stride", kernel) if op.param("stride", None) is not None else kernel
    ph, pw = op.pair("padding", 0)
    if op.pair("dilation", 1) != (1, 1):
        raise op.err("dilated pooling is not supported")
    if op.param("return_indices", False):
        raise op.err("return_indices=True is not supported")
    if op.param("divisor_override", None) is not None:
        raise op.err("divisor_override is not supported")
    _, _, h, w = op.shape(op.inputs[0])
    extra = [0, 0]
    if op.param("ceil_mode", False):  # PyTorch's rule (as ONNX's): the last window starts inside input + pad
        for i, (size, k, s, p) in enumerate(((h, kernel[0], stride[0], ph), (w, kernel[1], stride[1], pw))):
            out = -(-(size + 2 * p - k) // s) + 1
            if (out - 1) * s >= size + p:
                out -= 1
            extra[i] = max(0, (out - 1) * s + k - (size + 2 * p))
    attrs: dict[str, Any] = dict(kernel=kernel, strides=stride, pads=(ph, pw, ph + extra[0], pw + extra[1]))
    if kind == "AveragePool":
        include = bool(op.param("count_include_pad", True))
        attrs["count_include_pad"] = include and not any(extra)
        if include and any(extra):  # PyTorch clips a ceil-mode window at the padded border, as Caffe does
            attrs["divisor_pads"] = (ph, pw, ph, pw)
    op.one(kind, **attrs)


@operator("nn.MaxPool2d", "F.max_pool2d")
def _max_pool(op: _Op) -> None:
    _pool(op, "MaxPool")


@operator("nn.AvgPool2d", "F.avg_pool2d")
def _avg_pool(op: _Op) -> None:
    _pool(op, "AveragePool")


@operator("nn.AdaptiveAvgPool2d", "F.adaptive_avg_pool2d", "nn.AdaptiveMaxPool2d", "F.adaptive_max_pool2d")
def _adaptive(op: _Op) -> None:
    size = op.param("output_size")
    size = size if isinstance(size, tuple) else (size, size)
    if tuple(size) != (1, 1):
        raise op.err(f"output_size={size}: only global pooling (1, 1) is supported")
    op.one("GlobalMaxPool" if "max" in op.kind.lower() else "GlobalAveragePool")


@operator("torch.flatten")
def _flatten(op: _Op) -> None:
    shape = op.shape(op.inputs[0])
    if op.param("start_dim", 0) != 1 or op.param("end_dim", -1) not in (-1, len(shape) - 1):
        raise op.err("only flatten(x, 1) (start_dim=1, end_dim=-1) is supported")
    op.one("Flatten", axis=1)


@operator("Tensor.view", "Tensor.reshape", "torch.reshape")
def _reshape(op: _Op) -> None:
    shape = op.param("shape")
    shape = shape if isinstance(shape, tuple) else (shape,)
    src = op.shape(op.inputs[0])
    if len(shape) == 2 and shape[0] in (1, -1) and shape[1] in (-1, int(np.prod(src[1:]))):
        op.one("Flatten", axis=1)
        return
    total = int(np.prod(src))
    known = int(np.prod([d for d in shape if d != -1]))
    op.one("Reshape", shape=tuple(total // known if d == -1 else int(d) for d in shape))


@operator("torch.cat")
def _cat(op: _Op) -> None:
    dim = int(op.param("dim", 0)) % len(op.shape(op.inputs[0]))
    op.one("Concat", list(op.inputs), axis=dim)


@operator("F.softmax", "nn.Softmax", "torch.softmax")
def _softmax(op: _Op) -> None:
    op.one("Softmax", axis=int(op.param("dim", -1)) % len(op.shape(op.inputs[0])))


_EXPRESSIONS = {"add": "Add", "mul": "Mul", "max": "Max", "maximum": "Max"}


@operator("pnnx.Expression")
def _expression(op: _Op) -> None:
    """``expr=add(@0,@1)`` and the like: one binary op of two inputs of the same shape (a residual add)."""
    m = re.fullmatch(r"(\w+)\(@(\d+),@(\d+)\)", str(op.param("expr")))
    if m is None or m.group(1) not in _EXPRESSIONS:
        raise op.err(f"expression {op.param('expr')!r} is not supported (add, mul or max of two inputs)")
    a, b = op.inputs[int(m.group(2))], op.inputs[int(m.group(3))]
    if op.shape(a) != op.shape(b):
        raise op.err(f"{m.group(1)} of shapes {list(op.shape(a))} and {list(op.shape(b))} (no broadcasting)")
    op.one(_EXPRESSIONS[m.group(1)], [a, b])


# ---- the reader ------------------------------------------------------------------------------------------------
def _operand_spec(text: str, where: Callable[[str], CompileError]) -> tuple[tuple[int, ...], str]:
    """``(1,3,224,224)f32`` -> (shape, type)."""
    m = re.fullmatch(r"\(([^)]*)\)(\w+)", text)
    if m is None:
        raise where(f"shape {text!r} is not (d0,d1,...)type")
    dims = [d for d in m.group(1).split(",") if d]
    if any(not re.fullmatch(r"\d+", d) for d in dims):
        raise where(f"shape {text!r} has unknown dimensions (export with a fixed input shape)")
    return tuple(int(d) for d in dims), m.group(2)


def _bin_path(param: Path) -> Path:
    name = param.name
    return param.with_name(name[: -len(".param")] + ".bin") if name.endswith(".param") else param.with_suffix(".bin")


def load(param: str | Path, weights: str | Path | None = None) -> Graph:
    """Convert ``model.pnnx.param`` (+ its ``.bin``, by default beside it) to a shape-inferred ``Graph``."""
    param = Path(param)
    src = str(param)
    binpath = Path(weights) if weights is not None else _bin_path(param)
    try:
        lines = param.read_text().splitlines()
    except (OSError, UnicodeDecodeError) as e:
        raise CompileError(src, f"not a readable PNNX param file ({e})") from None
    if not lines or lines[0].strip() != str(MAGIC):
        raise CompileError(src, f"not a PNNX param file (first line must be {MAGIC})")
    try:
        archive = zipfile.ZipFile(binpath)
    except (OSError, zipfile.BadZipFile) as e:
        raise CompileError(str(binpath), f"not a PNNX weight archive (a zip file): {e}") from None
    conv = _Converter(src, param.name.split(".")[0])
    with archive:
        entries = set(archive.namelist())
        for number, line in enumerate(lines[2:], 3):
            fields = line.split()
            if not fields:
                continue
            if len(fields) < 4 or not fields[2].isdigit() or not fields[3].isdigit():
                raise CompileError(f"{src}:{number}", "an operator line is: type name inputs outputs ...")
            kind, name, n_in, n_out = fields[0], fields[1], int(fields[2]), int(fields[3])
            names = fields[4:4 + n_in + n_out]
            if len(names) != n_in + n_out:
                raise CompileError(f"{src}:{number}", f"operator {name!r} lists fewer operands than {n_in + n_out}")

            def where(msg: str, _name=name, _kind=kind) -> CompileError:
                return CompileError(f"{src}:{number}: layer '{_name}' ({_kind})", msg)

            params: dict[str, Any] = {}
            attrs: dict[str, np.ndarray] = {}
            shapes: dict[str, tuple[tuple[int, ...], str]] = {}
            for item in fields[4 + n_in + n_out:]:
                key, _, value = item.partition("=")
                if key.startswith("@"):
                    shape, dtype = _operand_spec(value, where)
                    entry = f"{name}.{key[1:]}"
                    if dtype not in DTYPES:
                        raise where(f"attribute {key} of type {dtype} is not supported")
                    if entry not in entries:
                        raise where(f"attribute {key}: no entry {entry!r} in {binpath}")
                    data = archive.read(entry)
                    count = int(np.prod(shape)) if shape else 0
                    want = count * np.dtype(DTYPES[dtype]).itemsize
                    if len(data) != want:
                        raise where(f"attribute {key}: {len(data)} bytes in {binpath}, {want} expected for "
                                    f"{list(shape)} {dtype}")
                    value_array = np.frombuffer(data, dtype=np.dtype(DTYPES[dtype]).newbyteorder("<")).reshape(shape)
                    if why := non_finite(value_array):
                        raise where(f"attribute {key} {why}")
                    attrs[key[1:]] = value_array.astype(np.float32)
                elif key.startswith("#"):
                    shapes[key[1:]] = _operand_spec(value, where)
                elif key.startswith("$"):
                    continue  # named inputs: positional order is enough here
                else:
                    params[key] = parse_value(value)
            ins, outs = names[:n_in], names[n_in:]
            missing = [t for t in ins if t not in conv.g.shapes]
            if missing:
                raise where(f"inputs {missing} are not produced by earlier operators")
            if kind == "pnnx.Input":
                for t in outs:
                    if t not in shapes:
                        raise where(f"input {t!r} has no shape (#{t}=(...)f32)")
                    shape, dtype = shapes[t]
                    if dtype not in ("f32", "f16", "f64"):
                        raise where(f"input {t!r} of type {dtype}: only float inputs are supported")
                    conv.g.inputs.append(t)
                    conv.g.shapes[t] = shape
                continue
            if kind not in OPERATORS:
                raise where(f"unsupported PNNX operator (supported: {', '.join(sorted(OPERATORS))})")
            OPERATORS[kind](_Op(conv, kind, name, ins, outs, params, attrs))
            for t in outs:
                if t in shapes and t in conv.g.shapes and tuple(conv.g.shapes[t]) != shapes[t][0]:
                    raise where(f"output {t!r} is {list(conv.g.shapes[t])} here, {list(shapes[t][0])} in the file")
    if not conv.g.inputs or not conv.g.outputs:
        raise CompileError(src, "no pnnx.Input or no pnnx.Output")
    return infer_shapes(conv.g)


def load_file(path: Path, weights: Path | None, seed: int) -> Graph:
    """``compiler.frontend.load_model``'s entry."""
    return load(path, weights)
