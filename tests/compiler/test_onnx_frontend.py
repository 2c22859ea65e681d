"""ONNX frontend: multi-op graphs converted to the canonical IR and run with ``run_float`` must equal ONNX's
reference evaluator (on a float64 copy of the model); malformed models and unsupported layers are one-line
CompileErrors naming the file and the node.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

from compiler.errors import CompileError
from compiler.float_exec import run_float
from compiler.frontend import load_model
from compiler.frontend.onnx import load
from compiler.ir import Graph
from compiler.ops import OPS

F = TensorProto.FLOAT


def rnd(*shape: int, seed: int = 0, scale: float = 1.0) -> np.ndarray:
    return (np.random.default_rng(seed).standard_normal(shape) * scale).astype(np.float32)


def make(nodes: list[onnx.NodeProto], inputs: dict[str, list], outputs: dict[str, list],
         consts: dict[str, np.ndarray] | None = None, opset: int = 13, ir_version: int | None = None) -> onnx.ModelProto:
    g = helper.make_graph(
        nodes, "t",
        [helper.make_tensor_value_info(k, F, v) for k, v in inputs.items()],
        [helper.make_tensor_value_info(k, F, v) for k, v in outputs.items()],
        [numpy_helper.from_array(np.asarray(v), k) for k, v in (consts or {}).items()])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    if ir_version is not None:
        m.ir_version = ir_version
    return m


def to_double(model: onnx.ModelProto) -> onnx.ModelProto:
    """The same model with every float tensor in float64, so the reference is exact to our tolerance."""
    m = onnx.ModelProto()
    m.CopyFrom(model)
    for i, t in enumerate(m.graph.initializer):
        if t.data_type == F:
            m.graph.initializer[i].CopyFrom(numpy_helper.from_array(numpy_helper.to_array(t).astype(np.float64), t.name))
    for n in m.graph.node:
        for a in n.attribute:
            if a.type == onnx.AttributeProto.TENSOR and a.t.data_type == F:
                a.t.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(a.t).astype(np.float64), a.t.name))
    for vi in list(m.graph.input) + list(m.graph.output) + list(m.graph.value_info):
        if vi.type.tensor_type.elem_type == F:
            vi.type.tensor_type.elem_type = TensorProto.DOUBLE
    return m


def assert_matches_reference(model: onnx.ModelProto, feeds: dict[str, np.ndarray], rtol: float = 1e-5) -> Graph:
    g = load(model)
    assert {n.op for n in g.nodes} <= set(OPS), g.dump()
    ours = run_float(g, feeds)
    ref = ReferenceEvaluator(to_double(model)).run(None, {k: v.astype(np.float64) for k, v in feeds.items()})
    for name, want in zip([o.name for o in model.graph.output], ref):
        assert ours[name].shape == g.shapes[name] == want.shape
        np.testing.assert_allclose(ours[name], want, rtol=rtol, atol=rtol * max(1.0, float(np.abs(want).max())))
    return g


def ops(g: Graph) -> list[str]:
    return [n.op for n in g.nodes]


# ---- multi-op graphs against the reference ----------------------------------------------------------------
def test_convnet_with_bn_residual_and_classifier() -> None:
    """Opset 15: the reference evaluator's BatchNormalization-9 (opsets 9-13) blends in the batch statistics
    through momentum's default value, which inference BN must not do."""
    c = 8
    consts = {
        "w1": rnd(c, 3, 3, 3, scale=0.3), "b1": rnd(c, seed=1),
        "gamma": rnd(c, seed=2), "beta": rnd(c, seed=3), "mean": rnd(c, seed=4),
        "var": np.abs(rnd(c, seed=5)) + 0.5,
        "wd": rnd(c, 1, 3, 3, seed=6, scale=0.3), "w2": rnd(c, c // 2, 3, 3, seed=7, scale=0.2),
        "fc": rnd(c, 10, seed=8), "fcb": rnd(1, 10, seed=9),
    }
    nodes = [
        helper.make_node("Conv", ["data", "w1", "b1"], ["c1"], name="conv1", auto_pad="SAME_UPPER", strides=[2, 2]),
        helper.make_node("BatchNormalization", ["c1", "gamma", "beta", "mean", "var"], ["bn"], name="bn1", epsilon=1e-3),
        helper.make_node("Relu", ["bn"], ["r1"]),
        helper.make_node("MaxPool", ["r1"], ["p1"], kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1),
        helper.make_node("Conv", ["p1", "wd"], ["dw"], group=c, pads=[1, 1, 1, 1]),
        helper.make_node("Conv", ["dw", "w2"], ["c2"], group=2, pads=[2, 1, 2, 1], dilations=[2, 1]),
        helper.make_node("Add", ["c2", "p1"], ["res"], name="residual"),
        helper.make_node("GlobalAveragePool", ["res"], ["gap"]),
        helper.make_node("Flatten", ["gap"], ["flat"]),
        helper.make_node("Gemm", ["flat", "fc", "fcb"], ["logits"], alpha=0.5, beta=2.0),
        helper.make_node("Softmax", ["logits"], ["prob"]),
    ]
    m = make(nodes, {"data": ["batch", 3, 23, 22]}, {"prob": ["batch", 10], "logits": ["batch", 10]}, consts,
             opset=15)
    g = assert_matches_reference(m, {"data": rnd(1, 3, 23, 22, seed=10)})
    logits = run_float(g, {"data": rnd(1, 3, 23, 22, seed=10)})["logits"]
    assert 0.3 < logits.std() < 10  # the comparison is not hidden behind a saturated softmax
    assert g.inputs == ["data"] and g.shapes["data"] == (1, 3, 23, 22)
    assert ops(g) == ["Conv", "ChannelAffine", "Relu", "MaxPool", "Conv", "Conv", "Add", "GlobalAveragePool",
                      "Flatten", "Gemm", "Softmax"]
    conv1, bn, _, pool = g.nodes[:4]
    assert conv1.name == "conv1" and conv1.attrs["pads"] == (1, 0, 1, 1)  # SAME_UPPER: odd pixel at the end
    assert bn.name == "bn1"
    assert pool.attrs["pads"] == (0, 0, 1, 0)  # ceil mode: 12x11 -> 6x5 (one extra row)
    gemm = g.nodes[-2]
    np.testing.assert_allclose(g.consts[gemm.inputs[1]], 0.5 * consts["fc"].T)  # (K, C)
    np.testing.assert_allclose(g.consts[gemm.inputs[2]], 2.0 * consts["fcb"].reshape(-1))
    assert all(v.dtype == np.float32 for v in g.consts.values())


def test_matmul_bias_and_activations_opset11() -> None:
    consts = {"w": rnd(12, 6), "bias": rnd(6, seed=1), "slope": np.array([0.1], np.float32),
              "lo": np.array(-0.5, np.float32), "hi": np.array(0.7, np.float32)}
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["mm"]),
        helper.make_node("Add", ["mm", "bias"], ["fc"]),
        helper.make_node("PRelu", ["fc", "slope"], ["pr"]),
        helper.make_node("LeakyRelu", ["pr"], ["lr"], alpha=0.3),
        helper.make_node("Clip", ["lr", "lo", "hi"], ["cl"]),
        helper.make_node("Clip", ["cl", "", "hi"], ["cl2"]),
        helper.make_node("Sigmoid", ["cl2"], ["sg"]),
        helper.make_node("Tanh", ["fc"], ["th"]),
        helper.make_node("Mul", ["sg", "th"], ["y"]),
    ]
    m = make(nodes, {"x": [1, 12]}, {"y": [1, 6]}, consts, opset=11)
    g = assert_matches_reference(m, {"x": rnd(1, 12, seed=2, scale=2)})
    assert ops(g) == ["Gemm", "ChannelAffine", "PRelu", "LeakyRelu", "Clip", "Clip", "Sigmoid", "Tanh", "Mul"]
    np.testing.assert_array_equal(g.consts[g.nodes[0].inputs[1]], consts["w"].T)
    assert g.consts[g.nodes[2].inputs[1]].shape == (1,)
    assert g.nodes[4].attrs == {"min": -0.5, "max": pytest.approx(0.7)}
    assert g.nodes[5].attrs["min"] is None


def test_constant_operands_become_channel_affine_or_clip() -> None:
    c = 4
    consts = {"pc": rnd(c, 1, 1), "pc4": rnd(1, c, 1, 1, seed=1), "one": np.array([1.5], np.float32),
              "scalar": np.array(0.25, np.float32)}
    nodes = [
        helper.make_node("Mul", ["x", "pc"], ["a"]),
        helper.make_node("Add", ["pc4", "a"], ["b"]),
        helper.make_node("Sub", ["b", "one"], ["c"]),
        helper.make_node("Sub", ["scalar", "c"], ["d"]),
        helper.make_node("Div", ["d", "pc4"], ["e"]),
        helper.make_node("Sum", ["e", "scalar"], ["f"]),
        helper.make_node("Max", ["f", "scalar"], ["g"]),
        helper.make_node("Min", ["g", "one"], ["h"]),
        helper.make_node("Sum", ["h", "x", "e"], ["y"]),
    ]
    m = make(nodes, {"x": [1, c, 5, 5]}, {"y": [1, c, 5, 5]}, consts)
    g = assert_matches_reference(m, {"x": rnd(1, c, 5, 5, seed=3)})
    assert ops(g) == ["ChannelAffine"] * 6 + ["Clip", "Clip", "Add", "Add"]
    assert all(g.consts[n.inputs[1]].shape == (c,) for n in g.nodes[:6])


def test_plumbing_ops() -> None:
    consts = {"split": np.array([2, 4], np.int64), "st": np.array([1], np.int64), "en": np.array([-1], np.int64),
              "ax": np.array([1], np.int64), "shape": np.array([0, -1, 4], np.int64),
              "sq": np.array([0], np.int64), "usq": np.array([0, -1], np.int64)}
    nodes = [
        helper.make_node("Split", ["x", "split"], ["s1", "s2"], axis=1, name="split"),
        helper.make_node("Slice", ["s2", "st", "en", "ax"], ["sl"]),  # channels 1..2 of 4
        helper.make_node("Concat", ["s1", "sl"], ["cat"], axis=-3),
        helper.make_node("Dropout", ["cat"], ["dr"]),
        helper.make_node("Identity", ["dr"], ["id"]),
        helper.make_node("Reshape", ["id", "shape"], ["rs"]),  # (1, 24, 4)
        helper.make_node("Squeeze", ["rs", "sq"], ["sqz"]),  # (24, 4)
        helper.make_node("Unsqueeze", ["sqz", "usq"], ["usz"]),  # (1, 24, 4, 1)
        helper.make_node("Softmax", ["usz"], ["y"], axis=1),
        helper.make_node("Flatten", ["x"], ["flat"], axis=-1),
    ]
    m = make(nodes, {"x": [1, 6, 6, 4]}, {"y": [1, 24, 4, 1], "flat": [36, 4]}, consts)
    g = assert_matches_reference(m, {"x": rnd(1, 6, 6, 4, seed=4)})
    by = {n.outputs[0]: n for n in g.nodes}
    assert by["s1"].attrs == {"axis": 1, "split": (2, 4)}
    assert by["sl"].op == "Slice" and by["sl"].attrs == {"axis": 1, "start": 1, "end": 3}
    assert by["cat"].attrs["axis"] == 1
    assert by["dr"].op == by["id"].op == "Identity"
    assert by["rs"].attrs["shape"] == (1, 24, 4)
    assert by["sqz"].op == by["usz"].op == "Reshape" and by["usz"].attrs["shape"] == (1, 24, 4, 1)
    assert by["flat"].attrs["axis"] == 3


def test_old_opsets_attribute_forms() -> None:
    """Clip (opset 6 attrs), Split/Slice/Squeeze (attrs) before opsets 11/13."""
    nodes = [
        helper.make_node("Clip", ["x"], ["c"], min=-0.5),
        helper.make_node("Split", ["c"], ["a", "b"], axis=1, split=[1, 3]),
        helper.make_node("Slice", ["b"], ["y"], starts=[0, 1], ends=[100, 3], axes=[0, 1]),
        helper.make_node("Squeeze", ["a"], ["sq"], axes=[1]),
        helper.make_node("Softmax", ["sq"], ["y2"], axis=2),
    ]
    m = make(nodes, {"x": [1, 4, 3, 5]}, {"y": [1, 2, 3, 5], "y2": [1, 3, 5]}, opset=9)
    g = assert_matches_reference(m, {"x": rnd(1, 4, 3, 5, seed=5, scale=3)})
    assert g.nodes[0].attrs == {"min": -0.5, "max": None}
    assert ops(g) == ["Clip", "Split", "Slice", "Reshape", "Softmax"]


def test_softmax_before_opset13_is_coerced_to_2d() -> None:
    """ONNX Softmax-1/11 normalize over all axes from ``axis`` on (the reference evaluator does not)."""
    m = make([helper.make_node("Softmax", ["x"], ["y"], axis=1)], {"x": [2, 3, 2, 2]}, {"y": [2, 3, 2, 2]}, opset=11)
    g = load(m)
    assert ops(g) == ["Reshape", "Softmax", "Reshape"]
    x = rnd(2, 3, 2, 2, scale=3)
    e = np.exp(x.reshape(2, 12).astype(np.float64))
    want = (e / e.sum(axis=1, keepdims=True)).reshape(x.shape)
    np.testing.assert_allclose(run_float(g, {"x": x})["y"], want, rtol=1e-6)


def test_split_num_outputs_opset18_and_equal_split() -> None:
    nodes = [helper.make_node("Split", ["x"], ["a", "b", "c"], axis=1, num_outputs=3),
             helper.make_node("Concat", ["c", "a"], ["y"], axis=1)]
    m = make(nodes, {"x": [1, 8, 2, 2]}, {"y": [1, 5, 2, 2], "b": [1, 3, 2, 2]}, opset=18)
    g = assert_matches_reference(m, {"x": rnd(1, 8, 2, 2)})
    assert g.nodes[0].attrs["split"] == (3, 3, 2)
    nodes = [helper.make_node("Split", ["x"], ["a", "b"], axis=1)]
    g = assert_matches_reference(make(nodes, {"x": [1, 8, 2, 2]}, {"a": [1, 4, 2, 2], "b": [1, 4, 2, 2]}),
                                 {"x": rnd(1, 8, 2, 2)})
    assert g.nodes[0].attrs["split"] == (4, 4)


@pytest.mark.parametrize("attrs,expect_pads", [
    (dict(strides=[2, 2], pads=[1, 0, 0, 1], output_padding=[1, 1]), (1, 0, 0, 1)),
    (dict(strides=[2, 2], auto_pad="SAME_UPPER"), (0, 0, 1, 1)),
    (dict(strides=[2, 2], auto_pad="SAME_LOWER"), (1, 1, 0, 0)),
    (dict(strides=[2, 3], output_shape=[11, 14], auto_pad="SAME_UPPER"), None),
    (dict(strides=[2, 3], output_shape=[12, 15], auto_pad="SAME_LOWER", dilations=[1, 2]), None),
    (dict(strides=[2, 2], output_shape=[12, 12], auto_pad="SAME_LOWER"), (0, 0, 0, 0)),  # beyond: output padding
])
def test_conv_transpose(attrs: dict, expect_pads: tuple | None) -> None:
    consts = {"w": rnd(3, 4, 3, 3), "b": rnd(4, seed=1)}
    nodes = [helper.make_node("ConvTranspose", ["x", "w", "b"], ["y"], **attrs)]
    ref = ReferenceEvaluator(to_double(make(nodes, {"x": [1, 3, 5, 5]}, {"y": None}, consts)))
    out_shape = ref.run(None, {"x": np.zeros((1, 3, 5, 5))})[0].shape
    m = make(nodes, {"x": [1, 3, 5, 5]}, {"y": list(out_shape)}, consts)
    g = assert_matches_reference(m, {"x": rnd(1, 3, 5, 5, seed=2)})
    if expect_pads is not None:
        assert g.nodes[0].attrs["pads"] == expect_pads


def test_conv_transpose_output_shape_notset_follows_the_spec() -> None:
    """With output_shape and no auto_pad, ONNX puts the odd padding pixel at the start."""
    consts = {"w": rnd(2, 2, 3, 3)}
    x = rnd(1, 2, 4, 4, seed=1)
    m = make([helper.make_node("ConvTranspose", ["x", "w"], ["y"], strides=[2, 2], output_shape=[8, 8])],
             {"x": [1, 2, 4, 4]}, {"y": [1, 2, 8, 8]}, consts)
    g = load(m)
    assert g.nodes[0].attrs["pads"] == (1, 1, 0, 0) and g.shapes["y"] == (1, 2, 8, 8)
    explicit = make([helper.make_node("ConvTranspose", ["x", "w"], ["y"], strides=[2, 2], pads=[1, 1, 0, 0])],
                    {"x": [1, 2, 4, 4]}, {"y": [1, 2, 8, 8]}, consts)
    want = ReferenceEvaluator(to_double(explicit)).run(None, {"x": x.astype(np.float64)})[0]
    np.testing.assert_allclose(run_float(g, {"x": x})["y"], want, rtol=1e-6)


@pytest.mark.parametrize("op,attrs", [
    ("MaxPool", dict(kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1)),
    ("MaxPool", dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1], ceil_mode=1)),
    ("MaxPool", dict(kernel_shape=[2, 3], strides=[2, 1], auto_pad="SAME_UPPER")),
    ("MaxPool", dict(kernel_shape=[3, 3], auto_pad="VALID")),
    ("AveragePool", dict(kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1, count_include_pad=1)),
    ("AveragePool", dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1], ceil_mode=1)),
    ("AveragePool", dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 0, 1, 0], count_include_pad=1)),
    ("AveragePool", dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1], ceil_mode=1, count_include_pad=1)),
    ("AveragePool", dict(kernel_shape=[3, 3], strides=[1, 1], auto_pad="SAME_LOWER")),
    ("AveragePool", dict(kernel_shape=[2, 2], strides=[2, 2])),
])
def test_pooling(op: str, attrs: dict) -> None:
    nodes = [helper.make_node(op, ["x"], ["y"], **attrs)]
    ref = ReferenceEvaluator(to_double(make(nodes, {"x": [1, 2, 8, 9]}, {"y": None})))
    out_shape = ref.run(None, {"x": np.zeros((1, 2, 8, 9))})[0].shape
    assert_matches_reference(make(nodes, {"x": [1, 2, 8, 9]}, {"y": list(out_shape)}), {"x": rnd(1, 2, 8, 9)})


def test_lrn_global_max_pool_and_softmax_axis() -> None:
    nodes = [helper.make_node("LRN", ["x"], ["l"], size=5, alpha=0.01, beta=0.75, bias=2.0),
             helper.make_node("GlobalMaxPool", ["l"], ["g"]),
             helper.make_node("Softmax", ["x"], ["y"], axis=2)]
    # N == C: the reference evaluator's LRN loops over the batch axis where it means channels.
    m = make(nodes, {"x": [3, 3, 4, 4]}, {"g": [3, 3, 1, 1], "y": [3, 3, 4, 4]})
    g = assert_matches_reference(m, {"x": rnd(3, 3, 4, 4, scale=3)})
    assert g.nodes[0].attrs == pytest.approx({"size": 5, "alpha": 0.01, "beta": 0.75, "bias": 2.0})


def test_pytorch_style_flatten_is_folded() -> None:
    """Shape -> Gather -> Unsqueeze -> Concat -> Reshape and Constant nodes fold into one Reshape."""
    nodes = [
        helper.make_node("Constant", [], ["zero"], value=numpy_helper.from_array(np.array(0, np.int64))),
        helper.make_node("Constant", [], ["minus1"], value_ints=[-1]),
        helper.make_node("Constant", [], ["ax"], value_ints=[0]),
        helper.make_node("Constant", [], ["k"], value=numpy_helper.from_array(rnd(10, 48))),
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("Gather", ["s", "zero"], ["n"], axis=0),
        helper.make_node("Unsqueeze", ["n", "ax"], ["n1"]),
        helper.make_node("Concat", ["n1", "minus1"], ["shape"], axis=0),
        helper.make_node("Reshape", ["x", "shape"], ["flat"]),
        helper.make_node("Gemm", ["flat", "k"], ["y"], transB=1),
    ]
    m = make(nodes, {"x": ["N", 3, 4, 4]}, {"y": ["N", 10]})
    g = assert_matches_reference(m, {"x": rnd(1, 3, 4, 4)})
    assert ops(g) == ["Reshape", "Gemm"] and g.nodes[0].attrs["shape"] == (1, 48)


def test_initializers_listed_as_inputs_are_weights(tmp_path: Path) -> None:
    w = rnd(4, 3, 1, 1)
    m = make([helper.make_node("Conv", ["x", "w"], ["y"])], {"x": [0, 3, 2, 2]}, {"y": [0, 4, 2, 2]}, {"w": w},
             ir_version=3, opset=9)
    m.graph.input.append(helper.make_tensor_value_info("w", F, [4, 3, 1, 1]))
    path = tmp_path / "net.onnx"
    onnx.save(m, path)
    g = load_model(path)
    assert g.inputs == ["x"] and g.shapes["x"] == (1, 3, 2, 2)
    assert g.source == str(path) and g.name == "net"
    assert list(g.consts) == ["w"]


# ---- errors ------------------------------------------------------------------------------------------------
def one_line(e: pytest.ExceptionInfo) -> str:
    text = str(e.value)
    assert "\n" not in text
    return text


def saved(tmp_path: Path, m: onnx.ModelProto, name: str = "m.onnx") -> Path:
    path = tmp_path / name
    onnx.save(m, path)
    return path


def tiny() -> onnx.ModelProto:
    consts = {"w": rnd(64, 64, 3, 3)}
    return make([helper.make_node("Conv", ["x", "w"], ["y"], pads=[1, 1, 1, 1])],
                {"x": [1, 64, 4, 4]}, {"y": [1, 64, 4, 4]}, consts)


@pytest.mark.parametrize("cut", [0.5, 0.9])
def test_truncated_file(tmp_path: Path, cut: float) -> None:
    data = tiny().SerializeToString()
    path = tmp_path / "cut.onnx"
    path.write_bytes(data[: int(len(data) * cut)])
    with pytest.raises(CompileError) as e:
        load(path)
    assert one_line(e).startswith(f"{path}: ")


@pytest.mark.parametrize("payload", [bytes(range(256)) * 8, b"hello, not a model\n", b""])
def test_garbage_file(tmp_path: Path, payload: bytes) -> None:
    path = tmp_path / "junk.onnx"
    path.write_bytes(payload)
    with pytest.raises(CompileError) as e:
        load(path)
    assert one_line(e).startswith(f"{path}: ")


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(CompileError, match="no such file"):
        load(tmp_path / "nope.onnx")


def test_model_that_is_not_a_file_is_worded_as_what_it_is(tmp_path: Path) -> None:
    (tmp_path / "d.onnx").mkdir()
    with pytest.raises(CompileError, match=r"d.onnx: not a regular file \(a directory\)"):
        load(tmp_path / "d.onnx")


def test_opset_newer_than_supported_names_file_and_opset(tmp_path: Path) -> None:
    from compiler.frontend.onnx import NEWEST_OPSET

    m = make([helper.make_node("Relu", ["x"], ["y"])], {"x": [1, 3, 4, 4]}, {"y": [1, 3, 4, 4]})
    m.opset_import[0].version = 999
    path = saved(tmp_path, m)
    with pytest.raises(CompileError) as e:
        load(path)
    assert one_line(e) == (f"{path}: opset 999 is newer than the newest this compiler supports ({NEWEST_OPSET}); "
                           f"export the model with opset {NEWEST_OPSET} or older")
    m.opset_import[0].version = NEWEST_OPSET
    assert load(saved(tmp_path, m)).nodes  # the newest supported opset itself converts


def test_unsupported_op_names_node_and_op(tmp_path: Path) -> None:
    m = make([helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Erf", ["r"], ["y"], name="my_erf")],
             {"x": [1, 3, 4, 4]}, {"y": [1, 3, 4, 4]})
    path = saved(tmp_path, m)
    with pytest.raises(CompileError) as e:
        load(path)
    assert one_line(e) == f"{path}: layer 'my_erf' (Erf): unsupported op"
    m = make([helper.make_node("Erf", ["x"], ["y"])], {"x": [1, 3]}, {"y": [1, 3]})
    with pytest.raises(CompileError, match=r"layer 'Erf_0' \(Erf\): unsupported op"):
        load(saved(tmp_path, m, "unnamed.onnx"))


def test_add_shape_mismatch_names_the_node(tmp_path: Path) -> None:
    m = make([helper.make_node("Add", ["a", "b"], ["y"], name="bad_add")],
             {"a": [1, 3, 4, 4], "b": [1, 3, 2, 2]}, {"y": [1, 3, 4, 4]})
    path = saved(tmp_path, m)
    with pytest.raises(CompileError) as e:
        load(path)
    assert one_line(e).startswith(f"{path}: layer 'bad_add' (Add): ")


def test_concat_shape_mismatch_names_the_node(tmp_path: Path) -> None:
    m = make([helper.make_node("Concat", ["a", "b"], ["y"], axis=1, name="cat")],
             {"a": [1, 3, 4, 4], "b": [1, 3, 5, 4]}, {"y": [1, 6, 4, 4]})
    with pytest.raises(CompileError, match=r"layer 'cat' \(Concat\): input shapes"):
        load(saved(tmp_path, m))


@pytest.mark.parametrize("node,inputs,consts,match", [
    (helper.make_node("Gemm", ["x", "w"], ["y"], transA=1, name="n"), {"x": [4, 1]}, {"w": rnd(4, 2)}, "transA"),
    (helper.make_node("Conv", ["x", "w"], ["y"], name="n"), {"x": [1, 2, 4, 4], "w": [2, 2, 1, 1]}, {}, "constant"),
    (helper.make_node("Slice", ["x", "s", "e", "a", "st"], ["y"], name="n"), {"x": [1, 2, 4, 4]},
     {"s": np.array([0]), "e": np.array([4]), "a": np.array([2]), "st": np.array([2])}, "steps"),
    (helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[2, 2], dilations=[2, 2], name="n"),
     {"x": [1, 2, 6, 6]}, {}, "dilations"),
    (helper.make_node("Mul", ["x", "c"], ["y"], name="n"), {"x": [1, 2, 3, 3]}, {"c": rnd(1, 2, 3, 3)},
     "neither a scalar nor per-channel"),
    (helper.make_node("Squeeze", ["x", "a"], ["y"], name="n"), {"x": [1, 2, 3, 3]}, {"a": np.array([1])},
     "cannot squeeze"),
])
def test_unsupported_forms_name_the_node(node: onnx.NodeProto, inputs: dict, consts: dict, match: str) -> None:
    m = make([node], inputs, {"y": None}, consts)
    m.graph.output[0].type.tensor_type.shape.dim.add()
    with pytest.raises(CompileError, match=rf"layer 'n' \({node.op_type}\): .*{match}"):
        load(m)


def test_dynamic_spatial_dims_are_rejected() -> None:
    m = make([helper.make_node("Relu", ["x"], ["y"])], {"x": [1, 3, "H", 4]}, {"y": [1, 3, "H", 4]})
    with pytest.raises(CompileError, match="dynamic dimension 2"):
        load(m)


def test_a_zero_channel_conv_is_refused_naming_it() -> None:
    from compiler.driver import compile_graph, random_inputs

    m = make([helper.make_node("Conv", ["x", "w"], ["y"], name="conv_zero")], {"x": [1, 3, 4, 4]},
             {"y": [1, 0, 4, 4]}, {"w": np.zeros((0, 3, 1, 1), np.float32)})
    g = load(m)
    with pytest.raises(CompileError, match=r"conv_zero.*weights 'w' of shape \(0, 3, 1, 1\) is empty"):
        compile_graph(g, "nv_small", calib_inputs=random_inputs(g, 2))


@settings(max_examples=40, deadline=None)
@given(k=st.integers(1, 4), pad=st.integers(0, 1), h=st.integers(4, 11), w=st.integers(4, 11),
       op=st.sampled_from(["MaxPool", "AveragePool"]), include=st.booleans())
def test_ceil_mode_pooling_random_geometry(k: int, pad: int, h: int, w: int, op: str, include: bool) -> None:
    """ceil_mode becomes extra bottom/right padding with the same output size and values as ONNX's rule.
    Stride 2 only: with stride 1 ceil mode changes nothing (and the reference evaluator gets it wrong), and
    with larger strides the reference spreads the ceil-mode excess over both sides."""
    s = 2
    pad = min(pad, k - 1)
    attrs = dict(kernel_shape=[k, k], strides=[s, s], pads=[pad] * 4, ceil_mode=1)
    if op == "AveragePool":
        attrs["count_include_pad"] = int(include)
    nodes = [helper.make_node(op, ["x"], ["y"], **attrs)]
    out = ReferenceEvaluator(to_double(make(nodes, {"x": [1, 2, h, w]}, {"y": None}))).run(
        None, {"x": np.zeros((1, 2, h, w))})[0].shape
    assert_matches_reference(make(nodes, {"x": [1, 2, h, w]}, {"y": list(out)}), {"x": rnd(1, 2, h, w)})
