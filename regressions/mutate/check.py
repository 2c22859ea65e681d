"""Check one mutant by hand: ``python -m regressions.mutate.check ID [TEST ...]``.

Triage needs a quick answer to "does this test kill that mutant?": the mutant (an id from a campaign's
report.md) is applied in a private copy of the tree (never in the tree itself) and the given pytest node ids run
there; with no tests, every test the campaign's coverage map says runs the line (no cap). Prints the outcome
(killed / survived) and the failing test; exit 0 when killed, 1 when it survived, 2 on a usage error.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from regressions.mutate.campaign import _copy_tree, _killer, shared_env
from regressions.mutate.mutants import Mutant, enumerate_mutants, mutated_source
from regressions.mutate.select import CoverageMap

ROOT = Path(__file__).resolve().parents[2]


def find_mutant(root: Path, mutant_id: str) -> Mutant:
    """The mutant of ``mutant_id`` (``path:line:col:operator:occurrence``) among its file's mutants."""
    path = mutant_id.split(":", 1)[0]
    if not (root / path).is_file():
        raise ValueError(f"{mutant_id}: no file {path}")
    for m in enumerate_mutants(root, [path]):
        if m.id == mutant_id:
            return m
    raise ValueError(f"{mutant_id}: no such mutant of {path} now (was the file edited since the campaign?)")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m regressions.mutate.check", description=__doc__.split("\n\n")[0])
    ap.add_argument("id", help="mutant id, as report.md lists it")
    ap.add_argument("tests", nargs="*", help="pytest node ids (default: every test covering the line)")
    ap.add_argument("--map", type=Path, default=None,
                    help="the campaign's test map (default: build/mutate/golden/coverage-map.json; a Verilog "
                         "mutant of rtl/: build/mutate/rtl/pool-map.json)")
    args = ap.parse_args(argv)
    try:
        m = find_mutant(ROOT, args.id)
    except ValueError as exc:
        print(f"check: {exc}", file=sys.stderr)
        return 2
    tests = args.tests
    verilog = m.path.endswith((".v", ".sv"))
    if args.map is None:
        args.map = ROOT / "build" / "mutate" / ("rtl/pool-map.json" if verilog else "golden/coverage-map.json")
    if not tests:
        if not args.map.is_file():
            print(f"check: no coverage map at {args.map}: name the tests", file=sys.stderr)
            return 2
        if verilog:
            from regressions.mutate.rtl import PoolMap

            tests = PoolMap.load(args.map).tests_for(m.path, m.line)
        else:
            tests = CoverageMap.load(args.map).tests_for(m.path, m.line, limit=10**9)
    if not tests:
        print("check: no test covers the line: name the tests", file=sys.stderr)
        return 2
    mutated = mutated_source(ROOT, m)
    with tempfile.TemporaryDirectory(prefix="mutant-") as tmp:
        work = Path(tmp) / "tree"
        _copy_tree(ROOT, work)
        (work / m.path).write_text(mutated)
        env = dict(os.environ, PYTHONPATH=str(work), PYTHONDONTWRITEBYTECODE="1", **shared_env(ROOT))
        cmd = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", "-o", "addopts=", *tests]
        proc = subprocess.run(cmd, cwd=work, env=env, capture_output=True, text=True)
    if proc.returncode == 0:
        print(f"survived: {len(tests)} tests pass with {m.id}")
        return 1
    print(f"killed (pytest exit {proc.returncode}) by {_killer(proc.stdout) or '?'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
