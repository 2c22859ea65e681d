"""A ResNet-50-sized ONNX graph with seeded random weights, for compile-time benchmarks: 224x224 input,
7x7/2 stem + BN + ReLU + 3x3/2 max pool, bottleneck stages of 3, 4, 6, 3 blocks (1x1, 3x3, 1x1 with BN,
projection shortcuts), global average pool, FC 1000, softmax (~25.5 M parameters, ~4.1 GMAC)."""
from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def build_resnet50(seed: int = 0, size: int = 224) -> onnx.ModelProto:
    rng = np.random.default_rng(seed)
    nodes, inits = [], []
    counter = [0]

    def name(prefix: str) -> str:
        counter[0] += 1
        return f"{prefix}{counter[0]}"

    def const(prefix: str, a: np.ndarray) -> str:
        n = name(prefix)
        inits.append(numpy_helper.from_array(a.astype(np.float32), n))
        return n

    def conv_bn(x: str, cin: int, cout: int, k: int, stride: int, relu: bool) -> str:
        w = const("w", rng.normal(0, np.sqrt(2.0 / (cin * k * k)), (cout, cin, k, k)))
        y = name("conv")
        nodes.append(helper.make_node("Conv", [x, w], [y], kernel_shape=[k, k], strides=[stride, stride],
                                      pads=[k // 2] * 4))
        bn = [const("g", rng.uniform(0.5, 1.0, cout)), const("b", rng.normal(0, 0.1, cout)),
              const("m", rng.normal(0, 0.1, cout)), const("v", rng.uniform(0.5, 1.5, cout))]
        z = name("bn")
        nodes.append(helper.make_node("BatchNormalization", [y] + bn, [z]))
        if not relu:
            return z
        r = name("relu")
        nodes.append(helper.make_node("Relu", [z], [r]))
        return r

    x = conv_bn("data", 3, 64, 7, 2, True)
    p = name("pool")
    nodes.append(helper.make_node("MaxPool", [x], [p], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]))
    x, cin = p, 64
    for stage, (blocks, width) in enumerate(((3, 64), (4, 128), (6, 256), (3, 512))):
        for b in range(blocks):
            stride = 2 if b == 0 and stage > 0 else 1
            cout = width * 4
            y = conv_bn(x, cin, width, 1, 1, True)
            y = conv_bn(y, width, width, 3, stride, True)
            y = conv_bn(y, width, cout, 1, 1, False)
            short = conv_bn(x, cin, cout, 1, stride, False) if b == 0 else x
            s = name("add")
            nodes.append(helper.make_node("Add", [y, short], [s]))
            r = name("relu")
            nodes.append(helper.make_node("Relu", [s], [r]))
            x, cin = r, cout
    gap = name("gap")
    nodes.append(helper.make_node("GlobalAveragePool", [x], [gap]))
    flat = name("flat")
    nodes.append(helper.make_node("Flatten", [gap], [flat]))
    fc_w = const("fcw", rng.normal(0, np.sqrt(1.0 / 2048), (1000, 2048)))
    fc_b = const("fcb", np.zeros(1000))
    nodes.append(helper.make_node("Gemm", [flat, fc_w, fc_b], ["logits"], transB=1))
    nodes.append(helper.make_node("Softmax", ["logits"], ["prob"], axis=1))
    graph = helper.make_graph(nodes, "resnet50", [helper.make_tensor_value_info("data", TensorProto.FLOAT, [1, 3, size, size])],
                              [helper.make_tensor_value_info("prob", TensorProto.FLOAT, [1, 1000])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
