"""A deep chain of convolutions compiles and runs: layers that each shrink their input (gain 0.8) calibrate
ranges that underflow float32 by layer ~400 and float64 later; those tensors must not get a 0.0 scale (the
loadable's scales are float32), and the chain must compute what the float network computes."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from compiler.driver import load_model
from compiler.float_exec import run_float
from compiler.ir import Graph, Node
from compiler.passes.quantize import MIN_RANGE, tensor_scales
from loadable.format import read_loadable

ROOT = Path(__file__).resolve().parents[2]
CHANNELS, SIDE = 8, 8


def conv_chain(path: Path, layers: int, kernel: int = 1, gain: float = 0.8, seed: int = 0) -> Path:
    """``layers`` convolutions in a row on a 1x8x8x8 input, each of gain about ``gain``."""
    rng = np.random.default_rng(seed)
    nodes, weights, prev = [], [], "x"
    for i in range(layers):
        w = rng.standard_normal((CHANNELS, CHANNELS, kernel, kernel)) * gain / np.sqrt(CHANNELS * kernel * kernel)
        weights.append(numpy_helper.from_array(w.astype(np.float32), f"w{i}"))
        nodes.append(helper.make_node("Conv", [prev, f"w{i}"], [f"t{i}"], kernel_shape=[kernel, kernel],
                                      pads=[kernel // 2] * 4))
        prev = f"t{i}"
    shape = [1, CHANNELS, SIDE, SIDE]
    graph = helper.make_graph(nodes, "chain", [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                              [helper.make_tensor_value_info(prev, TensorProto.FLOAT, shape)], weights)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)
    return path


def dla(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "app.cli", *args], capture_output=True, text=True, cwd=ROOT,
                          timeout=900)


def test_ranges_below_float32_take_the_input_range():
    """A range that is 0, or below float32's normal numbers once divided by 127, is no range: it takes the
    network input's (its values are 0 in int8 at that scale), as a dead tensor always did."""
    scales = tensor_scales(_two_convs(), {"x": 4.0, "a": 1e-40, "b": 0.0, "c": 2.0})
    assert scales["x"] == scales["a"] == scales["b"] == 4.0 / 127
    assert scales["c"] == 2.0 * 1.25 / 127  # a network output keeps headroom (OUTPUT_HEADROOM)
    assert MIN_RANGE / 127 == np.finfo(np.float32).tiny


def _two_convs() -> Graph:
    g = Graph(name="g")
    g.inputs, g.outputs = ["x"], ["c"]
    g.nodes = [Node("n0", "dla.conv", ["x"], ["a"], {}), Node("n1", "dla.conv", ["a"], ["b"], {}),
               Node("n2", "dla.conv", ["b"], ["c"], {})]
    return g


def test_thousand_conv_chain_compiles_and_runs(tmp_path):
    model = conv_chain(tmp_path / "chain.onnx", 1000)
    x = np.random.default_rng(1).standard_normal((1, CHANNELS, SIDE, SIDE)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    out = tmp_path / "chain.dla"
    p = dla("compile", str(model), "--config", "nv_small", "--calib-random", "4", "-o", str(out))
    assert p.returncode == 0, p.stderr
    assert "1000 DLA operations" in p.stdout
    tensors = {t.name: t.scale for t in read_loadable(out).tensors}
    scales = [tensors[f"t{i}"] for i in range(1000)]
    assert min(scales) >= np.finfo(np.float32).tiny  # a normal float32 each, none 0.0
    cut = scales.index(tensors["x"])  # the first range below MIN_RANGE takes the input's
    assert 100 < cut < 600 and set(scales[cut:]) == {tensors["x"]}
    assert max(scales[:cut]) < tensors["x"] and scales[cut - 1] < 1e-30  # calibrated, shrinking ranges
    p = dla("run", str(out), "--input", str(tmp_path / "x.npy"), "--output", str(tmp_path / "y.npy"))
    assert p.returncode == 0, p.stderr
    y = np.load(tmp_path / "y.npy")
    g = load_model(model, None)
    values = run_float(g, {"x": x}, keep=True)
    reference = values["t999"]
    assert np.max(np.abs(reference)) < 1e-30  # the float network's output is 0 in float32 too
    np.testing.assert_array_equal(y, np.zeros_like(y))
