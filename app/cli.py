"""The ``dla`` command line: ``trace`` (play NVDLA traces), ``compile`` (model -> loadable), ``run`` (a
loadable on inputs), ``inspect`` (what a loadable holds).

Exit status: 0 when nothing failed, 1 when a trace failed or errored, 2 for bad input (a malformed
trace or loadable, a model the compiler refuses, a missing path, a bad input array or image, bad arguments).
User errors print one line, never a traceback; files named by -o/--output/--emit-trace/--rawdump appear
whole or not at all.
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import textwrap
import time
from pathlib import Path
from typing import Callable, Iterator

import numpy as np

from app.errors import UserError
from app.targets import register_simulators
from compiler.profiles import DEFAULT_PROFILE, PROFILES, optimised_ops
from dlaio import OutputError, check_output, input_files, write_atomic
from dlaio.inputs import not_a_file
from golden.budget import BudgetSettingError, MemoryBudgetError, max_memory, parse_size, set_max_memory
from golden.config import PRESETS
from golden.errors import clip_tokens
from runtime.arguments import OneLineParser, non_negative_int, non_negative_seconds
from runtime.inputs import (
    IMAGE_SUFFIXES,
    InputError,
    Preprocess,
    check_rawdump_dir,
    gather_inputs,
    load_array,
    parse_mean,
    parse_normalize,
    write_rawdump,
)
from runtime.deadline import DEFAULT_COMMAND_BUDGET_S, DeadlineExceeded, wall_clock
from runtime.processes import StopRequests, deferred_interrupts, interrupt_exit_code, raise_on_sigterm
from runtime.status import StatusLine
from runtime.strict import KnownIncomplete, strict_outcome
from runtime.trace import find_traces
from runtime.suite import (
    BATCH_TARGETS,
    ERROR,
    FAIL,
    NA,
    PASS,
    Outcome,
    TargetSetupError,
    collect,
    infer_config,
    known_targets,
    run_batch,
    run_suite,
    trace_budget,
)

register_simulators()  # before build_parser: its help lists the targets

#: Options that only make sense on a simulator target.
_SIM_OPTIONS = ("dut", "rtl_filelist", "toplevel", "define", "sim_arg", "timeout_cycles", "reset_idle_cycles",
                "axi_random")


def _write_junit(path: Path, outcomes: list[Outcome], seconds: float, inputs: list[Path] = ()) -> None:
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
    write_atomic(path, lambda f: xml.write(f, pretty=True), inputs=inputs)


def _write_json(path: Path, outcomes: list[Outcome], seconds: float, summary: str,
                inputs: list[Path] = ()) -> None:
    doc = {"summary": summary, "seconds": round(seconds, 3), "traces": [o.to_dict() for o in outcomes]}
    write_atomic(path, json.dumps(doc, indent=2), inputs=inputs)


def _check_out(option: str, path: str | None, inputs: list[Path], kind: str = "file") -> Path | None:
    """Refuse, before any work starts, an output the one writer (dlaio) would refuse: ``OPTION PATH: why``."""
    if not path:
        return None
    try:
        check_output(path, inputs=inputs, kind=kind)
    except OutputError as exc:
        raise UserError(f"{option} {exc.path}: {exc.reason}") from None
    return Path(path)


def _trace_inputs(found: list[tuple[Path, str]]) -> list[Path]:
    """Every file of the traces a run reads (.cfg/input.txn and the .dat files beside them): a report
    must never overwrite one."""
    dirs = {Path(cfg).parent for cfg, _ in found}
    return [*(Path(cfg) for cfg, _ in found), *(f for d in dirs for f in d.iterdir() if f.is_file())]


def _write_reports(args: argparse.Namespace, outcomes: list[Outcome], seconds: float, summary: str,
                   inputs: list[Path]) -> list[OutputError]:
    """Write --junit and --json; the reports that could not be written (disk full, ...), for one line each."""
    unwritten = []
    for given, write in ((args.junit, lambda p: _write_junit(p, outcomes, seconds, inputs)),
                         (args.json, lambda p: _write_json(p, outcomes, seconds, summary, inputs))):
        if given:
            try:
                write(Path(given))
            except OutputError as exc:
                unwritten.append(exc)
    return unwritten


def _sim_options(args: argparse.Namespace) -> dict:
    defines = []
    for d in args.define or []:
        key, _, value = d.partition("=")
        if not key:
            raise ValueError(f"--define {d!r}: expected K=V")
        defines.append((key, value or "1"))
    if args.dut and args.rtl_filelist:
        raise ValueError(f"--dut {args.dut} and --rtl-filelist {args.rtl_filelist} are mutually exclusive")
    return {
        "dut_name": args.dut, "filelist": args.rtl_filelist, "toplevel": args.toplevel, "defines": defines,
        "sim_args": list(args.sim_arg or []), "timeout_cycles": args.timeout_cycles,
        "reset_idle_cycles": args.reset_idle_cycles, "axi_random": args.axi_random,
    }


def _config_paths(paths: list[Path], config: str | None) -> list[Path]:
    """Without --config, a folder whose own path names no preset stands for its traces when each of them
    sits below a preset folder (``dla compile --emit-trace DIR`` writes ``DIR/<config>/task_*``)."""
    if config:
        return paths
    out: list[Path] = []
    for p in paths:
        if p.is_dir() and infer_config(p) is None:
            traces = find_traces(p, txn=True)
            if traces and all(infer_config(t) for t in traces):
                out.extend(traces)
                continue
        out.append(p)
    return out


def cmd_trace(args: argparse.Namespace) -> int:
    batch = args.target in BATCH_TARGETS
    if not batch:
        given = [f"--{o.replace('_', '-')}" for o in _SIM_OPTIONS if getattr(args, o) not in (None, [])]
        if given:
            print(f"dla trace: {', '.join(given)} only apply to --target {'|'.join(BATCH_TARGETS)}", file=sys.stderr)
            return 2
    try:
        found = collect(_config_paths([Path(p) for p in args.paths], args.config), args.config)
        options = _sim_options(args) if batch else {}
        strict = args.strict or bool(args.known_incomplete)
        known = KnownIncomplete.load(args.known_incomplete) if args.known_incomplete else KnownIncomplete()
        budget = trace_budget(args.timeout)
    except (ValueError, KeyError) as exc:
        print(f"dla trace: {clip_tokens(str(exc.args[0] if exc.args else exc))}", file=sys.stderr)
        return 2
    trace_files = _trace_inputs(found)
    try:  # before the run: a report that cannot be written fails now, not after the traces ran
        _check_out("--junit", args.junit, trace_files)
        _check_out("--json", args.json, trace_files)
    except UserError as exc:
        print(f"dla trace: {exc}", file=sys.stderr)
        return 2
    jobs = [(str(cfg), cfg_name, args.target) for cfg, cfg_name in found]
    workers = args.jobs if args.jobs > 0 else (os.cpu_count() or 1)
    progress = sys.stderr.isatty() and not args.quiet
    outcomes: list[Outcome] = []
    start = time.perf_counter()
    if batch:
        options["trace_budget_s"] = budget  # a simulation stuck on one trace is stopped past it
    results = run_batch(args.target, jobs, workers, options) if batch else run_suite(jobs, workers, budget)
    interrupted: KeyboardInterrupt | None = None
    restore_sigterm = raise_on_sigterm()  # SIGTERM (CI) ends the run like Ctrl-C, the report still written
    if progress:  # before the first trace ends, which may take long
        sys.stderr.write(f"[0/{len(jobs)}] running ...")
        sys.stderr.flush()
    try:
        for i, out in enumerate(results, 1):
            out = strict_outcome(out, known) if strict else out
            outcomes.append(out)
            if progress:
                sys.stderr.write("\r\x1b[K")
            print(out.line(), flush=True)
            if out.bad_input:
                print(out.detail, file=sys.stderr)
            if progress and i < len(jobs):
                sys.stderr.write(f"[{i}/{len(jobs)}] {sum(o.status == PASS for o in outcomes)} passed ...")
                sys.stderr.flush()
    except KeyboardInterrupt as exc:
        interrupted = exc
        with deferred_interrupts():
            results.close()  # stops the workers and simulators still running
        print("interrupted; reporting the traces that finished", file=sys.stderr)
    except TargetSetupError as exc:
        print(f"dla trace: {exc}", file=sys.stderr)
        return 2
    finally:
        restore_sigterm()
    seconds = time.perf_counter() - start
    passed = sum(o.status == PASS for o in outcomes)
    failed = sum(o.status in (FAIL, ERROR) for o in outcomes)
    skipped = sum(o.status == NA for o in outcomes)
    summary = f"{passed} passed, {failed} failed, {skipped} skipped"
    unwritten = _write_reports(args, outcomes, seconds, summary, trace_files)
    print(summary)
    for exc in unwritten:
        print(f"dla: cannot write report {exc.path}: {exc.reason}", file=sys.stderr)
    if unwritten:
        return 2
    if interrupted is not None:
        return interrupt_exit_code(interrupted)
    if any(o.bad_input for o in outcomes):
        return 2
    return 1 if failed or len(outcomes) < len(jobs) else 0


# ---- compile / run / inspect ----------------------------------------------------------------------------
def _user_errors() -> tuple[type[BaseException], ...]:
    errors: list[type[BaseException]] = [UserError, InputError, OutputError, MemoryBudgetError]
    try:  # a broken install must still end in one line, not in a traceback from this except clause
        from compiler.errors import CompileError
        from loadable.format import LoadableError
        from runtime.errors import ExecutionError
        from runtime.nvdla.run import NvdlaRunError
    except ImportError:
        return (UserError, InputError, OutputError, MemoryBudgetError, ImportError)
    return (*errors, CompileError, LoadableError, ExecutionError, NvdlaRunError)


class CompilerBug(Exception):
    """The compiler produced something invalid (a loadable check_loadable refuses): our bug, reported as an
    internal error (exit 1), never as a problem with the user's model or output path."""


#: Where an internal error asks to be reported.
REPORT_AT = 'the issue tracker (README.md, "Reporting bugs")'


def internal_error_line(exc: BaseException) -> str:
    """The one line an internal error prints: ours to fix, so it says where to report it."""
    return (f"dla: internal error {type(exc).__name__}: {clip_tokens(str(exc))} - please report it at "
            f"{REPORT_AT} (DLA_DEBUG=1 for the traceback)")


def _guarded(func: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    """Run a subcommand; user errors become one line on stderr and exit 2, internal errors (anything else)
    one line asking for a report and exit 1. Set DLA_DEBUG=1 to get the traceback of an internal error
    instead of its one-line summary."""

    def run(args: argparse.Namespace) -> int:
        # Ctrl-C and SIGTERM raise at once wherever the command is, even inside the executor's event loop
        # (asyncio.run would only cancel its task at the next suspension: after the whole batch)
        with StopRequests():
            try:
                return func(args)
            except KeyboardInterrupt as exc:  # Ctrl-C, or SIGTERM (runtime.processes.Terminated)
                print("dla: interrupted", file=sys.stderr)
                return interrupt_exit_code(exc)
            except DeadlineExceeded as exc:  # a legal job too big for its --timeout: not bad input
                print(f"dla: {exc}", file=sys.stderr)
                return 1
            except _user_errors() as exc:
                print(f"dla: {clip_tokens(str(exc))}", file=sys.stderr)
                return 2
            except OSError as exc:
                where = f"{exc.filename}: " if exc.filename else ""
                print(clip_tokens(f"dla: {where}{exc.strerror or exc}"), file=sys.stderr)
                return 2
            except Exception as exc:
                if os.environ.get("DLA_DEBUG"):
                    raise
                print(internal_error_line(exc), file=sys.stderr)
                return 1

    return run


def _command_budget(seconds: float | None) -> float | None:
    """The wall-clock budget of a compile or run: ``--timeout``, else the default; None for 0."""
    if seconds is not None and seconds < 0:
        raise UserError(f"--timeout {seconds:g}: must not be negative")
    return (DEFAULT_COMMAND_BUDGET_S if seconds is None else seconds) or None


def _add_timeout(parser: argparse.ArgumentParser, what: str) -> None:
    parser.add_argument("--timeout", type=non_negative_seconds, metavar="SECONDS",
                        help=f"wall-clock budget of the {what}: past it, one line saying what was running and "
                             f"exit 1 (default {DEFAULT_COMMAND_BUDGET_S:g}; 0 = none)")


def _check_in(path: str | Path | None) -> None:
    """Refuse an input that is not a regular file (missing, a folder, a FIFO, a device) before opening it:
    ``PATH: not a regular file (a FIFO)``."""
    why = path and not_a_file(path)
    if why:
        raise UserError(f"{path}: {why}")


def _load_array(path: Path) -> np.ndarray | dict[str, np.ndarray]:
    """A .npy array (or the arrays of a .npz by name), with the file named in any error."""
    return load_array(path)


def _count(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def _summary(msg, out: Path | None = None) -> str:
    """One paragraph: what was compiled and how big it is."""
    from loadable import loadable_pb2 as pb

    dla = [t for t in msg.tasks if t.WhichOneof("kind") == "dla"]
    cpu = [t for t in msg.tasks if t.WhichOneof("kind") == "cpu"]
    ops = [op for t in dla for op in t.dla.ops]
    macs = sum(op.macs for op in ops)
    weights = msg.plan.weight_bytes or sum(r.size for r in msg.regions if r.kind == pb.Region.WEIGHTS)
    peak, unshared = msg.plan.peak_bytes, msg.plan.unshared_bytes
    saved = f", {100 * (1 - peak / unshared):.0f}% saved by reuse" if unshared else ""
    cpu_ops = sorted({t.cpu.op for t in cpu})
    dtypes = {t.dtype for t in msg.tensors if t.storage == pb.Tensor.FEATURE}
    precision = "/".join(sorted(pb.Tensor.DType.Name(d).lower() for d in dtypes)) or "int8"
    text = (f"Compiled {msg.model_name or 'the model'}"
            f"{f' ({msg.source})' if msg.source else ''} for {msg.hw_config} in {precision}"
            f"{f' with {msg.quantization} quantization' if msg.quantization else ''}: "
            f"{_count(len(msg.tasks), 'task')} ({len(dla)} DLA, {len(cpu)} CPU), "
            f"{_count(len(ops), 'DLA operation')} ({sum(len(op.writes) for op in ops)} register writes"
            f"{f', {macs:,} MACs' if macs else ''}) and {_count(len(cpu), 'CPU operation')}"
            f"{f' ({chr(44).join(cpu_ops)})' if cpu_ops else ''}; {weights:,} weight bytes; activations "
            f"{peak:,} bytes planned peak vs {unshared:,} unshared{saved}.")
    used = [f"{n} with {what}" for what, n in optimised_ops(msg).items() if n]
    if used:
        text += f" Operations using optional optimisations: {', '.join(used)}."
    if out is not None:
        text += f" Wrote {out}."
    return textwrap.fill(text, width=100, break_long_words=False, break_on_hyphens=False)


#: NVDLA's compiler names for its hardware targets (``--configtarget``).
NVDLA_TARGETS = {"opendla-small": "nv_small", "opendla-large": "nv_large", "opendla-full": "nv_full"}


def _config_target(name: str) -> str:
    """A preset name, or NVDLA's name for it."""
    name = NVDLA_TARGETS.get(name, name)
    if name not in PRESETS:
        raise argparse.ArgumentTypeError(f"unknown config {name!r} (known: {', '.join(sorted(PRESETS))}, "
                                         f"{', '.join(NVDLA_TARGETS)})")
    return name


def _precision_overrides(spec: str | None) -> dict[str, str]:
    """``--precision-overrides``: {layer: type}; a one-line error for a spec that does not parse."""
    if not spec:
        return {}
    from compiler.errors import CompileError
    from compiler.passes.mixed import parse_overrides

    try:
        return parse_overrides(spec)
    except CompileError as exc:
        raise UserError(str(exc)) from None


@_guarded
def cmd_compile(args: argparse.Namespace) -> int:
    from loadable.format import LoadableError, check_loadable, write_loadable

    model, out = Path(args.model), Path(args.output)
    weights = Path(args.weights) if args.weights else None
    for given in (model, weights, args.calib_table):
        _check_in(given)
    if args.calib_images and not Path(args.calib_images).exists():
        raise UserError(f"{args.calib_images}: no such file or directory")
    if args.emit_trace and not args.input:
        raise UserError("--emit-trace needs --input X.npy (the input the traces are computed for)")
    if args.input and not (args.emit_trace or args.format == "nvdla"):
        raise UserError("--input is only used with --emit-trace and --format nvdla")
    if args.format == "nvdla" and args.emit_trace:
        raise UserError("--emit-trace applies to dla loadables (--format dla)")
    _check_in(args.input)
    calibrating = [o for o, v in (("--calib-images", args.calib_images), ("--calib-random", args.calib_random),
                                  ("--calib-table", args.calib_table), ("--calib-table-out", args.calib_table_out),
                                  ("--quant-report", args.quant_report)) if v is not None]
    overrides = _precision_overrides(args.precision_overrides)
    if args.precision == "fp16" and calibrating and "int16" not in overrides.values():
        raise UserError(f"{calibrating[0]}: an fp16 network is not calibrated (drop it, or --precision int8)")
    if args.calib_random is not None and args.calib_random <= 0:
        raise UserError(f"--calib-random {args.calib_random}: needs a positive number of samples")
    inputs = [model, *(p for p in (weights, args.calib_table, args.input) if p),
              *(input_files([args.calib_images]) if args.calib_images else [])]
    _check_out("-o", args.output, inputs)  # before compiling: never over the model or a device
    _check_out("--emit-trace", args.emit_trace, inputs, kind="dir")
    _check_out("--dump-passes", args.dump_passes, inputs, kind="dir")
    _check_out("--quant-report", args.quant_report, inputs)
    _check_out("--calib-table-out", args.calib_table_out, inputs)
    trace_input = _load_array(Path(args.input)) if args.input else None
    try:
        from compiler.driver import compile_model
    except ImportError as exc:
        raise UserError(f"the compiler is not available: {exc}") from None
    status, doing = StatusLine(), ["loading the model"]
    report: list | None = [] if args.quant_report else None
    table: dict | None = {} if args.calib_table_out else None

    def log(line: str) -> None:
        status.clear()
        print(line, flush=True)

    def progress(step: str) -> None:
        doing[:] = [step]
        status.show(step, force=True)

    try:
        with wall_clock(_command_budget(args.timeout), "dla compile", doing):
            msg = compile_model(
                model, weights=weights, config=args.config,
                calib_images=Path(args.calib_images) if args.calib_images else None,
                calib_random=args.calib_random,
                calib_table=Path(args.calib_table) if args.calib_table else None,
                quant=args.quant, calib_method=args.calib_method,
                dump_passes=Path(args.dump_passes) if args.dump_passes else None, log=log,
                progress=progress, quant_report=report, calibration=table, precision=args.precision,
                **({"firmware_pdp": True} if args.format == "nvdla" else {}),
                **({"profile": args.profile} if args.profile != DEFAULT_PROFILE else {}),
                **({"precision_overrides": overrides} if overrides else {}),
            )
    finally:
        status.clear()  # before any error line
    try:
        check_loadable(msg, "the compiled loadable")
    except LoadableError as exc:  # not the user's file: nothing was written to it
        raise CompilerBug(f"the compiler produced an invalid loadable: {exc.msg}") from exc
    if args.emit_trace:
        from runtime.executor import Network

        cfgs = Network(msg).emit_trace(trace_input, Path(args.emit_trace), input_files=inputs)
        print(f"Wrote {_count(len(cfgs), 'trace')} to {Path(args.emit_trace) / msg.hw_config} "
              f"(play them with: dla trace {args.emit_trace}).")
    if args.format == "nvdla":
        _write_nvdla(out, msg, trace_input, inputs)
    else:
        write_loadable(out, msg, validate=False, inputs=inputs)
        print(_summary(msg, out))
    if report is not None:
        _write_quant_report(Path(args.quant_report), report, inputs)
    if table is not None:
        write_atomic(Path(args.calib_table_out), json.dumps(table, indent=1) + "\n", inputs=inputs)
        print(f"Wrote the calibration of {_count(len(table), 'tensor')} to {args.calib_table_out}.")
    return 0


def _write_nvdla(out: Path, msg, sample, inputs: list) -> None:
    """``--format nvdla``: the compiled network as NVDLA's flatbuffer loadable (``runtime.nvdla.export``),
    with ``sample`` (--input) baked into its input memory."""
    from runtime.nvdla.export import NotExpressible, export

    feeds = None
    if sample is not None:
        feeds = sample if isinstance(sample, dict) else {msg.inputs[0]: sample}
        missing = [n for n in msg.inputs if n not in feeds]
        if missing:
            raise UserError(f"--input: no array for input {missing[0]!r}")
        feeds = {k: (v if np.ndim(v) == 4 or np.ndim(v) == 2 else v[None]) for k, v in feeds.items()}
    try:
        blob = export(msg, sample=feeds)
    except NotExpressible as exc:
        raise UserError(f"--format nvdla: {exc}") from None
    write_atomic(out, blob, inputs=inputs)
    ops = sum(len(t.dla.ops) for t in msg.tasks if t.WhichOneof("kind") == "dla")
    print(f"Wrote {out}: an NVDLA loadable for {msg.hw_config} ({_count(ops, 'DLA operation')}"
          f"{', input baked in' if feeds else ''}; run it with: dla run {out} --config {msg.hw_config}).")


def _write_quant_report(path: Path, rows: list, inputs: list) -> None:
    """The per-layer quantization report as JSON, and its five worst layers on the terminal."""
    from compiler.quant_report import as_json

    write_atomic(path, json.dumps(as_json(rows), indent=1), inputs=inputs)
    print(f"Quantization report ({len(rows)} layers) in {path}; lowest SQNR:")
    for r in rows[:5]:
        print(f"  {r.sqnr_db:6.1f} dB  {r.layer} ({r.op}): range {r.range:.4g}, {r.clipped:.3%} clipped, "
              f"largest |value| {r.seen_max:.4g}")


def _topk_lines(name: str, y: np.ndarray, k: int, labels: list[str] | None = None) -> Iterator[str]:
    """Per sample: the K best class indices with their scores (and the image the sample came from)."""
    flat = y.reshape(y.shape[0], -1) if y.ndim > 1 else y.reshape(1, -1)
    k = min(k, flat.shape[1])
    order = np.argsort(-flat, axis=1, kind="stable")[:, :k]
    for i, (idx, row) in enumerate(zip(order, flat)):
        picks = ", ".join(f"{int(j)} ({row[j]:.4f})" for j in idx)
        source = f"  [{labels[i]}]" if labels and i < len(labels) else ""
        yield f"{name}[{i}] top-{k}: {picks}{source}"


@_guarded
def cmd_run(args: argparse.Namespace) -> int:
    from app.nvdla import run_nvdla
    from runtime.executor import load
    from runtime.nvdla.run import is_nvdla_loadable

    _check_in(args.loadable)  # a FIFO would block the read below forever
    with open(args.loadable, "rb") as f:
        head = f.read(8)
    inputs = [Path(args.loadable), *(Path(p) for spec in args.input or [] for p in {spec, spec.partition("=")[2]}
                                     if p)]
    inputs = input_files(inputs)  # a directory of images stands for its files
    _check_out("--output", args.output, inputs)  # before the run: never over an input or a device
    _check_out("--rawdump", args.rawdump, inputs, kind="dir")
    _check_out("--dimg", args.dimg, inputs, kind="dir")
    if is_nvdla_loadable(head):
        return run_nvdla(args, _sim_options)
    for opt in ("config", "dimg"):  # NVDLA-loadable options
        if getattr(args, opt):
            raise UserError(f"--{opt} applies to NVDLA loadables (.nvdla); {args.loadable} is a dla loadable")
    if not args.input:
        raise UserError("--input is required (an array, image or directory per network input)")
    if args.topk is not None and args.topk <= 0:
        raise UserError(f"--topk {args.topk}: needs a positive number")
    sim = args.target in BATCH_TARGETS
    sim_only = [f"--{o.replace('_', '-')}" for o in (*_SIM_OPTIONS, "fallback") if getattr(args, o) not in (None, [])]
    if sim_only and not sim:
        raise UserError(f"{', '.join(sim_only)} only appl{'ies' if len(sim_only) == 1 else 'y'} to "
                        f"--target {'|'.join(BATCH_TARGETS)}")
    try:
        rtl_run = dict(rtl_options=_sim_options(args), fallback=args.fallback, report=print) if sim else {}
    except ValueError as exc:
        raise UserError(str(exc)) from None
    pre = Preprocess(mean=None if args.mean is None else parse_mean(args.mean),
                     normalize=None if args.normalize is None else parse_normalize(args.normalize), bgr=args.bgr)
    rawdump = check_rawdump_dir(Path(args.rawdump), inputs=inputs) if args.rawdump else None
    net = load(args.loadable)
    out = Path(args.output) if args.output else None
    if out is not None and out.suffix != ".npz" and len(net.outputs) > 1:
        raise UserError(f"--output {out}: the network has {len(net.outputs)} outputs ({', '.join(net.outputs)}); "
                        "name a .npz file to get them all by name")
    given = gather_inputs(args.input, net.input_shapes(), pre)
    inputs = given.arrays
    from runtime.executor import TargetRunError
    from runtime.profile import Profile

    profile = Profile() if args.profile or sim else None
    status, doing = StatusLine(), ["starting"]

    def task_done(done: int, total: int, task) -> None:  # golden: one call per task of every sample
        doing[:] = [f"task {done}/{total} ({task.name})"]
        status.show(doing[0])
    start = time.perf_counter()
    try:
        with wall_clock(_command_budget(args.timeout), "dla run", doing):
            results = net.run(inputs, target=args.target, profile=profile, progress=task_done, **rtl_run)
    except TargetSetupError as exc:  # no simulator, no RTL: the user's setup
        raise UserError(str(exc)) from None
    except TargetRunError as exc:  # the DUT failed (build error, hang): a failure, not bad input
        print(f"dla: {exc}", file=sys.stderr)
        return 1
    finally:
        status.clear()  # before any error line
    seconds = time.perf_counter() - start
    batch = next(iter(results.values())).shape[0] if results else 0
    cycles = profile.totals()["cycles"] if profile is not None and sim else None
    print(f"Ran {args.loadable} on {args.target}: {_count(batch, 'sample')}, {_count(len(net.msg.tasks), 'task')} "
          f"in {seconds:.2f} s{f' ({cycles:,} simulated cycles)' if cycles is not None else ''}")
    if args.profile:
        print(profile.table())
    for name, y in results.items():
        print(f"  {name}: {tuple(y.shape)} float32, min {float(y.min()):.4g}, max {float(y.max()):.4g}")
    if args.topk:
        first = net.outputs[0]
        for line in _topk_lines(first, results[first], args.topk, given.labels):
            print(line)
    if out is not None:
        if out.suffix == ".npz":
            write_atomic(out, lambda f: np.savez(f, **results), inputs=inputs)
        else:
            write_atomic(out, lambda f: np.save(f, results[net.outputs[0]]), inputs=inputs)
        print(f"Wrote {out}")
    if rawdump is not None:
        count = write_rawdump(rawdump, net, results, loadable=str(args.loadable), inputs=inputs)
        print(f"Wrote {_count(count, 'raw dump file')} to {rawdump} (listed in {rawdump / 'index.json'})")
    return 0


def _inspect_lines(msg) -> Iterator[str]:
    from loadable import loadable_pb2 as pb
    from loadable.format import feature_span
    from runtime.cpu_ops import attrs_to_dict

    kind = pb.Region.Kind.Name
    regions = {r.id: r for r in msg.regions}
    tensors = {t.name: t for t in msg.tensors}

    def shape(name: str) -> str:
        t = tensors.get(name)
        return f"{name} {tuple(t.shape)}" if t is not None else f"{name} (missing)"

    yield (f"loadable v{msg.version_major}.{msg.version_minor}  config {msg.hw_config}  "
           f"model {msg.model_name or '-'}  source {msg.source or '-'}  quantization {msg.quantization or '-'}")
    yield f"inputs: {', '.join(shape(n) for n in msg.inputs)}"
    yield f"outputs: {', '.join(shape(n) for n in msg.outputs)}"
    yield f"regions ({len(msg.regions)}, {sum(r.size for r in msg.regions):,} bytes):"
    for r in msg.regions:
        mem = {1: "DRAM", 0: "CV-SRAM"}.get(r.ram_type, f"ram {r.ram_type}")
        content = f"  content {len(r.content):,} bytes" if r.content else ""
        yield f"  region {r.id:<3} {kind(r.kind):<8} {r.size:>12,} bytes  align {r.alignment:<5} {mem:<7} {r.name}{content}"
    yield f"tensors ({len(msg.tensors)}):"
    for t in msg.tensors:
        if t.storage == pb.Tensor.HOST:
            yield f"  {t.name:<24} {str(tuple(t.shape)):<18} HOST    {pb.Tensor.DType.Name(t.dtype)}"
            continue
        rname = regions[t.region].name if t.region in regions else "?"
        yield (f"  {t.name:<24} {str(tuple(t.shape)):<18} FEATURE {pb.Tensor.DType.Name(t.dtype)} scale {t.scale:.6g}  "
               f"region {t.region} ({rname})+{t.offset:#x}  cube {t.channels}x{t.height}x{t.width} atom {t.atom} "
               f"line {t.line_stride} surface {t.surface_stride}  {feature_span(t):,} bytes")
    yield f"tasks ({len(msg.tasks)}):"
    for task in msg.tasks:
        deps = ",".join(map(str, task.deps)) or "-"
        if task.WhichOneof("kind") == "dla":
            yield f"  task {task.id:<3} DLA  {task.name}  deps {deps}  {_count(len(task.dla.ops), 'op')}"
            for op in task.dla.ops:
                relocs = sum(w.HasField("reloc") for w in op.writes)
                macs = f"  {op.macs:,} MACs" if op.macs else ""
                yield (f"      {op.name}: {'+'.join(op.engines) or '?'}  {len(op.writes)} writes ({relocs} relocated)  "
                       f"intr {op.interrupt_mask:#x}{macs}  {', '.join(op.inputs)} -> {', '.join(op.outputs)}"
                       f"{f'  layer {op.layer}' if op.layer and op.layer != op.name else ''}")
        elif task.WhichOneof("kind") == "cpu":
            attrs = ", ".join(f"{k}={v}" for k, v in attrs_to_dict(task.cpu.attrs).items())
            yield (f"  task {task.id:<3} CPU  {task.name}  deps {deps}  {task.cpu.op}({attrs})  "
                   f"{', '.join(task.cpu.inputs)} -> {', '.join(task.cpu.outputs)}")
        else:
            yield f"  task {task.id:<3} ???  {task.name}  deps {deps}"
    plan = msg.plan
    saved = f" ({100 * (1 - plan.peak_bytes / plan.unshared_bytes):.0f}% saved by reuse)" if plan.unshared_bytes else ""
    yield (f"memory plan: weights {plan.weight_bytes:,} bytes, activations peak {plan.peak_bytes:,} bytes vs "
           f"{plan.unshared_bytes:,} unshared{saved}")


@_guarded
def cmd_inspect(args: argparse.Namespace) -> int:
    from loadable.format import LoadableError, check_loadable, read_loadable

    msg = read_loadable(args.loadable, validate=False)
    for line in _inspect_lines(msg):
        print(line)
    try:
        check_loadable(msg, args.loadable)
    except LoadableError as exc:
        print(f"INVALID: {exc.msg}")
        print(f"dla: {exc}", file=sys.stderr)
        return 2
    return 0


def _memory_size(text: str) -> int:
    try:
        return parse_size(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _max_memory_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--max-memory", type=_memory_size, metavar="SIZE",
                        help="memory budget (e.g. 512M, 8G): inputs declaring more (trace memories, data files, "
                             "loadable regions, model tensors, calibration) are refused in one line (default "
                             "$DLA_MAX_MEMORY, else half the RAM or of ulimit -v)")


def build_parser() -> argparse.ArgumentParser:
    ap = OneLineParser(prog="dla", description="NVDLA co-verification suite")
    sub = ap.add_subparsers(dest="command", required=True)
    t = sub.add_parser("trace", help="play NVDLA register-level traces (.cfg) on a target and check them")
    t.add_argument("paths", nargs="+", metavar="PATH", help="a trace directory, a .cfg, or a folder of traces")
    t.add_argument("--config", choices=sorted(PRESETS), help="hardware config (default: from the suite folder name)")
    t.add_argument("--target", default="golden",
                   help=f"target to run on (default golden; known: {', '.join(known_targets())})")
    t.add_argument("-j", "--jobs", type=non_negative_int, default=1, help="parallel processes (0 = one per core)")
    t.add_argument("--junit", metavar="FILE", help="write a JUnit XML report")
    t.add_argument("--json", metavar="FILE", help="write a JSON report")
    t.add_argument("-q", "--quiet", action="store_true", help="no progress line")
    t.add_argument("--strict", action="store_true",
                   help="a trace whose data file is missing is an ERROR (exit 2), not N/A, unless listed by "
                        "--known-incomplete")
    t.add_argument("--known-incomplete", metavar="FILE",
                   help="traces allowed to miss data files under --strict (implies it): one <config>/<trace> "
                        "per line, # comments; e.g. regressions/lists/known-incomplete.txt")
    t.add_argument("--timeout", type=non_negative_seconds, metavar="SECONDS",
                   help="wall-clock budget of each trace, an ERROR when exceeded (default $DLA_TRACE_TIMEOUT, "
                        "else 900; 0 = none)")
    rtl = t.add_argument_group("simulator targets (--target icarus|verilator)")
    rtl.add_argument("--dut", metavar="NAME",
                     help="a named DUT instead of ours in rtl/: rtl (default) or nvdla-nv_small (NVDLA's RTL from "
                          "../shared/nvdla/rtl; DLA_NVDLA_NV_SMALL_FILELIST=F overrides)")
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
                          "8192 with --rtl-filelist or an NVDLA --dut)")
    rtl.add_argument("--axi-random", type=int, metavar="SEED",
                     help="random AXI timing from SEED: latencies, stalls on every channel, out-of-order reads "
                          "across IDs (default: $DLA_AXI_RANDOM, else off)")
    _max_memory_option(t)
    t.set_defaults(func=_guarded(cmd_trace))  # a crash outside a trace's own outcome: one line, exit 1

    c = sub.add_parser("compile", help="compile a model (ONNX, Caffe, Keras, PNNX, TFLite) into a loadable")
    c.add_argument("model", metavar="MODEL", help="the model: ONNX (.onnx), Caffe (.prototxt), Keras (.h5), PNNX (.pnnx.param) or "
                        "TFLite (.tflite)")
    c.add_argument("--weights", metavar="FILE", help="Caffe weights (.caffemodel), or a PNNX .bin not beside its .param")
    c.add_argument("--config", "--configtarget", required=True, type=_config_target, metavar="CONFIG",
                   help=f"hardware config to compile for: {', '.join(sorted(PRESETS))} (NVDLA's opendla-small, "
                        "opendla-large and opendla-full name nv_small, nv_large and nv_full)")
    c.add_argument("-o", "--output", required=True, metavar="OUT.dla", help="the loadable to write")
    c.add_argument("--format", choices=("dla", "nvdla"), default="dla",
                   help="dla (default): our loadable; nvdla: NVDLA's flatbuffer loadable (.nvdla) that its "
                        "runtime and kmd firmware run (averages then take the firmware's reciprocals; "
                        "--input bakes a sample into its input memory)")
    cal = c.add_mutually_exclusive_group()
    cal.add_argument("--calib-images", metavar="DIR", help="calibrate activation scales on these images")
    cal.add_argument("--calib-random", type=int, metavar="N", help="calibrate on N random inputs")
    cal.add_argument("--calib-table", "--calibtable", metavar="JSON",
                     help="take activation scales from this table (NVDLA's JSON calibration table format)")
    c.add_argument("--calib-table-out", metavar="JSON",
                   help="write the calibration as NVDLA's JSON table (--calib-table reads it back: same loadable "
                        "with the same calibration inputs)")
    c.add_argument("--precision", "--cprecision", choices=("int8", "int16", "fp16"), default=None,
                   help="the network's data type on the DLA: int8 (calibrated; the default where the config "
                        "has it) or fp16 (no calibration; the default on configs without int8). NVDLA's "
                        "compiler calls it --cprecision")
    c.add_argument("--precision-overrides", metavar="LAYER=TYPE,...|JSON",
                   help="mixed precision: these model layers in int16 or fp16 in a --precision int16/fp16 "
                        "network (e.g. conv2=fp16,fc1=int16, or a JSON object {layer: type}); each boundary "
                        "becomes one converting operation")
    c.add_argument("--profile", choices=tuple(PROFILES), default=DEFAULT_PROFILE,
                   help="optional hardware optimisations, as NVDLA's compiler names them: basic (none), default "
                        "(CBUF data/weight reuse across split convolutions), performance and fast-math (also "
                        "compressed weights where they fetch fewer bytes and Winograd for eligible 3x3 "
                        "convolutions, on configs that have them)")
    c.add_argument("--quant", "--quantizationMode", choices=("per-kernel", "per-filter"), default="per-filter",
                   help="weight quantization granularity (default per-filter)")
    c.add_argument("--calib-method", choices=("minmax", "percentile", "entropy"), default="minmax",
                   help="activation range from the calibration data: largest value (default), 99.99th "
                        "percentile, or the KL-divergence (entropy) threshold")
    c.add_argument("--quant-report", metavar="REPORT.json",
                   help="write the per-layer quantization report (scale, range, clipped share, SQNR)")
    c.add_argument("--dump-passes", metavar="DIR", help="write the graph after every compiler pass here")
    c.add_argument("--emit-trace", metavar="DIR",
                   help="also write one NVDLA trace per DLA task for --input (DIR/<config>/task_*)")
    c.add_argument("--input", metavar="X.npy", help="the input for --emit-trace, or the sample --format nvdla "
                                                    "bakes in (float NCHW)")
    _add_timeout(c, "compile")
    _max_memory_option(c)
    c.set_defaults(func=cmd_compile)

    r = sub.add_parser("run", help="run a loadable on inputs and print or save its outputs")
    r.add_argument("loadable", metavar="OUT.dla")
    r.add_argument("--input", action="append", metavar="[NAME=]PATH",
                   help="float NCHW input (.npy, or .npz keyed by input name), or an 8-bit image "
                        f"({', '.join(IMAGE_SUFFIXES)}) or a directory of them, one sample each, batched in order; "
                        "repeat for several inputs or images")
    r.add_argument("--output", metavar="Y.npy",
                   help="write the float32 outputs: .npy for one output, .npz (keyed by name) for several")
    r.add_argument("--target", default="golden",
                   help=f"target to run on (default golden; simulators: {', '.join(BATCH_TARGETS)})")
    r.add_argument("--profile", action="store_true",
                   help="print per task: wall time, simulated cycles (RTL), operations and DMA bytes per engine")
    r.add_argument("--topk", type=int, metavar="K", help="print the top K classes of the first output per sample")
    r.add_argument("--rawdump", metavar="DIR",
                   help="write every output of every sample raw to DIR (.f32, .int8, .dimg files; index.json)")
    _add_timeout(r, "run")
    nv = r.add_argument_group("NVDLA loadables (flatbuffer .nvdla files from NVDLA's compiler)")
    nv.add_argument("--config", choices=sorted(PRESETS), help="hardware config the loadable is for (required)")
    nv.add_argument("--dimg", metavar="OUTDIR", help="write the outputs as NVDLA DIMG files o_000000.dimg, ...")
    nv.add_argument("--dimg-format", choices=("nvdla", "native"), default="nvdla",
                    help="nvdla (default): exactly NVDLA's runtime, which interleaves int8 features by 32 channels "
                         "whatever the hardware (md5-comparable with its goldens); native: the hardware's atom")
    nv.add_argument("--descriptor-layout", choices=("auto", "legacy", "current"), default="auto",
                    help="kmd descriptor layout: legacy has no dla_data_cube.offset (default: from the blobs' "
                         "firmware version, < 0.12 is legacy)")
    img = r.add_argument_group("image inputs (pixels 0..255 become (pixel - mean) / normalize)")
    img.add_argument("--mean", metavar="M[,M,M]",
                     help="subtracted per channel, in the input's channel order (one value, or one per channel; "
                          "write --mean=-1,2,3 for a leading minus)")
    img.add_argument("--normalize", metavar="V", help="divide by V (> 0) after the mean (default 1)")
    img.add_argument("--bgr", action="store_true", help="feed colour images as B, G, R (default R, G, B)")
    rsim = r.add_argument_group("simulator targets (--target icarus|verilator; the DUT is built as for dla trace)")
    rsim.add_argument("--fallback", choices=("golden",),
                      help="run operations needing engines the DUT lacks on the golden model (default: refuse)")
    rsim.add_argument("--dut", metavar="NAME", help="a named DUT: rtl (default) or nvdla-nv_small (as for dla trace)")
    rsim.add_argument("--rtl-filelist", metavar="F", help="build this RTL (simulator file list) instead of rtl/")
    rsim.add_argument("--toplevel", metavar="T", help="top module (default NV_nvdla, or the file list's --top-module)")
    rsim.add_argument("--define", action="append", metavar="K=V", help="Verilog define (repeatable)")
    rsim.add_argument("--sim-arg", action="append", metavar="ARG", help="extra simulator build option (repeatable)")
    rsim.add_argument("--timeout-cycles", type=int, metavar="N",
                      help="budget of each DLA operation in clock cycles (default scales with its data)")
    rsim.add_argument("--reset-idle-cycles", type=int, metavar="N",
                      help="idle cycles after reset (default 64 for rtl/, 8192 with --rtl-filelist or an NVDLA --dut)")
    rsim.add_argument("--axi-random", type=int, metavar="SEED",
                      help="random AXI timing from SEED (as for dla trace; default: $DLA_AXI_RANDOM, else off)")
    _max_memory_option(r)
    r.set_defaults(func=cmd_run)

    i = sub.add_parser("inspect", help="print what a loadable holds: regions, tensors, tasks, memory plan")
    i.add_argument("loadable", metavar="OUT.dla")
    i.set_defaults(func=cmd_inspect)
    return ap


def main(argv: list[str] | None = None) -> int:
    if hasattr(signal, "SIGPIPE") and argv is None:
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # `dla trace ... | head` ends quietly
    args = build_parser().parse_args(argv)
    if getattr(args, "max_memory", None) is not None:
        set_max_memory(args.max_memory)
        os.environ["DLA_MAX_MEMORY"] = str(args.max_memory)  # -j workers and simulators inherit it
    try:
        max_memory()  # a malformed $DLA_MAX_MEMORY is refused here, before any work, not deep in a worker
    except BudgetSettingError as exc:
        print(f"dla: {exc}", file=sys.stderr)
        return 2
    if getattr(args, "target", None) and args.target not in known_targets():
        print(f"dla: unknown target {args.target!r} (known: {', '.join(known_targets())})", file=sys.stderr)
        return 2
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
