"""Keras ``.h5`` frontend: a Sequential or functional model saved by Keras 3 (or tf.keras 2) as HDF5, read with
h5py alone (no TensorFlow, no Keras), producing the same canonical IR as the ONNX and Caffe frontends.

The file holds the architecture as JSON (``model_config``) and one group of weights per layer
(``model_weights/<layer>`` with its ``weight_names``). Keras computes channels-last (NHWC); the IR and the
DLA are channels-first, so every 4-D tensor is converted: the network's input and output cubes are NCHW,
kernels are transposed, ``axis=-1`` becomes the channel axis, and a Dense layer reading a flattened cube has
its rows permuted from Keras's (h, w, c) order to the IR's (c, h, w). ``padding="same"`` is TensorFlow's
rule (the odd pixel at the end; average pooling divides by the in-image count).

Each Keras layer class is one registration in ``LAYERS``; a class without one, or a configuration a handler
does not take, is a one-line ``CompileError`` naming the file and the layer.
"""
from __future__ import annotations

import functools
import json
import math
from pathlib import Path
from typing import Any, Callable

import numpy as np

from compiler.errors import CompileError, node_where
from compiler.frontend.naming import FreshNames
from compiler.frontend.weights import non_finite
from compiler.ir import Graph, Node, Shape
from compiler.ops import infer_shapes
from golden.registry import Registry

Handler = Callable[["_Converter", dict, list[str]], str]
#: Keras layer class name -> handler(converter, layer config, IR inputs) -> IR output tensor.
LAYERS: Registry[Handler] = Registry("Keras layer")
layer = LAYERS.register


class _Converter:
    """One model's conversion: the IR graph, the IR tensor of every Keras tensor, and where a 2-D tensor is a
    flattened NHWC cube (so a Dense reading it can reorder its rows)."""

    def __init__(self, path: Path, weights: Any, name: str) -> None:
        self.source = str(path)
        self.weights = weights
        self.g = Graph(name=name, source=self.source)
        self.flat_of: dict[str, tuple[int, int, int]] = {}  # 2-D tensor -> (C, H, W) of the cube it flattens
        self.layer_name = ""
        self.layer_class = ""
        self.fresh = FreshNames(self.g)
        #: ZeroPadding2D outputs, folded into the conv or pool reading them: name -> (input, pads (t, l, b, r))
        self.padded: dict[str, tuple[str, tuple[int, int, int, int]]] = {}

    # ---- naming and errors --------------------------------------------------------------------------------
    def err(self, msg: str) -> CompileError:
        return CompileError(node_where(self.source, self.layer_name, self.layer_class), msg)

    # ---- building ----------------------------------------------------------------------------------------
    def const(self, base: str, value: np.ndarray) -> str:
        name = self.fresh(f"{self.layer_name}/{base}")
        self.g.consts[name] = np.ascontiguousarray(value, dtype=np.float32)
        self.g.shapes[name] = tuple(self.g.consts[name].shape)
        return name

    def add(self, op: str, inputs: list[str], **attrs: Any) -> str:
        out = self.fresh(self.layer_name if op != "Identity" else f"{self.layer_name}/out")
        node = Node(self.fresh(f"{self.layer_name}/{op.lower()}"), op, list(inputs), [out], dict(attrs))
        self.g.nodes.append(node)
        try:
            infer_shapes(self.g, [node])
        except CompileError as e:
            raise self.err(e.msg) from None
        if inputs and inputs[0] in self.flat_of and op in ("Identity", "Relu", "Clip", "Sigmoid", "Tanh",
                                                           "LeakyRelu", "ChannelAffine"):
            self.flat_of[out] = self.flat_of[inputs[0]]
        return out

    def shape(self, t: str) -> Shape:
        if t in self.padded:  # a folded ZeroPadding2D's output: the padded cube
            src, (pt, pl, pb, pr) = self.padded[t]
            n, ch, h, w = self.g.shapes[src]
            return (n, ch, h + pt + pb, w + pl + pr)
        return self.g.shapes[t]

    def unpad(self, t: str) -> tuple[str, tuple[int, int, int, int]]:
        """The tensor a reader really reads and the zero padding folded into it."""
        return self.padded.get(t, (t, (0, 0, 0, 0)))

    def weight(self, key: str, required: bool = True) -> np.ndarray | None:
        """The layer's weight named ``key`` (``kernel``, ``bias``, ``gamma``...), float32."""
        group = self.weights.get(self.layer_name) if self.weights is not None else None
        names = [n.decode() if isinstance(n, bytes) else str(n)
                 for n in (group.attrs.get("weight_names", []) if group is not None else [])]
        for n in names:
            if n.split("/")[-1].split(":")[0] == key:
                try:
                    value = np.asarray(group[n])
                except (KeyError, OSError, ValueError) as e:
                    raise self.err(f"weight {n!r} cannot be read ({e})") from None
                if not np.issubdtype(value.dtype, np.floating):
                    raise self.err(f"weight {n!r} is {value.dtype}, not floating point")
                if why := non_finite(value):
                    raise self.err(f"weight {n!r} {why}")
                return value.astype(np.float32)
        if required:
            raise self.err(f"the file holds no {key!r} weight for this layer (weight names: {names})")
        return None

    def activation(self, x: str, name: str | None) -> str:
        """A layer's ``activation`` argument (or an Activation layer's)."""
        if name in (None, "linear"):
            return x
        if name == "relu":
            return self.add("Relu", [x])
        if name == "relu6":
            return self.add("Clip", [x], min=0.0, max=6.0)
        if name == "sigmoid":
            return self.add("Sigmoid", [x])
        if name == "tanh":
            return self.add("Tanh", [x])
        if name == "softmax":
            return self.add("Softmax", [x], axis=len(self.shape(x)) - 1 if len(self.shape(x)) == 2 else 1)
        raise self.err(f"unsupported activation {name!r} (relu, relu6, sigmoid, tanh, softmax, linear)")

    def channel_axis(self, axis: int, rank: int) -> int:
        """A Keras (channels-last) axis as the IR's."""
        axis = axis % rank
        if rank == 4:
            return {0: 0, 1: 2, 2: 3, 3: 1}[axis]
        return axis


def _pair(v: Any) -> tuple[int, int]:
    v = list(v) if isinstance(v, (list, tuple)) else [v, v]
    return int(v[0]), int(v[-1])


def same_pads(size: tuple[int, int], kernel: tuple[int, int], stride: tuple[int, int],
              dilation: tuple[int, int] = (1, 1)) -> tuple[int, int, int, int]:
    """TensorFlow's ``padding="same"``: output ceil(size / stride), the odd pixel of padding at the end."""
    pads = []
    for n, k, s, d in zip(size, kernel, stride, dilation):
        total = max((math.ceil(n / s) - 1) * s + (k - 1) * d + 1 - n, 0)
        pads.append((total // 2, total - total // 2))
    return pads[0][0], pads[1][0], pads[0][1], pads[1][1]


def _padding(c: _Converter, cfg: dict, x: str, kernel, stride, dilation=(1, 1)) -> tuple[int, int, int, int]:
    mode = str(cfg.get("padding", "valid")).lower()
    if mode == "valid":
        return (0, 0, 0, 0)
    if mode == "same":
        return same_pads(c.shape(x)[2:], kernel, stride, dilation)
    raise c.err(f"unsupported padding {mode!r} (valid, same)")


def _cube(c: _Converter, x: str) -> None:
    if len(c.shape(x)) != 4:
        raise c.err(f"needs a 4-D (N, H, W, C) input, got {len(c.shape(x))}-D")


def _channels_last(c: _Converter, cfg: dict) -> None:
    if cfg.get("data_format", "channels_last") not in (None, "channels_last"):
        raise c.err(f"data_format {cfg['data_format']!r} is not supported (channels_last only)")


# ---- layers --------------------------------------------------------------------------------------------------
def _conv_layer(c: _Converter, cfg: dict, x: str, w: np.ndarray, groups: int) -> str:
    """A Conv2D or DepthwiseConv2D with IR weights ``w`` (K, C/groups, kh, kw): bias, padding, activation."""
    _cube(c, x)
    _channels_last(c, cfg)
    kernel, stride = _pair(cfg["kernel_size"]), _pair(cfg.get("strides", 1))
    dilation = _pair(cfg.get("dilation_rate", 1))
    pads = _padding(c, cfg, x, kernel, stride, dilation)
    x, zero = c.unpad(x)  # a ZeroPadding2D before the conv is more of its padding
    inputs = [x, c.const("W", w)]
    if cfg.get("use_bias", True):
        inputs.append(c.const("B", c.weight("bias")))
    y = c.add("Conv", inputs, strides=stride, pads=tuple(a + b for a, b in zip(pads, zero)),
              dilations=dilation, group=groups)
    return c.activation(y, cfg.get("activation"))


@layer("Conv2D")
def _conv(c: _Converter, cfg: dict, xs: list[str]) -> str:
    w = c.weight("kernel")
    if w.ndim != 4:
        raise c.err(f"kernel of shape {list(w.shape)} is not (kh, kw, C/groups, filters)")
    return _conv_layer(c, cfg, xs[0], w.transpose(3, 2, 0, 1), int(cfg.get("groups", 1)))


@layer("DepthwiseConv2D")
def _depthwise(c: _Converter, cfg: dict, xs: list[str]) -> str:
    dk = c.weight("depthwise_kernel", required=False)  # (kh, kw, C, multiplier); Keras 3 calls it kernel
    dk = dk if dk is not None else c.weight("kernel")
    if dk.ndim != 4:
        raise c.err(f"kernel of shape {list(dk.shape)} is not (kh, kw, C, depth multiplier)")
    kh, kw, ch, mult = dk.shape
    w = dk.transpose(2, 3, 0, 1).reshape(ch * mult, 1, kh, kw)  # output channel c * mult + m
    return _conv_layer(c, cfg, xs[0], w, ch)


@layer("Dense")
def _dense(c: _Converter, cfg: dict, xs: list[str]) -> str:
    x = xs[0]
    if len(c.shape(x)) != 2:
        raise c.err(f"Dense on a {len(c.shape(x))}-D tensor (flatten it first)")
    w = c.weight("kernel")  # (in, units)
    if x in c.flat_of:  # rows in Keras's (h, w, c) flatten order -> the IR's (c, h, w)
        ch, h, wd = c.flat_of[x]
        w = w.reshape(h, wd, ch, -1).transpose(2, 0, 1, 3).reshape(ch * h * wd, -1)
    inputs = [x, c.const("W", w.T)]
    if cfg.get("use_bias", True):
        inputs.append(c.const("B", c.weight("bias")))
    return c.activation(c.add("Gemm", inputs), cfg.get("activation"))


@layer("BatchNormalization")
def _batch_norm(c: _Converter, cfg: dict, xs: list[str]) -> str:
    x = xs[0]
    axis = cfg.get("axis", -1)
    axis = axis[0] if isinstance(axis, list) and len(axis) == 1 else axis
    if not isinstance(axis, int) or axis % len(c.shape(x)) != len(c.shape(x)) - 1:
        raise c.err(f"normalizes axis {axis}; only the channel axis (-1) is supported")
    mean, var = c.weight("moving_mean"), c.weight("moving_variance")
    gamma = c.weight("gamma") if cfg.get("scale", True) else np.ones_like(mean)
    beta = c.weight("beta") if cfg.get("center", True) else np.zeros_like(mean)
    if np.any(var < 0):
        raise c.err("negative moving_variance")
    scale = gamma.astype(np.float64) / np.sqrt(var.astype(np.float64) + float(cfg.get("epsilon", 1e-3)))
    bias = beta - mean * scale
    return c.add("ChannelAffine", [x, c.const("scale", scale), c.const("bias", bias)])


def _pool(c: _Converter, cfg: dict, xs: list[str], *, op: str) -> str:
    x = xs[0]
    _cube(c, x)
    _channels_last(c, cfg)
    kernel = _pair(cfg.get("pool_size", 2))
    stride = _pair(cfg.get("strides") or kernel)
    pads = _padding(c, cfg, x, kernel, stride)
    x, zero = c.unpad(x)
    attrs: dict[str, Any] = dict(kernel=kernel, strides=stride, pads=tuple(a + b for a, b in zip(pads, zero)))
    if op == "AveragePool":
        # TensorFlow divides by the in-image count; zeros a ZeroPadding2D put there are in the image
        attrs["count_include_pad"] = False
        if any(zero):
            attrs["divisor_pads"] = zero
    elif any(zero) and not _nonnegative(c, x):
        raise c.err("max pooling over a ZeroPadding2D of values that may be negative (the zeros would win; "
                    "supported after a ReLU)")
    return c.add(op, [x], **attrs)


def _nonnegative(c: _Converter, t: str) -> bool:
    """Produced by a ReLU (or a clip at 0): zero padding cannot win a max over real values where -inf would
    not (every window holds a real value >= 0)."""
    producer = next((n for n in reversed(c.g.nodes) if t in n.outputs), None)
    return producer is not None and (producer.op == "Relu"
                                     or (producer.op == "Clip" and (producer.attrs.get("min") or 0.0) >= 0.0
                                         and producer.attrs.get("min") is not None))


@layer("ZeroPadding2D")
def _zero_padding(c: _Converter, cfg: dict, xs: list[str]) -> str:
    """Folded into the conv or pool that reads it (the IR has no pad op)."""
    x = xs[0]
    _cube(c, x)
    _channels_last(c, cfg)
    p = cfg.get("padding", 1)
    if isinstance(p, int):
        (t, b), (l, r) = (p, p), (p, p)
    elif all(isinstance(v, int) for v in p):
        (t, b), (l, r) = (p[0], p[0]), (p[1], p[1])
    else:
        (t, b), (l, r) = p
    src, (pt, pl, pb, pr) = c.unpad(x)
    out = c.fresh(c.layer_name)
    c.padded[out] = (src, (pt + int(t), pl + int(l), pb + int(b), pr + int(r)))
    return out


def _global(c: _Converter, cfg: dict, xs: list[str], *, op: str) -> str:
    x = xs[0]
    _cube(c, x)
    _channels_last(c, cfg)
    y = c.add(op, [x])
    return y if cfg.get("keepdims", False) else c.add("Flatten", [y], axis=1)


@layer("Flatten")
def _flatten(c: _Converter, cfg: dict, xs: list[str]) -> str:
    x = xs[0]
    shape = c.shape(x)
    y = c.add("Flatten", [x], axis=1)
    if len(shape) == 4 and shape[2] * shape[3] > 1:
        c.flat_of[y] = (shape[1], shape[2], shape[3])
    return y


@layer("Dropout", "SpatialDropout2D", "GaussianDropout", "GaussianNoise", "AlphaDropout")
def _identity(c: _Converter, cfg: dict, xs: list[str]) -> str:
    return c.add("Identity", [xs[0]])


@layer("Activation")
def _activation(c: _Converter, cfg: dict, xs: list[str]) -> str:
    y = c.activation(xs[0], cfg.get("activation"))
    return y if y != xs[0] else c.add("Identity", [xs[0]])


@layer("ReLU")
def _relu(c: _Converter, cfg: dict, xs: list[str]) -> str:
    slope = float(cfg.get("negative_slope") or 0.0)
    if float(cfg.get("threshold") or 0.0) != 0.0:
        raise c.err("ReLU with a threshold is not supported")
    top = cfg.get("max_value")
    if slope:
        if top is not None:
            raise c.err("ReLU with both negative_slope and max_value is not supported")
        return c.add("LeakyRelu", [xs[0]], alpha=slope)
    return c.add("Relu", [xs[0]]) if top is None else c.add("Clip", [xs[0]], min=0.0, max=float(top))


@layer("LeakyReLU")
def _leaky(c: _Converter, cfg: dict, xs: list[str]) -> str:
    return c.add("LeakyRelu", [xs[0]], alpha=float(cfg.get("negative_slope", cfg.get("alpha", 0.3))))


@layer("Softmax")
def _softmax(c: _Converter, cfg: dict, xs: list[str]) -> str:
    axis = cfg.get("axis", -1)
    return c.add("Softmax", [xs[0]], axis=c.channel_axis(int(axis), len(c.shape(xs[0]))))


def _binary(c: _Converter, cfg: dict, xs: list[str], *, op: str) -> str:
    if len(xs) < 2 or any(c.shape(t) != c.shape(xs[0]) for t in xs):
        raise c.err(f"needs two or more inputs of one shape, got {[list(c.shape(t)) for t in xs]}")
    y = xs[0]
    for t in xs[1:]:
        y = c.add(op, [y, t])
    return y


@layer("Concatenate")
def _concat(c: _Converter, cfg: dict, xs: list[str]) -> str:
    return c.add("Concat", xs, axis=c.channel_axis(int(cfg.get("axis", -1)), len(c.shape(xs[0]))))


for _name, _op in (("MaxPooling2D", "MaxPool"), ("AveragePooling2D", "AveragePool")):
    LAYERS.add(_name, functools.partial(_pool, op=_op))
for _name, _op in (("GlobalAveragePooling2D", "GlobalAveragePool"), ("GlobalMaxPooling2D", "GlobalMaxPool")):
    LAYERS.add(_name, functools.partial(_global, op=_op))
for _name, _op in (("Add", "Add"), ("Multiply", "Mul"), ("Maximum", "Max")):
    LAYERS.add(_name, functools.partial(_binary, op=_op))


#: Layers that fold a ZeroPadding2D before them into their own padding.
_READS_PADDING = frozenset({"Conv2D", "DepthwiseConv2D", "MaxPooling2D", "AveragePooling2D", "ZeroPadding2D"})


# ---- the model -----------------------------------------------------------------------------------------------
def _history(arg: Any) -> list[tuple[str, int, int]]:
    """The (layer, node, tensor) references in a Keras 3 call argument (a tensor, or a list of them)."""
    if isinstance(arg, dict) and arg.get("class_name") == "__keras_tensor__":
        layer_name, node, tensor = arg["config"]["keras_history"]
        return [(str(layer_name), int(node), int(tensor))]
    if isinstance(arg, (list, tuple)):
        return [h for a in arg for h in _history(a)]
    return []


def _inbound(node: Any) -> list[tuple[str, int, int]]:
    """One inbound node's inputs: Keras 3 ({"args": [...]}) or tf.keras 2 ([[name, node, tensor, kwargs]...])."""
    if isinstance(node, dict):
        return _history(node.get("args", []))
    return [(str(ref[0]), int(ref[1]), int(ref[2])) for ref in node]


def _input_shape(c: _Converter, cfg: dict) -> Shape:
    shape = cfg.get("batch_shape") or cfg.get("batch_input_shape")
    if not shape or any(d is None for d in shape[1:]):
        raise c.err(f"input shape {shape} must be fully known (but for the batch)")
    dims = [int(d) for d in shape[1:]]
    if len(dims) == 3:
        h, w, ch = dims
        return (1, ch, h, w)
    if len(dims) == 1:
        return (1, dims[0])
    raise c.err(f"input of rank {len(dims) + 1}: only (N, H, W, C) images and (N, features) vectors")


def _layers(config: dict) -> tuple[list[dict], list, list]:
    """(layers, input refs, output refs) of a Functional or Sequential model config."""
    kind, cfg = config.get("class_name"), config.get("config", {})
    layers = cfg.get("layers") if isinstance(cfg, dict) else None
    if not isinstance(layers, list) or not layers:
        raise ValueError("no layers in model_config")
    if kind in ("Functional", "Model"):
        ins, outs = cfg.get("input_layers", []), cfg.get("output_layers", [])
        # Keras 3 writes one input or output as a bare [name, node, tensor]
        return layers, [ins] if ins and isinstance(ins[0], str) else ins, \
            [outs] if outs and isinstance(outs[0], str) else outs
    if kind == "Sequential":  # a chain: give every layer the previous one as input
        chained, prev = [], None
        first = layers[0]
        if first.get("class_name") != "InputLayer":
            shape = first["config"].get("batch_shape") or first["config"].get("batch_input_shape")
            chained.append({"class_name": "InputLayer", "name": "input", "config": {"batch_shape": shape},
                            "inbound_nodes": []})
            prev = "input"
        for spec in layers:
            spec = dict(spec, name=spec.get("name") or spec["config"]["name"])
            spec["inbound_nodes"] = [] if prev is None else [[[prev, 0, 0, {}]]]
            chained.append(spec)
            prev = spec["name"]
        return chained, [[chained[0]["name"], 0, 0]], [[prev, 0, 0]]
    raise ValueError(f"model class {kind!r} (Sequential or Functional)")


def load(path: str | Path) -> Graph:
    """Convert a Keras ``.h5`` model file to a shape-inferred canonical ``Graph``."""
    import h5py

    path = Path(path)
    src = str(path)
    try:
        f = h5py.File(path, "r")
    except OSError as e:
        raise CompileError(src, f"not a readable HDF5 file ({e})") from None
    with f:
        raw = f.attrs.get("model_config")
        if raw is None:
            raise CompileError(src, "no model_config: a weights-only file (save the whole model, model.save)")
        try:
            config = json.loads(raw.decode() if isinstance(raw, bytes) else str(raw))
            layers, in_refs, out_refs = _layers(config)
        except (ValueError, KeyError, TypeError, AttributeError) as e:
            raise CompileError(src, f"unreadable model_config: {e}") from None
        weights = f["model_weights"] if "model_weights" in f else f
        c = _Converter(path, weights, path.stem)
        tensors: dict[tuple[str, int, int], str] = {}
        for spec in layers:
            c.layer_name = str(spec.get("name") or spec.get("config", {}).get("name"))
            c.layer_class = str(spec.get("class_name"))
            cfg = spec.get("config", {})
            if c.layer_class == "InputLayer":
                name = c.fresh(c.layer_name)
                c.g.inputs.append(name)
                c.g.shapes[name] = _input_shape(c, cfg)
                tensors[(c.layer_name, 0, 0)] = name
                continue
            if c.layer_class not in LAYERS:
                raise c.err(f"unsupported Keras layer (supported: {', '.join(sorted(LAYERS))})")
            for i, node in enumerate(spec.get("inbound_nodes", [])):
                refs = _inbound(node)
                missing = [r for r in refs if r not in tensors]
                if not refs or missing:
                    raise c.err(f"inputs {missing or refs} are not produced by earlier layers")
                xs = [tensors[r] for r in refs]
                if c.layer_class not in _READS_PADDING and any(t in c.padded for t in xs):
                    raise c.err("reads a ZeroPadding2D output: only convolutions and pooling can take the "
                                "padding over (the DLA has no pad operation)")
                tensors[(c.layer_name, i, 0)] = LAYERS[c.layer_class](c, cfg, xs)
        for ref in out_refs:
            key = (str(ref[0]), int(ref[1]), int(ref[2]))
            if key not in tensors:
                raise CompileError(src, f"model output {list(ref)} is never produced")
            if tensors[key] in c.padded:
                raise CompileError(src, f"model output {list(ref)} is a ZeroPadding2D output (not supported)")
            c.g.outputs.append(tensors[key])
    if not c.g.inputs or not c.g.outputs:
        raise CompileError(src, "the model has no input or no output")
    return infer_shapes(c.g)


def load_file(path: Path, weights: Path | None, seed: int) -> Graph:
    """``compiler.frontend.load_model``'s entry: a Keras .h5 file carries its weights."""
    return load(path)
