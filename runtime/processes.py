"""Process hygiene for runs with workers and simulators.

Three promises, shared by ``dla trace``, ``make regress`` and ``make fuzz``:

- no child outlives its parent: children ask the kernel for ``PR_SET_PDEATHSIG`` (Linux), so even a
  ``kill -9`` of the parent takes its workers and simulators with it, and nothing keeps a CI pipe open;
- a child that died is named by how it died ("killed by SIGKILL", "exit 3"), never a pool's traceback;
- SIGTERM ends a run the way Ctrl-C does (stop children, report what finished) but exits 143, not 130.
"""
from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable, Iterator

#: ``prctl`` option: the signal this process gets when its parent thread exits (linux/prctl.h).
PR_SET_PDEATHSIG = 1
#: Exit status of a run stopped by Ctrl-C (SIGINT) or by SIGTERM: 128 + the signal, as shells report it.
EXIT_SIGINT = 128 + signal.SIGINT
EXIT_SIGTERM = 128 + signal.SIGTERM


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised like Ctrl-C so that every "report what finished" path handles both alike."""


def interrupt_exit_code(exc: BaseException) -> int:
    """130 for Ctrl-C, 143 for SIGTERM."""
    return EXIT_SIGTERM if isinstance(exc, Terminated) else EXIT_SIGINT


def _raise_terminated(signum: int, frame: object) -> None:
    raise Terminated()


def raise_on_sigterm() -> Callable[[], None]:
    """From now on SIGTERM raises ``Terminated`` (a KeyboardInterrupt) in the main thread; returns the
    function that puts the previous handler back."""
    if threading.current_thread() is not threading.main_thread():  # only the main thread handles signals
        return lambda: None
    previous = signal.signal(signal.SIGTERM, _raise_terminated)
    return lambda: signal.signal(signal.SIGTERM, previous)


@contextlib.contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """While inside, SIGTERM raises ``Terminated`` (a KeyboardInterrupt) in the main thread."""
    restore = raise_on_sigterm()
    try:
        yield
    finally:
        restore()


class StopRequests:
    """While inside, Ctrl-C and SIGTERM raise ``KeyboardInterrupt``/``Terminated`` as usual and are also
    remembered, so that an interrupt that library code swallowed or turned into another error (hypothesis
    does, when it lands mid-example) still stops the run at the next ``check()``."""

    def __init__(self) -> None:
        self.pending: KeyboardInterrupt | None = None
        self._previous: dict[int, Any] = {}

    def _handler(self, signum: int, frame: object) -> None:
        self.pending = Terminated() if signum == signal.SIGTERM else KeyboardInterrupt()
        raise self.pending

    def _unraisable(self, unraisable: Any) -> None:
        """An interrupt raised inside a callback that cannot raise (a gc callback) is dropped by Python with
        a traceback on stderr; ``check()`` raises it again, so say nothing."""
        if unraisable.exc_value is None or unraisable.exc_value is not self.pending:
            self._previous_hook(unraisable)

    def __enter__(self) -> StopRequests:
        if threading.current_thread() is threading.main_thread():
            self._previous = {s: signal.signal(s, self._handler) for s in (signal.SIGINT, signal.SIGTERM)}
            self._previous_hook, sys.unraisablehook = sys.unraisablehook, self._unraisable
        return self

    def __exit__(self, *exc: object) -> None:
        for s, handler in self._previous.items():
            signal.signal(s, handler)
        if self._previous:
            sys.unraisablehook = self._previous_hook

    def check(self) -> None:
        """Raise the interrupt that arrived, if one did."""
        if self.pending is not None:
            raise self.pending


@contextlib.contextmanager
def deferred_interrupts() -> Iterator[None]:
    """Once a run is stopping, a second Ctrl-C or SIGTERM must not cut its clean-up short: both are
    ignored while inside."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {s: signal.signal(s, signal.SIG_IGN) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


def die_with_parent(parent: int | None = None, sig: int = signal.SIGKILL) -> None:
    """Have the kernel send ``sig`` to this process when its parent dies (Linux; a no-op elsewhere).

    Call it in the child, first thing. ``parent`` is the pid the child expects as parent: if that one is
    already gone (it died between fork and here), exit at once instead of running as an orphan."""
    if sys.platform.startswith("linux"):
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0)
        except (OSError, AttributeError):  # no libc prctl (an unusual libc): nothing to do
            pass
    if parent is not None and os.getppid() != parent:
        os._exit(128 + int(sig))


#: The exec shim of ``dying_with_parent``: PR_SET_PDEATHSIG(SIGKILL) survives ``execve``, so setting it
#: here, then exec'ing the real program, makes that program die with its starter.
_SHIM = ("import ctypes, os, sys\n"
         "try:\n    ctypes.CDLL(None).prctl(1, 9, 0, 0, 0)\nexcept Exception:\n    pass\n"
         "if os.getppid() != int(sys.argv[1]):\n    os._exit(137)\n"
         "os.execvp(sys.argv[2], sys.argv[2:])\n")


def dying_with_parent(cmd: list[str]) -> list[str]:
    """``cmd`` behind a small exec shim that first asks for PR_SET_PDEATHSIG, so the program (a simulator)
    is killed when the process starting it dies, even by SIGKILL; ``cmd`` unchanged off Linux. A shim and
    not ``preexec_fn``: simulations start from several threads, where ``preexec_fn`` may deadlock."""
    if not sys.platform.startswith("linux"):
        return list(cmd)
    return [sys.executable, "-I", "-S", "-c", _SHIM, str(os.getpid()), *map(str, cmd)]


def exit_text(returncode: int | None) -> str:
    """How a child ended, from its return code: "killed by SIGKILL" (negative codes), "exit 3"."""
    if returncode is None:
        return "still running"
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        return f"killed by {name}"
    return f"exit {returncode}"


def children(pid: int) -> list[int]:
    """The direct children of ``pid``, from /proc (empty where there is no /proc)."""
    out = []
    for entry in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = entry.read_text()
        except OSError:  # gone meanwhile
            continue
        # "pid (comm) state ppid ...": comm may hold spaces and parentheses, so split after the last ')'
        fields = text[text.rfind(")") + 2:].split()
        if len(fields) > 1 and int(fields[1]) == pid:
            out.append(int(entry.parent.name))
    return out


def descendants(pid: int) -> list[int]:
    """Every process below ``pid`` (children first, then theirs)."""
    out: list[int] = []
    todo = [pid]
    while todo:
        kids = children(todo.pop())
        out += kids
        todo += kids
    return out


def kill_descendants(pid: int | None = None, sig: int = signal.SIGKILL) -> list[int]:
    """Send ``sig`` to every process below ``pid`` (default: this one); returns the pids signalled."""
    found = descendants(os.getpid() if pid is None else pid)
    for child in found:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(child, sig)
    return found


def alive(pid: int) -> bool:
    """Whether ``pid`` is a live process (a zombie counts as gone)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True
    return state[state.rfind(")") + 2:].split()[0] not in ("Z", "X")


def wait_gone(pids: list[int], timeout_s: float) -> list[int]:
    """The pids still alive after waiting up to ``timeout_s`` for them to end."""
    deadline = time.monotonic() + timeout_s
    left = [p for p in pids if alive(p)]
    while left and time.monotonic() < deadline:
        time.sleep(0.05)
        left = [p for p in left if alive(p)]
    return left
