"""Running trace suites: one outcome per trace (PASS, FAIL, N/A, ERROR), in parallel processes.

Every trace runs in isolation on a fresh target. Outcomes are plain data so they cross process
boundaries and serialize to JSON and JUnit XML. Every trace has a wall-clock budget; a worker that dies
(killed, out of memory) or overruns it costs only its own trace, an ERROR naming how it ended.
"""
from __future__ import annotations

import asyncio
import math
import os
import time
import traceback
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping

from golden.budget import MemoryBudgetError
from golden.config import PRESETS, HwConfig, get_config
from golden.errors import ConfigError, DlaError, RegisterError, UnsupportedError
from golden.regs import register_map
from runtime.player import BudgetExceeded, PlayResult, play
from runtime.pool import Task, run_in_workers
from runtime.target import InterruptTimeout, Target
from runtime.trace import TraceError, find_traces
from runtime.txn import parse_trace

PASS, FAIL, NA, ERROR = "PASS", "FAIL", "N/A", "ERROR"

TargetFactory = Callable[[HwConfig], Target]

#: Wall-clock seconds one trace may take (``dla trace --timeout``, ``$DLA_TRACE_TIMEOUT``; 0: no budget).
#: NVDLA's largest nv_small traces take well under a minute on golden.
DEFAULT_TRACE_BUDGET_S = 900.0
TRACE_BUDGET_ENV = "DLA_TRACE_TIMEOUT"


def trace_budget(seconds: float | None = None) -> float | None:
    """The per-trace budget in seconds: ``seconds``, else ``$DLA_TRACE_TIMEOUT``, else the default; None
    when that is 0 (no budget). Raises ValueError, naming where it came from, for anything but a finite number >= 0."""
    where = f"--timeout {seconds:g}" if seconds is not None else ""
    if seconds is None:
        raw = os.environ.get(TRACE_BUDGET_ENV, "").strip()
        where = f"{TRACE_BUDGET_ENV}={raw!r}"
        try:
            seconds = float(raw) if raw else DEFAULT_TRACE_BUDGET_S
        except ValueError:
            raise ValueError(f"{where}: expected seconds") from None
    if not math.isfinite(seconds) or seconds < 0:  # NaN compares false with everything: no budget at all
        raise ValueError(f"{where}: a trace time budget is a finite number of seconds, 0 or more")
    return seconds or None


def _golden(hw: HwConfig) -> Target:
    from runtime.golden_target import GoldenTarget

    return GoldenTarget(hw)


#: In-process targets by name, one trace per call (``register_target`` adds more; the simulators are
#: batch targets below).
TARGETS: dict[str, TargetFactory] = {"golden": _golden}


def register_target(name: str, factory: TargetFactory) -> None:
    TARGETS[name] = factory


#: Runs (cfg, config, target) jobs on ``workers`` simulator processes with these options, yielding outcomes.
BatchRunner = Callable[[list[tuple[str, str, str]], int, dict], Iterator["Outcome"]]
#: Simulator targets. They play many traces per simulation (one DUT build, one simulator process per
#: worker), so they run whole suites rather than one trace per call. The runtime does not import the
#: testbench: the application registers them (``register_batch_target``, from ``app.targets``).
BATCH_TARGETS: dict[str, BatchRunner] = {}


def register_batch_target(name: str, run_suite: BatchRunner) -> None:
    """Let ``run_batch(name, ...)`` and ``dla trace --target name`` play suites through ``run_suite``."""
    BATCH_TARGETS[name] = run_suite


class TargetSetupError(Exception):
    """A target cannot be set up (simulator not installed, unreadable RTL file list, ...): the user's
    problem, reported as one line."""


def known_targets() -> list[str]:
    return [*TARGETS, *(t for t in BATCH_TARGETS if t not in TARGETS)]


def run_batch(target: str, jobs: list[tuple[str, str, str]], workers: int = 1,
              options: Mapping[str, Any] | None = None) -> Iterator[Outcome]:
    """Outcomes of (cfg, config, target) jobs on a simulator target, yielded in job order."""
    return BATCH_TARGETS[target](jobs, workers, dict(options or {}))


@dataclass
class Outcome:
    """The result of one trace."""

    name: str
    path: str
    config: str
    target: str
    status: str
    detail: str = ""
    seconds: float = 0.0
    #: True when the trace itself is malformed (the CLI exits 2).
    bad_input: bool = False
    checks: list[dict] = field(default_factory=list)
    traceback: str = ""
    #: Target-specific figures (simulators: cycles, sim time, CSB traffic); omitted from JSON when empty.
    metrics: dict = field(default_factory=dict)
    #: True when the process playing the trace died (a signal, the OOM killer): says nothing about the
    #: trace or the target; omitted from JSON when False.
    lost: bool = False

    def line(self) -> str:
        text = f"{self.status:<5} {self.name}"
        if self.detail:
            text += f": {self.detail}"
        return text

    def to_dict(self) -> dict:
        out = asdict(self)
        if not out["metrics"]:
            del out["metrics"]
        if not out["lost"]:
            del out["lost"]
        return out


def infer_config(path: Path) -> str | None:
    """The preset named by the nearest enclosing folder of ``path`` (e.g. ``.../traces/nv_small/x``)."""
    for part in reversed(path.resolve().parts):
        if part in PRESETS:
            return part
    return None


def trace_name(cfg: str | Path) -> str:
    """A trace's display name: its directory, plus the file stem when that differs (an nvdlav1
    ``input.txn`` is named by its directory alone)."""
    path = Path(cfg)
    return path.parent.name if path.stem == path.parent.name or path.name == "input.txn" else f"{path.parent.name}/{path.stem}"


def run_trace(cfg: str, config: str, target: str = "golden", budget_s: float | None = None) -> Outcome:
    """Parse and play one trace on a fresh target; never raises for a trace's own problems. ``budget_s``
    bounds the wall time of the play (an ERROR naming the line it reached)."""
    path = Path(cfg)
    name = trace_name(path)
    out = Outcome(name, str(path), config, target, ERROR)
    start = time.perf_counter()
    try:
        hw = get_config(config)
        trace = parse_trace(path, register_map(hw.address_map), name=name)
        missing = trace.missing_files()
        if missing:
            out.status, out.detail = NA, f"missing data file {missing[0].name}"
            return out
        tgt = TARGETS[target](hw)
        deadline = None if budget_s is None else time.monotonic() + budget_s
        result: PlayResult = asyncio.run(play(trace, tgt, deadline=deadline))
        out.status, out.detail, out.checks = classify(result)
    except TraceError as exc:
        out.status, out.detail, out.bad_input = ERROR, str(exc), True
    except MemoryBudgetError as exc:  # raised outside a command the player could name
        out.status, out.detail, out.bad_input = ERROR, f"{path}: {exc}", True
    except UnsupportedError as exc:
        out.status, out.detail = NA, f"needs {exc.unit}: {exc}"
    except BudgetExceeded as exc:
        out.status, out.detail = ERROR, f"{exc}{f' ({budget_s:g} s)' if 'wall-clock' in str(exc) else ''}"
    except (ConfigError, RegisterError, InterruptTimeout, DlaError) as exc:
        out.status, out.detail = ERROR, f"{type(exc).__name__}: {exc}"
    except Exception as exc:  # an internal bug: keep going, keep the traceback for the JSON report
        out.status, out.detail = ERROR, f"internal error {type(exc).__name__}: {exc}"
        out.traceback = traceback.format_exc()
    finally:
        out.seconds = time.perf_counter() - start
    return out


def classify(result: PlayResult) -> tuple[str, str, list[dict]]:
    """(status, detail, checks) of a played trace: PASS when every check passed, FAIL naming the failed
    checks, ERROR for a trace without checks. Shared by every target."""
    checks = [c.__dict__ for c in result.checks]
    if not result.checks:
        return ERROR, "trace has no checks", checks
    if result.passed:
        return PASS, "", checks
    return FAIL, "; ".join(c.describe() for c in result.failures()), checks


def _lost(job: tuple[str, str, str], why: str) -> Outcome:
    """The outcome of a trace whose worker never answered: died, or was stopped over its budget."""
    cfg, config, target = job
    return Outcome(trace_name(cfg), cfg, config, target, ERROR, why, lost=True)


def run_suite(jobs: list[tuple[str, str, str]], workers: int = 1,
              budget_s: float | None = DEFAULT_TRACE_BUDGET_S) -> Iterator[Outcome]:
    """Outcomes of (cfg, config, target) jobs, yielded in job order as they complete. With several
    workers, a worker that dies makes its trace an ERROR ("worker killed by SIGKILL") and is replaced;
    closing the iterator (or an interrupt while waiting) stops the workers."""
    if workers <= 1 or len(jobs) <= 1:
        for job in jobs:
            yield run_trace(*job, budget_s=budget_s)
        return
    yield from run_in_workers([Task(run_trace, (*job, budget_s), job) for job in jobs], workers,
                              lost=_lost, hard_limit_s=None if budget_s is None else budget_s * 1.2 + 10)


def collect(paths: list[Path], config: str | None) -> list[tuple[Path, str]]:
    """(cfg, config) for every trace under ``paths``; raises ValueError for a path that does not exist
    or whose config cannot be inferred."""
    out = []
    for p in paths:
        if not p.exists():
            raise ValueError(f"{p}: no such file or directory")
        cfg_name = config or infer_config(p)
        if cfg_name is None:
            raise ValueError(f"{p}: cannot infer the hardware config from the path; pass --config NAME "
                             f"({', '.join(PRESETS)})")
        get_config(cfg_name)
        traces = find_traces(p, txn=True)
        if not traces:
            raise ValueError(f"{p}: no .cfg or input.txn traces found")
        out.extend((t, cfg_name) for t in traces)
    return out
