"""Which tests can kill a mutant: those that execute its line, from one coverage run with per-test contexts.

``build_map`` runs the campaign's test pool once under coverage.py (``pytest --cov-context=test``) and keeps,
per source line of the mutated files, the tests that ran it (a line run at import, before any test, counts as
run by every test that ran the file and every test of a test file importing the module by name), with each test's duration (from the run's
JUnit XML). A mutant then runs only the tests covering its line, fastest first, stopping at the first
failure; a mutant no test executes survives without running anything (``no_coverage``), which is itself a
finding: a line of the model no test reaches.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

#: The golden campaign's test pool: unit tests of the engines, the engines against independent reference math,
#: and NVDLA's conformance traces.
GOLDEN_POOL = ("tests/golden", "regressions/golden", "regressions/conformance")


#: At most this many covering tests run against one mutant (the fastest): the regression's breadth (hundreds of
#: conformance traces run the same lines) would make each surviving mutant cost minutes.
MAX_TESTS = 60
#: The context of lines run at import (module constants, definitions): before any test, for all of them.
IMPORT = "<import>"
#: Files whose functions run compiled (numba): their lines show no coverage from inside the compiled code.
COMPILED = frozenset({"golden/engines/conv_fp16_jit.py"})


@dataclass
class CoverageMap:
    """path -> line -> test node ids, and node id -> seconds."""

    lines: dict[str, dict[int, list[str]]]
    seconds: dict[str, float]
    #: path -> test files that import the module by name (their tests may read its constants only)
    importers: dict[str, list[str]] = field(default_factory=dict)

    def tests_for(self, path: str, line: int, limit: int = MAX_TESTS) -> list[str]:
        """The tests that executed ``path:line``, fastest first, at most ``limit``. In a numba-compiled file
        (``COMPILED``: coverage cannot see inside the compiled loops) every test that ran the file."""
        by_line = self.lines.get(path, {})
        tests = by_line.get(line, [])
        if path in COMPILED or IMPORT in tests:  # every test that ran the file ran this line too
            mine = set(self.importers.get(path, ()))
            tests = sorted(({t for ts in by_line.values() for t in ts} - {IMPORT})
                           | {t for t in self.seconds if t.split("::")[0] in mine})
            # of so many, the tests of files naming the module first: they are the ones written for it
            return sorted(tests, key=lambda t: (t.split("::")[0] not in mine, self.seconds.get(t, 1e9), t))[:limit]
        return sorted(tests, key=lambda t: (self.seconds.get(t, 1e9), t))[:limit]

    def save(self, out: Path) -> None:
        out.write_text(json.dumps({"lines": self.lines, "seconds": self.seconds, "importers": self.importers}))

    @classmethod
    def load(cls, path: Path) -> "CoverageMap":
        data = json.loads(path.read_text())
        lines = {f: {int(k): v for k, v in ls.items()} for f, ls in data["lines"].items()}
        return cls(lines, data["seconds"], data.get("importers", {}))


def importers(root: Path, files: list[str], test_files: list[str]) -> dict[str, list[str]]:
    """Per model file, the test files naming its module (``a.b.c`` or ``from a.b import c``)."""
    texts = {t: (root / t).read_text(errors="replace") for t in test_files}
    out: dict[str, list[str]] = {}
    for f in files:
        dotted = f.removesuffix(".py").replace("/", ".")
        package, _, name = dotted.rpartition(".")
        pattern = re.compile(rf"\b{re.escape(dotted)}\b|from {re.escape(package)} import [^\n]*\b{re.escape(name)}\b")
        out[f] = sorted(t for t, text in texts.items() if pattern.search(text))
    return out


def _node_id(context: str) -> str:
    """pytest-cov's context ``tests/x.py::test_y[p]|run`` as the node id."""
    return context.rsplit("|", 1)[0]


def _durations(junit: Path) -> dict[str, float]:
    out: dict[str, float] = {}
    for case in ET.parse(junit).getroot().iter("testcase"):
        cls, name = case.get("classname", ""), case.get("name", "")
        parts = cls.split(".")
        # classname "tests.golden.test_sdp" (or "...test_sdp.TestX"): the file is the longest module prefix
        for i in range(len(parts), 0, -1):
            f = "/".join(parts[:i]) + ".py"
            if Path(f).exists():
                node = f + "::" + "::".join(parts[i:] + [name])
                out[node] = float(case.get("time", 0) or 0)
                break
    return out


def build_map(root: Path, files: list[str], pool: tuple[str, ...], work: Path, jobs: int = 2,
              say=print) -> CoverageMap:
    """Run ``pool`` once under coverage with per-test contexts; the line -> tests map of ``files``."""
    work.mkdir(parents=True, exist_ok=True)
    data, junit = work / ".coverage", work / "coverage-junit.xml"
    for stale in work.glob(".coverage*"):
        stale.unlink()
    sources = sorted({str(Path(f).parent) for f in files})
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *(["-n", str(jobs)] if jobs > 1 else []),
           *(f"--cov={s}" for s in sources), "--cov-context=test", "--cov-report=", f"--junitxml={junit}", *pool]
    say(f"coverage map: {' '.join(pool)} under coverage (per-test contexts) ...")
    env = dict(os.environ, COVERAGE_FILE=str(data))
    proc = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True)
    if proc.returncode not in (0, 1):
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
        raise RuntimeError(f"the coverage run failed (exit {proc.returncode}): {' | '.join(tail)}")
    if proc.returncode == 1:  # a failing pool test would count as a kill of every mutant on its lines
        failed = [ln for ln in proc.stdout.splitlines() if ln.startswith("FAILED")][:3]
        raise RuntimeError(f"the test pool fails without any mutant: {'; '.join(failed)}")
    import coverage

    cov = coverage.CoverageData(basename=str(data))
    cov.read()
    lines: dict[str, dict[int, list[str]]] = {}
    for measured in cov.measured_files():
        rel = str(Path(measured).resolve().relative_to(root.resolve()))
        if rel not in files:
            continue
        by_line = cov.contexts_by_lineno(measured)
        lines[rel] = {ln: sorted({_node_id(c) if c else IMPORT for c in ctxs}) for ln, ctxs in by_line.items()}
    old = os.getcwd()
    try:
        os.chdir(root)
        seconds = _durations(junit)
    finally:
        os.chdir(old)
    test_files = sorted({t.split("::")[0] for t in seconds})
    return CoverageMap(lines, seconds, importers(root, files, test_files))
