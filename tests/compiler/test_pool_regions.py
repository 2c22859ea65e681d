"""Averages whose edge windows divide by fewer taps than the kernel (count_include_pad=0 with padding, Caffe's
and ONNX's ceil mode with padding) run on PDP as several passes (``lowering.avg_pool_regions``), since PDP
always divides by its kernel's area.

The plan is checked by executing it in float (each region a plain average over its own input window, written
at its output offset) against the float reference's divisor rule, over random geometries; the compiled layer
on golden against the average of its int8 input, within one output step, with no CPU op."""
from __future__ import annotations

import numpy as np
import onnx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper

from compiler.driver import compile_graph, random_inputs
from compiler.frontend import onnx as onnx_frontend
from compiler.lowering import avg_pool_regions
from floatops.kernels import KERNELS, pad2d
from runtime.executor import Network

pytest.importorskip("onnxruntime")
from regressions.lib.float_reference import session  # noqa: E402


def run_regions(x: np.ndarray, regions, out_hw) -> np.ndarray:
    """The passes as PDP computes them: each the sum over its zero-padded input window / its kernel's area."""
    y = np.full(x.shape[:2] + tuple(out_hw), np.nan)
    for r in regions:
        (i0, i1), (j0, j1), (kh, kw), (sy, sx) = r.in_rows, r.in_cols, r.kernel, r.stride
        src = pad2d(x[:, :, i0:i1, j0:j1], r.pads)
        (o0, o1), (p0, p1) = r.out_rows, r.out_cols
        assert np.isnan(y[:, :, o0:o1, p0:p1]).all(), "regions overlap"
        for oi in range(o1 - o0):
            for oj in range(p1 - p0):
                win = src[:, :, oi * sy:oi * sy + kh, oj * sx:oj * sx + kw]
                assert win.shape[2:] == (kh, kw), "a window runs off its region's padded input"
                y[:, :, o0 + oi, p0 + oj] = win.sum(axis=(2, 3)) / (kh * kw)
    return y


@settings(max_examples=300, deadline=None)
@given(h=st.integers(1, 12), w=st.integers(1, 12), kh=st.integers(1, 8), kw=st.integers(1, 8), sy=st.integers(1, 4),
       sx=st.integers(1, 4), data=st.data())
def test_regions_compute_the_reference_average(h: int, w: int, kh: int, kw: int, sy: int, sx: int, data) -> None:
    pads = tuple(data.draw(st.integers(0, min(k - 1, 7))) for k in (kh, kw, kh, kw))
    if h + pads[0] + pads[2] < kh or w + pads[1] + pads[3] < kw:
        return
    counted = tuple(data.draw(st.integers(0, p)) for p in pads)  # any rule: none, all, Caffe's (explicit part)
    attrs = dict(kernel=(kh, kw), strides=(sy, sx), pads=pads, divisor_pads=counted)
    x = np.random.default_rng(h * 100 + w).standard_normal((1, 2, h, w))
    want = KERNELS["AveragePool"]([x], attrs)[0]
    regions = avg_pool_regions(h, w, want.shape[2:], (kh, kw), (sy, sx), pads, counted)
    assert regions is not None  # pads < kernel: every window holds some input
    for r in regions:  # every pass is one PDP can run
        assert max(r.kernel) <= 8 and max(r.pads) <= 7 and all(p < k for p, k in zip(r.pads, r.kernel * 2))
    np.testing.assert_allclose(run_regions(x, regions, want.shape[2:]), want, rtol=1e-12, atol=1e-12)


def _pool_model(attrs: dict, shape=(1, 16, 9, 10)) -> onnx.ModelProto:
    node = helper.make_node("AveragePool", ["x"], ["y"], **attrs)
    graph = helper.make_graph([node], "t", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    return onnx.shape_inference.infer_shapes(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 11)]))


@pytest.mark.parametrize("config", ["nv_small", "nv_full"])
@pytest.mark.parametrize("attrs, passes", [
    (dict(kernel_shape=[3, 3], pads=[1, 1, 1, 1], count_include_pad=0), 9),
    (dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1], ceil_mode=1, count_include_pad=1), 2),
    (dict(kernel_shape=[3, 2], strides=[2, 3], pads=[2, 0, 1, 1], ceil_mode=1, count_include_pad=0), 6),
    (dict(kernel_shape=[7, 7], pads=[3, 3, 3, 3], count_include_pad=0), 49),
    (dict(kernel_shape=[3, 3], pads=[1, 1, 1, 1], count_include_pad=1), 1),
])
def test_edge_divisor_averages_run_on_pdp(config: str, attrs: dict, passes: int) -> None:
    m = _pool_model(attrs)
    g = onnx_frontend.load(m)
    ld, lowered, ctx = compile_graph(g, config, calib_inputs=random_inputs(g, 8, seed=3))
    assert [n.op for n in lowered.nodes] == ["dla.pdp"]
    net = Network(ld)
    assert sum(1 for _ in net.dla_ops()) == passes
    x = np.random.default_rng(5).standard_normal((1, 16, 9, 10)).astype(np.float32)
    s_in, s_out = ctx.scales["x"], ctx.scales["y"]
    xq = (np.clip(np.rint(x / s_in), -128, 127) * s_in).astype(np.float32)  # what the DLA sees
    want = session(m).run(None, {"x": xq})[0]
    got = net.run({"x": x})["y"]
    assert got.shape == want.shape
    steps = np.abs(got - want) / s_out  # the PDP's reciprocal and output rounding: under one step
    assert steps.max() <= 1.0, (float(steps.max()), np.unravel_index(np.argmax(steps), steps.shape))
