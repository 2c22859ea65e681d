"""Random small networks: compiled for a preset, run on the golden target, against onnxruntime's float output
within a quantization error bound derived from the scales the compiler chose.

The examples are ``NetSpec``s: an input cube (C <= 8, H, W <= 16) and up to six drawn layers, plus the
projection branches an Add may bring: Conv (kernels 1..5 per axis, strides 1..3, asymmetric padding,
dilation 1..3, groups and depthwise, with or without bias and ReLU), MaxPool/AveragePool (padding, ceil
mode, both count_include_pad rules), global pooling, BatchNormalization, Relu, Add (of two branches, of a
new projection branch, or x + x) and channel Concat of up to three tensors. Each layer reads any earlier
tensor, so the graph is a DAG whose branches merge, not only a chain, and every tensor nobody reads is a
graph output. Weights come from ``NetSpec.seed`` (one generator per layer), so an example prints in a few
lines and shrinks to small shapes and seed 0; the calibration inputs (``CALIBRATION`` of them) and the fresh
test input, all N(0, 1), come from the same seed.

Every construct drawn is one the compiler supports on every preset: ``compiler/frontend/onnx.py`` converts
it and ``compiler/passes/lower.py`` runs it on CONV/SDP/PDP or, where an engine rule excludes it (Concat off
atom boundaries or of one tensor twice), as a CPU op. Not drawn: what the frontend refuses (pooling pads >=
the kernel) and ceil-mode pooling whose last window would start in the trailing padding (ONNX drops that
window and so do the frontend and onnxruntime, but onnx's shape inference keeps it, and onnxruntime then fails
reusing a buffer of that shape: no reference). A ``CompileError`` on a drawn example fails the property:
either the strategy drew something unsupported or the compiler refuses a supported network.
``networks(hw)`` uses ``hw`` only to favour channel counts that are multiples of its atom (in-place concats).

Error bound (``error_bound``)
-----------------------------
The compiled network computes on int8 tensors, real = s_t * q for the scale s_t the compiler chose for
tensor t (``ctx.scales``), with integer SDP/PDP arithmetic in between. Rounding happens at a few places,
each of known size in units of a scale. The bound follows the *lowered* graph (where the compiler
requantizes) but is centred on the float network (onnxruntime): for every tensor t it carries two
per-element arrays,

* ``D_t``: a worst-case part (saturation, constant rounding of biases, fixed-point multiplier precision),
* ``V_t``: the variance of a random part (rounding of activations and of weights),

and the check is ``|golden - float| <= D + K * sqrt(V) + float32 slack`` on every output element, K = ``SIGMAS``.
Rounding errors are treated as zero mean, uniform on one quantization step (variance step^2 / 12), and
independent unless they provably coincide (below): a weight's rounding error dw is fixed but random over the
drawn weights, an activation's is pseudo-random over inputs. That is what makes the bound tight: the worst
case of a sum over a 3x3x32 window is ~17x its standard deviation, and a worst-case bound grows like
(0.8 sqrt(fan-in))^depth output steps where the errors really grow like sqrt(depth). The rules, per lowered
op (x the float input, (D, V) its bound, s the scales, y the float output):

* network input, quantized at s_in: V = s_in^2/12, D = max(0, |x| - 127 s_in) (clipping);
* ``dla.conv`` (W the float, BN-folded kernel; per-filter weight scale sw_k = max|W_k| / 127; Wd its int8
  rounding): the accumulator differs from W*x by Wd*e_x + dw*(x - m) (m the per-channel calibration mean
  the compiler's bias correction subtracts; padding taps count as x = 0), so D_acc = |Wd| (*) D_in and
  V_acc = Wd^2 (*) V_in + sw_k^2/12 * 1_W (*) (x - m)^2 (``(*)`` the convolution, 1_W the kernel's support);
  the 16-bit bias operand (<< the smallest ALU shift that fits) adds 2^shift / 2 accumulator steps
  (s_in sw_k); the X1 multiplier is 16 bits >> a shift, the channel of largest ratio using >= 15 of them,
  so channel k is off by at most (r_max / r_k) / 32766 of its pre-activation |z| (r_k = gamma_k sw_k s_in);
* fused post-ops: an affine scales D by |gamma| and V by gamma^2 (+ its bias rounding); ReLU is 1-Lipschitz
  (passes D, V); an eltwise Add adds the other operand's D and standard deviation (branches may share
  errors, x + x doubles them; sqrt(V) is subadditive whatever the correlation); Max takes the larger;
* requantization to s_out (SDP CVT, after an internal rounding at <= s_out / 2^10): V += s_out^2/12,
  D += s_out 2^-10 + |y| / 32766 (the 16-bit converter) + max(0, |y| - 127 s_out) (saturation);
* ``dla.pdp`` max (same scale in and out, exact): D and V are max-pooled (|max(a+e) - max(a)| <= max|e|);
* averages -- ``dla.pdp`` average (divides by kh kw), a CPU AveragePool (by the in-image count) and the
  frontend's GlobalAveragePool (a conv with equal, exact weights) --: D = w sum D, V = w^2 sum_ij sd_i sd_j
  [i, j share an error], where taps with the same non-zero float value share one error (a constant region:
  rows a convolution computes from padding only and what follows them; one input chosen by overlapping
  max-pooling windows) and other taps are independent. With equal positive weights shared errors do not
  average out; with a conv's random weights they cancel like independent ones, so only averages need this.
  The PDP then rounds twice (V += 2 s_out^2/12) with 0.16 reciprocals whose ideal values rw, rh =
  2^16 sqrt(s_in/s_out) / kw, kh bound the relative error (D += (1/2rw + 1/2rh) |y|), and stores the low byte
  of its average without saturating: where |y| + bound reaches the end of the range (the calibrated range
  x 2, the compiler's documented choice) it may wrap, and those elements and everything computed from them
  are not checked (infinite bound; ``Evaluation.unchecked`` counts them, none in practice);
* views and same-scale CPU ops (Concat, MaxPool) move (D, V) like the values.

Errors propagate to the outputs this way, so the bound grows with depth as the scales of the layers on the
way dictate. Each output element's error is then a sum of many small terms, close to normal: 6 standard
deviations are exceeded with probability ~2e-9 per element. Measured on 3000 drawn networks per preset
(nv_small, nv_medium_512, nv_full) the random part never needed more than 4.2 of them
(``Evaluation.sigmas_used``), while on 500 per preset a reference whose outputs are scaled by 1.25 (1.1)
falls outside the bound on 99 % (96-98 %) of the examples and one whose convolutions lost their biases on
99 %; an output or X1 multiplier shift off by one and a bias dropped from the compiler's SDP program all
fail the tests' typical network.

Compiler bugs this property finds (see the xfail tests in ``test_networks.py``): a tensor whose calibrated
range is zero (a dead ReLU, a conv reading only padding) gets scale 1e-6/127, after which the conv producing
it fails with "cannot quantize: ... does not fit a 16-bit multiplier", or the next layer's bias, in that
scale's accumulator steps, saturates the 32-bit SDP X1 ALU and the output is silently wrong.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import onnx
from hypothesis import strategies as st
from numpy.lib.stride_tricks import sliding_window_view
from onnx import TensorProto, helper, numpy_helper

from compiler.driver import compile_graph
from compiler.errors import CompileError
from compiler.float_exec import run_float
from compiler.frontend import onnx as onnx_frontend
from compiler.postops import Affine, Eltwise, PostOp
from floatops.kernels import KERNELS, average_divisor_pads, conv2d, divisor_counts, pad2d
from golden.config import HwConfig
from regressions.fuzz.properties import Property, register

OPSET = 13
IR_VERSION = 8  # readable by the onnxruntime wheels we pin
#: Standard deviations of the random part of the error the bound allows.
SIGMAS = 6.0
#: Calibration inputs per network.
CALIBRATION = 8
MAX_LAYERS = 6
MAX_CHANNELS = 32  # conv outputs and network inputs (concats may reach 2x)
MAX_CONCAT_CHANNELS = 64
MAX_HW = 16

#: Ops a layer can be, in shrinking order (hypothesis shrinks towards the first).
OPS = ("conv", "relu", "maxpool", "avgpool", "add", "concat", "bn", "gavgpool", "gmaxpool")
#: How often each op is drawn (global pooling ends the spatial part of a network: rarer).
OP_WEIGHTS = {"conv": 5, "relu": 1, "maxpool": 2, "avgpool": 2, "add": 3, "concat": 2, "bn": 1, "gavgpool": 1,
              "gmaxpool": 1}
_OP_DRAW = tuple(op for op in OPS for _ in range(OP_WEIGHTS[op]))


# ---- examples -------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Layer:
    """One layer: ``op`` (one of ``OPS``), the tensors it reads (0 = the network input, i >= 1 the output of
    ``layers[i - 1]``), and its attributes (tuples for pairs and pads, in ONNX's order)."""

    op: str
    inputs: tuple[int, ...]
    attrs: dict[str, Any] = field(default_factory=dict)

    def __hash__(self) -> int:  # examples are values: usable as set members and dict keys
        return hash((self.op, self.inputs, tuple(sorted(self.attrs.items()))))


@dataclass(frozen=True)
class NetSpec:
    """A network: input cube (C, H, W), layers in order, and the seed of weights and inputs."""

    input: tuple[int, int, int]
    layers: tuple[Layer, ...]
    seed: int = 0


def _out_size(size: int, k: int, stride: int, p0: int, p1: int, dil: int = 1, ceil: bool = False) -> int:
    span = size + p0 + p1 - ((k - 1) * dil + 1)
    if not ceil:
        return span // stride + 1
    out = -(-span // stride) + 1
    if (out - 1) * stride >= size + p0:  # ONNX: the last window starts inside the input or its leading padding
        out -= 1
    return out


def layer_shape(layer: Layer, shapes: list[tuple[int, int, int]]) -> tuple[int, int, int]:
    """Output (C, H, W) of ``layer`` given the shapes of the tensors so far."""
    a = layer.attrs
    c, h, w = shapes[layer.inputs[0]]
    if layer.op == "conv":
        (r, s), (sy, sx), (dy, dx) = a["kernel"], a["stride"], a["dilation"]
        pt, pl, pb, pr = a["pads"]
        return a["k"], _out_size(h, r, sy, pt, pb, dy), _out_size(w, s, sx, pl, pr, dx)
    if layer.op in ("maxpool", "avgpool"):
        (kh, kw), (sy, sx), (pt, pl, pb, pr) = a["kernel"], a["stride"], a["pads"]
        ceil = bool(a.get("ceil", False))
        return c, _out_size(h, kh, sy, pt, pb, ceil=ceil), _out_size(w, kw, sx, pl, pr, ceil=ceil)
    if layer.op in ("gavgpool", "gmaxpool"):
        return c, 1, 1
    if layer.op == "concat":
        return sum(shapes[i][0] for i in layer.inputs), h, w
    return c, h, w


def tensor_shapes(spec: NetSpec) -> list[tuple[int, int, int]]:
    shapes = [tuple(spec.input)]
    for layer in spec.layers:
        shapes.append(layer_shape(layer, shapes))
    return shapes


def output_indices(spec: NetSpec) -> list[int]:
    """Tensors no layer reads: the graph outputs."""
    read = {i for layer in spec.layers for i in layer.inputs}
    return [i for i in range(1, len(spec.layers) + 1) if i not in read]


def to_json(spec: NetSpec) -> dict:
    return {"input": list(spec.input), "seed": spec.seed,
            "layers": [{"op": layer.op, "inputs": list(layer.inputs),
                        "attrs": {k: list(v) if isinstance(v, tuple) else v for k, v in layer.attrs.items()}}
                       for layer in spec.layers]}


def from_json(data: dict) -> NetSpec:
    layers = tuple(Layer(d["op"], tuple(int(i) for i in d["inputs"]),
                         {k: tuple(v) if isinstance(v, list) else v for k, v in d["attrs"].items()})
                   for d in data["layers"])
    return NetSpec(tuple(int(v) for v in data["input"]), layers, int(data["seed"]))


# ---- ONNX model -------------------------------------------------------------------------------------------------
def tensor_name(i: int) -> str:
    return "x" if i == 0 else f"t{i}"


def layer_weights(spec: NetSpec, index: int, c_in: int) -> dict[str, np.ndarray]:
    """The constants of layer ``index`` (0-based), from its own generator: He-scaled kernels (gain sqrt(2)
    before a ReLU) keep activations near unit scale, biases ~ N(0, 0.5) are large enough that dropping one
    shows; BatchNormalization statistics near unit scale."""
    layer = spec.layers[index]
    rng = np.random.default_rng([spec.seed, index])
    a = layer.attrs
    if layer.op == "conv":
        (r, s), g = a["kernel"], a["group"]
        fan_in = c_in // g * r * s
        gain = math.sqrt(2.0) if a["relu"] else 1.0
        out = {"W": rng.standard_normal((a["k"], c_in // g, r, s)) * gain / math.sqrt(fan_in)}
        if a["bias"]:
            out["B"] = rng.standard_normal(a["k"]) * 0.5
        return {k: v.astype(np.float32) for k, v in out.items()}
    if layer.op == "bn":
        return {"scale": rng.uniform(0.5, 1.5, c_in).astype(np.float32),
                "B": (rng.standard_normal(c_in) * 0.3).astype(np.float32),
                "mean": (rng.standard_normal(c_in) * 0.3).astype(np.float32),
                "var": rng.uniform(0.5, 2.0, c_in).astype(np.float32)}
    return {}


def build_model(spec: NetSpec, *, drop_bias: bool = False, output_gain: float = 1.0) -> onnx.ModelProto:
    """The ONNX model of ``spec`` (opset 13, batch 1). ``drop_bias`` and ``output_gain`` make deliberately
    wrong references for the bound's sensitivity test: convolutions without their biases, outputs scaled."""
    shapes = tensor_shapes(spec)
    nodes: list[onnx.NodeProto] = []
    inits: list[onnx.TensorProto] = []
    for i, layer in enumerate(spec.layers):
        name, out = f"n{i + 1}_{layer.op}", tensor_name(i + 1)
        ins = [tensor_name(j) for j in layer.inputs]
        a = layer.attrs
        consts = layer_weights(spec, i, shapes[layer.inputs[0]][0])
        if drop_bias and layer.op == "conv":
            consts.pop("B", None)
        for k, v in consts.items():
            inits.append(numpy_helper.from_array(v, f"{name}_{k}"))
        const_names = [f"{name}_{k}" for k in consts]
        if layer.op == "conv":
            conv_out = f"{out}_conv" if a["relu"] else out
            nodes.append(helper.make_node("Conv", ins + const_names, [conv_out], name=name,
                                          kernel_shape=list(a["kernel"]), strides=list(a["stride"]),
                                          pads=list(a["pads"]), dilations=list(a["dilation"]), group=a["group"]))
            if a["relu"]:
                nodes.append(helper.make_node("Relu", [conv_out], [out], name=f"{name}_relu"))
        elif layer.op in ("maxpool", "avgpool"):
            extra = {"count_include_pad": int(a["count_include_pad"])} if layer.op == "avgpool" else {}
            nodes.append(helper.make_node("MaxPool" if layer.op == "maxpool" else "AveragePool", ins, [out],
                                          name=name, kernel_shape=list(a["kernel"]), strides=list(a["stride"]),
                                          pads=list(a["pads"]), ceil_mode=int(a.get("ceil", False)), **extra))
        elif layer.op in ("gavgpool", "gmaxpool"):
            nodes.append(helper.make_node("GlobalAveragePool" if layer.op == "gavgpool" else "GlobalMaxPool",
                                          ins, [out], name=name))
        elif layer.op == "bn":
            nodes.append(helper.make_node("BatchNormalization", ins + const_names, [out], name=name, epsilon=1e-5))
        elif layer.op == "relu":
            nodes.append(helper.make_node("Relu", ins, [out], name=name))
        elif layer.op == "add":
            nodes.append(helper.make_node("Add", ins, [out], name=name))
        elif layer.op == "concat":
            nodes.append(helper.make_node("Concat", ins, [out], name=name, axis=1))
        else:
            raise ValueError(f"unknown layer op {layer.op!r}")
    outputs = output_indices(spec)
    if output_gain != 1.0:
        inits.append(numpy_helper.from_array(np.array(output_gain, dtype=np.float32), "output_gain"))
        for i in outputs:
            nodes.append(helper.make_node("Mul", [tensor_name(i), "output_gain"], [f"{tensor_name(i)}_out"]))
    suffix = "_out" if output_gain != 1.0 else ""
    graph = helper.make_graph(
        nodes, "fuzz_net",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, *spec.input])],
        [helper.make_tensor_value_info(tensor_name(i) + suffix, TensorProto.FLOAT, [1, *shapes[i]]) for i in outputs],
        inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
    model.ir_version = IR_VERSION
    return model


# ---- strategy ---------------------------------------------------------------------------------------------------
def _pick(draw, candidates: list[int]) -> int:
    """One of ``candidates`` (ordered most recent first): shrinks towards the most recent tensor, a chain."""
    return candidates[draw(st.integers(0, len(candidates) - 1))]


def _recent_first(n: int) -> list[int]:
    return list(range(n - 1, -1, -1))


def _channels(draw, hw: HwConfig, limit: int = MAX_CHANNELS) -> int:
    """A channel count: any, or a multiple of the hardware's atom (so concats can be views in place)."""
    atom = hw.atom_elements()
    if atom <= limit and draw(st.booleans()):
        return atom * draw(st.integers(1, limit // atom))
    return draw(st.integers(1, limit))


def _draw_conv(draw, hw: HwConfig, shape: tuple[int, int, int], *, same: bool = False,
               k: int | None = None) -> dict[str, Any]:
    """Conv attributes for an input of ``shape``; ``same`` keeps H x W (stride 1, centred padding) and
    ``k`` fixes the output channels (a branch that an Add merges)."""
    c, h, w = shape
    group = 1
    if draw(st.booleans()):
        divisors = [d for d in range(2, c + 1) if c % d == 0 and (k is None or k % d == 0)]
        if divisors:
            group = draw(st.sampled_from(divisors))
    if k is None:
        k = group * draw(st.integers(1, max(1, MAX_CHANNELS // group))) if group > 1 else _channels(draw, hw)
    kernel, stride, dilation, pads = [], [], [], [0, 0, 0, 0]
    for axis, size in enumerate((h, w)):
        if same:
            r = draw(st.sampled_from((1, 3, 5)))
            d = draw(st.integers(1, 2)) if r > 1 else 1
            p = (r - 1) * d // 2
            kernel.append(r), stride.append(1), dilation.append(d)
            pads[axis], pads[axis + 2] = p, p
            continue
        r = draw(st.integers(1, 5))
        d = draw(st.integers(1, 3)) if r > 1 else 1
        span = (r - 1) * d + 1
        p0, p1 = draw(st.integers(0, span - 1)), draw(st.integers(0, span - 1))
        if size + p0 + p1 < span:  # the kernel must fit the padded input
            d, span = 1, r
            r = min(r, size + p0 + p1)
            p0, p1 = min(p0, r - 1), min(p1, r - 1)
        kernel.append(r), dilation.append(d), stride.append(draw(st.integers(1, 3)))
        pads[axis], pads[axis + 2] = p0, p1
    return {"k": k, "kernel": tuple(kernel), "stride": tuple(stride), "dilation": tuple(dilation),
            "pads": tuple(pads), "group": group, "bias": draw(st.booleans()), "relu": draw(st.booleans())}


def _draw_pool(draw, op: str, shape: tuple[int, int, int]) -> dict[str, Any]:
    _, h, w = shape
    kernel, stride, pads = [], [], [0, 0, 0, 0]
    for axis, size in enumerate((h, w)):
        r = draw(st.integers(1, 4))
        p0, p1 = draw(st.integers(0, r - 1)), draw(st.integers(0, r - 1))
        if size + p0 + p1 < r:
            r = size + p0 + p1
        kernel.append(r), stride.append(draw(st.integers(1, 3)))
        pads[axis], pads[axis + 2] = min(p0, r - 1), min(p1, r - 1)
    ceil = draw(st.booleans())
    for axis, size in enumerate((h, w)):
        k, s, p0, p1 = kernel[axis], stride[axis], pads[axis], pads[axis + 2]
        if -(-(size + p0 + p1 - k) // s) + 1 != _out_size(size, k, s, p0, p1, ceil=True):
            # ONNX drops a ceil-mode window that would start in the trailing padding; onnx's shape inference
            # does not, and onnxruntime then fails reusing a buffer of the inferred shape: not a reference
            ceil = False
    attrs: dict[str, Any] = {"kernel": tuple(kernel), "stride": tuple(stride), "pads": tuple(pads), "ceil": ceil}
    if op == "avgpool":
        attrs["count_include_pad"] = draw(st.booleans())
    return attrs


@st.composite
def _network(draw, hw: HwConfig) -> NetSpec:
    shapes: list[tuple[int, int, int]] = [(draw(st.integers(1, 8)), draw(st.integers(1, MAX_HW)),
                                           draw(st.integers(1, MAX_HW)))]
    layers: list[Layer] = []

    def add(layer: Layer) -> int:
        layers.append(layer)
        shapes.append(layer_shape(layer, shapes))
        return len(shapes) - 1

    for _ in range(draw(st.integers(1, MAX_LAYERS))):
        op = draw(st.sampled_from(_OP_DRAW))
        src = _pick(draw, _recent_first(len(shapes)))
        if op == "conv":
            add(Layer("conv", (src,), _draw_conv(draw, hw, shapes[src])))
        elif op in ("maxpool", "avgpool"):
            add(Layer(op, (src,), _draw_pool(draw, op, shapes[src])))
        elif op in ("relu", "bn", "gavgpool", "gmaxpool"):
            add(Layer(op, (src,), {}))
        elif op == "add":
            same = [j for j in _recent_first(len(shapes)) if j != src and shapes[j] == shapes[src]]
            if same and draw(st.booleans()):
                other = _pick(draw, same)
            elif draw(st.integers(0, 9)) == 0:
                other = src  # x + x
            else:  # a new branch from a tensor of the same H x W, projected to src's channels
                base = _pick(draw, [j for j in _recent_first(len(shapes)) if shapes[j][1:] == shapes[src][1:]])
                other = add(Layer("conv", (base,), _draw_conv(draw, hw, shapes[base], same=True, k=shapes[src][0])))
            pair = (src, other) if draw(st.booleans()) else (other, src)
            add(Layer("add", pair, {}))
        elif op == "concat":
            parts = [src]
            total = shapes[src][0]
            candidates = [j for j in _recent_first(len(shapes)) if shapes[j][1:] == shapes[src][1:] and j != src]
            if not candidates or draw(st.integers(0, 9)) == 0:
                candidates.append(src)  # concat a tensor with itself
            for _ in range(draw(st.integers(1, 2))):
                j = _pick(draw, candidates)
                if total + shapes[j][0] > MAX_CONCAT_CHANNELS:
                    break
                parts.append(j)
                total += shapes[j][0]
            if len(parts) > 1:
                order = draw(st.permutations(parts))
                add(Layer("concat", tuple(order), {}))
    if not layers:
        add(Layer("relu", (0,), {}))
    return NetSpec(shapes[0], tuple(layers), draw(st.integers(0, 2**32 - 1)))


def networks(hw: HwConfig) -> st.SearchStrategy[NetSpec]:
    """Small random DAG networks the compiler supports on ``hw`` (see the module docstring)."""
    return _network(hw)


# ---- the error bound ---------------------------------------------------------------------------------------------
@dataclass
class ErrorBound:
    """Per-element worst-case part ``det`` and variance ``var`` of |compiled - float| for one tensor."""

    det: np.ndarray
    var: np.ndarray

    def limit(self, sigmas: float = SIGMAS) -> np.ndarray:
        """The allowed |error| per element; infinite where the element is not checked (nan from inf * 0)."""
        lim = self.det + sigmas * np.sqrt(self.var)
        return np.where(np.isnan(lim), np.inf, lim)


def _channel(v: np.ndarray) -> np.ndarray:
    return np.asarray(v, dtype=np.float64).reshape(1, -1, 1, 1)


def _divisor(x: np.ndarray, a: dict, kernel, stride, pads) -> np.ndarray:
    """(OH, OW) divisors of an average (``floatops.kernels.average_divisor_pads`` says which padding counts)."""
    counted = average_divisor_pads({**a, "pads": pads})
    h, w = x.shape[2], x.shape[3]
    oh = (h + pads[0] + pads[2] - kernel[0]) // stride[0] + 1
    ow = (w + pads[1] + pads[3] - kernel[1]) // stride[1] + 1
    ch = divisor_counts(h, kernel[0], stride[0], pads[0], counted[0], counted[2], oh)
    cw = divisor_counts(w, kernel[1], stride[1], pads[1], counted[1], counted[3], ow)
    return (ch[:, None] * cw[None, :]).astype(np.float64)


def _sum_pool(x: np.ndarray, kernel, stride, pads) -> np.ndarray:
    """Window sums (zero padding) of an NCHW array."""
    kh, kw = kernel
    avg = KERNELS["AveragePool"]([x], {"kernel": tuple(kernel), "strides": tuple(stride), "pads": tuple(pads),
                                       "count_include_pad": True})[0]
    return avg * (kh * kw)


def _windows(a: np.ndarray, kernel, stride, pads, dilation=(1, 1), fill: float = 0.0) -> np.ndarray:
    """(N, C, OH, OW, taps) view of every window of an NCHW array padded with ``fill``."""
    (kh, kw), (sy, sx), (dy, dx) = kernel, stride, dilation
    padded = pad2d(a, tuple(pads), fill)
    win = sliding_window_view(padded, ((kh - 1) * dy + 1, (kw - 1) * dx + 1), axis=(2, 3))
    win = win[:, :, ::sy, ::sx, ::dy, ::dx]
    return win.reshape(win.shape[:4] + (kh * kw,))


def _averaged(x: np.ndarray, b: ErrorBound, weight, kernel, stride, pads, dilation=(1, 1)) -> ErrorBound:
    """Error bound of ``weight`` x the sum over each window (average pooling, global average as a conv).

    Taps holding the same non-zero float value (a constant region: padding-only rows of a convolution and
    what follows them; one input picked by overlapping max-pooling windows) carry the *same* error, so
    their standard deviations add before squaring; other taps are independent. An average with equal
    positive weights is where that matters: with random weights shared errors cancel like independent ones."""
    xs = _windows(x, kernel, stride, pads, dilation, fill=np.nan)
    sd = _windows(np.sqrt(b.var), kernel, stride, pads, dilation)
    shared = (xs[..., :, None] == xs[..., None, :]) & (xs[..., :, None] != 0)
    shared |= np.eye(xs.shape[-1], dtype=bool)
    var = np.einsum("...i,...ij,...j->...", sd, shared.astype(np.float64), sd)
    det = _windows(b.det, kernel, stride, pads, dilation).sum(axis=-1)
    return ErrorBound(weight * det, weight * weight * var)


def _channel_average(w: np.ndarray, wd: np.ndarray) -> np.ndarray | None:
    """The weight a_k of each filter if the conv is a per-channel average (the frontend's GlobalAveragePool:
    filter k reads only channel k, every tap a_k > 0, exact in int8), else None."""
    k, c = w.shape[:2]
    if k != c or not np.array_equal(w, wd):
        return None
    diag = w[np.arange(k), np.arange(k)]
    off = w.copy()
    off[np.arange(k), np.arange(k)] = 0
    a = diag.reshape(k, -1)[:, 0]
    if np.any(off) or np.any(a <= 0) or not np.all(diag == a[:, None, None]):
        return None
    return a


def _max_pool(x: np.ndarray, kernel, stride, pads) -> np.ndarray:
    return KERNELS["MaxPool"]([x], {"kernel": tuple(kernel), "strides": tuple(stride), "pads": tuple(pads)})[0]


def _requantize(b: ErrorBound, y: np.ndarray, scale: float, *, steps: float = 1.0) -> ErrorBound:
    """Rounding to int8 at ``scale`` (``steps`` roundings of up to one step each) and saturation of ``y``."""
    sat = np.maximum(0.0, np.abs(y) - 127.0 * scale)
    return ErrorBound(b.det + sat, b.var + steps * scale * scale / 12.0)


def _bias_shift(bias_steps: np.ndarray) -> int:
    """ALU shift of a 16-bit bias operand (``quantize.coarse``'s rule: the smallest shift that fits)."""
    peak = float(np.max(np.abs(bias_steps), initial=0.0))
    shift = 0
    while peak / 2.0 ** shift > 32767.0:
        shift += 1
    return shift


def _sdp_chain(bound: ErrorBound, pre: np.ndarray, post: list[PostOp], first: int, in_step: np.ndarray,
               bounds: dict[str, ErrorBound], out: np.ndarray, out_scale: float) -> ErrorBound:
    """Post-ops ``post[first:]`` on an X1 input whose error is ``bound`` and real step per channel ``in_step``
    (``pre`` the float X1 input), then requantization to ``out_scale``."""
    det, var = bound.det, bound.var
    gamma = np.ones(in_step.size)
    for p in post[first:]:
        if isinstance(p, Affine):
            s = np.asarray(p.scale, dtype=np.float64)
            det, var = det * _channel(np.abs(s)), var * _channel(s * s)
            bias_steps = np.asarray(p.bias, dtype=np.float64) / np.where(s == 0, 1e-12, s * in_step)
            det = det + _channel(0.5 * 2.0 ** _bias_shift(bias_steps) * np.abs(s) * in_step)
            gamma = gamma * s
            pre = pre * _channel(s) + _channel(p.bias)
        elif isinstance(p, Eltwise):
            other = bounds[p.tensor]
            if p.kind == "add":  # the branches may share errors (x + x): standard deviations add
                det, var = det + other.det, (np.sqrt(var) + np.sqrt(other.var)) ** 2
            else:
                det, var = np.maximum(det, other.det), np.maximum(var, other.var)
    # X1 multiplier: 16 bits, the largest channel ratio using >= 15 of them.
    ratio = np.abs(gamma) * in_step
    ratio = np.where(ratio == 0, ratio.max(initial=0) or 1.0, ratio)
    det = det + _channel(ratio.max() / ratio / 32766.0) * np.abs(pre)
    det = det + out_scale * 2.0 ** -10 + np.abs(out) / 32766.0
    return _requantize(ErrorBound(det, var), out, out_scale)


def error_bound(lowered, ctx, values: dict[str, np.ndarray]) -> dict[str, ErrorBound]:
    """The error bound of every tensor of the compiled network (see the module docstring).

    ``lowered`` and ``ctx`` are what ``compile_graph`` returns (engine ops, scales, calibration means);
    ``values`` the float value of every tensor of the canonical graph on the input being checked."""
    scales = ctx.scales
    values = dict(values)
    bounds: dict[str, ErrorBound] = {}
    for t in lowered.inputs:
        bounds[t] = _requantize(ErrorBound(np.zeros_like(values[t]), np.zeros_like(values[t])), values[t], scales[t])
    for n in lowered.nodes:
        a = n.attrs
        x = values.get(n.inputs[0])
        b_in = bounds[n.inputs[0]]
        if n.op == "dla.pdp":
            (kh, kw), stride, pads = a["kernel"], a["stride"], a["pads"]
            # PDP divides by the whole kernel, unless lowering split the edges off (``divisor_pads``)
            count = _divisor(x, {"divisor_pads": a.get("divisor_pads", pads)}, (kh, kw), stride, pads) \
                if a["method"] == "avg" else None
            if a["method"] == "avg":
                y = _sum_pool(x, (kh, kw), stride, pads) / count
            else:
                y = _max_pool(x, (kh, kw), stride, pads)
            values.setdefault(n.outputs[0], y)
            y = values[n.outputs[0]]
            if a["method"] == "avg":
                # The reciprocals the compiler chose (one pair per edge region): their product's relative
                # error scales the output; the first stage rounds to an integer that the second multiplies
                # by RECIP_KERNEL_HEIGHT / 2^16 (in output steps), then the output rounds once more.
                gain = float(a.get("gain", 1.0)) * scales[n.inputs[0]] / scales[n.outputs[0]]
                passes = [prm for _, prm in a["pdp_regions"]] if a.get("pdp_regions") else [a["pdp"]]
                rel = max(abs(p.recip_w * p.recip_h * p.kernel[0] * p.kernel[1] / (2.0 ** 32 * gain) - 1.0)
                          for p in passes)
                stage1 = max(p.recip_h for p in passes) / 2.0 ** 16
                b = _averaged(x, b_in, 1.0 / count, (kh, kw), stride, pads)
                b.det = b.det + rel * np.abs(y)
                b = _requantize(b, y, scales[n.outputs[0]], steps=1.0 + stage1 * stage1)
                # The PDP stores the low byte of the average: beyond the range it wraps rather than saturates.
                # The range (calibration x AVG_POOL_HEADROOM) is the compiler's documented choice, so elements
                # that may wrap are left unchecked (an infinite bound), as is everything computed from them.
                wraps = np.abs(y) + b.limit() >= 127.5 * scales[n.outputs[0]]
                bounds[n.outputs[0]] = ErrorBound(np.where(wraps, np.inf, b.det), b.var)
            else:
                bounds[n.outputs[0]] = ErrorBound(_max_pool(b_in.det, (kh, kw), stride, pads),
                                                  _max_pool(b_in.var, (kh, kw), stride, pads))
        elif n.op == "dla.conv":
            w = np.asarray(a["weight"], dtype=np.float64)
            k = w.shape[0]
            if ctx.quant == "per-kernel":
                sw = np.full(k, max(float(np.max(np.abs(w))), 1e-12) / 127.0)
            else:
                sw = np.maximum(np.max(np.abs(w.reshape(k, -1)), axis=1), 1e-12) / 127.0
            wd = np.clip(np.rint(w / sw[:, None, None, None]), -127, 127) * sw[:, None, None, None]
            geom = (tuple(a["stride"]), tuple(a["pads"]), tuple(a["dilation"]), 1)
            average = _channel_average(w, wd)
            if average is not None:  # exact weights: only the input's errors, averaged
                b = _averaged(x, b_in, _channel(average), w.shape[2:], *geom[:3])
                det, var = b.det, b.var
            else:
                det = conv2d(b_in.det, np.abs(wd), None, *geom)
                var = conv2d(b_in.var, wd * wd, None, *geom)
                mean = ctx.channel_mean.get(n.inputs[0])
                mean = np.zeros(w.shape[1]) if mean is None or np.size(mean) != w.shape[1] else np.asarray(mean)
                dev2 = (pad2d(x, a["pads"]) - _channel(mean)) ** 2
                var = var + conv2d(dev2, (w != 0).astype(np.float64), None, geom[0], (0, 0, 0, 0), geom[2], 1) \
                    * _channel(sw * sw / 12.0)
            in_step = scales[n.inputs[0]] * sw
            first = a["post"][0]
            bias = np.asarray(first.bias, dtype=np.float64)
            det = det + _channel(0.5 * 2.0 ** _bias_shift(bias / in_step) * in_step)
            pre = conv2d(x, w, bias, *geom)
            bounds[n.outputs[0]] = _sdp_chain(ErrorBound(det, var), pre, a["post"], 1, in_step, bounds,
                                              values[n.outputs[0]], scales[n.outputs[0]])
        elif n.op == "dla.sdp":
            in_step = np.full(x.shape[1], scales[n.inputs[0]])
            bounds[n.outputs[0]] = _sdp_chain(b_in, x, a["post"], 0, in_step, bounds, values[n.outputs[0]],
                                              scales[n.outputs[0]])
        elif n.op in ("view.concat", "cpu.Concat"):
            axis = int(a.get("axis", 1))
            bounds[n.outputs[0]] = ErrorBound(np.concatenate([bounds[t].det for t in n.inputs], axis=axis),
                                              np.concatenate([bounds[t].var for t in n.inputs], axis=axis))
        elif n.op in ("cpu.MaxPool", "cpu.GlobalMaxPool"):
            kernel = KERNELS[n.op[4:]]
            bounds[n.outputs[0]] = ErrorBound(kernel([b_in.det], a)[0], kernel([b_in.var], a)[0])
        elif n.op == "cpu.AveragePool":
            (kh, kw), stride, pads = a["kernel"], a["strides"], a["pads"]
            b = _averaged(x, b_in, 1.0 / _divisor(x, a, (kh, kw), stride, pads), (kh, kw), stride, pads)
            bounds[n.outputs[0]] = _requantize(b, values[n.outputs[0]], scales[n.outputs[0]])
        else:
            raise ValueError(f"error_bound: no rule for {n.op} ({n.name})")
    return bounds


# ---- the property -------------------------------------------------------------------------------------------------
def _feeds(spec: NetSpec) -> tuple[list[dict[str, np.ndarray]], np.ndarray]:
    """``CALIBRATION`` calibration inputs and a fresh test input, N(0, 1), from the example's seed."""
    rng = np.random.default_rng([spec.seed, 2**31])
    shape = (1, *spec.input)
    calib = [{"x": rng.standard_normal(shape).astype(np.float32)} for _ in range(CALIBRATION)]
    return calib, rng.standard_normal(shape).astype(np.float32)


def reference_outputs(model: onnx.ModelProto, x: np.ndarray) -> list[np.ndarray]:
    """onnxruntime's float outputs of ``model`` on ``x``, in graph output order."""
    from regressions.lib.float_reference import session

    sess = session(model)
    return [np.asarray(v, dtype=np.float64) for v in sess.run(None, {"x": x})]


@dataclass
class Evaluation:
    """One compiled network on its test input: golden outputs, float reference outputs and the error bound
    of every output (by tensor name, in the model's shapes)."""

    x: np.ndarray
    got: dict[str, np.ndarray]
    ref: dict[str, np.ndarray]
    bounds: dict[str, ErrorBound]
    scales: dict[str, float]
    #: The compiler's lowered graph and context (all scales, calibration ranges), for diagnosis.
    lowered: Any = None
    ctx: Any = None

    def against(self, model: onnx.ModelProto) -> "Evaluation":
        """The same golden outputs and bounds against another float model's outputs (same output order):
        the bound's sensitivity test uses deliberately wrong references."""
        ref = dict(zip(self.ref, reference_outputs(model, self.x)))
        return Evaluation(self.x, self.got, ref, self.bounds, self.scales, self.lowered, self.ctx)

    def excess(self, name: str, sigmas: float = SIGMAS) -> np.ndarray:
        """|golden - float| minus the bound (and float32 slack) per element of output ``name``: > 0 fails."""
        ref = self.ref[name]
        err = np.abs(self.got[name].astype(np.float64) - ref)
        slack = 1e-5 * (1.0 + np.abs(ref)) + 1e-5 * float(np.max(np.abs(ref), initial=0.0))
        return np.where(np.isfinite(err), err - self.bounds[name].limit(sigmas) - slack, np.inf)

    def sigmas_used(self, name: str) -> float:
        """The largest (|error| - worst-case part) / standard deviation over the checked elements of ``name``:
        how many of the ``SIGMAS`` standard deviations the random part of the error needed."""
        err = np.abs(self.got[name].astype(np.float64) - self.ref[name])
        b = self.bounds[name]
        used = (err - b.det) / np.maximum(np.sqrt(b.var), 1e-30)
        return float(np.max(np.where(np.isfinite(b.limit()), used, 0.0), initial=0.0))

    def unchecked(self, name: str) -> int:
        """Elements of output ``name`` the bound does not cover (a possible average-pooling wrap upstream)."""
        return int(np.count_nonzero(~np.isfinite(self.bounds[name].limit())))

    def violations(self, sigmas: float = SIGMAS) -> list[str]:
        """One line per output exceeding its bound: where, by how much, in output steps."""
        lines = []
        for name, ref in self.ref.items():
            got = self.got[name]
            if got.shape != ref.shape:
                lines.append(f"output {name}: golden shape {list(got.shape)}, float shape {list(ref.shape)}")
                continue
            excess = self.excess(name, sigmas)
            if np.any(excess > 0):
                i = np.unravel_index(int(np.argmax(excess)), excess.shape)
                step = self.scales[name]
                b = self.bounds[name]
                lines.append(f"output {name} {list(ref.shape)}: {int(np.sum(excess > 0))}/{excess.size} elements "
                             f"outside the bound; worst at {tuple(int(v) for v in i)}: golden {float(got[i]):.5g}, "
                             f"float {float(ref[i]):.5g}, |diff| {abs(float(got[i]) - float(ref[i])) / step:.2f} "
                             f"steps > bound {float(b.limit(sigmas)[i]) / step:.2f} steps (worst case "
                             f"{float(b.det[i]) / step:.2f} + {sigmas:g} x {float(np.sqrt(b.var[i])) / step:.2f}; "
                             f"scale {step:.4g})")
        return lines


def evaluate(hw: HwConfig, spec: NetSpec) -> Evaluation:
    """Compile ``spec`` for ``hw`` (calibrated on ``CALIBRATION`` random inputs), run it on the golden target
    and onnxruntime on a fresh input, and bound the error from the compiler's scales."""
    from runtime.executor import Network

    model = build_model(spec)
    calib, x = _feeds(spec)
    graph = onnx_frontend.load(model)
    before_lowering: dict[str, Any] = {}

    def keep(name: str, g: Any) -> None:
        # The float graph lowering starts from: channels padded to atoms (pad_channels) and concat inputs
        # rescaled (equalize_concats) as the lowered tensors are; the same outputs as the model's.
        if name == "equalize_concats":
            before_lowering["graph"] = g.copy()

    ld, lowered, ctx = compile_graph(graph, hw.name, calib_inputs=calib, observe=keep)
    got = Network(ld).run({"x": x})
    bounds = error_bound(lowered, ctx, run_float(before_lowering["graph"], {"x": x}, keep=True))
    shapes = tensor_shapes(spec)
    names = [tensor_name(i) for i in output_indices(spec)]
    out_bounds = {}
    for i, name in zip(output_indices(spec), names):
        shape = (1, *shapes[i])
        b = bounds[name]
        out_bounds[name] = ErrorBound(np.broadcast_to(b.det, shape), np.broadcast_to(b.var, shape))
    return Evaluation(x, {t: np.asarray(got[t]) for t in names}, dict(zip(names, reference_outputs(model, x))),
                      out_bounds, {t: ctx.scales[t] for t in names}, lowered, ctx)


def check_network(hw: HwConfig, spec: NetSpec) -> None:
    """Golden output of the compiled network within the quantization bound of the float network."""
    try:
        ev = evaluate(hw, spec)
    except CompileError as exc:
        raise AssertionError(f"the compiler refused a network the strategy considers supported on {hw.name}: "
                             f"{exc}") from exc
    bad = ev.violations()
    assert not bad, f"{hw.name}: compiled network differs from the float network beyond the bound:\n" + \
        "\n".join(bad)


def check_profile(hw: HwConfig, spec: NetSpec) -> None:
    """``--profile performance`` is lossless in int8 (compressed weights, poolings fed by SDP on the fly;
    Winograd is fast-math's there): the compiled network writes exactly the default profile's bytes."""
    from compiler.profiles import optimised_ops
    from runtime.executor import Network

    model = build_model(spec)
    calib, x = _feeds(spec)
    raw = {}
    for profile in ("default", "performance"):
        try:
            ld, _, _ = compile_graph(onnx_frontend.load(model), hw.name, calib_inputs=calib, profile=profile)
        except CompileError as exc:
            raise AssertionError(f"the compiler refused a network the strategy considers supported on "
                                 f"{hw.name} under --profile {profile}: {exc}") from exc
        if profile == "performance":
            assert optimised_ops(ld)["Winograd"] == 0, "int8 performance used Winograd"
        raw[profile] = Network(ld).run({"x": x}, raw=True)
    for name, want in raw["default"].items():
        got = raw["performance"][name]
        if got.tobytes() != want.tobytes():
            i = tuple(int(v) for v in np.argwhere(got != want)[0])
            raise AssertionError(f"{hw.name}: --profile performance output {name} differs from default in "
                                 f"{int(np.sum(got != want))}/{got.size} values; first at {i}: {got[i]} vs {want[i]}")


PROPERTY = register(Property(
    name="network", engine="network", configs=("nv_small", "nv_medium_512", "nv_full"),
    strategy=networks, check=check_network, to_json=to_json, from_json=from_json, program=None))
PROFILE_PROPERTY = register(Property(
    name="network_profile", engine="network", configs=("nv_small", "nv_full"),
    strategy=networks, check=check_profile, to_json=to_json, from_json=from_json, program=None))
