"""`dla trace --target icarus` as real processes under signals: a killed simulator costs only the trace it
was playing (a new simulation plays the rest), SIGTERM ends the run with its report (exit 143) and no
simulator outlives ``dla``, even after ``kill -9``. Timeouts are hang guards only, never assertions."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from regressions.lib.fixture_dut import FIXTURE_DIR, copy_trace, fixture_header, write_trace
from runtime.processes import wait_gone
from tests.tb.conftest import available, simulators

pytestmark = pytest.mark.skipif(not available("icarus"), reason="iverilog not installed")

DLA = str(Path(sys.executable).parent / "dla")
HANG_GUARD_S = 600
#: CACC is advertised by the fixture's CFGROM but never finishes: with a huge cycle budget, a trace that
#: waits for it keeps its simulation busy for as long as a test needs.
HANG = ["reg_write(NVDLA_GLB.S_INTR_MASK_0, 0x3f03fc);", "reg_write(NVDLA_CACC.D_OP_ENABLE_0, 0x1);",
        "intr_notify(CACC_0, s0);", "check_nothing(s0);"]


@pytest.fixture
def fixture_filelist(tmp_path: Path) -> Path:
    inc = tmp_path / "inc"
    inc.mkdir()
    (inc / "fixture_regs.vh").write_text(fixture_header())
    f = tmp_path / "fixture.f"
    f.write_text(f"+incdir+inc\n{FIXTURE_DIR / 'NV_nvdla.v'}\n")
    return f


def start(tmp_path: Path, filelist: Path, *args: str) -> subprocess.Popen:
    env = {**os.environ, "DLA_SIM_BUILD": str(tmp_path / "sim")}  # private builds: the DUT lives in tmp_path
    cmd = [DLA, "trace", str(tmp_path / "traces" / "nv_small"), "--target", "icarus", "--rtl-filelist",
           str(filelist), "--timeout-cycles", "2000000000", "--reset-idle-cycles", "8", "--json", "r.json", *args]
    return subprocess.Popen(cmd, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)


def wait_for_simulators(proc: subprocess.Popen, n: int) -> set[int]:
    deadline = time.monotonic() + HANG_GUARD_S
    while time.monotonic() < deadline:
        found = simulators(proc.pid)
        if len(found) >= n:
            return found
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.1)
    proc.kill()
    pytest.fail("the simulations never started")


def left_alive(pids) -> list[int]:
    """The pids still alive after a while (a hang guard, not a timing check)."""
    return wait_gone(sorted(pids), 60)


def test_a_killed_simulator_costs_only_the_trace_it_was_playing(tmp_path: Path, fixture_filelist: Path) -> None:
    root = tmp_path / "traces"
    write_trace(root, "a_hang", HANG)
    for name in ("b_copy", "c_copy", "d_copy"):
        copy_trace(root, name, 16)
    proc = start(tmp_path, fixture_filelist, "-j", "1")  # one simulation, playing the traces in order
    (victim,) = wait_for_simulators(proc, 1)
    os.kill(victim, signal.SIGKILL)
    out, err = proc.communicate(timeout=HANG_GUARD_S)
    assert proc.returncode == 1, out + err
    lines = out.splitlines()
    assert lines[0].startswith("ERROR a_hang: simulator killed by SIGKILL while playing this trace"), out
    assert lines[1:4] == ["PASS  b_copy", "PASS  c_copy", "PASS  d_copy"]
    assert lines[-1] == "3 passed, 1 failed, 0 skipped"
    doc = json.loads((tmp_path / "r.json").read_text())
    assert [t["status"] for t in doc["traces"]] == ["ERROR", "PASS", "PASS", "PASS"]


def test_sigterm_stops_the_simulations_and_reports(tmp_path: Path, fixture_filelist: Path) -> None:
    root = tmp_path / "traces"
    write_trace(root, "a_hang", HANG)
    write_trace(root, "b_hang", HANG)
    proc = start(tmp_path, fixture_filelist, "-j", "2")
    running = wait_for_simulators(proc, 2)
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=HANG_GUARD_S)
    assert proc.returncode == 143, out + err
    assert "Traceback" not in err and out.splitlines()[-1] == "0 passed, 0 failed, 0 skipped"
    assert json.loads((tmp_path / "r.json").read_text())["traces"] == []
    assert not left_alive(running)


def test_kill_9_of_dla_takes_its_simulators_with_it(tmp_path: Path, fixture_filelist: Path) -> None:
    root = tmp_path / "traces"
    write_trace(root, "a_hang", HANG)
    write_trace(root, "b_hang", HANG)
    proc = start(tmp_path, fixture_filelist, "-j", "2")
    running = wait_for_simulators(proc, 2)
    os.kill(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=HANG_GUARD_S)  # EOF: no simulator holds stdout open
    assert not left_alive(running)


def test_a_trace_over_its_time_budget_stops_its_simulation(tmp_path: Path, fixture_filelist: Path) -> None:
    root = tmp_path / "traces"
    write_trace(root, "a_hang", HANG)  # within its cycle budget for hours, so only the wall clock stops it
    for name in ("b_copy", "c_copy"):
        copy_trace(root, name, 16)
    proc = start(tmp_path, fixture_filelist, "-j", "1", "--timeout", "5")
    out, err = proc.communicate(timeout=HANG_GUARD_S)
    assert proc.returncode == 1, out + err
    lines = out.splitlines()
    assert lines[0].startswith("ERROR a_hang: simulation stopped after 5 s on this trace (over its time budget"), out
    assert lines[1:3] == ["PASS  b_copy", "PASS  c_copy"]
    doc = json.loads((tmp_path / "r.json").read_text())
    assert [t["status"] for t in doc["traces"]] == ["ERROR", "PASS", "PASS"] and "lost" not in doc["traces"][0]
