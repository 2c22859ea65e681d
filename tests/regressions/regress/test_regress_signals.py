"""``python -m regressions.regress`` as real processes under signals: an xdist worker killed mid-test is an
error naming the signal and the run goes on; SIGTERM of the launcher writes the report and exits 143;
nothing the run started survives the launcher, even its ``kill -9``. Timeouts are hang guards only."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from junitparser import JUnitXml

from regressions.regress.lists import REPO
from tests.regressions.regress.test_regress import LEVELS, _env, unit
from runtime.processes import descendants, wait_gone

SAMPLE = "tests/regressions/regress/samples/sample_victim.py"
HANG_GUARD_S = 300


@pytest.fixture
def victim_lists(tmp_path: Path) -> Path:
    d = tmp_path / "lists"
    d.mkdir()
    (d / "levels.toml").write_text(LEVELS)
    (d / "victim.toml").write_text(unit("victim", "golden-area", "golden", "smoke", [f"{SAMPLE}::*"]))
    return d


def start(lists: Path, tmp_path: Path) -> tuple[subprocess.Popen, Path]:
    pid_file = tmp_path / "victim.pid"
    proc = subprocess.Popen([sys.executable, "-m", "regressions.regress", "--lists", str(lists), "--level", "smoke",
                             "--jobs", "2", "--out", str(tmp_path / "out")], cwd=REPO,
                            env=_env(7, DLA_REGRESS_VICTIM_PID=str(pid_file)), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    return proc, pid_file


def victim_pid(proc: subprocess.Popen, pid_file: Path) -> int:
    deadline = time.monotonic() + HANG_GUARD_S
    while time.monotonic() < deadline:
        if pid_file.exists():
            return int(pid_file.read_text())
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.1)
    proc.kill()
    pytest.fail("the victim test never started")


def left_alive(pids) -> list[int]:
    """The pids still alive after a while (a hang guard, not a timing check)."""
    return wait_gone(sorted(pids), 60)


def test_a_killed_worker_is_an_error_naming_the_signal(victim_lists: Path, tmp_path: Path) -> None:
    proc, pid_file = start(victim_lists, tmp_path)
    os.kill(victim_pid(proc, pid_file), signal.SIGKILL)
    text, _ = proc.communicate(timeout=HANG_GUARD_S)
    assert proc.returncode == 1, text
    run = (tmp_path / "out" / "latest").resolve()
    summary = json.loads((run / "summary.json").read_text())
    assert summary["counts"]["passed"] == 3 and summary["counts"]["error"] == 1, summary["counts"]
    (failure,) = summary["failures"]
    assert failure["nodeid"].endswith("::test_victim")
    assert "worker killed by SIGKILL" in (run / failure["artifacts"] / "log.txt").read_text()
    assert JUnitXml.fromfile(str(run / "junit.xml")).tests == 4


def test_sigterm_writes_the_report_and_leaves_no_process(victim_lists: Path, tmp_path: Path) -> None:
    proc, pid_file = start(victim_lists, tmp_path)
    victim_pid(proc, pid_file)
    started = descendants(proc.pid)
    proc.send_signal(signal.SIGTERM)  # CI's SIGTERM: the launcher only
    text, _ = proc.communicate(timeout=HANG_GUARD_S)
    assert proc.returncode == 143, text
    assert "Traceback" not in text
    summary = json.loads(((tmp_path / "out" / "latest").resolve() / "summary.json").read_text())
    assert summary["interrupted"]
    assert not left_alive(started)


def test_kill_9_of_the_launcher_takes_pytest_and_its_workers_with_it(victim_lists: Path, tmp_path: Path) -> None:
    proc, pid_file = start(victim_lists, tmp_path)
    victim_pid(proc, pid_file)
    started = descendants(proc.pid)
    assert len(started) >= 3  # pytest and its two workers
    os.kill(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=HANG_GUARD_S)  # EOF: nothing left holds the output open
    assert not left_alive(started)
