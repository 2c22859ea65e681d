"""The testbench: wires one DUT (clocks, tie-offs, reset, CSB master, AXI memories, interrupt monitor,
``RtlTarget``) and plays one trace job on it, writing the trace's result file.

Every trace starts from reset with a fresh memory, as every golden trace starts on a fresh model: NVDLA's
ping-pong pointers and status bits survive a trace, so without a reset the next trace would program the
wrong register group. Each trace runs under a watchdog whose budget scales with the work of the trace's
operations (``tb.budget``); a DUT that hangs is reported FAIL with what the testbench was waiting for, the last CSB
transaction and the simulation time, and the next trace starts from a new reset.
"""
from __future__ import annotations

import time
import traceback
from pathlib import Path

from cocotb.simtime import get_sim_time
from cocotb.triggers import ClockCycles, RisingEdge, Timer, select

from golden.config import HwConfig, get_config
from golden.errors import ConfigError, DlaError, RegisterError, UnsupportedError
from golden.memory import Memory
from golden.regs import register_map
from runtime.player import play
from runtime.suite import ERROR, FAIL, NA, classify
from runtime.target import InterruptTimeout
from runtime.trace import Trace, TraceError
from runtime.txn import parse_trace
from tb.budget import trace_budget
from tb.csb import CsbMaster
from tb.engines import DutCapabilities, not_applicable, probe_cfgrom, required_engines
from tb.fastclock import start_clock
from tb.fastmem import make_dut_memory
from tb.interrupt import InterruptMonitor
from tb.memory import AxiTiming, DutInterfaceError, DutMemory
from tb.results import ABORTED, BenchSettings, TraceJob, write_json
from tb.target import RtlTarget

#: Inputs of NVDLA's top level that are tied off (clock-gating overrides, test mode, RAM power-down buses).
TIE_OFFS = (
    "global_clk_ovr_on", "tmc2slcg_disable_clock_gating", "test_mode",
    "nvdla_pwrbus_ram_c_pd", "nvdla_pwrbus_ram_ma_pd", "nvdla_pwrbus_ram_mb_pd",
    "nvdla_pwrbus_ram_p_pd", "nvdla_pwrbus_ram_o_pd", "nvdla_pwrbus_ram_a_pd",
)
#: Ports the testbench drives or watches (besides the tie-offs, the AXI ports and direct_reset_).
REQUIRED_PORTS = (
    "dla_core_clk", "dla_reset_rstn", "dla_intr",
    "csb2nvdla_valid", "csb2nvdla_ready", "csb2nvdla_addr", "csb2nvdla_wdat", "csb2nvdla_write",
    "csb2nvdla_nposted", "nvdla2csb_valid", "nvdla2csb_data", "nvdla2csb_wr_complete",
)
#: CFGROM contents per (toplevel, address map), read once per simulation; a string when the DUT did
#: not answer, so later traces fail at once instead of waiting again.
_capabilities: dict[tuple[str, str], DutCapabilities | str] = {}


def _port(dut, name: str):
    try:
        return getattr(dut, name)
    except AttributeError:
        return None


def budget_cycles(trace: Trace, hw: HwConfig, settings: BenchSettings) -> int:
    """The trace's hang budget: ``--timeout-cycles``, else scaled with the work of its operations
    (``tb.budget.trace_budget``)."""
    if settings.timeout_cycles:
        return settings.timeout_cycles
    return trace_budget(trace, hw, settings.timeout_scale)


class Testbench:
    """One DUT, wired: drivers, monitors and models built from the DUT's ports."""

    def __init__(self, dut, hw: HwConfig, settings: BenchSettings) -> None:
        missing = [p for p in REQUIRED_PORTS if _port(dut, p) is None]
        if missing:
            raise DutInterfaceError(f"DUT {dut._name} has no port {', '.join(missing)}")
        self.dut, self.hw, self.settings = dut, hw, settings
        self.core_clock = dut.dla_core_clk
        csb_clock = _port(dut, "dla_csb_clk")
        self.csb_clock = csb_clock if csb_clock is not None else self.core_clock
        self.csb = CsbMaster(dut, self.csb_clock, settings.nposted_writes)
        self.memory = Memory()
        self.resets = [h for h in (_port(dut, "dla_reset_rstn"), _port(dut, "direct_reset_")) if h is not None]
        self.dut_memory: DutMemory | None = None
        self.interrupt: InterruptMonitor | None = None
        self.target: RtlTarget | None = None

    async def start(self) -> RtlTarget:
        """Clocks, tie-offs, reset (held ``reset_cycles``, then ``reset_idle_cycles`` idle); returns the
        target, ready for the first CSB request."""
        s = self.settings
        start_clock(self.core_clock, s.clock_ns, "ns")  # tb.fastclock: in C++ under our Verilator main
        if self.csb_clock is not self.core_clock:
            start_clock(self.csb_clock, s.clock_ns, "ns")
        for name in TIE_OFFS:
            handle = _port(self.dut, name)
            if handle is not None:
                handle.value = 0
        for r in self.resets:
            r.value = 0
        self.csb.idle()
        await ClockCycles(self.core_clock, s.reset_cycles)
        # Built while reset holds the DUT's outputs at known values; AxiRam follows dla_reset_rstn.
        timing = None if s.axi_random is None else AxiTiming(s.axi_random, s.clock_ns)
        self.dut_memory = make_dut_memory(self.dut, self.core_clock, self.resets[0] if self.resets else None,
                                          self.memory, timing)  # tb.fastmem unless timing is random
        self.interrupt = InterruptMonitor(self.dut.dla_intr)
        for r in self.resets:
            r.value = 1
        if s.reset_idle_cycles:
            await Timer(s.reset_idle_cycles * s.clock_ns, "ns")
        await RisingEdge(self.csb_clock)
        self.target = RtlTarget(self.hw, self.csb, self.memory, self.interrupt, s.clock_ns, s.poll_cycles)
        return self.target

    async def capabilities(self) -> DutCapabilities | str:
        """The DUT's CFGROM (read once per simulation), or why it could not be read."""
        assert self.target is not None
        key = (self.dut._name, self.hw.address_map)
        if key not in _capabilities:
            cycles = self.settings.probe_cycles
            budget_ns = cycles * self.settings.clock_ns
            declared = None
            if self.settings.builtin_rtl:
                from tb.rtl_headers import rtl_cfgrom_values

                declared = rtl_cfgrom_values(self.hw)
            which, caps = await select(Timer(budget_ns, "ns"),
                                       probe_cfgrom(self.target.read_reg, self.hw.address_map, declared))
            _capabilities[key] = caps if which == 1 else (
                f"DUT does not answer on CSB: CFGROM not read within {cycles} cycles after reset; "
                f"last CSB transaction: {self.last_csb()}")
        return _capabilities[key]

    def last_csb(self) -> str:
        if self.csb.last is None:
            return "none"
        return self.csb.last.describe(self.target.register_name if self.target else None)

    def hang_report(self, budget: int) -> str:
        """What the DUT was doing when the watchdog fired."""
        activity = self.target.activity if self.target else "starting"
        return (f"timeout: no completion within {budget} cycles at sim time {get_sim_time('ns'):.0f} ns; "
                f"{activity}; last CSB transaction: {self.last_csb()}")


async def run_job(dut, job: TraceJob, settings: BenchSettings, target_name: str) -> dict:
    """Play one trace job on ``dut`` and write its result file; returns the result."""
    wall = time.perf_counter()
    sim_start = get_sim_time("ns")
    result: dict = {"name": job.name, "path": job.cfg, "config": job.config, "target": target_name,
                    "status": ERROR, "detail": ABORTED, "checks": [], "bad_input": False, "traceback": "", "sim": {}}
    bench: Testbench | None = None
    play_start = None
    budget = None
    try:
        hw = get_config(job.config)
        trace = parse_trace(Path(job.cfg), register_map(hw.address_map), name=job.name)
        missing = trace.missing_files()
        if missing:
            result["status"], result["detail"] = NA, f"missing data file {missing[0].name}"
            return result
        bench = Testbench(dut, hw, settings)
        target = await bench.start()
        caps = await bench.capabilities()
        if isinstance(caps, str):
            result["status"], result["detail"] = FAIL, caps
            return result
        result["sim"]["dut"] = caps.describe()
        lacking = caps.missing(required_engines(trace.commands, target.regmap))
        if lacking:
            result["status"], result["detail"] = NA, not_applicable(lacking)
            return result
        mismatch = caps.mismatches(hw)
        if mismatch:
            result["status"], result["detail"] = NA, f"DUT is not {hw.name}: {mismatch[0]}"
            return result
        if any(getattr(c, "mem", None) == "sec_mem" for c in trace.commands) and not bench.dut_memory.has("sec_mem"):
            result["status"], result["detail"] = NA, "trace uses CV-SRAM (sec_mem); DUT has no nvdla_core2cvsram port"
            return result
        budget = budget_cycles(trace, hw, settings)
        budget_ns = budget * settings.clock_ns
        play_start = get_sim_time("ns")
        try:
            which, played = await select(Timer(budget_ns, "ns"), play(trace, target, timeout_ns=budget_ns),
                                         *(e.wait() for e in bench.dut_memory.violation_events()))
        except InterruptTimeout as exc:
            result["status"] = FAIL
            result["detail"] = (f"{exc} at sim time {get_sim_time('ns'):.0f} ns; "
                                f"last CSB transaction: {bench.last_csb()}")
            return result
        if which == 0:
            result["status"], result["detail"] = FAIL, bench.hang_report(budget)
            return result
        if which > 1:
            result["status"] = FAIL
            result["detail"] = f"{bench.dut_memory.violations[0]}; last CSB transaction: {bench.last_csb()}"
            return result
        result["status"], result["detail"], result["checks"] = classify(played)
    except TraceError as exc:
        result["status"], result["detail"], result["bad_input"] = ERROR, str(exc), True
    except DutInterfaceError as exc:
        result["status"], result["detail"] = ERROR, str(exc)
    except UnsupportedError as exc:
        result["status"], result["detail"] = NA, f"needs {exc.unit}: {exc}"
    except (ConfigError, RegisterError, DlaError) as exc:
        result["status"], result["detail"] = ERROR, f"{type(exc).__name__}: {exc}"
    except Exception as exc:  # a testbench or DUT-interface problem: report it, keep going
        result["status"], result["detail"] = ERROR, f"internal error {type(exc).__name__}: {exc}"
        result["traceback"] = traceback.format_exc()
    finally:
        now = get_sim_time("ns")
        result["seconds"] = time.perf_counter() - wall
        sim = result["sim"]
        sim["start_ns"], sim["end_ns"] = sim_start, now
        sim["cycles"] = int((now - sim_start) / settings.clock_ns)
        if play_start is not None:
            sim["play_cycles"] = int((now - play_start) / settings.clock_ns)
            sim["budget_cycles"] = budget
            if settings.axi_random is not None:
                sim["axi_random"] = settings.axi_random
                if bench is not None and bench.dut_memory is not None:
                    sim["axi_reordered"] = bench.dut_memory.reordered
        if bench is not None:
            sim["csb_reads"], sim["csb_writes"] = bench.csb.reads, bench.csb.writes
        write_json(job.result, result)
    return result
