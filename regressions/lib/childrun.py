"""Run one child process under an address-space limit and measure it: exit status, output, peak RSS, seconds.

Bomb tests need the peak memory of exactly one command, which the test process's own RSS (shared with every
other test) cannot give: ``os.wait4`` returns the child's own resource usage. ``RLIMIT_AS`` is a safety net
so a regression fails the test with MemoryError instead of taking the machine down.
"""
from __future__ import annotations

import os
import resource
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DLA = [sys.executable, "-m", "app.cli"]
#: The safety net: no child may map more than this.
ADDRESS_SPACE_LIMIT = 4 << 30


@dataclass
class Child:
    returncode: int
    stdout: str
    stderr: str
    max_rss: int  # bytes
    seconds: float

    def error_lines(self) -> list[str]:
        return [line for line in self.stderr.splitlines() if line.strip()]


def run_child(argv: list[str], *, env: dict[str, str] | None = None, cwd: Path | None = None,
              address_space: int = ADDRESS_SPACE_LIMIT, timeout: float = 600.0) -> Child:
    """Run ``argv`` to completion and return what it did (killed after ``timeout`` seconds)."""

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (address_space, address_space))

    full_env = {k: v for k, v in os.environ.items() if k != "DLA_MAX_MEMORY"}  # the default, unless env sets it
    full_env.update({"PYTHONPATH": str(REPO), **(env or {})})
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        proc = subprocess.Popen(argv, stdout=out, stderr=err, env=full_env, cwd=cwd or REPO, preexec_fn=limit)
        timer = threading.Timer(timeout, lambda: os.kill(proc.pid, signal.SIGKILL))
        timer.start()
        try:
            _, status, usage = os.wait4(proc.pid, 0)
        finally:
            timer.cancel()
        seconds = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)  # reaped here: Popen must not wait again
        out.seek(0)
        err.seek(0)
        return Child(proc.returncode, out.read().decode(errors="replace"), err.read().decode(errors="replace"),
                     usage.ru_maxrss * 1024, seconds)


def run_dla(*args: str, **kw) -> Child:
    """``dla ARGS`` in a child (the CLI module, so no installed entry point is needed)."""
    return run_child([*DLA, *args], **kw)
