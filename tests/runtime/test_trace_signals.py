"""``dla trace -j 2`` as real processes under signals: a killed worker costs only its trace, SIGTERM/SIGINT
stop the run with its report written (exit 143/130), and no worker outlives ``dla`` (even ``kill -9``).

Slow traces are synthetic nvdlav1 traces whose reads never match (each read_reg polls a million times);
fast ones are the passing .cfg trace of conftest. Timeouts below are hang guards only, never assertions.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from runtime.player import MAX_POLL_READS
from runtime.processes import alive, children, wait_gone
from runtime.trace import write_dat
from tests.runtime.conftest import PAYLOAD, passing_lines

DLA = [sys.executable, "-m", "app.cli"] if not (Path(sys.executable).parent / "dla").exists() \
    else [str(Path(sys.executable).parent / "dla")]
HANG_GUARD_S = 300
#: A read of BDMA.CFG_DST_SURF_0 (reset 0) that never reads 0xf0a5a500.
NEVER = "read_reg 0xffff100b 0xffffffe0 0xf0a5a500 #NVDLA_BDMA.CFG_DST_SURF_0"


def fast_traces(root: Path, n: int = 4) -> Path:
    folder = root / "fast" / "nv_small"
    for i in range(n):
        d = folder / f"fast_{i}"
        d.mkdir(parents=True)
        write_dat(d / "in.dat", PAYLOAD)
        (d / f"fast_{i}.cfg").write_text("\n".join(passing_lines()) + "\n")
    return folder


def slow_traces(root: Path, names: tuple[str, ...] = ("slow_a", "slow_b"), reads: int = 1,
                retries: int = MAX_POLL_READS) -> Path:
    folder = root / "slow" / "nv_full"
    for name in names:
        d = folder / name
        d.mkdir(parents=True)
        (d / "input.txn").write_text("\n".join([NEVER] * reads) + "\n")
        (d / "plusargs.txt").write_text(f"+read_reg_poll_retries={retries} +continue_on_fail\n")
    return folder


def start(args: list[str], cwd: Path) -> subprocess.Popen:
    return subprocess.Popen([*DLA, "trace", *args], cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)


def cpu_seconds(pid: int) -> float:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return 0.0
    fields = stat[stat.rfind(")") + 2:].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


def wait_for_workers(proc: subprocess.Popen, n: int = 2, busy: bool = False) -> set[int]:
    """The worker pids once ``n`` exist (and, with ``busy``, each has spent CPU on a trace: an idle worker
    waiting for its first task uses none)."""
    deadline = time.monotonic() + HANG_GUARD_S
    while time.monotonic() < deadline:
        kids = set(children(proc.pid))
        if len(kids) >= n and (not busy or all(cpu_seconds(k) > 0.3 for k in kids)):
            return kids
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.05)
    proc.kill()
    pytest.fail("the workers never started")


def read_lines(proc: subprocess.Popen, n: int) -> list[str]:
    """The first ``n`` lines of stdout (each trace prints one as it finishes, in order)."""
    assert proc.stdout is not None
    return [proc.stdout.readline() for _ in range(n)]


def left_alive(pids) -> list[int]:
    """The pids still alive after a while (a hang guard, not a timing check)."""
    return wait_gone(sorted(pids), 60)


def test_a_killed_worker_is_an_error_naming_the_signal(tmp_path: Path) -> None:
    slow = slow_traces(tmp_path)
    fast = fast_traces(tmp_path)
    proc = start([str(slow), str(fast), "-j", "2", "--json", "r.json", "--junit", "r.xml"], tmp_path)
    workers = wait_for_workers(proc, busy=True)  # both on a slow trace (they come first)
    victim = min(workers)
    os.kill(victim, signal.SIGKILL)
    out, err = proc.communicate(timeout=HANG_GUARD_S)
    assert proc.returncode == 1, out + err
    assert "Traceback" not in err and "BrokenProcessPool" not in err + out
    lines = out.splitlines()
    errors = [ln for ln in lines if ln.startswith("ERROR")]
    assert len(errors) == 1 and errors[0].endswith(": worker killed by SIGKILL"), out
    assert sum(ln.startswith("PASS") for ln in lines) == 4
    assert lines[-1] == "4 passed, 2 failed, 0 skipped"
    doc = json.loads((tmp_path / "r.json").read_text())
    assert doc["summary"] == lines[-1] and len(doc["traces"]) == 6
    assert sorted(t["status"] for t in doc["traces"]) == ["ERROR", "FAIL", "PASS", "PASS", "PASS", "PASS"]
    assert [t["status"] for t in doc["traces"] if t.get("lost")] == ["ERROR"]  # the process died, not the trace
    assert "worker killed by SIGKILL" in (tmp_path / "r.xml").read_text()
    assert not {p for p in workers if alive(p)}


@pytest.mark.parametrize("sig, code", [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_sigterm_and_sigint_stop_the_run_and_report_what_finished(tmp_path: Path, sig: int, code: int) -> None:
    fast = fast_traces(tmp_path)
    slow = slow_traces(tmp_path, reads=50)  # far longer than the test waits
    proc = start([str(fast), str(slow), "-j", "2", "--json", "r.json"], tmp_path)
    finished = read_lines(proc, 4)  # the fast traces reported: the slow ones are running now
    assert all(ln.startswith("PASS") for ln in finished), finished
    workers = wait_for_workers(proc)
    if sig == signal.SIGINT:
        os.killpg(proc.pid, sig)  # a terminal's Ctrl-C: the whole foreground group
    else:
        proc.send_signal(sig)  # CI's SIGTERM: the parent only
    out, err = proc.communicate(timeout=HANG_GUARD_S)
    assert proc.returncode == code, out + err
    assert "Traceback" not in err and "interrupted" in err
    assert out.splitlines()[-1] == "4 passed, 0 failed, 0 skipped"
    doc = json.loads((tmp_path / "r.json").read_text())
    assert [t["status"] for t in doc["traces"]] == ["PASS"] * 4
    assert not left_alive(workers | set(children(proc.pid)))


def test_kill_9_of_dla_takes_its_workers_with_it(tmp_path: Path) -> None:
    slow = slow_traces(tmp_path, reads=50)
    proc = start([str(slow), "-j", "2"], tmp_path)
    workers = wait_for_workers(proc)
    os.kill(proc.pid, signal.SIGKILL)
    out, _ = proc.communicate(timeout=HANG_GUARD_S)  # EOF: no worker holds stdout open
    assert proc.returncode == -signal.SIGKILL
    assert not left_alive(workers)


def test_poll_retries_above_the_cap_are_refused_before_playing(tmp_path: Path) -> None:
    """10^12 retries of a never-matching read would poll for hours: refused at parse time, naming
    plusargs.txt:line and the cap (bad input, exit 2), with the report still written."""
    slow = slow_traces(tmp_path, names=("huge",), retries=10**12)
    (slow / "huge" / "plusargs.txt").write_text("+continue_on_fail\n+read_reg_poll_retries=1000000000000\n")
    r = subprocess.run([*DLA, "trace", str(slow), "--json", "r.json"], cwd=tmp_path, capture_output=True,
                       text=True, timeout=HANG_GUARD_S)
    assert r.returncode == 2, r.stdout + r.stderr
    line = r.stdout.splitlines()[0]
    assert line == (f"ERROR huge: {slow / 'huge' / 'plusargs.txt'}:2: +read_reg_poll_retries=1000000000000: "
                    f"expected a number of reads from 0 to {MAX_POLL_READS:,}")
    assert json.loads((tmp_path / "r.json").read_text())["traces"][0]["status"] == "ERROR"


def test_a_poll_above_the_cap_built_in_code_still_ends_naming_register_and_line(monkeypatch) -> None:
    """The player keeps its own cap for PollReg commands that did not come from a parsed plusargs.txt."""
    import asyncio

    from golden.config import PRESETS
    from golden.regs import register_map
    from runtime import player
    from runtime.golden_target import GoldenTarget
    from runtime.trace import Trace
    from runtime.txn import PollReg

    monkeypatch.setattr(player, "MAX_POLL_READS", 50)
    addr, reg = register_map().resolve("NVDLA_GLB.S_INTR_MASK_0")
    never = PollReg(1, reg.full_name, addr, 0x12345678, 0xFFFFFFFF, retries=51)
    with pytest.raises(player.BudgetExceeded, match=rf"t.txn:1: read_reg {reg.full_name} polled 50 times"):
        asyncio.run(player.play(Trace("t", Path("t.txn"), [never]), GoldenTarget(PRESETS["nv_small"])))


def test_a_trace_over_its_time_budget_is_an_error(tmp_path: Path) -> None:
    slow = slow_traces(tmp_path, names=("slow_a",), reads=50)
    r = subprocess.run([*DLA, "trace", str(slow), "--timeout", "1"], cwd=tmp_path, capture_output=True,
                       text=True, timeout=HANG_GUARD_S)
    assert r.returncode == 1, r.stdout + r.stderr
    assert r.stdout.startswith("ERROR slow_a: ") and "wall-clock budget" in r.stdout and "input.txn:" in r.stdout
