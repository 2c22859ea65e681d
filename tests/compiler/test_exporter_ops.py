"""Ops the classic ImageNet exporters write (issue 17): Dropout with its mask output, Reshape before Gemm,
global average pooling beyond PDP's window, channel shuffle and general Transpose. Each compiles to the engines
named, and the compiled network computes what onnxruntime computes within int8 error."""
from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from compiler.driver import compile_graph, random_inputs
from compiler.errors import CompileError
from compiler.frontend import onnx as onnx_frontend
from compiler.lowering import _pool_passes
from regressions.lib.float_reference import session
from runtime.executor import Network

ort = pytest.importorskip("onnxruntime")


def _model(nodes, inits, x_shape, y_name, y_shape, opset: int = 9) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "t", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)],
                              [helper.make_tensor_value_info(y_name, TensorProto.FLOAT, y_shape)],
                              [numpy_helper.from_array(v, k) for k, v in inits.items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def _compile(m: onnx.ModelProto, config: str = "nv_small"):
    g = onnx_frontend.load(m)
    return compile_graph(g, config, calib_inputs=random_inputs(g, 8, seed=3))


def _cosine_vs_float(m: onnx.ModelProto, ld, samples: int = 4) -> float:
    net = Network(ld)
    x = np.random.default_rng(9).standard_normal((samples, *[d.dim_value for d in
                                                             m.graph.input[0].type.tensor_type.shape.dim][1:]))
    x = x.astype(np.float32)
    got = net.run({"x": x})[net.outputs[0]].reshape(samples, -1)
    sess = session(m)
    ref = np.concatenate([sess.run(None, {"x": x[i:i + 1]})[0].reshape(1, -1) for i in range(samples)])
    return float((got * ref).sum() / np.linalg.norm(got) / np.linalg.norm(ref))


def _ops(lowered) -> list[str]:
    return [n.op for n in lowered.nodes]


def _relu_conv(rng, cin: int, cout: int, k: int, name: str) -> tuple[np.ndarray, np.ndarray]:
    w = (rng.standard_normal((cout, cin, k, k)) * np.sqrt(2.0 / (cin * k * k))).astype(np.float32)
    b = rng.normal(0, 0.1, cout).astype(np.float32)
    return w, b


# ---- Dropout -----------------------------------------------------------------------------------------------
def test_dropout_mask_nobody_reads_is_dropped() -> None:
    rng = np.random.default_rng(0)
    w, b = _relu_conv(rng, 4, 8, 3, "c")
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1] * 4),
             helper.make_node("Dropout", ["c"], ["d", "mask"], ratio=0.5),
             helper.make_node("Relu", ["d"], ["y"])]
    m = _model(nodes, {"w": w, "b": b}, [1, 4, 8, 8], "y", [1, 8, 8, 8])
    ld, lowered, _ = _compile(m)
    assert _ops(lowered) == ["dla.conv"]  # the Dropout is gone and the Relu fused
    assert _cosine_vs_float(m, ld) > 0.999


def test_dropout_mask_that_is_read_is_refused_naming_it() -> None:
    nodes = [helper.make_node("Dropout", ["x"], ["d", "mask"], ratio=0.5, name="drop7"),
             helper.make_node("Cast", ["mask"], ["m"], to=TensorProto.FLOAT),
             helper.make_node("Add", ["d", "m"], ["y"])]
    m = _model(nodes, {}, [1, 4, 8, 8], "y", [1, 4, 8, 8])
    with pytest.raises(CompileError, match=r"'drop7' \(Dropout\): the mask output 'mask' is read"):
        onnx_frontend.load(m)


# ---- Reshape before Gemm ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("flatten", ["Reshape", "Flatten"])
def test_reshape_before_gemm_runs_as_a_spatial_conv(flatten: str) -> None:
    """(1, 300, 3, 3) -> Reshape (1, -1) -> Gemm: one conv with 3x3 kernels over 300 channels, not a 1x1 conv
    over 2700 (the AlexNet case: 9216 channels overflow DATAIN_CHANNEL's 13 bits)."""
    rng = np.random.default_rng(1)
    w = (rng.standard_normal((16, 2700)) / np.sqrt(2700)).astype(np.float32)
    inits = {"w": w, "b": rng.normal(0, 0.1, 16).astype(np.float32)}
    if flatten == "Reshape":
        inits["s"] = np.array([1, -1], dtype=np.int64)
        first = helper.make_node("Reshape", ["x", "s"], ["f"])
    else:
        first = helper.make_node("Flatten", ["x"], ["f"], axis=1)
    nodes = [first, helper.make_node("Gemm", ["f", "w", "b"], ["y"], transB=1)]
    m = _model(nodes, inits, [1, 300, 3, 3], "y", [1, 16])
    ld, lowered, _ = _compile(m)
    convs = [n for n in lowered.nodes if n.op == "dla.conv"]
    assert [n.attrs["weight"].shape for n in convs] == [(16, 300, 3, 3)]
    assert _cosine_vs_float(m, ld) > 0.995


# ---- global average pooling on PDP -----------------------------------------------------------------------------
@pytest.mark.parametrize("size, want", [(7, [(7, 0)]), (8, [(8, 0)]), (14, [(7, 0), (2, 0)]),
                                        (13, [(7, 1), (2, 0)]), (56, [(8, 0), (7, 0)])])
def test_pool_passes(size: int, want: list) -> None:
    got = _pool_passes(size, pad_ok=True)
    assert got == want
    k1, pad = got[0]
    assert (size + pad) % k1 == 0 and all(k <= 8 for k, _ in got)


def test_pool_passes_without_padding() -> None:
    assert _pool_passes(13, pad_ok=False) is None  # max pooling must not see padding
    assert _pool_passes(65, pad_ok=True) is None  # beyond two 8x8 passes


@pytest.mark.parametrize("side", [7, 13, 14])
def test_global_average_pool_runs_on_pdp(side: int) -> None:
    """Every global average pool is PDP passes (13x13: a padded 7x7 pass, the reciprocal of the 2x2 pass
    undoing the padding's share), never a conv with a dense (C, C, H, W) kernel."""
    c = 40
    nodes = [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("GlobalAveragePool", ["r"], ["y"])]
    m = _model(nodes, {}, [1, c, side, side], "y", [1, c, 1, 1])
    ld, lowered, _ = _compile(m)
    assert "dla.conv" not in _ops(lowered)
    pdps = [n for n in lowered.nodes if n.op == "dla.pdp"]
    assert len(pdps) == (1 if side <= 8 else 2)
    if side == 13:
        assert pdps[-1].attrs["gain"] == pytest.approx(196 / 169)
    assert _cosine_vs_float(m, ld) > 0.999


# ---- channel shuffle and Transpose -----------------------------------------------------------------------------
def _shuffle_nodes(src: str, dst: str, groups: int, c: int, side: int) -> tuple[list, dict]:
    inits = {f"{dst}_s1": np.array([1, groups, c // groups, side, side], dtype=np.int64),
             f"{dst}_s2": np.array([1, c, side, side], dtype=np.int64)}
    nodes = [helper.make_node("Reshape", [src, f"{dst}_s1"], [f"{dst}_r"]),
             helper.make_node("Transpose", [f"{dst}_r"], [f"{dst}_t"], perm=[0, 2, 1, 3, 4]),
             helper.make_node("Reshape", [f"{dst}_t", f"{dst}_s2"], [dst])]
    return nodes, inits


def test_channel_shuffle_folds_into_the_producing_conv() -> None:
    """grouped 1x1 conv -> BN -> Relu -> shuffle -> depthwise 3x3: no Transpose and no CPU op is left, the
    depthwise conv stays channel-diagonal (one channel atom at a time), and the result matches float."""
    rng = np.random.default_rng(2)
    c, side, groups = 24, 8, 3
    cin = 15
    w1 = (rng.standard_normal((c, cin // groups, 1, 1)) * np.sqrt(2.0 / (cin // groups))).astype(np.float32)
    bn = {"g": rng.uniform(0.5, 1.5, c), "bb": rng.normal(0, 0.1, c), "m": rng.normal(0, 0.2, c),
          "v": rng.uniform(0.5, 1.5, c)}
    wd = (rng.standard_normal((c, 1, 3, 3)) / 3).astype(np.float32)
    shuffle, sinits = _shuffle_nodes("r", "s", groups, c, side)
    nodes = [helper.make_node("Conv", ["x", "w1"], ["c1"], group=groups),
             helper.make_node("BatchNormalization", ["c1", "g", "bb", "m", "v"], ["n1"]),
             helper.make_node("Relu", ["n1"], ["r"]), *shuffle,
             helper.make_node("Conv", ["s", "wd"], ["y"], group=c, pads=[1] * 4)]
    inits = {"w1": w1, "wd": wd, **{k: v.astype(np.float32) for k, v in bn.items()}, **sinits}
    m = _model(nodes, inits, [1, cin, side, side], "y", [1, c, side, side])
    ld, lowered, _ = _compile(m)
    assert _ops(lowered) == ["dla.conv", "dla.conv"]
    dw = lowered.nodes[1]
    assert all(p.channels is not None for p in dw.attrs["pieces"])  # still run channel atom by channel atom
    assert _cosine_vs_float(m, ld) > 0.995


def test_channel_shuffle_of_an_input_is_a_permutation_conv() -> None:
    c, side = 12, 4
    shuffle, inits = _shuffle_nodes("x", "y", 3, c, side)
    m = _model(shuffle, inits, [1, c, side, side], "y", [1, c, side, side])
    ld, lowered, _ = _compile(m)
    assert _ops(lowered) == ["dla.conv"]
    w = lowered.nodes[0].attrs["weight"][:, :, 0, 0]
    assert np.array_equal(w.sum(axis=0), np.ones(c)) and np.array_equal(w.sum(axis=1), np.ones(c))
    assert _cosine_vs_float(m, ld) > 0.9999


def test_general_transpose_runs_on_the_cpu() -> None:
    nodes = [helper.make_node("Relu", ["x"], ["r"]),
             helper.make_node("Transpose", ["r"], ["y"], perm=[0, 1, 3, 2])]
    m = _model(nodes, {}, [1, 8, 4, 6], "y", [1, 8, 6, 4])
    ld, lowered, _ = _compile(m)
    assert "cpu.Transpose" in _ops(lowered)
    assert _cosine_vs_float(m, ld) > 0.999


def test_transpose_of_the_batch_axis_is_refused() -> None:
    m = _model([helper.make_node("Transpose", ["x"], ["y"], perm=[1, 0, 2, 3])], {}, [1, 8, 4, 4], "y",
               [8, 1, 4, 4])
    with pytest.raises(CompileError, match="moves the batch axis"):
        onnx_frontend.load(m)


# ---- input-channel (K-reduction) splitting ------------------------------------------------------------------
def _fc_model(c: int, side: int, k: int, seed: int = 123, relu_in: bool = True) -> onnx.ModelProto:
    rng = np.random.default_rng(seed)
    w = (rng.standard_normal((k, c * side * side)) / np.sqrt(c * side * side)).astype(np.float32)
    inits = {"w": w, "b": rng.normal(0, 0.1, k).astype(np.float32), "s": np.array([1, -1], dtype=np.int64)}
    nodes = [helper.make_node("Relu" if relu_in else "Identity", ["x"], ["r"]),
             helper.make_node("Reshape", ["r", "s"], ["f"]),
             helper.make_node("Gemm", ["f", "w", "b"], ["z"], transB=1), helper.make_node("Relu", ["z"], ["y"])]
    return _model(nodes, inits, [1, c, side, side], "y", [1, k])


def test_fc_too_large_for_the_cbuf_is_split_over_input_channels() -> None:
    """VGG's FC6 shape scaled down: a 7x7 conv over 512 channels, whose 8-kernel group needs 200 KB of nv_small's
    128 KB CBUF, runs as two 256-channel convs, the second adding the first's int8 partial sum."""
    m = _fc_model(512, 7, 64)
    logs: list[str] = []
    g = onnx_frontend.load(m)
    ld, lowered, _ = compile_graph(g, "nv_small", calib_inputs=random_inputs(g, 8, seed=3), log=logs.append)
    assert any("512 input channels in 2 slices of 256" in line for line in logs)
    convs = [n for n in lowered.nodes if n.op == "dla.conv"]
    assert [n.attrs["weight"].shape for n in convs] == [(64, 256, 7, 7)] * 2
    assert [type(p).__name__ for p in convs[1].attrs["post"]] == ["Affine", "Eltwise"]
    assert _cosine_vs_float(m, ld) > 0.999


def test_more_channels_than_datain_channel_counts_are_split() -> None:
    """9216 channels fit nv_full's CBUF as one line but not DATAIN_CHANNEL's 13 bits."""
    m = _fc_model(9216, 1, 32, relu_in=False)  # (the input in int8 unrectified: the FC split alone)
    ld, lowered, _ = _compile(m, "nv_full")
    widths = [n.attrs["weight"].shape[1] for n in lowered.nodes if n.op == "dla.conv"]
    assert len(widths) == 2 and sum(widths) == 9216 and max(widths) <= 8192
    assert _cosine_vs_float(m, ld) > 0.999


def test_sdp_and_pdp_over_more_channels_than_their_fields_count_run_per_channel_group() -> None:
    """8200 channels: BN + ReLU + a residual Add (SDP with per-channel and per-element operands), then a max
    pool and an average with edge divisors (PDP regions): every engine op runs on two channel groups (8192 + 8),
    and the last group (operands at an offset) matches float as well as the first."""
    c = 8200
    rng = np.random.default_rng(2)
    inits = {"g": rng.uniform(.5, 1.5, c), "b": rng.normal(0, .1, c), "m": rng.normal(0, .1, c),
             "v": rng.uniform(.5, 1.5, c)}
    nodes = [helper.make_node("BatchNormalization", ["x", "g", "b", "m", "v"], ["bn"]),
             helper.make_node("Relu", ["bn"], ["r"]), helper.make_node("Add", ["r", "x"], ["s"]),
             helper.make_node("MaxPool", ["s"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
             helper.make_node("AveragePool", ["p"], ["y"], kernel_shape=[3, 3], pads=[1, 1, 1, 1])]
    m = _model(nodes, {k: v.astype(np.float32) for k, v in inits.items()}, [1, c, 4, 6], "y", [1, c, 2, 3])
    ld, lowered, _ = _compile(m)
    assert _ops(lowered) == ["dla.sdp", "dla.pdp", "dla.pdp"]
    ops = [op for task in ld.tasks for op in task.dla.ops]
    assert len(ops) == 2 + 2 + 2 * 2 * 3  # the 3x3 average excluding padding over 2x3: every output an edge, per group
    x = np.random.default_rng(9).standard_normal((1, c, 4, 6)).astype(np.float32)
    got = Network(ld).run({"x": x})["y"]
    ref = session(m).run(None, {"x": x})[0]
    for c0, c1 in ((0, 8192), (8192, c)):
        a, b = got[:, c0:c1].ravel(), ref[:, c0:c1].ravel()
        assert float(a @ b / np.linalg.norm(a) / np.linalg.norm(b)) > 0.999, (c0, c1)


def test_a_conv_no_channel_slice_fits_is_refused_before_calibration() -> None:
    rng = np.random.default_rng(0)
    w = (rng.standard_normal((8, 8, 64, 64)) / 512).astype(np.float32)
    m = _model([helper.make_node("Conv", ["x", "w"], ["y"], name="huge")], {"w": w}, [1, 8, 64, 64], "y",
               [1, 8, 1, 1])
    g = onnx_frontend.load(m)
    logs: list[str] = []
    with pytest.raises(CompileError, match=r"'huge' \(Conv\): even one 8-channel slice of its 8 64x64 kernels does "
                                           r"not fit the 32-bank CBUF of nv_small"):
        compile_graph(g, "nv_small", calib_inputs=random_inputs(g, 2), log=logs.append)
    assert not any("calibrating" in line for line in logs)


# ---- DenseNet concats ---------------------------------------------------------------------------------------
def _dense_block(layers: int) -> onnx.ModelProto:
    from regressions.lib.zoo.imagenet import ExportBuilder

    nb = ExportBuilder("block", 0, 16, 0.25)
    x = nb.relu(nb.bn(nb.conv("data", 16, 3, 1, 1, bias=False)))
    feats = [x]
    for _ in range(layers):
        inp = feats[0] if len(feats) == 1 else nb.concat(feats)
        y = nb.conv(nb.relu(nb.bn(inp)), 16, 1, bias=False)
        feats.append(nb.conv(nb.relu(nb.bn(y)), 8, 3, 1, 1, bias=False))
    return nb.model(nb.relu(nb.bn(nb.concat(feats))))


def test_densenet_concats_share_one_buffer() -> None:
    """Every layer of a dense block reads the Concat of all earlier maps (one map feeds several concats): the
    whole family is views of the block's last concat, each map written once at its channel offset."""
    m = _dense_block(3)
    g = onnx_frontend.load(m)
    ld, lowered, ctx = compile_graph(g, "nv_small", calib_inputs=random_inputs(g, 4, seed=3))
    ops = _ops(lowered)
    assert "cpu.Concat" not in ops and ops.count("view.concat") == 3
    last = [n for n in lowered.nodes if n.op == "view.concat"][-1]
    assert "within" not in last.attrs
    plan = ctx.plan
    root = plan.placements[last.outputs[0]]
    channel = 0
    for t in last.inputs:  # each map sits at its channel offset of the block buffer
        assert plan.placements[t].offset == root.offset + channel // 8 * root.surface_stride
        channel += g.shapes[t][1]
    for n in lowered.nodes:
        if n.op == "view.concat" and n is not last:
            assert plan.placements[n.outputs[0]].offset == root.offset  # a prefix of the block buffer
    net = Network(ld)
    x = np.random.default_rng(5).standard_normal((2, 3, 16, 16)).astype(np.float32)
    got = net.run({"data": x})[net.outputs[0]]
    ref = np.concatenate([session(m).run(None, {"data": x[i:i + 1]})[0] for i in range(2)])
    assert float((got * ref).sum() / np.linalg.norm(got) / np.linalg.norm(ref)) > 0.99
