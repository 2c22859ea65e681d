"""Shared by the frontend tests."""
from __future__ import annotations

from typing import Any, Callable

import pytest

from compiler.errors import CompileError


def one_line_error(load: Callable[..., Any], *args: Any) -> str:
    """The CompileError ``load(*args)`` raises: one line, no traceback."""
    with pytest.raises(CompileError) as info:
        load(*args)
    msg = str(info.value)
    assert "\n" not in msg and "Traceback" not in msg
    return msg
