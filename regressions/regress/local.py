"""Launchers that run on this machine: the whole plan under pytest-xdist, or one self-contained unit.

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

from dlaio import write_atomic
from runtime.processes import Terminated, dying_with_parent, interrupt_exit_code
from regressions.regress.lists import REPO
from regressions.regress.plan import Plan, pytest_command, test_env, workers
from regressions.regress.results import Record, RecordWriter, read_records, write_junit

#: After Ctrl-C, how long pytest gets to stop its workers and flush before it is killed.
GRACE_S = 60.0


class Interrupted(Exception):
    """The run was stopped (Ctrl-C or SIGTERM); what ran is still reported. ``exit_code``: 130 or 143."""

    def __init__(self, exit_code: int = 130) -> None:
        super().__init__(f"interrupted (exit {exit_code})")
        self.exit_code = exit_code


def _sigterm(signum, frame) -> None:
    raise Terminated()


def _kill_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def run_pytest(cmd: list[str], env: dict[str, str], log: Path | None = None) -> int:
    """Run ``cmd``; on Ctrl-C/SIGTERM let it finish writing (one SIGINT to its group, then SIGKILL after
    ``GRACE_S``) and raise ``Interrupted``. Output goes to the terminal, or to ``log`` when given."""
    out = open(log, "w") if log else None
    proc = subprocess.Popen(dying_with_parent(cmd), cwd=REPO, env=env, stdout=out,
                            stderr=subprocess.STDOUT if out else None, start_new_session=True)
    previous = signal.signal(signal.SIGTERM, _sigterm)
    try:
        return proc.wait()
    except KeyboardInterrupt as exc:
        _kill_group(proc.pid, signal.SIGINT)  # what a terminal's Ctrl-C would do to pytest and its workers
        try:
            proc.wait(timeout=GRACE_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        raise Interrupted(interrupt_exit_code(exc)) from None
    finally:
        signal.signal(signal.SIGTERM, previous)
        _kill_group(proc.pid, signal.SIGKILL)  # a worker or simulator pytest left behind
        if out:
            out.close()


def launch(plan: Plan, run_dir: Path) -> int:
    """All selected units in one pytest-xdist session. Returns pytest's exit status."""
    jobs = workers(plan.jobs)
    args = plan.pytest_args()
    if not args:
        return 5  # pytest's "no tests collected"
    cmd = pytest_command(run_dir, run_dir / "local", args, jobs)
    return run_pytest(cmd, test_env(plan, run_dir / "local"))


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
            status = run_pytest(cmd, test_env(plan, out), log=out / "pytest.log")
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
