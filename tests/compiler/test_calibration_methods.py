"""Calibration methods (minmax, percentile, entropy) and the per-layer quantization report."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from compiler.calib_range import BINS, AbsHistogram, choose
from compiler.driver import compile_graph, random_inputs
from compiler.errors import CompileError
from compiler.frontend import onnx as onnx_frontend

ROOT = Path(__file__).resolve().parents[2]


def test_histogram_keeps_every_value_as_its_range_doubles() -> None:
    h = AbsHistogram()
    rng = np.random.default_rng(0)
    h.add(rng.uniform(-1, 1, 10_000))
    top = h.top
    h.add(np.array([0.0, 0.0, 7.5]))
    assert h.top >= 7.5 > top / 2 and int(h.counts.sum()) == 10_001 and h.zeros == 2
    assert h.counts.size == BINS


def test_float32_channels_last_counts_as_float64() -> None:
    """The in-place float32 path (a channels-last view, as float_exec's convs leave their outputs) bins every
    value where the float64 path does, and returns the largest |value| calibration's minmax uses."""
    x = np.random.default_rng(2).standard_normal((2, 5, 6, 7)).astype(np.float32)
    x[0, 1] = 0.0
    view = x.transpose(0, 2, 3, 1).copy().transpose(0, 3, 1, 2)  # NCHW shape, NHWC memory
    a, b = AbsHistogram(), AbsHistogram()
    assert a.add(view) == b.add(x.astype(np.float64)) == float(np.abs(x).max())
    assert a.zeros == b.zeros == 42 and a.top == b.top
    assert np.abs(a.counts - b.counts).sum() <= 2  # (a float32 product may round across a bin edge)
    assert int(a.counts.sum()) == x.size - 42


def test_minmax_builds_histograms_only_when_asked() -> None:
    g = onnx_frontend.load(_outlier_model())
    _, _, ctx = compile_graph(g, "nv_small", calib_inputs=_feeds(g))
    assert ctx.histograms == {} and ctx.amax["y"] > 0
    g = onnx_frontend.load(_outlier_model())  # (compiling lowers the graph in place)
    _, _, kept = compile_graph(g, "nv_small", calib_inputs=_feeds(g), histograms=True)
    assert set(kept.histograms) >= {"y"} and kept.amax == ctx.amax


def test_methods_on_a_gaussian_with_one_outlier() -> None:
    h = AbsHistogram()
    rng = np.random.default_rng(1)
    for _ in range(4):
        h.add(rng.standard_normal(100_000))
    h.add(np.array([40.0]))
    assert choose("minmax", h, 40.0) == 40.0
    pct, ent = choose("percentile", h, 40.0), choose("entropy", h, 40.0)
    assert 3.5 < pct < 4.5  # the 99.99th percentile of |N(0, 1)| is 3.89
    assert 3.0 < ent < 8.0
    relu = AbsHistogram()
    relu.add(np.maximum(rng.standard_normal(200_000), 0))  # half exact zeros: they must not drive the threshold
    assert 2.0 < choose("entropy", relu, 5.0) < 5.0


def _outlier_model() -> onnx.ModelProto:
    rng = np.random.default_rng(2)
    w = (rng.standard_normal((16, 8, 3, 3)) / 8).astype(np.float32)
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1] * 4, name="conv"),
             helper.make_node("Relu", ["c"], ["y"])]
    graph = helper.make_graph(nodes, "t", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, 32, 32])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 16, 32, 32])],
                              [numpy_helper.from_array(w, "w")])
    return helper.make_model(graph)


def _feeds(g):
    feeds = random_inputs(g, 8, seed=4)
    feeds[0]["x"][0, 0, 0, 0] = 60.0  # one wild input value
    return feeds


@pytest.mark.parametrize("method", ["percentile", "entropy"])
def test_methods_narrow_ranges_a_wild_value_would_widen(method: str) -> None:
    g = onnx_frontend.load(_outlier_model())
    _, _, minmax = compile_graph(g.copy(), "nv_small", calib_inputs=_feeds(g))
    _, _, other = compile_graph(g.copy(), "nv_small", calib_inputs=_feeds(g), calib_method=method)
    assert other.scales["x"] < minmax.scales["x"] / 4


def test_unknown_method_is_refused() -> None:
    g = onnx_frontend.load(_outlier_model())
    with pytest.raises(CompileError, match="--calib-method must be one of minmax, percentile, entropy"):
        compile_graph(g, "nv_small", calib_inputs=_feeds(g), calib_method="kl")


def test_quant_report_names_the_layer_that_clips() -> None:
    from compiler.quant_report import quant_report

    g = onnx_frontend.load(_outlier_model())
    _, lowered, ctx = compile_graph(g, "nv_small", calib_inputs=_feeds(g), calib_method="percentile")
    rows = quant_report(lowered, ctx)
    assert [r.tensor for r in rows] == ["y"] and rows[0].layer == "conv,Relu_1"
    r = rows[0]
    assert r.range == pytest.approx(127 * ctx.scales["y"]) and 0 < r.sqnr_db < 60
    assert r.seen_max > 0 and 0 <= r.clipped < 0.01  # (a network output keeps 25 % headroom above its range)


def test_cli_writes_the_quant_report(tmp_path: Path) -> None:
    model = tmp_path / "m.onnx"
    onnx.save(_outlier_model(), model)
    out, rep = tmp_path / "m.dla", tmp_path / "q.json"
    done = subprocess.run([sys.executable, "-m", "app.cli", "compile", str(model), "--config", "nv_small", "-o",
                           str(out), "--calib-random", "4", "--calib-method", "entropy", "--quant-report", str(rep)],
                          cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr
    assert "Quantization report (1 layers)" in done.stdout and "dB" in done.stdout
    rows = json.loads(rep.read_text())
    assert rows[0]["tensor"] == "y" and set(rows[0]) >= {"scale", "range", "clipped", "sqnr_db", "layer"}
