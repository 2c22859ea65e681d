"""Wall-clock budgets for whole commands (``dla compile``, ``dla run``): a job that runs past its budget ends
with one line saying what it was doing, instead of running for hours with nothing said.

SIGALRM interrupts the main thread wherever it is (a pass, an engine, a numpy loop between bytecodes), so
a budget needs no cooperation from the code it bounds.
"""
from __future__ import annotations

import contextlib
import signal
import threading
from typing import Iterator

#: ``dla compile`` and ``dla run`` budget unless ``--timeout`` says otherwise (0: none).
DEFAULT_COMMAND_BUDGET_S = 3600.0


class DeadlineExceeded(BaseException):
    """A command ran past its wall-clock budget. A BaseException, like KeyboardInterrupt, so that no
    ``except Exception`` on its way up turns it into a different error."""


@contextlib.contextmanager
def wall_clock(seconds: float | None, what: str, doing: list[str] | None = None) -> Iterator[None]:
    """Raise ``DeadlineExceeded`` in the main thread once ``seconds`` have passed inside. ``doing`` holds
    the current step (its last entry, e.g. a pass name set by a progress callback), named in the error.
    No budget for ``seconds`` None or 0, or off the main thread (only it receives signals)."""
    if not seconds or threading.current_thread() is not threading.main_thread() or not hasattr(signal, "SIGALRM"):
        yield
        return

    def expire(signum: int, frame: object) -> None:
        step = f" ({doing[-1]})" if doing else ""
        raise DeadlineExceeded(f"{what} ran past its time budget of {seconds:g} s{step}; "
                               f"give it more with --timeout SECONDS (0 = no budget)")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
