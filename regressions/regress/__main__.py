"""``make regress``: run a level's test units, then write the report.

    python -m regressions.regress [--level ci] [--jobs auto] [--launcher local|slurm] [--rerun failed]
                                  [--tags T,..] [--units ID,..] [--seed N] [--out build/regress]
    python -m regressions.regress unit --run-dir DIR --unit ID [--seed N] [--level L]   (one unit; farms)
    python -m regressions.regress report --run-dir DIR                                  (rebuild a report)
    python -m regressions.regress list [--level L]                                      (show the units)
"""
from __future__ import annotations

import argparse
import os
import random
import sys
import time
from pathlib import Path

from dlaio import OutputError, check_output
from golden.budget import BudgetSettingError, max_memory
from regressions.regress import lists
from regressions.regress.launcher import Interrupted, drive
from regressions.regress.launchers import LAUNCHERS
from regressions.regress.lists import REPO, ListError
from regressions.regress.plan import Plan, git_commit
from runtime.arguments import OneLineParser
from runtime.processes import EXIT_SIGINT, deferred_interrupts, interrupt_exit_code, raise_on_sigterm

DEFAULT_OUT = REPO / "build" / "regress"


def _csv(text: str | None) -> list[str] | None:
    return [t for t in (text or "").split(",") if t] or None


def new_run_dir(out: Path) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    run_dir, n = out / stamp, 1
    while run_dir.exists():
        n += 1
        run_dir = out / f"{stamp}-{n}"
    run_dir.mkdir()
    return run_dir


def publish_latest(out: Path, run_dir: Path) -> None:
    tmp = out / ".latest.tmp"
    if tmp.is_symlink() or tmp.exists():
        tmp.unlink()
    tmp.symlink_to(run_dir.name)
    tmp.replace(out / "latest")


def previous_durations(run_dir: Path) -> dict[str, float]:
    """Seconds each test took in an earlier run (its records)."""
    from regressions.regress.results import read_records

    return {rec.nodeid: round(rec.duration, 3) for rec in read_records(run_dir)}


def _rerun_nodeids(spec: str, out: Path) -> tuple[list[str], Path]:
    """``failed`` = the latest run's failed.txt; anything else is a run folder or a failed.txt path."""
    path = out / "latest" if spec == "failed" else Path(spec)
    if path.is_dir():
        path = path / "failed.txt"
    if not path.is_file():
        raise ListError(f"--rerun {spec}: {path} does not exist (no earlier run?)")
    ids = [ln.strip() for ln in path.read_text().splitlines() if ln.strip()]
    return ids, path.resolve().parent


#: The run seed in CI (``$CI`` true) unless ``FUZZ_SEED`` says otherwise: a red CI must reproduce and a green one
#: stay green; exploring other seeds is the nightly and soak jobs' role (``FUZZ_SEED=random``).
CI_SEED = 1


def run_seed(arg: int | None, environ) -> tuple[int, str]:
    """The run seed and where it came from: ``--seed``, else ``$FUZZ_SEED`` (a number, or ``random``), else the
    fixed ``CI_SEED`` when ``$CI`` is true, else random. ``ListError`` (one line, exit 2) on a malformed value."""
    if arg is not None:
        return arg, "--seed"
    value = environ.get("FUZZ_SEED", "").strip()
    if value.lower() == "random":
        return random.randrange(2**32), "FUZZ_SEED=random"
    if value:
        try:
            return int(value, 0), "FUZZ_SEED"
        except ValueError:
            raise ListError(f"FUZZ_SEED={value!r}: not an integer (or 'random')") from None
    if environ.get("CI", "").strip().lower() in ("1", "true", "yes"):
        return CI_SEED, "CI: fixed seed, FUZZ_SEED=random explores"
    return random.randrange(2**32), "random"


def cmd_run(args: argparse.Namespace) -> int:
    levels = lists.load_levels(args.lists)
    units = lists.load_units(levels, args.lists)
    out = Path(args.out)
    check_output(out, kind="dir")  # before any test runs: the report root must be a writable folder
    nodeids, rerun_of, level_name = None, None, args.level
    if args.rerun:
        nodeids, previous = _rerun_nodeids(args.rerun, out)
        rerun_of = previous.name
        if not nodeids:
            print(f"regress: nothing failed in {previous.name}; nothing to rerun")
            return 0
        if level_name is None:
            level_name = Plan.read(previous).level.name
    level_name = level_name or "ci"
    if level_name not in levels:
        raise ListError(f"--level {level_name}: not one of {', '.join(levels)}")
    if nodeids is not None:
        matcher = lists.Matcher(units)
        selected = sorted({u.id for n in nodeids if (u := matcher.unit_of(n)) is not None})
    else:
        selected = [u.id for u in lists.select(units, level_name, _csv(args.tags), _csv(args.units))]
    if not selected:
        raise ListError(f"level {level_name}: no unit matches --tags/--units")
    seed, why = run_seed(args.seed, os.environ)
    previous = out / "latest"
    durations = previous_durations(previous) if previous.is_dir() else {}
    run_dir = new_run_dir(out)
    plan = Plan(level=levels[level_name], units=[u.to_json() for u in units], selected=selected, seed=seed,
                jobs=str(args.jobs), launcher=args.launcher, design_hash=lists.design_hash(), nodeids=nodeids,
                rerun_of=rerun_of, durations=durations, git=git_commit(), command=" ".join(sys.argv))
    plan.write(run_dir)
    for u in plan.selected_units():
        for pattern in u.missing():
            print(f"regress: warning: unit {u.id} ({u.origin}): no file matches {pattern}", file=sys.stderr)
    what = f"{len(nodeids)} failed test(s) of {rerun_of}" if nodeids else f"{len(selected)} units"
    print(f"regress: level {level_name}, {what}, launcher {args.launcher}, jobs {args.jobs}, seed {seed} "
          f"({why}; FUZZ_SEED={seed} reproduces), design {plan.design_hash}\nregress: report -> {run_dir}", flush=True)
    interrupted, status, stop_code = False, None, EXIT_SIGINT
    restore_sigterm = raise_on_sigterm()  # CI's SIGTERM stops the run like Ctrl-C: the report is written
    try:
        status = drive(LAUNCHERS[args.launcher].for_run(plan, run_dir, args.lists))
    except KeyboardInterrupt as e:
        interrupted, stop_code = True, interrupt_exit_code(e)
    except Interrupted as e:
        interrupted, stop_code = True, e.exit_code
    except Exception as e:  # sbatch refused, a farm that went away ...
        print(f"regress: launcher {args.launcher} failed: {e}", file=sys.stderr)
    finally:
        restore_sigterm()
    from regressions.regress.report import write_report

    with deferred_interrupts():  # a second Ctrl-C must not leave half a report
        summary = write_report(run_dir, interrupted=interrupted, launcher_exit=status, screenshot=True)
        publish_latest(out, run_dir)
    c = summary["counts"]
    bad = c["failed"] + c["error"]
    print(f"regress: {c['passed']} passed, {c['failed']} failed, {c['error']} errors, {c['skipped']} skipped "
          f"in {summary['wall_seconds']:.0f} s" + (" (INTERRUPTED)" if interrupted else ""))
    for f in summary["failures"][:20]:
        print(f"  FAIL {f['nodeid']}: {f['message']}")
    if status not in (None, 0, 1, 2, 5):
        print(f"regress: pytest exited {status} (internal error or crash): see the output above")
    if summary["not_run"]:
        print(f"regress: units without results: {', '.join(summary['not_run'])}")
    print(f"regress: {run_dir / 'index.html'}  (latest: {out / 'latest'})"
          + (f", screenshot {run_dir / summary['screenshot']}" if summary.get("screenshot") else ""))
    if bad:
        print("regress: rerun the failures with `make regress RERUN=failed`")
    if _unwritten(summary):
        return 2
    return stop_code if interrupted else (1 if bad or summary["not_run"] else 0)


def cmd_unit(args: argparse.Namespace) -> int:
    from regressions.regress.local import run_unit

    return run_unit(Path(args.run_dir), args.unit, seed=args.seed, level=args.level)


def cmd_report(args: argparse.Namespace) -> int:
    from regressions.regress.report import write_report

    summary = write_report(Path(args.run_dir), screenshot=True)
    print(f"regress: {Path(args.run_dir) / 'index.html'}: {summary['counts']}")
    return 2 if _unwritten(summary) else 0


def _unwritten(summary: dict) -> bool:
    """One line per report file that could not be written (after the summary); True if any."""
    for exc in summary.get("unwritten", []):
        print(f"regress: cannot write report {exc.path}: {exc.reason}", file=sys.stderr)
    return bool(summary.get("unwritten"))


def cmd_list(args: argparse.Namespace) -> int:
    levels = lists.load_levels(args.lists)
    units = lists.load_units(levels, args.lists)
    for name, level in levels.items():
        if args.level and name != args.level:
            continue
        chosen = lists.select(units, name)
        print(f"{name}: {len(chosen)} units - {level.description}")
        for u in chosen:
            print(f"  {u.id:40s} {u.area}/{u.target}  [{', '.join(u.tags)}]")
    return 0


def parser() -> argparse.ArgumentParser:
    p = OneLineParser(prog="python -m regressions.regress", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--lists", type=Path, help="folder of test lists (default regressions/lists)")
    sub = p.add_subparsers(dest="command")
    run = sub.add_parser("run", help="run a level (the default command)")
    run.add_argument("--level", help="smoke, ci (default), nightly or full")
    run.add_argument("--jobs", default="auto", help="pytest-xdist workers (default auto: one per core)")
    run.add_argument("--launcher", choices=sorted(LAUNCHERS), default="local")
    run.add_argument("--rerun", metavar="failed|RUN", help="run exactly the failed tests of the latest (or given) run")
    run.add_argument("--tags", help="only units with any of these tags (comma separated)")
    run.add_argument("--units", help="only these unit ids (comma separated)")
    run.add_argument("--seed", type=int, help="run seed (default $FUZZ_SEED, else random)")
    run.add_argument("--out", default=str(DEFAULT_OUT), help="report root (default build/regress)")
    unit = sub.add_parser("unit", help="run one unit of an existing run's plan (farm array tasks)")
    unit.add_argument("--run-dir", required=True)
    unit.add_argument("--unit", required=True)
    unit.add_argument("--seed", type=int)
    unit.add_argument("--level")
    rep = sub.add_parser("report", help="rewrite a run's report from its records")
    rep.add_argument("--run-dir", required=True)
    ls = sub.add_parser("list", help="show levels and their units")
    ls.add_argument("--level")
    return p


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    commands = ("run", "unit", "report", "list")
    lead = next((i for i, a in enumerate(argv) if not a.startswith("-") and a in commands), None)
    if lead is None:
        # `run` is implied; global options may precede the run options.
        i = argv.index("--lists") + 2 if "--lists" in argv else 0
        argv = argv[:i] + ["run"] + argv[i:]
    args = parser().parse_args(argv)
    try:
        max_memory()  # a malformed $DLA_MAX_MEMORY would fail every test it runs: one line now instead
    except BudgetSettingError as e:
        print(f"regress: {e}", file=sys.stderr)
        return 2
    try:
        return {"run": cmd_run, "unit": cmd_unit, "report": cmd_report, "list": cmd_list}[args.command](args)
    except (ListError, OutputError) as e:
        print(f"regress: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
