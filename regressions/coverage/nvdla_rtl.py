"""Verilator line/toggle coverage of NVDLA's nv_small RTL per unit: NVDLA's own traces alone against our suites.

    python -m regressions.coverage.nvdla_rtl --pool traces|suite|both [--level ci|nightly] [--out DIR] [--jobs 2]
    make rtl-coverage [LEVEL=ci] [POOL=both]          # -> build/rtl-coverage/<time>/ (and build/rtl-coverage/latest)

Both pools run on one coverage build of the named DUT ``nvdla-nv_small`` (``tb.duts``; ``--coverage-line
--coverage-toggle``, its own cached build under ``build/sim``), each with its own ``$DLA_RTL_COVERAGE_DIR``:

- **traces**: every trace of NVDLA's nv_small suite (``$NVDLA_TRACES/nv_small``, default
  ``../shared/nvdla/traces/nv_small``: 85, of which 70 pass and 15 are N/A on nv_small) as shipped, fixed AXI
  timing, one simulation per trace, ``--jobs`` at a time (most expensive first);
- **suite**: our suites on that DUT, the ``[[unit]]``s of ``regressions/lists/*.toml`` whose tests live in
  ``regressions/rtl/test_nvdla_rtl_*.py`` (Verilator; not the unit replaying NVDLA's traces, nor mutation
  campaigns; nv_full is another file) at
  ``--level`` (units of that level and below, with the level's environment from ``levels.toml``: example counts,
  ``DLA_NVDLA_RTL=full``, random AXI timing seeded by ``FUZZ_SEED``), run by pytest with ``--jobs`` xdist workers
  and this module as a plugin. The plugin keeps ``$DLA_RTL_COVERAGE_DIR`` set for each test's body (the suites'
  ``no_rtl_coverage`` fixture removes it for ``make regress``, which does not measure NVDLA's RTL).

Every simulation's ``.dat`` (140 MB for nv_small) is reduced as soon as it is written: the points it hit go to
``<pool>/hits/<id>.dat.gz`` (about 1 MB, a Verilator coverage file), the source lines it ran (line/branch points
hit) to ``<pool>/sims/<id>.json`` (per trace, per test); the raw file is then deleted (``--keep-dat`` keeps it).
So ``--which FILE:LINE`` (or ``covering()``) tells which traces and tests run a line: what a mutation campaign
on NVDLA's RTL needs to pick the tests of a mutant. ``--resume`` keeps what ``--out``'s pools hold (traces
already measured are not played again; suite units can be added one invocation at a time).

Outputs in ``--out``: ``<pool>/merged.dat`` (every point, readable by ``verilator_coverage``),
``<pool>/summary.json`` (per unit and per file: lines, branches, toggles, uncovered lines), ``<pool>/uncovered.json``
(unit -> file -> every uncovered line as ranges), and for both pools ``summary.json`` / ``report.md``: per unit,
lines and toggles of traces and suite, whether the suite is ahead (at least as many lines and toggles hit, more
of one), and the lines only the traces run (all of them in ``only-traces.json``). The regression report shows
that table (``regressions.regress.report``).
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Iterable, Iterator

from dlaio import write_atomic
from regressions.coverage import rtl

REPO = rtl.REPO
DEFAULT_OUT = REPO / "build" / "rtl-coverage"
#: Where the regression report looks for a measurement made inside a run (``<run>/**/coverage/nvdla-rtl``).
RUN_SUBDIR = "nvdla-rtl"
CONFIG = "nv_small"
SIMULATOR = "verilator"
POOLS = ("traces", "suite")
FORMAT = 1
#: Our suites' test files on NVDLA's RTL; units replaying NVDLA's traces and mutation campaigns are left out.
SUITE_FILES = "regressions/rtl/test_nvdla_rtl_*.py"
SUITE_EXCLUDED_TAGS = ("nvdla-traces", "mutation")
#: The plugin's switch: where the suite's simulations leave their coverage (set by ``run_suite_pool``).
PLUGIN_ENV = "DLA_NVDLA_COV_DIR"
#: The plugin's test selection: unit ids, comma separated (the first unit matching a test owns it, as in
#: ``make regress``).
PLUGIN_UNITS_ENV = "DLA_NVDLA_COV_UNITS"


# ---- reducing simulations as they finish ---------------------------------------------------------------------
class Collector:
    """Reduces each simulation's (or test's) ``.dat`` files as they are written: the points they hit go to
    ``hits/<id>.dat.gz`` (a Verilator coverage file of the nonzero points: about 1 MB where nv_small's raw file is
    140 MB), the source lines they ran to ``sims/<id>.json``; the first one also leaves every point name (count 0)
    in ``universe.dat.gz``. A pool's ``merged.dat`` is the universe plus every hits file (``finish_pool``)."""

    def __init__(self, pool_dir: Path, keep_dat: bool = False) -> None:
        self.pool_dir = Path(pool_dir)
        self.keep_dat = keep_dat
        self.classifier = rtl.Classifier(rtl.default_trees())
        self.bad: list[str] = []

    def take(self, sim_id: str, files: Iterable[Path], **facts: object) -> dict:
        """Reduce ``files`` (one simulation's, or one test's simulations') into ``hits/<id>.dat.gz`` and
        ``sims/<id>.json`` (``facts`` plus ``{"dat": n, "hits", "lines": {tree: {file: "ranges"}}}``); the raw files
        are then deleted unless ``keep_dat``."""
        files = sorted(files)
        part, bad = rtl.merge_dats(files)
        self.bad += [str(b) for b in bad]
        universe = self.pool_dir / UNIVERSE
        if part and not universe.is_file():
            rtl.write_dat(universe, dict.fromkeys(part, 0))
        hits = {name: count for name, count in part.items() if count}
        stem = safe_name(sim_id)
        if hits:
            rtl.write_dat(self.pool_dir / "hits" / f"{stem}.dat.gz", hits)
        lines = self.classifier.hit_lines(hits)
        record = {"id": sim_id, **facts, "dat": len(files) - len(bad), "hits": f"hits/{stem}.dat.gz" if hits else None,
                  "lines": {tree: {f: rtl.line_ranges(ls) for f, ls in by_file.items()}
                            for tree, by_file in lines.items()}}
        write_atomic(self.pool_dir / "sims" / f"{stem}.json", json.dumps(record))
        if not self.keep_dat:
            for f in files:
                if str(f) not in self.bad:
                    f.unlink(missing_ok=True)
        return record


UNIVERSE = "universe.dat.gz"


def safe_name(text: str) -> str:
    return re.sub(r"[^\w.-]+", "_", text).strip("_")[:150] or "x"


def _fresh(pool_dir: Path, resume: bool) -> None:
    """Start a pool's folder over, unless resuming (what it holds counts; done traces are not run again)."""
    if not resume:
        for sub in ("sims", "hits", "raw", "runs"):
            shutil.rmtree(pool_dir / sub, ignore_errors=True)
        (pool_dir / UNIVERSE).unlink(missing_ok=True)
    pool_dir.mkdir(parents=True, exist_ok=True)


# ---- pool: NVDLA's traces ------------------------------------------------------------------------------------
def traces_root() -> Path:
    root = os.environ.get("NVDLA_TRACES", "").strip()
    base = Path(root).expanduser() if root else REPO.parent / "shared" / "nvdla" / "traces"
    return (base / CONFIG).resolve()


def nvdla_options(**extra: object) -> dict:
    from tb.duts import named_dut

    return {"filelist": str(named_dut(rtl.NVDLA_DUT)), **extra}


def build_dut(coverage_dir: Path) -> dict:
    """Build (or reuse) the coverage build of nv_small; its directory and seconds."""
    from tb.runner import RTL_COVERAGE_ENV, build
    from tb.suite import RtlOptions, dut_for

    os.environ[RTL_COVERAGE_ENV] = str(coverage_dir)
    spec = dut_for(CONFIG, RtlOptions.from_mapping(nvdla_options()))
    built = build(spec, SIMULATOR, notify=lambda msg: print(f"nvdla_rtl: {msg}", flush=True))
    return {"directory": str(built.directory), "cached": built.cached, "seconds": round(built.seconds, 1)}


def run_one_trace(cfg: str, raw: Path) -> None:
    """``--one``: play one trace in one simulation (coverage into ``$DLA_RTL_COVERAGE_DIR`` = ``raw``, set by the
    caller) and write its outcome to ``raw/outcome.json``."""
    from app.targets import register_simulators
    from tb.suite import run_traces

    register_simulators()
    start = time.perf_counter()
    [outcome] = run_traces([(cfg, CONFIG)], SIMULATOR, workers=1,
                           options=nvdla_options(runs_root=str(raw.parent.parent / "runs")))
    write_atomic(raw / "outcome.json", json.dumps({"status": outcome.status, "detail": outcome.detail,
                                                   "seconds": round(time.perf_counter() - start, 1)}))


def run_traces_pool(out: Path, jobs: int, keep_dat: bool = False, only: list[str] | None = None,
                    resume: bool = False) -> dict:
    """NVDLA's traces, one simulation each, ``jobs`` at a time (most expensive first), each reduced as it ends."""
    from runtime.trace import find_traces
    from tb.balance import trace_cost
    from tb.runner import RTL_COVERAGE_ENV

    pool_dir = out / "traces"
    _fresh(pool_dir, resume)
    root = traces_root()
    cfgs = [str(c) for c in find_traces(root)]
    if only:
        cfgs = [c for c in cfgs if Path(c).parent.name in only]
    if not cfgs:
        raise SystemExit(f"nvdla_rtl: no traces under {root} (set NVDLA_TRACES)")
    done = {p.stem for p in (pool_dir / "sims").glob("*.json")}
    todo = sorted((c for c in cfgs if safe_name(Path(c).parent.name) not in done), key=lambda c: -trace_cost(c, CONFIG))
    start = time.perf_counter()
    build_info = build_dut(pool_dir / "raw")
    collector, lock = Collector(pool_dir, keep_dat), threading.Lock()

    def one(cfg: str) -> None:
        name = Path(cfg).parent.name
        raw = pool_dir / "raw" / safe_name(name)
        shutil.rmtree(raw, ignore_errors=True)
        raw.mkdir(parents=True)
        env = _child_env()
        env[RTL_COVERAGE_ENV] = str(raw)
        proc = subprocess.run([sys.executable, "-m", "regressions.coverage.nvdla_rtl", "--one", cfg, "--out", str(raw)],
                              cwd=REPO, env=env, capture_output=True, text=True)
        try:
            outcome = json.loads((raw / "outcome.json").read_text())
        except (OSError, ValueError):
            outcome = {"status": "ERROR", "detail": f"exit {proc.returncode}: {proc.stderr.strip()[-400:]}"}
        (raw / "outcome.json").unlink(missing_ok=True)
        with lock:
            collector.take(name, raw.glob("*.dat"), kind="trace", **outcome)
        print(f"nvdla_rtl: trace {name}: {outcome['status']} ({outcome.get('seconds')} s)", flush=True)
        if not keep_dat:
            _rmdir(raw)

    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        list(pool.map(one, todo))
    seconds = time.perf_counter() - start
    if collector.bad:
        print(f"nvdla_rtl: unreadable coverage files: {', '.join(collector.bad)}", file=sys.stderr)
    return finish_pool(pool_dir, "traces", seconds, build_info,
                       {"root": str(root), "traces": len(cfgs), "ran": len(todo)})


def _rmdir(path: Path) -> None:
    try:
        path.rmdir()
    except OSError:
        pass


def _child_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH", "")]))
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        env.setdefault(var, "1")
    return env


# ---- pool: our suites ----------------------------------------------------------------------------------------
def suite_units(level: str) -> list:
    """Our suites on NVDLA's nv_small RTL at ``level``: units of the lists whose tests are in SUITE_FILES."""
    from fnmatch import fnmatch

    from regressions.regress.lists import load_levels, load_units

    levels = load_levels()
    if level not in levels:
        raise SystemExit(f"nvdla_rtl: unknown level {level!r} (known: {', '.join(levels)})")
    chosen = []
    for u in load_units(levels):
        files = [t.split("::", 1)[0] for t in u.tests]
        if (u.target == SIMULATOR and level in u.levels and all(fnmatch(f, SUITE_FILES) for f in files)
                and not set(u.tags) & set(SUITE_EXCLUDED_TAGS)):
            chosen.append(u)
    return chosen


def run_suite_pool(out: Path, level: str, jobs: int, keep_dat: bool = False, seed: int | None = None,
                   units: list[str] | None = None, extra: list[str] | None = None, resume: bool = False) -> dict:
    from regressions.regress.lists import load_levels

    pool_dir = out / "suite"
    _fresh(pool_dir, resume)
    chosen = suite_units(level)
    if units:
        unknown = set(units) - {u.id for u in chosen}
        if unknown:
            raise SystemExit(f"nvdla_rtl: not a suite unit at level {level}: {', '.join(sorted(unknown))}")
        chosen = [u for u in chosen if u.id in units]
    files: list[str] = []
    for u in chosen:
        files += [f for f in u.files() if f not in files]
    start = time.perf_counter()
    build_info = build_dut(pool_dir / "raw")
    env = _child_env()
    env.update(load_levels()[level].env)
    env.pop("DLA_COVERAGE", None)  # functional coverage is make regress's business
    env.pop("DLA_COVERAGE_DIR", None)
    env["DLA_SIM_WORKERS"] = "1" if jobs > 1 else str(max(1, jobs))
    if seed is not None:
        env["FUZZ_SEED"] = str(seed)
    env[PLUGIN_ENV] = str(pool_dir)
    env[PLUGIN_UNITS_ENV] = ",".join(u.id for u in chosen)
    env["DLA_NVDLA_COV_KEEP_DAT"] = "1" if keep_dat else ""
    cmd = [sys.executable, "-m", "pytest", "-p", "regressions.coverage.nvdla_rtl", "-p", "no:cacheprovider",
           "-q", "-rfE", "--color=no", *(["-n", str(jobs), "--dist", "worksteal"] if jobs > 1 else ["-p", "no:xdist"]),
           *(extra or []), "--", *files]
    print(f"nvdla_rtl: suite at level {level}: {', '.join(u.id for u in chosen)}", flush=True)
    code = subprocess.run(cmd, cwd=REPO, env=env).returncode
    seconds = time.perf_counter() - start
    return finish_pool(pool_dir, "suite", seconds, build_info,
                       {"level": level, "units": [u.id for u in chosen], "pytest_exit": code,
                        "seed": env.get("FUZZ_SEED") or None})


# ---- the pytest plugin (``-p regressions.coverage.nvdla_rtl`` with $DLA_NVDLA_COV_DIR) --------------------------
_PLUGIN: dict = {}


def pytest_configure(config) -> None:
    pool = os.environ.get(PLUGIN_ENV, "").strip()
    if not pool:
        return
    from tb.runner import RTL_COVERAGE_ENV

    worker = getattr(config, "workerinput", {}).get("workerid", "main")
    raw = Path(pool) / "raw" / worker
    _PLUGIN.update(pool=Path(pool), raw=raw, worker=worker, env=RTL_COVERAGE_ENV, collector=None,
                   keep=os.environ.get("DLA_NVDLA_COV_KEEP_DAT") == "1",
                   units=[u for u in os.environ.get(PLUGIN_UNITS_ENV, "").split(",") if u], outcomes={})
    os.environ[RTL_COVERAGE_ENV] = str(raw)


def pytest_collection_modifyitems(config, items) -> None:
    if not _PLUGIN.get("units"):
        return
    from regressions.regress.lists import Matcher, load_levels, load_units

    matcher = Matcher(load_units(load_levels()))
    keep, drop = [], []
    for item in items:
        unit = matcher.unit_of(item.nodeid)
        (keep if unit is not None and unit.id in _PLUGIN["units"] else drop).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
    items[:] = keep


def _hookwrapper(fn):
    import pytest

    return pytest.hookimpl(wrapper=True)(fn)


@_hookwrapper
def pytest_runtest_call(item) -> Iterator[None]:
    """The suites' ``no_rtl_coverage`` fixture has removed ``$DLA_RTL_COVERAGE_DIR``; put it back for the body (the
    fixture's monkeypatch restores the value it found, which is this one, at teardown)."""
    if _PLUGIN:
        os.environ[_PLUGIN["env"]] = str(_PLUGIN["raw"])
    return (yield)


def pytest_runtest_logreport(report) -> None:
    if _PLUGIN and (report.when == "call" or report.outcome != "passed"):
        prev = _PLUGIN["outcomes"].get(report.nodeid)
        if prev is None or prev == "passed":
            _PLUGIN["outcomes"][report.nodeid] = report.outcome


def pytest_runtest_logfinish(nodeid: str, location) -> None:
    if not _PLUGIN:
        return
    if _PLUGIN["collector"] is None:
        _PLUGIN["collector"] = Collector(_PLUGIN["pool"], _PLUGIN["keep"])
    files = list(_PLUGIN["raw"].glob("*.dat"))  # this worker's (its own folder), subprocesses' included
    _PLUGIN["collector"].take(nodeid, files, kind="test", status=_PLUGIN["outcomes"].get(nodeid, "?"),
                              worker=_PLUGIN["worker"])


# ---- a pool's figures ----------------------------------------------------------------------------------------
def finish_pool(pool_dir: Path, pool: str, seconds: float, build_info: dict, facts: dict) -> dict:
    """Merge the pool's universe and hits files into ``merged.dat`` and write its ``summary.json`` and
    ``uncovered.json``; returns the summary."""
    parts = [p for p in [pool_dir / UNIVERSE] if p.is_file()] + sorted((pool_dir / "hits").glob("*.dat.gz"))
    points, bad = rtl.merge_dats(parts)
    if bad:
        raise SystemExit(f"nvdla_rtl: unreadable coverage files: {', '.join(map(str, bad))}")
    rtl.write_dat(pool_dir / "merged.dat", points)
    summary = pool_summary(pool_dir, pool, points)
    summary.update(seconds=round(seconds, 1), build=build_info, **facts)
    write_atomic(pool_dir / "summary.json", json.dumps(summary, indent=1))
    return summary


def pool_summary(pool_dir: Path, pool: str, points: dict[str, int]) -> dict:
    trees = rtl.default_trees()
    reduced = rtl.Classifier(trees).reduce(points)
    root = next((t.root for t in trees if t.name == "nvdla"), None)
    nv = rtl.nvdla_summary(reduced.get("nvdla", {}), root)
    uncovered = {unit: {f: rtl.line_ranges(ls) for f, ls in files.items()}
                 for unit, files in rtl.uncovered_by_unit(nv).items()}
    write_atomic(pool_dir / "uncovered.json", json.dumps(uncovered, indent=1))
    sims = [json.loads(p.read_text()) for p in sorted((pool_dir / "sims").glob("*.json"))]
    statuses = Counter(s.get("status", "?") for s in sims)
    return {"format": FORMAT, "pool": pool, "sims": len(sims), "statuses": dict(statuses), "nvdla": nv,
            "merged": str(pool_dir / "merged.dat")}


def load_pool(out: Path, pool: str) -> dict | None:
    path = out / pool / "summary.json"
    return json.loads(path.read_text()) if path.is_file() else None


# ---- comparison ----------------------------------------------------------------------------------------------
def covered_lines(pool_dir: Path) -> dict[str, dict[str, set[int]]]:
    """unit -> file -> lines some simulation of the pool ran (from the per-simulation records)."""
    out: dict[str, dict[str, set[int]]] = {}
    for p in sorted((pool_dir / "sims").glob("*.json")):
        for f, ranges in json.loads(p.read_text())["lines"].get("nvdla", {}).items():
            out.setdefault(rtl.nvdla_unit(f), {}).setdefault(f, set()).update(rtl.parse_ranges(ranges))
    return out


def ahead(line: dict, toggle: dict) -> str:
    """``yes``: the suite hits at least as many lines and toggles as the traces and more of one; ``tie``: equal;
    ``no`` otherwise."""
    dl = line["suite"][0] - line["traces"][0]
    dt = toggle["suite"][0] - toggle["traces"][0]
    if dl >= 0 and dt >= 0:
        return "yes" if dl > 0 or dt > 0 else "tie"
    return "no"


def compare(out: Path, cap: int = rtl.REPORT_UNCOVERED) -> dict:
    """Per unit, traces against suite; ``only_traces`` lists (capped) the lines the traces run and the suite
    does not (every one in ``only-traces.json``)."""
    pools = {p: load_pool(out, p) for p in POOLS}
    have = [p for p in POOLS if pools[p] is not None]
    units: list[str] = sorted({u for p in have for u in pools[p]["nvdla"].get("units", {})}, key=rtl.unit_order)
    covered = {p: covered_lines(out / p) for p in have}
    rows, only_traces_all = [], {}
    for unit in units:
        row: dict = {"unit": unit}
        for kind in ("line", "toggle", "branch"):
            row[kind] = {p: pools[p]["nvdla"]["units"].get(unit, {}).get(kind, [0, 0]) for p in have}
        if len(have) == 2:
            row["ahead"] = ahead(row["line"], row["toggle"])
            t, s = covered["traces"].get(unit, {}), covered["suite"].get(unit, {})
            only_t = {f: sorted(ls - s.get(f, set())) for f, ls in t.items() if ls - s.get(f, set())}
            only_s = {f: sorted(ls - t.get(f, set())) for f, ls in s.items() if ls - t.get(f, set())}
            row["only_traces"] = sum(map(len, only_t.values()))
            row["only_suite"] = sum(map(len, only_s.values()))
            row["only_traces_shown"] = capped(only_t, cap)
            only_traces_all[unit] = {f: rtl.line_ranges(ls) for f, ls in only_t.items()}
        for p in have:
            files = pools[p]["nvdla"]["units"].get(unit, {}).get("files", {})
            unc = {f: info["uncovered_lines"] for f, info in files.items() if info["uncovered_lines"]}
            row.setdefault("uncovered", {})[p] = {"count": sum(map(len, unc.values())), "shown": capped(unc, cap)}
        rows.append(row)
    if only_traces_all:
        write_atomic(out / "only-traces.json", json.dumps(only_traces_all, indent=1))
    result = {
        "format": FORMAT, "generated": time.time(), "git": _git(), "out": str(out),
        "pools": {p: {k: pools[p].get(k) for k in ("sims", "statuses", "seconds", "build", "level", "units",
                                                      "traces", "root", "seed", "pytest_exit")}
                  | {"total": pools[p]["nvdla"].get("total", {})} for p in have},
        "units": rows,
        "suite_ahead_everywhere": bool(rows) and len(have) == 2 and all(r["ahead"] in ("yes", "tie") for r in rows),
    }
    write_atomic(out / "summary.json", json.dumps(result, indent=1))
    write_atomic(out / "report.md", "\n".join(markdown(result)) + "\n")
    return result


def capped(files: dict[str, list[int]], cap: int) -> str:
    """``file:ranges; ...`` of at most ``cap`` lines, ``(+N more)`` after."""
    parts, shown, total = [], 0, sum(map(len, files.values()))
    for f, lines in sorted(files.items()):
        if shown >= cap:
            break
        take = lines[:cap - shown]
        shown += len(take)
        parts.append(f"{Path(f).name}:{rtl.line_ranges(take)}")
    return "; ".join(parts) + (f" (+{total - shown} more)" if total > shown else "")


def _git() -> str:
    try:
        return subprocess.run(["git", "-C", str(REPO), "describe", "--always", "--dirty"], capture_output=True,
                              text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def _pct(hit_total: list[int]) -> str:
    hit, total = hit_total
    return f"{hit}/{total} ({100 * hit / total:.1f}%)" if total else "0/0"


def markdown(result: dict) -> list[str]:
    """The comparison as Markdown lines (also the regression report's section)."""
    pools = result["pools"]
    out = []
    for p, info in pools.items():
        what = (f"{info.get('traces')} traces of {info.get('root')}" if p == "traces"
                else f"level {info.get('level')}: {', '.join(info.get('units') or [])}")
        statuses = ", ".join(f"{n} {s}" for s, n in sorted((info.get("statuses") or {}).items()))
        out.append(f"- **{p}**: {what}; {info.get('sims')} simulations/tests ({statuses}); "
                   f"{info.get('seconds')} s; lines {_pct(info['total'].get('line', [0, 0]))}, "
                   f"toggles {_pct(info['total'].get('toggle', [0, 0]))}")
    both = len(pools) == 2
    head = "| unit | lines traces | lines suite | toggles traces | toggles suite |"
    out += ["", head + (" ahead? | lines only traces run |" if both else ""),
            "|---" * (5 + 2 * both) + "|"]
    for r in result["units"]:
        cells = [r["unit"]]
        for kind in ("line", "toggle"):
            cells += [_pct(r[kind][p]) if p in r[kind] else "" for p in POOLS]
        if both:
            cells += [r["ahead"], f"{r['only_traces']}" + (f": {r['only_traces_shown']}" if r["only_traces"] else "")]
        out.append("| " + " | ".join(cells) + " |")
    out += ["", "Uncovered lines per unit (first ones; every one in `<pool>/uncovered.json`):", ""]
    for r in result["units"]:
        for p, unc in r.get("uncovered", {}).items():
            if unc["count"]:
                out.append(f"- {r['unit']} ({p}, {unc['count']}): {unc['shown']}")
    return out


# ---- the regression report's view ------------------------------------------------------------------------------
def find_measurement(run_dir: Path) -> Path | None:
    """The comparison a regression report shows: one made inside the run (``<run>/**/coverage/nvdla-rtl``), else
    the latest ``make rtl-coverage`` beside the run's output folder (``build/regress/<run>`` ->
    ``build/rtl-coverage/latest``)."""
    run_dir = Path(run_dir)
    inside = sorted(run_dir.glob(f"**/coverage/{RUN_SUBDIR}/summary.json"))
    if inside:
        return inside[0]
    beside = run_dir.resolve().parent.parent / DEFAULT_OUT.name / "latest" / "summary.json"
    return beside if beside.is_file() else None


def report_view(run_dir: Path) -> dict:
    """What the regression report shows of NVDLA's RTL: ``{}`` without a measurement, else ``{"source",
    "generated", "git", "pools", "rows", "suite_ahead_everywhere", "units": {unit: {"line", "toggle", "branch"}}}``
    with ``units`` the suite's figures (what the verification plan cites as ``nvdla:<unit>``)."""
    path = find_measurement(run_dir)
    if path is None:
        return {}
    result = json.loads(path.read_text())
    if result.get("format") != FORMAT:
        return {"error": f"{path}: format {result.get('format')!r}, expected {FORMAT}"}
    pool = "suite" if "suite" in result["pools"] else next(iter(result["pools"]), None)
    units = {r["unit"]: {k: r[k][pool] for k in ("line", "toggle", "branch") if pool in r.get(k, {})}
             for r in result["units"]} if pool else {}
    return {"source": str(path.parent), "generated": result.get("generated"), "git": result.get("git"),
            "pools": result["pools"], "rows": result["units"],
            "suite_ahead_everywhere": result.get("suite_ahead_everywhere"), "units": units, "pool": pool}


# ---- which simulations run a line -----------------------------------------------------------------------------
def covering(out: Path, file: str, line: int) -> dict[str, list[str]]:
    """Pool -> ids of the traces / tests whose simulations ran ``line`` of ``file`` (a key such as
    ``vmod/nvdla/cdma/NV_NVDLA_CDMA_dc.v``, or a path under NVDLA's root or our repository)."""
    key = _key(file)
    found: dict[str, list[str]] = {}
    for pool in POOLS:
        for p in sorted((out / pool / "sims").glob("*.json")):
            rec = json.loads(p.read_text())
            for tree in rec["lines"].values():
                if key in tree and line in rtl.parse_ranges(tree[key]):
                    found.setdefault(pool, []).append(rec["id"])
    return found


def _key(file: str) -> str:
    path = Path(file)
    if path.is_absolute() or path.exists():
        for tree in rtl.default_trees():
            resolved = path.resolve()
            if resolved.is_relative_to(tree.root):
                return str(resolved.relative_to(tree.base))
    return file


# ---- command line ----------------------------------------------------------------------------------------------
def default_out() -> Path:
    return DEFAULT_OUT / time.strftime("%Y%m%d-%H%M%S")


def _latest(out: Path) -> None:
    if out.parent != DEFAULT_OUT:
        return
    link = DEFAULT_OUT / "latest"
    try:
        if link.is_symlink() or link.exists():
            link.unlink()
        link.symlink_to(out.name)
    except OSError:
        pass


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m regressions.coverage.nvdla_rtl", description=__doc__.split("\n\n")[0])
    ap.add_argument("--pool", choices=(*POOLS, "both"), default="both")
    ap.add_argument("--level", default="ci", help="the suite's regression level (levels.toml; default ci)")
    ap.add_argument("--out", type=Path, help="output folder (default build/rtl-coverage/<time>)")
    ap.add_argument("--jobs", type=int, default=2, help="parallel simulations / pytest workers (default 2)")
    ap.add_argument("--seed", type=int, help="FUZZ_SEED of the suite (default: derandomized draws)")
    ap.add_argument("--units", help="only these suite units (comma separated)")
    ap.add_argument("--traces", help="only these traces (comma separated names)")
    ap.add_argument("--keep-dat", action="store_true", help="keep every simulation's raw .dat")
    ap.add_argument("--resume", action="store_true",
                    help="keep what --out's pools hold (traces already measured are not run again)")
    ap.add_argument("--compare", action="store_true", help="only recompute the comparison of --out's pools")
    ap.add_argument("--which", metavar="FILE:LINE", help="list the traces and tests of --out that run a line")
    ap.add_argument("--one", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.one:
        run_one_trace(args.one, args.out)
        return 0
    out = (args.out or (DEFAULT_OUT / "latest" if args.which or args.compare else default_out())).resolve()
    if args.which:
        file, _, line = args.which.rpartition(":")
        for pool, ids in covering(out, file, int(line)).items():
            print(f"{pool}: {len(ids)}")
            for i in ids:
                print(f"  {i}")
        return 0
    out.mkdir(parents=True, exist_ok=True)
    if not args.compare:
        if args.pool in ("traces", "both"):
            run_traces_pool(out, args.jobs, args.keep_dat, args.traces.split(",") if args.traces else None,
                            args.resume)
        if args.pool in ("suite", "both"):
            run_suite_pool(out, args.level, args.jobs, args.keep_dat, args.seed,
                           args.units.split(",") if args.units else None, resume=args.resume)
    result = compare(out)
    _latest(out)
    print("\n".join(markdown(result)))
    print(f"\nnvdla_rtl: {out}")
    return 0 if not result["units"] or len(result["pools"]) < 2 or result["suite_ahead_everywhere"] else 1


if __name__ == "__main__":
    sys.exit(main())
