"""The launcher protocol's one run loop (``drive``) and the registry ``--launcher`` offers."""
from __future__ import annotations

from pathlib import Path

import pytest

from regressions.regress import __main__ as regress_main
from regressions.regress.launcher import INTERRUPTED, Interrupted, Launcher, drive
from regressions.regress.launchers import LAUNCHERS
from regressions.regress.plan import Plan


class Scripted(Launcher):
    """A launcher whose ``poll`` answers from a script; a ``KeyboardInterrupt`` in it is a Ctrl-C."""

    poll_s = 0.0

    def __init__(self, answers: list[bool | type[BaseException]]) -> None:
        self.answers, self.calls = answers, []

    @classmethod
    def for_run(cls, plan: Plan, run_dir: Path, lists_dir: Path | None) -> Scripted:
        return cls([True])

    def launch(self) -> None:
        self.calls.append("launch")

    def poll(self) -> bool:
        self.calls.append("poll")
        answer = self.answers.pop(0)
        if isinstance(answer, type):
            raise answer()
        return answer

    def kill(self) -> None:
        self.calls.append("kill")

    def finish(self, why: str = "") -> int:
        self.calls.append(f"finish:{why}")
        return 3


def test_drive_polls_until_done_then_finishes() -> None:
    launcher = Scripted([False, False, True])
    assert drive(launcher) == 3
    assert launcher.calls == ["launch", "poll", "poll", "poll", "finish:"]


def test_an_interrupt_kills_finishes_and_raises_interrupted() -> None:
    launcher = Scripted([False, KeyboardInterrupt])
    with pytest.raises(Interrupted) as e:
        drive(launcher)
    assert e.value.exit_code == 130
    assert launcher.calls == ["launch", "poll", "poll", "kill", f"finish:{INTERRUPTED}"]


def test_launcher_choices_are_the_registry() -> None:
    assert set(LAUNCHERS) == {"local", "slurm"}
    assert all(issubclass(cls, Launcher) for cls in LAUNCHERS.values())
    run = regress_main.parser()._subparsers._group_actions[0].choices["run"]
    [launcher] = [a for a in run._actions if a.dest == "launcher"]
    assert set(launcher.choices) == set(LAUNCHERS)
