"""File digests and simulator versions remembered across processes, for the CLI's start-up.

``tb.runner`` names every build by a hash of its sources' *contents*; hashing NVDLA's few hundred files
and asking Verilator its version (a Perl start) cost the CLI a good part of a second on every ``dla``
call. Both are cached in ``<build root>/.digests.json`` under the file's (size, mtime, inode), which an
edit changes, so an edited file is hashed again; a lost race between processes only loses entries.
"""
from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from dlaio import OutputError, write_atomic

REPO = Path(__file__).resolve().parents[1]
_cache: dict[str, list] | None = None
_dirty = False


def _path() -> Path:
    env = os.environ.get("DLA_SIM_BUILD")
    return (Path(env) if env else REPO / "build" / "sim") / ".digests.json"


def _load() -> dict[str, list]:
    global _cache
    if _cache is None:
        try:
            _cache = json.loads(_path().read_text())
        except (OSError, ValueError):
            _cache = {}
    return _cache


def _stamp(path: Path) -> list[int]:
    st = os.stat(path)
    return [st.st_size, st.st_mtime_ns, st.st_ino]


def file_digest(path: Path) -> str:
    """sha256 of a file's contents (cached under its size, mtime and inode)."""
    global _dirty
    cache, key, stamp = _load(), f"file:{path}", _stamp(path)
    hit = cache.get(key)
    if hit and hit[:3] == stamp:
        return hit[3]
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    cache[key] = [*stamp, h.hexdigest()]
    _dirty = True
    return h.hexdigest()


def cached_version(exe: str, compute) -> str:
    """``compute()`` (a tool's version string), cached under the executable's stamp."""
    global _dirty
    try:
        stamp = _stamp(Path(exe))
    except OSError:
        return compute()
    cache, key = _load(), f"version:{exe}"
    hit = cache.get(key)
    if hit and hit[:3] == stamp:
        return hit[3]
    value = compute()
    cache[key] = [*stamp, value]
    _dirty = True
    return value


def save() -> None:
    """Write the cache back if it changed (atomically; errors are ignored: it is only a cache)."""
    global _dirty
    if not _dirty or _cache is None:
        return
    path = _path()
    try:
        write_atomic(path, json.dumps(_cache))
        _dirty = False
    except (OSError, OutputError):
        pass
