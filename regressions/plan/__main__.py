"""``python -m regressions.plan [RUN_DIR]``: the verification plan's status for a regression run (default: the
latest, ``build/regress/latest``), or with ``--check`` only validate the plan files (bins exist, every bullet of
``docs/golden-semantics.md`` cited, every test pattern names existing files). Exit 0, 1 when the check fails,
2 on a missing run."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from regressions.plan import REPO, check_plan, load
from regressions.plan.render import plan_markdown, plan_summary


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m regressions.plan", description=__doc__.split("\n\n")[0])
    ap.add_argument("run", nargs="?", type=Path, default=REPO / "build" / "regress" / "latest")
    ap.add_argument("--check", action="store_true", help="validate the plan files only")
    args = ap.parse_args(argv)
    problems = check_plan()
    for p in problems:
        print(f"plan: {p}", file=sys.stderr)
    if args.check:
        print(f"plan: {len(load())} features" + (f", {len(problems)} problems" if problems else ", consistent"))
        return 1 if problems else 0
    if not (args.run / "results.jsonl").is_file() and not any(args.run.glob("**/results.jsonl")):
        print(f"plan: {args.run}: no regression run there (make regress writes build/regress/latest)", file=sys.stderr)
        return 2
    from regressions.coverage.functional import summarize
    from regressions.regress.results import read_records

    print("\n".join(plan_markdown(plan_summary(read_records(args.run), summarize(args.run)))))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
