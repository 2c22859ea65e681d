"""An attack on the `dla` CLI as data, and the README's promise checked against what the attack left.

The promise (README, issue 15): bad input gets ONE line naming the user's path / file:line / field /
register, a documented exit code, no traceback, no input changed, no partial file left, reports written
when asked for, bounded memory and time, and no process left behind. ``Attack`` says how to provoke a
case; ``Scenario`` is what its setup built (the command and what the line must name); ``Run`` is what the
child did; ``broken_promises`` compares the two.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

#: The README's bounds: a child above these breaks the promise. Time is only the hang guard here (the
#: issue wants bombs refused in < 2 s; the sweep reports the seconds, it does not judge them).
PEAK_RSS_MB = 500
HANG_SECONDS = 60.0
#: A line longer than this is not one line a user reads (a 10 MB token echoed back).
LINE_CHARS = 1000

#: A trace's own outcome line (runtime/suite.py Outcome.line): ``ERROR name: detail``.
OUTCOME_LINE = re.compile(r"^(PASS|FAIL|ERROR|N/A)\s+\S")


@dataclass(frozen=True)
class Signal:
    """A signal scenario: after ``after`` (a line on stdout, or ``delay`` seconds), send ``signum`` to the
    parent (``to="parent"``) or to one of its worker processes (``to="worker"``)."""
    signum: int
    to: str = "parent"
    after: str | None = None
    delay: float = 1.0


@dataclass
class Scenario:
    """What an attack's setup built in its temp dir: the command and what its one line must name."""
    argv: list[str]
    #: Substrings the one line must hold when the input is refused (exit 2): the user's path, file:line,
    #: field, register.
    names: tuple[str, ...] = ()
    #: What a failing trace's own line (exit 1, ``FAIL  name: ...``) must hold: the trace's name.
    fail_names: tuple[str, ...] = ()
    #: Reports the command promises to write whatever happens (--json / --junit files).
    reports: tuple[Path, ...] = ()
    #: Existing paths the command may legitimately rewrite (a symlink's target written through it).
    may_change: tuple[Path, ...] = ()
    signal: Signal | None = None
    env: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Attack:
    name: str
    family: str
    #: Builds the attack's files in a fresh temp dir (``setup(workdir, material)``), returns the command.
    setup: Callable[[Path, object], Scenario]
    #: Exit codes (as a shell sees them: killed by signal N is 128 + N) that keep the promise: 2 bad input,
    #: 1 a failing trace, 130/143 SIGINT/SIGTERM, 0 accepted.
    exits: frozenset[int] = frozenset({2})
    #: In the fast subset `make test` runs (each takes well under 2 s on an idle machine).
    quick: bool = False
    #: The one line may be absent (an accepted input, a signal that ends the run with a summary).
    line_optional: bool = False


@dataclass
class Run:
    """What the child did, measured by the runner."""
    exit: int | None
    seconds: float
    peak_rss_mb: float
    stdout: str
    stderr: str
    hung: bool = False
    changed: list[str] = field(default_factory=list)
    leftovers: list[str] = field(default_factory=list)
    survivors: list[str] = field(default_factory=list)
    missing_reports: list[str] = field(default_factory=list)
    setup_error: str = ""

    @property
    def shell_exit(self) -> int | None:
        """The exit status as ``$?`` shows it: a child killed by signal N is 128 + N."""
        return 128 - self.exit if self.exit is not None and self.exit < 0 else self.exit

    @property
    def stderr_lines(self) -> list[str]:
        return [ln for ln in self.stderr.splitlines() if ln.strip()]

    @property
    def line(self) -> str:
        """The one line the user reads: stderr's, else the trace's own ERROR/FAIL line on stdout."""
        if self.stderr_lines:
            # argparse prints its usage block first: the line that says what is wrong is the last one
            return self.stderr_lines[-1 if self.stderr_lines[0].startswith("usage:") else 0]
        bad = [ln for ln in self.stdout.splitlines() if ln.startswith(("ERROR", "FAIL"))]
        return bad[0] if bad else ""


def _line_shape_ok(run: Run, argv: list[str]) -> bool:
    """``dla...`` or, for `dla trace`, a detail that its stdout ERROR line repeats (Outcome.line)."""
    first = run.line
    if first.startswith("dla") or first.startswith("interrupted; reporting"):
        return True
    return bool(argv) and argv[0] == "trace" and any(
        OUTCOME_LINE.match(ln) and first in ln for ln in run.stdout.splitlines())


def broken_promises(attack: Attack, scenario: Scenario | None, run: Run) -> list[str]:
    """Which parts of the promise this run broke (empty: kept)."""
    if scenario is None:
        return [f"setup: {run.setup_error}"]
    broken: list[str] = []
    text = run.stdout + run.stderr
    if run.hung:
        broken.append(f"hang (> {HANG_SECONDS:.0f} s, killed)")
    elif run.shell_exit not in attack.exits:
        killed = f" (killed by signal {-run.exit})" if run.exit is not None and run.exit < 0 else ""
        broken.append(f"exit {run.shell_exit}{killed} (want {'/'.join(map(str, sorted(attack.exits)))})")
    if "Traceback" in text:
        broken.append("traceback")
    if "internal error" in text:
        broken.append("internal error")
    lines = run.stderr_lines
    if len(lines) > 1 and lines[0].startswith("usage:"):
        broken.append(f"argparse usage block ({len(lines) - 1} lines) before the error line")
    elif len(lines) > 1:
        broken.append(f"{len(lines)} stderr lines")
    elif lines and not _line_shape_ok(run, scenario.argv):
        broken.append("line does not start with dla")
    if len(run.line) > LINE_CHARS:
        broken.append(f"line of {len(run.line)} characters")
    if not run.line and not attack.line_optional and run.exit not in (0, None):
        broken.append("no line")
    wanted = scenario.names if run.exit == 2 else scenario.fail_names if run.exit == 1 else ()
    missing = [n for n in wanted if n not in run.line]
    if missing and run.line:
        broken.append(f"line does not name {', '.join(missing)}")
    if run.changed:
        broken.append(f"input changed: {', '.join(run.changed)}")
    if run.leftovers:
        broken.append(f"left behind: {', '.join(run.leftovers)}")
    if run.missing_reports:
        broken.append(f"report not written: {', '.join(run.missing_reports)}")
    if run.peak_rss_mb > PEAK_RSS_MB:
        broken.append(f"peak RSS {run.peak_rss_mb:.0f} MB > {PEAK_RSS_MB} MB")
    if run.survivors:
        broken.append(f"processes left: {', '.join(run.survivors)}")
    return broken
