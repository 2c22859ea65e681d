"""``compiler.passes.pad_channels``: concat inputs padded to whole memory atoms make every channel concat a view.

The rewrite must not change what the float graph computes (checked exactly, before any quantization), and the
compiled network must keep matching onnxruntime, with no CPU op left."""
from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from compiler.driver import PIPELINE, compile_graph, random_inputs
from compiler.float_exec import run_float
from compiler.frontend import onnx as onnx_frontend
from compiler.passes import CompileContext
from golden.config import get_config
from regressions.lib.float_reference import session
from runtime.executor import Network

pytest.importorskip("onnxruntime")


def _w(rng, k: int, c: int, r: int = 1) -> np.ndarray:
    return (rng.standard_normal((k, c, r, r)) * np.sqrt(2.0 / (c * r * r))).astype(np.float32)


def _inception_like(output_is_concat: bool = False) -> onnx.ModelProto:
    """Two unaligned branches (20 + 12 channels) -> concat -> grouped conv, a residual Add over a pooled
    shortcut concat (ShuffleNet-style), global pool, FC."""
    rng = np.random.default_rng(4)
    inits = {"w1": _w(rng, 20, 8), "b1": rng.normal(0, .1, 20).astype(np.float32), "w2": _w(rng, 12, 8, 3),
             "w3": _w(rng, 32, 16), "w4": _w(rng, 20, 32, 3), "w5": _w(rng, 52, 52),
             "slope": rng.uniform(0, .3, (52, 1, 1)).astype(np.float32),
             "fc": (rng.standard_normal((10, 52)) / 7).astype(np.float32), "fb": np.zeros(10, np.float32),
             "s": np.array([1, -1], dtype=np.int64)}
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["a"]), helper.make_node("Relu", ["a"], ["ar"]),
             helper.make_node("Conv", ["x", "w2"], ["b"], pads=[1] * 4), helper.make_node("Relu", ["b"], ["br"]),
             helper.make_node("Concat", ["ar", "br"], ["cat1"], axis=1),  # offset 20: unaligned for 8/32 atoms
             helper.make_node("Conv", ["cat1", "w3"], ["g"], group=2),
             helper.make_node("MaxPool", ["cat1"], ["p"], kernel_shape=[3, 3], pads=[1] * 4, strides=[1, 1]),
             helper.make_node("Conv", ["g", "w4"], ["h"], pads=[1] * 4),
             helper.make_node("Concat", ["p", "h"], ["cat2"], axis=1),  # 32 + 20
             helper.make_node("Conv", ["cat2", "w5"], ["e"]), helper.make_node("Add", ["e", "cat2"], ["sum"]),
             helper.make_node("PRelu", ["sum", "slope"], ["act"])]
    if output_is_concat:
        return _model(nodes, inits, "cat2", [1, 52, 6, 6])
    nodes += [helper.make_node("GlobalAveragePool", ["act"], ["gap"]), helper.make_node("Reshape", ["gap", "s"], ["f"]),
              helper.make_node("Gemm", ["f", "fc", "fb"], ["y"], transB=1)]
    return _model(nodes, inits, "y", [1, 10])


def _model(nodes, inits, out: str, out_shape) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "t", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, 6, 6])],
                              [helper.make_tensor_value_info(out, TensorProto.FLOAT, out_shape)],
                              [numpy_helper.from_array(v, k) for k, v in inits.items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 9)])


def _through(m: onnx.ModelProto, config: str, last: str):
    g = onnx_frontend.load(m)
    logs: list[str] = []
    ctx = CompileContext(hw=get_config(config), log=logs.append)
    for name, fn in PIPELINE:
        g = fn(g, ctx)
        if name == last:
            return g, logs
    raise AssertionError(last)


@pytest.mark.parametrize("config", ["nv_small", "nv_full"])
def test_padding_leaves_the_float_network_unchanged(config: str) -> None:
    m = _inception_like()
    before, _ = _through(m, config, "fold_affine")
    after, logs = _through(m, config, "pad_channels")
    atom = get_config(config).atom_elements()
    assert any("padded to whole" in line for line in logs), logs
    for n in after.nodes:
        if n.op == "Concat":
            offsets = np.cumsum([after.shapes[t][1] for t in n.inputs])
            assert not np.any(offsets % atom), (n.name, offsets)
    x = {"x": np.random.default_rng(1).standard_normal((3, 8, 6, 6))}
    want = run_float(before, dict(x))[before.outputs[0]]
    got = run_float(after, dict(x))[after.outputs[0]]
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("config", ["nv_small", "nv_full"])
def test_padded_concats_are_views_and_match_float(config: str) -> None:
    m = _inception_like()
    g = onnx_frontend.load(m)
    ld, lowered, _ = compile_graph(g, config, calib_inputs=random_inputs(g, 8, seed=3))
    ops = [n.op for n in lowered.nodes]
    assert not [o for o in ops if o.startswith("cpu.")], ops
    assert ops.count("view.concat") == 2
    net = Network(ld)
    x = np.random.default_rng(9).standard_normal((4, 8, 6, 6)).astype(np.float32)
    got = net.run({"x": x})[net.outputs[0]].reshape(4, -1)
    sess = session(m)
    ref = np.concatenate([sess.run(None, {"x": x[i:i + 1]})[0].reshape(1, -1) for i in range(4)])
    cosine = float((got * ref).sum() / np.linalg.norm(got) / np.linalg.norm(ref))
    assert cosine > 0.99, cosine


def test_a_concat_the_graph_outputs_is_left_as_it_was() -> None:
    """Its channels are the network's output, so they cannot hold holes: the concats sharing its tensors keep
    their real channels (an unaligned one stays a copy) and the log says why."""
    m = _inception_like(output_is_concat=True)
    before, _ = _through(m, "nv_full", "fold_affine")
    after, logs = _through(m, "nv_full", "pad_channels")
    assert {t: before.shapes[t] for t in before.shapes} == {t: after.shapes[t] for t in before.shapes}
    assert any("stay unpadded" in line for line in logs), logs
