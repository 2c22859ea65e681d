"""Whole networks on NVDLA's own nv_small RTL (Verilator), byte for byte against the golden model.

- Every zoo network (``regressions.lib.zoo``: lenet, poolnet, resnet, mobilenet, inception) compiled for nv_small
  runs entirely on the DUT (no ``--fallback``: NVDLA's RTL has CONV, SDP X1/X2, PDP and CDP), once pipelined
  (an op starts while earlier ones still run, two per engine in flight) and once one op at a time (what
  ``--profile`` forces); its int8 outputs equal the golden target's in the same mode.
- TFLite models quantized by ai-edge-quantizer (their scales kept, requantized by X1 x X2 multiplier pairs):
  int8 outputs equal golden's.
- The zoo's networks exported by ``dla compile --format nvdla``: outputs equal golden's.
- NVDLA-format loadables written by ``runtime.nvdla.writer``: every nv_small trace the golden model passes and
  ``regressions.nvdla.from_trace`` re-expresses as kmd descriptors (CONV, SDP, PDP, CDP), plus hand-built SDP
  and PDP loadables with two ops in flight, all in one simulation; their outputs' CRCs equal the traces' and
  their bytes the golden run's.

``make test`` runs poolnet and LeNet in both modes, the TFLite residual net and a few loadables; ``DLA_NVDLA_RTL=full`` (level ci and up)
runs everything.
"""
from __future__ import annotations

import functools
import zlib
from pathlib import Path

import numpy as np
import pytest

from app.targets import register_simulators
from compiler.driver import compile_graph
from compiler.frontend import onnx as onnx_frontend
from conftest import nvdla_traces_root
from golden.config import get_config
from regressions.nvdla.from_trace import NotExpressible, convert
from regressions.rtl.nvdla_rtl import CONFIG, FULL, SIMULATOR, nvdla_rtl_options
from regressions.rtl.nvdla_rtl import no_rtl_coverage  # noqa: F401 (a fixture, used by pytestmark)
from regressions.lib.zoo.models import inception, lenet, mobilenet, poolnet, resnet
from runtime.executor import Network
from runtime.golden_target import GoldenTarget
from runtime.nvdla import fbs
from runtime.nvdla.engines import FirmwareError
from runtime.nvdla.run import NvdlaNetwork
from runtime.profile import Profile
from runtime.suite import PASS, run_batch, run_trace
from runtime.trace import find_traces
from tb.nvdla_network import run_nvdla_networks

register_simulators()  # run_batch and Network.run find the simulators by name

pytestmark = [pytest.mark.rtl, pytest.mark.usefixtures("no_rtl_coverage")]
HW = get_config(CONFIG)
ZOO = {"poolnet": poolnet, "lenet": lenet, "resnet": resnet, "mobilenet": mobilenet, "inception": inception}
#: ``make test``'s networks: the SDP/PDP-only one and the smallest with convolutions.
SMOKE_NETS = ("poolnet", "lenet")
MODES = ("pipelined", "one_op_at_a_time")
#: ``make test``'s loadables (one per engine).
SMOKE_LOADABLES = ("dc_8x8x36_4x4x36x16_dilation_int8_0", "sdp_3x3x33_bs_bn_int8_0", "pdp_8x9x19_3x3_ave_int8_0",
                   "cdp_8x8x32_lrn3_int8_0")


@functools.lru_cache(maxsize=None)
def compiled(name: str) -> Network:
    msg, _, _ = compile_graph(onnx_frontend.load(ZOO[name](0)), CONFIG)
    return Network(msg)


def inputs(net: Network, n: int = 1, seed: int = 5) -> np.ndarray:
    shape = net.input_shapes()[net.inputs[0]]
    return np.random.default_rng(seed).standard_normal((n, *shape[1:])).astype(np.float32)


def first_difference(net: Network, got: dict[str, np.ndarray], want: dict[str, np.ndarray]) -> str:
    """Which outputs differ, and where the first differing value is."""
    out = []
    for name in net.outputs:
        g, w = got[name], want[name]
        if g.shape != w.shape:
            out.append(f"{name}: shape {g.shape} vs golden {w.shape}")
        elif g.tobytes() != w.tobytes():
            at = tuple(int(i) for i in np.argwhere(g != w)[0])
            out.append(f"{name}: {int((g != w).sum())} of {g.size} values differ; first at {at}: RTL {g[at]}, "
                       f"golden {w[at]}")
    return "; ".join(out)


def where_tasks_differ(net: Network, x: np.ndarray, directory: Path, options: dict) -> str:
    """The network's tasks as traces checking golden's CRC of every tensor they write (``emit_trace``), played
    on the DUT: which task and tensor first differ (a diagnosis for the failure message)."""
    try:
        cfgs = net.emit_trace(x, directory / "tasks")
    except Exception as exc:  # noqa: BLE001 - golden itself refuses the network: that is the diagnosis
        return f"golden cannot run it: {exc}"
    jobs = [(str(c), CONFIG, SIMULATOR) for c in cfgs]
    outcomes = run_batch(SIMULATOR, jobs, options=options)
    return "; ".join(o.line() for o in outcomes if o.status != PASS) or "every task trace passes"


def net_params() -> list:
    return [pytest.param(name, mode, id=f"{name}-{mode}") for name in ZOO if FULL or name in SMOKE_NETS
            for mode in MODES]


@pytest.mark.parametrize("name,mode", net_params())
def test_zoo_network_on_nvdla_rtl_equals_golden(name: str, mode: str, tmp_path: Path) -> None:
    options = nvdla_rtl_options(runs_root=str(tmp_path / "runs"))
    net = compiled(name)
    engines = {e for _, _, op in net.dla_ops() for e in net.op_engines(op)}
    if name != "poolnet":
        assert "CONV" in engines, engines  # really exercises NVDLA's convolution pipeline
    x = inputs(net)
    pipeline = mode == "pipelined"
    profile = None if pipeline else Profile()
    net.concurrency.clear()
    want = net.run(x, raw=True, pipeline=pipeline)
    golden_in_flight = max(net.concurrency.values(), default=1)  # filled by pipelined runs only
    net.concurrency.clear()
    got = net.run(x, target=SIMULATOR, raw=True, rtl_options=options, pipeline=pipeline, profile=profile)
    differ = first_difference(net, got, want)
    assert not differ, f"{name} ({mode}): {differ}; per task: {where_tasks_differ(net, x, tmp_path, options)}"
    # pipelined, the DUT had as many operations of a unit in flight (two: both ping-pong groups) as golden
    assert max(net.concurrency.values(), default=1) == golden_in_flight, net.concurrency
    if profile is not None:  # one op at a time: every DLA op ran on the DUT, none on a fallback
        ran = [op for op in profile.ops if op.kind == "dla"]
        assert len(ran) == sum(1 for _ in net.dla_ops()) and {op.target for op in ran} == {SIMULATOR}
        assert all(op.cycles for op in ran)


@pytest.mark.parametrize("name", [n for n in ZOO if FULL or n == "lenet"])
def test_performance_profile_on_nvdla_rtl_equals_golden(name: str, tmp_path: Path) -> None:
    """``--profile performance`` on nv_small: poolings fed by SDP on the fly (conv -> SDP -> PDP and
    SDP -> PDP in one operation), which the RTL must compute byte-equal to golden and to the default profile."""
    from compiler.profiles import optimised_ops

    msg, _, _ = compile_graph(onnx_frontend.load(ZOO[name](0)), CONFIG, profile="performance")
    assert optimised_ops(msg)["SDP->PDP on the fly"] >= 1
    net = Network(msg)
    x = inputs(net)
    want = compiled(name).run(x, raw=True)
    assert all(v.tobytes() == net.run(x, raw=True)[k].tobytes() for k, v in want.items())
    options = nvdla_rtl_options(runs_root=str(tmp_path / "runs"))
    got = net.run(x, target=SIMULATOR, raw=True, rtl_options=options)
    differ = first_difference(net, got, want)
    assert not differ, f"{name} (performance): {differ}; per task: {where_tasks_differ(net, x, tmp_path, options)}"


#: Pre-quantized TFLite models (ai-edge-quantizer's int8) on the DUT: their requantization multiplies by X1 and
#: X2 pairs and their means sum on CMAC (``compiler.passes.quantize.exact_requantization``); make test runs one.
TFLITE_NETS = ("lenet", "resnet", "mobilenet")


@pytest.mark.parametrize("name", [n for n in TFLITE_NETS if FULL or n == "resnet"])
def test_prequantized_tflite_network_on_nvdla_rtl_equals_golden(name: str, tmp_path: Path) -> None:
    from compiler.frontend import tflite as tflite_frontend
    from regressions.lib.zoo import tflite_models

    path = tmp_path / f"{name}_int8.tflite"
    path.write_bytes(tflite_models.quantize(tflite_models.MODELS[name](0)))
    msg, lowered, _ = compile_graph(tflite_frontend.load(path), CONFIG, log=lambda m: None)
    assert any(n.op == "dla.conv" and n.attrs["sdp"].x2 is not None and n.attrs["sdp"].x2.mul_bypass is False
               for n in lowered.nodes)
    net = Network(msg)
    x = inputs(net, 2)
    want = net.run(x, raw=True)
    got = net.run(x, target=SIMULATOR, raw=True, rtl_options=nvdla_rtl_options(runs_root=str(tmp_path / "runs")))
    differ = first_difference(net, got, want)
    assert not differ, f"{name} (TFLite int8): {differ}"


# ---- NVDLA-format loadables --------------------------------------------------------------------------------
@functools.lru_cache(maxsize=None)
def trace_loadables(root: Path) -> tuple[tuple[str, bytes, tuple[int, ...]], ...]:
    """(trace name, loadable, CRCs) of every nv_small trace golden passes that converts to descriptors."""
    out = []
    for cfg in find_traces(root):
        name = cfg.parent.name
        if not FULL and name not in SMOKE_LOADABLES:
            continue
        if run_trace(str(cfg), CONFIG).status != PASS:  # needs SDP EW/LUT, or NVDLA did not ship its data
            continue
        try:
            converted = convert(cfg, HW)
        except (NotExpressible, FirmwareError):  # no descriptor equivalent (test_round_trip counts these)
            continue
        out.append((name, converted.loadable, tuple(converted.crcs)))
    return tuple(out)


def _golden(blob: bytes) -> list[bytes]:
    return [o.data for o in NvdlaNetwork(fbs.parse(blob)).run(GoldenTarget(HW)).outputs]


def test_nvdla_loadables_on_nvdla_rtl(pytestconfig: pytest.Config, tmp_path: Path) -> None:
    from regressions.rtl.test_rtl_nvdla import _sdp_loadable
    from regressions.lib.nvdla_loadables import independent_pools

    root = nvdla_traces_root(pytestconfig) / CONFIG
    if not root.is_dir():
        pytest.skip(f"no NVDLA traces under {root}")
    options = nvdla_rtl_options(runs_root=str(tmp_path / "runs"))
    cases = list(trace_loadables(root))
    kinds = {n.split("_")[0] for n, _, _ in cases}
    assert kinds == {"dc", "sdp", "pdp", "cdp"}, kinds  # CONV and CDP too: NVDLA's RTL has them
    if FULL:  # test_round_trip's minimum counts, less the SDP traces that need EW/LUT (not on nv_small)
        per = {k: sum(n.startswith(k + "_") for n, _, _ in cases) for k in kinds}
        assert per["dc"] >= 12 and per["pdp"] == 15 and per["cdp"] >= 23 and per["sdp"] >= 16, per
    rng = np.random.default_rng(3)
    handmade = {"sdp_x1_x2_two_in_flight": _sdp_loadable(1),
                "pdp_three_pools": independent_pools([rng.integers(-128, 128, size=(8, 8, 8), dtype=np.int8)
                                                       for _ in range(3)])}
    blobs = [(n, b) for n, b, _ in cases] + list(handmade.items())
    nets = [NvdlaNetwork(fbs.parse(blob), path=name) for name, blob in blobs]
    results = run_nvdla_networks(nets, HW, simulator=SIMULATOR, options=options)
    bad = []
    for (name, blob), result in zip(blobs, results):
        got = [o.data for o in result.outputs]
        crcs = next((c for n, _, c in cases if n == name), None)
        if crcs is not None and [zlib.crc32(g) for g in got] != list(crcs):
            bad.append(f"{name}: output CRCs {[f'{zlib.crc32(g):#010x}' for g in got]} are not the trace's")
        elif got != _golden(blob):
            bad.append(f"{name}: output bytes differ from golden")
        elif not result.cycles > 0:
            bad.append(f"{name}: no simulated cycles")
    assert not bad, f"{len(bad)} of {len(blobs)} loadables differ:\n" + "\n".join(bad)
    assert results[-2].tasks[0].stats.max_in_flight["SDP"] == 2
    assert results[-1].tasks[0].stats.max_in_flight["PDP"] == 2


#: ``dla compile --format nvdla`` exports on the DUT: make test runs the residual net, level ci all five.
EXPORT_NETS = ("lenet", "poolnet", "resnet", "mobilenet", "inception")


def test_exported_networks_on_nvdla_rtl_equal_golden(tmp_path: Path) -> None:
    """The zoo's networks (logits) compiled with --format nvdla, a sample baked in, run by the firmware model
    in one simulation of NVDLA's RTL: every output's bytes equal the firmware model's on golden, and those
    equal what our own loadable writes for the sample (``tests/runtime/test_nvdla_export.py``)."""
    from regressions.lib.zoo.imagenet import without_softmax
    from runtime.nvdla.export import export

    blobs = []
    for name in (EXPORT_NETS if FULL else ("resnet",)):
        g = onnx_frontend.load(without_softmax(ZOO[name](0)))
        msg, _, _ = compile_graph(g, CONFIG, firmware_pdp=True)
        net = Network(msg)
        blobs.append((name, export(msg, sample={net.inputs[0]: inputs(net)})))
    nets = [NvdlaNetwork(fbs.parse(blob), path=name) for name, blob in blobs]
    results = run_nvdla_networks(nets, HW, simulator=SIMULATOR,
                                 options=nvdla_rtl_options(runs_root=str(tmp_path / "runs")))
    bad = [name for (name, blob), result in zip(blobs, results) if [o.data for o in result.outputs] != _golden(blob)]
    assert not bad, f"exported networks whose RTL output differs from golden: {bad}"
    assert all(r.cycles > 0 for r in results)


def test_exported_fused_pooling_and_emu_softmax_on_nvdla_rtl_equal_golden(tmp_path: Path) -> None:
    """LeNet exported whole under ``--profile performance``: its poolings fed by SDP on the fly (kmd fused
    descriptors) on the DUT, then its softmax as an EMU task on the logits the DUT wrote; every byte equal to
    the firmware model's run on golden."""
    from compiler.profiles import optimised_ops
    from runtime.nvdla.export import export

    g = onnx_frontend.load(ZOO["lenet"](0))
    msg, _, _ = compile_graph(g, CONFIG, firmware_pdp=True, profile="performance")
    assert optimised_ops(msg)["SDP->PDP on the fly"] == 2
    assert [t.cpu.op for t in msg.tasks if t.WhichOneof("kind") == "cpu"] == ["Softmax"]
    net = Network(msg)
    blob = export(msg, sample={net.inputs[0]: inputs(net)})
    (result,) = run_nvdla_networks([NvdlaNetwork(fbs.parse(blob), path="lenet_fused")], HW, simulator=SIMULATOR,
                                   options=nvdla_rtl_options(runs_root=str(tmp_path / "runs")))
    assert [o.data for o in result.outputs] == _golden(blob)
    assert sum(t.stats.ops.get("EMU_SOFTMAX", 0) for t in result.tasks) == 1 and result.cycles > 0


def _edge_pools() -> "onnx.ModelProto":
    """Averages whose edge windows divide by fewer taps than the kernel (count_include_pad=0 with padding, then
    ceil mode with padding: Caffe's rule), which the compiler runs as several PDP passes writing one output."""
    import onnx
    from onnx import TensorProto, helper

    nodes = [helper.make_node("AveragePool", ["x"], ["a"], kernel_shape=[3, 3], pads=[1, 1, 1, 1], count_include_pad=0),
             helper.make_node("AveragePool", ["a"], ["y"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1],
                              ceil_mode=1, count_include_pad=1)]
    graph = helper.make_graph(nodes, "edge_pools",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16, 10, 10])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 16, 6, 6])])
    return onnx.shape_inference.infer_shapes(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 10)]))


def test_edge_divisor_pools_on_nvdla_rtl_equal_golden(tmp_path: Path) -> None:
    """Each edge row/column of such an average is its own PDP pass reading and writing a sub-rectangle of the
    cubes (shifted base addresses, the full cubes' strides): NVDLA's PDP must produce golden's bytes."""
    msg, lowered, _ = compile_graph(onnx_frontend.load(_edge_pools()), CONFIG)
    assert [n.op for n in lowered.nodes] == ["dla.pdp", "dla.pdp"]
    net = Network(msg)
    assert sum(1 for _ in net.dla_ops()) == 9 + 4  # 3x3 regions (both edges), 2x2 (the overhanging last ones)
    x = inputs(net)
    want = net.run(x, raw=True)
    got = net.run(x, target=SIMULATOR, raw=True, rtl_options=nvdla_rtl_options(runs_root=str(tmp_path / "runs")))
    differ = first_difference(net, got, want)
    assert not differ, f"edge pools: {differ}; per task: {where_tasks_differ(net, x, tmp_path, nvdla_rtl_options())}"
