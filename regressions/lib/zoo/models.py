"""Seeded random CNNs in ONNX (opset 13, input "data", NCHW, batch 1) for end-to-end compiler regressions.

The networks are random but *well-conditioned*, because the end-to-end acceptance compares int8 against float
(cosine similarity >= 0.99 and top-1 agreement >= 95% over random N(0, 1) inputs). With white-noise inputs the
logits' input-dependent part is small (global pooling averages it down) while int8 rounding, and above all any
spatially coherent error it turns into, is not; so the builder runs each network on a calibration batch of
N(0, 1) inputs while it creates it and fits the following to what the network really computes:

* kernels are He-scaled but spatially smooth (random blob/edge mixes + 30 % white noise, depthwise ones
  low-pass), like trained filters: each layer low-passes the white rounding noise of the layer before;
* every BatchNormalization takes its mean/var from the calibration activations (gamma ~ U(0.5, 1.5),
  beta ~ N(0, 0.1)), so its output is ~unit scale; the networks without BN (LeNet, inception) get the same by a
  data-dependent init of each conv's weights and bias, so no channel dominates a per-tensor int8 scale;
* global pooling sees small (4x4 / 8x8) maps and the networks are shallow (fewer int8 roundings);
* the final Gemm reads random mixtures of the leading principal directions of the features, centred on their
  calibration mean: logits are input signal rather than a constant favourite class, and the top-1 class varies
  between random inputs (all 10 classes occur);
* the logits spread by ~1.5 across classes (median top probability ~0.4): clearly input-dependent, yet soft
  enough that the per-input cosine of the softmax outputs stays >= 0.99 when int8 noise reorders two nearly
  tied classes; with a spread of 4 the softmax is so peaked that such near-ties cost up to 0.1 of cosine.

Measured with the real compiler (nv_small, 32-sample calibration) on 200 N(0, 1) inputs, seeds 0-2: top-1
agreement 94.5-99 %; per-input softmax cosine >= 0.99 on all but 0-6 of the 200 inputs. Those few are logits
beyond the calibrated range, clipped by the int8 output (two classes clipped to the same value tie), and
the top-1 misses mostly come from per-channel weight-rounding offsets (times the positive mean of ReLU outputs)
that global average pooling does not average away. Both are compiler-side (headroom for the network
output, bias correction) and are left to the compiler.

The graphs also convert to Caffe: every pooling's ONNX output size equals Caffe's ceil-mode size, there is no
padded AveragePool, BN is BatchNormalization, ReLU6 is Clip(0, 6) and every Gemm has transB=1.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from floatops.kernels import KERNELS

OPSET = 13
CALIBRATION = 256  # random N(0, 1) inputs the builder runs alongside, for BN statistics, init and classifier
LOGIT_SPREAD = 1.5  # target std of the logits across classes (see the module docstring)
WHITE_FRACTION = 0.3  # share (in std) of white noise in a spatial kernel; the rest is smooth
BASIS_WEIGHTS = np.array([1.0, 0.25, 0.25])  # blob vs. the two edge detectors in the smooth part
CLASSIFIER_PCS = 4  # leading principal directions of the pooled features the classifier reads (strongest vs int8 noise)


def pool_overhang(h: int, kernel: int, stride: int, pad: int, ceil: bool) -> tuple[int, int]:
    """(padded span the windows slide over, extra bottom/right rows Caffe's ceil-mode output size needs)."""
    span = h + 2 * pad - kernel
    out = -(-span // stride) + 1 if ceil else span // stride + 1
    if ceil and (out - 1) * stride >= h + pad:
        out -= 1
    return span, max(0, (out - 1) * stride + kernel - (h + 2 * pad))


class NetBuilder:
    """Appends ONNX nodes and, for each, computes its output on a calibration batch with the float kernels, so
    later layers (BN statistics, the classifier) can be fitted to the activations the network really has."""

    def __init__(self, name: str, seed: int, shape: tuple[int, int, int], batch: int = CALIBRATION,
                 opset: int = OPSET) -> None:
        self.name = name
        self.opset = opset
        self.rng = np.random.default_rng(seed)
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[onnx.TensorProto] = []
        self.shape = shape
        self.acts: dict[str, np.ndarray] = {"data": self.rng.standard_normal((batch, *shape))}
        self._count: dict[str, int] = {}

    # ---- plumbing ---------------------------------------------------------------------------------------
    def _name(self, base: str) -> str:
        i = self._count.get(base, 0) + 1
        self._count[base] = i
        return f"{base}{i}"

    def _const(self, name: str, value: np.ndarray) -> str:
        self.inits.append(numpy_helper.from_array(np.asarray(value, dtype=np.float32), name))
        return name

    def _add(self, op: str, inputs: list[str], name: str, ir: tuple[str, list[np.ndarray], dict[str, Any]],
             **attrs: Any) -> str:
        """Emit an ONNX node; ``ir`` = (kernel, constant operands, IR attrs) computes its calibration output."""
        self.nodes.append(helper.make_node(op, inputs, [name], name=name, **attrs))
        kernel, consts, ir_attrs = ir
        self.acts[name] = KERNELS[kernel]([self.acts[inputs[0]], *consts], ir_attrs)[0]
        return name

    def channels(self, x: str) -> int:
        return int(self.acts[x].shape[1])

    # ---- layers ---------------------------------------------------------------------------------------------
    def conv(self, x: str, k: int, kernel: int, stride: int = 1, pad: int = 0, group: int = 1,
             bias: bool = True, base: str = "conv") -> str:
        """He-scaled convolution with spatially smooth kernels (see ``kernels``). With ``bias`` (the networks
        without BN) the init is data-dependent: every output channel is rescaled to unit variance and shifted to a
        small random mean on the calibration batch (an inference BN folded into the weights), so no channel
        dominates the per-tensor int8 scale or dies before the next ReLU."""
        c = self.channels(x)
        w = self.kernels(k, c // group, kernel, depthwise=group > 1)
        ir = dict(strides=(stride, stride), pads=(pad,) * 4, dilations=(1, 1), group=group)
        b = None
        if bias:
            y = KERNELS["Conv"]([self.acts[x], w], ir)[0]
            std = y.std(axis=(0, 2, 3)) + 1e-6
            w = w / std[:, None, None, None]
            b = self.rng.normal(0.0, 0.1, k) - y.mean(axis=(0, 2, 3)) / std
        name = self._name(base)
        inputs = [x, self._const(f"{name}_W", w)]
        consts = [w.astype(np.float32).astype(np.float64)]
        if b is not None:
            inputs.append(self._const(f"{name}_B", b))
            consts.append(b.astype(np.float32).astype(np.float64))
        return self._add("Conv", inputs, name, ("Conv", consts, ir), kernel_shape=[kernel, kernel],
                         strides=[stride, stride], pads=[pad] * 4, group=group)

    def kernels(self, k: int, c: int, kernel: int, depthwise: bool) -> np.ndarray:
        """(k, c, kernel, kernel) He-scaled weights whose spatial slices are a random mix of a Gaussian blob and
        two Gaussian-derivative edge detectors plus some white noise. Like trained filters they are mostly
        low-pass, so each layer filters out most of the (white) int8 rounding noise of the layer before while the
        signal passes; depthwise kernels get a positive blob, since a single-channel filter summing to ~0 would
        pass mostly that noise (this halved the int8 error of the MobileNet in an emulation)."""
        he = np.sqrt(2.0 / (c * kernel * kernel))
        white = self.rng.standard_normal((k, c, kernel, kernel))
        if kernel == 1:
            return white * he
        r = np.arange(kernel) - (kernel - 1) / 2
        yy, xx = np.meshgrid(r, r, indexing="ij")
        bump = np.exp(-(xx ** 2 + yy ** 2) / (2 * (kernel / 3) ** 2))
        basis = np.stack([bump, xx * bump, yy * bump])  # blob and two edge detectors
        basis /= np.sqrt((basis ** 2).mean(axis=(1, 2), keepdims=True))
        coef = self.rng.standard_normal((k, c, 3))
        if depthwise:
            coef[..., 0] = np.abs(coef[..., 0]) * 0.5 + 1.0
        coef *= BASIS_WEIGHTS
        smooth = np.einsum("kcb,bij->kcij", coef, basis)
        smooth /= np.sqrt((smooth ** 2).mean())
        smooth *= np.sqrt(1 - WHITE_FRACTION ** 2)
        return (smooth + WHITE_FRACTION * white) * he

    def bn(self, x: str) -> str:
        """BatchNormalization with the calibration batch's own per-channel mean and variance."""
        a = self.acts[x]
        c = a.shape[1]
        mean, var = a.mean(axis=(0, 2, 3)), a.var(axis=(0, 2, 3)) + 1e-3
        gamma, beta = self.rng.uniform(0.5, 1.5, c), self.rng.normal(0.0, 0.1, c)
        eps = 1e-5
        name = self._name("bn")
        params = [self._const(f"{name}_{k}", v) for k, v in
                  (("scale", gamma), ("B", beta), ("mean", mean), ("var", var))]
        g32, b32, m32, v32 = (v.astype(np.float32).astype(np.float64) for v in (gamma, beta, mean, var))
        scale = g32 / np.sqrt(v32 + eps)
        return self._add("BatchNormalization", [x, *params], name,
                         ("ChannelAffine", [scale, b32 - m32 * scale], {}), epsilon=eps)

    def relu(self, x: str) -> str:
        return self._add("Relu", [x], self._name("relu"), ("Relu", [], {}))

    def relu6(self, x: str) -> str:
        if "zero" not in {i.name for i in self.inits}:
            self._const("zero", np.array(0.0))
            self._const("six", np.array(6.0))
        return self._add("Clip", [x, "zero", "six"], self._name("relu6_"), ("Clip", [], dict(min=0.0, max=6.0)))

    def max_pool(self, x: str, kernel: int, stride: int, pad: int = 0, ceil: bool = False) -> str:
        """Only sizes where ONNX's output equals Caffe's ceil-mode output (ceil_mode=1, or floor == ceil)."""
        span, extra = pool_overhang(self.acts[x].shape[2], kernel, stride, pad, ceil)
        assert ceil or span % stride == 0, "floor and ceil pooling sizes differ: Caffe would disagree"
        ir = dict(kernel=(kernel, kernel), strides=(stride, stride), pads=(pad, pad, pad + extra, pad + extra))
        return self._add("MaxPool", [x], self._name("pool"), ("MaxPool", [], ir), kernel_shape=[kernel, kernel],
                         strides=[stride, stride], pads=[pad] * 4, ceil_mode=int(ceil))

    def avg_pool(self, x: str, kernel: int, stride: int) -> str:
        """Unpadded average pooling (floor and ceil sizes agree when the stride divides the span)."""
        span = self.acts[x].shape[2] - kernel
        assert span % stride == 0, "floor and ceil pooling sizes differ: Caffe would disagree"
        ir = dict(kernel=(kernel, kernel), strides=(stride, stride), pads=(0, 0, 0, 0))
        return self._add("AveragePool", [x], self._name("avgpool"), ("AveragePool", [], ir),
                         kernel_shape=[kernel, kernel], strides=[stride, stride])

    def lrn(self, x: str, size: int = 5) -> str:
        attrs = dict(size=size, alpha=1e-4, beta=0.75, bias=1.0)
        return self._add("LRN", [x], self._name("norm"), ("LRN", [], attrs), **attrs)

    def add(self, a: str, b: str) -> str:
        name = self._name("add")
        self.nodes.append(helper.make_node("Add", [a, b], [name], name=name))
        self.acts[name] = self.acts[a] + self.acts[b]
        return name

    def concat(self, xs: list[str]) -> str:
        name = self._name("concat")
        self.nodes.append(helper.make_node("Concat", xs, [name], name=name, axis=1))
        self.acts[name] = np.concatenate([self.acts[x] for x in xs], axis=1)
        return name

    def global_avg_pool(self, x: str) -> str:
        return self._add("GlobalAveragePool", [x], self._name("gap"), ("GlobalAveragePool", [], {}))

    def flatten(self, x: str) -> str:
        return self._add("Flatten", [x], self._name("flatten"), ("Flatten", [], dict(axis=1)), axis=1)

    def gemm(self, x: str, k: int, w: np.ndarray | None = None, b: np.ndarray | None = None) -> str:
        """Fully connected, W (K, C) with transB=1; He-initialised unless given."""
        c = self.acts[x].shape[1]
        w = self.rng.standard_normal((k, c)) * np.sqrt(2.0 / c) if w is None else w
        b = self.rng.normal(0.0, 0.05, k) if b is None else b
        name = self._name("fc")
        wn, bn = self._const(f"{name}_W", w), self._const(f"{name}_B", b)
        consts = [w.astype(np.float32).astype(np.float64), b.astype(np.float32).astype(np.float64)]
        return self._add("Gemm", [x, wn, bn], name, ("Gemm", consts, {}), transB=1)

    def classifier(self, x: str, classes: int = 10) -> str:
        """Gemm reading random mixtures of the leading principal directions of the features (where the signal
        is largest against int8 noise), centred on the calibration mean (so the logits are input signal, not a
        constant favourite class) and scaled to a logit spread of ``LOGIT_SPREAD`` across classes."""
        f = self.acts[x]
        mu = f.mean(axis=0)
        _, s, vt = np.linalg.svd(f - mu, full_matrices=False)
        r = int(min(CLASSIFIER_PCS, np.count_nonzero(s > s[0] * 1e-6)))
        w = self.rng.standard_normal((classes, r)) @ vt[:r]
        w *= LOGIT_SPREAD / ((f - mu) @ w.T).std(axis=1).mean()
        return self.gemm(x, classes, w=w, b=-(mu @ w.T))

    def softmax(self, x: str) -> str:
        return self._add("Softmax", [x], self._name("prob"), ("Softmax", [], dict(axis=1)), axis=1)

    # ---- result ---------------------------------------------------------------------------------------------
    def model(self, output: str) -> onnx.ModelProto:
        n_out = self.acts[output].shape[1:]
        graph = helper.make_graph(
            self.nodes, self.name,
            [helper.make_tensor_value_info("data", TensorProto.FLOAT, [1, *self.shape])],
            [helper.make_tensor_value_info(output, TensorProto.FLOAT, [1, *n_out])],
            self.inits)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", self.opset)],
                                  producer_name="dla-coverify zoo")
        model.ir_version = 8  # readable by every onnx >= 1.10 and by our Caffe converter's protobuf
        onnx.checker.check_model(model)
        return model


# ---- the networks --------------------------------------------------------------------------------------------
def lenet(seed: int = 0) -> onnx.ModelProto:
    """LeNet-5 (Caffe's MNIST variant), 1x28x28: conv5x5x20 -> maxpool2 -> conv5x5x50 -> maxpool2 -> flatten ->
    fc500 -> relu -> fc10 -> softmax."""
    nb = NetBuilder("lenet", seed, (1, 28, 28))
    x = nb.conv("data", 20, 5)
    x = nb.max_pool(x, 2, 2)
    x = nb.conv(x, 50, 5)
    x = nb.max_pool(x, 2, 2)
    x = nb.flatten(x)
    x = nb.relu(nb.gemm(x, 500))
    return nb.model(nb.softmax(nb.classifier(x)))


def poolnet(seed: int = 0) -> onnx.ModelProto:
    """Only SDP (X1/X2, REG and MEM operands) and PDP layers, for RTL that has no convolution, 16x16x16: BN +
    ReLU (SDP X1, per-channel operands from memory) -> maxpool 2 s2 -> BN + ReLU + residual add of the pooled
    map (SDP X1 then X2 with a per-element operand) -> average pool 2 s2 -> 16x4x4."""
    nb = NetBuilder("poolnet", seed, (16, 16, 16))
    p = nb.max_pool(nb.relu(nb.bn("data")), 2, 2)
    x = nb.add(nb.relu(nb.bn(p)), p)
    return nb.model(nb.avg_pool(x, 2, 2))


def _basic_block(nb: NetBuilder, x: str, k: int, stride: int) -> str:
    y = nb.relu(nb.bn(nb.conv(x, k, 3, stride, 1, bias=False)))
    y = nb.bn(nb.conv(y, k, 3, 1, 1, bias=False))
    shortcut = x if stride == 1 and nb.channels(x) == k else nb.bn(nb.conv(x, k, 1, stride, 0, bias=False))
    return nb.relu(nb.add(y, shortcut))


def resnet(seed: int = 0) -> onnx.ModelProto:
    """ResNet-style, 3x32x32: conv3x3x16 s2 + BN + relu, a basic block of 16 (identity shortcut) and one of 32
    (stride 2, 1x1 stride-2 projection shortcut with BN), global average pool, flatten, fc10, softmax. Shallow
    on purpose: every extra quantized layer adds int8 noise to random-input logits."""
    nb = NetBuilder("resnet", seed, (3, 32, 32))
    x = nb.relu(nb.bn(nb.conv("data", 16, 3, 2, 1, bias=False)))
    x = _basic_block(nb, x, 16, 1)
    x = _basic_block(nb, x, 32, 2)
    x = nb.flatten(nb.global_avg_pool(x))
    return nb.model(nb.softmax(nb.classifier(x)))


def mobilenet(seed: int = 0) -> onnx.ModelProto:
    """MobileNet-style, 3x32x32: conv3x3 s2 + BN + ReLU6 (Clip(0, 6)), then three blocks of depthwise 3x3
    (group = C) + BN + ReLU6 and pointwise 1x1 + BN + ReLU6 (16->32, 32->64 stride 2, 64->128 stride 2), global
    average pool, flatten, fc10, softmax."""
    nb = NetBuilder("mobilenet", seed, (3, 32, 32))
    x = nb.relu6(nb.bn(nb.conv("data", 16, 3, 2, 1, bias=False)))
    for k, stride in ((32, 1), (64, 2), (128, 2)):
        c = nb.channels(x)
        x = nb.relu6(nb.bn(nb.conv(x, c, 3, stride, 1, group=c, bias=False, base="dw")))
        x = nb.relu6(nb.bn(nb.conv(x, k, 1, bias=False, base="pw")))
    x = nb.flatten(nb.global_avg_pool(x))
    return nb.model(nb.softmax(nb.classifier(x)))


def inception(seed: int = 0) -> onnx.ModelProto:
    """GoogLeNet-style, 3x32x32: conv3x3x32 s2 + relu, maxpool 3x3 s2 (ceil mode, 16 -> 8), LRN(5), one inception
    block (1x1 | 1x1 -> 3x3 | 1x1 -> 5x5 | maxpool 3x3 s1 p1 -> 1x1, concatenated to 80 channels), maxpool 3x3
    s2 (ceil mode, 8 -> 4), global average pool, flatten, fc10, softmax. Pooling to 4x4 before the global
    average keeps the pooled features' input-dependent part large against their mean (and its int8 step)."""
    nb = NetBuilder("inception", seed, (3, 32, 32))
    x = nb.relu(nb.conv("data", 32, 3, 2, 1))
    x = nb.lrn(nb.max_pool(x, 3, 2, ceil=True))
    b1 = nb.relu(nb.conv(x, 16, 1))
    b2 = nb.relu(nb.conv(nb.relu(nb.conv(x, 16, 1)), 32, 3, 1, 1))
    b3 = nb.relu(nb.conv(nb.relu(nb.conv(x, 8, 1)), 16, 5, 1, 2))
    b4 = nb.relu(nb.conv(nb.max_pool(x, 3, 1, 1), 16, 1))
    x = nb.max_pool(nb.concat([b1, b2, b3, b4]), 3, 2, ceil=True)
    x = nb.flatten(nb.global_avg_pool(x))
    return nb.model(nb.softmax(nb.classifier(x)))


def cost(model: onnx.ModelProto) -> tuple[int, int]:
    """(multiply-accumulates, parameters) of a model, from the shapes the ONNX frontend infers."""
    from compiler.frontend.onnx import load

    g = load(model)
    macs = 0
    for n in g.nodes:
        out = g.shapes[n.outputs[0]]
        if n.op == "Conv":
            w = g.consts[n.inputs[1]]
            macs += int(np.prod(out)) * int(np.prod(w.shape[1:]))
        elif n.op == "Gemm":
            macs += int(np.prod(g.consts[n.inputs[1]].shape)) * out[0]
    params = sum(int(numpy_helper.to_array(t).size) for t in model.graph.initializer)
    return macs, params
