"""The launcher that runs on this machine: the whole plan under pytest-xdist, or one self-contained unit.

Both run pytest as a child process so that Ctrl-C, a SIGTERM from CI or a worker that dies leave the
launcher alive to write the report from the records already on disk. pytest runs in a process group of
its own: an interrupt reaches it exactly once, from the launcher (a second SIGINT during its shutdown used
to abort that shutdown half-way), and the whole group (xdist workers, simulators) is killed if it does not
stop in time. pytest dies with the launcher (PR_SET_PDEATHSIG), its workers with it (``plugin``).
"""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
from pathlib import Path
from typing import IO

from dlaio import write_atomic
from runtime.processes import dying_with_parent
from regressions.regress.launcher import Launcher, drive
from regressions.regress.lists import REPO
from regressions.regress.plan import Plan, pytest_command, test_env, workers
from regressions.regress.results import Record, RecordWriter, read_records, write_junit

#: After Ctrl-C, how long pytest gets to stop its workers and flush before it is killed.
GRACE_S = 60.0


def _kill_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


class LocalLauncher(Launcher):
    """One pytest child (the whole plan under pytest-xdist, or one unit). Output goes to the terminal, or to
    ``log`` when given. On Ctrl-C/SIGTERM it may finish writing: one SIGINT to its group, then SIGKILL after
    ``GRACE_S``."""

    def __init__(self, cmd: list[str] | None, env: dict[str, str], log: Path | None = None) -> None:
        self.cmd, self.env, self.log = cmd, env, log
        self.proc: subprocess.Popen | None = None
        self._out: IO[str] | None = None

    @classmethod
    def for_run(cls, plan: Plan, run_dir: Path, lists_dir: Path | None) -> LocalLauncher:
        """All selected units in one pytest-xdist session; no command when no unit has tests."""
        args = plan.pytest_args()
        cmd = pytest_command(run_dir, run_dir / "local", args, workers(plan.jobs)) if args else None
        return cls(cmd, test_env(plan, run_dir / "local"))

    def launch(self) -> None:
        if self.cmd is None:
            return
        self._out = open(self.log, "w") if self.log else None
        self.proc = subprocess.Popen(dying_with_parent(self.cmd), cwd=REPO, env=self.env, stdout=self._out,
                                     stderr=subprocess.STDOUT if self._out else None, start_new_session=True)

    def poll(self) -> bool:
        return self.proc is None or self.proc.poll() is not None

    def kill(self) -> None:
        if self.proc is None:
            return
        _kill_group(self.proc.pid, signal.SIGINT)  # what a terminal's Ctrl-C would do to pytest and its workers
        try:
            self.proc.wait(timeout=GRACE_S)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()

    def finish(self, why: str = "") -> int:
        """pytest's exit status (5, "no tests collected", when there was nothing to run)."""
        if self.proc is None:
            return 5
        _kill_group(self.proc.pid, signal.SIGKILL)  # a worker or simulator pytest left behind
        if self._out:
            self._out.close()
        return self.proc.wait()


def run_unit(run_dir: Path, unit_id: str, seed: int | None = None, level: str | None = None) -> int:
    """One unit, self-contained: ``(design hash, unit id, seed) -> units/<id>/{results.jsonl, result.xml,
    unit.json, artifacts/}``. The farm launchers' array tasks call this (``python -m regressions.regress
    unit``). Exit 0 when the unit ran, whatever its tests' outcomes."""
    plan = Plan.read(run_dir)
    if seed is not None:
        plan.seed = seed
    if level is not None and level != plan.level.name:
        raise SystemExit(f"unit {unit_id}: plan of {run_dir} is level {plan.level.name}, not {level}")
    units = {u["id"]: u for u in plan.units}
    if unit_id not in units:
        raise SystemExit(f"unit {unit_id}: not in the plan of {run_dir}")
    out = run_dir / "units" / unit_id
    out.mkdir(parents=True, exist_ok=True)
    meta = {"unit": unit_id, "design_hash": plan.design_hash, "seed": plan.seed, "level": plan.level.name,
            "host": socket.gethostname(), "started": time.time()}
    args = plan.pytest_args(unit_id)
    status = 5
    try:
        if args:
            cmd = pytest_command(run_dir, out, args, None)
            cmd.insert(cmd.index("--"), f"--regress-only={unit_id}")
            status = drive(LocalLauncher(cmd, test_env(plan, out), log=out / "pytest.log"))
    finally:
        records = [r for r in read_records(out) if r.unit == unit_id]
        if status not in (0, 1, 5) and not records:
            u = units[unit_id]
            writer = RecordWriter(out)
            tail = "\n".join((out / "pytest.log").read_text(errors="replace").splitlines()[-30:]) \
                if (out / "pytest.log").exists() else ""
            writer.write(Record(nodeid=f"{unit_id}::<unit>", unit=unit_id, area=u["area"], target=u["target"],
                                outcome="error", longrepr=f"pytest exited {status} without results\n{tail}",
                                seed=plan.seed, finished=time.time()))
            writer.close()
            records = read_records(out)
        write_junit(records, out / "result.xml", {"design_hash": plan.design_hash, "seed": str(plan.seed)})
        meta.update(finished=time.time(), exit=status, tests=len(records))
        write_atomic(out / "unit.json", json.dumps(meta, indent=1))
    return 0
