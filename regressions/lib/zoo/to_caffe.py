"""ONNX -> Caffe (deploy prototxt + binary caffemodel), so every zoo network also exercises the Caffe frontend.

The conversion is exact or refused: an ONNX construct Caffe computes differently (asymmetric conv padding,
pooling whose output size or averaging divisor is not Caffe's, broadcasting arithmetic, ...) raises
``ValueError`` instead of writing a subtly different network. ``legacy=True`` writes the V1 ``layers`` form
(enum types, ``input``/``input_dim``, num/channels/height/width blobs) in both files, which cannot express
layer kinds added after V1 (BatchNorm, Scale, Bias, PReLU, Clip, Reshape): those raise ``ValueError`` too.

Activations whose input has no other reader are written in place (top == bottom), as real Caffe models do,
unless that would rename a graph output.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import onnx
from google.protobuf import text_format
from onnx import helper, numpy_helper

from compiler.frontend.onnx_registry import attrs as helper_attrs
from compiler.frontend.caffe import V1_TYPES, caffe_pool_size
from compiler.proto import caffe_pb2 as pb

_V1_ENUM = {v: k for k, v in V1_TYPES.items()}
_INPLACE = {"Relu", "LeakyRelu", "Clip", "PRelu", "Sigmoid", "Tanh", "Dropout"}


@dataclass
class _Layer:
    """A Caffe layer independent of the file form; ``params`` maps a *_param field to its values."""

    name: str
    type: str
    bottom: list[str]
    top: list[str]
    params: dict[str, dict[str, Any]] = field(default_factory=dict)
    blobs: list[np.ndarray] = field(default_factory=list)


def _fill(msg: Any, values: dict[str, Any]) -> None:
    """Set message fields from a dict (nested dicts are sub-messages, lists are repeated fields)."""
    for k, v in values.items():
        if isinstance(v, dict):
            _fill(getattr(msg, k), v)
        elif isinstance(v, (list, tuple)):
            target = getattr(msg, k)
            for item in v:
                if isinstance(item, dict):
                    _fill(target.add(), item)
                else:
                    target.append(item)
        else:
            setattr(msg, k, v)


def _blob(a: np.ndarray, legacy: bool) -> pb.BlobProto:
    a = np.asarray(a, dtype=np.float32)
    b = pb.BlobProto()
    if legacy:
        if a.ndim > 4:
            raise ValueError(f"a {a.ndim}-D blob has no legacy num/channels/height/width form")
        dims = (1,) * (4 - a.ndim) + tuple(a.shape)
        b.num, b.channels, b.height, b.width = (int(d) for d in dims)
    else:
        b.shape.dim.extend(int(d) for d in a.shape)
    b.data.extend(a.reshape(-1).tolist())
    return b


class _Exporter:
    def __init__(self, model: onnx.ModelProto, legacy: bool) -> None:
        self.legacy = legacy
        self.model = onnx.shape_inference.infer_shapes(model)
        g = self.model.graph
        self.g = g
        self.opset = next((o.version for o in self.model.opset_import if o.domain in ("", "ai.onnx")), 13)
        self.consts: dict[str, np.ndarray] = {t.name: numpy_helper.to_array(t) for t in g.initializer}
        self.shapes: dict[str, tuple[int, ...]] = {}
        for vi in list(g.input) + list(g.value_info) + list(g.output):
            t = vi.type.tensor_type
            if t.HasField("shape"):
                self.shapes[vi.name] = tuple(d.dim_value if d.HasField("dim_value") else 1 for d in t.shape.dim)
        self.alias: dict[str, str] = {}  # ONNX tensor -> Caffe blob (in-place layers)
        self.layers: list[_Layer] = []
        self.names: set[str] = set()
        self.outputs = {o.name for o in g.output}
        self.graph_inputs: list[str] = []
        self.readers: dict[str, int] = {}
        for n in g.node:
            for t in n.input:
                self.readers[t] = self.readers.get(t, 0) + 1

    # -- helpers --------------------------------------------------------------------------------------------
    def blob(self, t: str) -> str:
        if t in self.consts:
            raise ValueError(f"constant {t!r} used as a layer input (Caffe layers take activations only)")
        return self.alias.get(t, t)

    def shape(self, t: str) -> tuple[int, ...]:
        if t not in self.shapes:
            raise ValueError(f"no static shape for {t!r}")
        return self.shapes[t]

    def const(self, node: onnx.NodeProto, i: int) -> np.ndarray | None:
        if i >= len(node.input) or not node.input[i]:
            return None
        t = node.input[i]
        if t not in self.consts:
            raise ValueError(f"{node.op_type} {node.name!r}: input {t!r} must be a constant")
        return self.consts[t]

    def layer_name(self, node: onnx.NodeProto, idx: int) -> str:
        base = node.name or f"{node.op_type.lower()}{idx}"
        name, i = base, 1
        while name in self.names:
            name = f"{base}_{i}"
            i += 1
        self.names.add(name)
        return name

    def emit(self, layer: _Layer) -> None:
        if self.legacy and layer.type not in _V1_ENUM:
            raise ValueError(f"layer {layer.name!r}: Caffe's legacy V1 format has no {layer.type} layer")
        self.layers.append(layer)

    def top_for(self, node: onnx.NodeProto, x: str) -> str:
        """Write an activation in place when its input has no other reader and no name is lost."""
        out = node.output[0]
        if (node.op_type in _INPLACE and self.readers.get(x, 0) == 1 and x not in self.outputs
                and out not in self.outputs and x not in self.graph_inputs):
            self.alias[out] = self.blob(x)
            return self.blob(x)
        return out

    # -- the walk ------------------------------------------------------------------------------------------------
    def run(self) -> pb.NetParameter:
        g = self.g
        for n in g.node:
            if n.op_type == "Constant":
                self.consts[n.output[0]] = numpy_helper.to_array(helper.get_attribute_value(n.attribute[0]))
        net = pb.NetParameter(name=g.name or "net")
        self.graph_inputs = [i.name for i in g.input if i.name not in self.consts]
        for name in self.graph_inputs:
            dims = [1] + [int(d) for d in self.shape(name)[1:]]
            if self.legacy:
                if len(dims) != 4:
                    raise ValueError(f"input {name!r}: legacy input_dim needs a 4-D input, got {dims}")
                net.input.append(name)
                net.input_dim.extend(dims)
            else:
                self.names.add(name)
                self.layers.append(_Layer(name, "Input", [], [name], {"input_param": {"shape": [{"dim": dims}]}}))
        for idx, node in enumerate(g.node):
            if node.op_type == "Constant":
                continue
            fn = getattr(self, f"op_{node.op_type}", None)
            if fn is None:
                raise ValueError(f"ONNX op {node.op_type} ({node.name!r}) has no Caffe equivalent here")
            fn(node, self.layer_name(node, idx), helper_attrs(node))
        return net

    def write(self, net: pb.NetParameter, with_blobs: bool) -> pb.NetParameter:
        out = pb.NetParameter()
        out.CopyFrom(net)
        for l in self.layers:
            msg = out.layers.add() if self.legacy else out.layer.add()
            msg.name = l.name
            msg.type = pb.V1LayerParameter.LayerType.Value(_V1_ENUM[l.type]) if self.legacy else l.type
            msg.bottom.extend(l.bottom)
            msg.top.extend(l.top)
            _fill(msg, l.params)
            if with_blobs:
                msg.blobs.extend(_blob(b, self.legacy) for b in l.blobs)
        return out

    # -- ops -----------------------------------------------------------------------------------------------------
    def _conv_common(self, node: onnx.NodeProto, a: dict[str, Any], w: np.ndarray) -> dict[str, Any]:
        if a.get("auto_pad", "NOTSET") not in ("NOTSET", "VALID"):
            raise ValueError(f"{node.op_type} {node.name!r}: auto_pad {a['auto_pad']} (give explicit pads)")
        if w.ndim != 4:
            raise ValueError(f"{node.op_type} {node.name!r}: only 2-D convolutions map to Caffe")
        t, l, b, r = a.get("pads", [0, 0, 0, 0])
        if (t, l) != (b, r):
            raise ValueError(f"{node.op_type} {node.name!r}: asymmetric pads {[t, l, b, r]} (Caffe pads symmetrically)")
        sh, sw = a.get("strides", [1, 1])
        dh, dw = a.get("dilations", [1, 1])
        p: dict[str, Any] = {}
        if w.shape[2] == w.shape[3]:
            p["kernel_size"] = [int(w.shape[2])]
        else:
            p["kernel_h"], p["kernel_w"] = int(w.shape[2]), int(w.shape[3])
        if int(a.get("group", 1)) != 1:
            p["group"] = int(a["group"])
        if t == l:
            p["pad"] = [int(t)] if t else []
        else:
            p["pad_h"], p["pad_w"] = int(t), int(l)
        if sh == sw:
            p["stride"] = [int(sh)] if sh != 1 else []
        else:
            p["stride_h"], p["stride_w"] = int(sh), int(sw)
        if (dh, dw) != (1, 1):
            p["dilation"] = [int(dh), int(dw)] if dh != dw else [int(dh)]
        return {k: v for k, v in p.items() if v != []}

    def op_Conv(self, node: onnx.NodeProto, name: str, a: dict[str, Any]) -> None:
        w, b = self.const(node, 1), self.const(node, 2)
        p = self._conv_common(node, a, w)
        p["num_output"] = int(w.shape[0])
        if b is None:
            p["bias_term"] = False
        self.emit(_Layer(name, "Convolution", [self.blob(node.input[0])], [node.output[0]],
                         {"convolution_param": p}, [w] + ([b] if b is not None else [])))

    def op_ConvTranspose(self, node: onnx.NodeProto, name: str, a: dict[str, Any]) -> None:
        w, b = self.const(node, 1), self.const(node, 2)
        if any(a.get("output_padding", [0, 0])) or "output_shape" in a:
            raise ValueError(f"ConvTranspose {node.name!r}: output_padding/output_shape have no Caffe form")
        p = self._conv_common(node, a, w)
        p["num_output"] = int(w.shape[1]) * p.get("group", 1)
        if b is None:
            p["bias_term"] = False
        self.emit(_Layer(name, "Deconvolution", [self.blob(node.input[0])], [node.output[0]],
                         {"convolution_param": p}, [w] + ([b] if b is not None else [])))

    def _fc(self, node: onnx.NodeProto, name: str, w_kc: np.ndarray, bias: np.ndarray | None) -> None:
        x = node.input[0]
        if len(self.shape(x)) != 2:
            raise ValueError(f"{node.op_type} {node.name!r}: input must be 2-D, got {list(self.shape(x))}")
        p: dict[str, Any] = {"num_output": int(w_kc.shape[0])}
        if bias is None:
            p["bias_term"] = False
        blobs = [w_kc] + ([bias] if bias is not None else [])
        self.emit(_Layer(name, "InnerProduct", [self.blob(x)], [node.output[0]], {"inner_product_param": p},
                         blobs))

    def op_Gemm(self, node: onnx.NodeProto, name: str, a: dict[str, Any]) -> None:
        if a.get("transA", 0):
            raise ValueError(f"Gemm {node.name!r}: transA=1 has no Caffe form")
        w = self.const(node, 1).astype(np.float64) * float(a.get("alpha", 1.0))
        w = w if a.get("transB", 0) else w.T
        c = self.const(node, 2)
        if c is not None:
            if c.size not in (1, w.shape[0]):
                raise ValueError(f"Gemm {node.name!r}: bias of shape {list(c.shape)} is not per-output")
            c = np.broadcast_to(c.reshape(-1), (w.shape[0],)) * float(a.get("beta", 1.0))
        self._fc(node, name, w, c)

    def op_MatMul(self, node: onnx.NodeProto, name: str, a: dict[str, Any]) -> None:
        w = self.const(node, 1)
        if w.ndim != 2:
            raise ValueError(f"MatMul {node.name!r}: constant B must be 2-D")
        self._fc(node, name, w.T, None)

    def _pool(self, node: onnx.NodeProto, name: str, a: dict[str, Any], is_max: bool) -> None:
        x, y = node.input[0], node.output[0]
        if a.get("auto_pad", "NOTSET") not in ("NOTSET", "VALID"):
            raise ValueError(f"{node.op_type} {node.name!r}: auto_pad {a['auto_pad']} (give explicit pads)")
        if any(d != 1 for d in a.get("dilations", [1, 1])):
            raise ValueError(f"{node.op_type} {node.name!r}: dilated pooling has no Caffe form")
        if len(node.output) > 1 and node.output[1]:
            raise ValueError(f"{node.op_type} {node.name!r}: the Indices output has no Caffe form")
        (kh, kw), (sh, sw) = a["kernel_shape"], a.get("strides", [1, 1])
        t, l, b, r = a.get("pads", [0, 0, 0, 0])
        (_, _, h, w), (oh, ow) = self.shape(x), self.shape(y)[2:]
        any_pad = bool(t or l)
        want = (caffe_pool_size(h, kh, sh, t, True, any_pad), caffe_pool_size(w, kw, sw, l, True, any_pad))
        if (oh, ow) != want:
            raise ValueError(f"{node.op_type} {node.name!r}: ONNX output {oh}x{ow} differs from Caffe's "
                             f"ceil-mode {want[0]}x{want[1]} (pads {[t, l, b, r]})")
        if not is_max:
            cip = bool(a.get("count_include_pad", 0))
            for size, k, s, out, p0, p1 in ((h, kh, sh, oh, t, b), (w, kw, sw, ow, l, r)):
                for o in range(out):
                    start = o * s - p0
                    caffe = min(start + k, size + p0) - start
                    if cip:  # onnxruntime clips a ceil-mode window at the end padding, as Caffe does
                        onnx_div = min(start + k, size + p1) - start
                    else:
                        onnx_div = min(start + k, size) - max(start, 0)
                    if onnx_div != caffe:
                        raise ValueError(f"AveragePool {node.name!r}: count_include_pad={int(cip)} with pads "
                                         f"{[t, l, b, r]} averages edge windows differently from Caffe")
        p: dict[str, Any] = {"pool": pb.PoolingParameter.MAX if is_max else pb.PoolingParameter.AVE}
        if kh == kw:
            p["kernel_size"] = int(kh)
        else:
            p["kernel_h"], p["kernel_w"] = int(kh), int(kw)
        if sh == sw:
            p["stride"] = int(sh)
        else:
            p["stride_h"], p["stride_w"] = int(sh), int(sw)
        if t == l and t:
            p["pad"] = int(t)
        elif t != l:
            p["pad_h"], p["pad_w"] = int(t), int(l)
        self.emit(_Layer(name, "Pooling", [self.blob(x)], [y], {"pooling_param": p}))

    def op_MaxPool(self, node: onnx.NodeProto, name: str, a: dict[str, Any]) -> None:
        self._pool(node, name, a, True)

    def op_AveragePool(self, node: onnx.NodeProto, name: str, a: dict[str, Any]) -> None:
        self._pool(node, name, a, False)

    def _global(self, node: onnx.NodeProto, name: str, pool: int) -> None:
        self.emit(_Layer(name, "Pooling", [self.blob(node.input[0])], [node.output[0]],
                         {"pooling_param": {"pool": pool, "global_pooling": True}}))

    def op_GlobalAveragePool(self, node: onnx.NodeProto, name: str, a: dict[str, Any]) -> None:
        self._global(node, name, pb.PoolingParameter.AVE)

    def op_GlobalMaxPool(self, node: onnx.NodeProto, name: str, a: dict[str, Any]) -> None:
        self._global(node, name, pb.PoolingParameter.MAX)

    def _act(self, node: onnx.NodeProto, name: str, type_: str, params: dict[str, Any] | None = None,
             blobs: list[np.ndarray] | None = None) -> None:
        x = node.input[0]
        bottom = self.blob(x)
        top = self.top_for(node, x)
        self.emit(_Layer(name, type_, [bottom], [top], params or {}, blobs or []))

    def op_Relu(self, node: onnx.NodeProto, name: str, a: dict[str, Any]) -> None:
        self._act(node, name, "ReLU")

    def op_LeakyRelu(self, node: onnx.NodeProto, name: str, a: dict[str, Any]) -> None:
        self._act(node, name, "ReLU", {"relu_param": {"negative_slope": float(a.get("alpha", 0.01))}})

    def op_Sigmoid(self, node: onnx.NodeProto, name: str, a: dict[str, Any]) -> None:
        self._act(node, name, "Sigmoid")

    def op_Tanh(self, node: onnx.NodeProto, name: str, a: dict[str, Any]) -> None:
        self._act(node, name, "TanH")

    def op_Clip(self, node: onnx.NodeProto, name: str, a: dict[str, Any]) -> None:
        if self.opset < 11:
            lo, hi = a.get("min"), a.get("max")
        else:
            lo_c, hi_c = self.const(node, 1), self.const(node, 2)
            lo = None if lo_c is None else float(lo_c)
            hi = None if hi_c is None else float(hi_c)
        if lo == 0.0 and hi is None:
            self._act(node, name, "ReLU")
        elif lo is None or hi is None:
            raise ValueError(f"Clip {node.name!r}: Caffe's Clip needs both min and max")
        else:  # Clip(0, 6) is the ReLU6 of MobileNets
            self._act(node, name, "Clip", {"clip_param": {"min": float(lo), "max": float(hi)}})

    def op_PRelu(self, node: onnx.NodeProto, name: str, a: dict[str, Any]) -> None:
        slope = self.const(node, 1)
        s = self.shape(node.input[0])
        if not _per_channel(slope, s):
            raise ValueError(f"PRelu {node.name!r}: slope of shape {list(slope.shape)} is not per-channel")
        flat = slope.reshape(-1).astype(np.float32)
        self._act(node, name, "PReLU", {"prelu_param": {"channel_shared": True}} if flat.size == 1 else {},
                  [flat])

    def op_BatchNormalization(self, node: onnx.NodeProto, name: str, a: dict[str, Any]) -> None:
        if a.get("training_mode", 0) or any(o for o in node.output[1:]):
            raise ValueError(f"BatchNormalization {node.name!r}: training mode has no deploy form")
        gamma, beta, mean, var = (self.const(node, i) for i in (1, 2, 3, 4))
        x, y = self.blob(node.input[0]), node.output[0]
        eps = float(a.get("epsilon", 1e-5))
        self.emit(_Layer(name, "BatchNorm", [x], [y], {"batch_norm_param": {"eps": eps}},
                         [mean, var, np.ones(1, np.float32)]))
        # Caffe's BatchNorm only normalizes; the affine part is a Scale layer run in place.
        sname = self.layer_name(onnx.NodeProto(name=f"{name}/scale"), 0)
        self.emit(_Layer(sname, "Scale", [y], [y], {"scale_param": {"bias_term": True}}, [gamma, beta]))

    def _eltwise(self, node: onnx.NodeProto, name: str, op: int, coeff: list[float] | None = None) -> None:
        ins = list(node.input)
        consts = [t for t in ins if t in self.consts]
        if consts:
            self._const_arith(node, name, ins, consts)
            return
        shapes = {self.shape(t) for t in ins}
        if len(shapes) != 1:
            raise ValueError(f"{node.op_type} {node.name!r}: broadcasting {sorted(shapes)} has no Eltwise form")
        p: dict[str, Any] = {"operation": op}
        if coeff:
            p["coeff"] = coeff
        self.emit(_Layer(name, "Eltwise", [self.blob(t) for t in ins], [node.output[0]], {"eltwise_param": p}))

    def _const_arith(self, node: onnx.NodeProto, name: str, ins: list[str], consts: list[str]) -> None:
        """x * c -> Scale, x + c -> Bias, for a per-channel or scalar constant c."""
        if node.op_type not in ("Add", "Mul") or len(ins) != 2 or len(consts) != 1:
            raise ValueError(f"{node.op_type} {node.name!r}: constant operands have no Eltwise form")
        x = ins[1] if ins[0] in self.consts else ins[0]
        v = self.consts[consts[0]]
        s = self.shape(x)
        if not _per_channel(v, s):
            raise ValueError(f"{node.op_type} {node.name!r}: constant of shape {list(v.shape)} is not per-channel")
        c = s[1]
        vec = np.broadcast_to(v.reshape(-1), (c,)).astype(np.float32)
        if node.op_type == "Mul":
            self.emit(_Layer(name, "Scale", [self.blob(x)], [node.output[0]], {"scale_param": {}}, [vec]))
        else:
            self.emit(_Layer(name, "Bias", [self.blob(x)], [node.output[0]], {}, [vec]))

    def op_Add(self, node: onnx.NodeProto, name: str, a: dict[str, Any]) -> None:
        self._eltwise(node, name, pb.EltwiseParameter.SUM)

    def op_Sum(self, node: onnx.NodeProto, name: str, a: dict[str, Any]) -> None:
        self._eltwise(node, name, pb.EltwiseParameter.SUM)

    def op_Sub(self, node: onnx.NodeProto, name: str, a: dict[str, Any]) -> None:
        self._eltwise(node, name, pb.EltwiseParameter.SUM, [1.0, -1.0])

    def op_Mul(self, node: onnx.NodeProto, name: str, a: dict[str, Any]) -> None:
        self._eltwise(node, name, pb.EltwiseParameter.PROD)

    def op_Max(self, node: onnx.NodeProto, name: str, a: dict[str, Any]) -> None:
        self._eltwise(node, name, pb.EltwiseParameter.MAX)

    def op_Concat(self, node: onnx.NodeProto, name: str, a: dict[str, Any]) -> None:
        rank = len(self.shape(node.input[0]))
        self.emit(_Layer(name, "Concat", [self.blob(t) for t in node.input], [node.output[0]],
                         {"concat_param": {"axis": int(a["axis"]) % rank}}))

    def _slice_layer(self, name: str, x: str, axis: int, sizes: list[int], tops: list[str]) -> None:
        points = list(np.cumsum(sizes)[:-1].astype(int).tolist())
        self.emit(_Layer(name, "Slice", [self.blob(x)], tops, {"slice_param": {"axis": axis, "slice_point": points}}))

    def op_Split(self, node: onnx.NodeProto, name: str, a: dict[str, Any]) -> None:
        x = node.input[0]
        s = self.shape(x)
        axis = int(a.get("axis", 0)) % len(s)
        split = a.get("split")
        if split is None and len(node.input) > 1 and node.input[1]:
            split = self.const(node, 1).tolist()
        if split is None:
            n = len(node.output)
            split = [-(-s[axis] // n)] * (n - 1)
            split.append(s[axis] - sum(split))
        if axis == 0:
            raise ValueError(f"Split {node.name!r}: splitting the batch axis has no Caffe form")
        self._slice_layer(name, x, axis, [int(v) for v in split], list(node.output))

    def op_Slice(self, node: onnx.NodeProto, name: str, a: dict[str, Any]) -> None:
        x, y = node.input[0], node.output[0]
        s = self.shape(x)
        if self.opset < 10:
            starts, ends, axes, steps = a["starts"], a["ends"], a.get("axes"), None
        else:
            starts, ends = self.const(node, 1).tolist(), self.const(node, 2).tolist()
            ax, st = self.const(node, 3), self.const(node, 4)
            axes = None if ax is None else ax.tolist()
            steps = None if st is None else st.tolist()
        axes = list(range(len(starts))) if axes is None else axes
        if steps is not None and any(v != 1 for v in steps):
            raise ValueError(f"Slice {node.name!r}: steps other than 1 have no Caffe form")
        cut = [(int(ax) % len(s), b, e) for ax, b, e in zip(axes, starts, ends)]
        cut = [(ax, b, e) for ax, b, e in cut
               if (max(0, min(s[ax], b + s[ax] if b < 0 else b)), max(0, min(s[ax], e + s[ax] if e < 0 else e)))
               != (0, s[ax])]
        if len(cut) != 1 or cut[0][0] == 0:
            raise ValueError(f"Slice {node.name!r}: only a slice of one non-batch axis maps to Caffe")
        ax, b, e = cut[0]
        size = s[ax]
        b = max(0, min(size, b + size if b < 0 else b))
        e = max(0, min(size, e + size if e < 0 else e))
        if b >= e:
            raise ValueError(f"Slice {node.name!r}: empty slice")
        sizes, tops, drop = [], [], []
        for lo, hi, keep in ((0, b, False), (b, e, True), (e, size, False)):
            if hi > lo:
                sizes.append(hi - lo)
                top = y if keep else f"{name}/unused{len(drop)}"
                tops.append(top)
                if not keep:
                    drop.append(top)
        if len(tops) == 1:  # pragma: no cover - a full slice was filtered out above
            raise ValueError(f"Slice {node.name!r}: nothing to slice")
        self._slice_layer(name, x, ax, sizes, tops)
        # Caffe's way to discard the other pieces, so they do not become network outputs.
        self.emit(_Layer(self.layer_name(onnx.NodeProto(name=f"{name}/silence"), 0), "Silence", drop, []))

    def _flatten_like(self, node: onnx.NodeProto, name: str) -> None:
        x, y = node.input[0], node.output[0]
        si, so = self.shape(x), self.shape(y)
        if len(so) == 2 and so[0] == si[0]:
            self.emit(_Layer(name, "Flatten", [self.blob(x)], [y]))
            return
        if self.legacy:
            raise ValueError(f"{node.op_type} {node.name!r}: Caffe's legacy V1 format has no Reshape layer")
        dims = [0 if so and si and so[0] == si[0] else int(so[0])] + [int(d) for d in so[1:]]
        self.emit(_Layer(name, "Reshape", [self.blob(x)], [y], {"reshape_param": {"shape": {"dim": dims}}}))

    def op_Flatten(self, node: onnx.NodeProto, name: str, a: dict[str, Any]) -> None:
        self._flatten_like(node, name)

    def op_Reshape(self, node: onnx.NodeProto, name: str, a: dict[str, Any]) -> None:
        self._flatten_like(node, name)

    def op_Dropout(self, node: onnx.NodeProto, name: str, a: dict[str, Any]) -> None:
        if len(node.output) > 1 and node.output[1] and self.readers.get(node.output[1]):
            raise ValueError(f"Dropout {node.name!r}: the mask output has no Caffe form")
        ratio = a.get("ratio", 0.5)
        if len(node.input) > 1 and node.input[1]:
            ratio = float(self.const(node, 1))
        self._act(node, name, "Dropout", {"dropout_param": {"dropout_ratio": float(ratio)}})

    def op_Identity(self, node: onnx.NodeProto, name: str, a: dict[str, Any]) -> None:
        self.emit(_Layer(name, "Split", [self.blob(node.input[0])], [node.output[0]]))

    def op_LRN(self, node: onnx.NodeProto, name: str, a: dict[str, Any]) -> None:
        size = int(a["size"])
        if size % 2 == 0:
            raise ValueError(f"LRN {node.name!r}: Caffe's LRN needs an odd size, got {size}")
        p = {"local_size": size, "alpha": float(a.get("alpha", 1e-4)), "beta": float(a.get("beta", 0.75)),
             "k": float(a.get("bias", 1.0))}
        self.emit(_Layer(name, "LRN", [self.blob(node.input[0])], [node.output[0]], {"lrn_param": p}))

    def op_Softmax(self, node: onnx.NodeProto, name: str, a: dict[str, Any]) -> None:
        x = node.input[0]
        s = self.shape(x)
        axis = int(a.get("axis", 1 if self.opset < 13 else -1)) % len(s)
        if self.opset < 13 and any(d != 1 for d in s[axis + 1:]):
            raise ValueError(f"Softmax {node.name!r}: opset<13 softmax spans axes {axis}.. of {list(s)}; "
                             "Caffe's spans one axis")
        self.emit(_Layer(name, "Softmax", [self.blob(x)], [node.output[0]], {"softmax_param": {"axis": axis}}))


def _per_channel(v: np.ndarray, x_shape: tuple[int, ...]) -> bool:
    """Whether ``v`` broadcasts against ``x_shape`` as a scalar or a per-channel (axis 1) vector."""
    if v.size == 1:
        return v.ndim <= len(x_shape)
    rank = len(x_shape)
    if v.ndim > rank or rank < 2 or v.size != x_shape[1]:
        return False
    pos = v.ndim - (rank - 1)  # where axis 1 of x lands in v, aligning from the right
    return pos >= 0 and v.shape[pos] == x_shape[1] and all(d == 1 for i, d in enumerate(v.shape) if i != pos)


def to_caffe(model: onnx.ModelProto, *, legacy: bool = False) -> tuple[str, bytes]:
    """(deploy prototxt text, binary caffemodel bytes) of an ONNX model; raises ValueError on anything
    Caffe would compute differently."""
    ex = _Exporter(model, legacy)
    net = ex.run()
    prototxt = text_format.MessageToString(ex.write(net, with_blobs=False))
    caffemodel = ex.write(net, with_blobs=True).SerializeToString()
    return prototxt, caffemodel
