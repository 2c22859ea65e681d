"""The one way the tools write a file or a folder the user named.

Why one writer: replacing the path by a temp file renamed over it destroys whatever the path is. As root,
``--output /dev/full`` turned the device node into a regular file; a symlink became a file; ``-o`` naming
the model, ``--output`` naming the loadable or an ``--input``, ``--json`` naming a trace's ``.cfg`` wiped the
command's own input and exited 0. So every output is checked first (:func:`check_output`), before any
work starts, and written whole or not at all (:func:`write_atomic`, :func:`publish_dir`):

- the target must be absent or of the expected kind: a regular file for a file, a directory for a folder.
  Devices, FIFOs and sockets are refused (a FIFO is never opened, so the check cannot block);
- a symlink is followed and the rule applied to what it points at; the write then goes there, so the
  link survives. A dangling symlink is refused (as GNU cp does): writing through it would create a file
  wherever it points;
- an output that is the same file as an input of the command (``st_dev``/``st_ino``, so hard links and
  symlinks count), or a folder that holds an input, is refused;
- the parent folder must exist and be writable, or be creatable.

Written: a temp file beside the target, ``fsync``, ``os.replace``; the temp file is removed on any error,
the existing file's mode is kept. Errors are :class:`OutputError` naming the path the user gave.

Imports nothing of ours: every layer (compiler, runtime, tb, regressions) may use it.
"""
from __future__ import annotations

import os
import shutil
import stat
import tempfile
from pathlib import Path
from typing import BinaryIO, Callable, Iterable, Literal, Union

from dlaio.inputs import kind_of

__all__ = ["OutputError", "check_output", "write_atomic", "publish_dir", "input_files"]

PathLike = Union[str, "os.PathLike[str]"]
Content = Union[bytes, str, Callable[[BinaryIO], object]]
Kind = Literal["file", "dir"]


class OutputError(Exception):
    """An output the tools refuse to write, or could not write: ``cannot write <path>: <reason>``.

    ``path`` is the path as the user gave it (never an internal temp file)."""

    def __init__(self, path: PathLike, reason: str):
        self.path = os.fspath(path)
        self.reason = reason
        super().__init__(f"cannot write {self.path}: {reason}")


def _resolve(path: Path, given: PathLike) -> Path:
    """``path`` with symlinks followed (the write goes to what a link points at, so the link survives)."""
    if not path.is_symlink():
        return path
    try:
        os.stat(path)
        return path.resolve(strict=True)
    except FileNotFoundError:  # like GNU cp: a link to nothing may be a trap (or a typo); never write through it
        raise OutputError(given, f"it is a dangling symlink (to {os.readlink(path)}); not writing through it") from None
    except (OSError, RuntimeError) as exc:  # a symlink loop
        raise OutputError(given, f"cannot follow the symlink ({getattr(exc, 'strerror', None) or exc})") from None


def _identities(inputs: Iterable[PathLike]) -> dict[tuple[int, int], str]:
    """(st_dev, st_ino) -> the input's path, for every input that exists."""
    ids: dict[tuple[int, int], str] = {}
    for p in inputs:
        if p is None:
            continue
        try:
            st = os.stat(p)
        except (OSError, ValueError):
            continue
        ids.setdefault((st.st_dev, st.st_ino), os.fspath(p))
    return ids


def _check_parent(target: Path, given: PathLike) -> None:
    """The folder the output goes into exists and is writable, or can be created below a writable one."""
    parent = target.parent
    while True:
        try:
            st = os.stat(parent)
        except (FileNotFoundError, NotADirectoryError):
            if parent.parent == parent:
                raise OutputError(given, f"its folder {target.parent} cannot be created") from None
            parent = parent.parent
            continue
        except OSError as exc:
            raise OutputError(given, f"its folder {parent}: {exc.strerror or exc}") from None
        break
    if not stat.S_ISDIR(st.st_mode):
        raise OutputError(given, f"{parent} is {kind_of(st.st_mode)}, not a folder")
    if not os.access(parent, os.W_OK | os.X_OK):
        what = "is not writable" if parent == target.parent else f"cannot be created ({parent} is not writable)"
        raise OutputError(given, f"its folder {target.parent} {what}")


def check_output(path: PathLike, *, inputs: Iterable[PathLike] = (), kind: Kind = "file") -> Path:
    """Refuse an output the tools must not write; return where to write it (symlinks followed).

    ``kind="file"``: absent or a regular file. ``kind="dir"``: absent or a directory, which must not hold
    any of ``inputs``. Never opens the target, so a FIFO cannot block the check."""
    given = path
    target = _resolve(Path(path), given)
    try:
        st = os.stat(target)
    except (FileNotFoundError, NotADirectoryError):  # NotADirectory: the parent check words it
        st = None
    except OSError as exc:
        raise OutputError(given, exc.strerror or str(exc)) from None
    ids = _identities(inputs)
    if st is not None:
        if kind == "file" and not stat.S_ISREG(st.st_mode):
            raise OutputError(given, f"it is {kind_of(st.st_mode)}, not a regular file")
        if kind == "dir" and not stat.S_ISDIR(st.st_mode):
            raise OutputError(given, f"it is {kind_of(st.st_mode)}, not a folder")
        same = ids.get((st.st_dev, st.st_ino))
        if same is not None:
            also = "" if os.path.abspath(same) == os.path.abspath(os.fspath(given)) else f" ({same})"
            raise OutputError(given, f"it is an input of this command{also}; refusing to overwrite it")
        if kind == "dir":
            held = _held_input(target, ids.values())
            if held is not None:
                raise OutputError(given, f"the folder holds {held}, an input of this command; "
                                         "refusing to write into it")
            if not os.access(target, os.W_OK | os.X_OK):
                raise OutputError(given, "the folder is not writable")
    _check_parent(target, given)
    return target


def _held_input(folder: Path, inputs: Iterable[str]) -> str | None:
    """The first input found inside ``folder`` (at any depth, links followed), else None."""
    try:
        root = os.stat(folder)
    except OSError:
        return None
    for p in inputs:
        for parent in Path(os.path.realpath(p)).parents:
            try:
                st = os.stat(parent)
            except OSError:
                continue
            if (st.st_dev, st.st_ino) == (root.st_dev, root.st_ino):
                return p
    return None


def input_files(paths: Iterable[PathLike]) -> list[Path]:
    """Every file under ``paths`` (a file itself, a folder's files at any depth): the inputs of a command
    that reads folders, for :func:`check_output`."""
    out: list[Path] = []
    for p in paths:
        p = Path(p)
        if p.is_dir():
            out.extend(f for f in p.rglob("*") if not f.is_dir())
        else:
            out.append(p)
    return out


def _mode_for(target: Path) -> int:
    """The existing file's permission bits, else what a plain ``open()`` would give (0o666 minus umask)."""
    try:
        return stat.S_IMODE(os.stat(target).st_mode)
    except OSError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask


def write_atomic(path: PathLike, content: Content, *, inputs: Iterable[PathLike] = ()) -> Path:
    """Write ``content`` (bytes, text, or ``fn(binary_file)``) to ``path`` whole or not at all; returns the
    path written (a symlink's target). Raises :class:`OutputError` naming ``path``; on any error the
    existing file is intact and no temp file is left."""
    target = check_output(path, inputs=inputs)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise OutputError(path, f"cannot create its folder: {exc.strerror or exc}") from None
    mode = _mode_for(target)
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    except OSError as exc:
        raise OutputError(path, exc.strerror or str(exc)) from None
    try:
        with os.fdopen(fd, "wb") as f:
            if callable(content):
                content(f)
            else:
                f.write(content.encode() if isinstance(content, str) else content)
            f.flush()
            os.fsync(f.fileno())
            os.fchmod(f.fileno(), mode)
        os.replace(tmp, target)
    except BaseException as exc:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        if isinstance(exc, OSError) and not isinstance(exc, OutputError):
            raise OutputError(path, exc.strerror or str(exc)) from None
        raise
    return target


def publish_dir(directory: PathLike, fill: Callable[[Path], object] | dict[str, bytes], *,
                inputs: Iterable[PathLike] = ()) -> Path:
    """Write a folder of outputs all or nothing; returns the folder written (a symlink's target).

    ``fill(stage)`` writes the entries into a hidden staging folder (or ``fill`` is a name -> bytes
    mapping). A new folder appears at once (one rename). Into an existing folder each top-level entry is
    moved over the same-named one (files first, ``index.json`` last; a sub-folder replaces the old one
    whole); entries the stage does not hold are left alone. Every entry it would replace is checked
    first like a file output, so a device or FIFO inside the folder survives too."""
    inputs = list(inputs)  # used twice: for the folder, then for each entry it would replace
    target = check_output(directory, inputs=inputs, kind="dir")
    exists = target.is_dir()
    parent = target if exists else target.parent
    try:
        parent.mkdir(parents=True, exist_ok=True)
        stage = Path(tempfile.mkdtemp(prefix=f".{target.name or 'out'}.", suffix=".tmp", dir=parent))
    except OSError as exc:
        raise OutputError(directory, exc.strerror or str(exc)) from None
    try:
        if callable(fill):
            fill(stage)
        else:
            for name, data in fill.items():
                (stage / name).write_bytes(data)
        if not exists:
            os.chmod(stage, 0o777 & ~_umask())
            os.rename(stage, target)
            return target
        names = sorted(os.listdir(stage), key=lambda n: (n == "index.json", n))
        for name in names:  # refuse before anything moves
            kind: Kind = "dir" if (stage / name).is_dir() else "file"
            check_output(Path(directory) / name, inputs=inputs, kind=kind)
        for name in names:
            _move_in(stage / name, target / name, Path(directory) / name, stage)
    except BaseException as exc:
        if isinstance(exc, OSError) and not isinstance(exc, OutputError):
            raise OutputError(directory, exc.strerror or str(exc)) from None
        raise
    finally:
        shutil.rmtree(stage, ignore_errors=True)
    return target


def _umask() -> int:
    umask = os.umask(0)
    os.umask(umask)
    return umask


def _move_in(src: Path, dest: Path, given: Path, stage: Path) -> None:
    """Move one staged entry over ``dest`` (a file through its symlink; a folder replaced whole, the old
    one kept until the new one is in place)."""
    if src.is_dir():
        old = stage / ".old"
        if dest.exists() or dest.is_symlink():
            os.rename(dest, old)
        try:
            os.rename(src, dest)
        except BaseException:
            if old.exists() or old.is_symlink():
                os.rename(old, dest)
            raise
        shutil.rmtree(old, ignore_errors=True)
        return
    real = _resolve(dest, given)
    if real == dest:
        os.chmod(src, _mode_for(dest))
        os.replace(src, dest)
    else:  # a symlink, maybe to another file system: write through it
        write_atomic(given, src.read_bytes())
