"""What an input path is, in words: only regular files are read as models, loadables or arrays.

Opening a FIFO blocks until someone writes to it (``dla run`` hung forever on one), a device like
``/dev/zero`` never ends, and a folder is not a file: each is refused before it is opened, and the error
says what the path is ("not a regular file (a FIFO)") instead of "no such file".
"""
from __future__ import annotations

import os
import stat

PathLike = str | os.PathLike


def kind_of(mode: int) -> str:
    """``st_mode`` in words: "a directory", "a FIFO", "a device", "a socket", "a regular file"."""
    if stat.S_ISREG(mode):
        return "a regular file"
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "of an unknown kind"


def not_a_file(path: PathLike) -> str | None:
    """None when ``path`` is (or links to) a regular file; else why it cannot be read as one, for an error
    line ``<path>: <why>``: "no such file or directory", "not a regular file (a FIFO)", ... Stats only,
    never opens."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return "no such file or directory"
    except NotADirectoryError:
        return "no such file or directory (a parent is not a directory)"
    except OSError as exc:
        return f"cannot read: {exc.strerror or exc}"
    return None if stat.S_ISREG(mode) else f"not a regular file ({kind_of(mode)})"
