"""The fuzz driver: ``python -m regressions.fuzz --seconds N [--target golden|verilator|icarus] ...``.

Every (property, preset) pair gets a deterministic sequence of hypothesis runs ("chunks"): chunk i runs
``CHUNKS[i]`` examples under ``@seed(chunk_seed(run seed, property, preset, i))`` with ``deadline=None``
and no example database. The driver always runs the chunk of the pair that has had the least time so
far, until the budget is spent, so each pair's examples are the first chunks of its own sequence: the
same seed gives the same examples, however far a run gets (``--examples N`` makes the extent fixed).

A failure is shrunk by hypothesis, saved by ``regressions.fuzz.found`` (JSON + replayable trace) and its
pair is not fuzzed further in this run. On a simulator target, properties naming the DUT in ``duts`` run on
``engines.RTL_CONFIG``: a batch of examples becomes traces checking golden's output CRC, all played in
one simulation (``runtime.suite.run_batch``); a trace that fails is saved (no shrinking on RTL), its trace
checking the CRC of the DUT's config (``tb.duts.dut_config``), as its batch did.

Exit status: 0 no failures, 1 failures, 2 usage or setup errors (one line on stderr); 130 after Ctrl-C and
143 after SIGTERM (the table of what ran is printed first; simulations are stopped, none outlives the run).
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import secrets
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, TextIO

from hypothesis import HealthCheck, Phase, Verbosity, given, seed, settings
from hypothesis.errors import HypothesisException, UnsatisfiedAssumption

from dlaio import OutputError, check_output
from golden import Dla
from golden.budget import BudgetSettingError, max_memory
from golden.config import PRESETS, HwConfig, get_config
from regressions.fuzz import found as found_mod
from regressions.fuzz.properties import Property, load
from regressions.lib.golden_verdict import crc_trace
from regressions.lib.reference.arith import OutsideCmodDomain
from runtime.processes import StopRequests, interrupt_exit_code

#: Examples per chunk, by chunk index (the last repeats): short first chunks start every pair soon.
CHUNKS = (10, 20, 40, 80, 100)
#: Examples per simulation batch on a simulator target.
RTL_BATCH = 20
TARGETS = ("golden", "verilator", "icarus")
#: Seconds between progress lines.
PROGRESS_EVERY = 5.0
PROG = "python -m regressions.fuzz"


class UsageError(Exception):
    """Bad command line or environment: one line, exit 2."""


def chunk_seed(run_seed: int, prop: str, config: str, index: int) -> int:
    """The hypothesis seed of chunk ``index`` of one pair: independent of timing and of other pairs."""
    digest = hashlib.sha256(f"{run_seed}:{prop}:{config}:{index}".encode()).digest()
    return int.from_bytes(digest[:8], "little")


def chunk_size(index: int) -> int:
    return CHUNKS[min(index, len(CHUNKS) - 1)]


@dataclass
class Failure:
    prop: str
    config: str
    error: str
    example: Any = None
    saved: Path | None = None
    chunk_seed: int | None = None


@dataclass
class Pair:
    prop: Property
    config: str
    examples: int = 0
    seconds: float = 0.0
    chunks: int = 0
    failed: bool = False
    errors: list[str] = field(default_factory=list)

    @property
    def hw(self) -> HwConfig:
        return get_config(self.config)


# ---- one chunk on golden -------------------------------------------------------------------------------------
@dataclass
class ChunkResult:
    #: Examples generated, up to and including the first failing one (shrinking not counted).
    generated: int
    error: BaseException | None = None
    #: The shrunk failing example (None if the strategy itself raised).
    example: Any = None
    #: ``time.monotonic()`` of the first failure, before shrinking.
    failed_at: float | None = None


def run_chunk(prop: Property, hw: HwConfig, chunk_seed_: int, count: int,
              visit: Callable[[Any], None] | None = None) -> ChunkResult:
    """Run ``count`` examples of ``prop`` on ``hw`` under one seed; a failure comes back shrunk."""
    state: dict[str, Any] = {"generated": 0, "failing": None, "failed": False, "failed_at": None}
    suppress = [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much,
                HealthCheck.large_base_example]

    @settings(max_examples=count, deadline=None, database=None, derandomize=False, suppress_health_check=suppress,
              report_multiple_bugs=False, verbosity=Verbosity.quiet, print_blob=False)
    @seed(chunk_seed_)
    @given(example=prop.strategy(hw))
    def test(example: Any) -> None:
        if not state["failed"]:
            state["generated"] += 1
            if visit is not None:
                visit(example)
        try:
            prop.check(hw, example)
        except UnsatisfiedAssumption:
            raise
        except Exception:
            if not state["failed"]:
                state["failed_at"] = time.monotonic()
            state["failed"] = True
            state["failing"] = example  # the last failing call is hypothesis's replay of the shrunk one
            raise

    try:
        test()
    except Exception as exc:
        # Unsatisfiable or a health check is not a property failure (the caller notes it); anything the
        # check raised (a mismatch, golden's ConfigError, ...) or the strategy raised is.
        if isinstance(exc, HypothesisException) and not state["failed"]:
            raise
        return ChunkResult(state["generated"], exc, state["failing"], state["failed_at"])
    return ChunkResult(state["generated"])


# ---- the run ------------------------------------------------------------------------------------------------
@dataclass
class Options:
    seconds: float
    target: str
    seed: int
    properties: list[str]
    configs: list[str]
    found_dir: Path
    examples: int | None = None
    list_examples: Path | None = None
    quiet: bool = False
    #: The DUT on a simulator target (``tb.duts.NAMED_DUTS``; ``--dut`` / ``$DLA_DUT``).
    dut: str = "rtl"


class Run:
    def __init__(self, options: Options, out: TextIO | None = None) -> None:
        self.o = options
        self.out = out if out is not None else sys.stdout
        self.failures: list[Failure] = []
        self.start = time.monotonic()
        self._last_progress = self.start
        self._listing: TextIO | None = None
        self.stop = StopRequests()

    def say(self, text: str) -> None:
        print(text, file=self.out, flush=True)

    # ---- selection
    def pairs(self, props: dict[str, Property]) -> list[Pair]:
        rtl = self.o.target != "golden"
        names = self.o.properties or [p for p in props if not rtl or self.o.dut in props[p].duts]
        pairs = []
        for name in names:
            prop = props[name]
            if rtl:
                from regressions.fuzz.engines import RTL_CONFIG

                configs = [RTL_CONFIG] if RTL_CONFIG in prop.configs else []
            else:
                configs = list(prop.configs)
            if self.o.configs:
                configs = [c for c in configs if c in self.o.configs]
            pairs += [Pair(prop, c) for c in configs]
        if not pairs:
            raise UsageError("nothing to fuzz: no selected property runs on the selected configs"
                             + (f" (target {self.o.target} runs the properties of DUT {self.o.dut} on nv_small only)" if rtl else ""))
        return pairs

    # ---- progress and listing
    def progress(self, pairs: list[Pair], force: bool = False) -> None:
        now = time.monotonic()
        if self.o.quiet or now - self._last_progress < (0.5 if force else PROGRESS_EVERY):
            return
        self._last_progress = now
        per: dict[str, int] = {}
        for p in pairs:
            per[p.prop.name] = per.get(p.prop.name, 0) + p.examples
        text = ", ".join(f"{k} {v}" for k, v in per.items())
        self.say(f"[{now - self.start:6.1f}s] examples: {text}; failures {len(self.failures)}")

    def visit(self, pair: Pair, chunk: int) -> Callable[[Any], None] | None:
        if self._listing is None:
            return None

        def record(example: Any) -> None:
            line = {"property": pair.prop.name, "config": pair.config, "chunk": chunk,
                    "example": pair.prop.to_json(example)}
            self._listing.write(json.dumps(line, sort_keys=True) + "\n")

        return record

    def remaining(self) -> float:
        return self.o.seconds - (time.monotonic() - self.start)

    def wants_more(self, pair: Pair) -> bool:
        return not pair.failed and (self.o.examples is None or pair.examples < self.o.examples)

    def next_pair(self, pairs: list[Pair]) -> Pair | None:
        """The pair that has had the least time so far (ties: list order), or None when the budget is
        spent or no pair wants more examples."""
        if self.remaining() <= 0:
            return None
        active = [p for p in pairs if self.wants_more(p)]
        return min(active, key=lambda p: (p.seconds, pairs.index(p))) if active else None

    # ---- golden
    def fuzz_golden(self, pairs: list[Pair]) -> None:
        while (pair := self.next_pair(pairs)) is not None:
            index = pair.chunks
            count = chunk_size(index)
            if self.o.examples is not None:
                count = min(count, self.o.examples - pair.examples)
            cseed = chunk_seed(self.o.seed, pair.prop.name, pair.config, index)
            t0 = time.monotonic()
            try:
                result = run_chunk(pair.prop, pair.hw, cseed, count, self.visit(pair, index))
            except HypothesisException as err:  # e.g. every example rejected: note it and move on
                result = ChunkResult(count)
                pair.errors.append(found_mod.first_line(err))
            self.stop.check()  # an interrupt hypothesis swallowed or turned into an error is not a failure
            pair.seconds += time.monotonic() - t0
            pair.chunks += 1
            pair.examples += result.generated
            if result.error is not None:
                self.fail(pair, result.error, result.example, cseed, found_at=result.failed_at)
            self.progress(pairs)

    def fail(self, pair: Pair, exc: BaseException | str, example: Any, cseed: int | None,
             extra: dict | None = None, found_at: float | None = None, hw: HwConfig | None = None) -> None:
        pair.failed = True
        failure = Failure(pair.prop.name, pair.config, found_mod.first_line(exc), example, chunk_seed=cseed)
        if example is not None:
            failure.saved = found_mod.save(pair.prop, pair.config, example, exc, seed=self.o.seed,
                                           found_dir=self.o.found_dir, extra=extra, hw=hw)
        self.failures.append(failure)
        self.say(f"FAIL {pair.prop.name} on {pair.config}: {failure.error}")
        now = time.monotonic()
        at = now if found_at is None else found_at
        shrunk = f", shrunk in {now - found_at:.1f} s" if found_at is not None else ""
        self.say(f"  found {at - self.start:.1f} s into the run, at example {pair.examples} of this pair{shrunk}")
        if failure.saved is not None:
            self.say(f"  saved {failure.saved}")
            trace = failure.saved.with_suffix("")
            if trace.is_dir():
                self.say(f"  replay: dla trace {trace}")
        self.say(f"  fuzz again: {PROG} --seed {self.o.seed} --property {pair.prop.name} --config {pair.config} "
                 f"--seconds {self.o.seconds:g}" + (f" --target {self.o.target}" if self.o.target != "golden" else "")
                 + (f" --dut {self.o.dut}" if self.o.dut != "rtl" else ""))

    # ---- simulators
    def fuzz_rtl(self, pairs: list[Pair]) -> None:
        from app.targets import register_simulators
        from runtime.suite import PASS, run_batch
        from tb.duts import dut_config

        register_simulators()  # run_batch finds the simulators by name

        while (pair := self.next_pair(pairs)) is not None:
            index = pair.chunks
            count = RTL_BATCH if self.o.examples is None else min(RTL_BATCH, self.o.examples - pair.examples)
            cseed = chunk_seed(self.o.seed, pair.prop.name, pair.config, index)
            t0 = time.monotonic()
            batch = draw_examples(pair.prop, pair.hw, cseed, count, self.visit(pair, index))
            pair.examples += len(batch)
            hw = dut_config(self.o.dut, pair.hw)  # the rules this DUT's RTL implements (tb.duts.DUT_SEMANTICS)
            with tempfile.TemporaryDirectory(prefix="fuzz_rtl_") as tmp:
                jobs, examples = [], []
                for i, example in enumerate(batch):
                    try:
                        program, expected = pair.prop.program(hw, example)
                    except OutsideCmodDomain:  # the reference refuses it (undefined in the cmod): skip
                        continue
                    golden_out = program.run(Dla(hw))
                    if golden_out != expected:  # golden itself is wrong: that is the failure
                        self.fail(pair, f"golden differs from the reference (RTL batch {index}, example {i})",
                                  example, cseed, hw=hw)
                        break
                    name = f"{i:03d}_{pair.prop.name}"
                    cfg = crc_trace(program, Path(tmp) / pair.config, name, golden_out)
                    jobs.append((str(cfg), pair.config, self.o.target))
                    examples.append(example)
                if not pair.failed and jobs:
                    outcomes = list(run_batch(self.o.target, jobs, workers=1, options={"dut_name": self.o.dut}))
                    for example, outcome in zip(examples, outcomes):
                        if outcome.lost:  # its simulator died (a signal, the OOM killer): no verdict on the RTL
                            pair.errors.append(f"{outcome.name}: {outcome.detail}")
                            continue
                        if outcome.status != PASS:
                            self.fail(pair, f"RTL ({self.o.target}) differs from golden: {outcome.status} "
                                      f"{outcome.detail}", example, cseed, extra={"target": self.o.target}, hw=hw)
                            break
            pair.seconds += time.monotonic() - t0
            pair.chunks += 1
            self.progress(pairs)

    # ---- report
    def table(self, pairs: list[Pair]) -> list[str]:
        rows = []
        for name in dict.fromkeys(p.prop.name for p in pairs):
            mine = [p for p in pairs if p.prop.name == name]
            examples = sum(p.examples for p in mine)
            seconds = sum(p.seconds for p in mine)
            failures = sum(f.prop == name for f in self.failures)
            rate = examples / seconds if seconds > 0 else 0.0
            rows.append((name, ",".join(p.config for p in mine), str(examples), f"{rate:.1f}", str(failures)))
        head = ("property", "configs", "examples", "examples/s", "failures")
        widths = [max(len(r[i]) for r in rows + [head]) for i in range(len(head))]

        def fmt(r):
            return "  ".join(c.ljust(w) if i < 2 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths)))

        return [fmt(head)] + [fmt(r) for r in rows]

    def main(self) -> int:
        props = load()
        unknown = [p for p in self.o.properties if p not in props]
        if unknown:
            raise UsageError(f"unknown property {unknown[0]!r}; properties: {', '.join(props)}")
        if self.o.target != "golden":
            no_rtl = [p for p in self.o.properties if self.o.dut not in props[p].duts]
            if no_rtl:
                raise UsageError(f"property {no_rtl[0]!r} does not run on DUT {self.o.dut} (its RTL lacks the "
                                 f"engine); properties for {self.o.dut}: "
                                 f"{', '.join(p for p in props if self.o.dut in props[p].duts)}")
        pairs = self.pairs(props)
        self.say(f"fuzz seed: {self.o.seed}")
        selection = [f"--property {p}" for p in self.o.properties] + [f"--config {c}" for c in self.o.configs]
        if self.o.examples is not None:
            selection.append(f"--examples {self.o.examples}")
        direct = (f" (this selection: {PROG} --seed {self.o.seed} --seconds {self.o.seconds:g} --target "
                  f"{self.o.target} {' '.join(selection)})") if selection else ""
        dut = f" DUT={self.o.dut}" if self.o.dut != "rtl" else ""
        self.say(f"reproduce: FUZZ_SEED={self.o.seed} make fuzz FUZZ_SECONDS={self.o.seconds:g} "
                 f"TARGET={self.o.target}{dut}{direct}")
        self.say(f"fuzzing {len(pairs)} property/config pairs for {self.o.seconds:g} s on {self.o.target}: "
                 + ", ".join(f"{p.prop.name}@{p.config}" for p in pairs))
        if self.o.list_examples is not None:
            self._listing = open(self.o.list_examples, "w")
        interrupted: KeyboardInterrupt | None = None
        try:
            with self.stop:  # Ctrl-C and CI's SIGTERM end the run; the table of what ran is still printed
                if self.o.target == "golden":
                    self.fuzz_golden(pairs)
                else:
                    self.fuzz_rtl(pairs)
        except KeyboardInterrupt as exc:
            interrupted = exc
            self.say("interrupted: reporting what ran")
        finally:
            if self._listing is not None:
                self._listing.close()
        self.progress(pairs, force=True)
        for line in self.table(pairs):
            self.say(line)
        for p in pairs:
            for err in dict.fromkeys(p.errors):
                self.say(f"note: {p.prop.name} on {p.config}: {err}")
        if self.failures:
            self.say(f"{len(self.failures)} failure(s); seed {self.o.seed}")
        if interrupted is not None:
            return interrupt_exit_code(interrupted)
        if self.failures:
            return 1
        self.say(f"no failures in {time.monotonic() - self.start:.1f} s")
        return 0


def draw_examples(prop: Property, hw: HwConfig, chunk_seed_: int, count: int,
                  visit: Callable[[Any], None] | None = None) -> list[Any]:
    """``count`` examples of ``prop`` from one seed, without checking them (simulator batches)."""
    drawn: list[Any] = []

    @settings(max_examples=count, deadline=None, database=None, derandomize=False, verbosity=Verbosity.quiet,
              suppress_health_check=list(HealthCheck), phases=[Phase.generate])
    @seed(chunk_seed_)
    @given(example=prop.strategy(hw))
    def collect(example: Any) -> None:
        drawn.append(example)
        if visit is not None:
            visit(example)

    collect()
    return drawn[:count]


# ---- command line --------------------------------------------------------------------------------------------
class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, no usage block
        raise UsageError(message)


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog=PROG, description="Differential fuzzing of the golden engines (and the RTL) with hypothesis.")
    p.add_argument("--seconds", type=float, default=60.0, help="time budget (default 60)")
    p.add_argument("--target", default="golden", choices=TARGETS,
                   help="golden: golden vs the reference math; verilator/icarus: RTL vs golden (the properties whose engines the --dut has)")
    p.add_argument("--dut", metavar="NAME",
                   help="DUT on a simulator target: rtl (ours, default) or nvdla-nv_small (default: $DLA_DUT)")
    p.add_argument("--seed", type=int, help="run seed (default: $FUZZ_SEED, else random)")
    p.add_argument("--property", action="append", default=[], metavar="NAME", help="fuzz only this (repeatable)")
    p.add_argument("--config", action="append", default=[], metavar="PRESET", help="only this preset (repeatable)")
    p.add_argument("--found-dir", type=Path, default=found_mod.FOUND_DIR,
                   help=f"where failures are saved (default {found_mod.FOUND_DIR})")
    p.add_argument("--examples", type=int, metavar="N",
                   help="stop each property/config pair after N examples (a fixed extent: reproducible)")
    p.add_argument("--list-examples", type=Path, metavar="FILE", help="write every drawn example as a JSON line")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress lines")
    return p


def parse(argv: list[str] | None, environ: dict[str, str]) -> Options:
    args = build_parser().parse_args(argv)
    if args.seconds <= 0:
        raise UsageError(f"--seconds must be positive, not {args.seconds:g}")
    if args.examples is not None and args.examples < 1:
        raise UsageError(f"--examples must be at least 1, not {args.examples}")
    unknown = [c for c in args.config if c not in PRESETS]
    if unknown:
        raise UsageError(f"unknown config {unknown[0]!r}; presets: {', '.join(PRESETS)}")
    try:
        max_memory()  # a malformed $DLA_MAX_MEMORY would fail every example: one line now instead
    except BudgetSettingError as exc:
        raise UsageError(str(exc)) from None
    run_seed = args.seed
    if run_seed is None and environ.get("FUZZ_SEED", "").strip():
        try:
            run_seed = int(environ["FUZZ_SEED"].strip(), 0)
        except ValueError:
            raise UsageError(f"FUZZ_SEED={environ['FUZZ_SEED']!r} is not an integer") from None
    if run_seed is None:
        run_seed = secrets.randbits(32)
    if run_seed < 0:
        raise UsageError(f"the seed must not be negative ({run_seed})")
    # $DLA_DUT (exported by `make ... DUT=`) only matters on a simulator target; --dut must fit the target
    dut = args.dut or (environ.get("DLA_DUT", "").strip() if args.target != "golden" else "") or "rtl"
    if dut != "rtl":
        from tb.duts import DutError, named_dut

        if args.target == "golden":
            raise UsageError(f"--dut {dut} needs a simulator target (--target verilator|icarus)")
        try:
            named_dut(dut)
        except DutError as exc:
            raise UsageError(str(exc)) from None
    if args.list_examples is not None:  # before fuzzing: never a FIFO (open would block), a device or a folder
        try:
            check_output(args.list_examples)
        except OutputError as exc:
            raise UsageError(f"--list-examples {exc.path}: {exc.reason}") from None
    return Options(seconds=args.seconds, target=args.target, seed=run_seed, dut=dut,
                   properties=list(dict.fromkeys(args.property)),
                   configs=list(dict.fromkeys(args.config)), found_dir=args.found_dir, examples=args.examples,
                   list_examples=args.list_examples, quiet=args.quiet)


def main(argv: list[str] | None = None, environ: dict[str, str] | None = None) -> int:
    environ = dict(os.environ if environ is None else environ)
    try:
        options = parse(argv, environ)
        run = Run(options)
        with run.stop:  # from the first line printed on, Ctrl-C and SIGTERM end the run with its table
            return run.main()
    except UsageError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as exc:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return interrupt_exit_code(exc)
    except Exception as exc:
        from runtime.suite import TargetSetupError

        if isinstance(exc, TargetSetupError):
            print(f"{PROG}: error: {exc}", file=sys.stderr)
            return 2
        raise
