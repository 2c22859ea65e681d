"""``make mutate TARGET=golden|rtl|nvdla-rtl [UNIT=sdp] [N=300] [JOBS=2]``: a mutation campaign (``regressions.mutate``).

    python -m regressions.mutate golden|rtl|nvdla-rtl [--unit U] [-n N] [--seed S] [--jobs J] [--out DIR] [--rebuild-map]

``golden``: the Python golden model (cosmic-ray mutants, a coverage map); ``rtl``: our Verilog in ``rtl/``
(``regressions.mutate.rtl``); ``nvdla-rtl``: NVDLA's nv_small datapath (``regressions.mutate.nvdla``, mutant
schemata in one build). One results format, report and triage for all.

The coverage map (which tests run which line) is built once per campaign directory and reused until
``--rebuild-map`` (or a model file changes); results accumulate in ``DIR/results.jsonl`` and a rerun
resumes. Exit 0 when the score meets ``--min-score`` (default: none), 1 when not, 2 on a usage error.
"""
from __future__ import annotations

import argparse
import hashlib
import importlib
import sys
from pathlib import Path

from regressions.mutate.campaign import read_results, run_campaign
from regressions.mutate.mutants import enumerate_mutants, file_hash, golden_files, sample
from regressions.mutate.report import write_report
from regressions.mutate.select import GOLDEN_POOL, CoverageMap, build_map

ROOT = Path(__file__).resolve().parents[2]
TARGETS = {"golden": (golden_files, GOLDEN_POOL)}
#: Verilog targets: module with ``campaign(root, args) -> (mutants, results, report root, campaign dir)``
VERILOG_TARGETS = {"rtl": "regressions.mutate.rtl", "nvdla-rtl": "regressions.mutate.nvdla"}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m regressions.mutate", description=__doc__.split("\n\n")[0])
    ap.add_argument("target", choices=sorted([*TARGETS, *VERILOG_TARGETS]))
    ap.add_argument("--unit", help="one unit (module name, e.g. sdp)")
    ap.add_argument("-n", type=int, default=None, help="sample N mutants evenly across units (default: all)")
    ap.add_argument("--seed", type=int, default=1, help="the sample's seed (default 1)")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--out", type=Path, default=None, help="campaign directory (default build/mutate/TARGET)")
    ap.add_argument("--rebuild-map", action="store_true", help="measure the coverage map again")
    ap.add_argument("--min-score", type=float, default=None, help="exit 1 below this score (0..1)")
    args = ap.parse_args(argv)
    if args.target in VERILOG_TARGETS:
        try:
            mutants, results, report_root, out = importlib.import_module(VERILOG_TARGETS[args.target]).campaign(
                ROOT, args)
        except ValueError as exc:
            print(f"mutate: {exc}", file=sys.stderr)
            return 2
        return _summarise(args, write_report(report_root, args.target, mutants, results, out), out)
    files_of, pool = TARGETS[args.target]
    try:
        files = files_of(ROOT, args.unit)
    except ValueError as exc:
        print(f"mutate: {exc}", file=sys.stderr)
        return 2
    out = args.out or ROOT / "build" / "mutate" / args.target
    out.mkdir(parents=True, exist_ok=True)
    map_path = out / "coverage-map.json"
    # the map depends on the model files and on the tests: a new test must be in the map to kill survivors
    tests = sorted(str(t.relative_to(ROOT)) for d in pool for t in (ROOT / d).rglob("*.py"))
    stamp = {f: file_hash(ROOT / f) for f in [*files_of(ROOT, None), *tests]}
    stamp_path = out / "coverage-map.stamp"
    if args.rebuild_map or not map_path.is_file() or not stamp_path.is_file() or stamp_path.read_text() != repr(stamp):
        cmap = build_map(ROOT, files_of(ROOT, None), pool, out, jobs=args.jobs)
        cmap.save(map_path)
        stamp_path.write_text(repr(stamp))
    else:
        cmap = CoverageMap.load(map_path)
    mutants = sample(enumerate_mutants(ROOT, files), args.n, args.seed)
    map_id = hashlib.sha256(stamp_path.read_text().encode()).hexdigest()[:16]
    results = run_campaign(ROOT, mutants, cmap, out, jobs=args.jobs, map_id=map_id)
    return _summarise(args, write_report(ROOT, args.target, mutants, results, out), out)


def _summarise(args, summary: dict, out: Path) -> int:
    s = summary["score"]
    print(f"{args.target}: {summary['killed']} killed, {summary['survived']} survived, {summary['equivalent']} "
          f"equivalent of {summary['mutants']}: score {s:.1%}" if s is not None else f"{args.target}: no mutants")
    if "suite_not_traces" in summary:
        print(f"{args.target}: killed by our suite but not by the traces alone: {summary['suite_not_traces']}")
    print(f"report: {out / 'report.md'}")
    return 1 if args.min_score is not None and (s is None or s < args.min_score) else 0


if __name__ == "__main__":
    sys.exit(main())
