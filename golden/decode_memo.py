"""Decoded register configurations reused while the registers are unchanged.

A network replays the same register programs for every sample (and split layers repeat near-identical ones),
so decoding them again, a few hundred field reads and legality checks per operation, costs more than the
arithmetic of a small operation. ``memo_views`` caches a pure decoder (a function of register views and the
hardware config only, returning an immutable value) on a snapshot of the software-written words of every
view it is given. A decoder that raises is not cached: the same words raise the same error again.
"""
from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import TypeVar

from golden.regs import RegView

T = TypeVar("T")
#: Entries per decoder before the cache starts over (a network has at most a few thousand distinct ops).
LIMIT = 4096


def memo_views(fn: Callable[[Mapping[str, RegView], object], T]) -> Callable[[Mapping[str, RegView], object], T]:
    """``fn(regs, hw)`` cached on (hw, every view's unit and snapshot)."""
    cache: dict[tuple, tuple[object, T]] = {}

    @functools.wraps(fn)
    def wrapper(regs: Mapping[str, RegView], hw: object) -> T:
        key = (id(hw), *((u, v.snapshot()) for u, v in regs.items()))
        hit = cache.get(key)
        if hit is not None and hit[0] is hw:
            return hit[1]
        value = fn(regs, hw)
        if len(cache) >= LIMIT:
            cache.clear()
        cache[key] = (hw, value)
        return value

    wrapper.cache_clear = cache.clear  # type: ignore[attr-defined]
    return wrapper


def memo_view(fn: Callable[[RegView], T]) -> Callable[[RegView], T]:
    """``fn(view)`` cached on the view's unit and snapshot (a decoder of one unit's registers)."""
    cache: dict[tuple, T] = {}

    @functools.wraps(fn)
    def wrapper(view: RegView) -> T:
        key = (view.unit.name, view.snapshot())
        hit = cache.get(key)
        if hit is not None:
            return hit
        value = fn(view)
        if len(cache) >= LIMIT:
            cache.clear()
        cache[key] = value
        return value

    wrapper.cache_clear = cache.clear  # type: ignore[attr-defined]
    return wrapper
