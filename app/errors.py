"""The error every ``dla`` command reports the same way, shared by ``app.cli`` and ``app.nvdla``."""
from __future__ import annotations


class UserError(Exception):
    """A problem with what the user gave us: printed as ``dla: <message>``, exit 2."""
