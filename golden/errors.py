"""Typed errors of the golden model. Each carries enough context to be printed as one line."""
from __future__ import annotations

import re

#: A token an error message echoes (a register name, a number, a file name) is cut when it is longer than
#: this: a 10 MB register name in a .cfg must give a line a terminal and a CI log can show.
CLIP_OVER = 200
#: Characters of a cut token that are kept, followed by "..." and the token's length.
CLIP_KEEP = 60
_LONG_TOKEN = re.compile(r"\S{%d,}" % (CLIP_OVER + 1))


def clip_tokens(text: str) -> str:
    """``text`` with every run of more than CLIP_OVER non-blank characters cut to its first CLIP_KEEP,
    then ``...(N characters)``. The one place every layer's error messages (golden, trace, loadable,
    compiler, the CLI's last line) clip what they quote from the user's input."""
    if len(text) <= CLIP_OVER:
        return text
    return _LONG_TOKEN.sub(lambda m: f"{m.group()[:CLIP_KEEP]}...({len(m.group())} characters)", text)


class DlaError(Exception):
    """Base of every error the golden model raises on purpose; its message quotes user tokens clipped."""

    def __init__(self, *args: object) -> None:
        super().__init__(*(clip_tokens(a) if isinstance(a, str) else a for a in args))


class ConfigError(DlaError):
    """An illegal register configuration, named ``UNIT.REGISTER.FIELD`` like a hardware assertion."""

    def __init__(self, where: str, message: str) -> None:
        self.where = where
        super().__init__(f"{where}: {message}")


class UnsupportedError(DlaError):
    """The operation needs a unit or feature this hardware configuration does not have (``N/A``)."""

    def __init__(self, unit: str, message: str) -> None:
        self.unit = unit
        super().__init__(message)


class RegisterError(DlaError):
    """An access to an address or name that no register of the map has."""
