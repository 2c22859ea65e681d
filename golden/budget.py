"""The memory budget: every size a user declares (trace memories, data files, cubes, loadable regions,
model shapes, calibration counts) is checked against one limit *before* anything is allocated, so a
two-line input cannot ask for 8 GB and take the machine down with it.

The limit is, in order: the value given to :func:`set_max_memory` (``--max-memory``), ``$DLA_MAX_MEMORY``,
else half of the memory this process may use: the machine's physical memory, or less when an address-space
limit (``ulimit -v``, RLIMIT_AS) or a cgroup memory limit says so. Sizes read like ``512M``, ``8G``,
``1.5GiB`` or plain bytes.
"""
from __future__ import annotations

import os
import re
from functools import lru_cache
from pathlib import Path

try:
    import resource
except ImportError:  # not on every platform: then no address-space limit is known
    resource = None  # type: ignore[assignment]

from golden.errors import DlaError

_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)(?:i?b)?\s*$", re.IGNORECASE)
_override: int | None = None
#: The environment variable that sets the budget when ``--max-memory`` is not given.
MAX_MEMORY_ENV = "DLA_MAX_MEMORY"


class MemoryBudgetError(DlaError):
    """A declared size that does not fit the memory budget; names what asked for it."""

    def __init__(self, what: str, nbytes: int, limit: int) -> None:
        self.what, self.nbytes, self.limit = what, nbytes, limit
        super().__init__(f"{what}: {format_size(nbytes)} exceeds the memory budget of {format_size(limit)} "
                         "(raise it with --max-memory or DLA_MAX_MEMORY)")


class BudgetSettingError(DlaError):
    """``$DLA_MAX_MEMORY`` holds something that is not a size. Refused rather than ignored: whoever set it
    meant to bound memory, and a typo must not silently leave the default (half the RAM) in force."""


def parse_size(text: str) -> int:
    """``'8G'`` -> 8 GiB in bytes; ValueError naming the text when it is not a size."""
    m = _SIZE.match(str(text))
    if not m:
        raise ValueError(f"{text!r} is not a size (expected e.g. 512M, 8G or a number of bytes)")
    value = int(float(m.group(1)) * _UNITS[m.group(2).lower()])
    if value <= 0:
        raise ValueError(f"{text!r}: the size must be positive")
    return value


def format_size(nbytes: int) -> str:
    """A short human size: ``1.5 GiB``, ``300 MiB``, ``12 bytes``."""
    for unit, scale in (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if abs(nbytes) >= scale:
            value = nbytes / scale
            return f"{value:.3g} {unit}" if abs(value) < 999.5 else f"{value:,.0f} {unit}"  # never 1.01e+03
    return f"{nbytes} bytes"


@lru_cache(maxsize=1)
def physical_memory() -> int:
    """Bytes of RAM on this machine (8 GiB when the platform does not say); asked once, memory writes
    consult the budget often."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 8 << 30


@lru_cache(maxsize=1)
def cgroup_memory_limit() -> int | None:
    """The memory limit of this process's cgroup (v2 ``memory.max``, v1 ``memory.limit_in_bytes``), or None."""
    for name in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        try:
            return int(Path(name).read_text().strip())
        except (OSError, ValueError):  # absent, or "max"
            continue
    return None


def usable_memory() -> int:
    """Bytes this process may use: physical memory, capped by RLIMIT_AS and the cgroup limit. A budget above
    what the process can map would let a declared size through only to die of MemoryError."""
    usable = physical_memory()
    if resource is not None:
        soft, _ = resource.getrlimit(resource.RLIMIT_AS)
        if soft != resource.RLIM_INFINITY and soft > 0:
            usable = min(usable, soft)
    cgroup = cgroup_memory_limit()
    if cgroup:
        usable = min(usable, cgroup)
    return usable


def set_max_memory(nbytes: int | None) -> None:
    """Set (or with None, clear) the process-wide limit, e.g. from ``--max-memory``."""
    global _override
    _override = nbytes


def max_memory() -> int:
    """The limit in bytes now in force; BudgetSettingError when ``$DLA_MAX_MEMORY`` is not a size."""
    if _override is not None:
        return _override
    env = os.environ.get(MAX_MEMORY_ENV)
    if env:
        try:
            return parse_size(env)
        except ValueError as exc:
            raise BudgetSettingError(f"{MAX_MEMORY_ENV}={exc}") from None
    return usable_memory() // 2


def check_size(what: str, nbytes: int, limit: int | None = None) -> int:
    """Return ``nbytes`` if it fits the budget, else raise MemoryBudgetError naming ``what``.

    Negative sizes are a ValueError: callers word them as their own format's error."""
    if nbytes < 0:
        raise ValueError(f"{what}: negative size {nbytes}")
    cap = max_memory() if limit is None else limit
    if nbytes > cap:
        raise MemoryBudgetError(what, nbytes, cap)
    return nbytes
