"""NVDLA's own flatbuffer loadables (``.nvdla``) on a simulated DUT: what ``dla run FILE.nvdla --config NAME
--target verilator|icarus`` runs (``app.nvdla`` calls ``run_nvdla_networks``).

The machinery is ``tb.network``'s (one build shared with ``dla trace``, the CFGROM read by a probe
simulation cached per build, the run directory kept after a failure); only the engine check and what runs
inside the simulation differ:

1. Every DLA task's descriptors are decoded from the loadable's memory contents *before* anything is
   simulated: the network descriptor (address-list entry 0), the dependency graph (each op's
   ``dla_common_op_desc.op_type``), the op and surface descriptors. Per op the DUT needs the engine's
   core unit(s), its RDMA when the firmware would enable it, and for SDP the sub-units its ``SdpOpDesc``
   uses (``x1_op`` -> X1/BS, ``x2_op`` -> X2/BN, ``y_op`` -> Y/EW, ``y_op.act == LUT`` or a
   ``lut_index`` -> the LUT) and SDP->PDP on the fly for ``MEM_HW`` cubes. The first op needing a unit
   the CFGROM lacks is a one-line ``MissingEngineError`` (exit 2) naming the loadable, task, op index, op
   type and engine. There is no fallback: NVDLA's firmware schedules a task's ops across engines itself
   (fused pairs, ping-pong groups), so a task runs whole on the DUT or not at all. Then each op's
   programmer runs on nothing, so descriptors the firmware refuses (or that ask for stages the config
   lacks) are user errors (``NvdlaRunError``, exit 2) rather than failures in mid-simulation.
2. One simulation of ``tb.nvdla_network_test`` runs any number of loadables in sequence, one cocotb test
   each, each from reset with a fresh memory: the firmware model (``runtime.nvdla.firmware``) drives the
   DUT through ``tb.target.RtlTarget``. Per loadable it writes ``<n>.json`` (status, per-task firmware
   stats, simulated cycles, the DUT's AXI bytes, each output's tensor descriptor) and ``<n>.npz`` (each
   output's raw bytes), from which the caller rebuilds the ``RunResult`` the golden run would return, so
   DIMG files are written exactly as on golden.
"""
from __future__ import annotations

import json
import os
import shutil
import time
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable, Mapping, Sequence

import numpy as np

from golden.config import HwConfig
from golden.engines import load_engines
from golden.errors import DlaError
from golden.regs import register_map
from runtime.errors import ExecutionError
from runtime.nvdla import descriptors as d
from runtime.nvdla import fbs
from runtime.nvdla.engines import PROGRAMMERS, FirmwareError, FirmwareStep, Group, programmer_of
from runtime.nvdla.firmware import FirmwareStats
from runtime.nvdla.run import NvdlaNetwork, NvdlaRunError, Output, RunResult, TaskResult
from runtime.suite import TargetSetupError
from tb.budget import OpWork, budget_from_expected, ops_work, program_writes
from tb.engines import SDP_PDP_FLYING, DutCapabilities
from tb.network import (
    MissingEngineError,
    RtlRunError,
    _read_json,
    describe_missing,
    dut_capabilities,
    dut_engines,
    dut_label,
)
from tb.results import BenchSettings, write_json
from tb.runner import BuildError, SimulatorUnavailable, build, default_build_root, simulate
from tb.suite import RtlOptions, _stderr, dut_for, settings_for

__all__ = ["OpNeeds", "op_needs", "check_engines", "run_nvdla_networks", "NvdlaJob", "TEST_MODULE"]

#: The cocotb module the loadables run in (the CFGROM probe is tb.network's).
TEST_MODULE = "tb.nvdla_network_test"
#: Golden engine (units + RDMA) per kmd op type; BDMA and RUBIK are single units.
_OP_ENGINE = {d.OP_CONV: "CONV", d.OP_SDP: "SDP", d.OP_PDP: "PDP", d.OP_CDP: "CDP"}
_OP_UNIT = {d.OP_BDMA: "BDMA", d.OP_RUBIK: "RBK"}
_SDP_ACT_LUT = 2  # ACTIVATION_LUT of dla_sdp_op.act
#: Cycles per op, on top of its interrupt budget, that the whole-loadable watchdog allows for the firmware's
#: register traffic (programming, enabling, servicing: a few hundred CSB transactions), so that a DUT that
#: never finishes an op is reported by the firmware (naming the op and group) rather than by the watchdog.
PROGRAM_CYCLES = 10_000


@dataclass
class OpNeeds:
    """One op of one task: what the DUT must have to run it, and the bytes its cubes span."""

    task: int
    index: int
    op_type: int
    needs: list[str]
    cube_bytes: int = 0
    #: the decoded descriptors, and the task's address list / LUTs as the firmware would resolve them
    op: d.Struct | None = field(default=None, repr=False, compare=False)
    surface: d.Struct | None = field(default=None, repr=False, compare=False)
    address_of: Callable[[int, int], int] | None = field(default=None, repr=False, compare=False)
    luts: list[d.Struct] = field(default_factory=list, repr=False, compare=False)
    #: the operations its firmware programming starts, with their work (``tb.budget``), once checked
    work: list[OpWork] = field(default_factory=list, repr=False, compare=False)

    @property
    def type_name(self) -> str:
        return d.OP_NAMES[self.op_type] if self.op_type < len(d.OP_NAMES) else f"type {self.op_type}"


# ---- what a loadable needs (decoded from its descriptors, nothing simulated) ----------------------------
def _task_reader(net: NvdlaNetwork, task: fbs.TaskEntry) -> Callable[..., bytes]:
    """read(address index, offset, size, what): the bytes ``run_async`` would have put there (the SET blobs
    of the memory, zeros elsewhere), bounds-checked like the firmware's reads."""
    entries = []
    for aid in task.address_list:
        a = net.addresses.get(aid)
        if a is None:  # 0xFFFF: an unused slot
            entries.append(None)
            continue
        m = net.memories[a.mem_id]
        size = min(a.size, m.size - a.offset) if a.size else m.size - a.offset
        entries.append((m, a.offset, size))

    def read(index: int, offset: int, size: int, what: str) -> bytes:
        if not 0 <= index < len(entries) or entries[index] is None:
            raise NvdlaRunError(f"{net.name}: task {task.id}: {what}: address index {index} is outside the task's "
                                f"address list ({len(entries)} entries)")
        m, base, avail = entries[index]
        if offset < 0 or offset + size > avail:
            raise NvdlaRunError(f"{net.name}: task {task.id}: {what}: bytes {offset}..{offset + size} are outside "
                                f"address {index} ({avail} bytes)")
        lo, hi = base + offset, base + offset + size
        data = bytearray(size)
        if m.flags & fbs.MEM_SET:
            for name, at in zip(m.contents, m.offsets):
                blob = net.blobs[name].data if name else b""
                a, b = max(lo, at), min(hi, at + len(blob))
                if a < b:
                    data[a - lo:b - lo] = blob[a - at:b - at]
        return bytes(data)

    def address_of(index: int, offset: int) -> int:
        """A stand-in bus address, with the firmware's bounds checks (``TaskMemory.address``)."""
        if not 0 <= index < len(entries) or entries[index] is None:
            raise FirmwareError(f"address index {index} is outside the task's address list ({len(entries)} entries)")
        if offset > entries[index][2]:
            raise FirmwareError(f"offset {offset} is past the end of address {index} ({entries[index][2]} bytes)")
        return offset

    read.address_of = address_of
    return read


def _cubes(surface: d.Struct) -> list[d.Struct]:
    return [v for v in (getattr(surface, f) for f in surface.__dataclass_fields__) if isinstance(v, d.DataCube)]


def _needs(op_type: int, op: d.Struct, surface: d.Struct) -> list[str]:
    """Units (CFGROM names), SDP sub-units (``SDP_BS`` ...) and ``SDP->PDP on-the-fly`` one op needs."""
    if op_type in _OP_UNIT:
        return [_OP_UNIT[op_type]]
    eng = load_engines()[_OP_ENGINE[op_type]]
    needs = list(eng.units)
    fw = programmer_of(op_type)
    if eng.rdma and (fw is None or fw.rdma_needed(op, surface)):
        needs.append(eng.rdma)
    if op_type == d.OP_SDP:
        for stage, feature in (("x1_op", "SDP_BS"), ("x2_op", "SDP_BN"), ("y_op", "SDP_EW")):
            if getattr(op, stage).enable:
                needs.append(feature)
        if (op.y_op.enable and op.y_op.act == _SDP_ACT_LUT) or op.lut_index >= 0:  # a LUT is used or uploaded
            needs.append("SDP_LUT")
        if surface.dst_data.type == d.MEM_HW:
            needs.append(SDP_PDP_FLYING)
    if op_type == d.OP_PDP and surface.src_data.type == d.MEM_HW:
        needs.append(SDP_PDP_FLYING)
    return needs


def op_needs(net: NvdlaNetwork) -> list[OpNeeds]:
    """Every op of every DLA task in submit order, with what it needs; raises NvdlaRunError (one line) for
    descriptors that cannot be decoded or an op type the firmware model does not run."""
    out = []
    for task in net.submit_order():
        if task.interface != fbs.IF_DLA1:  # EMU1: runs on the CPU side (runtime.nvdla.emulator), needs no engine
            continue
        read = _task_reader(net, task)
        try:
            nd = d.NetworkDesc.decode(read(0, 0, d.NetworkDesc.nbytes(), "network descriptor (address 0)"))
            n = nd.num_operations
            deps = read(nd.dependency_graph_index, 0, n * d.CommonOpDesc.nbytes(), "dependency graph")
            ops = read(nd.operation_desc_index, 0, n * d.OPERATION_CONTAINER_SIZE, "operation descriptors")
            surfs = read(nd.surface_desc_index, 0, n * d.SURFACE_CONTAINER_SIZE, "surface descriptors")
            luts = []
            if nd.num_luts:
                raw = read(nd.lut_data_index, 0, nd.num_luts * d.LutParam.nbytes(), "LUT list")
                luts = [d.LutParam.decode(raw, k * d.LutParam.nbytes()) for k in range(nd.num_luts)]
            for i in range(n):
                common = d.CommonOpDesc.decode(deps, i * d.CommonOpDesc.nbytes())
                t = common.op_type
                if t not in d.OP_STRUCTS:
                    raise NvdlaRunError(f"{net.name}: task {task.id} op {i}: unknown op type {t}")
                op_cls, surf_cls = d.OP_STRUCTS[t]
                op = op_cls.decode(ops, i * d.OPERATION_CONTAINER_SIZE, net.legacy)
                surface = surf_cls.decode(surfs, i * d.SURFACE_CONTAINER_SIZE, net.legacy)
                size = sum(c.size for c in _cubes(surface) if c.type != d.MEM_HW)
                out.append(OpNeeds(task.id, i, t, _needs(t, op, surface), size, op, surface, read.address_of, luts))
        except d.DescriptorError as exc:
            raise NvdlaRunError(f"{net.name}: task {task.id}: {exc}") from None
    return out


def check_engines(net: NvdlaNetwork, caps: DutCapabilities, dut: str, fallback: str | None = None,
                  hw: HwConfig | None = None) -> list[OpNeeds]:
    """Refuse (MissingEngineError, one line) a loadable with an op the DUT cannot run; NvdlaRunError for an op
    type the firmware model does not schedule, or (with ``hw``) descriptors its programmer refuses. Returns
    the ops' needs."""
    needs = op_needs(net)
    lacking = [(o, caps.missing(o.needs)) for o in needs]
    lacking = [(o, m) for o, m in lacking if m]
    if lacking:
        o, missing = lacking[0]
        more = len(lacking) - 1
        why = (f"{net.name}: task {o.task} op {o.index} ({o.type_name}): {describe_missing(missing)} not in DUT "
               f"({dut} has {dut_engines(caps)})")
        if more:
            why += f"; {more} more op{'s' if more > 1 else ''} need{'' if more > 1 else 's'} missing engines"
        if fallback is not None:
            why += (f"; --fallback {fallback} does not apply to NVDLA loadables (the firmware schedules a task's "
                    "ops across engines itself, so a task runs whole on the DUT)")
        raise MissingEngineError(why)
    for o in needs:
        if programmer_of(o.op_type) is None:
            raise NvdlaRunError(f"{net.name}: task {o.task} op {o.index}: {o.type_name} operations are not run by "
                                f"the firmware model (engines: {', '.join(PROGRAMMERS)})")
        if hw is not None:
            o.work = check_program(net, o, hw)
    return needs


def check_program(net: NvdlaNetwork, o: OpNeeds, hw: HwConfig) -> list[OpWork]:
    """Run the firmware's programmer of the op on nothing: descriptors it refuses (a field out of range, a
    stage ``hw`` lacks, an address outside the task's list) are the loadable's fault, reported here
    (NvdlaRunError, exit 2) rather than as a DUT failure in the middle of a simulation. Returns the work of
    the operations the programming starts (for the op's hang budget)."""
    e = programmer_of(o.op_type)
    where = f"op {o.index} ({o.type_name})"

    def lut(index: int) -> d.Struct:
        if not 0 <= index < len(o.luts):
            raise FirmwareError(f"{where}: lut_index {index}: the network has {len(o.luts)} LUTs")
        return o.luts[index]

    def address_of(index: int, offset: int) -> int:
        try:
            return o.address_of(index, offset)
        except FirmwareError as exc:
            raise FirmwareError(f"{where}: {exc}") from None

    p = FirmwareStep(register_map(hw.address_map), hw, address_of, lut, where)
    g = Group(id=0, rdma_id=0, index=o.index, op=o.op, surface=o.surface, rdma_needed=e.rdma_needed(o.op, o.surface))
    try:
        e.program(p, g)
        e.enable(p, g)
    except (FirmwareError, DlaError) as exc:
        raise NvdlaRunError(f"{net.name}: task {o.task}: {exc}") from None
    return ops_work(program_writes(p.writes, p.regmap), p.regmap, hw)


def op_budget_cycles(needs: list[OpNeeds], settings: BenchSettings, hw: HwConfig) -> int:
    """Interrupt budget of one op: --timeout-cycles, else scaled with the work of the biggest op (its
    programmed registers' cubes, weights and MACs; its descriptors' cube bytes when not checked)."""
    if settings.timeout_cycles:
        return settings.timeout_cycles
    biggest = max((sum(w.expected_cycles(hw) for w in (o.work or [OpWork(o.type_name, o.cube_bytes)]))
                   for o in needs), default=0.0)
    return budget_from_expected(biggest, settings.timeout_scale)


# ---- the job -------------------------------------------------------------------------------------------
@dataclass
class NvdlaJob:
    """What a simulation of ``tb.nvdla_network_test`` is told; written as ``jobs.json``."""

    simulator: str
    config: str
    settings: dict
    #: per loadable: {"name", "path", "layout", "result", "outputs", "op_timeout_cycles", "total_timeout_cycles"}
    loadables: list[dict] = field(default_factory=list)

    def write(self, path: Path) -> None:
        write_json(path, asdict(self))

    @classmethod
    def read(cls, path: Path | str) -> NvdlaJob:
        return cls(**json.loads(Path(path).read_text()))

    @property
    def bench_settings(self) -> BenchSettings:
        return BenchSettings(**self.settings)


def tensor_to_dict(t: fbs.TensorDesc) -> dict:
    return asdict(t)


def result_from_docs(doc: dict, data: Mapping[str, np.ndarray]) -> RunResult:
    """The RunResult a simulation reported (``<n>.json`` + ``<n>.npz``)."""
    result = RunResult()
    for t in doc["tasks"]:
        result.tasks.append(TaskResult(t["task"], FirmwareStats(**t["stats"])))
    for i, o in enumerate(doc["outputs"]):
        tensor = fbs.TensorDesc(**o["tensor"])
        result.outputs.append(Output(o["name"], o["memory"], data[f"output_{i}"].tobytes(), tensor))
    result.cycles = doc.get("cycles")
    result.dut_read = doc.get("dut_read")
    result.dut_written = doc.get("dut_written")
    result.timeline = [tuple(e) for e in doc.get("timeline", [])]
    return result


# ---- running -------------------------------------------------------------------------------------------
def run_nvdla_networks(nets: Sequence[NvdlaNetwork], hw: HwConfig, *, simulator: str,
                       options: Mapping | RtlOptions | None = None, fallback: str | None = None) -> list[RunResult]:
    """Run every loadable of ``nets`` on the DUT, in one simulation, each from reset with a fresh memory;
    returns their RunResults in order. Raises MissingEngineError/NvdlaRunError/ExecutionError (user errors:
    a loadable the DUT or the firmware model cannot run, a DUT that is not ``hw``) before simulating,
    TargetSetupError when the simulator or the RTL is missing, and RtlRunError when the DUT failed (a hang,
    an AXI violation, a testbench error; the run directory is then kept)."""
    opts = RtlOptions.from_mapping(options)
    spec = dut_for(hw.name, opts)
    settings = settings_for(opts)
    root = Path(opts.build_root) if opts.build_root else default_build_root()
    runs = Path(opts.runs_root) if opts.runs_root else root / "runs"
    for net in nets:  # decodable, and runnable by the firmware model, before anything is built
        op_needs(net)
    try:
        built = build(spec, simulator, waves=opts.wants_waves, root=root, notify=lambda m: _stderr(f"dla: {m}"))
    except SimulatorUnavailable as exc:
        raise TargetSetupError(str(exc)) from None
    except BuildError as exc:
        raise RtlRunError(str(exc)) from None
    caps = dut_capabilities(built, hw, settings, runs)
    mismatch = caps.mismatches(hw)
    if mismatch:
        raise ExecutionError(f"the DUT is not {hw.name} (--config): {mismatch[0]}")
    label = dut_label(opts)
    budgets = []
    for net in nets:
        needs = check_engines(net, caps, label, fallback, hw)
        budget = op_budget_cycles(needs, settings, hw)
        budgets.append((budget, (budget + PROGRAM_CYCLES) * (len(needs) + 1)))

    directory = runs / f"nvdla-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}-{uuid.uuid4().hex[:6]}"
    directory.mkdir(parents=True)
    job = NvdlaJob(simulator, hw.name, asdict(settings))
    for i, (net, (op_budget, total)) in enumerate(zip(nets, budgets)):
        path = directory / f"{i}.nvdla"
        if net.path is not None and net.path.is_file():
            shutil.copyfile(net.path, path)
        else:
            path.write_bytes(fbs.build(net.ld))
        job.loadables.append({"name": net.name, "path": str(path), "layout": "legacy" if net.legacy else "current",
                              "result": str(directory / f"{i}.json"), "outputs": str(directory / f"{i}.npz"),
                              "op_timeout_cycles": op_budget, "total_timeout_cycles": total})
    run = simulate(built, job, directory, waves=opts.wants_waves, test_module=TEST_MODULE)
    results = []
    for i, (net, entry) in enumerate(zip(nets, job.loadables)):
        doc = _read_json(Path(entry["result"]))
        who = f"{net.name}: " if len(nets) > 1 else ""  # the firmware's own messages name the loadable
        if doc is None or doc.get("status") != "ok":
            if doc is None:
                tail = run.log_tail(1).strip()
                detail = f"simulation ended without a result (exit {run.returncode})"
                failure = run.failures.get(f"nvdla_{i:04d}")
                if failure:
                    detail += f"; {failure}"
                elif tail:
                    detail += f"; last log line: {tail}"
            else:
                detail = doc.get("detail") or "failed"
            if not detail.startswith(f"{net.name}: "):
                detail = who + detail
            raise RtlRunError(f"{simulator}: {detail} (log {run.log})")
        with np.load(entry["outputs"], allow_pickle=False) as data:
            results.append(result_from_docs(doc, data))
    if not (opts.keep or opts.wants_waves):
        shutil.rmtree(directory, ignore_errors=True)
    else:
        _stderr(f"dla: simulation log{' and waveform' if opts.wants_waves else ''} in {directory}")
    return results
