"""Caffe frontend: ONNX -> to_caffe -> compiler.frontend.caffe must compute what ONNX's reference evaluator
computes, in both file forms; hand-written prototxts in the styles of published deploy files must load;
every malformed input must be a one-line CompileError naming the file and layer."""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

from compiler.errors import CompileError
from compiler.float_exec import run_float
from compiler.frontend import caffe
from compiler.frontend import load_model
from compiler.ir import Graph, Shape
from compiler.proto import caffe_pb2 as pb
from regressions.lib.zoo.to_caffe import to_caffe
from tests.compiler.helpers import one_line_error

RNG = np.random.default_rng(1234)


# ---- helpers ------------------------------------------------------------------------------------------------
def init(name: str, *shape: int, lo: float | None = None, hi: float | None = None) -> onnx.TensorProto:
    a = RNG.uniform(lo, hi, size=shape) if lo is not None else RNG.normal(0, 0.5, size=shape)
    return numpy_helper.from_array(a.astype(np.float32), name)


def model(nodes: list[onnx.NodeProto], inputs: dict[str, list[int]], outputs: list[str],
          inits: list[onnx.TensorProto], opset: int = 17) -> onnx.ModelProto:
    g = helper.make_graph(nodes, "net",
                          [helper.make_tensor_value_info(k, TensorProto.FLOAT, v) for k, v in inputs.items()],
                          [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outputs], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    return m


def write(tmp: Path, name: str, prototxt: str, caffemodel: bytes | None = None) -> tuple[Path, Path | None]:
    p = tmp / f"{name}.prototxt"
    p.write_text(prototxt)
    w = None
    if caffemodel is not None:
        w = tmp / f"{name}.caffemodel"
        w.write_bytes(caffemodel)
    return p, w


def check_ssa(g: Graph) -> None:
    """Every tensor is produced exactly once, and every shape is known."""
    produced = list(g.inputs) + [o for n in g.nodes for o in n.outputs]
    assert len(produced) == len(set(produced))
    for n in g.nodes:
        for t in n.inputs + n.outputs:
            assert t in g.shapes, t


def roundtrip(tmp: Path, m: onnx.ModelProto, legacy: bool, rtol: float = 1e-4,
              reference: onnx.ModelProto | None = None) -> Graph:
    """Convert, load and compare every ONNX output with the reference evaluator (run on ``reference``, an
    equivalent model, where the evaluator's own kernel for an op is wrong)."""
    text, weights = to_caffe(m, legacy=legacy)
    form = "layers {" if legacy else "layer {"
    assert form in text and ("layer {" not in text if legacy else "layers {" not in text)
    p, w = write(tmp, "legacy" if legacy else "net", text, weights)
    g = caffe.load(p, w)
    check_ssa(g)
    assert g.source == str(p)
    feeds = {}
    for vi in m.graph.input:
        dims = [d.dim_value for d in vi.type.tensor_type.shape.dim]
        feeds[vi.name] = RNG.normal(size=dims).astype(np.float32)
    ref = ReferenceEvaluator(reference or m).run(None, feeds)
    got = run_float(g, feeds)
    names = [o.name for o in m.graph.output]
    assert sorted(got) == sorted(names)
    for name, r in zip(names, ref):
        assert got[name].shape == r.shape, name
        np.testing.assert_allclose(got[name], r, rtol=rtol, atol=1e-5 * max(1.0, float(np.abs(r).max())))
    return g


def ops(g: Graph) -> list[str]:
    return [n.op for n in g.nodes]


# ---- ONNX round trips -----------------------------------------------------------------------------------------
def cnn() -> onnx.ModelProto:
    """conv + bn + relu + ceil-mode pool + fc + softmax."""
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1], name="conv1"),
        helper.make_node("BatchNormalization", ["c1", "g", "be", "m", "v"], ["bn1"], epsilon=1e-3, name="bn1"),
        helper.make_node("Relu", ["bn1"], ["r1"], name="relu1"),
        helper.make_node("MaxPool", ["r1"], ["p1"], kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1, name="pool1"),
        helper.make_node("Conv", ["p1", "w2"], ["c2"], strides=[2, 2], group=2, name="conv2"),
        helper.make_node("AveragePool", ["c2"], ["p2"], kernel_shape=[3, 3], pads=[1, 1, 1, 1],
                         count_include_pad=1, name="pool2"),
        helper.make_node("Flatten", ["p2"], ["f"], axis=1, name="flat"),
        helper.make_node("Gemm", ["f", "fw", "fb"], ["fc"], transB=1, alpha=0.5, name="fc"),
        helper.make_node("Softmax", ["fc"], ["prob"], axis=1, name="prob"),
    ]
    inits = [init("w1", 8, 3, 3, 3), init("b1", 8), init("g", 8), init("be", 8), init("m", 8),
             init("v", 8, lo=0.5, hi=2.0), init("w2", 6, 4, 3, 3), init("fw", 10, 6 * 2 * 2), init("fb", 10)]
    return model(nodes, {"x": [1, 3, 12, 12]}, ["prob"], inits)


def test_cnn_roundtrip(tmp_path: Path) -> None:
    g = roundtrip(tmp_path, cnn(), legacy=False)
    assert ops(g) == ["Conv", "ChannelAffine", "ChannelAffine", "Relu", "MaxPool", "Conv", "AveragePool",
                      "Flatten", "Gemm", "Softmax"]
    pool = next(n for n in g.nodes if n.op == "MaxPool")
    assert pool.attrs["pads"] == (0, 0, 1, 1)  # 12 -> ceil(9/2)+1 = 6: one extra bottom/right row
    avg = next(n for n in g.nodes if n.op == "AveragePool")
    assert avg.attrs["count_include_pad"] is True
    assert g.inputs == ["x"] and g.outputs == ["prob"] and g.shapes["prob"] == (1, 10)


def lenet_like() -> onnx.ModelProto:
    """Only layer kinds V1 can express: conv, relu, pools, ip (Gemm and MatMul), dropout, softmax."""
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], name="conv1"),
        helper.make_node("Relu", ["c1"], ["r1"], name="relu1"),
        helper.make_node("MaxPool", ["r1"], ["p1"], kernel_shape=[2, 2], strides=[2, 2], ceil_mode=1, name="pool1"),
        helper.make_node("Conv", ["p1", "w2", "b2"], ["c2"], pads=[1, 2, 1, 2], strides=[1, 2], dilations=[2, 1],
                         name="conv2"),
        helper.make_node("AveragePool", ["c2"], ["p2"], kernel_shape=[3, 2], strides=[2, 1], ceil_mode=1,
                         name="pool2"),
        helper.make_node("Flatten", ["p2"], ["f"], name="flat"),
        helper.make_node("Gemm", ["f", "fw", "fb"], ["fc1"], transB=1, name="ip1"),
        helper.make_node("Tanh", ["fc1"], ["t1"], name="tanh1"),
        helper.make_node("Dropout", ["t1"], ["d1"], name="drop1"),
        helper.make_node("MatMul", ["d1", "mw"], ["fc2"], name="ip2"),
        helper.make_node("Softmax", ["fc2"], ["prob"], name="prob"),
    ]
    inits = [init("w1", 6, 1, 3, 3), init("b1", 6), init("w2", 4, 6, 3, 3), init("b2", 4),
             init("fw", 16, 4 * 3 * 2), init("fb", 16), init("mw", 16, 5)]
    return model(nodes, {"x": [1, 1, 13, 13]}, ["prob"], inits)


@pytest.mark.parametrize("legacy", [False, True])
def test_lenet_like_both_forms(tmp_path: Path, legacy: bool) -> None:
    g = roundtrip(tmp_path, lenet_like(), legacy=legacy)
    avg = next(n for n in g.nodes if n.op == "AveragePool")
    # 7x3 input, k3x2 s2x1 no pad: ceil gives 4 rows (last window overhangs), divided by in-image counts
    assert avg.attrs["pads"] == (0, 0, 1, 0) and avg.attrs["count_include_pad"] is False


def test_legacy_files_use_v1_types_and_legacy_blob_dims(tmp_path: Path) -> None:
    text, weights = to_caffe(lenet_like(), legacy=True)
    assert "type: CONVOLUTION" in text and "input_dim: 13" in text and "Input" not in text
    net = pb.NetParameter.FromString(weights)
    assert not net.layer and net.layers
    ip = next(l for l in net.layers if l.name == "ip1")
    assert ip.type == pb.V1LayerParameter.INNER_PRODUCT
    assert (ip.blobs[0].num, ip.blobs[0].channels, ip.blobs[0].height, ip.blobs[0].width) == (1, 1, 16, 24)
    assert not ip.blobs[0].HasField("shape")


def test_mixed_forms_match_weights_by_name(tmp_path: Path) -> None:
    """A V1 prototxt with a current-form caffemodel, and the other way round."""
    m = lenet_like()
    new_text, new_w = to_caffe(m)
    old_text, old_w = to_caffe(m, legacy=True)
    x = RNG.normal(size=(1, 1, 13, 13))
    ref = ReferenceEvaluator(m).run(None, {"x": x.astype(np.float32)})[0]
    for text, w in ((new_text, old_w), (old_text, new_w)):
        p, wp = write(tmp_path, "mix", text, w)
        got = run_float(caffe.load(p, wp), {"x": x})["prob"]
        np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("legacy", [False, True])
def test_eltwise(tmp_path: Path, legacy: bool) -> None:
    nodes = [
        helper.make_node("Conv", ["x", "w1"], ["a"], pads=[1, 1, 1, 1], name="ca"),
        helper.make_node("Conv", ["x", "w2"], ["b"], pads=[1, 1, 1, 1], name="cb"),
        helper.make_node("Add", ["a", "b"], ["s"], name="sum"),
        helper.make_node("Mul", ["s", "b"], ["p"], name="prod"),
        helper.make_node("Max", ["p", "a", "s"], ["mx"], name="max3"),
        helper.make_node("Sub", ["mx", "a"], ["d"], name="sub"),
        helper.make_node("Sum", ["d", "a", "b"], ["out"], name="sum3"),
    ]
    g = roundtrip(tmp_path, model(nodes, {"x": [1, 3, 6, 6]}, ["out"], [init("w1", 4, 3, 3, 3),
                                                                        init("w2", 4, 3, 3, 3)]), legacy)
    assert ops(g).count("Add") == 4 and ops(g).count("Max") == 2 and ops(g).count("Mul") == 1
    # Sub became SUM with coefficients (1, -1): the -1 is a ChannelAffine on the second input
    coeff = [n for n in g.nodes if n.op == "ChannelAffine"]
    assert len(coeff) == 1 and np.all(g.consts[coeff[0].inputs[1]] == -1)


def test_scale_and_bias_from_constant_arithmetic(tmp_path: Path) -> None:
    nodes = [
        helper.make_node("Mul", ["x", "k"], ["y"], name="scale"),
        helper.make_node("Add", ["kb", "y"], ["z"], name="bias"),
        helper.make_node("Mul", ["z", "s"], ["out"], name="scalar"),
    ]
    inits = [init("k", 3, 1, 1), init("kb", 1, 3, 1, 1), numpy_helper.from_array(np.float32(2.5), "s")]
    g = roundtrip(tmp_path, model(nodes, {"x": [1, 3, 4, 5]}, ["out"], inits), legacy=False)
    assert ops(g) == ["ChannelAffine"] * 3
    with pytest.raises(ValueError, match="V1"):
        to_caffe(model(nodes, {"x": [1, 3, 4, 5]}, ["out"], inits), legacy=True)


@pytest.mark.parametrize("legacy", [False, True])
def test_concat_split_slice(tmp_path: Path, legacy: bool) -> None:
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], name="conv"),
        helper.make_node("Split", ["c", "sp"], ["s0", "s1", "s2"], axis=1, name="split"),
        helper.make_node("Slice", ["c", "st", "en", "ax"], ["sl"], name="slice"),
        helper.make_node("Relu", ["s1"], ["r1"], name="relu"),
        helper.make_node("Concat", ["s2", "r1", "sl", "s0"], ["cat"], axis=-3, name="cat"),
        helper.make_node("Split", ["cat"], ["h0", "h1"], axis=2, name="halves"),
    ]
    i64 = lambda n, v: numpy_helper.from_array(np.array(v, dtype=np.int64), n)  # noqa: E731
    inits = [init("w", 8, 3, 1, 1), i64("sp", [2, 3, 3]), i64("st", [1]), i64("en", [-2]), i64("ax", [1])]
    g = roundtrip(tmp_path, model(nodes, {"x": [1, 3, 6, 5]}, ["h0", "h1"], inits), legacy)
    assert ops(g).count("Split") == 3 and g.shapes["cat"] == (1, 13, 6, 5)
    assert g.outputs == ["h0", "h1"]  # the slice's discarded pieces are silenced, not outputs


@pytest.mark.parametrize("legacy", [False, True])
def test_deconvolution(tmp_path: Path, legacy: bool) -> None:
    w, b, w2 = init("w", 4, 3, 4, 4), init("b", 6), init("w2", 6, 2, 2, 3)
    tail = helper.make_node("ConvTranspose", ["y", "w2"], ["z"], kernel_shape=[2, 3], strides=[1, 2], name="up2")
    nodes = [helper.make_node("ConvTranspose", ["x", "w", "b"], ["y"], strides=[2, 2], pads=[1, 1, 1, 1], group=2,
                              name="up"), tail]
    # ONNX's reference ConvTranspose mishandles groups: the reference runs the two groups separately.
    wa, wb = np.split(numpy_helper.to_array(w), 2)
    ba, bb = np.split(numpy_helper.to_array(b), 2)
    i64 = numpy_helper.from_array(np.array([2, 2], dtype=np.int64), "halves")
    ref_nodes = [helper.make_node("Split", ["x", "halves"], ["xa", "xb"], axis=1)] + [
        helper.make_node("ConvTranspose", [f"x{g}", f"w{g}", f"b{g}"], [f"y{g}"], strides=[2, 2], pads=[1, 1, 1, 1])
        for g in "ab"] + [helper.make_node("Concat", ["ya", "yb"], ["y"], axis=1), tail]
    ref_inits = [numpy_helper.from_array(v, n) for n, v in (("wa", wa), ("wb", wb), ("ba", ba), ("bb", bb))]
    ref = model(ref_nodes, {"x": [1, 4, 5, 5]}, ["z"], ref_inits + [w2, i64])
    g = roundtrip(tmp_path, model(nodes, {"x": [1, 4, 5, 5]}, ["z"], [w, b, w2]), legacy, reference=ref)
    assert g.shapes["y"] == (1, 6, 10, 10) and g.consts["up/W"].shape == (4, 3, 4, 4)
    assert g.nodes[0].op == "ConvTranspose" and g.nodes[0].attrs["group"] == 2


def lrn_reference(size: int, alpha: float, beta: float, bias: float) -> onnx.ModelProto:
    """Across-channel LRN spelled out in ONNX ops (ONNX's reference LRN only normalizes channel 0 when N=1):
    the window sum of squares is a ones-kernel convolution over a zero-padded channel axis."""
    half = (size - 1) // 2
    nodes = [
        helper.make_node("Mul", ["x", "x"], ["sq"]),
        helper.make_node("Unsqueeze", ["sq", "ax1"], ["sq5"]),  # (N, 1, C, H, W)
        helper.make_node("Conv", ["sq5", "ones"], ["ssum5"], pads=[half, 0, 0, half, 0, 0]),
        helper.make_node("Squeeze", ["ssum5", "ax1"], ["ssum"]),
        helper.make_node("Mul", ["ssum", "a"], ["t"]),
        helper.make_node("Add", ["t", "k"], ["d"]),
        helper.make_node("Pow", ["d", "b"], ["den"]),
        helper.make_node("Div", ["x", "den"], ["out"]),
    ]
    f = lambda n, v: numpy_helper.from_array(np.array(v, dtype=np.float32), n)  # noqa: E731
    inits = [numpy_helper.from_array(np.array([1], dtype=np.int64), "ax1"), f("ones", np.ones((1, 1, size, 1, 1))),
             f("a", alpha / size), f("k", bias), f("b", beta)]
    return model(nodes, {"x": [1, 7, 4, 4]}, ["out"], inits)


@pytest.mark.parametrize("legacy", [False, True])
def test_lrn(tmp_path: Path, legacy: bool) -> None:
    nodes = [helper.make_node("LRN", ["x"], ["out"], size=5, alpha=1e-1, beta=0.75, bias=2.0, name="norm1")]
    g = roundtrip(tmp_path, model(nodes, {"x": [1, 7, 4, 4]}, ["out"], []), legacy,
                  reference=lrn_reference(5, 1e-1, 0.75, 2.0))
    assert g.nodes[0].op == "LRN"
    assert g.nodes[0].attrs == {"size": 5, "alpha": pytest.approx(1e-1), "beta": 0.75, "bias": 2.0}


def test_activations(tmp_path: Path) -> None:
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], name="conv"),
        helper.make_node("PRelu", ["c", "slope"], ["p"], name="prelu"),
        helper.make_node("PRelu", ["p", "shared"], ["q"], name="prelu_shared"),
        helper.make_node("Clip", ["q", "lo", "hi"], ["r6"], name="relu6"),
        helper.make_node("LeakyRelu", ["r6"], ["lk"], alpha=0.2, name="leaky"),
        helper.make_node("Sigmoid", ["lk"], ["sg"], name="sig"),
        helper.make_node("Clip", ["sg", "lo"], ["out"], name="relu_clip"),
    ]
    inits = [init("w", 4, 2, 1, 1), init("slope", 4, 1, 1), init("shared", 1), 
             numpy_helper.from_array(np.float32(0), "lo"), numpy_helper.from_array(np.float32(6), "hi")]
    m = model(nodes, {"x": [1, 2, 5, 5]}, ["out"], inits)
    g = roundtrip(tmp_path, m, legacy=False)
    assert ops(g) == ["Conv", "PRelu", "PRelu", "Clip", "LeakyRelu", "Sigmoid", "Relu"]
    clip = g.nodes[3]
    assert (clip.attrs["min"], clip.attrs["max"]) == (0.0, 6.0)
    # in-place activations: the conv's blob is renamed per version, its last version keeps the name
    assert g.nodes[0].outputs[0] != "c" and g.nodes[-2].outputs == ["c"]
    text, _ = to_caffe(m)
    assert 'type: "Clip"' in text and "max: 6" in text
    with pytest.raises(ValueError, match="V1"):
        to_caffe(m, legacy=True)


def test_reshape_and_softmax_axis(tmp_path: Path) -> None:
    nodes = [
        helper.make_node("Reshape", ["x", "shape"], ["r"], name="reshape"),
        helper.make_node("Softmax", ["r"], ["y"], axis=1, name="softmax"),
        helper.make_node("Reshape", ["y", "shape2"], ["z"], name="back"),
    ]
    i64 = lambda n, v: numpy_helper.from_array(np.array(v, dtype=np.int64), n)  # noqa: E731
    m = model(nodes, {"x": [1, 6, 2, 2]}, ["z"], [i64("shape", [1, 3, 8]), i64("shape2", [1, 24])])
    g = roundtrip(tmp_path, m, legacy=False)
    assert ops(g) == ["Reshape", "Softmax", "Flatten"]
    with pytest.raises(ValueError, match="Reshape"):
        to_caffe(m, legacy=True)


def test_to_caffe_refuses_what_caffe_computes_differently() -> None:
    x = {"x": [1, 2, 7, 7]}
    floor_pool = helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[2, 2], strides=[2, 2], name="p")
    with pytest.raises(ValueError, match="ceil-mode"):
        to_caffe(model([floor_pool], x, ["y"], []))
    exclusive_avg = helper.make_node("AveragePool", ["x"], ["y"], kernel_shape=[3, 3], pads=[1, 1, 1, 1], name="a")
    with pytest.raises(ValueError, match="count_include_pad"):
        to_caffe(model([exclusive_avg], x, ["y"], []))
    one_sided = helper.make_node("AveragePool", ["x"], ["y"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 0, 0],
                                 count_include_pad=1, ceil_mode=1, name="a")
    with pytest.raises(ValueError, match="count_include_pad"):  # ONNX's divisor stops at the end padding, 0 here
        to_caffe(model([one_sided], {"x": [1, 2, 9, 9]}, ["y"], []))
    with pytest.raises(ValueError, match="no BatchNorm"):
        to_caffe(cnn(), legacy=True)
    asym = helper.make_node("Conv", ["x", "w"], ["y"], pads=[0, 0, 1, 1], name="c")
    with pytest.raises(ValueError, match="asymmetric"):
        to_caffe(model([asym], x, ["y"], [init("w", 2, 2, 3, 3)]))
    bcast = helper.make_node("Add", ["x", "x2"], ["y"], name="add")
    with pytest.raises(ValueError, match="broadcast"):
        to_caffe(model([bcast], {"x": [1, 2, 7, 7], "x2": [1, 2, 1, 7]}, ["y"], []))


# ---- hand-written prototxts ----------------------------------------------------------------------------------
LEGACY_V1 = """
name: "CaffeNetV1"
input: "data"
input_dim: 10
input_dim: 3
input_dim: 31
input_dim: 31
layers {
  name: "conv1"  type: CONVOLUTION  bottom: "data"  top: "conv1"
  blobs_lr: 1  blobs_lr: 2  weight_decay: 1  weight_decay: 0
  convolution_param { num_output: 8  kernel_size: 5  stride: 2
    weight_filler { type: "gaussian" std: 0.01 } bias_filler { type: "constant" value: 0 } }
}
layers { name: "relu1"  type: RELU  bottom: "conv1"  top: "conv1" }
layers { name: "pool1"  type: POOLING  bottom: "conv1"  top: "pool1"
  pooling_param { pool: MAX  kernel_size: 3  stride: 2 } }
layers { name: "norm1"  type: LRN  bottom: "pool1"  top: "norm1"
  lrn_param { local_size: 5  alpha: 0.0001  beta: 0.75 } }
layers { name: "fc6"  type: INNER_PRODUCT  bottom: "norm1"  top: "fc6"
  inner_product_param { num_output: 16 } }
layers { name: "relu6"  type: RELU  bottom: "fc6"  top: "fc6" }
layers { name: "drop6"  type: DROPOUT  bottom: "fc6"  top: "fc6"  dropout_param { dropout_ratio: 0.5 } }
layers { name: "fc7"  type: INNER_PRODUCT  bottom: "fc6"  top: "fc7"  inner_product_param { num_output: 5 } }
layers { name: "prob"  type: SOFTMAX  bottom: "fc7"  top: "prob" }
"""


def test_legacy_v1_prototxt_with_input_dim(tmp_path: Path) -> None:
    p, _ = write(tmp_path, "v1", LEGACY_V1)
    g = caffe.load(p, None)
    check_ssa(g)
    assert g.name == "CaffeNetV1" and g.inputs == ["data"] and g.shapes["data"] == (1, 3, 31, 31)
    assert ops(g) == ["Conv", "Relu", "MaxPool", "LRN", "Flatten", "Gemm", "Relu", "Identity", "Gemm", "Softmax"]
    assert g.shapes["pool1"] == (1, 8, 7, 7) and g.outputs == ["prob"]
    # the in-place chain on fc6: only the last version is called fc6
    assert [n.outputs[0] for n in g.nodes[5:8]] == ["fc6@fc6", "fc6@relu6", "fc6"]
    out = run_float(g, {"data": RNG.normal(size=(1, 3, 31, 31))})["prob"]
    assert out.shape == (1, 5) and np.isclose(out.sum(), 1.0)


TRAIN_VAL = """
name: "LeNet"
layer { name: "mnist" type: "Data" top: "data" top: "label" include { phase: TRAIN }
  transform_param { scale: 0.00390625 } data_param { source: "mnist_train_lmdb" batch_size: 64 backend: LMDB } }
layer { name: "input" type: "Input" top: "data" top: "label"
  input_param { shape { dim: 64 dim: 1 dim: 28 dim: 28 } shape { dim: 64 } } include { phase: TEST } }
layer { name: "conv1" type: "Convolution" bottom: "data" top: "conv1"
  param { lr_mult: 1 } param { lr_mult: 2 decay_mult: 0 }
  convolution_param { num_output: 4 kernel_size: 5 stride: 1 weight_filler { type: "xavier" } } }
layer { name: "pool1" type: "Pooling" bottom: "conv1" top: "pool1"
  pooling_param { pool: MAX kernel_size: 2 stride: 2 } }
layer { name: "ip1" type: "InnerProduct" bottom: "pool1" top: "ip1"
  inner_product_param { num_output: 10 weight_filler { type: "xavier" } bias_filler { type: "constant" } } }
layer { name: "accuracy" type: "Accuracy" bottom: "ip1" bottom: "label" top: "accuracy"
  include { phase: TEST } accuracy_param { top_k: 1 } }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "ip1" bottom: "label" top: "loss"
  loss_param { normalization: VALID } loss_weight: 1 }
layer { name: "trainonly" type: "ReLU" bottom: "ip1" top: "never" include { phase: TRAIN } }
layer { name: "staged" type: "ReLU" bottom: "ip1" top: "staged" include { stage: "deploy" } }
layer { name: "notstaged" type: "ReLU" bottom: "ip1" top: "notstaged" exclude { stage: "deploy" } }
"""


def test_train_only_layers_and_accuracy_are_skipped(tmp_path: Path) -> None:
    p, _ = write(tmp_path, "lenet", TRAIN_VAL)
    g = caffe.load(p)
    check_ssa(g)
    assert ops(g) == ["Conv", "MaxPool", "Flatten", "Gemm", "Softmax", "Relu"]
    assert g.shapes["data"] == (1, 1, 28, 28)
    assert set(g.outputs) == {"loss", "notstaged"}


def test_net_state_stage_selects_layers(tmp_path: Path) -> None:
    p, _ = write(tmp_path, "staged", TRAIN_VAL + 'state { stage: "deploy" }\n')
    g = caffe.load(p)
    assert set(g.outputs) == {"loss", "staged"}


@pytest.mark.parametrize("extra, size, pad, want, pads", [
    ("", 112, 0, 56, (0, 0, 1, 1)),             # ceil((112-3)/2) + 1: the last window overhangs by one
    ("round_mode: FLOOR", 112, 0, 55, (0, 0, 0, 0)),
    ("", 113, 0, 56, (0, 0, 0, 0)),
    ("", 112, 1, 57, (1, 1, 2, 2)),
    ("", 6, 2, 4, (2, 2, 2, 2)),                 # ceil gives 5, but window 5 would start in the padding
    ("", 7, 1, 4, (1, 1, 1, 1)),
])
def test_caffe_ceil_mode_pooling(tmp_path: Path, extra: str, size: int, pad: int, want: int,
                                 pads: tuple[int, ...]) -> None:
    text = f"""input: "data" input_shape {{ dim: 1 dim: 2 dim: {size} dim: {size} }}
layer {{ name: "pool" type: "Pooling" bottom: "data" top: "pool"
  pooling_param {{ pool: MAX kernel_size: 3 stride: 2 pad: {pad} {extra} }} }}"""
    p, _ = write(tmp_path, "pool", text)
    g = caffe.load(p)
    assert g.shapes["pool"] == (1, 2, want, want)
    assert g.nodes[0].attrs["pads"] == pads
    x = RNG.normal(size=(1, 2, size, size))
    out = run_float(g, {"data": x})["pool"]
    # independent check of Caffe's windows: window i covers [2i - pad, 2i - pad + 3) clipped to the image
    for i in range(want):
        lo, hi = max(0, i * 2 - pad), min(size, i * 2 - pad + 3)
        assert out[0, 1, i, i] == x[0, 1, lo:hi, lo:hi].max()


def caffe_ave_pool(x: np.ndarray, k: int, s: int, pad: int, out: int) -> np.ndarray:
    """Caffe's AVE pooling written out (pooling_layer.cpp): a window's divisor spans it clipped to the padded
    input, padding counted, a ceil-mode overhang not; its sum spans it clipped to the input."""
    n, c, h, w = x.shape
    y = np.zeros((n, c, out, out))
    for i in range(out):
        for j in range(out):
            h0, w0 = i * s - pad, j * s - pad
            h1, w1 = min(h0 + k, h + pad), min(w0 + k, w + pad)
            size = (h1 - h0) * (w1 - w0)
            window = x[:, :, max(h0, 0):min(h1, h), max(w0, 0):min(w1, w)]
            y[:, :, i, j] = window.sum(axis=(2, 3)) / size
    return y


@pytest.mark.parametrize("size, k, s, pad", [(8, 3, 2, 1), (10, 3, 2, 1), (9, 2, 2, 1), (12, 5, 3, 2), (8, 3, 2, 0)])
def test_average_pool_overhang_follows_caffe(tmp_path: Path, size: int, k: int, s: int, pad: int) -> None:
    """Ceil mode with padding: the last window overhangs the padding and Caffe divides it by the padded
    window it covers, which neither IR averaging rule alone gives (the frontend says which padding counts)."""
    text = f"""input: "data" input_shape {{ dim: 1 dim: 2 dim: {size} dim: {size} }}
layer {{ name: "ave" type: "Pooling" bottom: "data" top: "ave"
  pooling_param {{ pool: AVE kernel_size: {k} stride: {s} pad: {pad} }} }}"""
    p, _ = write(tmp_path, "ave", text)
    g = caffe.load(p)
    out = caffe.caffe_pool_size(size, k, s, pad, True, bool(pad))
    assert g.shapes["ave"] == (1, 2, out, out)
    x = RNG.normal(size=(1, 2, size, size))
    np.testing.assert_allclose(run_float(g, {"data": x})["ave"], caffe_ave_pool(x, k, s, pad, out), rtol=1e-12)


LAYERS_ZOO = """
name: "features"
layer { name: "data" type: "Input" top: "data" input_param { shape { dim: 1 dim: 4 dim: 6 dim: 6 } } }
layer { name: "ip_t" type: "InnerProduct" bottom: "data" top: "ip_t"
  inner_product_param { num_output: 3 transpose: true bias_term: false } }
layer { name: "bn" type: "BatchNorm" bottom: "data" top: "bn" batch_norm_param { eps: 0.001 } }
layer { name: "pow" type: "Power" bottom: "bn" top: "pow" power_param { scale: 2 shift: 1 } }
layer { name: "sc" type: "Scale" bottom: "pow" top: "sc" scale_param { num_axes: 0 } }
layer { name: "bias" type: "Bias" bottom: "sc" top: "bias" }
layer { name: "flat" type: "Flatten" bottom: "bias" top: "flat" flatten_param { axis: 2 } }
layer { name: "rs" type: "Reshape" bottom: "flat" top: "rs" reshape_param { shape { dim: 0 dim: -1 dim: 3 } } }
layer { name: "rs2" type: "Reshape" bottom: "rs" top: "rs2"
  reshape_param { shape { dim: 2 dim: -1 } axis: 1 num_axes: 1 } }
layer { name: "slice" type: "Slice" bottom: "rs2" top: "a" top: "b" slice_param { slice_dim: 1 } }
layer { name: "split" type: "Split" bottom: "a" top: "a1" top: "a2" }
layer { name: "elt" type: "Eltwise" bottom: "a1" bottom: "a2" bottom: "b" top: "elt"
  eltwise_param { operation: SUM coeff: 1 coeff: 0.5 coeff: -2 } }
layer { name: "sm" type: "Softmax" bottom: "elt" top: "sm" softmax_param { axis: -1 } }
"""


def blob(a: np.ndarray) -> pb.BlobProto:
    b = pb.BlobProto()
    b.shape.dim.extend(a.shape)
    b.data.extend(np.asarray(a, np.float32).ravel().tolist())
    return b


def test_layer_semantics_against_numpy(tmp_path: Path) -> None:
    """BatchNorm's scale factor, Power, scalar Scale, Bias, Flatten axis, Reshape 0/-1/axis, Slice,
    Split, Eltwise coefficients, InnerProduct transpose -- checked against direct numpy."""
    r = np.random.default_rng(5)
    mean, var, fac = r.normal(size=4), r.uniform(1, 2, size=4), np.array([4.0])
    w_t, sc, bi = r.normal(size=(4 * 36, 3)), np.array(1.5), r.normal(size=4)
    weights = pb.NetParameter()
    for name, blobs in {"ip_t": [w_t], "bn": [mean, var, fac], "sc": [sc], "bias": [bi],
                        "unrelated": [np.ones(3)]}.items():
        weights.layer.add(name=name).blobs.extend(blob(np.asarray(b)) for b in blobs)
    p, w = write(tmp_path, "zoo", LAYERS_ZOO, weights.SerializeToString())
    g = caffe.load(p, w)
    check_ssa(g)
    x = r.normal(size=(1, 4, 6, 6))
    out = run_float(g, {"data": x})
    np.testing.assert_allclose(out["ip_t"], x.reshape(1, -1) @ w_t, rtol=1e-5)
    bn = (x - (mean / 4).reshape(1, 4, 1, 1)) / np.sqrt((var / 4).reshape(1, 4, 1, 1) + 1e-3)
    y = ((bn * 2 + 1) * 1.5 + bi.reshape(1, 4, 1, 1)).reshape(1, 4, 36).reshape(1, 2, 24, 3)
    a, b = y[:, :1], y[:, 1:]
    e = a + 0.5 * a - 2 * b
    sm = np.exp(e - e.max(-1, keepdims=True))
    np.testing.assert_allclose(out["sm"], sm / sm.sum(-1, keepdims=True), rtol=1e-4)
    assert g.shapes["flat"] == (1, 4, 36) and g.shapes["rs"] == (1, 48, 3)


GOOGLENET = """
name: "GoogleNet"
layer { name: "data" type: "Input" top: "data" input_param { shape: { dim: 10 dim: 3 dim: 32 dim: 32 } } }
layer { name: "conv1/7x7_s2" type: "Convolution" bottom: "data" top: "conv1/7x7_s2"
  param { lr_mult: 1 decay_mult: 1 } param { lr_mult: 2 decay_mult: 0 }
  convolution_param { num_output: 8 pad: 3 kernel_size: 7 stride: 2
    weight_filler { type: "xavier" } bias_filler { type: "constant" value: 0.2 } } }
layer { name: "conv1/relu_7x7" type: "ReLU" bottom: "conv1/7x7_s2" top: "conv1/7x7_s2" }
layer { name: "pool1/3x3_s2" type: "Pooling" bottom: "conv1/7x7_s2" top: "pool1/3x3_s2"
  pooling_param { pool: MAX kernel_size: 3 stride: 2 } }
layer { name: "pool1/norm1" type: "LRN" bottom: "pool1/3x3_s2" top: "pool1/norm1"
  lrn_param { local_size: 5 alpha: 0.0001 beta: 0.75 } }
layer { name: "inception_3a/1x1" type: "Convolution" bottom: "pool1/norm1" top: "inception_3a/1x1"
  convolution_param { num_output: 4 kernel_size: 1 } }
layer { name: "inception_3a/relu_1x1" type: "ReLU" bottom: "inception_3a/1x1" top: "inception_3a/1x1" }
layer { name: "inception_3a/3x3_reduce" type: "Convolution" bottom: "pool1/norm1" top: "inception_3a/3x3_reduce"
  convolution_param { num_output: 4 kernel_size: 1 } }
layer { name: "inception_3a/relu_3x3_reduce" type: "ReLU" bottom: "inception_3a/3x3_reduce"
  top: "inception_3a/3x3_reduce" }
layer { name: "inception_3a/3x3" type: "Convolution" bottom: "inception_3a/3x3_reduce" top: "inception_3a/3x3"
  convolution_param { num_output: 6 pad: 1 kernel_size: 3 } }
layer { name: "inception_3a/pool" type: "Pooling" bottom: "pool1/norm1" top: "inception_3a/pool"
  pooling_param { pool: MAX kernel_size: 3 stride: 1 pad: 1 } }
layer { name: "inception_3a/pool_proj" type: "Convolution" bottom: "inception_3a/pool" top: "inception_3a/pool_proj"
  convolution_param { num_output: 2 kernel_size: 1 } }
layer { name: "inception_3a/output" type: "Concat" bottom: "inception_3a/1x1" bottom: "inception_3a/3x3"
  bottom: "inception_3a/pool_proj" top: "inception_3a/output" }
layer { name: "pool5/7x7_s1" type: "Pooling" bottom: "inception_3a/output" top: "pool5/7x7_s1"
  pooling_param { pool: AVE kernel_size: 8 stride: 1 } }
layer { name: "pool5/drop_7x7_s1" type: "Dropout" bottom: "pool5/7x7_s1" top: "pool5/7x7_s1"
  dropout_param { dropout_ratio: 0.4 } }
layer { name: "loss3/classifier" type: "InnerProduct" bottom: "pool5/7x7_s1" top: "loss3/classifier"
  inner_product_param { num_output: 10 } }
layer { name: "prob" type: "Softmax" bottom: "loss3/classifier" top: "prob" }
"""

RESNET = """
name: "ResNet-50"
input: "data"
input_dim: 1 input_dim: 3 input_dim: 16 input_dim: 16
layer { bottom: "data" top: "conv1" name: "conv1" type: "Convolution"
  convolution_param { num_output: 8 kernel_size: 7 pad: 3 stride: 2 bias_term: false } }
layer { bottom: "conv1" top: "conv1" name: "bn_conv1" type: "BatchNorm" batch_norm_param { use_global_stats: true } }
layer { bottom: "conv1" top: "conv1" name: "scale_conv1" type: "Scale" scale_param { bias_term: true } }
layer { bottom: "conv1" top: "conv1" name: "conv1_relu" type: "ReLU" }
layer { bottom: "conv1" top: "pool1" name: "pool1" type: "Pooling" pooling_param { kernel_size: 3 stride: 2 pool: MAX } }
layer { bottom: "pool1" top: "res2a_branch1" name: "res2a_branch1" type: "Convolution"
  convolution_param { num_output: 16 kernel_size: 1 pad: 0 stride: 1 bias_term: false } }
layer { bottom: "res2a_branch1" top: "res2a_branch1" name: "bn2a_branch1" type: "BatchNorm"
  batch_norm_param { use_global_stats: true } }
layer { bottom: "res2a_branch1" top: "res2a_branch1" name: "scale2a_branch1" type: "Scale" scale_param { bias_term: true } }
layer { bottom: "pool1" top: "res2a_branch2a" name: "res2a_branch2a" type: "Convolution"
  convolution_param { num_output: 4 kernel_size: 1 pad: 0 stride: 1 bias_term: false } }
layer { bottom: "res2a_branch2a" top: "res2a_branch2a" name: "bn2a_branch2a" type: "BatchNorm"
  batch_norm_param { use_global_stats: true } }
layer { bottom: "res2a_branch2a" top: "res2a_branch2a" name: "scale2a_branch2a" type: "Scale" scale_param { bias_term: true } }
layer { bottom: "res2a_branch2a" top: "res2a_branch2a" name: "res2a_branch2a_relu" type: "ReLU" }
layer { bottom: "res2a_branch2a" top: "res2a_branch2b" name: "res2a_branch2b" type: "Convolution"
  convolution_param { num_output: 16 kernel_size: 3 pad: 1 stride: 1 bias_term: false } }
layer { bottom: "res2a_branch1" bottom: "res2a_branch2b" top: "res2a" name: "res2a" type: "Eltwise" }
layer { bottom: "res2a" top: "res2a" name: "res2a_relu" type: "ReLU" }
layer { bottom: "res2a" top: "pool5" name: "pool5" type: "Pooling" pooling_param { kernel_size: 4 stride: 1 pool: AVE } }
layer { bottom: "pool5" top: "fc1000" name: "fc1000" type: "InnerProduct" inner_product_param { num_output: 10 } }
layer { bottom: "fc1000" top: "prob" name: "prob" type: "Softmax" }
"""

MOBILENET = """
name: "MobileNet"
input: "data"
input_shape { dim: 1 dim: 3 dim: 16 dim: 16 }
layer { name: "conv1" type: "Convolution" bottom: "data" top: "conv1"
  param { lr_mult: 1 decay_mult: 1 }
  convolution_param { num_output: 8 bias_term: false pad: 1 kernel_size: 3 stride: 2
    weight_filler { type: "msra" } } }
layer { name: "conv1/bn" type: "BatchNorm" bottom: "conv1" top: "conv1/bn"
  param { lr_mult: 0 decay_mult: 0 } param { lr_mult: 0 decay_mult: 0 } param { lr_mult: 0 decay_mult: 0 } }
layer { name: "conv1/scale" type: "Scale" bottom: "conv1/bn" top: "conv1/bn" scale_param { filler { value: 1 }
  bias_term: true bias_filler { value: 0 } } }
layer { name: "relu1" type: "ReLU6" bottom: "conv1/bn" top: "conv1/bn" }
layer { name: "conv2_1/dw" type: "Convolution" bottom: "conv1/bn" top: "conv2_1/dw"
  convolution_param { num_output: 8 bias_term: false pad: 1 kernel_size: 3 group: 8 engine: CAFFE
    weight_filler { type: "msra" } } }
layer { name: "relu2_1/dw" type: "Clip" bottom: "conv2_1/dw" top: "conv2_1/dw" clip_param { min: 0 max: 6 } }
layer { name: "conv2_1/sep" type: "Convolution" bottom: "conv2_1/dw" top: "conv2_1/sep"
  convolution_param { num_output: 16 bias_term: false kernel_h: 1 kernel_w: 1 stride_h: 1 stride_w: 1 } }
layer { name: "relu2_1/sep" type: "ReLU" bottom: "conv2_1/sep" top: "conv2_1/sep" relu_param { negative_slope: 0.1 } }
layer { name: "pool6" type: "Pooling" bottom: "conv2_1/sep" top: "pool6" pooling_param { pool: AVE global_pooling: true } }
layer { name: "fc7" type: "Convolution" bottom: "pool6" top: "fc7" convolution_param { num_output: 10 kernel_size: 1 } }
layer { name: "prob" type: "Softmax" bottom: "fc7" top: "prob" }
"""


@pytest.mark.parametrize("text, want_ops, out_shape", [
    (GOOGLENET, ["Conv", "Relu", "MaxPool", "LRN", "Conv", "Relu", "Conv", "Relu", "Conv", "MaxPool", "Conv",
                 "Concat", "AveragePool", "Identity", "Flatten", "Gemm", "Softmax"], (1, 10)),
    (RESNET, ["Conv", "ChannelAffine", "ChannelAffine", "Relu", "MaxPool", "Conv", "ChannelAffine",
              "ChannelAffine", "Conv", "ChannelAffine", "ChannelAffine", "Relu", "Conv", "Add", "Relu",
              "AveragePool", "Flatten", "Gemm", "Softmax"], (1, 10)),
    (MOBILENET, ["Conv", "ChannelAffine", "ChannelAffine", "Clip", "Conv", "Clip", "Conv", "LeakyRelu",
                 "GlobalAveragePool", "Conv", "Softmax"], (1, 10, 1, 1)),
], ids=["googlenet", "resnet50", "mobilenet"])
def test_real_world_deploy_styles(tmp_path: Path, text: str, want_ops: list[str], out_shape: Shape) -> None:
    p, _ = write(tmp_path, "deploy", text)
    g = caffe.load(p, None, seed=3)
    check_ssa(g)
    assert ops(g) == want_ops
    assert g.outputs == ["prob"] and g.shapes["prob"] == out_shape
    x = RNG.normal(size=g.shapes[g.inputs[0]])
    prob = run_float(g, {g.inputs[0]: x})["prob"]
    assert np.all(np.isfinite(prob)) and np.allclose(prob.sum(axis=1), 1.0)



def test_googlenet_details(tmp_path: Path) -> None:
    g = caffe.load(write(tmp_path, "g", GOOGLENET)[0])
    assert g.shapes["pool1/3x3_s2"] == (1, 8, 8, 8)  # 16 -> ceil(13/2)+1 = 8
    assert g.shapes["inception_3a/output"] == (1, 12, 8, 8)
    dw = caffe.load(write(tmp_path, "m", MOBILENET)[0]).nodes[4]
    assert dw.attrs["group"] == 8 and dw.inputs[1].endswith("/W")


def test_random_weights_are_deterministic_by_seed(tmp_path: Path) -> None:
    p, _ = write(tmp_path, "r", RESNET)
    a, b, c = caffe.load(p, seed=7), caffe.load(p, seed=7), caffe.load(p, seed=8)
    assert a.consts.keys() == b.consts.keys() == c.consts.keys()
    for k in a.consts:
        np.testing.assert_array_equal(a.consts[k], b.consts[k])
    assert any(not np.array_equal(a.consts[k], c.consts[k]) for k in a.consts if k.endswith("/W"))
    w = a.consts["conv1/W"]
    assert w.dtype == np.float32 and abs(w.std() - np.sqrt(2 / (3 * 49))) < 0.02  # He-normal
    bn = a.nodes[1]  # random BN: mean 0, var 1 -> scale 1/sqrt(1+eps), bias 0
    np.testing.assert_allclose(a.consts[bn.inputs[1]], 1 / np.sqrt(1 + 1e-5), rtol=1e-6)
    np.testing.assert_array_equal(a.consts[bn.inputs[2]], 0)


def test_load_model_dispatches_to_caffe(tmp_path: Path) -> None:
    text, weights = to_caffe(cnn())
    p, w = write(tmp_path, "d", text, weights)
    g = load_model(p, w)
    assert g.outputs == ["prob"] and "conv1/W" in g.consts


def test_batchnorm_zero_scale_factor_and_in_place_names(tmp_path: Path) -> None:
    text = """input: "x" input_shape { dim: 1 dim: 2 dim: 3 dim: 3 }
layer { name: "bn" type: "BatchNorm" bottom: "x" top: "y" }
layer { name: "relu" type: "ReLU" bottom: "y" top: "y" }"""
    weights = pb.NetParameter()
    weights.layer.add(name="bn").blobs.extend([blob(np.array([5.0, 6.0])), blob(np.array([9.0, 9.0])),
                                                blob(np.array([0.0]))])
    p, w = write(tmp_path, "bn0", text, weights.SerializeToString())
    g = caffe.load(p, w)
    np.testing.assert_allclose(g.consts["bn/scale"], 1 / np.sqrt(1e-5), rtol=1e-6)  # Caffe: stats * 0
    assert g.outputs == ["y"] and g.nodes[0].outputs == ["y@bn"]


# ---- errors ------------------------------------------------------------------------------------------------
SMALL = """name: "small"
input: "data"
input_shape { dim: 1 dim: 3 dim: 8 dim: 8 }
layer { name: "conv1" type: "Convolution" bottom: "data" top: "conv1"
  convolution_param { num_output: 4 kernel_size: 3 } }
layer { name: "relu1" type: "ReLU" bottom: "conv1" top: "conv1" }
"""


def small_weights(wshape: tuple[int, ...] = (4, 3, 3, 3), n_blobs: int = 2) -> bytes:
    net = pb.NetParameter()
    net.layer.add(name="conv1", type="Convolution").blobs.extend(
        [blob(np.ones(wshape)), blob(np.zeros(4))][:n_blobs])
    return net.SerializeToString()


def err(p: Path, w: Path | None = None) -> str:
    return one_line_error(caffe.load, p, w)


def test_good_small_net_loads(tmp_path: Path) -> None:
    g = caffe.load(*write(tmp_path, "ok", SMALL, small_weights()))
    assert g.outputs == ["conv1"] and np.all(g.consts["conv1/W"] == 1)


def test_error_truncated_caffemodel(tmp_path: Path) -> None:
    data = small_weights()
    p, w = write(tmp_path, "trunc", SMALL, data[: len(data) - 7])
    msg = err(p, w)
    assert str(w) in msg


def test_error_garbage_caffemodel(tmp_path: Path) -> None:
    p, w = write(tmp_path, "garbage", SMALL, b"\xff\xfe not a caffemodel at all \x00\x01")
    msg = err(p, w)
    assert msg.startswith(str(w)) and "caffemodel" in msg
    w.write_bytes(b"")
    assert "no layers" in err(p, w)


def test_error_text_syntax_has_line_and_column(tmp_path: Path) -> None:
    bad = SMALL.replace("kernel_size: 3 }", "kernel_size: 3 ")
    p, _ = write(tmp_path, "syntax", bad)
    msg = err(p)
    assert msg.startswith(f"{p}:6:") and msg.endswith('Expected "}".')
    p2, _ = write(tmp_path, "syntax2", SMALL.replace("num_output: 4", "num_output: four"))
    assert err(p2).startswith(f"{p2}:5:")


def test_unknown_fields_from_forks_are_ignored_with_a_warning(tmp_path: Path) -> None:
    text = SMALL.replace("kernel_size: 3", "kernel_size: 3 fork_option { a: 1 } fork_flag: true")
    p, _ = write(tmp_path, "fork", text)
    with pytest.warns(UserWarning, match="fork_option"):
        g = caffe.load(p)
    assert g.shapes["conv1"] == (1, 4, 6, 6)


def test_error_unknown_layer_type(tmp_path: Path) -> None:
    p, _ = write(tmp_path, "crop", SMALL + 'layer { name: "foo" type: "Crop" bottom: "conv1" bottom: "data" top: "c" }')
    assert err(p) == f"{p}: layer 'foo' (Crop): unsupported layer type"


def test_error_weight_shape_mismatch(tmp_path: Path) -> None:
    p, w = write(tmp_path, "shape", SMALL, small_weights((4, 3, 5, 5)))
    msg = err(p, w)
    assert msg.startswith(f"{p}: layer 'conv1' (Convolution)")
    assert "[4, 3, 5, 5]" in msg and "[4, 3, 3, 3]" in msg and str(w) in msg
    p, w = write(tmp_path, "count", SMALL, small_weights(n_blobs=1))
    assert "has 1 blobs" in err(p, w)


def test_error_missing_layer_weights(tmp_path: Path) -> None:
    net = pb.NetParameter()
    net.layer.add(name="other").blobs.append(blob(np.ones(3)))
    p, w = write(tmp_path, "missing", SMALL, net.SerializeToString())
    msg = err(p, w)
    assert msg == f"{p}: layer 'conv1' (Convolution): has no weights in {w}"


def test_error_undefined_bottom(tmp_path: Path) -> None:
    p, _ = write(tmp_path, "bottom", SMALL + 'layer { name: "r2" type: "ReLU" bottom: "nope" top: "r2" }')
    msg = err(p)
    assert msg.startswith(f"{p}: layer 'r2' (ReLU)") and "'nope'" in msg


@pytest.mark.parametrize("layer, match", [
    ('layer { name: "n" type: "LRN" bottom: "conv1" top: "n" lrn_param { norm_region: WITHIN_CHANNEL } }',
     r"layer 'n' \(LRN\): unsupported: LRN WITHIN_CHANNEL"),
    ('layer { name: "s" type: "Scale" bottom: "conv1" bottom: "conv1" top: "s" }',
     r"layer 's' \(Scale\): unsupported: Scale with 2 bottoms"),
    ('layer { name: "p" type: "Pooling" bottom: "conv1" top: "p" pooling_param { pool: STOCHASTIC kernel_size: 2 } }',
     r"layer 'p' \(Pooling\): unsupported: STOCHASTIC"),
    ('layer { name: "e" type: "Eltwise" bottom: "conv1" bottom: "data" top: "e" }',
     r"layer 'e' \(Eltwise\): input shapes"),
    ('layer { name: "c" type: "Convolution" bottom: "conv1" top: "c" convolution_param { num_output: 3 } }',
     r"layer 'c' \(Convolution\): kernel_size is not set"),
    ('layer { name: "sl" type: "Slice" bottom: "conv1" top: "a" top: "b" top: "c" }',
     r"layer 'sl' \(Slice\): axis 1 of size 4 does not split evenly"),
    ('layer { name: "d" type: "Data" top: "d" top: "label" data_param { source: "x" } }',
     r"layer 'd' \(Data\): the shape of this data layer"),
])
def test_error_unsupported_configurations(tmp_path: Path, layer: str, match: str) -> None:
    p, _ = write(tmp_path, "unsup", SMALL + layer)
    msg = err(p)
    assert msg.startswith(str(p))
    assert re.search(match, msg), msg


def test_error_no_input(tmp_path: Path) -> None:
    p, _ = write(tmp_path, "noinput", 'layer { name: "r" type: "ReLU" bottom: "x" top: "x" }')
    assert "'x'" in err(p)
    p, _ = write(tmp_path, "empty", 'name: "empty"')
    assert "no input" in err(p)


def test_other_input_layers_and_legacy_param_spellings(tmp_path: Path) -> None:
    text = """name: "inputs"
layer { name: "mem" type: "MemoryData" top: "a" top: "label" memory_data_param { batch_size: 8 channels: 2 height: 3 width: 4 } }
layer { name: "dummy" type: "DummyData" top: "b" dummy_data_param { num: 8 channels: 3 height: 3 width: 4 } }
layer { name: "cat" type: "Concat" bottom: "a" bottom: "b" top: "cat" concat_param { concat_dim: 1 } }
layer { name: "one" type: "Concat" bottom: "cat" top: "one" }
layer { name: "sl" type: "Slice" bottom: "one" top: "s0" top: "s1" top: "s2" slice_param { axis: -1 slice_point: 1 slice_point: 3 } }
"""
    g = caffe.load(write(tmp_path, "inputs", text)[0])
    assert g.inputs == ["a", "b"] and g.shapes["a"] == (1, 2, 3, 4) and g.shapes["b"] == (1, 3, 3, 4)
    assert ops(g) == ["Concat", "Identity", "Split"]
    assert g.nodes[2].attrs == {"axis": 3, "split": (1, 2, 1)} and g.outputs == ["s0", "s1", "s2"]


def test_in_place_layers_written_by_to_caffe(tmp_path: Path) -> None:
    text, _ = to_caffe(cnn())
    assert 'bottom: "bn1"\n  top: "bn1"' in text  # Scale and ReLU run in place, as in real deploy files


def test_error_not_a_net(tmp_path: Path) -> None:
    solver = 'net: "train_val.prototxt"\nbase_lr: 0.01\nlr_policy: "step"\n'
    p, _ = write(tmp_path, "solver", solver)
    assert err(p).startswith(f"{p}:1:1: ") and "no field named" in err(p)
    p.write_bytes(b"\x0a\x04\xff\xfe\x00\x01")
    assert err(p) == f"{p}: not a text prototxt (is it a binary .caffemodel?)"


def test_error_v0_layer(tmp_path: Path) -> None:
    text = 'input: "data" input_dim: 1 input_dim: 1 input_dim: 4 input_dim: 4\n' \
           'layers { layer { name: "conv1" type: "conv" num_output: 2 kernelsize: 3 } bottom: "data" top: "conv1" }\n'
    p, _ = write(tmp_path, "v0", text)
    with pytest.warns(UserWarning):
        msg = err(p)
    assert "V0" in msg
