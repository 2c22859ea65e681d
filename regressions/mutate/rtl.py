"""``make mutate TARGET=rtl``: mutation campaign on our RTL (``rtl/``), one unit per file.

Units are the files' stems (``dla_pdp``, ``dla_sdp_x``, ``dla_axi_rd`` ...), leaving out ``rtl/generated/`` (the
register file is generated from NVDLA's manual and checked against it by its own tests) and the test engine
(``dla_test_engine.v``, a stand-in engine for the interface tests). Mutants come from
``regressions.mutate.verilog`` and are applied one at a time: each worker copy of the tree gets the mutated file,
so every test of the pool, whatever it builds (tb_nvdla.v vector benches, cocotb benches, any config or
define), builds the mutant. Icarus builds of our RTL take about a second, so per-mutant builds are cheap and
keep the tests unchanged; schemata (one build, ``+mut=K``) would only reach the cocotb benches.

Each mutant is built first (the cocotb bench's Icarus build of nv_small, which the tests then reuse): one the
simulator refuses is ``invalid`` (not counted).
The pool is every Icarus simulation test of our RTL (``POOL``: vector benches of the engines, the register
file and the engine interface; NVDLA's traces, golden-vs-RTL layers, networks and loadables under cocotb), per
unit the tests that build it (the PDP benches do not run SDP units, the test-engine benches replace both
engines), fastest first, ``pytest -x``; Verilator and lint tests are left out (a lint warning is not a
behaviour). The tests' durations come from one run of the pool in a fresh copy (cold builds), redone when the
RTL or a pool test changes.
"""
from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from regressions.mutate.campaign import Result, _copy_tree, run_one, shared_env
from regressions.mutate.mutants import Mutant, file_hash, mutated_source
from regressions.mutate.select import _durations

#: Pool test files (Icarus simulations of our RTL); new ``test_*mutkill*.py`` files in tests/rtl and
#: regressions/rtl join it (``pool_files``).
POOL = ("tests/rtl/test_engine_sim.py", "tests/rtl/test_regfile_sim.py", "regressions/rtl/test_pdp_rtl.py",
        "regressions/rtl/test_sdp_rtl.py", "regressions/rtl/test_rtl_vs_golden.py",
        "regressions/rtl/test_rtl_traces.py", "regressions/rtl/test_rtl_networks.py",
        "regressions/rtl/test_rtl_nvdla.py")
#: test file -> the units it can reach (None: every unit)
INFRA_ONLY = ("tests/rtl/test_engine_sim.py", "tests/rtl/test_regfile_sim.py")
PDP_UNITS = ("dla_pdp",)
#: Environment that would resize or redirect the pool's tests (regression levels, coverage, random timing):
#: a campaign runs them as ``make test`` does, whatever its caller's level.
SCRUB = ("DLA_RTL_DIFF_EXAMPLES", "DLA_FUZZ_EXAMPLES", "DLA_E2E_SAMPLES", "DLA_NVDLA_RTL", "DLA_COVERAGE",
         "DLA_COVERAGE_DIR", "DLA_RTL_COVERAGE_DIR", "DLA_SLOW_TESTS", "DLA_IMAGENET", "DLA_NV_FULL_RTL",
         "DLA_ROBUSTNESS", "ROBUSTNESS_EXAMPLES", "DLA_AXI_RANDOM", "FUZZ_SEED", "WAVES", "DLA_SIM_BUILD",
         "DLA_DUT", "DLA_SIM_PLUSARGS", "DLA_NVDLA_NV_SMALL_FILELIST", "DLA_MUTATE")


def scrub_environment() -> None:
    for var in SCRUB:
        os.environ.pop(var, None)


def rtl_files(root: Path, unit: str | None = None) -> list[str]:
    files = sorted(str(p.relative_to(root)) for p in [*(root / "rtl").glob("*.v"), *(root / "rtl" / "engines").glob("*.v")]
                   if p.name != "dla_test_engine.v")
    if unit is not None:
        files = [f for f in files if Path(f).stem == unit]
        if not files:
            raise ValueError(f"no rtl unit {unit!r}")
    return files


def pool_files(root: Path) -> list[str]:
    extra = sorted(str(p.relative_to(root)) for d in ("tests/rtl", "regressions/rtl") for p in (root / d).glob("test_*mutkill*.py")
                   if "nvdla" not in p.name)
    return [*POOL, *extra]


def reaches(test_file: str, unit: str) -> bool:
    """Whether tests of ``test_file`` build unit ``unit``."""
    engine = unit in PDP_UNITS or unit.startswith("dla_sdp")
    if test_file in INFRA_ONLY:
        return not engine
    if test_file.endswith("test_pdp_rtl.py"):
        return not unit.startswith("dla_sdp")
    if test_file.endswith("test_sdp_rtl.py"):
        return unit not in PDP_UNITS
    return True


@dataclass
class PoolMap:
    """unit -> the pool's test node ids reaching it; node id -> seconds. Duck-types ``CoverageMap``."""

    units: dict[str, list[str]]
    seconds: dict[str, float]

    def tests_for(self, path: str, line: int, limit: int = 10**9) -> list[str]:
        tests = self.units.get(Path(path).stem, [])
        return sorted(tests, key=lambda t: (self.seconds.get(t, 1e9), t))[:limit]

    def save(self, path: Path) -> None:
        path.write_text(json.dumps({"units": self.units, "seconds": self.seconds}, indent=1))

    @classmethod
    def load(cls, path: Path) -> "PoolMap":
        d = json.loads(path.read_text())
        return cls(d["units"], d["seconds"])


def stamp(root: Path) -> str:
    files = [*rtl_files(root), *pool_files(root)]
    return hashlib.sha256(repr({f: file_hash(root / f) for f in files}).encode()).hexdigest()[:16]


def _env(work: Path, root: Path) -> dict[str, str]:
    return dict(os.environ, PYTHONPATH=str(work), PYTHONDONTWRITEBYTECODE="1", DLA_SIM_WORKERS="1",
                DLA_RTL_DIFF_SIM="icarus", **shared_env(root))


def build_pool_map(root: Path, out: Path, jobs: int = 2, say=print) -> PoolMap:
    """Collect the pool's Icarus tests and time them once in a fresh copy of the tree (cold builds)."""
    work = out / "work" / "map"
    _copy_tree(root, work)
    env = _env(work, root)
    error = prebuild(root, work)
    if error:
        raise RuntimeError(f"our RTL does not build: {error}")
    files = pool_files(root)
    proc = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
                           "-o", "addopts=", *files], cwd=work, env=env, capture_output=True, text=True)
    nodes = [ln.strip() for ln in proc.stdout.splitlines() if "::" in ln and "verilator" not in ln.lower()]
    if not nodes:
        raise RuntimeError(f"no pool tests collected: {(proc.stderr or proc.stdout).strip()[-300:]}")
    junit = out / "pool-junit.xml"
    say(f"pool: timing {len(nodes)} Icarus tests of our RTL once (cold builds) ...")
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-o", "addopts=",
                           *(["-n", str(jobs)] if jobs > 1 else []), f"--junitxml={junit}", *nodes],
                          cwd=work, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        failed = [ln for ln in proc.stdout.splitlines() if ln.startswith(("FAILED", "ERROR"))][:3]
        raise RuntimeError(f"the rtl pool fails without any mutant (exit {proc.returncode}): {'; '.join(failed)}")
    old = os.getcwd()
    try:
        os.chdir(work)
        seconds = _durations(junit)
    finally:
        os.chdir(old)
    seconds = {t: s for t, s in seconds.items() if t in set(nodes)} or {t: 1.0 for t in nodes}
    units = {Path(f).stem: [t for t in nodes if reaches(t.split("::")[0], Path(f).stem)] for f in rtl_files(root)}
    return PoolMap(units, seconds)


#: Builds the cocotb bench's DUT (our RTL for nv_small, Icarus) in a worker copy: the mutant's compile check, and
#: the tests then find the build made (one of them checks that a refused network prints one line only).
PREBUILD = """
import sys
from tb.runner import BuildError, build
from tb.suite import RtlOptions, dut_for
try:
    build(dut_for("nv_small", RtlOptions()), "icarus")
except BuildError as exc:
    print("; ".join(exc.errors[:2]) or "build failed")
    sys.exit(3)
"""


def prebuild(root: Path, work: Path) -> str:
    """'' when our RTL in ``work`` builds under Icarus for nv_small (the build is kept), else the first error."""
    proc = subprocess.run([sys.executable, "-c", PREBUILD], cwd=work, env=_env(work, root), capture_output=True,
                          text=True, timeout=600)
    if proc.returncode == 0:
        return ""
    return (proc.stdout.strip() or (proc.stderr.strip().splitlines() or ["build failed"])[-1])[:200]


def run_rtl(root: Path, work: Path, m: Mutant, cmap: PoolMap) -> Result:
    """One mutant: compile check, then ``campaign.run_one`` (the unit's tests, fastest first, -x)."""
    mutated = mutated_source(root, m)
    if mutated is None:
        return Result(m.id, m.path, m.unit, m.operator, m.line, "not_applied", 0.0, 0, "", file_hash(root / m.path))
    target = work / m.path
    original = target.read_text()
    try:
        target.write_text(mutated)
        error = prebuild(root, work)
    finally:
        target.write_text(original)
    if error:
        return Result(m.id, m.path, m.unit, m.operator, m.line, "invalid", 0.0, 0, error, file_hash(root / m.path))
    return run_one(root, work, m, cmap)  # (campaign() set DLA_SIM_WORKERS=1, DLA_RTL_DIFF_SIM=icarus)


def campaign(root: Path, args, say=print) -> tuple[list[Mutant], dict[str, Result], Path, Path]:
    """Run the rtl campaign of ``args`` (``regressions.mutate.__main__``); (mutants, results, report root, out)."""
    from regressions.mutate.campaign import run_campaign
    from regressions.mutate.mutants import sample
    from regressions.mutate.verilog import enumerate_mutants

    files = rtl_files(root, args.unit)
    out = args.out or root / "build" / "mutate" / "rtl"
    out.mkdir(parents=True, exist_ok=True)
    map_path, stamp_path = out / "pool-map.json", out / "pool-map.stamp"
    current = stamp(root)
    if args.rebuild_map or not map_path.is_file() or not stamp_path.is_file() or stamp_path.read_text() != current:
        cmap = build_pool_map(root, out, jobs=args.jobs, say=say)
        cmap.save(map_path)
        stamp_path.write_text(current)
    else:
        cmap = PoolMap.load(map_path)
    scrub_environment()
    os.environ["DLA_SIM_WORKERS"] = "1"  # one simulation per worker (run_one's pytest inherits it)
    os.environ["DLA_RTL_DIFF_SIM"] = "icarus"
    mutants = sample(enumerate_mutants(root, files), args.n, args.seed)
    results = run_campaign(root, mutants, cmap, out, jobs=args.jobs, say=say, map_id=current, runner=run_rtl)
    return mutants, results, root, out
