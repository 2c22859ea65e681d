"""The launcher protocol: how a run's units get executed somewhere (this machine, a Slurm farm), and the one
run loop that drives any launcher.

Modelled on OpenTitan dvsim's ``Launcher`` idea: a launcher only knows how to start its work (``launch``),
say whether it is still running (``poll``), stop it (``kill``) and account for what never reported
(``finish``). Waiting, Ctrl-C and CI's SIGTERM are handled once, in ``drive``, so every launcher stops the
same way: killed, its missing results written as errors, ``Interrupted`` raised for the report to say so.
The launchers themselves are registered by name in ``regressions.regress.launchers``.
"""
from __future__ import annotations

import time
from abc import ABC, abstractmethod
from pathlib import Path

from regressions.regress.plan import Plan
from runtime.processes import interrupt_exit_code, raise_on_sigterm

#: Why a launcher was finished early, recorded in the error records of the units it cut short.
INTERRUPTED = "interrupted (Ctrl-C/SIGTERM)"


class Interrupted(Exception):
    """The run was stopped (Ctrl-C or SIGTERM); what ran is still reported. ``exit_code``: 130 or 143."""

    def __init__(self, exit_code: int = 130) -> None:
        super().__init__(f"interrupted (exit {exit_code})")
        self.exit_code = exit_code


class Launcher(ABC):
    """One way of running units. ``drive`` calls ``launch`` once, ``poll`` every ``poll_s`` seconds until it
    says done, then ``finish``; on Ctrl-C/SIGTERM it calls ``kill`` before ``finish``."""

    #: Seconds between two ``poll`` calls.
    poll_s: float = 0.2

    @classmethod
    @abstractmethod
    def for_run(cls, plan: Plan, run_dir: Path, lists_dir: Path | None) -> Launcher:
        """The launcher of a planned run (``python -m regressions.regress run``)."""

    @abstractmethod
    def launch(self) -> None:
        """Start (or submit) the work; errors that mean nothing could start are raised here."""

    @abstractmethod
    def poll(self) -> bool:
        """True once nothing is running or queued any more."""

    @abstractmethod
    def kill(self) -> None:
        """Stop what still runs, letting it write what it can (called on Ctrl-C/SIGTERM)."""

    @abstractmethod
    def finish(self, why: str = "") -> int | None:
        """Release what the launch held and record every unit that left no results (``why`` says why the
        run ended early, "" if it did not). Returns the exit status of the launcher's pytest, if it ran one."""


def drive(launcher: Launcher) -> int | None:
    """Run ``launcher`` to the end: the one run loop of every launcher. Returns ``finish``'s status;
    raises ``Interrupted`` (exit 130 for Ctrl-C, 143 for SIGTERM) after killing and finishing on an interrupt."""
    launcher.launch()
    restore_sigterm = raise_on_sigterm()
    why, exit_code = "", 0
    try:
        while not launcher.poll():
            time.sleep(launcher.poll_s)
    except KeyboardInterrupt as exc:
        why, exit_code = INTERRUPTED, interrupt_exit_code(exc)
        launcher.kill()
    finally:
        restore_sigterm()
        status = launcher.finish(why)
    if why:
        raise Interrupted(exit_code)
    return status
