"""``make mutate TARGET=nvdla-rtl``: mutation campaign on NVDLA's nv_small datapath, one Verilator build for all.

Units are the directories under ``vmod/nvdla`` of the datapath: cdma, csc, cmac, cacc, sdp, pdp, cdp (their
register files and clock gating left out: ``SKIP``). Mutants come from ``regressions.mutate.verilog`` with the
file list's defines (code under a false or undecidable conditional is never mutated), sampled evenly across units.

Mutant schemata: a copy of the nv_small tree (``<out>/tree``, never ``../shared``) holds every sampled mutant,
each guarded by ``mut_id == K`` (``mut_id`` from the ``+mut=K`` plusarg; 0: the original design), with a file
list pointing at it (``DLA_NVDLA_NV_SMALL_FILELIST``). One Verilator build (about 2 minutes, under
``<out>/sim``, ``DLA_SIM_BUILD``) serves the campaign: each run passes ``+mut=K`` (``DLA_SIM_PLUSARGS``,
``tb.runner``). The copy is linted first; a mutant Verilator refuses is dropped (``invalid``) and the copy redone.
Before any mutant, a baseline at ``+mut=0`` plays every trace (each must pass or be N/A as on the original:
70 pass) and the suite pool (all must pass), which also times them.

Two pools per mutant, fastest first, each stopping at the first failure:

a. NVDLA's own nv_small traces that use the unit (they write its registers: ``trace_units``), in one
   simulation; a trace whose status differs from the baseline's (FAIL, a hang past the tb's budget, ERROR) kills;
b. only when the traces miss it: our suites on that DUT (``regressions/rtl/test_nvdla_rtl_*.py`` at ``make
   test`` sizes), the tests that reach the unit (``SUITE_UNITS``), ``pytest -x``.

Each result records ``killed_by_traces`` / ``killed_by_suite``; the report counts the mutants our suites kill that
the traces alone miss.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from regressions.mutate.campaign import Result, shared_env
from regressions.mutate.mutants import Mutant, file_hash, sample
from regressions.mutate.select import _durations

ROOT = Path(__file__).resolve().parents[2]
UNITS = ("cdma", "csc", "cmac", "cacc", "sdp", "pdp", "cdp")
#: Files of the units that are not datapath: register files and second-level clock gating.
SKIP = re.compile(r"(_reg|_REG_single|_REG_dual|_regfile|_single_reg|_dual_reg|_slcg)\.v$")
#: Register-unit prefixes (``runtime.trace`` names, ``NVDLA_PDP_RDMA.D_...``) written by a trace using the unit.
REG_UNITS = {"cdma": ("NVDLA_CDMA",), "csc": ("NVDLA_CSC",), "cmac": ("NVDLA_CMAC_A", "NVDLA_CMAC_B"),
             "cacc": ("NVDLA_CACC",), "sdp": ("NVDLA_SDP", "NVDLA_SDP_RDMA"),
             "pdp": ("NVDLA_PDP", "NVDLA_PDP_RDMA"), "cdp": ("NVDLA_CDP", "NVDLA_CDP_RDMA")}
#: Our suites on NVDLA's RTL: the pool (b) test files.
SUITE = ("regressions/rtl/test_nvdla_rtl_vs_golden.py", "regressions/rtl/test_nvdla_rtl_cbuf.py",
         "regressions/rtl/test_nvdla_rtl_pdp_rules.py", "regressions/rtl/test_nvdla_rtl_cdp_rules.py",
         "regressions/rtl/test_nvdla_rtl_found.py", "regressions/rtl/test_nvdla_rtl_networks.py")
CONV = ("cdma", "csc", "cmac", "cacc", "sdp")  # a convolution's output leaves through SDP
#: node-id fragment -> the units a test of that name reaches (first match wins; no match: every unit)
SUITE_UNITS = (("[conv]", CONV), ("cbuf", CONV), ("[sdp]", ("sdp",)), ("sdp_to_pdp", ("sdp", "pdp")),
               ("[pdp]", ("pdp",)), ("pdp_rules", ("pdp",)), ("edge_divisor_pools", ("pdp",)),
               ("[cdp]", ("cdp",)), ("cdp_rules", ("cdp",)))
CONFIG = "nv_small"
#: Mutants in a campaign without ``-n``.
DEFAULT_N = 300


def nvdla_root() -> Path:
    """NVDLA's nv_small RTL as shipped (``NVDLA_RTL`` moves the root, as ``tb.duts``): the files mutated."""
    env = os.environ.get("NVDLA_RTL", "").strip()
    base = Path(env).expanduser() if env else ROOT.parent / "shared" / "nvdla" / "rtl"
    return (base / "nv_small").resolve()


def nvdla_files(root: Path, unit: str | None = None) -> list[str]:
    if unit is not None and unit not in UNITS:
        raise ValueError(f"no nvdla-rtl unit {unit!r} (units: {', '.join(UNITS)})")
    out = []
    for u in UNITS if unit is None else (unit,):
        out += sorted(str(p.relative_to(root)) for p in (root / "vmod" / "nvdla" / u).glob("*.v") if not SKIP.search(p.name))
    if not out:
        raise ValueError(f"no NVDLA RTL under {root} (set NVDLA_RTL)")
    return out


def trace_units(cfg: Path) -> set[str]:
    """The units a trace uses: those whose registers it writes."""
    from golden import get_config
    from golden.regs import register_map
    from runtime.trace import RegWrite, parse_cfg

    trace = parse_cfg(cfg, register_map(get_config(CONFIG).address_map))
    written = {c.name.split(".")[0] for c in trace.commands if isinstance(c, RegWrite)}
    return {u for u, prefixes in REG_UNITS.items() if written & set(prefixes)}


def suite_units(node: str) -> tuple[str, ...]:
    for fragment, units in SUITE_UNITS:
        if fragment in node:
            return units
    return UNITS


# ---- the schemata tree ---------------------------------------------------------------------------------------


@dataclass
class Tree:
    directory: Path
    filelist: Path
    #: mutant id -> K
    selectors: dict[str, int]
    #: mutant id -> why Verilator refused it
    invalid: dict[str, str]


def _tree_key(root: Path, mutants: list[Mutant]) -> str:
    from regressions.mutate import verilog

    parts = sorted(m.id for m in mutants) + [file_hash(Path(verilog.__file__))]
    parts += [f"{p}:{file_hash(root / p)}" for p in sorted({m.path for m in mutants})]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


def write_tree(root: Path, out: Path, mutants: list[Mutant], invalid: dict[str, str]) -> Tree:
    """A copy of nv_small under ``out/tree`` with ``mutants`` (minus ``invalid``) as schemata."""
    from regressions.mutate import verilog

    tree = out / "tree"
    if tree.exists():
        shutil.rmtree(tree)
    shutil.copytree(root, tree, ignore=shutil.ignore_patterns(".git"))
    live = [m for m in mutants if m.id not in invalid]
    selectors = {m.id: k for k, m in enumerate(sorted(live, key=lambda m: m.id), start=1)}
    by_file: dict[str, dict[Mutant, int]] = {}
    for m in live:
        by_file.setdefault(m.path, {})[m] = selectors[m.id]
    for rel, chosen in by_file.items():
        (tree / rel).write_text(verilog.schemata(root, rel, chosen))
    filelist = tree / "nv_small.f"
    (tree / "mutants.json").write_text(json.dumps({"selectors": selectors, "invalid": invalid}, indent=1))
    return Tree(tree, filelist, selectors, dict(invalid))


def lint(tree: Path) -> list[tuple[str, int, str]]:
    """Verilator's errors on the tree: (file relative to the tree, line, message)."""
    from tb.vectors.sim import verilator_env

    env = verilator_env()
    if env is None:
        raise RuntimeError("verilator is not installed")
    proc = subprocess.run(["verilator", "--lint-only", "-Wno-fatal", "-Wno-lint", "-Wno-style", "-f", "nv_small.f"],
                          cwd=tree, env=env, capture_output=True, text=True, timeout=1800)
    errors = []
    for line in (proc.stderr + proc.stdout).splitlines():
        m = re.match(r"%Error(?:-[\w-]+)?: ([^:\s]+):(\d+)(?::\d+)?: ?(.*)", line)
        if m:
            path = Path(m.group(1))
            rel = str(path.resolve().relative_to(tree.resolve())) if path.is_absolute() else str(path)
            errors.append((rel, int(m.group(2)), m.group(3)))
    if proc.returncode != 0 and not errors:
        raise RuntimeError(f"verilator lint failed without located errors: {(proc.stderr or proc.stdout)[-500:]}")
    return errors


def prepare_tree(root: Path, out: Path, mutants: list[Mutant], say=print) -> Tree:
    """The schemata tree of ``mutants`` (reused when unchanged), linted clean: mutants on a line Verilator
    refuses are dropped as invalid, and the tree redone, until it lints."""
    stamp = out / "tree.stamp"
    key = _tree_key(root, mutants)
    manifest = out / "tree" / "mutants.json"
    if stamp.is_file() and stamp.read_text() == key and manifest.is_file():
        data = json.loads(manifest.read_text())
        return Tree(out / "tree", out / "tree" / "nv_small.f", data["selectors"], data["invalid"])
    invalid: dict[str, str] = {}
    for attempt in range(20):
        tree = write_tree(root, out, mutants, invalid)
        say(f"schemata: {len(tree.selectors)} mutants in {out / 'tree'}; linting with Verilator ...")
        start = time.perf_counter()
        errors = lint(tree.directory)
        say(f"schemata: lint {time.perf_counter() - start:.0f} s, {len(errors)} errors")
        if not errors:
            stamp.write_text(key)
            return tree
        bad = 0
        for rel, line, msg in errors:
            for m in mutants:
                if m.path == rel and m.id not in invalid and _touches(root, m, line):
                    invalid[m.id] = f"verilator: {msg}"[:200]
                    bad += 1
        if not bad:
            raise RuntimeError("the schemata tree does not lint and no mutant is to blame: "
                               + "; ".join(f"{r}:{ln}: {msg}" for r, ln, msg in errors[:5]))
    raise RuntimeError("the schemata tree still does not lint after 20 rounds")


def _touches(root: Path, m: Mutant, line: int) -> bool:
    """Whether mutant ``m``'s edits cover ``line`` of its file."""
    from regressions.mutate import verilog

    found = verilog._find(root, m)
    if found is None:
        return m.line == line
    src, site, _ = found
    for e in [site.edit, *site.more]:
        a, b = src.count("\n", 0, e.start) + 1, src.count("\n", 0, e.end) + 1
        if a <= line <= b:
            return True
    return False


# ---- pools -------------------------------------------------------------------------------------------------


@dataclass
class Pools:
    """Per unit: NVDLA's traces (names) and our suite's tests (node ids), fastest first; the baseline."""

    traces: dict[str, list[str]]
    trace_paths: dict[str, str]
    baseline: dict[str, str]  # trace -> status at +mut=0
    suite: dict[str, list[str]]
    seconds: dict[str, float]  # trace name or node id -> seconds at +mut=0

    def tests_for(self, path: str, line: int, limit: int = 10**9) -> list[str]:
        from regressions.mutate.verilog import unit_of

        u = unit_of(path)
        return [*self.traces.get(u, []), *self.suite.get(u, [])][:limit]

    def save(self, path: Path) -> None:
        path.write_text(json.dumps(self.__dict__, indent=1))

    @classmethod
    def load(cls, path: Path) -> "Pools":
        return cls(**json.loads(path.read_text()))


def _env(tree: Tree, out: Path, k: int) -> dict[str, str]:
    from regressions.mutate.rtl import SCRUB

    env = {k: v for k, v in os.environ.items() if k not in SCRUB}  # make test's sizes, whatever the level
    env.update(shared_env(ROOT))
    env.update({"DLA_NVDLA_NV_SMALL_FILELIST": str(tree.filelist), "DLA_SIM_PLUSARGS": f"+mut={k}",
                "DLA_SIM_BUILD": str(out / "sim"), "DLA_SIM_WORKERS": "1", "PYTHONDONTWRITEBYTECODE": "1"})
    return env


def play(names: list[str], paths: dict[str, str], baseline: dict[str, str] | None, filelist: str) -> dict:
    """Play traces in one simulation (this process's ``DLA_SIM_PLUSARGS`` selects the mutant); stop at the
    first status differing from ``baseline`` (None: play all). Returns statuses, seconds and the first miss."""
    from tb.suite import run_suite

    jobs = [(paths[n], CONFIG, "verilator") for n in names]
    statuses, seconds, first = {}, {}, None
    gen = run_suite(jobs, workers=1, options={"filelist": filelist}, report=lambda _m: None)
    try:
        for name, o in zip(names, gen):
            statuses[name], seconds[name] = o.status, round(o.seconds, 2)
            if baseline is not None and o.status != baseline.get(name):
                first = {"trace": name, "status": o.status, "detail": o.detail[:300]}
                break
    finally:
        gen.close()
    return {"statuses": statuses, "seconds": seconds, "first": first}


def _play_subprocess(tree: Tree, out: Path, k: int, names: list[str], pools_or_paths, baseline, timeout: float):
    paths = pools_or_paths
    spec = out / "work" / f"play-{k}-{os.getpid()}-{time.monotonic_ns()}.json"
    spec.parent.mkdir(parents=True, exist_ok=True)
    spec.write_text(json.dumps({"names": names, "paths": paths, "baseline": baseline, "filelist": str(tree.filelist)}))
    try:
        proc = subprocess.run([sys.executable, "-m", "regressions.mutate.nvdla", "--play", str(spec)], cwd=ROOT,
                              env=_env(tree, out, k), capture_output=True, text=True, timeout=timeout)
    finally:
        spec.unlink(missing_ok=True)
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith("{"):
            return json.loads(line)
    raise RuntimeError(f"trace player failed (exit {proc.returncode}): {(proc.stderr or proc.stdout)[-400:]}")


def build_pools(root: Path, tree: Tree, out: Path, jobs: int, say=print) -> Pools:
    """Baseline at ``+mut=0``: every trace using a unit and the suite, timed; fails if any does not pass."""
    from runtime.trace import find_traces

    traces_root = Path(shared_env(ROOT)["NVDLA_TRACES"]) / CONFIG
    cfgs = find_traces(traces_root)
    paths = {c.parent.name: str(c) for c in cfgs}
    used = {c.parent.name: trace_units(c) for c in cfgs}
    names = sorted(n for n in paths if used[n])
    say(f"baseline: {len(names)} NVDLA traces at +mut=0 (the schemata build is made first: ~2-3 min) ...")
    half = [names[i::max(1, jobs)] for i in range(max(1, jobs))]
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=max(1, jobs)) as ex:
        parts = list(ex.map(lambda part: _play_subprocess(tree, out, 0, part, paths, None, 7200), [h for h in half if h]))
    statuses = {n: s for p in parts for n, s in p["statuses"].items()}
    seconds = {n: s for p in parts for n, s in p["seconds"].items()}
    broken = {n: s for n, s in statuses.items() if s not in ("PASS", "N/A")}
    if broken or len(statuses) != len(names):
        raise RuntimeError(f"the schemata build at +mut=0 does not pass NVDLA's traces: {broken or 'missing results'}")
    say(f"baseline: traces {sum(s == 'PASS' for s in statuses.values())} pass, "
        f"{sum(s == 'N/A' for s in statuses.values())} N/A")
    traces = {u: sorted((n for n in names if u in used[n] and statuses[n] == "PASS"), key=lambda n: (seconds[n], n))
              for u in UNITS}
    # our suite at +mut=0, timed
    env = _env(tree, out, 0)
    proc = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
                           "-o", "addopts=", *SUITE], cwd=ROOT, env=env, capture_output=True, text=True)
    nodes = [ln.strip() for ln in proc.stdout.splitlines() if "::" in ln]
    junit = out / "suite-junit.xml"
    say(f"baseline: our suite ({len(nodes)} tests) at +mut=0 ...")
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-o", "addopts=",
                           *(["-n", str(jobs)] if jobs > 1 else []), f"--junitxml={junit}", *nodes],
                          cwd=ROOT, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        failed = [ln for ln in proc.stdout.splitlines() if ln.startswith(("FAILED", "ERROR"))][:3]
        raise RuntimeError(f"our suite fails on the schemata build at +mut=0 (exit {proc.returncode}): {failed}")
    durations = _durations(junit)
    seconds.update({n: durations.get(n, 60.0) for n in nodes})
    suite = {u: sorted((n for n in nodes if u in suite_units(n)), key=lambda n: (seconds[n], n)) for u in UNITS}
    return Pools(traces, paths, statuses, suite, seconds)


# ---- one mutant --------------------------------------------------------------------------------------------


def make_runner(tree: Tree, out: Path):
    def run(root: Path, work: Path, m: Mutant, pools: Pools) -> Result:
        digest = file_hash(root / m.path)

        def result(outcome: str, seconds: float, tests: int, killer: str = "", traces=None, suite=None) -> Result:
            return Result(m.id, m.path, m.unit, m.operator, m.line, outcome, round(seconds, 2), tests, killer,
                          digest, killed_by_traces=traces, killed_by_suite=suite)

        if m.id in tree.invalid:
            return result("invalid", 0.0, 0, tree.invalid[m.id])
        k = tree.selectors[m.id]
        start = time.perf_counter()
        names = pools.traces.get(m.unit, [])
        if names:
            budget = 5 * sum(pools.seconds.get(n, 30.0) for n in names) + 120
            try:
                played = _play_subprocess(tree, out, k, names, pools.trace_paths, pools.baseline, budget)
            except subprocess.TimeoutExpired:
                return result("timeout", time.perf_counter() - start, len(names), "traces: over the time budget",
                              traces=True)
            if played["first"] is not None:
                f = played["first"]
                return result("killed", time.perf_counter() - start, len(played["statuses"]),
                              f"trace {f['trace']}: {f['status']} {f['detail']}"[:300], traces=True)
        tests = pools.suite.get(m.unit, [])
        if not tests:
            return result("survived", time.perf_counter() - start, len(names), traces=False, suite=False)
        budget = 5 * sum(pools.seconds.get(t, 60.0) for t in tests) + 180
        cmd = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", "-o", "addopts=", *tests]
        try:
            proc = subprocess.run(cmd, cwd=ROOT, env=_env(tree, out, k), capture_output=True, text=True,
                                  timeout=budget)
        except subprocess.TimeoutExpired:
            return result("timeout", time.perf_counter() - start, len(names) + len(tests), "suite: over the time budget",
                          traces=False, suite=True)
        seconds = time.perf_counter() - start
        if proc.returncode == 0:
            return result("survived", seconds, len(names) + len(tests), traces=False, suite=False)
        from regressions.mutate.campaign import _killer

        killer = _killer(proc.stdout) or f"pytest exit {proc.returncode}"
        return result("killed" if proc.returncode == 1 else "error", seconds, len(names) + len(tests), killer,
                      traces=False, suite=True)

    return run


# ---- the campaign ------------------------------------------------------------------------------------------


def campaign(repo: Path, args, say=print) -> tuple[list[Mutant], dict[str, Result], Path, Path]:
    from regressions.mutate.campaign import run_campaign
    from regressions.mutate.verilog import enumerate_mutants

    root = nvdla_root()
    files = nvdla_files(root, args.unit)
    out = args.out or repo / "build" / "mutate" / "nvdla-rtl"
    out.mkdir(parents=True, exist_ok=True)
    # the sample is always drawn over every unit (so --unit runs a subset of the same mutants, one build)
    n = args.n if args.n is not None else DEFAULT_N  # every site (~25k) would not fit one build
    # the build holds at least the DEFAULT_N sample (a prefix-stable draw over every unit): a smaller -n or
    # a --unit runs a part of the same mutants on the same build
    everything = sample(enumerate_mutants(root, nvdla_files(root)), max(n, DEFAULT_N), args.seed)
    tree = prepare_tree(root, out, everything, say=say)
    mutants = [m for m in everything[:n] if m.path in set(files)]
    pools_path, pools_stamp = out / "pools.json", out / "pools.stamp"
    key = hashlib.sha256((tree.directory.joinpath("mutants.json").read_text()
                          + "".join(file_hash(repo / f) for f in SUITE)).encode()).hexdigest()[:16]
    if args.rebuild_map or not pools_path.is_file() or not pools_stamp.is_file() or pools_stamp.read_text() != key:
        pools = build_pools(root, tree, out, args.jobs, say=say)
        pools.save(pools_path)
        pools_stamp.write_text(key)
    else:
        pools = Pools.load(pools_path)
    map_id = hashlib.sha256("".join(file_hash(repo / f) for f in SUITE).encode()).hexdigest()[:16]
    results = run_campaign(root, mutants, pools, out, jobs=args.jobs, say=say, map_id=map_id,
                           runner=make_runner(tree, out), copy=False)
    return mutants, results, root, out


def _main(argv: list[str]) -> int:
    """``python -m regressions.mutate.nvdla --play SPEC``: the trace player of one mutant (a subprocess)."""
    if len(argv) == 2 and argv[0] == "--play":
        spec = json.loads(Path(argv[1]).read_text())
        print(json.dumps(play(spec["names"], spec["paths"], spec["baseline"], spec["filelist"])))
        return 0
    print("usage: python -m regressions.mutate.nvdla --play SPEC (campaigns: python -m regressions.mutate nvdla-rtl)",
          file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
