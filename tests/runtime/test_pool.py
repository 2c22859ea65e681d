"""runtime.pool: one result per task in task order, whatever happens to the workers."""
from __future__ import annotations

import os
import signal
import time

from runtime.pool import Task, run_in_workers
from runtime.processes import alive, children, wait_gone


def square(x: int) -> int:
    return x * x


def die(sig: int) -> None:
    os.kill(os.getpid(), sig)


def sleep(seconds: float) -> str:
    time.sleep(seconds)
    return "slept"


def lost(key: object, why: str) -> str:
    return f"{key}: {why}"


def test_results_come_in_task_order() -> None:
    tasks = [Task(square, (i,), i) for i in range(12)]
    assert list(run_in_workers(tasks, 3, lost)) == [i * i for i in range(12)]


def test_a_dead_worker_costs_its_task_only() -> None:
    tasks = [Task(square, (1,), "a"), Task(die, (signal.SIGKILL,), "b"), Task(square, (3,), "c"),
             Task(die, (signal.SIGTERM,), "d"), Task(square, (5,), "e")]
    assert list(run_in_workers(tasks, 2, lost)) == [1, "b: worker killed by SIGKILL", 9,
                                                    "d: worker killed by SIGTERM", 25]


def test_a_task_over_the_hard_limit_is_stopped() -> None:
    tasks = [Task(sleep, (600,), "long"), Task(square, (4,), "short")]
    assert list(run_in_workers(tasks, 2, lost, hard_limit_s=1)) == [
        "long: worker stopped after 1 s (over the time budget)", 16]


def test_closing_early_stops_the_busy_workers() -> None:
    results = run_in_workers([Task(square, (2,)), Task(sleep, (600,)), Task(sleep, (600,))], 2, lost)
    assert next(results) == 4
    workers = children(os.getpid())
    assert workers
    results.close()
    assert not wait_gone(workers, 60) and not any(alive(p) for p in workers)
