"""fp16 per-channel SDP operands are read as ALU/MUL pairs: NVDLA's nv_full RTL never finishes a conv whose
fp16 bias is one 2-byte component per channel over an odd number (>= 11) of channel atoms, which golden
refuses there (``HwConfig.sdp_brdma_fp16_half_beat_hang``). Measured cases: ``compiler.passes.fp16._whole_beats``.
"""
from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from compiler.driver import compile_graph
from compiler.frontend import onnx as onnx_frontend
from compiler.passes import fp16 as fp16_pass
from golden.config import get_config
from golden.regs import UNITS
from runtime.errors import ExecutionError
from runtime.executor import Network


def _conv(k: int, c: int = 16):
    rng = np.random.default_rng(k)
    inits = [numpy_helper.from_array((rng.standard_normal((k, c, 1, 1)) * 0.2).astype(np.float32), "w"),
             numpy_helper.from_array(rng.standard_normal(k).astype(np.float32), "b")]
    node = helper.make_node("Conv", ["x", "w", "b"], ["y"], kernel_shape=[1, 1])
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, c, 2, 2])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, k, 2, 2])], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])


def _brdma_use(msg) -> set[int]:
    reg = UNITS["SDP_RDMA"].register("D_BRDMA_CFG")
    return {reg.field("BRDMA_DATA_USE").decode(w.value) for t in msg.tasks if t.WhichOneof("kind") == "dla"
            for op in t.dla.ops for w in op.writes if w.name == reg.full_name}


@pytest.mark.parametrize("k", [48, 176, 272])
def test_fp16_bias_is_read_in_pairs_and_equals_the_float_conv(k: int) -> None:
    model = _conv(k)
    msg, _, _ = compile_graph(onnx_frontend.load(model), "nv_full", precision="fp16")
    assert _brdma_use(msg) == {2}  # BOTH
    x = np.random.default_rng(0).standard_normal((1, 16, 2, 2)).astype(np.float32)
    w = numpy_helper.to_array(model.graph.initializer[0])[:, :, 0, 0]
    b = numpy_helper.to_array(model.graph.initializer[1])
    want = np.einsum("kc,nchw->nkhw", w, x) + b[None, :, None, None]
    got = next(iter(Network(msg).run(x).values()))
    assert np.allclose(got, want, rtol=2e-3, atol=2e-3)


def test_golden_refuses_the_single_component_bias_the_rtl_never_finishes(monkeypatch) -> None:
    monkeypatch.setattr(fp16_pass, "_whole_beats", lambda st: st)
    x = np.zeros((1, 16, 2, 2), np.float32)
    for k, hangs in ((144, False), (176, True), (288, False)):  # 9 atoms, 11 (odd, >= 11), 18 (even)
        msg, _, _ = compile_graph(onnx_frontend.load(_conv(k)), "nv_full", precision="fp16")
        assert _brdma_use(msg) == {1}  # ALU only
        if hangs:
            with pytest.raises(ExecutionError, match=r"BRDMA_DATA_USE.*never finishes"):
                Network(msg).run(x)
        else:
            Network(msg).run(x)
    assert get_config("nv_small").sdp_brdma_fp16_half_beat_hang == 0


def _prelu(c: int):
    rng = np.random.default_rng(c)
    inits = [numpy_helper.from_array((rng.random((c, 1, 1)) * 0.5).astype(np.float32), "b"),
             numpy_helper.from_array(np.ones((1,), np.float32), "one")]
    nodes = [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Sub", ["r", "one"], ["s"]),
             helper.make_node("PRelu", ["s", "b"], ["y"])]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, c, 2, 2])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, c, 2, 2])], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])


def test_x2_prelu_slopes_are_paired_too_and_golden_refuses_them_alone(monkeypatch) -> None:
    """X2's per-channel PReLU slopes (NRDMA, MUL only) hang the same RTL at 11 atoms (measured from memory)."""
    x = np.random.default_rng(0).standard_normal((1, 176, 2, 2)).astype(np.float32)
    msg, _, _ = compile_graph(onnx_frontend.load(_prelu(176)), "nv_full", precision="fp16")
    Network(msg).run(x)
    monkeypatch.setattr(fp16_pass, "_whole_beats", lambda st: st)
    msg, _, _ = compile_graph(onnx_frontend.load(_prelu(176)), "nv_full", precision="fp16")
    with pytest.raises(ExecutionError, match=r"NRDMA_DATA_USE.*never finishes"):
        Network(msg).run(x)
    msg, _, _ = compile_graph(onnx_frontend.load(_prelu(144)), "nv_full", precision="fp16")
    Network(msg).run(x[:, :144])
