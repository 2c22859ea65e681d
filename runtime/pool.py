"""A process pool that survives its workers: results in task order, one result per task whatever happens.

``concurrent.futures.ProcessPoolExecutor`` turns one dead worker into a ``BrokenProcessPool`` for every
pending task and cannot say which task killed it. Here each worker runs one task at a time over its own
pipe, so a worker that dies (SIGKILL, the OOM killer, a segfault in a C extension) or overruns the hard
time limit costs exactly its own task, reported through ``lost(key, "worker killed by SIGKILL")``, and is
replaced. Workers die with the parent (``PR_SET_PDEATHSIG``) and ignore Ctrl-C: the parent decides what an
interrupt means and stops them when the iterator is closed.
"""
from __future__ import annotations

import multiprocessing
import os
import signal
import time
from collections import deque
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from typing import Any, Callable, Iterator

from runtime.processes import die_with_parent, exit_text, kill_descendants, wait_gone


@dataclass(frozen=True)
class Task:
    """``func(*args)`` in a worker (both picklable); ``key`` identifies the task to ``lost``."""

    func: Callable[..., Any]
    args: tuple
    key: Any = None


def _serve(conn: Connection, parent: int) -> None:
    """A worker: run tasks from ``conn`` until it closes; send back (index, result)."""
    die_with_parent(parent)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    while True:
        try:
            msg = conn.recv()
        except (EOFError, OSError):
            return
        if msg is None:
            return
        index, task = msg
        conn.send((index, task.func(*task.args)))


class _Worker:
    def __init__(self, ctx: Any) -> None:
        self.conn, child = ctx.Pipe()
        self.process = ctx.Process(target=_serve, args=(child, os.getpid()), daemon=True)
        self.process.start()
        child.close()
        self.index: int | None = None
        self.started = 0.0

    def give(self, index: int, task: Task) -> None:
        self.index, self.started = index, time.monotonic()
        self.conn.send((index, task))

    def stop(self, sig: int = signal.SIGKILL) -> None:
        """Kill the worker and anything it started."""
        pid = self.process.pid
        if pid is not None and self.process.exitcode is None:
            kill_descendants(pid, sig)
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        self.process.join(5)
        self.conn.close()


def run_in_workers(tasks: list[Task], workers: int, lost: Callable[[Any, str], Any],
                   hard_limit_s: float | None = None) -> Iterator[Any]:
    """Results of ``tasks`` in order, computed by up to ``workers`` processes. A task whose worker died
    gives ``lost(task.key, "worker killed by SIGKILL")``; one still running after ``hard_limit_s`` seconds
    gives ``lost(task.key, "worker stopped after N s (over the time budget)")``."""
    ctx = multiprocessing.get_context()
    pending = deque(enumerate(tasks))
    done: dict[int, Any] = {}
    pool = [_Worker(ctx) for _ in range(max(1, min(workers, len(tasks))))]
    following = 0
    try:
        while following < len(tasks):
            for k, w in enumerate(pool):
                if w.index is None and pending:
                    if not w.process.is_alive():  # died between tasks: nothing lost, replace it
                        w.stop()
                        pool[k] = w = _Worker(ctx)
                    w.give(*pending.popleft())
            busy = [w for w in pool if w.index is not None]
            timeout = None
            if hard_limit_s is not None and busy:
                timeout = max(0.0, min(w.started for w in busy) + hard_limit_s - time.monotonic()) + 0.05
            ready = set(wait([w.conn for w in busy] + [w.process.sentinel for w in busy], timeout))
            for k, w in enumerate(pool):
                if w.index is None:
                    continue
                why = ""
                if w.conn in ready:
                    try:
                        index, result = w.conn.recv()
                        done[index] = result
                        w.index = None
                        continue
                    except (EOFError, OSError):  # it died mid-answer: the sentinel says how
                        w.process.join(5)
                if w.process.sentinel in ready or not w.process.is_alive():
                    w.process.join(5)
                    why = f"worker {exit_text(w.process.exitcode)}"
                elif hard_limit_s is not None and time.monotonic() - w.started > hard_limit_s:
                    why = f"worker stopped after {hard_limit_s:g} s (over the time budget)"
                if why:
                    assert w.index is not None
                    done[w.index] = lost(tasks[w.index].key, why)
                    w.stop()
                    pool[k] = _Worker(ctx)
            while following in done:
                yield done.pop(following)
                following += 1
    finally:
        _shut_down(pool)


def _shut_down(pool: list[_Worker]) -> None:
    """Idle workers are told to leave; busy ones (an interrupt, an abandoned iterator) are killed."""
    for w in pool:
        if w.index is None and w.process.is_alive():
            try:
                w.conn.send(None)
            except OSError:
                pass
    for w in pool:
        if w.index is None:
            w.process.join(2)
        w.stop()
    wait_gone([w.process.pid for w in pool if w.process.pid is not None], 5)
