"""Caffe frontend: a prototxt (+ optional binary .caffemodel) -> the canonical float graph IR.

Reads both the current ``layer`` form and the legacy V1 ``layers`` form (in either file), keeps the
layers a deploy run (phase TEST) would instantiate, and maps each one to the ops of ``compiler.ir``
with Caffe's exact semantics (ceil-mode pooling, BatchNorm's scale factor blob, Eltwise coefficients,
in-place layers). Anything it cannot express exactly is a one-line ``CompileError`` naming the file and
the layer, never a silently different network.
"""
from __future__ import annotations

import math
import re
import warnings
import zlib
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np
from google.protobuf import text_format
from google.protobuf.message import DecodeError

from compiler.errors import CompileError, node_where
from compiler.frontend.weights import non_finite
from compiler.ir import Graph, Node, Shape
from compiler.ops import infer_shapes
from compiler.proto import caffe_pb2 as pb
from golden.budget import MemoryBudgetError, check_size
from golden.registry import Registry

# V1 enum -> the string type Caffe uses since 2015 (so one converter handles both forms).
V1_TYPES: dict[str, str] = {
    "ABSVAL": "AbsVal", "ACCURACY": "Accuracy", "ARGMAX": "ArgMax", "BNLL": "BNLL", "CONCAT": "Concat",
    "CONTRASTIVE_LOSS": "ContrastiveLoss", "CONVOLUTION": "Convolution", "DATA": "Data",
    "DECONVOLUTION": "Deconvolution", "DROPOUT": "Dropout", "DUMMY_DATA": "DummyData",
    "EUCLIDEAN_LOSS": "EuclideanLoss", "ELTWISE": "Eltwise", "EXP": "Exp", "FLATTEN": "Flatten",
    "HDF5_DATA": "HDF5Data", "HDF5_OUTPUT": "HDF5Output", "HINGE_LOSS": "HingeLoss", "IM2COL": "Im2col",
    "IMAGE_DATA": "ImageData", "INFOGAIN_LOSS": "InfogainLoss", "INNER_PRODUCT": "InnerProduct",
    "LRN": "LRN", "MEMORY_DATA": "MemoryData", "MULTINOMIAL_LOGISTIC_LOSS": "MultinomialLogisticLoss",
    "MVN": "MVN", "POOLING": "Pooling", "POWER": "Power", "RELU": "ReLU", "SIGMOID": "Sigmoid",
    "SIGMOID_CROSS_ENTROPY_LOSS": "SigmoidCrossEntropyLoss", "SILENCE": "Silence", "SOFTMAX": "Softmax",
    "SOFTMAX_LOSS": "SoftmaxWithLoss", "SPLIT": "Split", "SLICE": "Slice", "TANH": "TanH",
    "WINDOW_DATA": "WindowData", "THRESHOLD": "Threshold",
}

# Layers that produce the network's inputs.
DATA_TYPES = {"Input", "Data", "ImageData", "MemoryData", "DummyData", "HDF5Data", "WindowData",
              "AnnotatedData"}
# Layers that only matter for training/evaluation: dropped from a deploy graph.
SKIP_TYPES = {"Accuracy", "Silence", "EuclideanLoss", "HingeLoss", "InfogainLoss", "ContrastiveLoss",
              "MultinomialLogisticLoss", "SigmoidCrossEntropyLoss", "HDF5Output"}



# ---- reading the files ---------------------------------------------------------------------------------
def _parse_text(path: Path) -> pb.NetParameter:
    """Parse a text prototxt; unknown fields (from Caffe forks) are tolerated with a warning, syntax
    errors become "<file>:<line>:<col>: ..."."""
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise CompileError(str(path), "not a text prototxt (is it a binary .caffemodel?)") from None
    except OSError as e:
        raise CompileError(str(path), f"cannot read: {e.strerror or e}") from None
    net = pb.NetParameter()
    try:
        text_format.Parse(text, net)
        return net
    except text_format.ParseError as e:
        first = e
    if "has no field named" in str(first):
        net = pb.NetParameter()
        try:
            text_format.Parse(text, net, allow_unknown_field=True)
        except text_format.ParseError as e:
            first = e
        else:
            if net.layer or net.layers:  # not, say, a solver file that only shares some field names
                warnings.warn(f"{path}:{first.GetLine()}:{first.GetColumn()}: {_parse_msg(first)} (ignored)",
                              stacklevel=3)
                return net
    raise CompileError(f"{path}:{first.GetLine()}:{first.GetColumn()}", _parse_msg(first)) from None


def _parse_msg(e: text_format.ParseError) -> str:
    """The parser's message without its own "line:col : " prefix."""
    return re.sub(r"^\d+:\d+\s*:\s*", "", str(e))


def _parse_binary(path: Path) -> pb.NetParameter:
    try:
        data = path.read_bytes()
    except OSError as e:
        raise CompileError(str(path), f"cannot read: {e.strerror or e}") from None
    net = pb.NetParameter()
    try:
        net.ParseFromString(data)
    except (DecodeError, ValueError, RuntimeError) as e:
        raise CompileError(str(path), f"not a valid binary caffemodel (truncated or corrupt): {e}") from None
    if not net.layer and not net.layers:
        raise CompileError(str(path), "not a binary caffemodel: it holds no layers")
    return net


def _upgrade_v1(v1: pb.V1LayerParameter, where_file: str) -> pb.LayerParameter:
    """A legacy V1 layer as a current LayerParameter (same *_param messages, string type)."""
    layer = pb.LayerParameter(name=v1.name)
    tname = pb.V1LayerParameter.LayerType.Name(v1.type) if v1.HasField("type") else "NONE"
    if tname == "NONE":
        raise CompileError(node_where(where_file, v1.name, "V1"),
                           "legacy layer without a type (a pre-2015 V0 layer? upgrade the file with "
                           "Caffe's upgrade_net_proto_text/binary)")
    layer.type = V1_TYPES[tname]
    layer.bottom.extend(v1.bottom)
    layer.top.extend(v1.top)
    layer.include.extend(v1.include)
    layer.exclude.extend(v1.exclude)
    layer.blobs.extend(v1.blobs)
    layer.loss_weight.extend(v1.loss_weight)
    new_fields = pb.LayerParameter.DESCRIPTOR.fields_by_name
    for fd, value in v1.ListFields():
        if fd.name.endswith("_param") and fd.name in new_fields:
            getattr(layer, fd.name).CopyFrom(value)
    return layer


def _layers(net: pb.NetParameter, source: str) -> list[pb.LayerParameter]:
    if net.layer and net.layers:
        raise CompileError(source, "mixes the `layer` and legacy `layers` forms")
    if net.layers:
        return [_upgrade_v1(v, source) for v in net.layers]
    return list(net.layer)


def _rule_met(rule: pb.NetStateRule, state: pb.NetState) -> bool:
    """Caffe's NetStateRule match for a deploy (TEST) state."""
    if rule.HasField("phase") and rule.phase != state.phase:
        return False
    if rule.HasField("min_level") and state.level < rule.min_level:
        return False
    if rule.HasField("max_level") and state.level > rule.max_level:
        return False
    if any(s not in state.stage for s in rule.stage):
        return False
    return not any(s in state.stage for s in rule.not_stage)


def _active(layer: pb.LayerParameter, state: pb.NetState) -> bool:
    if layer.include:
        return any(_rule_met(r, state) for r in layer.include)
    return not any(_rule_met(r, state) for r in layer.exclude)


def _blob_array(blob: pb.BlobProto) -> tuple[np.ndarray, Shape]:
    """(flat float32 data, declared shape) of a blob, either shape style."""
    if blob.data:
        data = np.asarray(blob.data, dtype=np.float32)
    else:
        data = np.asarray(blob.double_data, dtype=np.float64).astype(np.float32)
    if blob.HasField("shape"):
        shape = tuple(int(d) for d in blob.shape.dim)
    elif any(blob.HasField(f) for f in ("num", "channels", "height", "width")):
        shape = (blob.num, blob.channels, blob.height, blob.width)
    else:
        shape = (data.size,)
    return data, shape


def _f32(v: float) -> float:
    """A float32 field as the shortest decimal that is the same float32 (1e-4, not 9.99999974e-05)."""
    return float(str(np.float32(v)))


def _squeeze(shape: Sequence[int]) -> tuple[int, ...]:
    return tuple(int(d) for d in shape if d != 1)


# ---- the converter -----------------------------------------------------------------------------------------
class _Converter:
    """Walks the active layers once, keeping the current IR tensor of every Caffe blob name."""

    def __init__(self, net: pb.NetParameter, prototxt: Path, caffemodel: Path | None,
                 weights: dict[str, list[pb.BlobProto]] | None, seed: int) -> None:
        self.net = net
        self.source = str(prototxt)
        self.caffemodel = caffemodel
        self.weights = weights
        self.seed = seed
        self.g = Graph(name=net.name or prototxt.stem, source=self.source)
        self.cur: dict[str, str] = {}          # Caffe blob -> IR tensor holding its current value
        self.final: dict[str, str] = {}        # IR tensor -> Caffe blob, for every version
        self.remaining: dict[str, int] = {}    # productions of a blob still to come
        self.tensor_names: set[str] = set()
        self.node_names: set[str] = set()
        self.input_blobs: set[str] = set()
        self.silenced: set[str] = set()
        self.layer: pb.LayerParameter | None = None

    # -- naming -------------------------------------------------------------------------------------------
    def _unique(self, base: str, taken: set[str]) -> str:
        name, i = base, 1
        while name in taken:
            name = f"{base}_{i}"
            i += 1
        taken.add(name)
        return name

    def tensor(self, base: str) -> str:
        return self._unique(base, self.tensor_names)

    def node_name(self, base: str) -> str:
        return self._unique(base, self.node_names)

    def _out(self, blob: str, producer: str, is_input: bool = False) -> str:
        """IR name of a new version of ``blob``: its last version (what Caffe's blob holds after a
        forward pass) keeps the plain name, earlier in-place versions get ``blob@layer``."""
        self.remaining[blob] -= 1
        if is_input or (self.remaining[blob] == 0 and blob not in self.input_blobs):
            name = blob
        else:
            name = self.tensor(f"{blob}@{producer}")
        self.final[name] = blob
        return name

    # -- errors -------------------------------------------------------------------------------------------
    def where(self, layer: pb.LayerParameter | None = None) -> str:
        layer = layer or self.layer
        assert layer is not None
        return node_where(self.source, layer.name, layer.type)

    def err(self, msg: str) -> CompileError:
        return CompileError(self.where(), msg)

    def unsupported(self, what: str) -> CompileError:
        return self.err(f"unsupported: {what}")

    # -- graph building -----------------------------------------------------------------------------------
    def shape(self, t: str) -> Shape:
        return self.g.shapes[t]

    def const(self, base: str, value: np.ndarray) -> str:
        name = self.tensor(f"{self.layer.name}/{base}")
        self.g.consts[name] = np.ascontiguousarray(value, dtype=np.float32)
        self.g.shapes[name] = tuple(self.g.consts[name].shape)
        return name

    def add(self, op: str, inputs: list[str], outputs: list[str] | None = None, suffix: str = "",
            **attrs: object) -> list[str]:
        """Append a node (outputs default to one fresh tensor) and infer its output shapes now, so later
        layers can read them; shape errors are reported against the Caffe layer."""
        base = self.layer.name + (f"/{suffix}" if suffix else "")
        if outputs is None:
            outputs = [self.tensor(base)]
        node = Node(self.node_name(base), op, list(inputs), list(outputs), dict(attrs))
        self.g.nodes.append(node)
        try:
            infer_shapes(self.g, [node])
        except CompileError as e:
            raise self.err(e.msg) from None
        for t in outputs:  # a huge pad or kernel makes a huge cube: refuse it here, before int64 math wraps it
            shape = list(self.g.shapes[t])
            try:
                check_size(f"tensor {t!r} {shape} (float32)", math.prod(shape) * 4)
            except (MemoryBudgetError, ValueError) as exc:  # ValueError: a negative dimension
                raise self.err(str(exc)) from None
        return outputs

    # -- weights ------------------------------------------------------------------------------------------
    def rng(self) -> np.random.Generator:
        """Per-layer generator: random weights depend on the seed and the layer name only."""
        return np.random.default_rng([int(self.seed) % (1 << 64), zlib.crc32(self.layer.name.encode())])

    def blobs(self, expected: list[tuple[str, Shape]],
              fill: Callable[[np.random.Generator], list[np.ndarray]]) -> list[np.ndarray]:
        """The layer's blobs checked against ``expected`` (name, shape) -- from the caffemodel by layer
        name, else from the prototxt itself, else random from ``fill`` when no caffemodel was given."""
        layer = self.layer
        src: Sequence[pb.BlobProto] | None = None
        origin = str(self.caffemodel)
        if self.weights is not None:
            src = self.weights.get(layer.name)
            if not src:
                raise self.err(f"has no weights in {self.caffemodel}")
        elif layer.blobs:
            src, origin = layer.blobs, self.source
        if src is None:
            values = sum(int(np.prod(shp, dtype=object)) for _, shp in expected)
            try:  # random weights are drawn in float64: bound them before drawing
                check_size(f"random {', '.join(f'{n} {list(shp)}' for n, shp in expected)}", values * 8)
            except MemoryBudgetError as exc:
                raise self.err(str(exc)) from None
            arrays = fill(self.rng())
            return [np.asarray(a, dtype=np.float32).reshape(s) for a, (_, s) in zip(arrays, expected)]
        if len(src) != len(expected):
            names = ", ".join(n for n, _ in expected)
            raise self.err(f"has {len(src)} blobs in {origin}, expected {len(expected)} ({names})")
        out = []
        for i, (blob, (what, shape)) in enumerate(zip(src, expected)):
            data, declared = _blob_array(blob)
            if int(np.prod(declared, dtype=np.int64)) != data.size:
                raise self.err(f"blob {i} ({what}) in {origin} has {data.size} values for its shape "
                               f"{list(declared)}")
            if tuple(declared) != tuple(shape) and _squeeze(declared) != _squeeze(shape):
                raise self.err(f"blob {i} ({what}) in {origin} has shape {list(declared)}, "
                               f"the layer needs {list(shape)}")
            if why := non_finite(data):
                raise self.err(f"blob {i} ({what}) in {origin} {why}")
            out.append(data.reshape(shape))
        return out

    # -- the walk -----------------------------------------------------------------------------------------
    def run(self) -> Graph:
        net = self.net
        layers = _layers(net, self.source)
        state = pb.NetState(phase=pb.TEST, level=net.state.level)
        state.stage.extend(net.state.stage)
        active = [l for l in layers if _active(l, state)]

        # Count the productions of every blob, so the last one keeps the blob's name.
        all_blobs: set[str] = set(net.input)
        for t in net.input:
            self.remaining[t] = self.remaining.get(t, 0) + 1
            self.input_blobs.add(t)
        for l in active:
            all_blobs.update(l.bottom)
            all_blobs.update(l.top)
            if l.type in SKIP_TYPES:
                continue
            tops = list(l.top)
            if l.type in DATA_TYPES and l.type != "Input":
                tops = tops[:1]  # the label top is not a network input
            for t in tops:
                self.remaining[t] = self.remaining.get(t, 0) + 1
            if l.type in DATA_TYPES:
                self.input_blobs.update(tops)
        self.tensor_names |= all_blobs

        self._net_inputs()
        for l in active:
            self.layer = l
            self._layer(l)
        self.layer = None
        return self._finish()

    def _add_input(self, blob: str, shape: Sequence[int], where: str) -> None:
        dims = [int(d) for d in shape]
        if not dims or any(d < 1 for d in dims[1:]):
            raise CompileError(where, f"input {blob!r} has an invalid shape {dims}")
        dims[0] = 1  # the compiler runs batch 1
        elements = 1
        for d in dims:
            elements *= d
        try:  # before any shape arithmetic: numpy's int64 would wrap a 2^63 dim into a negative layer size
            check_size(f"input {blob!r} {dims} (float32)", elements * 4)
        except MemoryBudgetError as exc:
            raise CompileError(where, str(exc)) from None
        name = self._out(blob, "input", is_input=True)
        if name in self.g.inputs:
            raise CompileError(where, f"input {blob!r} is declared twice")
        self.g.inputs.append(name)
        self.g.shapes[name] = tuple(dims)
        self.cur[blob] = name

    def _net_inputs(self) -> None:
        """Inputs declared at net level: ``input`` with ``input_shape`` or 4 ``input_dim`` each."""
        net = self.net
        if not net.input:
            if net.input_shape or net.input_dim:
                raise CompileError(self.source, "input_shape/input_dim given without `input` names")
            return
        n = len(net.input)
        if net.input_shape:
            if len(net.input_shape) != n:
                raise CompileError(self.source, f"{n} inputs but {len(net.input_shape)} input_shape entries")
            shapes = [list(s.dim) for s in net.input_shape]
        elif net.input_dim:
            if len(net.input_dim) != 4 * n:
                raise CompileError(self.source, f"{n} inputs need {4 * n} input_dim values, "
                                                f"got {len(net.input_dim)}")
            dims = list(net.input_dim)
            shapes = [dims[4 * i:4 * i + 4] for i in range(n)]
        else:
            raise CompileError(self.source, f"input {net.input[0]!r} has no input_shape or input_dim")
        for blob, shape in zip(net.input, shapes):
            self._add_input(blob, shape, self.source)

    def _layer(self, l: pb.LayerParameter) -> None:
        if l.type in SKIP_TYPES:
            if l.type == "Silence":
                self.silenced.update(self.cur.get(b, b) for b in l.bottom)
            return
        if l.type in DATA_TYPES:
            self._data_layer(l)
            return
        handler = HANDLERS.get(l.type)
        if handler is None:
            raise self.err("unsupported layer type")
        xs = []
        # A deploy run of SoftmaxWithLoss is the softmax of its scores: the label bottom is not needed.
        for b in l.bottom[:1] if l.type == "SoftmaxWithLoss" else l.bottom:
            if b not in self.cur:
                raise self.err(f"bottom {b!r} is not produced by any earlier layer")
            xs.append(self.cur[b])
        if not l.top:
            raise self.err("has no top")
        outs = [self._out(t, l.name) for t in l.top]
        handler(self, l, xs, outs)
        for t, o in zip(l.top, outs):
            self.cur[t] = o

    def _data_layer(self, l: pb.LayerParameter) -> None:
        """Input/Data-style layers become graph inputs; their (label) second top is dropped."""
        where = self.where(l)
        if l.type == "Input":
            shapes = [list(s.dim) for s in l.input_param.shape]
            if len(shapes) == 1:
                shapes = shapes * len(l.top)
            if len(shapes) != len(l.top):
                raise CompileError(where, f"{len(l.top)} tops but {len(shapes)} input_param shapes")
            for t, s in zip(l.top, shapes):
                self._add_input(t, s, where)
            return
        if not l.top:
            return
        shape: list[int] | None = None
        crop = l.transform_param.crop_size
        if l.type == "MemoryData":
            p = l.memory_data_param
            shape = [1, p.channels, p.height, p.width]
        elif l.type == "DummyData":
            p = l.dummy_data_param
            if p.shape:
                shape = list(p.shape[0].dim)
            elif p.num:
                shape = [p.num[0], p.channels[0], p.height[0], p.width[0]]
        elif l.type == "ImageData":
            p = l.image_data_param
            c = 3 if p.is_color else 1
            if crop:
                shape = [1, c, crop, crop]
            elif p.new_height and p.new_width:
                shape = [1, c, p.new_height, p.new_width]
        if shape is None:
            raise CompileError(where, "the shape of this data layer's blobs is in its database; use a "
                                      "deploy prototxt (Input layer or input_shape)")
        self._add_input(l.top[0], shape, where)

    def _finish(self) -> Graph:
        g = self.g
        if not g.inputs:
            raise CompileError(self.source, "the network declares no input (input, input_shape or an "
                                            "Input layer)")
        consumed = {t for n in g.nodes for t in n.inputs}
        last = set(self.cur.values())
        produced = [o for n in g.nodes for o in n.outputs]
        g.outputs = [t for t in produced
                     if t in last and t not in consumed and t not in self.silenced and t in self.final]
        if not g.outputs:
            raise CompileError(self.source, "the network has no output (every top is consumed)")
        g.prune()
        infer_shapes(g)
        return g


# ---- layer handlers ------------------------------------------------------------------------------------------
Handler = Callable[[_Converter, pb.LayerParameter, list[str], list[str]], None]
HANDLERS: Registry[Handler] = Registry("Caffe layer type")


handles = HANDLERS.register


def _one_in(c: _Converter, xs: list[str], outs: list[str]) -> str:
    if len(xs) != 1:
        raise c.unsupported(f"{len(xs)} bottoms (takes 1)")
    if len(outs) != 1:
        raise c.unsupported(f"{len(outs)} tops (makes 1)")
    return xs[0]


def _axis(c: _Converter, axis: int, rank: int) -> int:
    if not -rank <= axis < rank:
        raise c.err(f"axis {axis} is out of range for a {rank}-D input")
    return axis % rank


def _hw(c: _Converter, p: Any, rep: str, h: str, w: str, default: int | None) -> tuple[int, int]:
    """A 2-D parameter given as ``rep`` (1 or 2 values) or as ``h``/``w`` fields."""
    if p.HasField(h) or p.HasField(w):
        vh = getattr(p, h) if p.HasField(h) else default
        vw = getattr(p, w) if p.HasField(w) else default
        if vh is None or vw is None:
            raise c.err(f"{h} and {w} must be given together")
        return int(vh), int(vw)
    vals = list(getattr(p, rep))
    if not vals:
        if default is None:
            raise c.err(f"{rep} is not set")
        return default, default
    if len(vals) == 1:
        return int(vals[0]), int(vals[0])
    if len(vals) == 2:
        return int(vals[0]), int(vals[1])
    raise c.unsupported(f"{len(vals)}-D {rep} (2-D only)")


def _he(rng: np.random.Generator, shape: Shape, fan_in: int) -> np.ndarray:
    return rng.normal(0.0, math.sqrt(2.0 / max(fan_in, 1)), size=shape)


def _small(rng: np.random.Generator, n: int) -> np.ndarray:
    return rng.normal(0.0, 0.05, size=(n,))


@handles("Convolution", "Deconvolution")
def _conv(c: _Converter, l: pb.LayerParameter, xs: list[str], outs: list[str]) -> None:
    x = _one_in(c, xs, outs)
    p = l.convolution_param
    s = c.shape(x)
    if len(s) != 4:
        raise c.unsupported(f"{len(s)}-D input (2-D NCHW convolution only)")
    if _axis(c, p.axis, 4) != 1:
        raise c.unsupported(f"channel axis {p.axis}")
    kh, kw = _hw(c, p, "kernel_size", "kernel_h", "kernel_w", None)
    ph, pw = _hw(c, p, "pad", "pad_h", "pad_w", 0)
    sh, sw = _hw(c, p, "stride", "stride_h", "stride_w", 1)
    dil = list(p.dilation)
    if len(dil) > 2:
        raise c.unsupported(f"{len(dil)}-D dilation")
    dh, dw = (dil * 2)[:2] if dil else (1, 1)
    if min(kh, kw, sh, sw, dh, dw) < 1:
        raise c.err("kernel, stride and dilation must be positive")
    k, grp, cin = int(p.num_output), int(p.group), s[1]
    if k < 1:
        raise c.err("num_output is not set")
    if grp < 1 or cin % grp or k % grp:
        raise c.err(f"group {grp} does not divide the {cin} input and {k} output channels")
    deconv = l.type == "Deconvolution"
    wshape = (cin, k // grp, kh, kw) if deconv else (k, cin // grp, kh, kw)
    expected = [("weights", wshape)] + ([("bias", (k,))] if p.bias_term else [])
    fan_in = (cin // grp) * kh * kw
    w, *b = c.blobs(expected, lambda r: [_he(r, wshape, fan_in)] + ([_small(r, k)] if p.bias_term else []))
    inputs = [x, c.const("W", w)] + ([c.const("B", b[0])] if b else [])
    attrs: dict[str, object] = dict(strides=(sh, sw), pads=(ph, pw, ph, pw), dilations=(dh, dw), group=grp)
    if deconv:
        attrs["output_padding"] = (0, 0)
    c.add("ConvTranspose" if deconv else "Conv", inputs, outs, **attrs)


@handles("InnerProduct")
def _fc(c: _Converter, l: pb.LayerParameter, xs: list[str], outs: list[str]) -> None:
    x = _one_in(c, xs, outs)
    p = l.inner_product_param
    s = c.shape(x)
    if len(s) < 2 or _axis(c, p.axis, len(s)) != 1:
        raise c.unsupported(f"axis {p.axis} on a {len(s)}-D input (flattening from axis 1 only)")
    k, cin = int(p.num_output), int(np.prod(s[1:], dtype=np.int64))
    if k < 1:
        raise c.err("num_output is not set")
    wshape = (cin, k) if p.transpose else (k, cin)
    expected = [("weights", wshape)] + ([("bias", (k,))] if p.bias_term else [])
    w, *b = c.blobs(expected, lambda r: [_he(r, wshape, cin)] + ([_small(r, k)] if p.bias_term else []))
    if p.transpose:
        w = w.T
    if len(s) != 2:
        x = c.add("Flatten", [x], suffix="flatten", axis=1)[0]
    c.add("Gemm", [x, c.const("W", w)] + ([c.const("B", b[0])] if b else []), outs)


def caffe_pool_size(size: int, k: int, s: int, pad: int, ceil: bool, any_pad: bool) -> int:
    """Caffe's pooled size: ceil (or floor) division, then drop a last window that would start inside
    the bottom/right padding (only when some padding is set, as Caffe does)."""
    num = size + 2 * pad - k
    out = (-(-num // s) if ceil else num // s) + 1
    if any_pad and (out - 1) * s >= size + pad:
        out -= 1
    return out


@handles("Pooling")
def _pool(c: _Converter, l: pb.LayerParameter, xs: list[str], outs: list[str]) -> None:
    x = _one_in(c, xs, outs)
    p = l.pooling_param
    s = c.shape(x)
    if len(s) != 4:
        raise c.unsupported(f"{len(s)}-D input (NCHW only)")
    if p.pool == pb.PoolingParameter.STOCHASTIC:
        raise c.unsupported("STOCHASTIC pooling")
    is_max = p.pool == pb.PoolingParameter.MAX
    if p.global_pooling:
        c.add("GlobalMaxPool" if is_max else "GlobalAveragePool", [x], outs)
        return
    if p.HasField("kernel_h") or p.HasField("kernel_w"):
        kh, kw = int(p.kernel_h), int(p.kernel_w)
    elif p.HasField("kernel_size"):
        kh = kw = int(p.kernel_size)
    else:
        raise c.err("kernel_size is not set")
    if p.HasField("pad_h") or p.HasField("pad_w"):
        ph, pw = int(p.pad_h), int(p.pad_w)
    else:
        ph = pw = int(p.pad)
    if p.HasField("stride_h") or p.HasField("stride_w"):
        sh, sw = int(p.stride_h), int(p.stride_w)
    else:
        sh = sw = int(p.stride)
    if min(kh, kw, sh, sw) < 1:
        raise c.err("kernel and stride must be positive")
    if ph >= kh or pw >= kw:
        raise c.err(f"pad ({ph}, {pw}) must be smaller than the kernel ({kh}, {kw})")
    ceil = p.round_mode == pb.PoolingParameter.CEIL
    h, w = s[2], s[3]
    oh = caffe_pool_size(h, kh, sh, ph, ceil, bool(ph or pw))
    ow = caffe_pool_size(w, kw, sw, pw, ceil, bool(ph or pw))
    if oh < 1 or ow < 1:
        raise c.err(f"kernel {kh}x{kw} does not fit the {h}x{w} input")
    # Windows running past the padding (ceil mode) are expressed as extra bottom/right padding.
    eh = max(0, (oh - 1) * sh + kh - (h + 2 * ph))
    ew = max(0, (ow - 1) * sw + kw - (w + 2 * pw))
    attrs: dict[str, object] = dict(kernel=(kh, kw), strides=(sh, sw), pads=(ph, pw, ph + eh, pw + ew))
    if not is_max:
        # Caffe's divisor counts the padding but not a ceil-mode window's overhang past it.
        attrs["count_include_pad"] = not (eh or ew)
        if (eh or ew) and (ph or pw):
            attrs["divisor_pads"] = (ph, pw, ph, pw)
    c.add("MaxPool" if is_max else "AveragePool", [x], outs, **attrs)
    if c.shape(outs[0])[2:] != (oh, ow):  # pragma: no cover - guards the padding arithmetic
        raise c.err(f"internal: pooled size {c.shape(outs[0])[2:]} != Caffe's {(oh, ow)}")


@handles("ReLU")
def _relu(c: _Converter, l: pb.LayerParameter, xs: list[str], outs: list[str]) -> None:
    x = _one_in(c, xs, outs)
    slope = _f32(l.relu_param.negative_slope)
    if slope == 0.0:
        c.add("Relu", [x], outs)
    else:
        c.add("LeakyRelu", [x], outs, alpha=_f32(slope))


@handles("ReLU6")
def _relu6(c: _Converter, l: pb.LayerParameter, xs: list[str], outs: list[str]) -> None:
    c.add("Clip", [_one_in(c, xs, outs)], outs, min=0.0, max=6.0)


@handles("Clip")
def _clip(c: _Converter, l: pb.LayerParameter, xs: list[str], outs: list[str]) -> None:
    x = _one_in(c, xs, outs)
    p = l.clip_param
    if not (p.HasField("min") and p.HasField("max")):
        raise c.err("clip_param needs min and max")
    if p.min > p.max:
        raise c.err(f"clip min {p.min} is above max {p.max}")
    c.add("Clip", [x], outs, min=_f32(p.min), max=_f32(p.max))


@handles("Sigmoid", "TanH", "Dropout", "Split")
def _unary(c: _Converter, l: pb.LayerParameter, xs: list[str], outs: list[str]) -> None:
    if len(xs) != 1:
        raise c.unsupported(f"{len(xs)} bottoms (takes 1)")
    if l.type == "Split":
        for i, o in enumerate(outs):
            c.add("Identity", xs, [o], suffix=str(i) if i else "")
        return
    op = {"Sigmoid": "Sigmoid", "TanH": "Tanh", "Dropout": "Identity"}[l.type]
    c.add(op, [_one_in(c, xs, outs)], outs)


def _channels(c: _Converter, x: str) -> int:
    s = c.shape(x)
    if len(s) < 2:
        raise c.unsupported(f"{len(s)}-D input (needs a channel axis)")
    return s[1]


@handles("PReLU")
def _prelu(c: _Converter, l: pb.LayerParameter, xs: list[str], outs: list[str]) -> None:
    x = _one_in(c, xs, outs)
    n = 1 if l.prelu_param.channel_shared else _channels(c, x)
    (slope,) = c.blobs([("slope", (n,))], lambda r: [np.full(n, 0.25)])
    c.add("PRelu", [x, c.const("slope", slope)], outs)


def _affine(c: _Converter, x: str, scale: np.ndarray, bias: np.ndarray, outs: list[str] | None = None,
            suffix: str = "") -> str:
    cc = _channels(c, x)
    scale = np.broadcast_to(np.asarray(scale, np.float32).reshape(-1), (cc,))
    bias = np.broadcast_to(np.asarray(bias, np.float32).reshape(-1), (cc,))
    pre = f"{suffix}_" if suffix else ""
    return c.add("ChannelAffine", [x, c.const(pre + "scale", scale), c.const(pre + "bias", bias)], outs,
                 suffix=suffix)[0]


@handles("BatchNorm")
def _bn(c: _Converter, l: pb.LayerParameter, xs: list[str], outs: list[str]) -> None:
    x = _one_in(c, xs, outs)
    n = _channels(c, x)
    mean, var, factor = c.blobs([("mean", (n,)), ("variance", (n,)), ("scale factor", (1,))],
                                lambda r: [np.zeros(n), np.ones(n), np.ones(1)])
    # Caffe scales the stored statistics by 1/factor, or by 0 when the factor is 0.
    f = 0.0 if float(factor[0]) == 0.0 else 1.0 / float(factor[0])
    mean, var = mean.astype(np.float64) * f, var.astype(np.float64) * f
    eps = _f32(l.batch_norm_param.eps)
    if np.any(var + eps <= 0):
        k = int(np.argmax(var + eps <= 0))
        raise c.err(f"blob 1 (variance) is {var[k]:g} at channel {k} (after the scale factor): variance + eps "
                    f"({eps:g}) must be > 0 (a variance is never negative)")
    inv = 1.0 / np.sqrt(var + eps)
    _affine(c, x, inv, -mean * inv, outs)


def _param_span(c: _Converter, x: str, axis: int, num_axes: int) -> tuple[int, ...]:
    """Shape a Scale/Bias parameter spans; only per-channel or scalar parameters are supported."""
    s = c.shape(x)
    a = _axis(c, axis, len(s))
    span = tuple(s[a:] if num_axes < 0 else s[a:a + num_axes])
    if num_axes == 0 or all(d == 1 for d in span):
        return span
    if a == 1 and all(d == 1 for d in span[1:]):
        return span
    raise c.unsupported(f"a parameter over axes {a}..{a + len(span) - 1} of {list(s)} (per-channel only)")


@handles("Scale")
def _scale(c: _Converter, l: pb.LayerParameter, xs: list[str], outs: list[str]) -> None:
    if len(xs) != 1:
        raise c.unsupported(f"Scale with {len(xs)} bottoms (learned single-bottom Scale only)")
    x = _one_in(c, xs, outs)
    p = l.scale_param
    span = _param_span(c, x, p.axis, p.num_axes)
    n = int(np.prod(span, dtype=np.int64))
    expected = [("scale", span)] + ([("bias", span)] if p.bias_term else [])
    got = c.blobs(expected, lambda r: [1.0 + _small(r, n)] + ([_small(r, n)] if p.bias_term else []))
    _affine(c, x, got[0], got[1] if p.bias_term else np.zeros(1), outs)


@handles("Bias")
def _bias(c: _Converter, l: pb.LayerParameter, xs: list[str], outs: list[str]) -> None:
    if len(xs) != 1:
        raise c.unsupported(f"Bias with {len(xs)} bottoms (learned single-bottom Bias only)")
    x = _one_in(c, xs, outs)
    span = _param_span(c, x, l.bias_param.axis, l.bias_param.num_axes)
    n = int(np.prod(span, dtype=np.int64))
    (b,) = c.blobs([("bias", span)], lambda r: [_small(r, n)])
    _affine(c, x, np.ones(1), b, outs)


@handles("Power")
def _power(c: _Converter, l: pb.LayerParameter, xs: list[str], outs: list[str]) -> None:
    x = _one_in(c, xs, outs)
    p = l.power_param
    if p.power != 1.0:
        raise c.unsupported(f"power {p.power} (only power 1, an affine map, is supported)")
    if p.scale == 1.0 and p.shift == 0.0:
        c.add("Identity", [x], outs)
    else:
        _affine(c, x, np.full(1, p.scale), np.full(1, p.shift), outs)


@handles("Eltwise")
def _eltwise(c: _Converter, l: pb.LayerParameter, xs: list[str], outs: list[str]) -> None:
    p = l.eltwise_param
    if len(outs) != 1 or not xs:
        raise c.unsupported(f"{len(xs)} bottoms and {len(outs)} tops")
    E = pb.EltwiseParameter
    op = {E.SUM: "Add", E.PROD: "Mul", E.MAX: "Max"}[p.operation]
    coeff = [_f32(v) for v in p.coeff]
    if coeff and op != "Add":
        raise c.err("coefficients are only allowed for SUM")
    if coeff and len(coeff) != len(xs):
        raise c.err(f"{len(coeff)} coefficients for {len(xs)} bottoms")
    terms = list(xs)
    for i, k in enumerate(coeff):
        if k != 1.0:
            terms[i] = _affine(c, terms[i], np.full(1, k), np.zeros(1), suffix=f"coeff{i}")
    if len(terms) == 1:
        c.add("Identity", terms, outs)
        return
    acc = terms[0]
    for i, t in enumerate(terms[1:], start=1):
        last = i == len(terms) - 1
        acc = c.add(op, [acc, t], outs if last else None, suffix="" if last else f"{op.lower()}{i}")[0]


@handles("Concat")
def _concat(c: _Converter, l: pb.LayerParameter, xs: list[str], outs: list[str]) -> None:
    p = l.concat_param
    if len(outs) != 1 or not xs:
        raise c.unsupported(f"{len(xs)} bottoms and {len(outs)} tops")
    axis = p.axis if p.HasField("axis") or not p.HasField("concat_dim") else p.concat_dim
    axis = _axis(c, axis, len(c.shape(xs[0])))
    if len(xs) == 1:
        c.add("Identity", xs, outs)
    else:
        c.add("Concat", xs, outs, axis=axis)


@handles("Slice")
def _slice(c: _Converter, l: pb.LayerParameter, xs: list[str], outs: list[str]) -> None:
    if len(xs) != 1:
        raise c.unsupported(f"{len(xs)} bottoms (takes 1)")
    p = l.slice_param
    s = c.shape(xs[0])
    axis = p.axis if p.HasField("axis") or not p.HasField("slice_dim") else p.slice_dim
    axis = _axis(c, axis, len(s))
    size, n = s[axis], len(outs)
    points = [int(v) for v in p.slice_point]
    if points:
        if len(points) != n - 1:
            raise c.err(f"{len(points)} slice points for {n} tops (needs {n - 1})")
        bounds = [0] + points + [size]
        if any(a >= b for a, b in zip(bounds, bounds[1:])):
            raise c.err(f"slice points {points} are not increasing inside (0, {size})")
        sizes = [b - a for a, b in zip(bounds, bounds[1:])]
    else:
        if size % n:
            raise c.err(f"axis {axis} of size {size} does not split evenly into {n} tops")
        sizes = [size // n] * n
    if n == 1:
        c.add("Identity", xs, outs)
    else:
        c.add("Split", xs, outs, axis=axis, split=tuple(sizes))


@handles("Flatten")
def _flatten(c: _Converter, l: pb.LayerParameter, xs: list[str], outs: list[str]) -> None:
    x = _one_in(c, xs, outs)
    s = c.shape(x)
    a = _axis(c, l.flatten_param.axis, len(s))
    e = _axis(c, l.flatten_param.end_axis, len(s))
    if e < a:
        raise c.err(f"end_axis {l.flatten_param.end_axis} is before axis {l.flatten_param.axis}")
    if a == 1 and e == len(s) - 1:
        c.add("Flatten", [x], outs, axis=1)
        return
    shape = tuple(s[:a]) + (int(np.prod(s[a:e + 1], dtype=np.int64)),) + tuple(s[e + 1:])
    c.add("Reshape", [x], outs, shape=shape)


@handles("Reshape")
def _reshape(c: _Converter, l: pb.LayerParameter, xs: list[str], outs: list[str]) -> None:
    x = _one_in(c, xs, outs)
    p = l.reshape_param
    s = list(c.shape(x))
    start = p.axis if p.axis >= 0 else p.axis + len(s) + 1
    if not 0 <= start <= len(s):
        raise c.err(f"axis {p.axis} is out of range for a {len(s)}-D input")
    end = len(s) if p.num_axes == -1 else start + p.num_axes
    if p.num_axes < -1 or end > len(s):
        raise c.err(f"num_axes {p.num_axes} is out of range for a {len(s)}-D input")
    spec = [int(d) for d in p.shape.dim]
    mid: list[int] = []
    for i, d in enumerate(spec):
        if d == 0:
            if start + i >= len(s):
                raise c.err(f"dim {i} is 0 (copy) but the input has no axis {start + i}")
            mid.append(s[start + i])
        elif d < -1:
            raise c.err(f"invalid dim {d}")
        else:
            mid.append(d)
    if mid.count(-1) > 1:
        raise c.err("more than one dim is -1")
    new = s[:start] + mid + s[end:]
    total = int(np.prod(s, dtype=np.int64))
    if -1 in new:
        known = int(np.prod([d for d in new if d != -1], dtype=np.int64))
        if known == 0 or total % known:
            raise c.err(f"cannot reshape {s} to {spec}")
        new[new.index(-1)] = total // known
    if int(np.prod(new, dtype=np.int64)) != total:
        raise c.err(f"cannot reshape {s} to {new}")
    c.add("Reshape", [x], outs, shape=tuple(new))


@handles("LRN")
def _lrn(c: _Converter, l: pb.LayerParameter, xs: list[str], outs: list[str]) -> None:
    x = _one_in(c, xs, outs)
    p = l.lrn_param
    if p.norm_region != pb.LRNParameter.ACROSS_CHANNELS:
        raise c.unsupported("LRN WITHIN_CHANNEL (ACROSS_CHANNELS only)")
    if p.local_size % 2 == 0:
        raise c.err(f"local_size {p.local_size} must be odd")
    # Caffe: x / (k + alpha/n * sum x^2)^beta -- the same formula as the IR's (ONNX's) LRN.
    c.add("LRN", [x], outs, size=int(p.local_size), alpha=_f32(p.alpha), beta=_f32(p.beta), bias=_f32(p.k))


@handles("Softmax", "SoftmaxWithLoss")
def _softmax(c: _Converter, l: pb.LayerParameter, xs: list[str], outs: list[str]) -> None:
    if l.type == "SoftmaxWithLoss":
        # A train_val net's loss: in deploy it is the softmax of its first bottom (labels dropped).
        xs, outs = xs[:1], outs[:1]
    x = _one_in(c, xs, outs)
    axis = _axis(c, l.softmax_param.axis, len(c.shape(x)))
    c.add("Softmax", [x], outs, axis=axis)


# ---- entry point --------------------------------------------------------------------------------------------
def load(prototxt: Path, caffemodel: Path | None = None, *, seed: int = 0) -> Graph:
    """Build the IR graph of a Caffe net: structure from ``prototxt``, weights by layer name from
    ``caffemodel``, or seeded random weights (deterministic per seed and layer name) without one."""
    prototxt = Path(prototxt)
    net = _parse_text(prototxt)
    weights: dict[str, list[pb.BlobProto]] | None = None
    if caffemodel is not None:
        caffemodel = Path(caffemodel)
        model = _parse_binary(caffemodel)
        weights = {}
        for l in model.layer:
            weights.setdefault(l.name, list(l.blobs))
        for v in model.layers:
            weights.setdefault(v.name, list(v.blobs))
    return _Converter(net, prototxt, caffemodel, weights, seed).run()


def load_file(path: Path, weights: Path | None, seed: int) -> Graph:
    """``compiler.frontend.load_model``'s entry: without weights, seeded random ones."""
    return load(path, weights, seed=seed)
