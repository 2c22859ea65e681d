"""``python -m regressions.fuzz`` as real processes under signals: SIGTERM and Ctrl-C print the table of
what ran and exit 143/130; on a simulator target they stop the simulations, and a ``kill -9`` of the
driver takes its simulator with it. Timeouts are hang guards only, never assertions."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
from runtime.processes import wait_gone
from tests.tb.conftest import available, simulators

HANG_GUARD_S = 600


def start(tmp_path: Path, *args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "regressions.fuzz", "--seconds", "3600", "--seed", "5",
                             "--found-dir", str(tmp_path / "found"), *args], cwd=REPO, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)


def wait_for_line(proc: subprocess.Popen, prefix: str) -> None:
    assert proc.stdout is not None
    for line in proc.stdout:  # ends at EOF: the driver died first
        if line.startswith(prefix):
            return
    pytest.fail(f"no line starting {prefix!r}: {proc.communicate()}")


def wait_for_simulator(proc: subprocess.Popen) -> set[int]:
    deadline = time.monotonic() + HANG_GUARD_S
    while time.monotonic() < deadline:
        found = simulators(proc.pid)
        if found:
            return found
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.1)
    proc.kill()
    pytest.fail("no simulation started")


def left_alive(pids) -> list[int]:
    """The pids still alive after a while (a hang guard, not a timing check)."""
    return wait_gone(sorted(pids), 60)


@pytest.mark.parametrize("sig, code", [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_golden_run_stops_with_its_table(tmp_path: Path, sig: int, code: int) -> None:
    proc = start(tmp_path, "--property", "pdp")
    wait_for_line(proc, "[")  # the first progress line: examples ran
    if sig == signal.SIGINT:
        os.killpg(proc.pid, sig)  # a terminal's Ctrl-C
    else:
        proc.send_signal(sig)
    out, err = proc.communicate(timeout=HANG_GUARD_S)
    assert proc.returncode == code, out + err
    assert "interrupted: reporting what ran" in out and "Traceback" not in err
    table = out[out.index("property "):].splitlines()
    assert table[0].split() == ["property", "configs", "examples", "examples/s", "failures"]
    assert table[1].startswith("pdp ")


@pytest.mark.skipif(not available("icarus"), reason="iverilog not installed")
def test_simulator_run_sigterm_stops_the_simulation(tmp_path: Path) -> None:
    proc = start(tmp_path, "--target", "icarus", "--property", "pdp")
    running = wait_for_simulator(proc)
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=HANG_GUARD_S)
    assert proc.returncode == 143, out + err
    assert "Traceback" not in err and "property " in out
    assert not left_alive(running)


@pytest.mark.skipif(not available("icarus"), reason="iverilog not installed")
def test_kill_9_of_the_driver_takes_its_simulator_with_it(tmp_path: Path) -> None:
    proc = start(tmp_path, "--target", "icarus", "--property", "pdp")
    running = wait_for_simulator(proc)
    os.kill(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=HANG_GUARD_S)
    assert not left_alive(running)


@pytest.mark.skipif(not available("icarus"), reason="iverilog not installed")
def test_a_killed_simulator_is_a_note_not_an_rtl_failure(tmp_path: Path) -> None:
    proc = start(tmp_path, "--target", "icarus", "--property", "sdp", "--examples", "20")  # one batch
    (victim, *_) = wait_for_simulator(proc)
    os.kill(victim, signal.SIGKILL)
    out, err = proc.communicate(timeout=HANG_GUARD_S)
    assert proc.returncode == 0, out + err
    assert "FAIL" not in out and not (tmp_path / "found").exists()
    assert "simulator killed by SIGKILL while playing this trace" in out and "note: sdp on nv_small: " in out
