"""The testbench against the fixture DUT, on both simulators: one build, one simulation, many traces.

Covers CSB reads and writes (posted and non-posted), AXI round trips through the AxiRam that *is* the
golden Memory (single beats with several IDs in flight, and bursts), the interrupt line and polled
status, N/A from the CFGROM, hangs (interrupt never raised, CSB read never answered) reported as FAIL
with the last CSB transaction and the sim time, an AXI protocol violation, and the run continuing
after each failure.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from regressions.lib.fixture_dut import copy_trace, fixture_dut, write_trace
from tb.results import BenchSettings, JobFile, TraceJob, read_result
from tb.runner import build, simulate
from tb.suite import RtlOptions, run_suite
from tests.tb.conftest import available

HANG_BUDGET = 3000  # cycles: every passing fixture trace needs < 1000


def build_traces(root) -> dict[str, str]:
    t = {}
    t["copy_single"] = copy_trace(root, "copy_single", 24, burst=1)
    t["hang_intr"] = write_trace(root, "hang_intr", [
        "reg_write(NVDLA_GLB.S_INTR_MASK_0, 0x3f03fc);",
        "reg_write(NVDLA_CACC.D_OP_ENABLE_0, 0x1);",  # advertised by the CFGROM, never finishes
        "intr_notify(CACC_0, sync_id_0);",
        "check_nothing(sync_id_0);",
    ])
    t["copy_burst"] = copy_trace(root, "copy_burst", 40, burst=4, seed=7)
    t["hang_csb"] = write_trace(root, "hang_csb", [
        "reg_write(NVDLA_GLB.S_INTR_MASK_0, 0x3f03fc);",
        "reg_read_check(NVDLA_CVIF.CFG_RD_WEIGHT_0_0, 0x1);",  # the fixture never answers CVIF reads
        "check_nothing(0);",
    ])
    t["regs"] = write_trace(root, "regs", [
        "reg_write(NVDLA_PDP.D_DATA_CUBE_IN_WIDTH_0, 0x1234);",
        "reg_write(NVDLA_SDP.D_DP_BS_CFG_0, 0x53);",
        "reg_write(NVDLA_GLB.S_INTR_MASK_0, 0x3f03fc);",
        "reg_read_check(NVDLA_PDP.D_DATA_CUBE_IN_WIDTH_0, 0x1234);",
        "reg_read_check(NVDLA_SDP.D_DP_BS_CFG_0, 0x53);",
        "reg_read_check(NVDLA_GLB.S_INTR_MASK_0, 0x3f03fc);",
        "reg_write(NVDLA_GLB.S_INTR_SET_0, 0x10);",
        "intr_notify(PDP_0, sync_id_0);",  # masked: found by polling S_INTR_STATUS
        "reg_read_check(NVDLA_GLB.S_INTR_STATUS_0, 0x0);",  # the player cleared it (write-1-to-clear)
        "check_nothing(sync_id_0);",
    ])
    t["na_cdp"] = write_trace(root, "na_cdp", [
        "reg_write(NVDLA_CDP_RDMA.D_OP_ENABLE_0, 0x1);",
        "reg_write(NVDLA_CDP.D_OP_ENABLE_0, 0x1);",
        "intr_notify(CDP_0, sync_id_0);",
        "check_nothing(sync_id_0);",
    ])
    t["na_cvsram"] = write_trace(root, "na_cvsram", [
        "mem_init(sec_mem, 0x50000000, 0x100, ALL_ZERO);",
        "check_crc(0, sec_mem, 0x50000000, 0x100, 0x0d968558);",
    ])
    t["sdp_line"] = write_trace(root, "sdp_line", [
        "reg_write(NVDLA_GLB.S_INTR_MASK_0, 0x3f03fc);",
        "reg_write(NVDLA_SDP.D_OP_ENABLE_0, 0x1);",  # unmasked: wakes the waiter through dla_intr
        "intr_notify(SDP_0, sync_id_0);",
        "check_nothing(sync_id_0);",
    ])
    t["sdp_polled"] = write_trace(root, "sdp_polled", [
        "reg_write(NVDLA_GLB.S_INTR_MASK_0, 0x3f03fd);",  # SDP masked too: only polling finds it
        "reg_write(NVDLA_SDP.D_OP_ENABLE_0, 0x1);",
        "intr_notify(SDP_0, sync_id_0);",
        "check_nothing(sync_id_0);",
    ])
    t["axi_4k"] = write_trace(root, "axi_4k", [
        "reg_write(NVDLA_PDP_RDMA.D_SRC_BASE_ADDR_LOW_0, 0x80000000);",
        "reg_write(NVDLA_PDP.D_DST_BASE_ADDR_LOW_0, 0x80100ff0);",  # 4-beat bursts cross 4 KiB
        "reg_write(NVDLA_PDP.D_DATA_CUBE_IN_WIDTH_0, 0x7);",
        "reg_write(NVDLA_PDP.D_DATA_CUBE_IN_HEIGHT_0, 0x3);",
        "reg_write(NVDLA_PDP.D_OP_ENABLE_0, 0x1);",
        "intr_notify(PDP_0, sync_id_0);",
        "check_nothing(sync_id_0);",
    ])
    t["copy_bad_crc"] = copy_trace(root, "copy_bad_crc", 8, crc=0x1234)
    t["copy_last"] = copy_trace(root, "copy_last", 16, burst=2, seed=3)
    return {k: str(v) for k, v in t.items()}


@pytest.fixture(scope="module", params=["icarus", "verilator"])
def fixture_run(request, tmp_path_factory):
    sim = request.param
    if not available(sim):
        pytest.skip(f"{sim} is not installed")
    root = tmp_path_factory.mktemp(f"traces-{sim}")
    traces = build_traces(root)
    opts = RtlOptions(dut=fixture_dut(), timeout_cycles=HANG_BUDGET, reset_idle_cycles=8, keep=True,
                      runs_root=str(root / "runs"))
    messages: list[str] = []
    outs = list(run_suite([(cfg, "nv_small", sim) for cfg in traces.values()], 1, opts, report=messages.append))
    return sim, {o.name: o for o in outs}, messages


def test_axi_round_trips_through_the_golden_memory(fixture_run):
    sim, out, _ = fixture_run
    for name in ("copy_single", "copy_burst", "copy_last"):
        assert out[name].status == "PASS", out[name].line()
        assert out[name].metrics["play_cycles"] > 0
    assert out["copy_bad_crc"].status == "FAIL" and "expected crc 0x00001234" in out["copy_bad_crc"].detail


def test_register_reads_writes_and_polled_interrupt(fixture_run):
    _, out, _ = fixture_run
    assert out["regs"].status == "PASS", out["regs"].line()
    assert [c["kind"] for c in out["regs"].checks].count("reg_read_check") == 4


def test_interrupt_line_wakes_the_waiter(fixture_run):
    _, out, _ = fixture_run
    line, polled = out["sdp_line"], out["sdp_polled"]
    assert line.status == polled.status == "PASS", (line.line(), polled.line())
    # SDP done comes 50 cycles after the enable: on the line it is seen at once, masked only by the
    # next S_INTR_STATUS poll (every 256 cycles)
    assert polled.metrics["play_cycles"] - line.metrics["play_cycles"] > 150


def test_absent_engine_is_not_applicable(fixture_run):
    _, out, _ = fixture_run
    assert out["na_cdp"].status == "N/A"
    assert out["na_cdp"].line() == "N/A   na_cdp: engine CDP not in DUT (nor CDP_RDMA)"


def test_cv_sram_trace_without_cv_sram_port_is_not_applicable(fixture_run):
    _, out, _ = fixture_run
    assert out["na_cvsram"].line() == "N/A   na_cvsram: trace uses CV-SRAM (sec_mem); DUT has no nvdla_core2cvsram port"


def test_hangs_fail_with_last_csb_transaction_and_sim_time(fixture_run):
    _, out, _ = fixture_run
    intr = out["hang_intr"]
    assert intr.status == "FAIL"
    assert f"no completion within {HANG_BUDGET} cycles at sim time" in intr.detail
    assert "GLB.S_INTR_STATUS bits 0x100000" in intr.detail
    assert "last CSB transaction: read NVDLA_GLB.S_INTR_STATUS_0 (0x100c)" in intr.detail
    csb = out["hang_csb"]
    assert csb.status == "FAIL"
    assert "last CSB transaction: read NVDLA_CVIF.CFG_RD_WEIGHT_0_0 (0xf000), accepted at" in csb.detail
    assert "no response yet" in csb.detail
    assert csb.metrics["play_cycles"] == pytest.approx(HANG_BUDGET, abs=2)


def test_axi_protocol_violation_fails_the_trace(fixture_run):
    _, out, _ = fixture_run
    v = out["axi_4k"]
    assert v.status == "FAIL" and v.detail.startswith("AXI protocol violation on nvdla_core2dbb (write) at ")


def test_run_continues_and_writes_one_result_file_per_trace(fixture_run):
    sim, out, messages = fixture_run
    assert list(out)[-1] == "copy_last" and out["copy_last"].status == "PASS"
    assert len({o.metrics["start_ns"] for o in out.values()}) == len(out)  # one simulation, one after another
    run_dir = next(m.split(" in ", 1)[1] for m in messages if "simulation logs" in m)
    results = sorted(Path(run_dir).glob("*/[0-9]*.json"))
    assert len(results) == len(out)
    doc = json.loads(results[0].read_text())
    assert doc["target"] == sim and doc["status"] in ("PASS", "FAIL", "N/A") and "cycles" in doc["sim"]


@pytest.mark.parametrize("sim", ["icarus", "verilator"])
def test_non_posted_writes_wait_for_wr_complete(sim, tmp_path):
    if not available(sim):
        pytest.skip(f"{sim} is not installed")
    cfg = str(write_trace(tmp_path, "np", [f"reg_write(NVDLA_PDP.D_DATA_CUBE_IN_WIDTH_0, {i:#x});" for i in range(8)]
                          + ["reg_read_check(NVDLA_PDP.D_DATA_CUBE_IN_WIDTH_0, 0x7);", "check_nothing(0);"]))
    cycles = {}
    for nposted in (False, True):
        opts = RtlOptions(dut=fixture_dut(), reset_idle_cycles=8, nposted_writes=nposted,
                          runs_root=str(tmp_path / "runs"))
        (o,) = run_suite([(cfg, "nv_small", sim)], 1, opts, report=lambda _m: None)
        assert o.status == "PASS", o.line()
        cycles[nposted] = o.metrics["play_cycles"]
    # posted writes go back to back; each non-posted one waits for its wr_complete pulse
    assert cycles[True] >= cycles[False] + 8 * 2


def test_waves_give_one_waveform_per_trace(simulator, tmp_path, monkeypatch):
    monkeypatch.setenv("WAVES", "1")
    cfgs = [str(copy_trace(tmp_path, f"w{i}", 8, seed=i)) for i in range(2)]
    messages: list[str] = []
    opts = RtlOptions(dut=fixture_dut(), reset_idle_cycles=8, runs_root=str(tmp_path / "runs"))
    outs = list(run_suite([(c, "nv_small", simulator) for c in cfgs], 2, opts, report=messages.append))
    assert [o.status for o in outs] == ["PASS", "PASS"]
    run_dir = Path(next(m.split(" in ", 1)[1] for m in messages if "waveforms" in m))
    wave = "NV_nvdla.fst" if simulator == "icarus" else "dump.vcd"
    assert sorted(p.parent.name for p in run_dir.glob(f"*/{wave}")) == ["0000-w0", "0001-w1"]


def test_dut_that_never_answers_csb_fails_every_trace_quickly(tmp_path):
    """The CFGROM probe after the first reset has its own budget; later traces fail without waiting."""
    if not available("icarus"):
        pytest.skip("iverilog not installed")
    built = build(fixture_dut(defines=(("FIXTURE_CSB_DEAD", "1"),)), "icarus")
    cfgs = [copy_trace(tmp_path, f"t{i}", 8) for i in range(2)]
    traces = [TraceJob(i, str(c), "nv_small", c.parent.name, str(tmp_path / f"{i}.json")) for i, c in enumerate(cfgs)]
    jobs = JobFile("icarus", BenchSettings(reset_idle_cycles=8, probe_cycles=2000), traces)
    simulate(built, jobs, tmp_path / "run")
    first, second = (read_result(tmp_path / f"{i}.json") for i in range(2))
    for doc in (first, second):
        assert doc["status"] == "FAIL"
        assert doc["detail"].startswith("DUT does not answer on CSB: CFGROM not read within 2000 cycles after reset")
        assert "not accepted (csb2nvdla_ready low since" in doc["detail"]
    assert second["sim"]["cycles"] < 100  # reset only: the probe's verdict is remembered
