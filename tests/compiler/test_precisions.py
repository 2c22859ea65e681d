"""``--precision int16|fp16``: networks compiled in the 16-bit datapaths of nv_full.

Checked against independent references: onnxruntime's float execution of the same model (cosine of the
logits: fp16 >= 0.9999, int16 >= 0.999, the issue's targets), and, layer by layer, each engine op's register
programs run alone on golden against the plain reference math with the compiler's parameters
(``regressions.lib.layer_replay``: fp16 in exact rational arithmetic), bit for bit."""
from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from compiler.driver import compile_graph
from compiler.errors import CompileError
from compiler.frontend import onnx as onnx_frontend
from golden.config import get_config
from loadable import loadable_pb2 as pb
from regressions.lib.layer_replay import replay_all
from regressions.lib.zoo import ZOO
from runtime.executor import Network
from tests.compiler.helpers import one_line_error

pytest.importorskip("onnxruntime")
from regressions.lib.float_reference import session  # noqa: E402

COSINE = {"fp16": 0.9999, "int16": 0.999}
DTYPES = {"fp16": pb.Tensor.FP16, "int16": pb.Tensor.INT16}


def logits(m: onnx.ModelProto) -> onnx.ModelProto:
    """The model without its final Softmax: the logits are what precision shows in (a softmax of 10 classes
    hides most of it)."""
    out = onnx.ModelProto()
    out.CopyFrom(m)
    last = out.graph.node[-1]
    assert last.op_type == "Softmax"
    out.graph.output[0].name = last.input[0]
    out.graph.node.remove(last)
    return out


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    a, b = np.asarray(a, np.float64).ravel(), np.asarray(b, np.float64).ravel()
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


def run_both(m: onnx.ModelProto, precision: str, config: str = "nv_full", seed: int = 1):
    """(compiled network's outputs on golden, onnxruntime's, the loadable, the lowered graph)."""
    g = onnx_frontend.load(m)
    ld, lowered, _ = compile_graph(g, config, precision=precision)
    x = np.random.default_rng(seed).standard_normal(g.shapes[g.inputs[0]]).astype(np.float32)
    got = Network(ld).run({g.inputs[0]: x})
    want = dict(zip([o.name for o in m.graph.output], session(m).run(None, {g.inputs[0]: x})))
    return got, want, ld, lowered


@pytest.mark.parametrize("precision", ["fp16", "int16"])
@pytest.mark.parametrize("name", sorted(ZOO))
def test_zoo_networks_match_float_in_16_bits(name: str, precision: str) -> None:
    m = logits(ZOO[name](0))
    got, want, ld, lowered = run_both(m, precision)
    features = {t.dtype for t in ld.tensors if t.storage == pb.Tensor.FEATURE}
    assert features == {DTYPES[precision]}
    assert ld.quantization == ("" if precision == "fp16" else "per-filter")
    cpu = {n.op for n in lowered.nodes if n.op.startswith("cpu.")}
    # LRN is on CDP in fp16 (compiler.lut.lrn_fp16); int16 LRN has no CDP table design yet
    assert cpu <= (set() if precision == "fp16" else {"cpu.LRN"}), cpu
    for name_out, y in want.items():
        c = cosine(got[name_out], y)
        assert c >= COSINE[precision], f"{name_out}: cosine {c:.6f} < {COSINE[precision]}"


def _const(name: str, a: np.ndarray) -> onnx.TensorProto:
    return numpy_helper.from_array(np.asarray(a, dtype=np.float32), name)


def every_sdp_use() -> onnx.ModelProto:
    """A small net using each 16-bit program the compiler emits: conv + BatchNorm + ReLU (X1 bias, fp16
    weights with the BN scale), a residual add fused into a conv (X2 element operand), max and padded average
    pooling, a standalone BatchNorm after a concat (X1 ALU and MUL from memory), PReLU (X2 PReLU), a ReLU6-style
    Clip (fp16: Y's ALU MIN), global average pooling and a fully connected layer."""
    rng = np.random.default_rng(3)
    c = 8
    inits = [
        _const("w1", rng.standard_normal((c, 4, 3, 3)) * 0.3), _const("b1", rng.standard_normal(c) * 0.1),
        _const("g", rng.uniform(0.5, 1.5, c)), _const("beta", rng.standard_normal(c) * 0.1),
        _const("mean", rng.standard_normal(c) * 0.1), _const("var", rng.uniform(0.5, 1.5, c)),
        _const("w2", rng.standard_normal((c, c, 3, 3)) * 0.2), _const("b2", rng.standard_normal(c) * 0.1),
        _const("s2", rng.uniform(0.5, 1.5, 2 * c)), _const("o2", rng.standard_normal(2 * c) * 0.1),
        _const("m2", np.zeros(2 * c)), _const("v2", np.ones(2 * c)),
        _const("slope", rng.uniform(0.05, 0.3, (2 * c, 1, 1))),
        _const("lo", np.float32(0.0)), _const("hi", np.float32(0.7)),
        _const("wf", rng.standard_normal((5, 2 * c)) * 0.3), _const("bf", rng.standard_normal(5) * 0.1),
    ]
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
        helper.make_node("BatchNormalization", ["c1", "g", "beta", "mean", "var"], ["n1"]),
        helper.make_node("Relu", ["n1"], ["r1"]),
        helper.make_node("Conv", ["r1", "w2", "b2"], ["c2"], pads=[1, 1, 1, 1]),
        helper.make_node("Add", ["c2", "r1"], ["a2"]),
        helper.make_node("Relu", ["a2"], ["r2"]),
        helper.make_node("MaxPool", ["r2"], ["p1"], kernel_shape=[2, 2], strides=[1, 1]),
        helper.make_node("AveragePool", ["r1"], ["p2"], kernel_shape=[2, 2], strides=[1, 1]),
        helper.make_node("Concat", ["p1", "p2"], ["cat"], axis=1),
        helper.make_node("BatchNormalization", ["cat", "s2", "o2", "m2", "v2"], ["n2"]),
        helper.make_node("PRelu", ["n2", "slope"], ["pr"]),
        helper.make_node("AveragePool", ["pr"], ["p3"], kernel_shape=[3, 3], strides=[1, 1], pads=[1, 1, 1, 1]),
        helper.make_node("Clip", ["p3", "lo", "hi"], ["r6"]),
        helper.make_node("GlobalAveragePool", ["r6"], ["gap"]),
        helper.make_node("Flatten", ["gap"], ["flat"]),
        helper.make_node("Gemm", ["flat", "wf", "bf"], ["y"], transB=1),
    ]
    graph = helper.make_graph(nodes, "every_sdp_use", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 5, 5])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 5])], inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    onnx.checker.check_model(m)
    return m


@pytest.mark.parametrize("precision", ["fp16", "int16"])
def test_every_layer_replays_bit_exact_against_the_reference_math(precision: str) -> None:
    m = every_sdp_use()
    got, want, ld, lowered = run_both(m, precision)
    assert cosine(got["y"], want["y"]) >= COSINE[precision]
    ops = [n for n in lowered.nodes if n.op.startswith("dla.")]
    assert not [n for n in lowered.nodes if n.op.startswith("cpu.")]
    kinds = {n.op for n in ops}
    assert {"dla.conv", "dla.sdp", "dla.pdp"} <= kinds
    assert any(n.op == "dla.conv" and any(p.op == "eltwise" for p in n.attrs["post"]) for n in ops)
    assert any(n.op == "dla.pdp" and n.attrs["method"] == "avg" and any(n.attrs["pads"]) for n in ops)
    if precision == "fp16":  # the cap is on Y's ALU (int16 takes it from the calibrated range)
        assert any(n.op == "dla.sdp" and not n.attrs["sdp"].y.bypass for n in ops)
    results = replay_all(ld, lowered, get_config("nv_full"))
    assert len(results) == len(ops)
    bad = [(r.name, r.mismatches, r.elements) for r in results if not r.ok]
    assert not bad


def lut_net() -> onnx.ModelProto:
    """Sigmoid and tanh fused after convolutions, and a tanh after a residual add (X2's ALU, then Y's LUT)."""
    rng = np.random.default_rng(4)
    inits = [_const("w1", rng.standard_normal((8, 4, 3, 3)) * 0.5), _const("b1", rng.standard_normal(8) * 0.2),
             _const("w2", rng.standard_normal((8, 4, 1, 1)) * 0.8), _const("b2", rng.standard_normal(8) * 0.2)]
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
             helper.make_node("Sigmoid", ["c1"], ["s1"]),
             helper.make_node("Conv", ["x", "w2", "b2"], ["c2"]),
             helper.make_node("Tanh", ["c2"], ["t2"]),
             helper.make_node("Add", ["s1", "t2"], ["a"]),
             helper.make_node("Tanh", ["a"], ["y"])]
    graph = helper.make_graph(nodes, "lut_net", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 6, 6])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8, 6, 6])], inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    onnx.checker.check_model(m)
    return m


@pytest.mark.parametrize("precision", ["fp16", "int16"])
def test_sigmoid_and_tanh_run_on_the_sdp_lut_in_16_bits(precision: str) -> None:
    """The LUT tables are built for the precision (int16: 16-bit output steps; fp16: the float input), run
    on the DLA (no CPU op), match the float network, and replay bit-exact against the reference math."""
    got, want, ld, lowered = run_both(lut_net(), precision)
    assert not [n for n in lowered.nodes if n.op.startswith("cpu.")]
    luts = [n for n in lowered.nodes if n.op.startswith("dla.") and n.attrs["sdp"].lut is not None]
    assert len(luts) == 3 and all(not n.attrs["sdp"].y.lut_bypass for n in luts)
    assert cosine(got["y"], want["y"]) >= COSINE[precision]
    # 257-entry tables: about 1e-4 of interpolation error per function (measured max 1.2e-3 after three;
    # int8 reaches 2.7e-2)
    worst = float(np.abs(got["y"] - want["y"]).max())
    assert worst <= 2e-3, worst
    results = replay_all(ld, lowered, get_config("nv_full"))
    bad = [(r.name, r.mismatches, r.elements) for r in results if not r.ok]
    assert results and not bad


def test_fp16_is_refused_where_the_config_has_no_fp16_datapath() -> None:
    g = onnx_frontend.load(ZOO["lenet"](0))
    msg = one_line_error(lambda: compile_graph(g, "nv_small", precision="fp16"))
    assert "nv_small has no fp16 datapath" in msg and "int8" in msg


def test_default_precision_is_int8_where_the_config_has_it() -> None:
    g = onnx_frontend.load(ZOO["lenet"](0))
    ld, _, ctx = compile_graph(g, "nv_full")
    assert ctx.precision == "int8"
    assert {t.dtype for t in ld.tensors if t.storage == pb.Tensor.FEATURE} == {pb.Tensor.INT8}


def test_fp16_value_beyond_its_range_is_refused_naming_the_layer() -> None:
    m = every_sdp_use()
    w = next(i for i in m.graph.initializer if i.name == "w1")
    w.CopyFrom(_const("w1", np.full((8, 4, 3, 3), 1e6)))
    g = onnx_frontend.load(m)
    with pytest.raises(CompileError) as info:
        compile_graph(g, "nv_full", precision="fp16")
    msg = str(info.value)
    assert "65504" in msg and "weight" in msg and "\n" not in msg
