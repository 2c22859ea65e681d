"""Benchmarks (``make bench``): speed targets live here, never in timed tests.

``python -m regressions.bench [--quick] [--only S,..|--skip S,..] [--out build/bench/results.json]`` runs
the sections below in order, prints each measurement as it comes, and writes ``results.json`` atomically,
``results.png`` beside it (``regressions.bench_plot``), appends the run to ``history.jsonl`` and redraws
``history.png`` from the full (non-quick) runs there. A section that cannot measure (missing traces, a
simulator not installed, a command that fails) is recorded under ``errors`` and the others still run;
the exit status is then 1.

Sections and keys (rates are best-of-``repeat``; wall times are one run unless said otherwise):

``golden``: the golden model through registers (``golden.Dla``, memory in, engine, memory out; the
  register program is built before timing) against this machine's float64 GEMM rate, so runs on
  different machines compare:
  - ``gemm_mac_per_s``: float64 ``a @ b`` in multiply-accumulates per second (FLOP/2);
  - ``golden_conv_mac_per_s``, ``golden_conv_gemm_ratio``: a 56x56x256 -> 256 3x3 direct conv with SDP
    writing int8 on the fly (target ratio >= 0.3);
  - ``golden_conv_int16_{mac_per_s,gemm_ratio}``: the same layer in int16 on nv_full, full-range values,
    still exact through float64 GEMM (target ratio >= 0.3); ``golden_conv_fp16_*``: a 28x28x128 -> 64 fp16
    conv (CMAC's aligned Booth products and CACC's float emulated bit by bit in compiled loops; target
    ratio >= 0.02);
  - ``golden_{sdp,pdp,cdp}_elements_per_s``: input elements per second of SDP (BS ALU+MUL+ReLU per
    channel, BN ALU per element, output CVT), PDP (3x3 stride-2 max pool) and CDP (LRN, 5 channels) on a
    128x112x112 int8 cube; ``golden_{sdp,pdp,cdp}_gemm_ratio`` divides by ``gemm_mac_per_s``: elements
    per GEMM multiply-accumulate time (no target: these engines are memory bound, the ratio only makes
    runs on different machines comparable);
  - ``golden_workloads``: what each engine ran.
``suite``: ``nv_small_suite_seconds`` / ``nv_small_suite_summary``: ``dla trace <traces>/nv_small -j 2`` on
  golden, process wall time (target < 10 s).
``rtl``: our RTL on the nv_small suite under both simulators; each DUT build is made (or reused) by an
  untimed one-trace run first:
  - ``nv_small_{verilator,icarus}_suite_seconds`` / ``..._summary``: ``dla trace ... --target SIM -j 2``,
    process wall time;
  - ``{verilator,icarus}_cycles_per_s``: simulated clock cycles (``sim.cycles`` of each trace result,
    written by ``tb.bench.run_job``) over the testbench's wall seconds of the passing traces, i.e. the
    rate while simulating, without simulator start-up; ``verilator_icarus_speed_ratio``;
  - ``rtl_{sim}_cycles_per_s`` (same value, older name), ``rtl_{sim}_seconds_per_trace``,
    ``rtl_cycles_simulated`` (per simulator: both run the same traces, so the same cycles),
    ``rtl_dut_build`` {sim: {cached, seconds}}.
``compile``: ``compile_zoo_seconds`` {model: {config: s}} for ``regressions.lib.zoo.ZOO`` (frontend, passes,
  codegen, one random calibration input); ``compile_resnet50_seconds`` (nv_small, target < 10 s) and
  ``compile_resnet50_seconds_by_config`` for a generated ResNet-50-sized ONNX graph (224x224, 25.5 M
  parameters), ``compile_resnet50_dla_ops``.
``nvdla``: our testbench against NVDLA's native C++ harness on NVDLA's nv_small RTL (keys ``nvdla_*``, see
  ``regressions.bench_nvdla``; skipped with a note when NVDLA's shared folder is absent). Run it alone
  with ``python -m regressions.bench --only nvdla`` (``--quick`` leaves it out unless named in ``--only``:
  the first run builds NVDLA's harness and the testbench's nv_small model, minutes each).
``regress``: ``regress_seconds_1``, ``regress_seconds_2`` and ``regress_parallel_speedup`` (t1 / t2, target
  >= 1.6) of ``python -m regressions.regress --level smoke --jobs N --out DIR``, read from the
  ``wall_seconds`` of its ``DIR/latest/summary.json``; one untimed warm-up run first fills the DUT build
  caches (``regress_warmup``). ``--regress-cmd`` replaces the command (placeholders ``{python}``,
  ``{level}``, ``{jobs}``, ``{out}``). Takes minutes; ``--quick`` leaves it out.

Always: ``machine`` (cores, CPU, numpy and its BLAS, python, platform, date, load average, commit),
``quick``, ``sections`` and ``section_seconds``, ``targets`` {key: {op, value, measured, met}}, ``errors``.
``--quick`` shrinks every workload (a GEMM of 512, a 14x14x64 conv, 32x28x28 cubes, two traces per
simulator, the zoo on nv_small only, no ResNet-50): it checks the machinery, its figures are not the
targets' figures.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable

import numpy as np

from dlaio import OutputError, check_output, write_atomic

REPO = Path(__file__).resolve().parents[1]
SIMULATORS = ("verilator", "icarus")
COMPILE_CONFIGS = ("nv_small", "nv_large", "nv_full")
#: Trace-suite parallelism, as ``make regress`` runs the suites.
SUITE_JOBS = 2
DEFAULT_REGRESS_CMD = "{python} -m regressions.regress --level {level} --jobs {jobs} --out {out}"

from regressions.bench_imagenet import TARGETS as _imagenet_targets  # noqa: E402
from regressions.bench_nvdla import TARGETS as _nvdla_targets  # noqa: E402

#: Speed targets (issue 6; ``nvdla_*``: issue 14, ``regressions.bench_nvdla``): key -> (comparison, value).
TARGETS: dict[str, tuple[str, float]] = {
    "golden_conv_gemm_ratio": (">=", 0.3),
    "golden_conv_int16_gemm_ratio": (">=", 0.3),
    "golden_conv_fp16_gemm_ratio": (">=", 0.02),  # issue 18
    "nv_small_suite_seconds": ("<", 10.0),
    "compile_resnet50_seconds": ("<", 10.0),
    "regress_parallel_speedup": (">=", 1.6),
    **_nvdla_targets,
    **_imagenet_targets,
}
_COMPARE: dict[str, Callable[[float, float], bool]] = {
    ">=": lambda a, b: a >= b, ">": lambda a, b: a > b, "<=": lambda a, b: a <= b, "<": lambda a, b: a < b,
}


class BenchError(Exception):
    """A section could not measure (a command failed, a result file is missing)."""


@dataclass(frozen=True)
class Sizes:
    """Workload sizes of one mode."""

    gemm_n: int
    #: (height, width, channels, kernels, kernel size) of the direct conv.
    conv: tuple[int, int, int, int, int]
    #: The same for the int16 and fp16 convs (nv_full with deep CBUF banks).
    conv16: tuple[int, int, int, int, int]
    #: fp16 conv: emulates CMAC's aligned Booth products lane by lane (compiled; ~10x the int16 cost).
    conv_fp16: tuple[int, int, int, int, int]
    #: (channels, height, width) of the SDP/PDP/CDP cube.
    cube: tuple[int, int, int]
    repeat: int
    #: Traces per simulator in the ``rtl`` section; None = the whole nv_small suite.
    rtl_traces: int | None
    zoo_configs: tuple[str, ...]
    resnet50_configs: tuple[str, ...]


FULL = Sizes(gemm_n=2048, conv=(56, 56, 256, 256, 3), conv16=(56, 56, 256, 256, 3), conv_fp16=(28, 28, 128, 64, 3),
             cube=(128, 112, 112), repeat=3, rtl_traces=None,
             zoo_configs=COMPILE_CONFIGS, resnet50_configs=COMPILE_CONFIGS)
QUICK = Sizes(gemm_n=512, conv=(14, 14, 64, 64, 3), conv16=(14, 14, 64, 64, 3), conv_fp16=(14, 14, 32, 32, 3),
              cube=(32, 28, 28), repeat=2, rtl_traces=2,
              zoo_configs=("nv_small",), resnet50_configs=())


@dataclass
class Bench:
    """One benchmark run: options, sizes, and the results the sections fill in."""

    sizes: Sizes
    traces: Path
    python: str
    regress_cmd: str
    regress_level: str
    regress_repeat: int
    regress_timeout: float
    results: dict
    section: str = ""

    def say(self, msg: str) -> None:
        print(f"[{self.section}] {msg}", flush=True)

    @property
    def nv_small(self) -> Path:
        return self.traces / "nv_small"


def best_of(fn: Callable[[], object], repeat: int = 3) -> float:
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def _si(x: float) -> str:
    for div, prefix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(x) >= div:
            return f"{x / div:.2f} {prefix}"
    return f"{x:.1f} "


# ---- golden engines ---------------------------------------------------------------------------------------
def gemm_mac_per_s(n: int = 2048, repeat: int = 3) -> float:
    """float64 GEMM rate in multiply-accumulates per second (FLOP/2)."""
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((n, n)), rng.standard_normal((n, n))
    a @ b  # warm up BLAS threads
    return n**3 / best_of(lambda: a @ b, repeat)


@dataclass(frozen=True)
class Workload:
    """One engine operation as a register program, and the work it does (in ``unit``)."""

    hw: object  # golden.HwConfig
    program: object  # regressions.lib.programs.LayerTest
    work: int
    unit: str
    describe: str


def engine_seconds(workload: Workload, repeat: int) -> float:
    """Best wall time of ``workload`` on a fresh ``golden.Dla``: memory load, register writes (the engine
    fires on its OP_EN), output read back. The model is built outside the timing."""
    from golden import Dla

    best = float("inf")
    for _ in range(repeat):
        dla = Dla(workload.hw)
        t0 = time.perf_counter()
        workload.program.run(dla)
        best = min(best, time.perf_counter() - t0)
        if not dla.intr_status:
            raise BenchError(f"golden: {workload.describe} did not complete (no interrupt)")
    return best


def conv_workload(height: int, width: int, channels: int, kernels: int, k: int) -> Workload:
    """Direct conv (CDMA..CACC) with SDP converting to int8 on the fly; counted in MACs."""
    from golden import get_config
    from regressions.lib.programs import ConvLayer, program_conv

    # Direct conv holds its whole input in CBUF; no preset's CBUF holds 56x56x256 (the compiler splits
    # such layers by rows), so the engine is measured on nv_small with a CBUF deep enough for one pass.
    hw = get_config("nv_small").derive(cbuf_bank_depth=1 << 16)
    rng = np.random.default_rng(1)
    layer = ConvLayer(
        x=rng.integers(-128, 128, (channels, height, width)),
        w=rng.integers(-128, 128, (kernels, channels, k, k)),
        pad=(k // 2, k // 2),
        clip_truncate=8,
    )
    macs = kernels * channels * k * k * height * width
    return Workload(hw, program_conv(hw, layer), macs, "MAC",
                    f"conv {height}x{width}x{channels} -> {kernels}, {k}x{k}, nv_small (deep CBUF)")


def conv16_workload(precision: str, height: int = 56, width: int = 56, channels: int = 256, kernels: int = 256,
                    k: int = 3) -> Workload:
    """Direct conv in int16 or fp16 on nv_full with deep CBUF banks (as the int8 conv: one pass over the
    layer; SDP writes 16-bit output). int16 values span the whole int16 range, and C*R*S*2^30 < 2^52 keeps
    float64 GEMM exact (the engine checks that bound and takes exact int64 otherwise); fp16 values are
    normal numbers in [-2, 2)."""
    from golden import get_config
    from regressions.lib.programs.conv_wide import WideConvLayer, program_conv_wide

    hw = get_config("nv_full").derive(cbuf_bank_depth=1 << 14)
    rng = np.random.default_rng(5)
    if precision == "int16":
        x = rng.integers(-(1 << 15), 1 << 15, (channels, height, width))
        w = rng.integers(-(1 << 15), 1 << 15, (kernels, channels, k, k))
        layer = WideConvLayer(x=x, w=w, precision="int16", pad=(k // 2, k // 2), clip_truncate=16)
    else:
        def fp16_bits(shape: tuple[int, ...]) -> np.ndarray:
            return rng.uniform(-2, 2, shape).astype(np.float16).view(np.uint16).astype(np.int64)

        layer = WideConvLayer(x=fp16_bits((channels, height, width)), w=fp16_bits((kernels, channels, k, k)),
                              precision="fp16", pad=(k // 2, k // 2))
    macs = kernels * channels * k * k * height * width
    return Workload(hw, program_conv_wide(hw, layer), macs, "MAC",
                    f"conv {precision} {height}x{width}x{channels} -> {kernels}, {k}x{k}, nv_full (deep CBUF)")


def sdp_workload(c: int, h: int, w: int) -> Workload:
    """SDP from memory: X1 (BS) ALU + MUL + ReLU with per-channel operands, X2 (BN) ALU with a
    per-element operand (a residual add), output CVT; counted in input elements."""
    from golden import get_config
    from regressions.lib.programs import SdpLayer, program_sdp
    from regressions.lib.reference import sdp as ref_sdp

    hw = get_config("nv_small")
    rng = np.random.default_rng(2)
    params = ref_sdp.SdpParams(
        x1=ref_sdp.SdpXParams(bypass=False, alu_bypass=False, alu_operand=rng.integers(-128, 128, c),
                              mul_bypass=False, mul_operand=rng.integers(-128, 128, c), mul_shift=6,
                              relu_bypass=False),
        x2=ref_sdp.SdpXParams(bypass=False, alu_bypass=False, alu_operand=rng.integers(-128, 128, (c, h, w))),
        cvt_scale=3, cvt_shift=2,
    )
    layer = SdpLayer(rng.integers(-128, 128, (c, h, w)), params, operand_bytes=1)
    return Workload(hw, program_sdp(hw, layer), c * h * w, "element",
                    f"sdp {c}x{h}x{w}: BS alu+mul+relu per channel, BN alu per element, cvt; nv_small")


def pdp_workload(c: int, h: int, w: int) -> Workload:
    """PDP from memory: 3x3 stride-2 max pool padded by 1 (ResNet's stem pool); input elements."""
    from golden import get_config
    from regressions.lib.programs import PoolLayer, program_pdp

    hw = get_config("nv_small")
    x = np.random.default_rng(3).integers(-128, 128, (c, h, w))
    layer = PoolLayer(x, "max", (3, 3), (2, 2), (1, 1, 1, 1))
    return Workload(hw, program_pdp(hw, layer), c * h * w, "element",
                    f"pdp {c}x{h}x{w}: 3x3 stride 2 max, pad 1; nv_small")


def cdp_workload(c: int, h: int, w: int) -> Workload:
    """CDP: LRN over 5 channels with both LUTs in range; input elements."""
    from golden import get_config
    from golden.lut import LutRegisters
    from regressions.lib.programs import LrnLayer, program_cdp

    hw = get_config("nv_small")
    rng = np.random.default_rng(4)
    lut = LutRegisters(le_table=tuple(int(v) for v in rng.integers(0, 32768, 65)),
                       lo_table=tuple(int(v) for v in rng.integers(0, 32768, 257)),
                       le_function="exp", le_start=0, le_end=1 << 20, lo_start=0, lo_end=1 << 16, lo_index_select=8)
    layer = LrnLayer(rng.integers(-128, 128, (c, h, w)), lut, normalz_len=1, datout_shifter=8)
    return Workload(hw, program_cdp(hw, layer), c * h * w, "element", f"cdp {c}x{h}x{w}: LRN 5; nv_small")


#: Golden engines measured, and how each builds its workload from the run's sizes.
ENGINES: dict[str, Callable[[Sizes], Workload]] = {
    "conv": lambda s: conv_workload(*s.conv),
    "conv_int16": lambda s: conv16_workload("int16", *s.conv16),
    "conv_fp16": lambda s: conv16_workload("fp16", *s.conv_fp16),
    "sdp": lambda s: sdp_workload(*s.cube),
    "pdp": lambda s: pdp_workload(*s.cube),
    "cdp": lambda s: cdp_workload(*s.cube),
}


def golden_conv_mac_per_s(height: int = 56, width: int = 56, channels: int = 256, kernels: int = 256,
                          k: int = 3, repeat: int = 3) -> float:
    """MAC/s of one conv layer through the register-level model (memory in, SDP writes memory out)."""
    wl = conv_workload(height, width, channels, kernels, k)
    return wl.work / engine_seconds(wl, repeat)


# ---- trace suites -----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class SuiteRun:
    seconds: float  # process wall time
    summary: str
    traces: list[dict]


def run_trace_suite(python: str, paths: list[Path], target: str = "golden", jobs: int = SUITE_JOBS,
                    timeout: float = 3600) -> SuiteRun:
    """``dla trace PATHS --target T -j N`` in a subprocess, timed from launch to exit (what a user waits);
    the per-trace results come from its ``--json`` report."""
    with tempfile.TemporaryDirectory(prefix="dla-bench-") as tmp:
        report = Path(tmp) / "suite.json"
        cmd = [python, "-m", "app.cli", "trace", *map(str, paths), "--target", target, "-j", str(jobs),
               "-q", "--json", str(report)]
        t0 = time.perf_counter()
        proc = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, timeout=timeout)
        seconds = time.perf_counter() - t0
        if not report.is_file():
            tail = (proc.stderr.strip() or proc.stdout.strip()).splitlines()[-3:]
            raise BenchError(f"dla trace --target {target} exited {proc.returncode} without a report: "
                             + " | ".join(tail))
        doc = json.loads(report.read_text())
    return SuiteRun(seconds, doc.get("summary", ""), doc.get("traces", []))


def nv_small_suite_seconds(traces: Path, python: str = sys.executable) -> tuple[float, str]:
    """Wall seconds and summary line of the nv_small suite on golden."""
    run = run_trace_suite(python, [traces / "nv_small"])
    return run.seconds, run.summary


def rtl_paths(nv_small: Path, limit: int | None) -> list[Path]:
    """The traces of the ``rtl`` section: the whole suite, or for ``--quick`` ``limit`` small ones, one per
    engine our RTL has (PDP, SDP) in turn."""
    if limit is None:
        return [nv_small]
    dirs = sorted(d for d in nv_small.iterdir() if d.is_dir())
    picked: list[Path] = []
    while len(picked) < limit:
        before = len(picked)
        for prefix in ("pdp_", "sdp_"):
            rest = [d for d in dirs if d.name.startswith(prefix) and d not in picked]
            if rest and len(picked) < limit:
                picked.append(rest[0])
        if len(picked) == before:
            break
    if not picked:
        raise BenchError(f"no pdp_/sdp_ traces in {nv_small}")
    return picked


def build_dut(simulator: str, config: str = "nv_small"):
    """Build our RTL for ``config`` as ``dla trace --target SIMULATOR`` does (same spec, same cache
    directory), so the timed run that follows reuses it; returns the ``tb.runner.Build``."""
    from runtime.suite import TargetSetupError
    from tb.runner import BuildError, SimulatorUnavailable, build
    from tb.suite import builtin_dut

    try:
        return build(builtin_dut(config), simulator)
    except (SimulatorUnavailable, BuildError, TargetSetupError) as exc:
        raise BenchError(f"cannot build our RTL for {simulator}: {exc}") from None


def simulated_rate(run: SuiteRun) -> tuple[int, float, int]:
    """(cycles, testbench seconds, traces) summed over the passing traces of a simulator run."""
    ran = [t for t in run.traces if t.get("status") == "PASS" and "cycles" in t.get("metrics", {})]
    return (sum(int(t["metrics"]["cycles"]) for t in ran), sum(float(t.get("seconds", 0.0)) for t in ran),
            len(ran))


# ---- compile times ----------------------------------------------------------------------------------------
def compile_seconds(model, config: str, repeat: int = 1) -> tuple[float, int]:
    """Seconds to compile an in-memory ONNX model (frontend + passes + codegen, one random calibration
    input) for ``config``, best of ``repeat``; and its DLA operation count."""
    from compiler.driver import compile_graph, random_inputs
    from compiler.frontend import onnx as onnx_frontend

    best, ops = float("inf"), 0
    for _ in range(repeat):
        t0 = time.perf_counter()
        g = onnx_frontend.load(model)
        ld, _, _ = compile_graph(g, config, calib_inputs=random_inputs(g, 1))
        best = min(best, time.perf_counter() - t0)
        ops = sum(len(t.dla.ops) for t in ld.tasks if t.WhichOneof("kind") == "dla")
    return best, ops


def compile_resnet50_seconds(config: str) -> tuple[float, int]:
    """Seconds to compile the generated ResNet-50 (frontend + passes + codegen), and its DLA op count."""
    from regressions.lib.zoo.resnet50 import build_resnet50

    return compile_seconds(build_resnet50(), config)


# ---- regress at 1 and 2 workers ---------------------------------------------------------------------------
@dataclass(frozen=True)
class RegressRun:
    jobs: int
    seconds: float  # the regression's own wall_seconds, else the process wall time
    process_seconds: float
    #: CPU seconds (user + system) of the regression and its workers: cpu_seconds / process_seconds near
    #: 1 with 2 workers means the machine had only one core to spare, whatever the speedup says.
    cpu_seconds: float
    returncode: int
    source: str  # "summary" or "process"
    counts: dict | None = None  # the summary's test counts
    load_average: float | None = None  # 1-minute load average when the run started


def regress_summary(out: Path) -> dict | None:
    """``<out>/latest/summary.json``, else the newest ``<out>/*/summary.json``."""
    latest = out / "latest" / "summary.json"
    found = [latest] if latest.is_file() else sorted(out.glob("*/summary.json"), key=lambda p: p.stat().st_mtime)
    return json.loads(found[-1].read_text()) if found else None


def run_regress(command: str, jobs: int, *, python: str = sys.executable, level: str = "smoke",
                timeout: float = 3600) -> RegressRun:
    """One regression run with ``jobs`` workers into a fresh output directory (discarded afterwards)."""
    with tempfile.TemporaryDirectory(prefix="dla-bench-regress-") as tmp:
        out = Path(tmp) / "out"
        cmd = [tok.format(python=python, level=level, jobs=jobs, out=out) for tok in shlex.split(command)]
        load = _load_average()
        cpu0 = _children_cpu_seconds()
        t0 = time.perf_counter()
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, timeout=timeout)
        except subprocess.TimeoutExpired:
            raise BenchError(f"regress --jobs {jobs} did not finish within {timeout:.0f} s") from None
        process_seconds = time.perf_counter() - t0
        cpu_seconds = _children_cpu_seconds() - cpu0
        summary = regress_summary(out)
        if summary is None:
            tail = (proc.stderr.strip() or proc.stdout.strip()).splitlines()[-3:]
            raise BenchError(f"`{shlex.join(cmd)}` exited {proc.returncode} without {out}/latest/summary.json: "
                             + " | ".join(tail))
    wall = summary.get("wall_seconds")
    counts = summary.get("counts") if isinstance(summary.get("counts"), dict) else None
    if isinstance(wall, (int, float)) and wall > 0:
        return RegressRun(jobs, float(wall), process_seconds, cpu_seconds, proc.returncode, "summary", counts, load)
    return RegressRun(jobs, process_seconds, process_seconds, cpu_seconds, proc.returncode, "process", counts, load)


def _children_cpu_seconds() -> float:
    """User + system CPU seconds of every finished child process (and the children they waited for)."""
    try:
        import resource
    except ImportError:  # not on POSIX
        return 0.0
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _load_average() -> float | None:
    try:
        return round(os.getloadavg()[0], 2)
    except (AttributeError, OSError):
        return None


# ---- sections ---------------------------------------------------------------------------------------------
def section_golden(b: Bench) -> None:
    s, r = b.sizes, b.results
    b.say(f"float64 GEMM {s.gemm_n}^3 ...")
    gemm = gemm_mac_per_s(s.gemm_n, s.repeat)
    r["gemm_mac_per_s"] = gemm
    b.say(f"  {_si(gemm)}MAC/s")
    workloads = r.setdefault("golden_workloads", {})
    for name, make in ENGINES.items():
        wl = make(s)
        workloads[name] = wl.describe
        b.say(f"{wl.describe} ...")
        rate = wl.work / engine_seconds(wl, s.repeat)
        key = f"golden_{name}_mac_per_s" if name.startswith("conv") else f"golden_{name}_elements_per_s"
        r[key] = rate
        r[f"golden_{name}_gemm_ratio"] = rate / gemm
        target = TARGETS.get(f"golden_{name}_gemm_ratio")
        note = f" (target {target[0]} {target[1]})" if target else ""
        b.say(f"  {_si(rate)}{wl.unit}/s, ratio to GEMM {rate / gemm:.3g}{note}")


def _need_traces(b: Bench) -> None:
    if not b.nv_small.is_dir():
        raise BenchError(f"no nv_small traces under {b.traces} (set NVDLA_TRACES or --traces)")


def section_suite(b: Bench) -> None:
    _need_traces(b)
    b.say(f"dla trace nv_small -j {SUITE_JOBS} (golden) ...")
    run = run_trace_suite(b.python, [b.nv_small])
    b.results["nv_small_suite_seconds"] = run.seconds
    b.results["nv_small_suite_summary"] = run.summary
    b.say(f"  {run.seconds:.2f} s: {run.summary} (target < {TARGETS['nv_small_suite_seconds'][1]:g} s)")


def section_rtl(b: Bench) -> None:
    _need_traces(b)
    r = b.results
    paths = rtl_paths(b.nv_small, b.sizes.rtl_traces)
    what = "nv_small" if b.sizes.rtl_traces is None else ", ".join(p.name for p in paths)
    failed: list[str] = []
    for sim in SIMULATORS:
        try:
            b.say(f"{sim}: DUT build (untimed; reused when cached) ...")
            t0 = time.perf_counter()
            built = build_dut(sim)
            r.setdefault("rtl_dut_build", {})[sim] = {"cached": built.cached, "seconds": built.seconds}
            b.say(f"  {built.directory.name}: " + ("cached" if built.cached else f"built in {built.seconds:.1f} s")
                  + f" ({time.perf_counter() - t0:.1f} s)")
            b.say(f"{sim}: dla trace {what} -j {SUITE_JOBS} ...")
            run = run_trace_suite(b.python, paths, sim)
        except BenchError as exc:
            failed.append(f"{sim}: {exc}")
            b.say(f"  {exc}")
            continue
        cycles, sim_seconds, ran = simulated_rate(run)
        r[f"nv_small_{sim}_suite_seconds"] = run.seconds
        r[f"nv_small_{sim}_suite_summary"] = run.summary
        r.setdefault("rtl_cycles_simulated", {})[sim] = cycles
        b.say(f"  {run.seconds:.2f} s: {run.summary}")
        if not ran or sim_seconds <= 0:
            failed.append(f"{sim}: no trace passed, so no simulated rate ({run.summary})")
            continue
        r[f"{sim}_cycles_per_s"] = r[f"rtl_{sim}_cycles_per_s"] = cycles / sim_seconds
        r[f"rtl_{sim}_seconds_per_trace"] = sim_seconds / ran
        b.say(f"  {cycles} cycles in {sim_seconds:.2f} s of simulation over {ran} traces: "
              f"{_si(cycles / sim_seconds)}cycles/s")
    if "verilator_cycles_per_s" in r and "icarus_cycles_per_s" in r:
        r["verilator_icarus_speed_ratio"] = r["verilator_cycles_per_s"] / r["icarus_cycles_per_s"]
        b.say(f"verilator / icarus: {r['verilator_icarus_speed_ratio']:.2f}x")
    if failed:
        raise BenchError("; ".join(failed))


def section_compile(b: Bench) -> None:
    from regressions.lib.zoo import ZOO

    r = b.results
    by_model: dict[str, dict[str, float]] = r.setdefault("compile_zoo_seconds", {})
    for name, build in ZOO.items():
        model = build(0)
        times = by_model.setdefault(name, {})
        for cfg in b.sizes.zoo_configs:
            times[cfg], _ = compile_seconds(model, cfg, repeat=b.sizes.repeat)
        b.say(f"zoo {name}: " + ", ".join(f"{c} {t * 1e3:.0f} ms" for c, t in times.items()))
    if not b.sizes.resnet50_configs:
        return
    from regressions.lib.zoo.resnet50 import build_resnet50

    b.say("ResNet-50-sized ONNX graph ...")
    model = build_resnet50()
    by_config: dict[str, float] = {}
    for cfg in b.sizes.resnet50_configs:
        by_config[cfg], ops = compile_seconds(model, cfg)
        r.setdefault("compile_resnet50_dla_ops", {})[cfg] = ops
        b.say(f"  {cfg}: {by_config[cfg]:.2f} s, {ops} DLA operations")
    r["compile_resnet50_seconds_by_config"] = by_config
    if "nv_small" in by_config:
        r["compile_resnet50_seconds"] = by_config["nv_small"]


def section_imagenet(b: Bench) -> None:
    """The ten classic ImageNet networks: compile seconds and peak RSS per config (16 calibration inputs), and
    golden seconds per ResNet-50 input (``regressions.bench_imagenet``). Quick runs: reduced-width SqueezeNet
    and ResNet-50 on nv_small, no golden run."""
    from regressions.bench_imagenet import measure
    from regressions.lib.zoo.imagenet import IMAGENET

    if b.results.get("quick"):
        b.results.update(measure(["squeezenet", "resnet50"], ("nv_small",), 0.25, 0, say=b.say))
    else:
        b.results.update(measure(sorted(IMAGENET), COMPILE_CONFIGS, 1.0, 2, say=b.say))


def section_regress(b: Bench) -> None:
    r = b.results
    kw = dict(python=b.python, level=b.regress_level, timeout=b.regress_timeout)
    b.say(f"warm-up: regress --level {b.regress_level} --jobs 2 (untimed: fills the DUT build caches) ...")
    t0 = time.perf_counter()
    run_regress(b.regress_cmd, 2, **kw)
    r["regress_warmup"] = True
    b.say(f"  {time.perf_counter() - t0:.1f} s")
    runs: list[RegressRun] = []
    for i in range(b.regress_repeat):
        for jobs in (1, 2):  # interleaved, so a change in machine load hits both alike
            round_note = f" (round {i + 1})" if b.regress_repeat > 1 else ""
            b.say(f"regress --level {b.regress_level} --jobs {jobs}{round_note} ...")
            run = run_regress(b.regress_cmd, jobs, **kw)
            runs.append(run)
            b.say(f"  {run.seconds:.1f} s ({run.source}; process {run.process_seconds:.1f} s, "
                  f"{run.cpu_seconds / max(run.process_seconds, 1e-9):.2f} cores busy, load {run.load_average}, "
                  f"exit {run.returncode}{', ' + _counts(run.counts) if run.counts else ''})")
    best = {jobs: min(x.seconds for x in runs if x.jobs == jobs) for jobs in (1, 2)}
    r["regress_level"] = b.regress_level
    r["regress_seconds_1"], r["regress_seconds_2"] = best[1], best[2]
    r["regress_parallel_speedup"] = best[1] / best[2]
    r["regress_runs"] = [vars(x) for x in runs]
    b.say(f"speedup with 2 workers: {best[1] / best[2]:.2f}x (target >= {TARGETS['regress_parallel_speedup'][1]})")
    if any(x.returncode for x in runs):
        b.say("  note: some regression runs exited non-zero (failures are timed like passes)")


def section_nvdla(b: Bench) -> None:
    from regressions.bench_nvdla import measure

    measure(b, quick=b.sizes.rtl_traces is not None)


def _counts(counts: dict) -> str:
    return ", ".join(f"{v} {k}" for k, v in counts.items() if k != "total" and v)


#: Sections in run order: name -> (what, function).
#: (config, precision) pairs the profiles section compiles the zoo for.
PROFILE_TARGETS = (("nv_small", "int8"), ("nv_full", "int8"), ("nv_full", "int16"))


def section_profiles(b: Bench) -> None:
    """``--profile`` per zoo network, config and precision: DLA operations, the operations using each
    optimisation, and the DMA bytes read and written on golden for one input (``dla run --profile``'s
    counters). Compressed weights and SDP->PDP save traffic; Winograd saves multiplications (2.25x on its
    layers) and reads more weight bytes."""
    import numpy as np

    from compiler.driver import compile_graph
    from compiler.frontend import onnx as onnx_frontend
    from compiler.profiles import PROFILES, optimised_ops
    from regressions.lib.zoo import ZOO
    from runtime.executor import Network
    from runtime.profile import Profile

    table: dict = b.results.setdefault("profiles", {})
    for name, build in ZOO.items():
        model = build(0)
        shape = [d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim]
        x = np.random.default_rng(1).standard_normal((1, *shape[1:])).astype(np.float32)
        for cfg, precision in PROFILE_TARGETS:
            row = table.setdefault(name, {}).setdefault(f"{cfg}/{precision}", {})
            for profile in PROFILES:
                msg, _, _ = compile_graph(onnx_frontend.load(model), cfg, precision=precision, profile=profile)
                prof = Profile()
                Network(msg).run(x, profile=prof)
                t = prof.totals()
                row[profile] = {
                    "dla_ops": sum(len(task.dla.ops) for task in msg.tasks if task.WhichOneof("kind") == "dla"),
                    "dma_read": int(sum(t["read"].values())), "dma_written": int(sum(t["written"].values())),
                    **{k: v for k, v in optimised_ops(msg).items() if v},
                }
            b.say(f"profiles {name} {cfg}/{precision}: " + ", ".join(
                f"{p} {v['dma_read'] + v['dma_written']:,} B" for p, v in row.items()))


SECTIONS: dict[str, tuple[str, Callable[[Bench], None]]] = {
    "golden": ("golden engines vs float64 GEMM", section_golden),
    "suite": ("nv_small trace suite on golden", section_suite),
    "rtl": ("nv_small suite on our RTL, Verilator vs Icarus", section_rtl),
    "compile": ("compile times", section_compile),
    "profiles": ("--profile: DLA operations, optimisations used and DMA bytes per zoo network", section_profiles),
    "imagenet": ("ImageNet networks: compile time, peak memory, golden ResNet-50 per input", section_imagenet),
    "nvdla": ("NVDLA's nv_small RTL: our testbench vs NVDLA's C++ harness", section_nvdla),
    "regress": ("regression wall time at 1 and 2 workers", section_regress),
}
#: Left out of ``--quick`` runs unless named in ``--only``.
SLOW_SECTIONS = ("regress", "nvdla", "imagenet")


def select_sections(only: list[str], skip: list[str], quick: bool) -> list[str]:
    unknown = sorted(set(only + skip) - set(SECTIONS))
    if unknown:
        raise SystemExit(f"bench: unknown section {', '.join(unknown)} (known: {', '.join(SECTIONS)})")
    names = [n for n in SECTIONS if not only or n in only]
    if quick and not only:
        names = [n for n in names if n not in SLOW_SECTIONS]
    return [n for n in names if n not in skip]


# ---- results ------------------------------------------------------------------------------------------------
def _blas() -> dict:
    info: dict = {}
    try:
        deps = np.show_config(mode="dicts").get("Build Dependencies", {})
        blas = deps.get("blas", {})
        info = {"name": blas.get("name"), "version": blas.get("version")}
    except Exception:  # noqa: BLE001 - numpy < 1.26 has no dict mode; the BLAS name is optional
        pass
    try:
        from threadpoolctl import threadpool_info

        pools = [p for p in threadpool_info() if p.get("user_api") == "blas"]
        if pools:
            info.update(threads=pools[0].get("num_threads"), architecture=pools[0].get("architecture"),
                        internal_api=pools[0].get("internal_api"))
    except ImportError:
        pass
    return info


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def _commit() -> str | None:
    try:
        proc = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, cwd=REPO, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return proc.stdout.strip() or None


def machine_info() -> dict:
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:
        usable = os.cpu_count()
    try:
        load = [round(x, 2) for x in os.getloadavg()]
    except OSError:
        load = None
    return {
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "cpus": os.cpu_count(), "cpus_usable": usable, "cpu": _cpu_model(), "load_average": load,
        "python": sys.version.split()[0], "implementation": platform.python_implementation(),
        "numpy": np.__version__, "blas": _blas(), "platform": platform.platform(), "commit": _commit(),
    }


def targets_report(results: dict) -> dict:
    """Each target with its measured value; ``met`` is None when not measured, or in a quick run (whose
    smaller workloads are not the ones the targets are set for)."""
    out = {}
    for key, (op, value) in TARGETS.items():
        measured = results.get(key)
        judged = isinstance(measured, (int, float)) and not results.get("quick")
        out[key] = {"op": op, "value": value, "measured": measured,
                    "met": _COMPARE[op](measured, value) if judged else None}
    return out


def write_json_atomic(path: Path, doc: dict) -> None:
    """Write ``doc`` so that a reader (the regression report) never sees a partial file (dlaio)."""
    write_atomic(path, json.dumps(doc, indent=2) + "\n")


def append_history(path: Path, doc: dict) -> list[dict]:
    """Append ``doc`` as one line of ``path``; returns every readable run recorded there. Checked like
    every output first (appending to a FIFO would block, to a device would lose the line)."""
    check_output(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as f:
        f.write(json.dumps(doc, separators=(",", ":")) + "\n")
    runs = []
    for line in path.read_text().splitlines():
        try:
            runs.append(json.loads(line))
        except json.JSONDecodeError:
            continue  # a line cut by a concurrent writer
    return runs


def _outputs(args: argparse.Namespace) -> list[Path]:
    """The results, the history and (unless --no-plot) the plots."""
    plots = [] if args.no_plot else [args.out.with_suffix(".png"), args.out.parent / "history.png"]
    return [args.out, args.out.parent / "history.jsonl", *plots]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m regressions.bench", description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=REPO / "build" / "bench" / "results.json",
                    help="results JSON; the PNG, history.jsonl and history.png go beside it")
    ap.add_argument("--traces", type=Path,
                    default=Path(os.environ.get("NVDLA_TRACES", REPO.parent / "shared" / "nvdla" / "traces")))
    ap.add_argument("--quick", action="store_true", help="small workloads, no regress section")
    ap.add_argument("--only", default="", metavar="S,..", help=f"run only these sections ({', '.join(SECTIONS)})")
    ap.add_argument("--skip", default="", metavar="S,..", help="leave these sections out")
    ap.add_argument("--python", default=sys.executable, help="interpreter for the subprocesses (dla, regress)")
    ap.add_argument("--regress-cmd", default=DEFAULT_REGRESS_CMD,
                    help="regression command; placeholders {python} {level} {jobs} {out} (default: %(default)s)")
    ap.add_argument("--regress-level", default="smoke")
    ap.add_argument("--regress-repeat", type=int, default=1, help="timed rounds at 1 and 2 workers (best of)")
    ap.add_argument("--regress-timeout", type=float, default=3600.0, help="seconds per regression run")
    ap.add_argument("--no-plot", action="store_true")
    args = ap.parse_args(argv)
    try:  # before the sections run (minutes): every file the bench writes must be writable
        for out in _outputs(args):
            check_output(out)
    except OutputError as exc:
        print(f"bench: {exc}", file=sys.stderr)
        return 2

    split = lambda s: [x.strip() for x in s.split(",") if x.strip()]  # noqa: E731
    names = select_sections(split(args.only), split(args.skip), args.quick)
    results: dict = {"machine": machine_info(), "quick": args.quick, "sections": names}
    bench = Bench(QUICK if args.quick else FULL, args.traces, args.python, args.regress_cmd, args.regress_level,
                  max(1, args.regress_repeat), args.regress_timeout, results)
    errors: dict[str, str] = {}
    timings: dict[str, float] = {}
    started = time.perf_counter()
    for name in names:
        what, run = SECTIONS[name]
        bench.section = name
        bench.say(f"{what}{' (quick)' if args.quick else ''}")
        t0 = time.perf_counter()
        try:
            run(bench)
        except Exception as exc:  # noqa: BLE001 - one section failing must not lose the others
            errors[name] = f"{type(exc).__name__}: {exc}"
            bench.say(f"FAILED: {errors[name]}")
        timings[name] = time.perf_counter() - t0
        bench.say(f"done in {timings[name]:.1f} s")
    results["section_seconds"] = timings
    results["machine"]["load_average_end"] = _load_average()
    results["bench_seconds"] = time.perf_counter() - started
    results["targets"] = targets_report(results)
    results["errors"] = errors

    unwritten: OutputError | None = None
    try:  # a file that cannot be written (disk full) still lets the figures below be printed
        write_json_atomic(args.out, results)
        print(f"wrote {args.out}")
        history = append_history(args.out.parent / "history.jsonl", results)
        if not args.no_plot:
            from regressions.bench_plot import plot, plot_history

            png = args.out.with_suffix(".png")
            plot(results, png)
            print(f"wrote {png}")
            full_runs = [h for h in history if not h.get("quick")]
            if len(full_runs) >= 2:
                plot_history(full_runs, args.out.parent / "history.png")
                print(f"wrote {args.out.parent / 'history.png'} ({len(full_runs)} runs)")
    except OutputError as exc:
        unwritten = exc
    for key, t in results["targets"].items():
        if isinstance(t["measured"], (int, float)):
            verdict = "quick run, not judged" if t["met"] is None else ("met" if t["met"] else "MISSED")
            print(f"  {key} = {t['measured']:.3g} (target {t['op']} {t['value']:g}): {verdict}")
    if errors:
        print("sections that could not measure: " + "; ".join(f"{k}: {v}" for k, v in errors.items()), file=sys.stderr)
    if unwritten is not None:
        print(f"bench: cannot write {unwritten.path}: {unwritten.reason}", file=sys.stderr)
        return 2
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
