"""The ``dla`` command line.

Exit status: 0 when nothing failed, 1 when a trace failed or errored, 2 for bad input (a malformed
trace, a missing path, bad arguments). User errors print one line, never a traceback.
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from pathlib import Path

from golden.config import PRESETS
from runtime.suite import (
    BATCH_TARGETS,
    ERROR,
    FAIL,
    NA,
    PASS,
    Outcome,
    TargetSetupError,
    collect,
    known_targets,
    run_batch,
    run_suite,
)

#: Options that only make sense on a simulator target.
_SIM_OPTIONS = ("rtl_filelist", "toplevel", "define", "sim_arg", "timeout_cycles", "reset_idle_cycles")


def _write_junit(path: Path, outcomes: list[Outcome], seconds: float) -> None:
    from junitparser import Error, Failure, JUnitXml, Skipped, TestCase, TestSuite

    suite = TestSuite("dla.trace")
    for o in outcomes:
        case = TestCase(o.name, classname=f"trace.{o.config}.{o.target}", time=round(o.seconds, 4))
        if o.status == FAIL:
            case.result = [Failure(o.detail)]
        elif o.status == ERROR:
            case.result = [Error(o.detail)]
        elif o.status == NA:
            case.result = [Skipped(o.detail)]
        suite.add_testcase(case)
    suite.time = round(seconds, 3)
    xml = JUnitXml()
    xml.add_testsuite(suite)
    path.parent.mkdir(parents=True, exist_ok=True)
    xml.write(str(path), pretty=True)


def _write_json(path: Path, outcomes: list[Outcome], seconds: float, summary: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    doc = {"summary": summary, "seconds": round(seconds, 3), "traces": [o.to_dict() for o in outcomes]}
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(doc, indent=2))
    tmp.replace(path)


def _sim_options(args: argparse.Namespace) -> dict:
    defines = []
    for d in args.define or []:
        key, _, value = d.partition("=")
        if not key:
            raise ValueError(f"--define {d!r}: expected K=V")
        defines.append((key, value or "1"))
    return {
        "filelist": args.rtl_filelist, "toplevel": args.toplevel, "defines": defines,
        "sim_args": list(args.sim_arg or []), "timeout_cycles": args.timeout_cycles,
        "reset_idle_cycles": args.reset_idle_cycles,
    }


def cmd_trace(args: argparse.Namespace) -> int:
    batch = args.target in BATCH_TARGETS
    if not batch:
        given = [f"--{o.replace('_', '-')}" for o in _SIM_OPTIONS if getattr(args, o) not in (None, [])]
        if given:
            print(f"dla trace: {', '.join(given)} only apply to --target {'|'.join(BATCH_TARGETS)}", file=sys.stderr)
            return 2
    try:
        found = collect([Path(p) for p in args.paths], args.config)
        options = _sim_options(args) if batch else {}
    except (ValueError, KeyError) as exc:
        print(f"dla trace: {exc.args[0] if exc.args else exc}", file=sys.stderr)
        return 2
    jobs = [(str(cfg), cfg_name, args.target) for cfg, cfg_name in found]
    workers = args.jobs if args.jobs > 0 else (os.cpu_count() or 1)
    progress = sys.stderr.isatty() and not args.quiet
    outcomes: list[Outcome] = []
    start = time.perf_counter()
    results = run_batch(args.target, jobs, workers, options) if batch else run_suite(jobs, workers)
    try:
        for i, out in enumerate(results, 1):
            outcomes.append(out)
            if progress:
                sys.stderr.write("\r\x1b[K")
            print(out.line(), flush=True)
            if out.bad_input:
                print(out.detail, file=sys.stderr)
            if progress and i < len(jobs):
                sys.stderr.write(f"[{i}/{len(jobs)}] {sum(o.status == PASS for o in outcomes)} passed ...")
                sys.stderr.flush()
    except KeyboardInterrupt:
        print("interrupted; reporting the traces that finished", file=sys.stderr)
    except TargetSetupError as exc:
        print(f"dla trace: {exc}", file=sys.stderr)
        return 2
    seconds = time.perf_counter() - start
    passed = sum(o.status == PASS for o in outcomes)
    failed = sum(o.status in (FAIL, ERROR) for o in outcomes)
    skipped = sum(o.status == NA for o in outcomes)
    summary = f"{passed} passed, {failed} failed, {skipped} skipped"
    if args.junit:
        _write_junit(Path(args.junit), outcomes, seconds)
    if args.json:
        _write_json(Path(args.json), outcomes, seconds, summary)
    print(summary)
    if any(o.bad_input for o in outcomes):
        return 2
    return 1 if failed or len(outcomes) < len(jobs) else 0


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="dla", description="NVDLA co-verification suite")
    sub = ap.add_subparsers(dest="command", required=True)
    t = sub.add_parser("trace", help="play NVDLA register-level traces (.cfg) on a target and check them")
    t.add_argument("paths", nargs="+", metavar="PATH", help="a trace directory, a .cfg, or a folder of traces")
    t.add_argument("--config", choices=sorted(PRESETS), help="hardware config (default: from the suite folder name)")
    t.add_argument("--target", default="golden",
                   help=f"target to run on (default golden; known: {', '.join(known_targets())})")
    t.add_argument("-j", "--jobs", type=int, default=1, help="parallel processes (0 = one per core)")
    t.add_argument("--junit", metavar="FILE", help="write a JUnit XML report")
    t.add_argument("--json", metavar="FILE", help="write a JSON report")
    t.add_argument("-q", "--quiet", action="store_true", help="no progress line")
    rtl = t.add_argument_group("simulator targets (--target icarus|verilator)")
    rtl.add_argument("--rtl-filelist", metavar="F",
                     help="build this RTL (a simulator file list: sources, -I/+incdir+, -D/+define+, -v, -y, -f) "
                          "instead of ours in rtl/")
    rtl.add_argument("--toplevel", metavar="T", help="top module (default NV_nvdla, or the file list's --top-module)")
    rtl.add_argument("--define", action="append", metavar="K=V", help="Verilog define (repeatable)")
    rtl.add_argument("--sim-arg", action="append", metavar="ARG",
                     help="extra simulator build option (repeatable; write --sim-arg=-Wno-WIDTH for options "
                          "that start with -)")
    rtl.add_argument("--timeout-cycles", type=int, metavar="N",
                     help="per-trace budget in clock cycles (default scales with the trace's data volume)")
    rtl.add_argument("--reset-idle-cycles", type=int, metavar="N",
                     help="idle cycles after reset before the first register access (default 64 for rtl/, "
                          "8192 with --rtl-filelist)")
    t.set_defaults(func=cmd_trace)
    return ap


def main(argv: list[str] | None = None) -> int:
    if hasattr(signal, "SIGPIPE") and argv is None:
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # `dla trace ... | head` ends quietly
    args = build_parser().parse_args(argv)
    if getattr(args, "target", None) and args.target not in known_targets():
        print(f"dla: unknown target {args.target!r} (known: {', '.join(known_targets())})", file=sys.stderr)
        return 2
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
