"""``compiler.passes.equalize_concats``: concat inputs rescaled to one range without changing the float network."""
from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from compiler.driver import PIPELINE, compile_graph, random_inputs
from compiler.float_exec import run_float
from compiler.frontend import onnx as onnx_frontend
from compiler.passes import CompileContext
from golden.config import get_config


def _dense_block() -> onnx.ModelProto:
    """DenseNet-like: three convs of very different gains (no BN after them), concatenated, then BN-ReLU-conv;
    the first conv also feeds a BN directly, and one input reaches the concat through an average pool."""
    rng = np.random.default_rng(3)
    w = lambda k, c, gain: (rng.standard_normal((k, c, 1, 1)) * gain).astype(np.float32)  # noqa: E731
    inits = {"w1": w(8, 4, 0.1), "w2": w(8, 4, 3.0), "w3": w(16, 4, 0.5), "w4": w(6, 32, 0.3),
             "w5": w(6, 8, 0.3),
             **{f"{p}{i}": v for i, c in ((1, 32), (2, 8)) for p, v in
                (("s", rng.uniform(.5, 2, c)), ("b", rng.normal(0, .1, c)), ("m", np.zeros(c)), ("v", np.ones(c)))}}
    inits = {k: v.astype(np.float32) for k, v in inits.items()}
    nodes = [helper.make_node("Conv", ["x", "w1"], ["a"]), helper.make_node("Conv", ["x", "w2"], ["b0"]),
             helper.make_node("AveragePool", ["b0"], ["b"], kernel_shape=[3, 3], pads=[1] * 4, strides=[1, 1],
                              count_include_pad=1),
             helper.make_node("Conv", ["x", "w3"], ["c0"]), helper.make_node("Relu", ["c0"], ["c"]),
             helper.make_node("Concat", ["a", "b", "c"], ["cat"], axis=1),
             helper.make_node("BatchNormalization", ["cat", "s1", "b1", "m1", "v1"], ["n"]),
             helper.make_node("Relu", ["n"], ["r"]), helper.make_node("Conv", ["r", "w4"], ["y1"]),
             helper.make_node("BatchNormalization", ["a", "s2", "b2", "m2", "v2"], ["na"]),
             helper.make_node("Conv", ["na", "w5"], ["y2"]), helper.make_node("Add", ["y1", "y2"], ["y"])]
    graph = helper.make_graph(nodes, "t", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 6, 6])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 6, 6, 6])],
                              [numpy_helper.from_array(v, k) for k, v in inits.items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 9)])


def _until(m: onnx.ModelProto, last: str):
    g = onnx_frontend.load(m)
    ctx = CompileContext(hw=get_config("nv_full"))
    ctx.calib_inputs = random_inputs(g, 8, seed=1)
    for name, fn in PIPELINE:
        g = fn(g, ctx)
        if name == last:
            return g, ctx
    raise AssertionError(last)


def test_the_float_network_is_unchanged_and_the_inputs_share_one_range() -> None:
    before, bctx = _until(_dense_block(), "calibrate")
    after, ctx = _until(_dense_block(), "equalize_concats")
    x = {"x": np.random.default_rng(2).standard_normal((3, 4, 6, 6))}
    np.testing.assert_allclose(run_float(after, dict(x))["y"], run_float(before, dict(x))["y"], rtol=1e-5, atol=1e-5)
    ranges = {t: ctx.amax[t] for t in ("a", "b", "c")}
    spread_before = max(bctx.amax[t] for t in ranges) / min(bctx.amax[t] for t in ranges)
    assert spread_before > 4, spread_before
    # the pooled input keeps room for the quantizer's average-pool headroom; the others meet the largest range
    top = max(bctx.amax[t] for t in ("a", "b", "c"))
    assert abs(ranges["a"] - top) / top < 0.06 and abs(ranges["c"] - top) / top < 0.06
    assert abs(2 * ranges["b"] - top) / top < 0.06 or ranges["b"] == bctx.amax["b"]
    assert ctx.amax["cat"] == max(ranges.values())


def test_a_group_with_a_reader_that_cannot_compensate_is_left_alone() -> None:
    m = _dense_block()
    m.graph.node.append(helper.make_node("MaxPool", ["cat"], ["p"], kernel_shape=[2, 2]))
    m.graph.output.append(helper.make_tensor_value_info("p", TensorProto.FLOAT, [1, 32, 5, 5]))
    before, bctx = _until(m, "calibrate")
    after, ctx = _until(m, "equalize_concats")
    assert {t: ctx.amax[t] for t in ("a", "b", "c")} == {t: bctx.amax[t] for t in ("a", "b", "c")}


def test_compiles_and_runs() -> None:
    g = onnx_frontend.load(_dense_block())
    ld, lowered, ctx = compile_graph(g, "nv_full", calib_inputs=random_inputs(g, 8, seed=1))
    assert not [n.op for n in lowered.nodes if n.op.startswith("cpu.")]
