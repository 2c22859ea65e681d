"""Regression test lists: ``regressions/lists/*.toml``.

``levels.toml`` defines the levels, cheapest first (``smoke`` < ``ci`` < ``nightly`` < ``full``), each with
the environment that sizes its tests (example counts, samples). Every other file holds ``[[unit]]`` tables:

    [[unit]]
    id = "rtl.traces.verilator"        # unique; names the unit's result directory
    area = "rtl"                        # report rows
    target = "verilator"                # report columns: golden, verilator, icarus, slurm, ...
    level = "smoke"                     # lowest level that runs it (every higher level does too)
    tags = ["rtl", "nvdla-traces"]
    tests = ["regressions/rtl/test_rtl_traces.py::*[verilator]"]

``tests`` are pytest node-id patterns in which only ``*`` is a wildcard (``[`` and ``]`` are literal, as
they are in parametrized ids). A test belongs to the first unit, in list order, whose pattern matches it,
so a broad unit listed last catches whatever the specific ones before it did not claim.
"""
from __future__ import annotations

import hashlib
import re
import tomllib
from dataclasses import asdict, dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DEFAULT_LISTS = REPO / "regressions" / "lists"


class ListError(Exception):
    """A malformed test list; the message names the file and the entry."""


@dataclass(frozen=True)
class Level:
    name: str
    description: str
    #: Environment of every test process at this level (example counts, samples, coverage switches).
    env: dict[str, str] = field(default_factory=dict)
    #: Wall-time budget on 2 cores, reported (not enforced) so a slow level shows up in the summary.
    budget_minutes: float | None = None


@dataclass(frozen=True)
class Unit:
    id: str
    area: str
    target: str
    tags: tuple[str, ...]
    #: Levels that run the unit: its ``level`` and every level after it.
    levels: tuple[str, ...]
    tests: tuple[str, ...]
    #: Source file of the unit, for error messages.
    origin: str = ""

    def _paths(self, pattern: str) -> list[str]:
        path = pattern.split("::", 1)[0]
        if "*" not in path:
            return [path] if (REPO / path).exists() else []
        return sorted(str(p.relative_to(REPO)) for p in REPO.glob(path)
                      if (p.is_dir() and p.name != "__pycache__") or p.name.endswith(".py"))

    def files(self) -> list[str]:
        """The pytest arguments that collect this unit's tests (file part of each pattern, globbed)."""
        out: list[str] = []
        for pattern in self.tests:
            out.extend(m for m in self._paths(pattern) if m not in out)
        return out

    def missing(self) -> list[str]:
        """Patterns whose files do not exist (a renamed test file shows up here, not as silence)."""
        return [t for t in self.tests if not self._paths(t)]

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, d: dict) -> Unit:
        return cls(**{**d, "tags": tuple(d["tags"]), "levels": tuple(d["levels"]), "tests": tuple(d["tests"])})


def _pattern(glob: str) -> re.Pattern[str]:
    return re.compile("".join(".*" if part == "*" else re.escape(part) for part in re.split(r"(\*)", glob)) + r"\Z")


class Matcher:
    """Assigns pytest node ids to units (first matching unit wins)."""

    def __init__(self, units: list[Unit]) -> None:
        self.units = units
        self._compiled = [(u, [_pattern(t) for t in u.tests]) for u in units]

    def unit_of(self, nodeid: str) -> Unit | None:
        for unit, patterns in self._compiled:
            if any(p.match(nodeid) for p in patterns):
                return unit
        return None


def _read_toml(path: Path) -> dict:
    try:
        return tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as e:
        raise ListError(f"{path}: {e}") from None
    except OSError as e:
        raise ListError(f"{path}: {e.strerror}") from None


def load_levels(lists_dir: Path | None = None) -> dict[str, Level]:
    path = (lists_dir or DEFAULT_LISTS) / "levels.toml"
    if not path.is_file():
        raise ListError(f"{path}: no levels file")
    raw = _read_toml(path).get("levels")
    if not isinstance(raw, dict) or not raw:
        raise ListError(f"{path}: needs [levels.<name>] tables")
    levels = {}
    for name, body in raw.items():
        env = body.get("env", {})
        if not isinstance(env, dict):
            raise ListError(f"{path}: levels.{name}.env must be a table")
        levels[name] = Level(name, str(body.get("description", "")), {k: str(v) for k, v in env.items()},
                             body.get("budget_minutes"))
    return levels


_UNIT_KEYS = {"id", "area", "target", "level", "tags", "tests"}


def load_units(levels: dict[str, Level], lists_dir: Path | None = None) -> list[Unit]:
    root = lists_dir or DEFAULT_LISTS
    order = list(levels)
    units: list[Unit] = []
    seen: dict[str, str] = {}
    for path in sorted(root.glob("*.toml")):
        if path.name == "levels.toml":
            continue
        for i, body in enumerate(_read_toml(path).get("unit", [])):
            where = f"{path.name}: unit {body.get('id', f'#{i + 1}')}"
            unknown = set(body) - _UNIT_KEYS
            if unknown:
                raise ListError(f"{where}: unknown key(s) {', '.join(sorted(unknown))}")
            missing = {"id", "area", "target", "level", "tests"} - set(body)
            if missing:
                raise ListError(f"{where}: missing {', '.join(sorted(missing))}")
            if body["level"] not in levels:
                raise ListError(f"{where}: level {body['level']!r} is not one of {', '.join(order)}")
            if body["id"] in seen:
                raise ListError(f"{where}: id also used in {seen[body['id']]}")
            tests = body["tests"]
            if not isinstance(tests, list) or not tests or not all(isinstance(t, str) for t in tests):
                raise ListError(f"{where}: tests must be a non-empty list of node-id patterns")
            seen[body["id"]] = path.name
            units.append(Unit(
                id=body["id"], area=body["area"], target=body["target"], tags=tuple(body.get("tags", ())),
                levels=tuple(order[order.index(body["level"]):]), tests=tuple(tests), origin=path.name,
            ))
    if not units:
        raise ListError(f"{root}: no [[unit]] entries")
    return units


def select(units: list[Unit], level: str, tags: list[str] | None = None, ids: list[str] | None = None) -> list[Unit]:
    """Units of ``level``, narrowed to those with any of ``tags`` and/or the given ids."""
    chosen = [u for u in units if level in u.levels]
    if tags:
        chosen = [u for u in chosen if set(tags) & set(u.tags)]
    if ids:
        known = {u.id for u in units}
        unknown = [i for i in ids if i not in known]
        if unknown:
            raise ListError(f"unknown unit id(s): {', '.join(unknown)}")
        chosen = [u for u in chosen if u.id in ids]
    return chosen


def design_hash(rtl_dir: Path | None = None) -> str:
    """Content hash of the design under test (our ``rtl/`` tree): results are keyed by it."""
    root = rtl_dir or REPO / "rtl"
    h = hashlib.sha256()
    for p in sorted(root.rglob("*")):
        if p.is_file() and "__pycache__" not in p.parts:
            h.update(str(p.relative_to(root)).encode() + b"\0" + p.read_bytes())
    return h.hexdigest()[:16]
