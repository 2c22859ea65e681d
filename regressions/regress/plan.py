"""A regression run's plan (``<run>/plan.json``) and the environment and pytest command of its tests.

The plan is everything a test unit needs to run on its own, on this machine or on a farm node:
the unit table, which units (or which exact node ids, for ``RERUN=failed``) run, the level's
environment, the seed and the design hash. Launchers only decide *where* the pytest processes run.
"""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from dlaio import write_atomic
from regressions.regress.lists import REPO, Level, Unit

PLAN = "plan.json"


@dataclass
class Plan:
    level: Level
    #: Every unit of the lists (a test's unit is decided among all of them), as JSON dicts.
    units: list[dict]
    #: Ids of the units that run.
    selected: list[str]
    seed: int
    jobs: str
    launcher: str
    design_hash: str
    #: Exact node ids to run instead of whole units (``RERUN=failed``).
    nodeids: list[str] | None = None
    rerun_of: str | None = None
    #: Seconds each test took in the previous run: the longest start first (less idle tail).
    durations: dict[str, float] = field(default_factory=dict)
    started: float = field(default_factory=time.time)
    host: str = field(default_factory=socket.gethostname)
    git: str = ""
    command: str = ""

    def write(self, run_dir: Path) -> Path:
        path = run_dir / PLAN
        data = asdict(self)
        write_atomic(path, json.dumps(data, indent=1))
        return path

    @classmethod
    def read(cls, run_dir: Path) -> Plan:
        data = json.loads((run_dir / PLAN).read_text())
        data["level"] = Level(**data["level"])
        return cls(**data)

    def selected_units(self) -> list[Unit]:
        wanted = set(self.selected)
        return [Unit.from_json(u) for u in self.units if u["id"] in wanted]

    def pytest_args(self, unit: str | None = None) -> list[str]:
        """Files (or exact node ids) to hand pytest; for one unit, only that unit's."""
        if self.nodeids is not None:
            if unit is None:
                return list(self.nodeids)
            from regressions.regress.lists import Matcher

            matcher = Matcher([Unit.from_json(u) for u in self.units])
            return [n for n in self.nodeids if (u := matcher.unit_of(n)) is not None and u.id == unit]
        chosen = self.selected_units() if unit is None else [Unit.from_json(u) for u in self.units if u["id"] == unit]
        args: list[str] = []
        for u in chosen:
            args.extend(f for f in u.files() if f not in args)
        return args


def git_commit() -> str:
    try:
        out = subprocess.run(["git", "-C", str(REPO), "describe", "--always", "--dirty"], capture_output=True,
                             text=True, timeout=10)
        return out.stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def cpu_count() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def workers(jobs: str) -> int:
    return cpu_count() if jobs == "auto" else max(1, int(jobs))


def test_env(plan: Plan, out: Path) -> dict[str, str]:
    """Environment of the test processes writing to ``out``: the level's sizes, the run seed, where
    coverage goes (``DLA_COVERAGE=1`` levels; functional bins and Verilator line/toggle coverage), and
    one BLAS/onnxruntime thread and one simulation at a time per worker whatever ``JOBS`` is: parallelism is the workers' (N workers
    each spawning all-core pools only thrash), and float references do not change with ``JOBS``."""
    env = dict(os.environ)
    env.update(plan.level.env)
    env["FUZZ_SEED"] = str(plan.seed)
    if env.get("DLA_COVERAGE") == "1":
        env["DLA_COVERAGE_DIR"] = str(out / "coverage")
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "DLA_SIM_WORKERS"):
        env.setdefault(var, "1")
    return env


def pytest_command(run_dir: Path, out: Path, args: list[str], jobs: int | None) -> list[str]:
    """The pytest invocation of a run (``jobs`` workers via xdist) or of one unit (``jobs`` None)."""
    cmd = [sys.executable, "-m", "pytest", "-p", "regressions.regress.plugin", "-p", "regressions.coverage.plugin",
           "-p", "no:cacheprovider",
           "--regress-units", str(run_dir / PLAN), "--regress-out", str(out), "-q", "-rfE",
           "--color=no", "-o", "console_output_style=count"]
    if jobs is not None and jobs > 1:
        # worksteal: a worker that finishes early takes queued tests from the busy one (long RTL tests).
        cmd += ["-n", str(jobs), "--dist", "worksteal"]
    else:
        cmd += ["-p", "no:xdist"]
    return cmd + ["--", *args]
