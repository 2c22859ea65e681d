"""Float kernels of every canonical IR op against ONNX's reference evaluator on single-op models (float64).

Each case gives the ONNX form (op type, attrs, constant inputs) and the IR form (attrs) of the same layer, so
the kernels are checked directly, independent of the ONNX frontend.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import onnx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

from compiler.errors import CompileError
from compiler.float_exec import run_float
from compiler.ir import Graph, Node
from compiler.ops import OPS, infer_shapes
from floatops.kernels import KERNELS

RTOL = 1e-5


def reference(nodes: list[onnx.NodeProto], feeds: dict[str, np.ndarray], consts: dict[str, np.ndarray],
              outputs: list[str], opset: int = 13) -> list[np.ndarray]:
    """Run ONNX nodes in float64 with the reference evaluator (constants as initializers)."""
    inputs = [helper.make_tensor_value_info(k, TensorProto.DOUBLE, v.shape) for k, v in feeds.items()]
    outs = [helper.make_tensor_value_info(o, TensorProto.DOUBLE, None) for o in outputs]
    inits = [numpy_helper.from_array(v, k) for k, v in consts.items()]
    model = helper.make_model(helper.make_graph(nodes, "single", inputs, outs, inits),
                              opset_imports=[helper.make_opsetid("", opset)])
    return [np.asarray(v) for v in ReferenceEvaluator(model).run(None, feeds)]


def check(op: str, ir_attrs: dict[str, Any], onnx_op: str, onnx_attrs: dict[str, Any], data: list[np.ndarray],
          consts: list[np.ndarray] | None = None, n_out: int = 1, opset: int = 13,
          ir_consts: list[np.ndarray] | None = None) -> None:
    """KERNELS[op] on data + constants must equal ONNX ``onnx_op`` on the same values."""
    consts = consts or []
    names = [f"x{i}" for i in range(len(data))]
    cnames = [f"c{i}" for i in range(len(consts))]
    outs = [f"y{i}" for i in range(n_out)]
    node = helper.make_node(onnx_op, names + cnames, outs, **onnx_attrs)
    want = reference([node], dict(zip(names, data)), dict(zip(cnames, consts)), outs, opset)
    got = KERNELS[op](list(data) + list(ir_consts if ir_consts is not None else consts), ir_attrs)
    assert len(got) == n_out
    for g, w in zip(got, want):
        assert g.shape == w.shape
        np.testing.assert_allclose(g, w, rtol=RTOL, atol=RTOL * max(1.0, float(np.abs(w).max())))


def rnd(*shape: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape)


def test_every_canonical_op_has_a_kernel() -> None:
    assert set(OPS) <= set(KERNELS)
    assert "ZeroInsert" in KERNELS


# ---- convolution ----------------------------------------------------------------------------------------
# (C, K, H, W, R, S, strides, pads (t, l, b, r), dilations, group, bias)
CONVS = [
    (3, 8, 9, 9, 3, 3, (1, 1), (1, 1, 1, 1), (1, 1), 1, True),
    (4, 6, 10, 7, 3, 2, (2, 1), (0, 1, 2, 0), (1, 1), 1, False),
    (6, 6, 8, 8, 3, 3, (2, 2), (1, 1, 1, 1), (1, 1), 6, True),  # depthwise
    (4, 8, 11, 9, 3, 3, (1, 2), (2, 2, 2, 2), (2, 2), 2, True),  # grouped + dilated
    (5, 7, 6, 6, 1, 1, (1, 1), (0, 0, 0, 0), (1, 1), 1, True),  # pointwise
    (2, 4, 12, 12, 5, 5, (3, 3), (2, 1, 0, 3), (1, 2), 2, False),
    (16, 8, 20, 20, 3, 3, (1, 1), (1, 1, 1, 1), (1, 1), 1, True),  # stride 1: one matmul per tap
    (16, 4, 40, 24, 3, 2, (1, 1), (2, 3, 2, 3), (2, 3), 1, False),  # ... dilated
]


@pytest.mark.parametrize("cfg", CONVS, ids=[f"conv{i}" for i in range(len(CONVS))])
def test_conv(cfg: tuple) -> None:
    c, k, h, w, r, s, strides, pads, dil, group, bias = cfg
    x, wt = rnd(2, c, h, w), rnd(k, c // group, r, s, seed=1)
    consts = [wt] + ([rnd(k, seed=2)] if bias else [])
    check("Conv", dict(strides=strides, pads=pads, dilations=dil, group=group), "Conv",
          dict(strides=list(strides), pads=[pads[0], pads[1], pads[2], pads[3]], dilations=list(dil), group=group),
          [x], consts)


def test_wide_stride_one_convs_take_the_per_tap_path() -> None:
    """The last two CONVS cases run ``_conv_shifted`` (compared with onnxruntime above); thin inputs do not."""
    from floatops.kernels import _conv_shifted

    for c, k, h, w, r, s, _, pads, dil, _, _ in CONVS[-2:]:
        assert _conv_shifted(rnd(1, c, h, w), pads, rnd(k, c, r, s), dil) is not None
    assert _conv_shifted(rnd(1, 3, 20, 20), (0, 0, 0, 0), rnd(4, 3, 3, 3), (1, 1)) is None


# (C, K/group, H, W, R, S, strides, pads, dilations, output_padding, bias)
DECONVS = [
    (3, 4, 5, 5, 3, 3, (2, 2), (1, 1, 1, 1), (1, 1), (1, 1), True),
    (2, 3, 4, 6, 4, 4, (2, 2), (0, 0, 0, 0), (1, 1), (0, 0), False),
    (4, 2, 3, 3, 3, 2, (3, 2), (2, 0, 1, 1), (1, 1), (2, 1), True),
    (2, 2, 4, 4, 3, 3, (1, 1), (0, 0, 0, 0), (2, 2), (0, 0), True),
    (3, 5, 3, 4, 2, 2, (2, 2), (3, 0, 0, 3), (1, 1), (1, 0), False),  # pads beyond the kernel crop
]


@pytest.mark.parametrize("cfg", DECONVS, ids=[f"deconv{i}" for i in range(len(DECONVS))])
def test_conv_transpose(cfg: tuple) -> None:
    c, kg, h, w, r, s, strides, pads, dil, opad, bias = cfg
    x, wt = rnd(2, c, h, w), rnd(c, kg, r, s, seed=1)
    consts = [wt] + ([rnd(kg, seed=2)] if bias else [])
    check("ConvTranspose", dict(strides=strides, pads=pads, dilations=dil, group=1, output_padding=opad),
          "ConvTranspose", dict(strides=list(strides), pads=list(pads), dilations=list(dil), output_padding=list(opad)),
          [x], consts)


def test_conv_transpose_grouped() -> None:
    """The reference evaluator mishandles group > 1, so compare against it one group at a time."""
    g, cg, kg = 3, 2, 2
    x, wt, b = rnd(2, g * cg, 4, 5), rnd(g * cg, kg, 3, 3, seed=1), rnd(g * kg, seed=2)
    attrs = dict(strides=(2, 1), pads=(1, 0, 0, 1), dilations=(1, 2), output_padding=(1, 0))
    onnx_attrs = {k: list(v) for k, v in attrs.items()}
    want = np.concatenate([
        reference([helper.make_node("ConvTranspose", ["x", "w", "b"], ["y"], **onnx_attrs)],
                  {"x": x[:, i * cg:(i + 1) * cg]},
                  {"w": wt[i * cg:(i + 1) * cg], "b": b[i * kg:(i + 1) * kg]}, ["y"])[0]
        for i in range(g)], axis=1)
    got = KERNELS["ConvTranspose"]([x, wt, b], dict(attrs, group=g))[0]
    np.testing.assert_allclose(got, want, rtol=RTOL, atol=RTOL)


@pytest.mark.parametrize("strides,pads", [((2, 2), (0, 0, 0, 0)), ((3, 2), (1, 2, 0, 3)), ((1, 1), (2, 0, 1, 1))])
def test_zero_insert(strides: tuple[int, int], pads: tuple[int, int, int, int]) -> None:
    """ZeroInsert == ConvTranspose with an identity 1x1 kernel at the stride, then Pad."""
    x = rnd(2, 3, 4, 5)
    eye = np.eye(3).reshape(3, 3, 1, 1)
    t, l, b, r = pads
    nodes = [helper.make_node("ConvTranspose", ["x", "eye"], ["spread"], strides=list(strides)),
             helper.make_node("Pad", ["spread", "pads"], ["y"])]
    want = reference(nodes, {"x": x}, {"eye": eye, "pads": np.array([0, 0, t, l, 0, 0, b, r], np.int64)}, ["y"])[0]
    got = KERNELS["ZeroInsert"]([x], dict(strides=strides, pads=pads))[0]
    assert got.shape == want.shape
    np.testing.assert_array_equal(got, want)


def test_gemm() -> None:
    x, w, b = rnd(3, 12), rnd(5, 12, seed=1), rnd(5, seed=2)
    check("Gemm", {}, "Gemm", dict(transB=1), [x], [w, b])
    check("Gemm", {}, "Gemm", dict(transB=1), [x], [w])


# ---- pooling -------------------------------------------------------------------------------------------------
POOLS = [
    ((2, 2), (2, 2), (0, 0, 0, 0)),
    ((3, 3), (2, 2), (1, 1, 1, 1)),
    ((3, 2), (1, 2), (1, 0, 2, 1)),
    ((5, 5), (3, 3), (2, 2, 2, 2)),
]


@pytest.mark.parametrize("kernel,strides,pads", POOLS)
def test_max_pool(kernel: tuple, strides: tuple, pads: tuple) -> None:
    check("MaxPool", dict(kernel=kernel, strides=strides, pads=pads), "MaxPool",
          dict(kernel_shape=list(kernel), strides=list(strides), pads=list(pads)), [rnd(2, 3, 11, 10)])


@pytest.mark.parametrize("include", [False, True])
@pytest.mark.parametrize("kernel,strides,pads", POOLS)
def test_average_pool(kernel: tuple, strides: tuple, pads: tuple, include: bool) -> None:
    check("AveragePool", dict(kernel=kernel, strides=strides, pads=pads, count_include_pad=include), "AveragePool",
          dict(kernel_shape=list(kernel), strides=list(strides), pads=list(pads), count_include_pad=int(include)),
          [rnd(2, 3, 11, 10)])


@pytest.mark.parametrize("op", ["GlobalMaxPool", "GlobalAveragePool"])
def test_global_pool(op: str) -> None:
    check(op, {}, op, {}, [rnd(2, 4, 5, 7)])


# ---- activations ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("op", ["Relu", "Sigmoid", "Tanh"])
def test_unary(op: str) -> None:
    check(op, {}, op, {}, [rnd(2, 3, 4, 5) * 20])  # large values exercise the stable sigmoid


@pytest.mark.parametrize("lo,hi", [(0.0, 6.0), (-0.5, None), (None, 0.25), (None, None)])
def test_clip(lo: float | None, hi: float | None) -> None:
    x = rnd(2, 3, 4, 4)
    names = ["x0", "lo" if lo is not None else "", "hi" if hi is not None else ""]
    consts = {k: np.array(v, np.float64) for k, v in (("lo", lo), ("hi", hi)) if v is not None}
    want = reference([helper.make_node("Clip", names, ["y"])], {"x0": x}, consts, ["y"])[0]
    got = KERNELS["Clip"]([x], dict(min=lo, max=hi))[0]
    np.testing.assert_allclose(got, want, rtol=RTOL)


@pytest.mark.parametrize("shape,slope_shape", [((2, 4, 3, 3), (4,)), ((2, 4, 3, 3), (1,)), ((3, 6), (6,))])
def test_prelu(shape: tuple, slope_shape: tuple) -> None:
    slope = rnd(*slope_shape, seed=3)
    onnx_slope = slope.reshape(slope.shape + (1,) * (len(shape) - 2)) if slope.size > 1 else slope
    check("PRelu", {}, "PRelu", {}, [rnd(*shape)], [onnx_slope], ir_consts=[slope])


def test_leaky_relu() -> None:
    check("LeakyRelu", dict(alpha=0.2), "LeakyRelu", dict(alpha=0.2), [rnd(2, 3, 4, 4)])


@pytest.mark.parametrize("shape", [(2, 5, 3, 4), (3, 5)])
def test_channel_affine(shape: tuple) -> None:
    """ChannelAffine == Mul then Add by per-channel constants."""
    x, scale, bias = rnd(*shape), rnd(5, seed=1), rnd(5, seed=2)
    bshape = (5,) + (1,) * (len(shape) - 2)
    nodes = [helper.make_node("Mul", ["x", "s"], ["m"]), helper.make_node("Add", ["m", "b"], ["y"])]
    want = reference(nodes, {"x": x}, {"s": scale.reshape(bshape), "b": bias.reshape(bshape)}, ["y"])[0]
    np.testing.assert_allclose(KERNELS["ChannelAffine"]([x, scale, bias], {})[0], want, rtol=RTOL)


@pytest.mark.parametrize("op", ["Add", "Mul", "Max"])
def test_binary(op: str) -> None:
    check(op, {}, op, {}, [rnd(2, 3, 4, 5), rnd(2, 3, 4, 5, seed=1)])


# ---- tensor plumbing -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("axis", [0, 1, 3])
def test_concat(axis: int) -> None:
    xs = [rnd(*[2 + (i if a == axis else 0) for a, _ in enumerate(range(4))], seed=i) for i in range(3)]
    check("Concat", dict(axis=axis), "Concat", dict(axis=axis), xs)


def test_split() -> None:
    check("Split", dict(axis=1, split=(2, 5, 1)), "Split", dict(axis=1), [rnd(2, 8, 3, 3)],
          [np.array([2, 5, 1], np.int64)], n_out=3)


@pytest.mark.parametrize("axis,start,end", [(1, 2, 5), (2, 0, 1), (3, 3, 6)])
def test_slice(axis: int, start: int, end: int) -> None:
    consts = [np.array([start], np.int64), np.array([end], np.int64), np.array([axis], np.int64)]
    check("Slice", dict(axis=axis, start=start, end=end), "Slice", {}, [rnd(2, 6, 4, 6)], consts, ir_consts=[])


@pytest.mark.parametrize("axis", [0, 1, 2, 4])
def test_flatten(axis: int) -> None:
    check("Flatten", dict(axis=axis), "Flatten", dict(axis=axis), [rnd(2, 3, 4, 5)])


def test_reshape_and_identity() -> None:
    check("Reshape", dict(shape=(2, 12, 5)), "Reshape", {}, [rnd(2, 3, 4, 5)], [np.array([2, 12, 5], np.int64)],
          ir_consts=[])
    check("Identity", {}, "Identity", {}, [rnd(2, 3)])


def test_reshape_follows_the_batch() -> None:
    """IR shapes carry batch 1; a calibration batch keeps its own batch size."""
    y = KERNELS["Reshape"]([rnd(7, 3, 2, 2)], dict(shape=(1, 12)))[0]
    assert y.shape == (7, 12)


@pytest.mark.parametrize("size,alpha,beta,bias", [(5, 1e-4, 0.75, 1.0), (3, 0.5, 0.6, 2.0), (4, 2.0, 1.0, 1.0)])
def test_lrn(size: int, alpha: float, beta: float, bias: float) -> None:
    """The reference evaluator loops over the batch axis where it means channels, so N == C here."""
    attrs = dict(size=size, alpha=alpha, beta=beta, bias=bias)
    check("LRN", attrs, "LRN", attrs, [rnd(7, 7, 3, 4) * 3])


@pytest.mark.parametrize("axis", [1, -1, 2])
def test_softmax(axis: int) -> None:
    check("Softmax", dict(axis=axis), "Softmax", dict(axis=axis), [rnd(2, 5, 3, 4) * 30])


# ---- run_float -------------------------------------------------------------------------------------------------
def small_graph() -> Graph:
    g = Graph(name="t", inputs=["x"], outputs=["y"], shapes={"x": (1, 2, 4, 4)})
    g.consts = {"w": rnd(3, 2, 3, 3).astype(np.float32), "s": np.ones(3, np.float32), "b": np.zeros(3, np.float32)}
    g.nodes = [
        Node("conv", "Conv", ["x", "w"], ["c"], dict(strides=(1, 1), pads=(1, 1, 1, 1), dilations=(1, 1), group=1)),
        Node("bn", "ChannelAffine", ["c", "s", "b"], ["a"]),
        Node("relu", "Relu", ["a"], ["r"]),
        Node("gap", "GlobalAveragePool", ["r"], ["p"]),
        Node("flat", "Flatten", ["p"], ["y"], dict(axis=1)),
    ]
    return infer_shapes(g)


def test_run_float_outputs_and_keep() -> None:
    g = small_graph()
    x = rnd(1, 2, 4, 4)
    out = run_float(g, {"x": x})
    assert set(out) == {"y"} and out["y"].shape == (1, 3) and out["y"].dtype == np.float64
    every = run_float(g, {"x": x}, keep=True)
    assert {"x", "c", "a", "r", "p", "y"} <= set(every) and "w" not in every
    np.testing.assert_array_equal(every["y"], out["y"])
    batch = run_float(g, {"x": rnd(5, 2, 4, 4)})  # kernels follow the fed batch
    assert batch["y"].shape == (5, 3)


def test_run_float_errors_name_the_problem() -> None:
    g = small_graph()
    with pytest.raises(CompileError, match="graph input 'x'"):
        run_float(g, {})
    g.nodes.append(Node("mystery", "Erf", ["y"], ["z"]))
    with pytest.raises(CompileError, match=r"layer 'mystery' \(Erf\)"):
        run_float(g, {"x": rnd(1, 2, 4, 4)})


# ---- property-based: random convolution and pooling geometries ---------------------------------------------
@st.composite
def conv_cases(draw: st.DrawFn) -> tuple:
    group = draw(st.sampled_from([1, 2, 3]))
    c, k = group * draw(st.integers(1, 3)), group * draw(st.integers(1, 3))
    r, s = draw(st.integers(1, 4)), draw(st.integers(1, 4))
    dil = (draw(st.integers(1, 2)), draw(st.integers(1, 2)))
    strides = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    pads = tuple(draw(st.integers(0, 2)) for _ in range(4))
    h = draw(st.integers((r - 1) * dil[0] + 1, 9))
    w = draw(st.integers((s - 1) * dil[1] + 1, 9))
    return c, k, h, w, r, s, strides, pads, dil, group, draw(st.booleans())


@settings(max_examples=40, deadline=None)
@given(conv_cases())
def test_conv_random_geometry(cfg: tuple) -> None:
    test_conv(cfg)


@settings(max_examples=40, deadline=None)
@given(kh=st.integers(1, 4), kw=st.integers(1, 4), sy=st.integers(1, 3), sx=st.integers(1, 3),
       pad=st.integers(0, 1), include=st.booleans(), op=st.sampled_from(["MaxPool", "AveragePool"]))
def test_pool_random_geometry(kh: int, kw: int, sy: int, sx: int, pad: int, include: bool, op: str) -> None:
    """One pad on every side, smaller than the kernel: the reference evaluator's stride-1 pooling mishandles
    pads that differ between sides or axes (the parametrized cases above cover those)."""
    p = min(pad, kh - 1, kw - 1)
    pads = (p, p, p, p)
    ir = dict(kernel=(kh, kw), strides=(sy, sx), pads=pads)
    onnx_attrs = dict(kernel_shape=[kh, kw], strides=[sy, sx], pads=list(pads))
    if op == "AveragePool":
        ir["count_include_pad"] = include
        onnx_attrs["count_include_pad"] = int(include)
    check(op, ir, op, onnx_attrs, [rnd(1, 2, 7, 8)])


def test_streaming_run_frees_a_tensor_read_twice_by_one_node() -> None:
    """Add(x, x): the streamed run (calibration) frees x once, after its last reader, and sees every value."""
    from compiler.ir import Graph, Node

    g = Graph(inputs=["x"], outputs=["y"], nodes=[Node("a", "Add", ["x", "x"], ["s"]), Node("r", "Relu", ["s"], ["y"])],
              shapes={"x": (1, 2, 2, 2), "s": (1, 2, 2, 2), "y": (1, 2, 2, 2)})
    seen: list[str] = []
    x = np.arange(8, dtype=np.float32).reshape(1, 2, 2, 2) - 4
    out = run_float(g, {"x": x}, dtype=np.float32, observe=lambda t, v: seen.append(t))
    assert seen == ["x", "s", "y"]
    np.testing.assert_array_equal(out["y"], np.maximum(2 * x, 0))
