"""NVDLA's own loadables (``.nvdla``) on our RTL (``dla run FILE.nvdla --target verilator|icarus``), on both
simulators; the kmd firmware model runs inside the cocotb test against ``tb.target.RtlTarget``:

- every nv_small ``pdp_*`` trace and every SDP trace that only needs X1/X2 (what ``rtl/`` has), each
  converted to an NVDLA loadable (``regressions.nvdla.from_trace``), plus hand-built SDP X1/X2 loadables,
  all in ONE simulation (one cocotb test per loadable, each from reset with a fresh memory): the outputs'
  CRCs equal the traces' and the bytes equal the golden run's;
- concurrency: three independent PDP ops in one task run with both ping-pong groups busy
  (``max_in_flight["PDP"] == 2``): group 1 is programmed and enabled while group 0 is still running on the
  DUT (before its done interrupt), and every output equals running that op alone; the DIMGs written by
  the CLI equal golden's;
- CONV and CDP loadables are refused before simulating, in one line naming op index, type and engine
  (exit 2), also with ``--fallback golden`` (which NVDLA loadables do not have).
"""
from __future__ import annotations

import functools
import zlib
from pathlib import Path

import numpy as np
import pytest

from app.cli import main
from conftest import nvdla_traces_root
from golden.config import get_config
from golden.dla import CFGROM_PDP_NO_SDP_FLYING
from regressions.lib.nvdla_loadables import add_output, feature_cube, independent_pools, pack_feature
from regressions.nvdla.from_trace import INVERSES, NotExpressible, convert
from regressions.rtl.test_rtl_networks import RTL_UNITS, available
from runtime.golden_target import GoldenTarget
from runtime.nvdla import descriptors as d
from runtime.nvdla import fbs
from runtime.nvdla.engines import FirmwareError
from runtime.nvdla.run import NvdlaNetwork, NvdlaRunError
from runtime.nvdla.writer import LoadableBuilder
from runtime.trace import find_traces
from tb.duts import BUILTIN_DUT, dut_from_env
from tb.engines import DutCapabilities
from tb.network import MissingEngineError
from tb.nvdla_network import check_engines, op_needs, run_nvdla_networks

pytestmark = pytest.mark.rtl
HW = get_config("nv_small")
#: rtl/'s CFGROM (tests/../test_rtl_networks.py checks it against the probe).
RTL_CAPS = DutCapabilities(RTL_UNITS, frozenset({"SDP_BS", "SDP_BN"}),
                           {"CFGROM_PDP_CAP_INCOMPAT": CFGROM_PDP_NO_SDP_FLYING})


#: The DUT (``$DLA_DUT``): our rtl/ by default. Tests about what rtl/ lacks only run on rtl/.
DUT = dut_from_env()


@pytest.fixture(params=["verilator", "icarus"])
def simulator(request) -> str:
    if not available(request.param):
        pytest.skip(f"{request.param} is not installed")
    return request.param


@pytest.fixture(scope="module")
def traces(pytestconfig) -> Path:
    root = nvdla_traces_root(pytestconfig) / "nv_small"
    if not root.is_dir():
        pytest.skip(f"no NVDLA traces under {root}")
    return root


@functools.lru_cache(maxsize=None)
def trace_loadables(root: Path) -> tuple[tuple[str, bytes, tuple[int, ...]], ...]:
    """(trace name, loadable, CRCs) of every nv_small PDP/SDP trace that converts and that rtl/ can run."""
    if not root.is_dir():
        return ()
    out = []
    for cfg in find_traces(root):
        if not cfg.parent.name.startswith(("pdp_", "sdp_")):
            continue
        try:
            converted = convert(cfg, HW)
        except (NotExpressible, FirmwareError):  # no descriptor equivalent; the firmware refuses it on nv_small
            continue
        net = NvdlaNetwork(fbs.parse(converted.loadable), path=cfg.parent.name)
        if any(RTL_CAPS.missing(o.needs) for o in op_needs(net)):
            continue  # SDP Y/LUT, SDP->PDP on the fly: not in rtl/ (test_flying_sdp_pdp_is_refused)
        out.append((cfg.parent.name, converted.loadable, tuple(converted.crcs)))
    return tuple(out)


# ---- hand-built SDP X1/X2 loadables (independent of the trace inverses) ---------------------------------
def _sdp_x(enable=1, type_=0, mode=0, alu=0, mul=0, shift=0, truncate=0, act=0, alu_type=2, precision=0) -> d.SdpOp:
    return d.SdpOp(enable=enable, alu_type=alu_type, type=type_, mode=mode, act=act, shift_value=shift,
                   truncate=truncate, precision=precision, alu_operand=alu, mul_operand=mul)


def _sdp_loadable(seed: int) -> bytes:
    """Two independent SDP ops (both ping-pong groups): X1 add+mul per layer with ReLU, then X2 multiply per
    kernel from memory; X1 add per kernel from memory, then X2 multiply per layer."""
    rng = np.random.default_rng(seed)
    c, h, w = 16, 6, 5
    cube = feature_cube(0, c, h, w)
    per_kernel = rng.integers(-40, 40, size=c, dtype=np.int8).tobytes()
    stages = (
        (_sdp_x(type_=3, alu=-9, mul=3, truncate=1, act=1), _sdp_x(type_=1, mode=1, truncate=2), None, per_kernel),
        (_sdp_x(type_=2, mode=1, shift=1), _sdp_x(type_=1, mul=-5, truncate=3), per_kernel, None),
    )
    b = LoadableBuilder()
    for i, (x1, x2, x1_bytes, x2_bytes) in enumerate(stages):
        x = rng.integers(-128, 128, size=(c, h, w), dtype=np.int8)
        src = b.buffer(f"src{i}", cube.size, pack_feature(x))
        dst = b.buffer(f"dst{i}", cube.size)
        surface = d.SdpSurfaceDesc(src_data=feature_cube(src, c, h, w), dst_data=feature_cube(dst, c, h, w))
        for name, data in (("x1_data", x1_bytes), ("x2_data", x2_bytes)):
            if data is not None:  # one operand per channel (strides ignored)
                at = b.buffer(f"{name}{i}", len(data), data)
                setattr(surface, name, d.DataCube(address=at, width=1, height=1, channel=c, line_stride=c,
                                                  surf_stride=c, size=c))
        out_cvt = d.CvtParam(scale=1, truncate=0, enable=1)
        b.op(d.OP_SDP, d.SdpOpDesc(batch_num=1, lut_index=-1, out_cvt=out_cvt, x1_op=x1, x2_op=x2), surface)
        add_output(b, dst, f"sdp{i}", c, h, w)
    return b.build()


def _golden(blob: bytes):
    return NvdlaNetwork(fbs.parse(blob)).run(GoldenTarget(HW))


# ---- no simulator needed ---------------------------------------------------------------------------------
def test_conversions_cover_pdp_and_sdp_x(traces):
    names = [n for n, _, _ in trace_loadables(traces)]
    assert len([n for n in names if n.startswith("pdp_")]) == 15
    if "SDP" in INVERSES:  # every SDP trace rtl/ passes (test_rtl_traces) but BN with PReLU and ReLU at once
        assert len([n for n in names if n.startswith("sdp_")]) >= 18
    result = _golden(_sdp_loadable(1))
    assert result.tasks[0].stats.max_in_flight["SDP"] == 2
    for out in result.outputs:  # the hand-built ops compute something (not all zero or saturated)
        y = np.frombuffer(out.data, dtype=np.int8)
        assert len(set(y.tolist())) > 20


def test_engine_check_names_op_type_and_missing_sdp_stage():
    b = LoadableBuilder()
    src, dst = b.buffer("src", 512, bytes(512)), b.buffer("dst", 512)
    b.op(d.OP_PDP, d.PdpOpDesc(split_num=1, pool_width=1, pool_height=1, stride_x=2, stride_y=2),
         d.PdpSurfaceDesc(src_data=feature_cube(src, 8, 8, 8), dst_data=feature_cube(dst, 8, 4, 4)))
    y = _sdp_x(type_=1, act=2)  # Y multiplies and feeds the LUT
    b.op(d.OP_SDP, d.SdpOpDesc(batch_num=1, lut_index=-1, y_op=y), d.SdpSurfaceDesc(src_data=feature_cube(src, 8, 8, 8),
                                                                      dst_data=feature_cube(dst, 8, 8, 8)))
    net = NvdlaNetwork(fbs.parse(b.build()), path="ew.nvdla")
    needs = op_needs(net)
    assert [o.needs for o in needs] == [["PDP", "PDP_RDMA"], ["SDP", "SDP_RDMA", "SDP_EW", "SDP_LUT"]]
    with pytest.raises(MissingEngineError) as err:
        check_engines(net, RTL_CAPS, "rtl/")
    assert str(err.value) == ("ew.nvdla: task 0 op 1 (SDP): SDP Y (EW), SDP LUT not in DUT "
                              "(rtl/ has PDP, SDP (X1, X2))")
    full = DutCapabilities(RTL_CAPS.units, frozenset({"SDP_BS", "SDP_BN", "SDP_EW", "SDP_LUT"}))
    assert check_engines(net, full, "x") == needs
    # descriptors the firmware's programmer refuses for the config are the loadable's fault, before simulating
    with pytest.raises(NvdlaRunError, match=r"^ew.nvdla: task 0: op 1 \(SDP\): y_op enabled but nv_small has no "
                                            "SDP Y stage$"):
        check_engines(net, full, "x", hw=HW)


def test_flying_sdp_pdp_is_refused(traces):
    cfgs = sorted(traces.glob("sdp_pdp_32x16x32_pass_through_int8_0/*.cfg"))
    if not cfgs:
        pytest.skip("no sdp_pdp trace")
    try:
        blob = convert(cfgs[0], HW).loadable
    except NotExpressible as exc:
        pytest.skip(f"no descriptor equivalent yet: {exc}")
    net = NvdlaNetwork(fbs.parse(blob), path="sdp_pdp.nvdla")
    with pytest.raises(MissingEngineError, match=r"^sdp_pdp.nvdla: task 0 op \d \((SDP|PDP)\): SDP->PDP on-the-fly "
                                                 r"not in DUT \(rtl/ has PDP, SDP \(X1, X2\)\); 1 more op needs"):
        check_engines(net, RTL_CAPS, "rtl/")


# ---- on the simulators -----------------------------------------------------------------------------------
def test_traces_as_nvdla_loadables_on_rtl(simulator, traces, tmp_path):
    """All convertible PDP and SDP X1/X2 traces plus the hand-built SDP loadable, in one simulation."""
    cases = list(trace_loadables(traces))
    sdp = _sdp_loadable(1)
    nets = [NvdlaNetwork(fbs.parse(blob), path=name) for name, blob, _ in cases]
    nets.append(NvdlaNetwork(fbs.parse(sdp), path="sdp_x1_x2_handmade"))
    results = run_nvdla_networks(nets, HW, simulator=simulator, options={"runs_root": str(tmp_path), "dut_name": DUT})
    assert not list(tmp_path.iterdir())  # the run directory is gone after a good run
    for (name, blob, crcs), result in zip(cases, results):
        assert [zlib.crc32(o.data) for o in result.outputs] == list(crcs), name
        assert [o.data for o in result.outputs] == [o.data for o in _golden(blob).outputs], name
        assert result.cycles > 0 and result.dut_written > 0
    want = _golden(sdp)
    assert [o.data for o in results[-1].outputs] == [o.data for o in want.outputs]
    assert results[-1].tasks[0].stats.max_in_flight["SDP"] == 2
    at = {e: c for c, e in reversed(results[-1].timeline)}  # group 1 enabled while group 0 still runs
    assert at["enable op 1 (SDP) group 1"] < at["dla_intr rises"] < at["done op 0 (SDP) group 0"]
    assert {e for r in results for t in r.tasks for e in t.stats.ops} == {"PDP", "SDP"}


def test_two_pdp_ops_in_flight_on_rtl(simulator, tmp_path, capsys):
    """Group 1 is programmed and enabled while group 0 still runs; outputs equal each op run alone, and
    the CLI writes the same DIMGs as on golden."""
    rng = np.random.default_rng(3)
    images = [rng.integers(-128, 128, size=(8, 8, 8), dtype=np.int8) for _ in range(3)]
    blob = independent_pools(images)
    nets = [NvdlaNetwork(fbs.parse(blob), path="pools")]
    nets += [NvdlaNetwork(fbs.parse(independent_pools([x])), path=f"pool{i}") for i, x in enumerate(images)]
    together, *alone = run_nvdla_networks(nets, HW, simulator=simulator,
                                          options={"runs_root": str(tmp_path), "dut_name": DUT})
    stats = together.tasks[0].stats
    assert stats.ops == {"PDP": 3} and stats.max_in_flight["PDP"] == 2
    for i, one in enumerate(alone):
        assert together.outputs[i].data == one.outputs[0].data
    assert [o.data for o in together.outputs] == [o.data for o in _golden(blob).outputs]
    events = [e for _, e in together.timeline]
    at = {e: c for c, e in reversed(together.timeline)}  # first cycle of each event
    first_intr = at["dla_intr rises"]
    assert at["enable op 0 (PDP) group 0"] < at["enable op 1 (PDP) group 1"] < first_intr, together.timeline
    assert events.index("done op 0 (PDP) group 0") < events.index("done op 1 (PDP) group 1")
    assert events.count("dla_intr rises") == 3
    # the CLI: the same DIMG bytes as golden
    path = tmp_path / "pools.nvdla"
    path.write_bytes(blob)
    assert main(["run", str(path), "--config", "nv_small", "--dimg", str(tmp_path / "gold"),
                 "--dimg-format", "native"]) == 0
    assert main(["run", str(path), "--config", "nv_small", "--target", simulator, "--dut", DUT, "--profile",
                 "--dimg", str(tmp_path / "rtl"), "--dimg-format", "native"]) == 0
    out = capsys.readouterr().out
    assert "PDP 3 (max 2 in flight)" in out and "simulated cycles" in out and "DUT AXI traffic" in out
    for i in range(3):
        name = f"o_{i:06d}.dimg"
        assert (tmp_path / "rtl" / name).read_bytes() == (tmp_path / "gold" / name).read_bytes()


def _conv_loadable() -> bytes:
    """A convolution fused into SDP (enough for the engine check, which only decodes descriptors)."""
    b = LoadableBuilder()
    src, wt, dst = b.buffer("src", 512, bytes(512)), b.buffer("w", 512, bytes(512)), b.buffer("dst", 512)
    surface = d.ConvSurfaceDesc(src_data=feature_cube(src, 8, 8, 8), weight_data=feature_cube(wt, 8, 8, 8),
                                dst_data=d.DataCube(type=d.MEM_HW))
    conv = b.op(d.OP_CONV, d.ConvOpDesc(), surface)
    b.op(d.OP_SDP, d.SdpOpDesc(batch_num=1, lut_index=-1), d.SdpSurfaceDesc(src_data=d.DataCube(type=d.MEM_HW),
                                                               dst_data=feature_cube(dst, 8, 8, 8)), fused_to=conv)
    add_output(b, dst, "out", 8, 8, 8)
    return b.build()


def _cdp_loadable(root: Path) -> bytes | None:
    cfgs = sorted(root.glob("cdp_8x8x32_lrn3_int8_0/*.cfg")) if root.is_dir() else []
    return convert(cfgs[0], HW).loadable if cfgs else None


@pytest.mark.skipif(DUT != BUILTIN_DUT, reason=f"about rtl/'s missing engines (DLA_DUT={DUT})")
@pytest.mark.parametrize("kind", ["conv", "cdp"])
def test_conv_and_cdp_loadables_are_refused_before_simulating(simulator, kind, tmp_path, capsys, pytestconfig):
    blob = _conv_loadable() if kind == "conv" else _cdp_loadable(nvdla_traces_root(pytestconfig) / "nv_small")
    if blob is None:
        pytest.skip("no NVDLA cdp trace")
    path = tmp_path / f"{kind}.nvdla"
    path.write_bytes(blob)
    runs = tmp_path / "runs"
    engine = {"conv": "op 0 (CONV): CONV (CDMA/CSC/CMAC_A/CMAC_B/CACC)", "cdp": "op 0 (CDP): CDP (CDP/CDP_RDMA)"}[kind]
    for extra in ([], ["--fallback", "golden"]):
        assert main(["run", str(path), "--config", "nv_small", "--target", simulator, *extra]) == 2
        err = [line for line in capsys.readouterr().err.strip().splitlines() if not line.startswith("dla: building ")]
        assert len(err) == 1, err
        assert err[0].startswith(f"dla: {kind}.nvdla: task 0 {engine} not in DUT (rtl/ has PDP, SDP (X1, X2))"), err
        assert ("--fallback golden does not apply to NVDLA loadables" in err[0]) == bool(extra)
    with pytest.raises(MissingEngineError):
        run_nvdla_networks([NvdlaNetwork(fbs.parse(blob))], HW, simulator=simulator,
                           options={"runs_root": str(runs)})
    assert not runs.exists() or not list(runs.glob("nvdla-*"))  # no simulation was started


def test_dut_failure_is_one_line_exit_1_and_keeps_the_run(simulator, tmp_path, monkeypatch, capsys):
    """An interrupt budget too small for PDP: the firmware reports the stalled op; exit 1, the run kept."""
    import app.cli

    options = app.cli._sim_options  # the run directory under tmp_path, not build/sim/runs
    monkeypatch.setattr(app.cli, "_sim_options", lambda args: {**options(args),
                                                                  "runs_root": str(tmp_path / "runs")})
    path = tmp_path / "pools.nvdla"
    rng = np.random.default_rng(3)
    path.write_bytes(independent_pools([rng.integers(-128, 128, size=(8, 8, 8), dtype=np.int8) for _ in range(3)]))
    assert main(["run", str(path), "--config", "nv_small", "--target", simulator, "--timeout-cycles", "20",
                 "--dimg", str(tmp_path / "d")]) == 1
    err = [line for line in capsys.readouterr().err.strip().splitlines() if not line.startswith("dla: building ")]
    assert len(err) == 1 and err[0].startswith(f"dla: {simulator}: pools.nvdla: task 0: task stalled after 0 of 3 "
                                               "ops: op 0 (PDP) group 0 running"), err
    (kept,) = (tmp_path / "runs").glob("nvdla-*")
    assert (kept / "sim.log").is_file() and str(kept / "sim.log") in err[0]
    assert not (tmp_path / "d").exists()


@pytest.mark.parametrize("before_dla", [True, False])
def test_emu_tasks_run_between_simulated_dla_tasks(simulator, before_dla, tmp_path):
    """EMU1 (CPU) tasks run in the cocotb test between the DUT's DLA tasks, through the DUT's memory, in
    submit order: the result equals the plain computation and golden's run."""
    from regressions.lib.nvdla_loadables import emu_and_pool_expected, emu_and_pool_loadable

    x = np.random.default_rng(7).integers(-40, 40, (8, 4, 4)).astype(np.int8)
    blob = emu_and_pool_loadable(x, before_dla)
    (result,) = run_nvdla_networks([NvdlaNetwork(fbs.parse(blob), path="emu")], HW, simulator=simulator,
                                   options={"runs_root": str(tmp_path)})
    got = np.frombuffer(result.outputs[0].data[:32], np.int8).reshape(2, 2, 8).transpose(2, 0, 1)
    assert np.array_equal(got, emu_and_pool_expected(x, before_dla))
    assert result.outputs[0].data == _golden(blob).outputs[0].data
    assert [sorted(t.stats.ops) for t in result.tasks] == (
        [["EMU_POWER"], ["PDP"]] if before_dla else [["PDP"], ["EMU_POWER"]])
