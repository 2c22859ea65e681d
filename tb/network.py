"""Whole compiled networks on a simulated DUT: what ``dla run OUT.dla --target verilator|icarus`` runs
(``runtime.executor.Network.run`` finds ``run_network`` here by module name).

1. The DUT (our ``rtl/`` rendered for the loadable's hardware config, or ``--rtl-filelist``) is built
   once by ``tb.runner.build``: the same build, and the same options, as ``dla trace``.
2. Its engines are read from its CFGROM (``*_DESC``, ``SDP_CAP_COMPAT``) by a probe simulation that only
   resets the DUT and reads the CFGROM; the answer is cached in the build directory (``cfgrom-<map>.json``),
   so it runs once per build.
3. Every DLA operation's needs (``tb.engines.required_engines`` over its register program: the units it
   starts and the SDP sub-units it does not bypass) are checked against the CFGROM *before* the network
   simulation. An operation needing an engine the DUT lacks is a one-line ``MissingEngineError`` naming
   task, op and engine, unless ``fallback="golden"``: then those operations run on the golden model (a
   ``golden.Dla`` over the testbench's own ``Memory``, so data flows without copies) and the split is
   reported before anything runs. Operations are the unit of the split: each is a complete engine chain,
   and the executor keeps both targets' ping-pong groups consistent.
4. One simulation runs every sample. Its run directory holds the loadable, ``inputs.npz`` and
   ``jobs.json``; ``tb.network_test`` writes ``outputs.npz`` (int8 FEATURE outputs as the DUT wrote them)
   and ``result.json`` (status, per-operation profile with simulated cycles). The directory is deleted
   after a good run and kept (and named) after a failure.
"""
from __future__ import annotations

import json
import os
import shutil
import time
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable, Mapping

import numpy as np

from golden.config import HwConfig
from golden.engines import engine_of_unit, load_engines
from loadable import loadable_pb2 as pb
from loadable.format import feature_span, write_loadable
from runtime.errors import ExecutionError
from runtime.executor import TargetRunError, from_feature
from runtime.profile import Profile
from runtime.suite import TargetSetupError
from runtime.trace import RegWrite
from tb.budget import OpWork, budget_from_expected, ops_work
from tb.engines import SDP_FEATURES, DutCapabilities, required_engines
from tb.results import BenchSettings, write_json
from tb.runner import Build, BuildError, SimulatorUnavailable, build, default_build_root, simulate
from tb.suite import RtlOptions, _stderr, dut_for, settings_for

#: The cocotb module every network simulation (and CFGROM probe) runs.
TEST_MODULE = "tb.network_test"
#: Per-operation budget in a job that does not say (run_network computes one: tb.budget).
BASE_OP_CYCLES = 200_000
#: What the SDP sub-units are called in messages.
_SDP_FEATURE_NAMES = {"SDP_BS": "SDP X1 (BS)", "SDP_BN": "SDP X2 (BN)", "SDP_EW": "SDP Y (EW)", "SDP_LUT": "SDP LUT"}
FALLBACKS = ("golden",)


class MissingEngineError(ExecutionError):
    """An operation needs an engine the DUT lacks (and no fallback was asked for): a user error, exit 2."""


class RtlRunError(TargetRunError):
    """The DUT did not run the network: a build failure, a hang, an AXI violation, a testbench error."""


@dataclass
class NetworkJob:
    """What a network simulation (or a CFGROM probe, ``mode="probe"``) is told; written as ``jobs.json``."""

    mode: str  # "probe" or "run"
    simulator: str
    config: str
    settings: dict
    result: str
    loadable: str = ""
    inputs: str = ""
    input_names: list[str] = field(default_factory=list)
    outputs: str = ""
    #: (task id, op index) of the operations the golden model runs.
    on_fallback: list[list[int]] = field(default_factory=list)
    #: Per-operation interrupt budget, and for the whole simulation.
    op_timeout_cycles: int = BASE_OP_CYCLES
    total_timeout_cycles: int = BASE_OP_CYCLES
    #: Start an operation while earlier ones still run (``Network.run``'s ``pipeline``); the per-operation
    #: profile then is not collected (it needs one operation at a time).
    pipeline: bool = False

    def write(self, path: Path) -> None:
        write_json(path, asdict(self))

    @classmethod
    def read(cls, path: Path | str) -> NetworkJob:
        return cls(**json.loads(Path(path).read_text()))

    @property
    def bench_settings(self) -> BenchSettings:
        return BenchSettings(**self.settings)


# ---- the DUT's engines -----------------------------------------------------------------------------------
def capabilities_to_dict(caps: DutCapabilities) -> dict:
    return {"units": sorted(caps.units), "sdp_features": sorted(caps.sdp_features), "words": caps.words,
            "probed": caps.probed}


def capabilities_from_dict(doc: dict) -> DutCapabilities:
    return DutCapabilities(frozenset(doc["units"]), frozenset(doc["sdp_features"]), dict(doc["words"]),
                           probed=doc["probed"])


def dut_capabilities(built: Build, hw: HwConfig, settings: BenchSettings, runs: Path,
                     refresh: bool = False) -> DutCapabilities:
    """The DUT's CFGROM, from the build's cache or (``refresh``, or nothing cached) a probe simulation,
    which then fills the cache."""
    cache = built.directory / f"cfgrom-{hw.address_map}.json"
    if not refresh:
        try:
            return capabilities_from_dict(json.loads(cache.read_text()))
        except (OSError, ValueError, KeyError):
            pass
    directory = runs / f"probe-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}-{uuid.uuid4().hex[:6]}"
    job = NetworkJob("probe", built.simulator, hw.name, asdict(settings), str(directory / "result.json"))
    run = simulate(built, job, directory, waves=False, test_module=TEST_MODULE)
    doc = _read_json(directory / "result.json")
    if doc is None or doc.get("status") != "ok":
        detail = doc.get("detail") if doc else f"the probe simulation ended without a result (exit {run.returncode})"
        tail = run.log_tail(1).strip()
        raise RtlRunError(f"reading the DUT's CFGROM failed: {detail}"
                          f"{f'; last log line: {tail}' if tail and not doc else ''} (log {run.log})")
    write_json(cache, doc["capabilities"])
    shutil.rmtree(directory, ignore_errors=True)
    return capabilities_from_dict(doc["capabilities"])


def _read_json(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def op_requirements(net, op: pb.DlaOp) -> list[str]:
    """Units and SDP sub-units (``SDP_BS`` ...) the operation needs, in the order it first needs them."""
    writes = [RegWrite(0, (r.full_name if (r := net.regmap.lookup(w.addr)) else ""), w.addr, w.value)
              for w in op.writes]
    return required_engines(writes, net.regmap)


def describe_missing(missing: list[str]) -> str:
    """``CONV (CDMA/CSC/CMAC_A/CMAC_B/CACC)``: missing units grouped by the golden engine they belong to."""
    groups: dict[str, list[str]] = {}
    for name in missing:
        if name in _SDP_FEATURE_NAMES:
            groups.setdefault(_SDP_FEATURE_NAMES[name], [])
            continue
        eng = engine_of_unit(name)
        groups.setdefault(eng.name if eng is not None else name, []).append(name)
    def ordered(g: str, units: list[str]) -> list[str]:
        eng = load_engines().get(g)
        order = list(eng.all_units) if eng is not None else units
        return sorted(units, key=lambda u: order.index(u) if u in order else len(order))

    return ", ".join(f"{g} ({'/'.join(ordered(g, units))})" if units and units != [g] else g
                     for g, units in groups.items())


def dut_engines(caps: DutCapabilities) -> str:
    """The engines a DUT has, e.g. ``PDP, SDP (X1, X2)``."""
    have = []
    for eng in load_engines().values():
        if all(caps.has(u) for u in eng.all_units):
            if eng.name == "SDP":
                sub = [n.split()[1] for f, n in _SDP_FEATURE_NAMES.items() if f in SDP_FEATURES and caps.has(f)]
                have.append(f"SDP ({', '.join(sub)})" if sub else "SDP")
            else:
                have.append(eng.name)
    return ", ".join(sorted(have)) or "no engines"


def dut_label(opts: RtlOptions) -> str:
    if opts.dut is not None:
        return opts.dut.label
    if opts.dut_name and opts.dut_name != "rtl":
        return opts.dut_name
    return Path(opts.filelist).name if opts.filelist else "rtl/"


@dataclass
class Split:
    """Which operations the DUT runs and which fall back, with why."""

    on_fallback: dict[tuple[int, int], str] = field(default_factory=dict)  # op key -> missing engines

    def lines(self, net, simulator: str, fallback: str) -> list[str]:
        out = [f"split: {sum(1 for _ in net.dla_ops()) - len(self.on_fallback)} DLA operations on {simulator}, "
               f"{len(self.on_fallback)} on {fallback} (engines not in the DUT)"]
        for task in net.msg.tasks:
            if task.WhichOneof("kind") != "dla":
                out.append(f"  task {task.id} {task.name!r}: CPU")
                continue
            rtl = [op.name for i, op in enumerate(task.dla.ops) if (task.id, i) not in self.on_fallback]
            gold = [op.name for i, op in enumerate(task.dla.ops) if (task.id, i) in self.on_fallback]
            why = sorted({self.on_fallback[(task.id, i)] for i in range(len(task.dla.ops))
                          if (task.id, i) in self.on_fallback})
            parts = ([f"{simulator}: {', '.join(rtl)}"] if rtl else []) + \
                ([f"{fallback} (needs {'; '.join(why)}): {', '.join(gold)}"] if gold else [])
            out.append(f"  task {task.id} {task.name!r}: {'; '.join(parts)}")
        return out


def plan_split(net, caps: DutCapabilities, fallback: str | None, dut: str) -> Split:
    """Assign every DLA operation to the DUT or the fallback; without a fallback, the first operation
    needing a missing engine is a MissingEngineError."""
    split = Split()
    first: str | None = None
    for task, index, op in net.dla_ops():
        missing = caps.missing(op_requirements(net, op))
        if not missing:
            continue
        what = describe_missing(missing)
        split.on_fallback[(task.id, index)] = what
        if first is None:
            first = (f"task {task.id} {task.name!r} op {op.name!r}: {what} not in DUT "
                     f"({dut} has {dut_engines(caps)})")
    if first is not None and fallback is None:
        more = len(split.on_fallback) - 1
        raise MissingEngineError(f"{first}{f'; {more} more operations need missing engines' if more else ''}; "
                                 "--fallback golden runs such operations on the golden model")
    return split


def op_budget_cycles(net, settings: BenchSettings) -> int:
    """Interrupt budget of one operation: --timeout-cycles, else scaled with the work of the biggest
    operation (``tb.budget``: its register program's cubes, weights and MACs; its tensors' bytes when the
    program starts nothing the budget decodes)."""
    if settings.timeout_cycles:
        return settings.timeout_cycles
    biggest = 0.0
    for _, _, op in net.dla_ops():
        work = ops_work(((w.addr, w.value) for w in op.writes), net.regmap, net.hw)
        if not work:
            spans = [feature_span(net.tensors[n]) for n in (*op.inputs, *op.outputs)
                     if n in net.tensors and net.tensors[n].storage == pb.Tensor.FEATURE]
            work = [OpWork("op", sum(spans))]
        biggest = max(biggest, sum(w.expected_cycles(net.hw) for w in work))
    return budget_from_expected(biggest, settings.timeout_scale)


# ---- running -------------------------------------------------------------------------------------------
def run_network(net, inputs: Mapping[str, np.ndarray] | np.ndarray, *, simulator: str,
                options: Mapping | RtlOptions | None = None, fallback: str | None = None,
                profile: Profile | None = None, raw: bool = False,
                report: Callable[[str], None] | None = None, pipeline: bool = False) -> dict[str, np.ndarray]:
    """Run ``net`` (a ``runtime.executor.Network``) on every sample of ``inputs`` in one simulation;
    returns the outputs as ``Network.run`` does. Raises ExecutionError/MissingEngineError for bad input
    or a network the DUT cannot run, TargetSetupError when the simulator or the RTL is missing, and
    RtlRunError when the DUT fails (the run directory is then kept)."""
    say = report or (lambda _m: None)  # the split; build notices go to stderr as in dla trace
    if fallback is not None and fallback not in FALLBACKS:
        raise ExecutionError(f"fallback {fallback!r}: known fallbacks: {', '.join(FALLBACKS)}")
    if not isinstance(inputs, Mapping):
        if len(net.inputs) != 1:
            raise ExecutionError(f"the network has {len(net.inputs)} inputs ({', '.join(net.inputs)}); "
                                 "pass them by name")
        inputs = {net.inputs[0]: inputs}
    samples = net.split_samples(inputs)  # every input problem is reported before anything is built
    opts = RtlOptions.from_mapping(options)
    spec = dut_for(net.hw.name, opts)
    settings = settings_for(opts)
    root = Path(opts.build_root) if opts.build_root else default_build_root()
    runs = Path(opts.runs_root) if opts.runs_root else root / "runs"
    try:
        built = build(spec, simulator, waves=opts.wants_waves, root=root, notify=lambda m: _stderr(f"dla: {m}"))
    except SimulatorUnavailable as exc:
        raise TargetSetupError(str(exc)) from None
    except BuildError as exc:
        raise RtlRunError(str(exc)) from None
    caps = dut_capabilities(built, net.hw, settings, runs)
    mismatch = caps.mismatches(net.hw)
    if mismatch:
        raise ExecutionError(f"the DUT is not {net.hw.name} (the loadable's config): {mismatch[0]}")
    split = plan_split(net, caps, fallback, dut_label(opts))
    if fallback is not None:
        for line in split.lines(net, simulator, fallback):
            say(line)

    directory = runs / f"net-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}-{uuid.uuid4().hex[:6]}"
    directory.mkdir(parents=True)
    names = list(net.inputs)
    np.savez(directory / "inputs.npz", **{f"input_{i}": np.asarray(inputs[n], dtype=np.float32)
                                          for i, n in enumerate(names)})
    write_loadable(directory / "network.dla", net.msg, validate=False)
    budget = op_budget_cycles(net, settings)
    n_ops = sum(1 for _ in net.dla_ops())
    job = NetworkJob("run", simulator, net.hw.name, asdict(settings), str(directory / "result.json"),
                     loadable=str(directory / "network.dla"), inputs=str(directory / "inputs.npz"),
                     input_names=names, outputs=str(directory / "outputs.npz"),
                     on_fallback=[list(k) for k in split.on_fallback], op_timeout_cycles=budget,
                     total_timeout_cycles=budget * (n_ops * len(samples) + 1),
                     pipeline=pipeline and profile is None and fallback is None)
    run = simulate(built, job, directory, waves=opts.wants_waves, test_module=TEST_MODULE)
    doc = _read_json(directory / "result.json")
    if doc is None or doc.get("status") != "ok":
        if doc is None:
            tail = run.log_tail(1).strip()
            detail = f"simulation ended without a result (exit {run.returncode})"
            if tail:
                detail += f"; last log line: {tail}"
        else:
            detail = doc.get("detail") or "failed"
        raise RtlRunError(f"{simulator}: {detail} (log {run.log})")
    if profile is not None:
        profile.extend(Profile.from_dict(doc["profile"]))
    for unit, n in doc.get("concurrency", {}).items():  # most operations in flight per unit on the DUT
        net.concurrency[unit] = max(net.concurrency.get(unit, 0), n)
    with np.load(directory / "outputs.npz", allow_pickle=False) as data:
        got = {name: data[f"output_{i}"] for i, name in enumerate(net.outputs)}
    if not (opts.keep or opts.wants_waves):
        shutil.rmtree(directory, ignore_errors=True)
    else:
        _stderr(f"dla: simulation log{' and waveform' if opts.wants_waves else ''} in {directory}")
    return got if raw else {name: _dequantized(net, name, y) for name, y in got.items()}


def _dequantized(net, name: str, y: np.ndarray) -> np.ndarray:
    """Float outputs from the raw ones, exactly as the executor's ``read_float`` computes them."""
    t = net.tensors[name]
    if t.storage == pb.Tensor.HOST:
        return y
    return from_feature(y, t).reshape(y.shape)
