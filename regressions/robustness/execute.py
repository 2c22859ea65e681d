"""Run one attack in a fresh temp dir and measure what the promise is about.

The child is `.venv/bin/dla` under ``probe.py`` (its own session, so its workers are findable
afterwards; RLIMIT_AS 4 GiB as a safety net; peak RSS from ``getrusage(RUSAGE_CHILDREN)`` after its
wait), with a hang guard that kills the session after ``HANG_SECONDS``. Every entry of the temp dir is fingerprinted before and after
(content hash, or kind and device number for device nodes, FIFOs and symlinks) so a clobbered input,
a replaced symlink or a stray ``.tmp`` shows up.
"""
from __future__ import annotations

import hashlib
import json
import os
import signal
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from regressions.robustness.attack import HANG_SECONDS, Attack, Run, Scenario, broken_promises
from regressions.robustness.material import DLA, Material

PROBE = Path(__file__).with_name("probe.py")
#: Files larger than this are fingerprinted by size, inode and mtime (a sparse 1 GiB .dat is not read).
HASH_LIMIT = 64 << 20
#: How long a worker may outlive its parent before it counts as left behind.
GRACE_SECONDS = 3.0


def _fingerprint_one(path: Path, root: Path) -> tuple:
    st = os.lstat(path)
    if stat.S_ISLNK(st.st_mode):
        target = os.readlink(path)
        inside = Path(os.path.normpath(path.parent / target)).is_relative_to(root)
        try:
            tst = os.stat(path)
        except OSError:
            return ("symlink", target, "dangling" if not inside else "")
        if inside:  # the target is fingerprinted as an entry of its own
            return ("symlink", target)
        if stat.S_ISREG(tst.st_mode):  # the shared material a symlink reads in place must not change either
            return ("symlink", target, _file_digest(path, tst))
        return ("symlink", target, stat.S_IFMT(tst.st_mode))
    if stat.S_ISREG(st.st_mode):
        return ("file", _file_digest(path, st))
    if stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode):
        return ("device", stat.S_IFMT(st.st_mode), st.st_rdev)
    if stat.S_ISFIFO(st.st_mode):
        return ("fifo",)
    if stat.S_ISDIR(st.st_mode):
        return ("dir", stat.S_IMODE(st.st_mode))
    return ("other", stat.S_IFMT(st.st_mode))


def _file_digest(path: Path, st: os.stat_result) -> str:
    if st.st_size > HASH_LIMIT:
        return f"size={st.st_size} ino={st.st_ino} mtime={st.st_mtime_ns}"
    return hashlib.sha256(path.read_bytes()).hexdigest()


def fingerprint(root: Path) -> dict[str, tuple]:
    """Every entry under ``root`` (symlinks not followed into directories) by relative path."""
    out: dict[str, tuple] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = Path(dirpath) / name
            out[str(path.relative_to(root))] = _fingerprint_one(path, root)
    return out


def _describe(fp: tuple | None) -> str:
    if fp is None:
        return "gone"
    return f"symlink to {fp[1]}" if fp[0] == "symlink" else fp[0]


def _compare(before: dict[str, tuple], after: dict[str, tuple], may_change: set[str]) -> tuple[list[str], list[str]]:
    changed = [f"{p} ({_describe(fp)} -> {_describe(after.get(p))})" if _describe(fp) != _describe(after.get(p))
               else f"{p} (contents)" for p, fp in before.items() if p not in may_change and after.get(p) != fp]
    leftovers = [p for p in after if p not in before
                 and (".tmp" in Path(p).name or Path(p).name.startswith("."))]
    return changed, leftovers


def _proc_stat(pid: int) -> tuple[int, int] | None:
    """(ppid, session id) of a live process, from /proc."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2:].split()
    return int(fields[1]), int(fields[3])


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _descendants(session: int, workdir: Path) -> list[int]:
    """Processes of the child's session or whose command line names its temp dir."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        pid = int(entry)
        info = _proc_stat(pid)
        if info is None or info[0] == 0:
            continue
        if info[1] == session or str(workdir) in _cmdline(pid):
            if Path(f"/proc/{pid}/status").exists() and "State:\tZ" not in _status(pid):
                found.append(pid)
    return found


def _status(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return ""


def _workers(pid: int) -> list[int]:
    kids: list[int] = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            kids += [int(k) for k in (task / "children").read_text().split()]
        except OSError:
            pass
    return kids


def _wait_for_line(out: Path, needle: str | None, deadline: float, pid: int) -> None:
    while time.monotonic() < deadline:
        if needle is not None and out.exists() and needle in out.read_text(errors="replace"):
            return
        if "State:\tZ" in _status(pid) or not _status(pid):  # it ended before its moment
            return
        time.sleep(0.05)


def _deliver(attack_signal, pid: int, out: Path) -> str:
    """Send the scenario's signal once its moment comes; returns what was done (for the record)."""
    _wait_for_line(out, attack_signal.after, time.monotonic() + (attack_signal.delay if attack_signal.after is None
                                                                   else HANG_SECONDS / 2), pid)
    if attack_signal.to == "worker":
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            workers = _workers(pid)
            if workers:
                os.kill(workers[0], attack_signal.signum)
                return f"killed worker {workers[0]}"
            time.sleep(0.05)
        return "no worker found"
    os.kill(pid, attack_signal.signum)
    return f"signalled parent {pid}"


def _spawn(scenario: Scenario, workdir: Path, logs: Path) -> tuple[Run, int]:
    """Run the command under ``probe.py``; returns the measurements and the probe's pid (the session)."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1", **scenario.env}
    env.pop("DLA_DEBUG", None)
    out, err, result, pidfile = logs / "stdout", logs / "stderr", logs / "result.json", logs / "pid"
    start = time.monotonic()
    with open(out, "wb") as fo, open(err, "wb") as fe:
        probe = subprocess.Popen([sys.executable, "-S", str(PROBE), str(result), str(pidfile), "--", str(DLA),
                                  *scenario.argv], cwd=workdir, stdin=subprocess.DEVNULL, stdout=fo, stderr=fe,
                                 env=env)
    if scenario.signal is not None:
        deadline = time.monotonic() + 10
        while not pidfile.exists() and time.monotonic() < deadline and probe.poll() is None:
            time.sleep(0.02)
        if pidfile.exists():
            _deliver(scenario.signal, int(pidfile.read_text()), out)
    hung = False
    try:
        probe.wait(timeout=max(0.0, HANG_SECONDS - (time.monotonic() - start)))
    except subprocess.TimeoutExpired:
        hung = True
        os.killpg(probe.pid, signal.SIGKILL)
        probe.wait()
    seconds = time.monotonic() - start
    figures = json.loads(result.read_text()) if result.exists() else {"exit": None, "peak_rss_kb": 0}
    return Run(exit=figures["exit"], seconds=seconds, peak_rss_mb=figures["peak_rss_kb"] / 1024,
               stdout=out.read_text(errors="replace"), stderr=err.read_text(errors="replace"), hung=hung), probe.pid


def _survivors(session: int, workdir: Path) -> list[str]:
    """Processes the child left behind (after a grace period); they are then killed by pid."""
    deadline = time.monotonic() + GRACE_SECONDS
    left = _descendants(session, workdir)
    while left and time.monotonic() < deadline:
        time.sleep(0.1)
        left = _descendants(session, workdir)
    names = [f"{pid} {_cmdline(pid)[:60]}" for pid in left]
    for pid in left:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return names


def _make_writable(root: Path) -> None:
    for dirpath, dirnames, _ in os.walk(root):
        for name in dirnames:
            p = Path(dirpath) / name
            if not p.is_symlink():
                os.chmod(p, 0o755)


def execute(attack: Attack, material: Material, root: Path) -> tuple[Scenario | None, Run, list[str]]:
    """Build the attack in a fresh temp dir under ``root``, run it, and judge it."""
    case = Path(tempfile.mkdtemp(prefix=f"{attack.name.replace('/', '_')}.", dir=root))
    workdir, logs = case / "work", case / "logs"
    workdir.mkdir()
    logs.mkdir()
    try:
        scenario = attack.setup(workdir, material)
    except Exception as exc:  # a sweep bug, reported as the attack's broken setup, not a crash of the sweep
        run = Run(exit=None, seconds=0.0, peak_rss_mb=0.0, stdout="", stderr="",
                  setup_error=f"{type(exc).__name__}: {exc}")
        return None, run, broken_promises(attack, None, run)
    before = fingerprint(workdir)
    run, session = _spawn(scenario, workdir, logs)
    run.survivors = _survivors(session, workdir)
    after = fingerprint(workdir)
    may_change = {str(Path(p).relative_to(workdir)) if Path(p).is_absolute() else str(p) for p in scenario.may_change}
    run.changed, run.leftovers = _compare(before, after, may_change)
    run.missing_reports = [str(p) for p in scenario.reports
                           if not (workdir / p).is_file() or (workdir / p).stat().st_size == 0]
    _make_writable(workdir)
    return scenario, run, broken_promises(attack, scenario, run)
