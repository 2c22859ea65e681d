"""Trace suites on a simulator: what ``dla trace --target icarus|verilator`` runs.

One build per DUT (our ``rtl/`` per hardware config, or a user's file list), then ``workers``
simulations in parallel, each playing its share of the traces (round robin, so results arrive roughly
in order). Outcomes are read back from the per-trace result files as they appear and yielded in job
order, with the same lines and statuses as the golden target. Traces that are malformed or lack data
files are decided here, before any simulation; a trace whose simulation died is an ERROR with the end
of the simulator log; a build failure is printed once with its file:line errors.
"""
from __future__ import annotations

import os
import re
import shutil
import sys
import time
import uuid
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable, Iterator, Mapping

from golden.config import HwConfig, get_config
from golden.regs import register_map
from runtime.processes import exit_text
from runtime.suite import ERROR, NA, PASS, Outcome, TargetSetupError, trace_name
from runtime.trace import TraceError
from runtime.txn import parse_trace
from tb.balance import balanced_parts, trace_cost
from tb.filelist import FileListError
from tb.results import ABORTED, BenchSettings, JobFile, TraceJob, read_result
from tb.runner import (
    REPO,
    Build,
    BuildError,
    DutSpec,
    SimRun,
    SimulatorUnavailable,
    build,
    default_build_root,
    simulate,
    stop_simulations,
    waves_requested,
)

#: Idle cycles after reset: our RTL is ready at once; NVDLA's own RTL needs thousands of cycles.
RESET_IDLE_BUILTIN = 64
RESET_IDLE_USER = 8192
#: ``DLA_AXI_RANDOM=SEED``: random AXI timing (latency, stalls, out-of-order reads) unless the options say.
AXI_RANDOM_ENV = "DLA_AXI_RANDOM"
#: Budgets are multiplied by this under random AXI timing (stalls and latencies slow every transfer).
AXI_RANDOM_TIMEOUT_SCALE = 4.0
#: How often the parent looks for new result files, and at the time budget of the trace being played.
_POLL_S = 0.05
_BUDGET_LOOK_S = 1.0


@dataclass(frozen=True)
class RtlOptions:
    """The CLI's simulator options."""

    filelist: str | None = None
    toplevel: str | None = None
    defines: tuple[tuple[str, str], ...] = ()
    sim_args: tuple[str, ...] = ()
    timeout_cycles: int | None = None
    reset_idle_cycles: int | None = None
    #: One waveform per trace (one simulation per trace); default from $WAVES.
    waves: bool | None = None
    build_root: str | None = None
    #: Where each run's directory (logs, results, waveforms) goes; default ``<build_root>/runs``.
    runs_root: str | None = None
    #: Keep the run directory (logs, results) even when everything passed.
    keep: bool = False
    #: Send CSB writes non-posted and wait for each wr_complete.
    nposted_writes: bool = False
    #: A DUT given directly (tests, regressions) instead of ``filelist`` / ``rtl/``.
    dut: DutSpec | None = None
    #: Random AXI timing from this seed (``--axi-random``); None: ``$DLA_AXI_RANDOM``, else off.
    axi_random: int | None = None
    #: A named DUT (``--dut``, ``tb.duts.NAMED_DUTS``): resolved into ``filelist`` here, so a named NVDLA
    #: DUT is built and driven exactly like ``--rtl-filelist`` (user-RTL defaults included).
    dut_name: str | None = None
    #: Wall-clock seconds one trace may take (``dla trace --timeout``); past it its simulation is stopped,
    #: the trace is an ERROR and a new simulation plays the rest. None: only the cycle budgets.
    trace_budget_s: float | None = None

    def __post_init__(self) -> None:
        if self.dut_name is None:
            return
        from tb.duts import DutError, named_dut

        if self.filelist:
            raise DutError(f"--dut {self.dut_name} and --rtl-filelist {self.filelist} are mutually exclusive")
        path = named_dut(self.dut_name)
        object.__setattr__(self, "filelist", None if path is None else str(path))

    @classmethod
    def from_mapping(cls, options: Mapping | RtlOptions | None) -> RtlOptions:
        if isinstance(options, RtlOptions):
            return options
        opts = {k: v for k, v in dict(options or {}).items() if v is not None}
        if "defines" in opts:
            opts["defines"] = tuple(tuple(d) for d in opts["defines"])
        if "sim_args" in opts:
            opts["sim_args"] = tuple(opts["sim_args"])
        return cls(**opts)

    @property
    def wants_waves(self) -> bool:
        return self.waves if self.waves is not None else waves_requested(False)


# ---- which DUT -------------------------------------------------------------------------------------------
def config_headers(hw: HwConfig) -> tuple[tuple[str, str], ...]:
    """``dla_config.vh`` for our RTL, rendered from ``hw`` (``tb.rtl_headers``)."""
    from tb.rtl_headers import render_config_defines

    return (("dla_config.vh", render_config_defines(hw)),)


def builtin_dut(config: str, toplevel: str | None = None, defines: tuple[tuple[str, str], ...] = (),
                options: tuple[str, ...] = ()) -> DutSpec:
    """Our RTL in ``rtl/`` for a hardware config: ``rtl/rtl.f`` when present, else every ``*.v`` under
    ``rtl/``; plus the config's generated ``dla_config.vh``."""
    rtl = REPO / "rtl"
    if not rtl.is_dir():
        raise TargetSetupError(f"no RTL in {rtl}; pass --rtl-filelist FILE to verify your own")
    hw = get_config(config)
    flist = rtl / "rtl.f"
    if flist.is_file():
        spec = DutSpec.from_filelist(flist, toplevel=toplevel, defines=dict(defines), options=options)
    else:
        sources = tuple(sorted(rtl.rglob("*.v")))
        if not sources:
            raise TargetSetupError(f"no Verilog files in {rtl}")
        includes = tuple(sorted({p.parent for p in rtl.rglob("*.vh")} | {rtl}))
        spec = DutSpec(sources=sources, toplevel=toplevel or "NV_nvdla", includes=includes,
                       defines=tuple(sorted(defines)), options=options)
    return replace(spec, headers=spec.headers + config_headers(hw), label=f"rtl-{config}")


def dut_for(config: str, opts: RtlOptions) -> DutSpec:
    if opts.dut is not None:
        return opts.dut
    try:
        if opts.filelist:
            return DutSpec.from_filelist(opts.filelist, toplevel=opts.toplevel, defines=dict(opts.defines),
                                         options=opts.sim_args)
        return builtin_dut(config, opts.toplevel, opts.defines, opts.sim_args)
    except FileListError as exc:
        raise TargetSetupError(str(exc)) from None


def axi_random_seed(opts: RtlOptions) -> int | None:
    """The random-AXI-timing seed: the options', else ``$DLA_AXI_RANDOM`` (empty or unset: off)."""
    if opts.axi_random is not None:
        return opts.axi_random
    value = os.environ.get(AXI_RANDOM_ENV, "").strip()
    if not value:
        return None
    try:
        return int(value, 0)
    except ValueError:
        raise TargetSetupError(f"{AXI_RANDOM_ENV}={value!r}: expected an integer seed") from None


def settings_for(opts: RtlOptions) -> BenchSettings:
    idle = opts.reset_idle_cycles
    if idle is None:
        idle = RESET_IDLE_USER if opts.filelist else RESET_IDLE_BUILTIN
    seed = axi_random_seed(opts)
    return BenchSettings(reset_idle_cycles=idle, timeout_cycles=opts.timeout_cycles,
                         nposted_writes=opts.nposted_writes, builtin_rtl=not opts.filelist and opts.dut is None,
                         axi_random=seed, timeout_scale=1.0 if seed is None else AXI_RANDOM_TIMEOUT_SCALE)


# ---- running ---------------------------------------------------------------------------------------------
def _stderr(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def _outcome(doc: dict) -> Outcome:
    return Outcome(doc["name"], doc["path"], doc["config"], doc["target"], doc["status"], doc.get("detail", ""),
                   doc.get("seconds", 0.0), doc.get("bad_input", False), doc.get("checks", []),
                   doc.get("traceback", ""), doc.get("sim", {}))


def precheck(cfg: str, config: str, target: str) -> Outcome | None:
    """The outcome of a trace that needs no simulation (malformed, or missing data files), else None."""
    out = Outcome(trace_name(cfg), cfg, config, target, ERROR)
    try:
        hw = get_config(config)
        trace = parse_trace(Path(cfg), register_map(hw.address_map), name=out.name)
        missing = trace.missing_files()
    except TraceError as exc:
        out.detail, out.bad_input = str(exc), True
        return out
    if missing:
        out.status, out.detail = NA, f"missing data file {missing[0].name}"
        return out
    return None


@dataclass
class _Shard:
    build: Build
    jobs: JobFile
    directory: Path
    future: Future | None = None
    #: The simulation that plays what this one left unplayed after a signal killed it.
    replacement: _Shard | None = None
    #: ``time.time()`` when it was started; the job index it was stopped on for overrunning its budget.
    started: float = 0.0
    overrun: int | None = None


def run_suite(jobs: list[tuple[str, str, str]], workers: int = 1, options: Mapping | RtlOptions | None = None,
              report: Callable[[str], None] = _stderr) -> Iterator[Outcome]:
    """Outcomes of (cfg, config, simulator) jobs, in job order, as they complete."""
    if not jobs:
        return
    opts = RtlOptions.from_mapping(options)
    simulator = jobs[0][2]
    settings = settings_for(opts)
    waves = opts.wants_waves
    root = Path(opts.build_root) if opts.build_root else default_build_root()
    runs = Path(opts.runs_root) if opts.runs_root else root / "runs"
    run_dir = runs / f"{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}-{uuid.uuid4().hex[:6]}"

    decided: dict[int, Outcome] = {}
    groups: dict[DutSpec, list[int]] = {}
    specs: dict[str, DutSpec] = {}
    for i, (cfg, config, _) in enumerate(jobs):
        pre = precheck(cfg, config, simulator)
        if pre is not None:
            decided[i] = pre
            continue
        if config not in specs:
            specs[config] = dut_for(config, opts)
        groups.setdefault(specs[config], []).append(i)

    shards: list[_Shard] = []
    owner: dict[int, _Shard] = {}
    results: dict[int, Path] = {}
    for spec, members in groups.items():
        try:
            built = build(spec, simulator, waves=waves, root=root,
                          notify=lambda msg: report(f"dla: {msg}"))
        except SimulatorUnavailable as exc:
            raise TargetSetupError(str(exc)) from None
        except BuildError as exc:
            report(f"dla: {exc}")
            first = exc.errors[0] if exc.errors else "see the log"
            for i in members:
                decided[i] = Outcome(trace_name(jobs[i][0]), jobs[i][0], jobs[i][1], simulator, ERROR,
                                     f"DUT build failed ({first})")
            continue
        n = len(members) if waves else max(1, min(workers, len(members)))
        parts = [members[k::n] for k in range(n)] if waves or n == 1 else \
            balanced_parts(members, [trace_cost(jobs[i][0], jobs[i][1]) for i in members], n)  # tb.balance
        for k in range(n):
            part = parts[k]
            if waves:  # one simulation, so one waveform, per trace, named after it
                directory = run_dir / f"{part[0]:04d}-{re.sub(r'[^0-9A-Za-z_.-]', '_', trace_name(jobs[part[0]][0]))}"
            else:
                directory = run_dir / f"{built.directory.name}-{k}"
            tj = [TraceJob(i, str(Path(jobs[i][0]).resolve()), jobs[i][1], trace_name(jobs[i][0]),
                           str(directory / f"{i}.json")) for i in part]
            shard = _Shard(built, JobFile(simulator, settings, tj), directory)
            shards.append(shard)
            for i in part:
                owner[i] = shard
                results[i] = directory / f"{i}.json"

    keep = opts.keep or waves
    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        for shard in shards:
            shard.future = pool.submit(simulate, shard.build, shard.jobs, shard.directory, waves=waves)
            shard.started = time.time()
        try:
            for i in range(len(jobs)):
                if i in decided:
                    out = decided[i]
                else:
                    out = _wait_for(i, jobs[i], results[i], owner[i], simulator, opts.trace_budget_s)
                    while out is None:  # a killed simulation never reached it: a new one plays the rest
                        _replace(owner[i], owner, results, pool.submit, waves)
                        out = _wait_for(i, jobs[i], results[i], owner[i], simulator, opts.trace_budget_s)
                keep = keep or out.status not in (PASS, NA)
                yield out
        except BaseException:  # Ctrl-C, SIGTERM, an abandoned iterator: end the simulations, do not wait
            stop_simulations()
            raise
    if shards:
        if keep:
            report(f"dla: simulation logs{' and waveforms' if waves else ''} in {run_dir}")
        else:
            shutil.rmtree(run_dir, ignore_errors=True)


def _finished(shard: _Shard) -> tuple[SimRun | None, str]:
    """The shard's finished simulation (blocks until it ends), or why there is none."""
    assert shard.future is not None
    try:
        return shard.future.result(), ""
    except Exception as exc:  # noqa: BLE001 - the simulation could not even start
        return None, f"{type(exc).__name__}: {exc}"


def _unplayed(shard: _Shard) -> list[TraceJob]:
    """The shard's traces without a result file, in the order the simulation plays them."""
    return [t for t in shard.jobs.traces if read_result(t.result) is None]


def _replace(shard: _Shard, owner: dict[int, _Shard], results: dict[int, Path],
             submit: Callable[..., Future], waves: bool) -> None:
    """Start a simulation of the traces ``shard`` left unplayed when a signal killed it, except the one it
    was playing (that one is an ERROR naming the signal); once per killed shard."""
    if shard.replacement is not None:
        return
    directory = shard.directory.with_name(shard.directory.name + "-again")
    rest = [TraceJob(t.index, t.cfg, t.config, t.name, str(directory / f"{t.index}.json"))
            for t in _unplayed(shard)[1:]]
    new = _Shard(shard.build, JobFile(shard.jobs.target, shard.jobs.settings, rest), directory)
    new.future = submit(simulate, new.build, new.jobs, new.directory, waves=waves)
    new.started = time.time()
    shard.replacement = new
    for t in rest:
        owner[t.index], results[t.index] = new, Path(t.result)


def _overran(shard: _Shard, budget_s: float) -> None:
    """Stop the shard's simulation when the trace it is playing has taken longer than ``budget_s`` (since
    the previous trace's result, or the start of the simulation)."""
    unplayed = _unplayed(shard)
    if not unplayed or shard.overrun is not None:
        return
    done = {t.index for t in unplayed}
    since = max([shard.started, *(Path(t.result).stat().st_mtime for t in shard.jobs.traces
                                  if t.index not in done and Path(t.result).exists())])
    if time.time() - since > budget_s:
        shard.overrun = unplayed[0].index
        stop_simulations(shard.directory)


def _wait_for(i: int, job: tuple[str, str, str], result: Path, shard: _Shard, simulator: str,
              budget_s: float | None = None) -> Outcome | None:
    """The outcome of job ``i``: its result file, or an ERROR if its simulation ended without one; None
    when its simulation was killed (a signal, the time budget) before it reached this trace (``_replace``
    starts a new one)."""
    assert shard.future is not None
    doc = read_result(result)
    looked = time.monotonic()
    while doc is None and not shard.future.done():
        time.sleep(_POLL_S)
        doc = read_result(result)
        if budget_s and time.monotonic() - looked > _BUDGET_LOOK_S:
            looked = time.monotonic()
            _overran(shard, budget_s)
    if doc is None:
        doc = read_result(result)  # written just before the simulator exited
    if doc is None:
        run, why = _finished(shard)
        if run is not None and run.returncode < 0:
            unplayed = _unplayed(shard)
            if unplayed and unplayed[0].index != i:
                return None
            if shard.overrun == i:
                return Outcome(trace_name(job[0]), job[0], job[1], simulator, ERROR,
                               f"simulation stopped after {budget_s:g} s on this trace (over its time budget, "
                               f"--timeout; log {run.log})")
            return Outcome(trace_name(job[0]), job[0], job[1], simulator, ERROR,
                           f"simulator {exit_text(run.returncode)} while playing this trace (log {run.log})",
                           lost=True)
        detail = f"simulation ended before this trace ran ({why or f'simulator {exit_text(run.returncode)}'}; " \
                 f"log {shard.directory / 'sim.log'})"
        tail = run.log_tail() if run else ""
        if tail:
            detail += "; last log line: " + tail.splitlines()[-1].strip()
        return Outcome(trace_name(job[0]), job[0], job[1], simulator, ERROR, detail)
    out = _outcome(doc)
    if out.detail == ABORTED:
        # cocotb failed the test itself (a testbench error); its message is in results.xml, known once
        # the simulation has ended
        run, why = _finished(shard)
        msg = next((m for name, m in run.failures.items() if name.startswith(f"trace_{i:04d}_")), "") if run else why
        out.detail = f"testbench error: {msg or 'see ' + str(shard.directory / 'sim.log')}"
    return out


def run_traces(cfgs: list[tuple[str, str]], simulator: str, workers: int = 1,
               options: Mapping | RtlOptions | None = None) -> list[Outcome]:
    """Convenience for tests and regressions: outcomes of (cfg, config) pairs on ``simulator``."""
    return list(run_suite([(str(c), cfg, simulator) for c, cfg in cfgs], workers, options, report=lambda _m: None))
