"""16-bit networks on NVDLA's nv_full RTL (Verilator), byte for byte against the golden model.

nv_full is the configuration with the int16 and fp16 datapaths (nv_small's RTL has neither), but its Verilator
build takes about 34 minutes and 8 GB on 2 cores (``../shared/nvdla/rtl/README.md``), so this unit runs only
when ``DLA_NV_FULL_RTL=1`` (level nightly and up); the build is cached under ``build/sim`` like every DUT's.
The zoo's LeNet compiled for nv_full in fp16 and in int16 runs on the DUT (our loadable through the cocotb
testbench, and the fp16 one also exported with ``--format nvdla`` through the firmware model) and its outputs
equal golden's; so does its convolution part alone. The fp16 network's FC once hung here: this RTL never
finishes an fp16 SDP whose per-channel operand is one 2-byte component over an odd number (>= 11) of channel
atoms (bisected 2026-12-07), so the compiler reads such operands as pairs and golden refuses the lone form on
nv_full (``HwConfig.sdp_brdma_fp16_half_beat_hang``). ``--profile`` optimisations only this RTL has (weight
compression, Winograd) run here too.
"""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from app.targets import register_simulators
from compiler.driver import compile_graph
from compiler.frontend import onnx as onnx_frontend
from conftest import DEFAULT_SHARED
from golden.config import get_config
from regressions.lib.zoo.imagenet import without_softmax
from regressions.lib.zoo.models import lenet
from runtime.executor import Network

register_simulators()
pytestmark = pytest.mark.rtl
ENABLED = os.environ.get("DLA_NV_FULL_RTL", "") not in ("", "0")


def filelist() -> Path:
    """nv_full's file list: ``$NVDLA_RTL/nv_full/nv_full.f`` (as for nv_small), else the shared copy."""
    root = os.environ.get("NVDLA_RTL", "").strip()
    f = (Path(root).expanduser() if root else DEFAULT_SHARED / "rtl") / "nv_full" / "nv_full.f"
    if not f.is_file():
        pytest.skip(f"no nv_full RTL at {f}")
    return f


def assert_rtl_equals_golden(msg, tmp_path: Path) -> None:
    """The loadable on one random input: every output's bytes on the DUT equal golden's."""
    net = Network(msg)
    x = np.random.default_rng(5).standard_normal((1, *net.input_shapes()[net.inputs[0]][1:])).astype(np.float32)
    want = net.run(x, raw=True)
    got = net.run(x, target="verilator", raw=True,
                  rtl_options={"filelist": str(filelist()), "runs_root": str(tmp_path / "runs")})
    for out in net.outputs:
        assert got[out].tobytes() == want[out].tobytes(), out


def convs_only(model):
    """LeNet up to its second pooling: the convolutions and poolings without the 500-kernel FC (the part that
    ran on this RTL before its fp16 FC's hang was explained)."""
    import onnx.shape_inference
    import onnx.utils

    cut = [n.output[0] for n in model.graph.node if n.op_type == "MaxPool"][-1]
    inferred = onnx.shape_inference.infer_shapes(model)
    return onnx.utils.Extractor(inferred).extract_model([model.graph.input[0].name], [cut])


@pytest.mark.parametrize("precision", ["fp16", "int16"])
@pytest.mark.parametrize("part", ["whole", "convs"])
def test_16_bit_network_on_nv_full_rtl_equals_golden(precision: str, part: str, tmp_path: Path) -> None:
    if not ENABLED:
        pytest.skip("nv_full's RTL build takes ~34 min and 8 GB: level nightly (DLA_NV_FULL_RTL=1)")
    options = {"filelist": str(filelist()), "runs_root": str(tmp_path / "runs")}
    model = lenet(0) if part == "whole" else convs_only(lenet(0))
    msg, _, _ = compile_graph(onnx_frontend.load(model), "nv_full", precision=precision)
    net = Network(msg)
    x = np.random.default_rng(5).standard_normal((2, 1, 28, 28)).astype(np.float32)
    want = net.run(x, raw=True)
    got = net.run(x, target="verilator", raw=True, rtl_options=options)
    for name in net.outputs:
        assert got[name].tobytes() == want[name].tobytes(), name


def test_fp16_nvdla_export_on_nv_full_rtl_equals_golden(tmp_path: Path) -> None:
    if not ENABLED:
        pytest.skip("nv_full's RTL build takes ~34 min and 8 GB: level nightly (DLA_NV_FULL_RTL=1)")
    from runtime.golden_target import GoldenTarget
    from runtime.nvdla import fbs
    from runtime.nvdla.export import export
    from runtime.nvdla.run import NvdlaNetwork
    from tb.nvdla_network import run_nvdla_networks

    hw = get_config("nv_full")
    msg, _, _ = compile_graph(onnx_frontend.load(without_softmax(lenet(0))), "nv_full", precision="fp16",
                              firmware_pdp=True)
    net = Network(msg)
    x = np.random.default_rng(5).standard_normal((1, 1, 28, 28)).astype(np.float32)
    blob = export(msg, sample={net.inputs[0]: x})
    want = [o.data for o in NvdlaNetwork(fbs.parse(blob)).run(GoldenTarget(hw)).outputs]
    (result,) = run_nvdla_networks([NvdlaNetwork(fbs.parse(blob), path="lenet_fp16")], hw, simulator="verilator",
                                   options={"filelist": str(filelist()), "runs_root": str(tmp_path / "runs")})
    assert [o.data for o in result.outputs] == want


@pytest.mark.parametrize("name,precision,profile", [
    ("mobilenet", "int8", "performance"),  # compressed weights (the depthwise chunks)
    ("mobilenet", "int16", "performance"),  # compressed weights and a Winograd convolution after a ReLU6
    ("inception", "int8", "fast-math"),  # int8 Winograd and compressed weights
])
def test_optimised_network_on_nv_full_rtl_equals_golden(name: str, precision: str, profile: str,
                                                        tmp_path: Path) -> None:
    """``--profile`` optimisations only NVDLA's nv_full RTL has (weight compression, Winograd): byte-equal."""
    if not ENABLED:
        pytest.skip("nv_full's RTL build takes ~34 min and 8 GB: level nightly (DLA_NV_FULL_RTL=1)")
    from compiler.profiles import optimised_ops
    from regressions.lib.zoo import models

    msg, _, _ = compile_graph(onnx_frontend.load(without_softmax(getattr(models, name)(0))), "nv_full",
                              precision=precision, profile=profile)
    used = optimised_ops(msg)
    assert used["compressed weights"] >= 1 and (used["Winograd"] >= 1 or precision == "int8" and profile != "fast-math")
    assert_rtl_equals_golden(msg, tmp_path)


@pytest.mark.parametrize("name,precision,overrides", [
    ("lenet", "fp16", {"conv2": "int16"}),  # both converters: CDMA's int16 -> fp16 CVT, SDP's fp16 -> INT16 output
    ("inception", "fp16", {}),  # LRN on CDP in fp16 (its LUT over fp32 square sums)
])
def test_mixed_and_fp16_lrn_networks_on_nv_full_rtl_equal_golden(name: str, precision: str, overrides: dict,
                                                                 tmp_path: Path) -> None:
    """Conversions between int16 and fp16 (``--precision-overrides``) and fp16 LRN: programs only nv_full's
    RTL runs, byte-equal to golden."""
    if not ENABLED:
        pytest.skip("nv_full's RTL build takes ~34 min and 8 GB: level nightly (DLA_NV_FULL_RTL=1)")
    from regressions.lib.zoo import models

    msg, lowered, _ = compile_graph(onnx_frontend.load(without_softmax(getattr(models, name)(0))), "nv_full",
                                    precision=precision, precision_overrides=overrides or None)
    assert sum("convert" in n.attrs for n in lowered.nodes) == (2 if overrides else 0)
    assert overrides or any(n.op == "dla.cdp" for n in lowered.nodes)
    assert_rtl_equals_golden(msg, tmp_path)
