"""Running trace suites: one outcome per trace (PASS, FAIL, N/A, ERROR), in parallel processes.

Every trace runs in isolation on a fresh target. Outcomes are plain data so they cross process
boundaries and serialize to JSON and JUnit XML.
"""
from __future__ import annotations

import asyncio
import time
import traceback
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable, Iterator

from golden.config import PRESETS, HwConfig, get_config
from golden.errors import ConfigError, DlaError, RegisterError, UnsupportedError
from golden.regs import register_map
from runtime.player import PlayResult, play
from runtime.target import InterruptTimeout, Target
from runtime.trace import TraceError, find_traces, parse_cfg

PASS, FAIL, NA, ERROR = "PASS", "FAIL", "N/A", "ERROR"

TargetFactory = Callable[[HwConfig], Target]


def _golden(hw: HwConfig) -> Target:
    from runtime.golden_target import GoldenTarget

    return GoldenTarget(hw)


#: Targets by name. The testbench registers its simulators here (``register_target``).
TARGETS: dict[str, TargetFactory] = {"golden": _golden}


def register_target(name: str, factory: TargetFactory) -> None:
    TARGETS[name] = factory


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

    def line(self) -> str:
        text = f"{self.status:<5} {self.name}"
        if self.detail:
            text += f": {self.detail}"
        return text

    def to_dict(self) -> dict:
        return asdict(self)


def infer_config(path: Path) -> str | None:
    """The preset named by the nearest enclosing folder of ``path`` (e.g. ``.../traces/nv_small/x``)."""
    for part in reversed(path.resolve().parts):
        if part in PRESETS:
            return part
    return None


def run_trace(cfg: str, config: str, target: str = "golden") -> Outcome:
    """Parse and play one trace on a fresh target; never raises for a trace's own problems."""
    path = Path(cfg)
    name = path.parent.name if path.stem == path.parent.name else f"{path.parent.name}/{path.stem}"
    out = Outcome(name, str(path), config, target, ERROR)
    start = time.perf_counter()
    try:
        hw = get_config(config)
        trace = parse_cfg(path, register_map(hw.address_map), name=name)
        missing = trace.missing_files()
        if missing:
            out.status, out.detail = NA, f"missing data file {missing[0].name}"
            return out
        tgt = TARGETS[target](hw)
        result: PlayResult = asyncio.run(play(trace, tgt))
        out.checks = [c.__dict__ for c in result.checks]
        if not result.checks:
            out.status, out.detail = ERROR, "trace has no checks"
        elif result.passed:
            out.status = PASS
        else:
            out.status = FAIL
            out.detail = "; ".join(c.describe() for c in result.failures())
    except TraceError as exc:
        out.status, out.detail, out.bad_input = ERROR, str(exc), True
    except UnsupportedError as exc:
        out.status, out.detail = NA, f"needs {exc.unit}: {exc}"
    except (ConfigError, RegisterError, InterruptTimeout, DlaError) as exc:
        out.status, out.detail = ERROR, f"{type(exc).__name__}: {exc}"
    except Exception as exc:  # an internal bug: keep going, keep the traceback for the JSON report
        out.status, out.detail = ERROR, f"internal error {type(exc).__name__}: {exc}"
        out.traceback = traceback.format_exc()
    finally:
        out.seconds = time.perf_counter() - start
    return out


def _run_packed(args: tuple[str, str, str]) -> Outcome:
    return run_trace(*args)


def run_suite(jobs: list[tuple[str, str, str]], workers: int = 1) -> Iterator[Outcome]:
    """Outcomes of (cfg, config, target) jobs, yielded in job order as they complete."""
    if workers <= 1 or len(jobs) <= 1:
        for job in jobs:
            yield run_trace(*job)
        return
    with ProcessPoolExecutor(max_workers=workers) as pool:
        yield from pool.map(_run_packed, jobs, chunksize=1)


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
        traces = find_traces(p)
        if not traces:
            raise ValueError(f"{p}: no .cfg traces found")
        out.extend((t, cfg_name) for t in traces)
    return out
