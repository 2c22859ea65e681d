"""Command-line argument errors in one line.

argparse prints its whole usage block (up to ten lines for ``dla trace``) before the line that says what
is wrong, so in a CI log the cause is buried under the synopsis. Our tools promise one line per bad input:
``dla trace: argument --config: invalid choice: 'nv_huge' (choose from ...) (see dla trace --help)``,
exit 2. Subparsers made by ``add_subparsers`` inherit the class, so one parser covers every subcommand.
"""
from __future__ import annotations

import argparse
import math
from typing import Callable, NoReturn

#: Exit status of a bad command line (argparse's, and our "bad input").
EXIT_USAGE = 2


class OneLineParser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are ``<prog>: <message> (see <prog> --help)`` on stderr, exit 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"{self.prog}: {message} (see {self.prog} --help)\n")


def _number(kind: Callable[[str], float | int], text: str) -> float | int:
    try:
        return kind(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a{'n integer' if kind is int else ' number'}") from None


def non_negative_int(text: str) -> int:
    """An int >= 0 (argparse names the option in front of the message)."""
    value = _number(int, text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text!r}: must be 0 or more")
    return value


def non_negative_seconds(text: str) -> float:
    """A finite number of seconds >= 0: NaN compares false with everything, so a budget of NaN would
    silently be no budget at all."""
    value = _number(float, text)
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"{text!r}: must be a finite number of seconds, 0 or more")
    return value
