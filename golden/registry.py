"""``Registry``: a name -> entry table filled by decorators, shared by every layer.

It lives in ``golden`` because golden's own engine table uses it and golden imports nothing of ours; the
float kernels, the compiler (shape functions, frontend converters, the op table) and the runtime sit above
and import it downward. One helper means one wording for the two mistakes a table can see: a name
registered twice (two modules claiming one op) and a name nobody registered (a model using an op we lack).
"""
from __future__ import annotations

from typing import Callable, Generic, Iterator, Mapping, TypeVar

T = TypeVar("T")


class DuplicateNameError(ValueError):
    """Two registrations under one name: the later would silently win, so it is refused at import."""


class UnknownNameError(KeyError):
    """A look-up of a name nobody registered; a KeyError so ``in``/``get`` callers keep working."""

    def __str__(self) -> str:  # KeyError would quote the whole message
        return str(self.args[0])


class Registry(Mapping[str, T], Generic[T]):
    """Entries by name, read like a dict; ``what`` names the table in errors ("float kernel", "engine")."""

    def __init__(self, what: str) -> None:
        self.what = what
        self._entries: dict[str, T] = {}

    def add(self, name: str, entry: T) -> T:
        """Register ``entry`` under ``name``; refuse a second registration of the name."""
        if name in self._entries:
            raise DuplicateNameError(f"{self.what} {name!r} registered twice")
        self._entries[name] = entry
        return entry

    def register(self, *names: str) -> Callable[[T], T]:
        """Decorator registering the decorated object under each of ``names``."""

        def deco(entry: T) -> T:
            for name in names:
                self.add(name, entry)
            return entry

        return deco

    def __getitem__(self, name: str) -> T:
        try:
            return self._entries[name]
        except KeyError:
            raise UnknownNameError(f"unknown {self.what} {name!r} (known: {', '.join(sorted(self._entries))})") \
                from None

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def __repr__(self) -> str:
        return f"Registry({self.what!r}, {sorted(self._entries)})"
