"""User-facing compiler errors: one line naming the file and the layer/node, never a traceback."""
from __future__ import annotations

from golden.errors import clip_tokens


class CompileError(Exception):
    """A model the compiler cannot take: malformed file, shape mismatch, unsupported op or config.

    ``where`` is "file" or "file: layer 'name' (Type)"; the CLI prints ``str(err)`` and exits 2.
    """

    def __init__(self, where: str, msg: str) -> None:
        msg = clip_tokens(msg)
        super().__init__(f"{where}: {msg}" if where else msg)
        self.where = where
        self.msg = msg


def node_where(source: str, name: str, op: str) -> str:
    """The location string of a node for a CompileError."""
    return f"{source}: layer '{name}' ({op})" if source else f"layer '{name}' ({op})"
