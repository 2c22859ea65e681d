"""The classic ImageNet architectures as ONNX exporters of their time wrote them (opset 9: Dropout with its
mask output, Reshape with a constant shape before Gemm, ceil-mode pooling as asymmetric pads, channel shuffle
as Reshape-Transpose-Reshape), with seeded He-normal-scale weights.

These are our own generators of the published graphs, not the ONNX model-zoo files: the shapes (layer sizes,
groups, pads, concat fan-in) are what the compiler must handle; the weights only need to keep activations in
range. So every BatchNormalization takes its statistics from a small batch of N(0, 1) inputs the builder runs
as it builds, and networks without BN get the same by a data-dependent init of each conv (``NetBuilder.conv``
with a bias). ``width`` scales every channel count (a reduced-width network keeps every op, every fan-in and
every spatial size, for the level-ci regressions); ``size`` is the input height and width.
"""
from __future__ import annotations

from typing import Callable

import numpy as np
import onnx
from onnx import helper, numpy_helper

from regressions.lib.zoo.models import NetBuilder, pool_overhang

OPSET = 9
BATCH = 2  # inputs the builder runs while building (BN statistics, data-dependent init)
CLASSES = 1000
ROUND = 32  # channel granularity of reduced-width networks


class ExportBuilder(NetBuilder):
    """``NetBuilder`` writing opset-9 exporter idioms, with channel counts scaled by ``width``."""

    def __init__(self, name: str, seed: int, size: int, width: float) -> None:
        super().__init__(name, seed, (3, size, size), batch=BATCH, opset=OPSET)
        self.width = width

    def ch(self, c: int) -> int:
        """A channel count scaled by ``width``, in multiples of ``ROUND`` (the published counts mostly are:
        scaled ones stay on nv_large/nv_full's 32-channel memory atom, so a reduced network keeps the full
        one's zero-copy concats)."""
        return c if self.width == 1.0 else max(ROUND, int(round(c * self.width / ROUND)) * ROUND)

    def conv_relu(self, x: str, k: int, kernel: int, stride: int = 1, pad: int = 0, group: int = 1) -> str:
        return self.relu(self.conv(x, k, kernel, stride, pad, group))

    def conv_bn(self, x: str, k: int, kernel: int, stride: int = 1, pad: int = 0, group: int = 1,
                relu: bool = True) -> str:
        y = self.bn(self.conv(x, k, kernel, stride, pad, group, bias=False))
        return self.relu(y) if relu else y

    def pool(self, op: str, x: str, kernel: int, stride: int, pad: int = 0, ceil: bool = False,
             count_include_pad: bool = False) -> str:
        """Max/average pooling; ``ceil`` rounds the output size up the way Caffe does, written as extra
        bottom/right padding (opset 9 has no ceil_mode)."""
        _, extra = pool_overhang(self.acts[x].shape[2], kernel, stride, pad, ceil)
        pads = (pad, pad, pad + extra, pad + extra)
        ir = dict(kernel=(kernel, kernel), strides=(stride, stride), pads=pads,
                  count_include_pad=count_include_pad)
        attrs = dict(kernel_shape=[kernel, kernel], strides=[stride, stride], pads=[pad, pad, pad + extra, pad + extra])
        if op == "AveragePool":
            attrs["count_include_pad"] = int(count_include_pad)
        base = "pool" if op == "MaxPool" else "avgpool"
        return self._add(op, [x], self._name(base), (op, [], ir), **attrs)

    def shape_const(self, name: str, shape: list[int]) -> str:
        """An int64 initializer (Reshape's shape operand)."""
        self.inits.append(numpy_helper.from_array(np.array(shape, dtype=np.int64), name))
        return name

    def dropout(self, x: str, ratio: float = 0.5) -> str:
        """Dropout as opset-9 exporters write it: two outputs, the mask unused."""
        name = self._name("drop")
        self.nodes.append(helper.make_node("Dropout", [x], [name, f"{name}_mask"], name=name, ratio=ratio))
        self.acts[name] = self.acts[x]
        return name

    def reshape_flat(self, x: str) -> str:
        """Reshape to (1, -1) through a constant shape tensor, as exporters write a flatten before Gemm."""
        name = self._name("reshape")
        shape = self.shape_const(f"{name}_shape", [1, -1])
        self.nodes.append(helper.make_node("Reshape", [x, shape], [name], name=name))
        self.acts[name] = self.acts[x].reshape(self.acts[x].shape[0], -1)
        return name

    def shuffle(self, x: str, groups: int) -> str:
        """Channel shuffle: Reshape (N, g, C/g, H, W) -> Transpose (0, 2, 1, 3, 4) -> Reshape (N, C, H, W)."""
        n, c, h, w = self.acts[x].shape
        a, t, b = self._name("shuffle_r"), self._name("shuffle_t"), self._name("shuffle")
        s1 = self.shape_const(f"{a}_shape", [1, groups, c // groups, h, w])
        s2 = self.shape_const(f"{b}_shape", [1, c, h, w])
        self.nodes += [helper.make_node("Reshape", [x, s1], [a], name=a),
                       helper.make_node("Transpose", [a], [t], name=t, perm=[0, 2, 1, 3, 4]),
                       helper.make_node("Reshape", [t, s2], [b], name=b)]
        self.acts[b] = self.acts[x].reshape(n, groups, c // groups, h, w).transpose(0, 2, 1, 3, 4).reshape(n, c, h, w)
        return b

    def fc(self, x: str, k: int, relu: bool = True, drop: bool = True) -> str:
        y = self.gemm(x, k)
        if relu:
            y = self.relu(y)
        return self.dropout(y) if drop else y

    def head(self, x: str, pool: str = "global", flatten: str = "reshape") -> onnx.ModelProto:
        """Global average pool (or the AveragePool of the whole map), flatten, FC 1000, softmax."""
        if pool == "global":
            x = self.global_avg_pool(x)
        else:
            k = self.acts[x].shape[2]
            x = self.pool("AveragePool", x, k, 1)
        x = self.reshape_flat(x) if flatten == "reshape" else self.flatten(x)
        return self.model(self.softmax(self.gemm(x, CLASSES)))


# ---- the networks ----------------------------------------------------------------------------------------------
def _alexnet_features(nb: ExportBuilder, lrn_first: bool) -> str:
    """AlexNet / CaffeNet convolutions: 11x11/4, 5x5 g2, 3x3, 3x3 g2, 3x3 g2, three 3x3/2 ceil pools, two LRNs
    (AlexNet normalises before pooling, CaffeNet after)."""
    x = "data"
    for k, kernel, stride, pad, group, norm in ((96, 11, 4, 0, 1, True), (256, 5, 1, 2, 2, True)):
        x = nb.conv_relu(x, nb.ch(k), kernel, stride, pad, group)
        if lrn_first:
            x = nb.pool("MaxPool", nb.lrn(x), 3, 2, ceil=True)
        else:
            x = nb.lrn(nb.pool("MaxPool", x, 3, 2, ceil=True))
    x = nb.conv_relu(x, nb.ch(384), 3, 1, 1)
    x = nb.conv_relu(x, nb.ch(384), 3, 1, 1, 2)
    x = nb.conv_relu(x, nb.ch(256), 3, 1, 1, 2)
    return nb.pool("MaxPool", x, 3, 2, ceil=True)


def _classifier(nb: ExportBuilder, x: str, hidden: int) -> onnx.ModelProto:
    x = nb.reshape_flat(x)
    x = nb.fc(nb.fc(x, nb.ch(hidden)), nb.ch(hidden))
    return nb.model(nb.softmax(nb.gemm(x, CLASSES)))


def alexnet(seed: int = 0, size: int = 224, width: float = 1.0) -> onnx.ModelProto:
    """BVLC AlexNet: 5 convs (2 grouped), LRN, 3 ceil-mode max pools, FC 9216 -> 4096 -> 4096 -> 1000."""
    nb = ExportBuilder("alexnet", seed, size, width)
    return _classifier(nb, _alexnet_features(nb, lrn_first=True), 4096)


def caffenet(seed: int = 0, size: int = 224, width: float = 1.0) -> onnx.ModelProto:
    """BVLC CaffeNet: AlexNet with each LRN after its pool."""
    nb = ExportBuilder("caffenet", seed, size, width)
    return _classifier(nb, _alexnet_features(nb, lrn_first=False), 4096)


def vgg19(seed: int = 0, size: int = 224, width: float = 1.0) -> onnx.ModelProto:
    """VGG-19: 16 3x3 convs in 5 stages (64, 128, 256x4, 512x4, 512x4), 2x2 max pools, FC 25088 -> 4096 -> 4096."""
    nb = ExportBuilder("vgg19", seed, size, width)
    x = "data"
    for k, n in ((64, 2), (128, 2), (256, 4), (512, 4), (512, 4)):
        for _ in range(n):
            x = nb.conv_relu(x, nb.ch(k), 3, 1, 1)
        x = nb.pool("MaxPool", x, 2, 2)
    return _classifier(nb, x, 4096)


def zfnet512(seed: int = 0, size: int = 224, width: float = 1.0) -> onnx.ModelProto:
    """ZFNet-512: 7x7/2 and 5x5/2 convs with LRN and 3x3/2 pools, then 3x3 convs of 512, 1024, 512, a pool and
    FC 18432 -> 4096 -> 4096 -> 1000."""
    nb = ExportBuilder("zfnet512", seed, size, width)
    x = nb.lrn(nb.conv_relu("data", nb.ch(96), 7, 2, 1))
    x = nb.pool("MaxPool", x, 3, 2, 1)
    x = nb.lrn(nb.conv_relu(x, nb.ch(256), 5, 2, 0))
    x = nb.pool("MaxPool", x, 3, 2, 1)
    for k in (512, 1024, 512):
        x = nb.conv_relu(x, nb.ch(k), 3, 1, 1)
    x = nb.pool("MaxPool", x, 3, 2, 1)
    return _classifier(nb, x, 4096)


def _fire(nb: ExportBuilder, x: str, squeeze: int, expand: int) -> str:
    s = nb.conv_relu(x, nb.ch(squeeze), 1)
    return nb.concat([nb.conv_relu(s, nb.ch(expand), 1), nb.conv_relu(s, nb.ch(expand), 3, 1, 1)])


def squeezenet(seed: int = 0, size: int = 224, width: float = 1.0) -> onnx.ModelProto:
    """SqueezeNet 1.0: 7x7/2 conv, 8 fire modules (squeeze 1x1, expand 1x1 | 3x3 concatenated), 3 ceil-mode
    max pools, dropout, conv10 1x1 to 1000 classes, global average pool."""
    nb = ExportBuilder("squeezenet", seed, size, width)
    x = nb.pool("MaxPool", nb.conv_relu("data", nb.ch(96), 7, 2), 3, 2, ceil=True)
    for i, (sq, ex) in enumerate(((16, 64), (16, 64), (32, 128), (32, 128), (48, 192), (48, 192), (64, 256),
                                  (64, 256))):
        x = _fire(nb, x, sq, ex)
        if i in (2, 6):
            x = nb.pool("MaxPool", x, 3, 2, ceil=True)
    x = nb.conv_relu(nb.dropout(x), CLASSES, 1)
    x = nb.reshape_flat(nb.global_avg_pool(x))
    return nb.model(nb.softmax(x))


def _inception_v1(nb: ExportBuilder, x: str, c1: int, r3: int, c3: int, r5: int, c5: int, cp: int) -> str:
    b1 = nb.conv_relu(x, nb.ch(c1), 1)
    b2 = nb.conv_relu(nb.conv_relu(x, nb.ch(r3), 1), nb.ch(c3), 3, 1, 1)
    b3 = nb.conv_relu(nb.conv_relu(x, nb.ch(r5), 1), nb.ch(c5), 5, 1, 2)
    b4 = nb.conv_relu(nb.pool("MaxPool", x, 3, 1, 1), nb.ch(cp), 1)
    return nb.concat([b1, b2, b3, b4])


def inception_v1(seed: int = 0, size: int = 224, width: float = 1.0) -> onnx.ModelProto:
    """GoogLeNet (Inception v1): 7x7/2 stem, LRNs, 9 inception modules (4 branches concatenated), ceil-mode max
    pools, a 7x7 AveragePool, dropout 0.4, FC 1024 -> 1000."""
    nb = ExportBuilder("inception_v1", seed, size, width)
    x = nb.pool("MaxPool", nb.conv_relu("data", nb.ch(64), 7, 2, 3), 3, 2, ceil=True)
    x = nb.lrn(x)
    x = nb.conv_relu(nb.conv_relu(x, nb.ch(64), 1), nb.ch(192), 3, 1, 1)
    x = nb.pool("MaxPool", nb.lrn(x), 3, 2, ceil=True)
    x = _inception_v1(nb, x, 64, 96, 128, 16, 32, 32)
    x = _inception_v1(nb, x, 128, 128, 192, 32, 96, 64)
    x = nb.pool("MaxPool", x, 3, 2, ceil=True)
    for cfg in ((192, 96, 208, 16, 48, 64), (160, 112, 224, 24, 64, 64), (128, 128, 256, 24, 64, 64),
                (112, 144, 288, 32, 64, 64), (256, 160, 320, 32, 128, 128)):
        x = _inception_v1(nb, x, *cfg)
    x = nb.pool("MaxPool", x, 3, 2, ceil=True)
    x = _inception_v1(nb, x, 256, 160, 320, 32, 128, 128)
    x = _inception_v1(nb, x, 384, 192, 384, 48, 128, 128)
    k = nb.acts[x].shape[2]
    x = nb.dropout(nb.pool("AveragePool", x, k, 1), 0.4)
    return nb.model(nb.softmax(nb.gemm(nb.reshape_flat(x), CLASSES)))


def _inception_v2(nb: ExportBuilder, x: str, c1: int, r3: int, c3: int, rd: int, cd: int, pool: str, cp: int,
                  stride: int = 1) -> str:
    """One BN-Inception module: 1x1 | 1x1 -> 3x3 | 1x1 -> 3x3 -> 3x3 | pool (-> 1x1); stride 2 modules drop the
    1x1 branch and pass the max pool through."""
    branches = []
    if c1:
        branches.append(nb.conv_bn(x, nb.ch(c1), 1))
    branches.append(nb.conv_bn(nb.conv_bn(x, nb.ch(r3), 1), nb.ch(c3), 3, stride, 1))
    d = nb.conv_bn(nb.conv_bn(x, nb.ch(rd), 1), nb.ch(cd), 3, 1, 1)
    branches.append(nb.conv_bn(d, nb.ch(cd), 3, stride, 1))
    if stride == 2:
        branches.append(nb.pool("MaxPool", x, 3, 2, ceil=True))
    else:
        p = nb.pool(pool, x, 3, 1, 1, count_include_pad=True)
        branches.append(nb.conv_bn(p, nb.ch(cp), 1))
    return nb.concat(branches)


def inception_v2(seed: int = 0, size: int = 224, width: float = 1.0) -> onnx.ModelProto:
    """BN-Inception (Inception v2): BN after every conv, 3x3 pairs instead of 5x5, 3x3 average pools (padding
    counted) in the pool branches, two stride-2 modules, a 7x7 AveragePool, FC 1024 -> 1000."""
    nb = ExportBuilder("inception_v2", seed, size, width)
    x = nb.pool("MaxPool", nb.conv_bn("data", nb.ch(64), 7, 2, 3), 3, 2, ceil=True)
    x = nb.conv_bn(nb.conv_bn(x, nb.ch(64), 1), nb.ch(192), 3, 1, 1)
    x = nb.pool("MaxPool", x, 3, 2, ceil=True)
    a = "AveragePool"
    x = _inception_v2(nb, x, 64, 64, 64, 64, 96, a, 32)
    x = _inception_v2(nb, x, 64, 64, 96, 64, 96, a, 64)
    x = _inception_v2(nb, x, 0, 128, 160, 64, 96, a, 0, stride=2)
    for cfg in ((224, 64, 96, 96, 128, a, 128), (192, 96, 128, 96, 128, a, 128), (160, 128, 160, 128, 160, a, 128),
                (96, 128, 192, 160, 192, a, 128)):
        x = _inception_v2(nb, x, *cfg)
    x = _inception_v2(nb, x, 0, 128, 192, 192, 256, a, 0, stride=2)
    x = _inception_v2(nb, x, 352, 192, 320, 160, 224, a, 128)
    x = _inception_v2(nb, x, 352, 192, 320, 192, 224, "MaxPool", 128)
    return nb.head(x, pool="window")


def resnet50(seed: int = 0, size: int = 224, width: float = 1.0) -> onnx.ModelProto:
    """ResNet-50 v1: 7x7/2 stem + BN + ReLU + 3x3/2 max pool, bottlenecks of 3, 4, 6, 3 blocks (1x1, 3x3, 1x1
    with BN, projection shortcuts, stride on the 3x3), global average pool, FC 2048 -> 1000."""
    nb = ExportBuilder("resnet50", seed, size, width)
    x = nb.pool("MaxPool", nb.conv_bn("data", nb.ch(64), 7, 2, 3), 3, 2, 1)
    for stage, (blocks, w) in enumerate(((3, 64), (4, 128), (6, 256), (3, 512))):
        for b in range(blocks):
            stride = 2 if b == 0 and stage > 0 else 1
            y = nb.conv_bn(x, nb.ch(w), 1)
            y = nb.conv_bn(y, nb.ch(w), 3, stride, 1)
            y = nb.conv_bn(y, nb.ch(w * 4), 1, relu=False)
            short = nb.conv_bn(x, nb.ch(w * 4), 1, stride, relu=False) if b == 0 else x
            x = nb.relu(nb.add(y, short))
    return nb.head(x, flatten="flatten")


def densenet121(seed: int = 0, size: int = 224, width: float = 1.0) -> onnx.ModelProto:
    """DenseNet-121 as torchvision exports it: 4 dense blocks (6, 12, 24, 16 layers of BN-ReLU-1x1(128)-BN-ReLU-
    3x3(32)), each layer reading the Concat of every earlier feature map of its block (so one map feeds many
    Concats), transitions BN-ReLU-1x1(C/2)-AvgPool 2x2/2, final BN-ReLU, global average pool, FC 1024 -> 1000."""
    nb = ExportBuilder("densenet121", seed, size, width)
    x = nb.pool("MaxPool", nb.conv_bn("data", nb.ch(64), 7, 2, 3), 3, 2, 1)
    growth = nb.ch(32)
    for i, layers in enumerate((6, 12, 24, 16)):
        feats = [x]
        for _ in range(layers):
            inp = feats[0] if len(feats) == 1 else nb.concat(feats)
            y = nb.conv(nb.relu(nb.bn(inp)), nb.ch(128), 1, bias=False)
            y = nb.conv(nb.relu(nb.bn(y)), growth, 3, 1, 1, bias=False)
            feats.append(y)
        x = nb.concat(feats)
        if i < 3:
            half = nb.channels(x) // 2 if width == 1.0 else max(ROUND, nb.channels(x) // (2 * ROUND) * ROUND)
            x = nb.conv(nb.relu(nb.bn(x)), half, 1, bias=False)
            x = nb.pool("AveragePool", x, 2, 2)
    return nb.head(nb.relu(nb.bn(x)), flatten="flatten")


def _shuffle_unit(nb: ExportBuilder, x: str, out: int, groups: int, stride: int, first_group: bool) -> str:
    """ShuffleNet v1 unit: grouped 1x1 (bottleneck out/4) + BN + ReLU, channel shuffle, depthwise 3x3 + BN,
    grouped 1x1 + BN; stride 2 units concatenate a 3x3/2 average-pooled shortcut, stride 1 units add it."""
    cin = nb.channels(x)
    mid = out // 4
    g1 = groups if first_group else 1
    y = nb.conv_bn(x, mid, 1, group=g1)
    y = nb.shuffle(y, g1) if g1 > 1 else y
    y = nb.conv_bn(y, mid, 3, stride, 1, group=mid, relu=False)
    if stride == 2:
        y = nb.conv_bn(y, out - cin, 1, group=groups, relu=False)
        short = nb.pool("AveragePool", x, 3, 2, 1, count_include_pad=True)
        return nb.relu(nb.concat([short, y]))
    y = nb.conv_bn(y, out, 1, group=groups, relu=False)
    return nb.relu(nb.add(y, x))


def shufflenet(seed: int = 0, size: int = 224, width: float = 1.0, groups: int = 3) -> onnx.ModelProto:
    """ShuffleNet v1 (g = 3): 3x3/2 conv 24 + 3x3/2 max pool, stages of 4, 8, 4 units (240, 480, 960 channels),
    global average pool, FC 960 -> 1000."""
    nb = ExportBuilder("shufflenet", seed, size, width)
    step = groups * 4  # channel counts stay divisible by the groups after the /4 bottleneck
    stem = max(groups, int(round(24 * width / groups)) * groups)
    x = nb.pool("MaxPool", nb.conv_bn("data", stem, 3, 2, 1), 3, 2, 1)
    for stage, (units, out) in enumerate(((4, 240), (8, 480), (4, 960))):
        out = max(step, int(round(out * width / step)) * step)
        for u in range(units):
            x = _shuffle_unit(nb, x, out, groups, 2 if u == 0 else 1, first_group=not (stage == 0 and u == 0))
    return nb.head(x)


IMAGENET: dict[str, Callable[..., onnx.ModelProto]] = {
    "squeezenet": squeezenet,
    "inception_v1": inception_v1,
    "inception_v2": inception_v2,
    "resnet50": resnet50,
    "densenet121": densenet121,
    "alexnet": alexnet,
    "caffenet": caffenet,
    "vgg19": vgg19,
    "zfnet512": zfnet512,
    "shufflenet": shufflenet,
}


def without_softmax(model: onnx.ModelProto) -> onnx.ModelProto:
    """The same network ending at its logits: a trailing Softmax removed (a 1000-way softmax of random-weight
    logits is nearly flat, so comparing it would hide the int8 error)."""
    m = onnx.ModelProto()
    m.CopyFrom(model)
    last = m.graph.node[-1]
    if last.op_type != "Softmax":
        return m
    del m.graph.node[-1]
    m.graph.output[0].name = last.input[0]
    return m
