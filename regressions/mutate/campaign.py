"""Run mutants against the tests that cover them, in parallel, into a resumable results file.

Each worker owns a copy of the working tree (``work/w<i>``: the tracked and untracked sources, no ``.git``,
``build`` or caches), writes one mutant's file there, runs the tests covering the mutated line (``pytest -x``,
fastest first) and puts the file back. Outcomes:

* ``killed``: a test failed; ``error``: collection or import failed (the mutant breaks the module, which the
  same tests collect without it: a kill);
* ``timeout``: slower than five times the tests' measured time plus 30 s (an infinite loop: a kill);
* ``survived``: every covering test passed; ``no_coverage``: no test executes the line (survives unrun);
* ``not_applied``: the operator no longer applies (the file changed since enumeration: not counted);
  ``invalid``: the mutated design does not compile (a Verilog mutant the simulator refuses: not counted).

Verilog targets (``regressions.mutate.rtl``, ``regressions.mutate.nvdla``) pass their own ``runner`` (one mutant ->
Result); NVDLA's records which pool killed it (``killed_by_traces``, ``killed_by_suite``: None when not run).

Every result is one JSON line appended as soon as it is known, with the file's hash: a rerun skips mutants
already decided for an unchanged file, so an interrupted campaign resumes where it stopped.
"""
from __future__ import annotations

import json
import os
import queue
import shutil
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Callable

from regressions.mutate.mutants import Mutant, file_hash, mutated_source
from regressions.mutate.select import CoverageMap

#: Outcomes that count as the suite catching the mutant.
KILLS = ("killed", "error", "timeout")
#: Outcomes that count against the score.
MISSES = ("survived", "no_coverage")
#: Directories a worker copy leaves out.
_SKIP = {".git", "build", ".venv", "__pycache__", ".hypothesis", ".pytest_cache", "node_modules"}


@dataclass
class Result:
    id: str
    path: str
    unit: str
    operator: str
    line: int
    outcome: str
    seconds: float
    tests: int
    killer: str
    hash: str
    #: the coverage map (model files and tests) a missed mutant was decided with: a newer map runs it again
    map: str = ""
    #: which test pools killed it (NVDLA's own traces, our suites), None when that pool did not run
    killed_by_traces: bool | None = None
    killed_by_suite: bool | None = None


def read_results(path: Path) -> dict[str, Result]:
    """The decided mutants of a results file (the last line per id wins; torn last lines are skipped)."""
    out: dict[str, Result] = {}
    if path.is_file():
        for line in path.read_text().splitlines():
            try:
                r = Result(**json.loads(line))
            except (ValueError, TypeError):
                continue
            out[r.id] = r
    return out


def shared_env(root: Path) -> dict[str, str]:
    """NVDLA's material where the root's tests find it (a worker copy has no ``../shared`` beside it)."""
    shared = root.resolve().parent / "shared" / "nvdla"
    env = {"NVDLA_TRACES": str(shared / "traces"), "NVDLA_SPEC": str(shared / "spec"), "NVDLA_RTL": str(shared / "rtl")}
    return {k: os.environ.get(k, v) for k, v in env.items()}


def _copy_tree(root: Path, dest: Path) -> None:
    if dest.exists():
        shutil.rmtree(dest)
    shutil.copytree(root, dest, symlinks=True, ignore=lambda d, names: [n for n in names if n in _SKIP])


def _killer(stdout: str) -> str:
    for line in stdout.splitlines():
        if line.startswith(("FAILED ", "ERROR ")):
            return line.split(" ", 1)[1].split(" - ", 1)[0]
    return ""


def run_one(root: Path, work: Path, m: Mutant, cmap: CoverageMap) -> Result:
    """One mutant in worker copy ``work`` (the file restored afterwards, whatever happens)."""
    digest = file_hash(root / m.path)

    def result(outcome: str, seconds: float = 0.0, tests: int = 0, killer: str = "") -> Result:
        return Result(m.id, m.path, m.unit, m.operator, m.line, outcome, round(seconds, 2), tests, killer, digest)

    mutated = mutated_source(root, m)
    if mutated is None:
        return result("not_applied")
    tests = cmap.tests_for(m.path, m.line)
    if not tests:
        return result("no_coverage")
    target = work / m.path
    original = target.read_text()
    budget = 5 * sum(cmap.seconds.get(t, 1.0) for t in tests) + 30
    cmd = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", "-o", "addopts=", *tests]
    env = dict(os.environ, PYTHONPATH=str(work), PYTHONDONTWRITEBYTECODE="1", **shared_env(root))
    start = time.perf_counter()
    try:
        target.write_text(mutated)
        proc = subprocess.run(cmd, cwd=work, env=env, capture_output=True, text=True, timeout=budget)
    except subprocess.TimeoutExpired:
        return result("timeout", time.perf_counter() - start, len(tests))
    finally:
        target.write_text(original)
    seconds = time.perf_counter() - start
    if proc.returncode == 0:
        return result("survived", seconds, len(tests))
    if proc.returncode == 1:
        return result("killed", seconds, len(tests), _killer(proc.stdout))
    if proc.returncode in (2, 3):
        return result("error", seconds, len(tests), _killer(proc.stdout) or f"pytest exit {proc.returncode}")
    # exit 4/5 (no collectors, nothing collected): a test module the mutant cannot import, when the unmutated
    # tree collects the same tests; otherwise the coverage map names tests that are gone
    clean = subprocess.run(cmd, cwd=work, env=env, capture_output=True, text=True, timeout=budget)
    if clean.returncode == 0:
        return result("error", seconds, len(tests), f"pytest exit {proc.returncode}: collection fails")
    raise RuntimeError(f"{m.id}: pytest exited {proc.returncode} on the covering tests (a selection problem): "
                       + " | ".join((proc.stderr or proc.stdout).strip().splitlines()[-2:]))


def run_campaign(root: Path, mutants: list[Mutant], cmap: CoverageMap, out: Path, jobs: int = 2,
                 say: Callable[[str], None] = print, map_id: str = "", runner: Callable[..., Result] = run_one,
                 copy: bool = True) -> dict[str, Result]:
    """Run every undecided mutant of ``mutants``; returns all decided results (earlier ones included).
    ``runner(root, work, mutant, cmap)`` decides one mutant in worker directory ``work`` (a copy of the tree,
    or an empty directory when ``copy`` is False)."""
    out.mkdir(parents=True, exist_ok=True)
    results_path = out / "results.jsonl"
    done = read_results(results_path)
    hashes = {p: file_hash(root / p) for p in {m.path for m in mutants}}
    todo = [m for m in mutants if not (m.id in done and done[m.id].hash == hashes[m.path])
            or done[m.id].outcome in MISSES and done[m.id].map != map_id]  # (a newer map may have new tests)
    say(f"{len(mutants)} mutants, {len(mutants) - len(todo)} already decided, {len(todo)} to run on {jobs} workers")
    workers: queue.Queue[Path] = queue.Queue()
    for i in range(max(1, min(jobs, len(todo)))):
        w = out / "work" / f"w{i}"
        if copy:
            _copy_tree(root, w)
        else:
            w.mkdir(parents=True, exist_ok=True)
        workers.put(w)
    lock = threading.Lock()
    counts: dict[str, int] = {}
    start = time.perf_counter()

    def task(m: Mutant) -> None:
        w = workers.get()
        try:
            r = replace(runner(root, w, m, cmap), map=map_id)
        finally:
            workers.put(w)
        with lock:
            with results_path.open("a") as f:
                f.write(json.dumps(asdict(r)) + "\n")
            done[r.id] = r
            counts[r.outcome] = counts.get(r.outcome, 0) + 1
            n = sum(counts.values())
            say(f"[{n}/{len(todo)} {time.perf_counter() - start:.0f}s] {r.outcome:<11} {r.id}"
                + (f"  ({r.killer})" if r.killer else ""))

    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        for f in [pool.submit(task, m) for m in todo]:
            f.result()
    return {m.id: done[m.id] for m in mutants if m.id in done}
