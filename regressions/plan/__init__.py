"""The verification plan as data: each feature of each engine and of the compiler/runtime names the tests, fuzz
properties, functional coverage bins and RTL units that verify it (``regressions/plan/*.toml``).

A hardware team signs off against such a plan (features -> tests -> coverage), not against a pass count: it
shows which features a green run verified, which only partly (a test skipped or failing, a bin never hit) and
which not at all, on each verification target (golden, our RTL, NVDLA's RTL). ``evaluate`` turns one
regression run's records and coverage into that status; the report renders it, with the tests that belong to
no feature.

A feature::

    [[feature]]
    id = "pdp.split_width"               # unique, "<area>.<name>"
    name = "PDP split width"
    source = ["docs/golden-semantics.md#pdp/4"]   # where the feature is described (section slug / bullet)
    tests = ["tests/golden/test_pdp.py::test_split_*"]     # node-id patterns (fnmatch), any target
    fuzz = ["regressions/fuzz/test_engines.py::test_pdp_split_mode_*"]  # hypothesis properties, same form
    bins = ["PDP:split:2", "PDP:split:>2"]   # ENGINE:coverpoint:bin of regressions/coverage/functional.py
    rtl = ["nvdla:pdp", "rtl/engines/dla_pdp.v"]  # RTL units (NVDLA) / files (ours) whose lines it exercises
    targets = ["golden", "nvdla-rtl"]     # where it must be verified (default: golden)

Status on one target: **verified** when at least one of its tests ran there and passed, none failed or
errored, and every bin was hit; **partial** when some passed but a test failed, or a bin was missed;
**not verified** when tests ran there and none passed (failures, skips); **not run** when none of its tests
was selected there (a lower level, a unit selection).
"""
from __future__ import annotations

import fnmatch
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

PLAN_DIR = Path(__file__).resolve().parent
REPO = PLAN_DIR.parents[1]
#: The verification targets a plan row has a status for, in report order.
TARGETS = ("golden", "rtl", "nvdla-rtl")
TARGET_NAMES = {"golden": "golden", "rtl": "our RTL", "nvdla-rtl": "NVDLA RTL"}
VERIFIED, PARTIAL, NOT_VERIFIED, NOT_RUN, NOT_APPLICABLE = "verified", "partial", "not verified", "not run", "n/a"
STATUSES = (VERIFIED, PARTIAL, NOT_VERIFIED, NOT_RUN)


class PlanError(ValueError):
    """A malformed plan file: one line naming the file and the feature."""


@dataclass(frozen=True)
class Feature:
    id: str
    name: str
    file: str
    source: tuple[str, ...] = ()
    tests: tuple[str, ...] = ()
    fuzz: tuple[str, ...] = ()
    bins: tuple[str, ...] = ()
    rtl: tuple[str, ...] = ()
    targets: tuple[str, ...] = ("golden",)

    def patterns(self) -> tuple[str, ...]:
        return self.tests + self.fuzz

    def matches(self, nodeid: str) -> bool:
        """Whether a test (node id, parameters included) belongs to this feature."""
        base = nodeid.split("[", 1)[0]
        return any(fnmatch.fnmatchcase(nodeid, p) or fnmatch.fnmatchcase(base, p) for p in self.patterns())


_KEYS = {"id", "name", "source", "tests", "fuzz", "bins", "rtl", "targets"}


def load(directory: Path = PLAN_DIR) -> list[Feature]:
    """Every feature of ``directory/*.toml``, in file order; ``PlanError`` on a malformed entry."""
    features: list[Feature] = []
    seen: dict[str, str] = {}
    for path in sorted(directory.glob("*.toml")):
        try:
            doc = tomllib.loads(path.read_text())
        except tomllib.TOMLDecodeError as exc:
            raise PlanError(f"{path.name}: {exc}") from None
        for i, entry in enumerate(doc.get("feature", []), 1):
            where = f"{path.name}: feature {entry.get('id', f'#{i}')!r}"
            unknown = set(entry) - _KEYS
            if unknown:
                raise PlanError(f"{where}: unknown key(s) {', '.join(sorted(unknown))}")
            if not entry.get("id") or not entry.get("name"):
                raise PlanError(f"{where}: needs an id and a name")
            if entry["id"] in seen:
                raise PlanError(f"{where}: id also used in {seen[entry['id']]}")
            if not entry.get("tests") and not entry.get("fuzz"):
                raise PlanError(f"{where}: names no test or fuzz property")
            targets = tuple(entry.get("targets", ["golden"]))
            bad = [t for t in targets if t not in TARGETS]
            if bad:
                raise PlanError(f"{where}: unknown target(s) {', '.join(bad)} (known: {', '.join(TARGETS)})")
            seen[entry["id"]] = path.name
            features.append(Feature(entry["id"], entry["name"], path.name, tuple(entry.get("source", ())),
                                    tuple(entry.get("tests", ())), tuple(entry.get("fuzz", ())),
                                    tuple(entry.get("bins", ())), tuple(entry.get("rtl", ())), targets))
    return features


def check_bins(features: Iterable[Feature], definitions: dict[str, dict]) -> list[str]:
    """Problems with the features' bin names against the functional coverage definitions."""
    problems = []
    for f in features:
        for b in f.bins:
            engine, _, name = b.partition(":")
            spec = definitions.get(engine)
            if spec is None:
                problems.append(f"{f.file}: feature {f.id!r}: bin {b!r}: no engine {engine!r}")
            elif name not in spec["bins"]:
                problems.append(f"{f.file}: feature {f.id!r}: bin {b!r}: no such bin of {engine}")
            elif name in spec.get("ignored", ()):
                problems.append(f"{f.file}: feature {f.id!r}: bin {b!r} is declared unreachable")
    return problems


# ---- documents the plan must cover ---------------------------------------------------------------------------
def slug(title: str) -> str:
    """A Markdown heading as the plan's section name: lower case, words joined by '-'."""
    return re.sub(r"[^a-z0-9]+", "-", title.lower().split("(")[0]).strip("-")


def doc_bullets(path: Path) -> list[str]:
    """``<file>#<section>/<n>`` for every top-level bullet of every ``##`` section of a Markdown file."""
    out, section, n = [], None, 0
    rel = path.relative_to(REPO) if path.is_relative_to(REPO) else path
    for line in path.read_text().splitlines():
        if line.startswith("## "):
            section, n = slug(line[3:]), 0
        elif section and line.startswith("- "):
            n += 1
            out.append(f"{rel}#{section}/{n}")
    return out


# ---- status of one run ---------------------------------------------------------------------------------------
def target_of(area: str, target: str) -> str:
    """The verification target of a regression record: NVDLA's RTL units have areas ``nvdla-rtl-*``; other
    simulator units run our RTL; everything else checks the golden model (and the software on it)."""
    if area.startswith("nvdla-rtl"):
        return "nvdla-rtl"
    if target in ("icarus", "verilator", "sim"):
        return "rtl"
    return "golden"


@dataclass
class Row:
    feature: Feature
    #: target -> {"passed", "failed", "skipped", "tests", "status"}
    targets: dict[str, dict] = field(default_factory=dict)
    bins_hit: int = 0
    bins_missed: list[str] = field(default_factory=list)
    #: "unit or file" -> (hit, total) line coverage, where collected
    rtl_lines: dict[str, tuple[int, int]] = field(default_factory=dict)


def _rtl_lines(coverage: dict) -> dict[str, tuple[int, int]]:
    """Line coverage per RTL name a plan may cite: our files (``rtl/...``) and NVDLA's units (``nvdla:pdp``)."""
    out: dict[str, tuple[int, int]] = {}
    rtl = (coverage or {}).get("rtl") or {}
    for name, fig in (rtl.get("files") or {}).items():
        if isinstance(fig, dict) and "line" in fig:
            out[name if name.startswith("rtl/") else f"rtl/{name}"] = tuple(fig["line"][:2])
    for source in (rtl.get("nvdla_units"), ((coverage or {}).get("nvdla_rtl") or {}).get("units")):
        for unit, fig in (source or {}).items():
            if isinstance(fig, dict) and "line" in fig:
                out[f"nvdla:{unit}"] = tuple(fig["line"][:2])
    return out


def evaluate(features: list[Feature], records: Iterable, coverage: dict | None = None) -> dict:
    """Status of every feature on its targets from a run's records (``regressions.regress.results.Record``:
    nodeid, area, target, outcome) and its coverage summary; plus the tests that map to no feature."""
    records = list(records)
    rows = [Row(f) for f in features]
    mapped: set[str] = set()
    for row in rows:
        f = row.feature
        for t in TARGETS:
            row.targets[t] = {"passed": 0, "failed": 0, "skipped": 0, "tests": 0}
        for r in records:
            if f.matches(r.nodeid):
                mapped.add(r.nodeid)
                cell = row.targets[target_of(r.area, r.target)]
                cell["tests"] += 1
                if r.outcome == "passed":
                    cell["passed"] += 1
                elif r.outcome in ("failed", "error"):
                    cell["failed"] += 1
                else:
                    cell["skipped"] += 1
    functional = (coverage or {}).get("functional") or {}
    lines = _rtl_lines(coverage or {})
    for row in rows:
        for b in row.feature.bins if functional else ():  # no functional coverage collected: bins unknown
            engine, _, name = b.partition(":")
            if functional.get(engine, {}).get("counts", {}).get(name):
                row.bins_hit += 1
            else:
                row.bins_missed.append(b)
        row.rtl_lines = {u: lines[u] for u in row.feature.rtl if u in lines}
        for t, cell in row.targets.items():
            if t not in row.feature.targets:
                cell["status"] = NOT_APPLICABLE if not cell["tests"] else _status(cell, row, t)
            else:
                cell["status"] = _status(cell, row, t)
    unmapped = sorted({r.nodeid.split("[", 1)[0] for r in records if r.nodeid not in mapped})
    counts = {t: {s: sum(row.targets[t]["status"] == s for row in rows if t in row.feature.targets)
                  for s in STATUSES} for t in TARGETS}
    return {"features": [_row_dict(r) for r in rows], "unmapped": unmapped, "counts": counts,
            "functional_collected": bool(functional)}


def _status(cell: dict, row: Row, target: str) -> str:
    if not cell["tests"]:
        return NOT_RUN
    if not cell["passed"]:
        return NOT_VERIFIED
    # bins are sampled from the golden model's operations, which every target's checks run too
    if cell["failed"] or row.bins_missed:
        return PARTIAL
    return VERIFIED


def _row_dict(row: Row) -> dict:
    f = row.feature
    return {"id": f.id, "name": f.name, "file": f.file, "source": list(f.source), "targets": row.targets,
            "required": list(f.targets), "bins": len(f.bins), "bins_hit": row.bins_hit,
            "bins_missed": row.bins_missed, "rtl": list(f.rtl), "rtl_lines": {k: list(v) for k, v in row.rtl_lines.items()}}


def check_plan(features: list[Feature] | None = None) -> list[str]:
    """Every problem of the plan: unknown bins, uncited ``docs/golden-semantics.md`` bullets, citations of
    bullets that do not exist, test patterns whose files do not exist, test files no feature names."""
    from regressions.coverage.functional import definitions

    try:
        features = load() if features is None else features
    except PlanError as exc:
        return [str(exc)]
    problems = check_bins(features, definitions())
    bullets = doc_bullets(REPO / "docs" / "golden-semantics.md")
    cited = {s for f in features for s in f.source}
    problems += [f"{b}: no feature cites this bullet" for b in bullets if b not in cited]
    problems += [f"{f.file}: feature {f.id!r}: cites {s}, which does not exist" for f in features for s in f.source
                 if s.startswith("docs/golden-semantics.md") and s not in bullets]
    test_files = sorted(str(p.relative_to(REPO)) for d in ("tests", "regressions") for p in (REPO / d).rglob("test_*.py"))
    for f in features:
        for p in f.patterns():
            file_part = p.split("::", 1)[0]
            if not any(fnmatch.fnmatchcase(t, file_part) for t in test_files):
                problems.append(f"{f.file}: feature {f.id!r}: pattern {p!r} names no test file")
    named = [p.split("::", 1)[0] for f in features for p in f.patterns()]
    problems += [f"{t}: no feature names this test file" for t in test_files
                 if not any(fnmatch.fnmatchcase(t, p) for p in named)]
    return problems
