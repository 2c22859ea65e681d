"""Runs a loadable on any Target: places its regions, feeds the inputs, plays the tasks, reads the outputs.

The executor speaks only the async Target protocol, so the golden model and an RTL simulation run the
same code. Each operation's ping-pong register groups are chosen as it starts, from the target's state
(``runtime.groups``), so the same network can run many times on one simulated DUT. ``Network.emit_trace`` turns each DLA task into a
self-contained NVDLA ``.cfg`` trace, so a compiled network becomes a test for any target.

Simulators (``target="verilator"|"icarus"``) run the whole network in one cocotb simulation
(``tb.network``, found by module name as ``runtime.suite`` finds trace suites, so ``runtime`` never imports
``tb``). There a second, fallback Target may run the operations whose engines the DUT lacks: it must
share the main target's memory (a golden ``Dla`` over the RTL's ``Memory``), and each target keeps its
own ping-pong groups (see ``_Execution``).
"""
from __future__ import annotations

import asyncio
import re
import time
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Collection, Iterable, Mapping, Sequence

import numpy as np

from dlaio import publish_dir
from golden.config import HwConfig, get_config
from golden.engines import engine_of_unit
from golden.errors import DlaError
from golden.intr import INTR_SOURCES
from golden.layout import CubeLayout
from golden.regs import register_map
from loadable import loadable_pb2 as pb
from loadable.format import LoadableError, feature_span, read_loadable, surfaces
from runtime.cpu_ops import Kernel, run_cpu_task
from runtime.errors import ExecutionError
from runtime.player import DEFAULT_TIMEOUT_NS
from runtime.groups import Groups, consumer, group_bit, producer, symbolic
from runtime.profile import OpProfile, Profile, target_label, traffic_of
from runtime.target import InterruptTimeout, Target
from runtime.trace import write_dat

__all__ = ["ExecutionError", "LoadableError", "Network", "TargetRunError", "load", "place_regions", "quantize",
           "dequantize"]

#: Where regions are placed: primary DRAM (ram_type 1) and CV-SRAM (ram_type 0).
DRAM_BASE = 0x8000_0000
CVSRAM_BASE = 0x5000_0000
#: Regions start on a page at least, whatever alignment they ask for.
MIN_ALIGNMENT = 4096
MEM_NAMES = {1: "pri_mem", 0: "sec_mem"}


#: progress(done, total, task) after every task.
Progress = Callable[[int, int, pb.Task], None]
#: Runs a whole network on a simulator in one simulation: ``(network, inputs, *, simulator, options,
#: fallback, profile, raw, report, pipeline) -> outputs`` (``tb.network.run_network``).
NetworkRunner = Callable[..., dict[str, np.ndarray]]
#: Simulator targets by name. The runtime does not import the testbench: the application registers them
#: (``register_network_target``, from ``app.targets``).
NETWORK_TARGETS: dict[str, NetworkRunner] = {}
#: An operation: (task id, index of the op in its task).
OpKey = tuple[int, int]


def register_network_target(name: str, run: NetworkRunner) -> None:
    """Let ``Network.run(target=name)`` run whole networks through ``run`` (a simulator)."""
    NETWORK_TARGETS[name] = run


class TargetRunError(Exception):
    """A simulated target did not run the network (DUT build failure, hang, AXI protocol violation,
    testbench error): not the user's input, so ``dla run`` exits 1."""


# ---- quantization and the NVDLA feature layout ---------------------------------------------------------
def quantize(x: np.ndarray, scale: float) -> np.ndarray:
    """Symmetric int8: clip(rint(x / scale), -128, 127)."""
    return np.clip(np.rint(np.asarray(x, dtype=np.float64) / float(scale)), -128, 127).astype(np.int8)


def dequantize(q: np.ndarray, scale: float) -> np.ndarray:
    return np.asarray(q, dtype=np.float32) * np.float32(scale)


#: numpy element type of each FEATURE dtype (little-endian, as the DLA stores them).
FEATURE_NUMPY = {pb.Tensor.INT8: np.dtype(np.int8), pb.Tensor.INT16: np.dtype("<i2"),
                 pb.Tensor.FP16: np.dtype("<f2")}


def to_feature(x: np.ndarray, t: pb.Tensor) -> np.ndarray:
    """Float values as the tensor's elements: int8/int16 quantized with its scale (saturating), fp16 rounded
    to nearest even (beyond +-65504 saturated, as the DLA's own conversions do)."""
    x = np.asarray(x, dtype=np.float64)
    if t.dtype == pb.Tensor.FP16:
        return np.clip(x, -65504.0, 65504.0).astype(np.float16)
    if t.dtype == pb.Tensor.INT16:
        return np.clip(np.rint(x / float(t.scale)), -32768, 32767).astype(np.int16)
    return quantize(x, t.scale)


def from_feature(q: np.ndarray, t: pb.Tensor) -> np.ndarray:
    """The tensor's elements as float32 (fp16 widened exactly, integers times the scale)."""
    return np.asarray(q, dtype=np.float32) if t.dtype == pb.Tensor.FP16 else dequantize(q, t.scale)


def tensor_layout(t: pb.Tensor) -> CubeLayout:
    """The golden model's layout of a FEATURE tensor (the loadable's strides and atom)."""
    return CubeLayout(t.channels, t.height, t.width, t.line_stride, t.surface_stride, t.atom,
                      FEATURE_NUMPY[t.dtype].itemsize)


def feature_offsets(t: pb.Tensor) -> np.ndarray:
    """Byte offset of every lane of a FEATURE cube, shape (surfaces * atom, H, W): channel c sits in
    surface c // atom at lane c % atom, lines ``line_stride`` and surfaces ``surface_stride`` apart (of its
    first byte: an element's bytes follow it)."""
    return tensor_layout(t).byte_offsets()[..., 0]


def pack_feature(buf: np.ndarray, t: pb.Tensor, q: np.ndarray, offsets: np.ndarray) -> None:
    """Write (C, H, W) elements (the tensor's int8, int16 or fp16) into ``buf``, the bytes of its cube from
    its first byte (``offsets``: ``feature_offsets``), padding lanes zeroed, other bytes kept."""
    elem = FEATURE_NUMPY[t.dtype]
    lanes = np.zeros((surfaces(t) * t.atom, t.height, t.width), dtype=elem)
    lanes[: t.channels] = np.asarray(q).astype(elem).reshape(t.channels, t.height, t.width)
    raw = lanes[..., None].view(np.uint8)  # (C, H, W, bytes), little-endian
    for b in range(elem.itemsize):
        buf[offsets + b] = raw[..., b]


@dataclass(frozen=True)
class Placement:
    """Absolute base address and memory of every region."""

    base: dict[int, int]
    mem: dict[int, str]

    def address(self, region: int, offset: int = 0) -> int:
        return self.base[region] + offset


def allocate(blocks: Iterable[tuple[int, str, int, int]]) -> dict[int, int]:
    """Bump allocation of (id, memory name, size, alignment) blocks in order, each aligned to max(its
    alignment, a page): DRAM (``pri_mem``) from 0x8000_0000, CV-SRAM (``sec_mem``) from 0x5000_0000.
    Shared by our loadables and NVDLA's, so both land where traces and tests expect them."""
    cursor = {"pri_mem": DRAM_BASE, "sec_mem": CVSRAM_BASE}
    base = {}
    for key, mem, size, alignment in blocks:
        align = max(alignment, MIN_ALIGNMENT)
        base[key] = at = -(-cursor[mem] // align) * align
        cursor[mem] = at + size
    return base


def place_regions(regions: Sequence[pb.Region]) -> Placement:
    """Regions in order (see ``allocate``)."""
    mem = {r.id: MEM_NAMES[r.ram_type] for r in regions}
    return Placement(allocate((r.id, mem[r.id], r.size, r.alignment) for r in regions), mem)


def _safe_name(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name).strip("._") or "task"


# ---- what a trace of one DLA task needs ---------------------------------------------------------------
@dataclass
class _TaskRecord:
    task: pb.Task
    pointers: dict[str, tuple[int, int]] = field(default_factory=dict)  # unit -> (producer, consumer)
    loads: list[tuple[str, int, bytes]] = field(default_factory=list)  # (mem, addr, bytes) before the task
    ops: list[tuple[list[tuple[int, int]], list[int]]] = field(default_factory=list)  # (writes, intr bits)
    checks: list[tuple[str, int, int, int, str]] = field(default_factory=list)  # mem, addr, size, crc, tensor


# ---- the network ----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class OpProgram:
    """One DLA operation as the executor replays it for every sample (``Network.program``)."""

    #: (CSB address, word, ping-pong unit whose S_POINTER this writes or None): the group is chosen per run
    writes: tuple[tuple[int, int, str | None], ...]
    #: units the program starts (D_OP_ENABLE), in program order
    units: tuple[str, ...]
    #: every ping-pong unit whose registers it writes or whose group it starts
    touched: frozenset[str]
    inputs: frozenset[str]
    outputs: frozenset[str]
    interrupt_mask: int


class Network:
    """A loaded, validated loadable, ready to run on a Target."""

    def __init__(self, msg: pb.Loadable, *, path: Path | str | None = None,
                 kernels: Mapping[str, Kernel] | None = None) -> None:
        self.msg = msg
        self.path = Path(path) if path is not None else None
        self.hw: HwConfig = get_config(msg.hw_config)
        self.regmap = register_map(self.hw.address_map)
        self.kernels = kernels
        self.tensors: dict[str, pb.Tensor] = {t.name: t for t in msg.tensors}
        self.regions: dict[int, pb.Region] = {r.id: r for r in msg.regions}
        self.placement = place_regions(msg.regions)
        self._offsets: dict[str, np.ndarray] = {}
        # S_POINTER address -> unit, for every ping-pong unit the programs touch
        self.pointer_units: dict[int, str] = {}
        for task in msg.tasks:
            if task.WhichOneof("kind") != "dla":
                continue
            for op in task.dla.ops:
                for w in op.writes:
                    unit = self._pingpong_unit(w.addr)
                    if unit is not None:
                        self.pointer_units[self.regmap.address(unit, "S_POINTER")] = unit
        self.intr_status_addr = self.regmap.address("GLB", "S_INTR_STATUS")
        #: most DLA operations in flight at once per ping-pong unit over the runs so far (pipelining)
        self.concurrency: dict[str, int] = {}
        self._programs: dict[tuple[int, int], OpProgram] = {}

    def program(self, task: pb.Task, index: int) -> "OpProgram":
        """Operation ``index`` of ``task`` decoded once for every sample: relocations resolved against this
        network's placement, its units and tensors as sets (the protobuf is not walked again per sample)."""
        key = (task.id, index)
        prog = self._programs.get(key)
        if prog is None:
            op = task.dla.ops[index]
            writes = []
            for w in op.writes:
                unit = None
                if w.HasField("reloc"):  # (as ``_Execution._value``)
                    value = (self.placement.address(w.reloc.region, w.reloc.offset) >> w.reloc.shift) & 0xFFFFFFFF
                else:
                    value, unit = w.value, self.pointer_units.get(w.addr)
                writes.append((w.addr, value, unit))
            units = tuple(self.op_units(op))
            touched = frozenset(units) | {u for w in op.writes if (u := self._pingpong_unit(w.addr))}
            prog = OpProgram(tuple(writes), units, touched, frozenset(op.inputs), frozenset(op.outputs),
                             op.interrupt_mask)
            self._programs[key] = prog
        return prog

    def dla_ops(self) -> list[tuple[pb.Task, int, pb.DlaOp]]:
        """Every DLA operation: (its task, its index in the task, the op)."""
        return [(task, i, op) for task in self.msg.tasks if task.WhichOneof("kind") == "dla"
                for i, op in enumerate(task.dla.ops)]

    def op_units(self, op: pb.DlaOp) -> list[str]:
        """Units the op's register program starts (D_OP_ENABLE with OP_EN=1), in program order: each
        toggles its ping-pong CONSUMER group when the op completes."""
        units: list[str] = []
        for w in op.writes:
            reg = self.regmap.lookup(w.addr)
            if reg is not None and reg.name == "D_OP_ENABLE" and w.value & 1 and reg.unit not in units:
                units.append(reg.unit)
        return units

    def op_engines(self, op: pb.DlaOp) -> tuple[str, ...]:
        """Golden engines the op runs (``CONV``, ``SDP``, ``PDP``, ``CDP``), from the units it starts."""
        engines: list[str] = []
        for unit in self.op_units(op):
            eng = engine_of_unit(unit)
            name = eng.name if eng is not None else unit
            if name not in engines:
                engines.append(name)
        return tuple(engines)

    def _pingpong_unit(self, addr: int) -> str | None:
        reg = self.regmap.lookup(addr)
        if reg is None or self.regmap.unit(reg.unit).op_enable_offset is None:
            return None
        return reg.unit

    @property
    def inputs(self) -> list[str]:
        return list(self.msg.inputs)

    @property
    def outputs(self) -> list[str]:
        return list(self.msg.outputs)

    def input_shapes(self) -> dict[str, tuple[int, ...]]:
        return {n: tuple(self.tensors[n].shape) for n in self.msg.inputs}

    def output_shapes(self) -> dict[str, tuple[int, ...]]:
        return {n: tuple(self.tensors[n].shape) for n in self.msg.outputs}

    def offsets(self, t: pb.Tensor) -> np.ndarray:
        off = self._offsets.get(t.name)
        if off is None:
            off = self._offsets[t.name] = feature_offsets(t)
        return off

    # ---- inputs --------------------------------------------------------------------------------------
    def split_samples(self, inputs: Mapping[str, np.ndarray] | np.ndarray) -> list[dict[str, np.ndarray]]:
        """Check the inputs against the tensors' shapes and split them into single samples in the model's
        shape. The batch N may differ from the compiled one (when that is 1); a missing batch axis is added."""
        if not isinstance(inputs, Mapping):
            if len(self.msg.inputs) != 1:
                raise ExecutionError(f"the network has {len(self.msg.inputs)} inputs "
                                     f"({', '.join(self.msg.inputs)}); pass them by name")
            inputs = {self.msg.inputs[0]: inputs}
        unknown = [n for n in inputs if n not in self.msg.inputs]
        if unknown:
            raise ExecutionError(f"unknown input {unknown[0]!r} (inputs: {', '.join(self.msg.inputs)})")
        missing = [n for n in self.msg.inputs if n not in inputs]
        if missing:
            raise ExecutionError(f"missing input {missing[0]!r} (inputs: {', '.join(self.msg.inputs)})")
        arrays: dict[str, np.ndarray] = {}
        batch: int | None = None
        for name in self.msg.inputs:
            shape = tuple(self.tensors[name].shape)
            try:
                x = np.asarray(inputs[name], dtype=np.float32)
            except (TypeError, ValueError):
                raise ExecutionError(f"input {name!r}: not a numeric array") from None
            batched = bool(shape) and shape[0] == 1
            if batched and x.shape == shape[1:]:
                x = x[None]
            ok = (x.ndim == len(shape) and x.shape[1:] == shape[1:] and x.shape[0] >= 1) if batched \
                else x.shape == shape
            if not ok:
                want = "(N, " + ", ".join(map(str, shape[1:])) + ")" if batched else str(shape)
                raise ExecutionError(f"input {name!r}: expected shape {want}, got {tuple(x.shape)}")
            if not np.isfinite(x).all():
                raise ExecutionError(f"input {name!r}: has NaN or infinite values")
            n = x.shape[0] if batched else 1
            if batch is not None and n != batch:
                raise ExecutionError(f"input {name!r}: batch of {n}, other inputs have {batch}")
            batch = n
            arrays[name] = x if batched else x[None]
        return [{n: (a[i:i + 1] if self.tensors[n].shape and self.tensors[n].shape[0] == 1 else a[0])
                 for n, a in arrays.items()} for i in range(batch or 1)]

    def _stack(self, per_sample: list[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
        out = {}
        for name in self.msg.outputs:
            parts = [s[name] for s in per_sample]
            out[name] = parts[0] if len(parts) == 1 else np.concatenate(parts, axis=0)
        return out

    # ---- running -------------------------------------------------------------------------------------
    def _target_factory(self, target: str | Target) -> Callable[[], Target]:
        if not isinstance(target, str):
            return lambda: target
        from runtime.suite import TARGETS

        factory = TARGETS.get(target)
        if factory is None:
            raise ExecutionError(f"target {target!r} cannot run loadables by name (in-process targets: "
                                 f"{', '.join(TARGETS)}; simulators: {', '.join(NETWORK_TARGETS)}); other "
                                 "targets pass a Target instance to Network.run_async")
        return lambda: factory(self.hw)

    def run(self, inputs: Mapping[str, np.ndarray] | np.ndarray, *, target: str | Target = "golden",
            progress: Progress | None = None, timeout_ns: int = DEFAULT_TIMEOUT_NS,
            profile: Profile | None = None, raw: bool = False, fallback: str | None = None,
            rtl_options: Mapping | None = None, report: Callable[[str], None] | None = None,
            pipeline: bool = True) -> dict[str, np.ndarray]:
        """Run on float NCHW inputs; returns the dequantized float32 outputs by name (``raw``: FEATURE outputs
        as the int8 values the target wrote, in the model's shape). A named in-process target gets a fresh
        instance per sample; a Target instance is reused (its ping-pong state is re-based). A simulator
        name (``verilator``, ``icarus``) runs every sample in one simulation of the DUT ``rtl_options``
        describe (``tb.suite.RtlOptions``); ``fallback="golden"`` runs the operations whose engines the DUT
        lacks on the golden model instead of refusing them; ``report`` hears the split. There budgets are
        ``rtl_options``' cycles (not ``timeout_ns``) and ``progress`` is not called. ``profile`` collects
        per-operation timings, engine operations and DMA bytes (``runtime.profile``). ``pipeline`` (the
        default, unless profiling per operation) starts an operation while earlier ones still run, up to two
        per engine (one per ping-pong group), when it neither reads what they write nor writes what they
        read; ``self.concurrency`` then holds the most operations in flight per unit."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            pass
        else:
            raise ExecutionError("Network.run called inside an event loop (cocotb?); await Network.run_async instead")
        if isinstance(target, str) and target in NETWORK_TARGETS:
            return NETWORK_TARGETS[target](self, inputs, simulator=target, options=rtl_options, fallback=fallback,
                                      profile=profile, raw=raw, report=report, pipeline=pipeline)
        if fallback is not None:
            raise ExecutionError(f"fallback {fallback!r}: only simulator targets ({', '.join(NETWORK_TARGETS)}) "
                                 "lack engines to fall back from")
        samples = self.split_samples(inputs)
        make = self._target_factory(target)

        async def main() -> list[dict[str, np.ndarray]]:
            outs = []
            for i, sample in enumerate(samples):
                ex = _Execution(self, make(), timeout_ns, progress, (i, len(samples)), profile=profile,
                                pipeline=pipeline)
                outs.append(await ex.run(sample, raw=raw))
                self._note_concurrency(ex)
            return outs

        return self._stack(asyncio.run(main()))

    async def run_async(self, inputs: Mapping[str, np.ndarray] | np.ndarray, *, target: Target,
                        progress: Progress | None = None, timeout_ns: int = DEFAULT_TIMEOUT_NS,
                        profile: Profile | None = None, raw: bool = False, fallback: Target | None = None,
                        on_fallback: Collection[OpKey] = (), pipeline: bool = True) -> dict[str, np.ndarray]:
        """``run`` inside an event loop (cocotb) on one Target instance. The ops in ``on_fallback``
        ((task id, op index) pairs) run on ``fallback``, which must share ``target``'s memory."""
        if on_fallback and fallback is None:
            raise ExecutionError("operations are assigned to a fallback target, but none is given")
        samples = self.split_samples(inputs)
        outs = []
        for i, sample in enumerate(samples):
            ex = _Execution(self, target, timeout_ns, progress, (i, len(samples)), profile=profile,
                            fallback=fallback, on_fallback=on_fallback, pipeline=pipeline)
            outs.append(await ex.run(sample, raw=raw))
            self._note_concurrency(ex)
        return self._stack(outs)

    def _note_concurrency(self, ex: "_Execution") -> None:
        for unit, n in ex.max_in_flight.items():
            self.concurrency[unit] = max(self.concurrency.get(unit, 0), n)

    # ---- traces --------------------------------------------------------------------------------------
    def emit_trace(self, inputs: Mapping[str, np.ndarray] | np.ndarray, directory: Path | str, *,
                   progress: Progress | None = None, timeout_ns: int = DEFAULT_TIMEOUT_NS,
                   input_files: Iterable[Path | str] = ()) -> list[Path]:
        """Run the first sample on the golden model and write one self-contained NVDLA trace per DLA task:
        ``DIR/<hw_config>/task_<id>_<name>/task_<id>_<name>.cfg`` plus its ``.dat`` files (the config
        folder lets ``dla trace DIR`` infer the hardware). Each trace loads the weights and the bytes of
        every tensor its task touches as they are just before the task, plays the relocated registers at
        absolute addresses, waits for every interrupt and checks the CRC of every tensor the task writes.
        Nothing is written when the run fails; the folder appears whole or not at all, through the one
        output writer (``dlaio.publish_dir``: never into a folder holding one of ``input_files``)."""
        from runtime.golden_target import GoldenTarget

        sample = self.split_samples(inputs)[0]
        ex = _Execution(self, GoldenTarget(self.hw), timeout_ns, progress, (0, 1), record=True)
        asyncio.run(ex.run(sample))
        final = Path(directory) / self.hw.name
        cfgs: list[Path] = []

        def fill(stage: Path) -> None:
            (stage / self.hw.name).mkdir()
            cfgs.extend(self._write_task_trace(rec, stage) for rec in ex.records)

        publish_dir(directory, fill, inputs=input_files)
        return [final / c.parent.name / c.name for c in cfgs]

    def _write_task_trace(self, rec: _TaskRecord, root: Path) -> Path:
        task = rec.task
        name = f"task_{task.id:03d}_{_safe_name(task.name)}"
        d = root / self.hw.name / name
        d.mkdir(parents=True)
        model = " ".join(f"{self.msg.model_name or 'a network'} ({self.msg.source or 'loadable'})".split())
        lines = [f"// {name}: DLA task {task.id} of {model}, {self.hw.name}; generated by dla, self-contained"]
        for i, (mem, addr, data) in enumerate(rec.loads):
            if not any(data):
                continue
            fname = f"{name}_mem{i}.dat"
            write_dat(d / fname, data, chunk=32, skip_zero=True)
            lines.append(f'mem_load({mem}, {addr:#x}, "{fname}");')
        # the task ran from these CONSUMER groups; a fresh target starts at 0, so swap groups to match
        start = {unit: c for unit, (_, c) in rec.pointers.items()}
        for unit, (p, c) in sorted(rec.pointers.items()):
            if p ^ c:
                lines.append(f"reg_write({self.regmap.unit(unit).register('S_POINTER').full_name}, 0x1);")
        sync = 0
        for writes, bits in rec.ops:
            for addr, value in writes:
                reg = self.regmap.lookup(addr)
                if reg.name == "S_POINTER" and reg.unit in start:
                    value ^= start[reg.unit]
                lines.append(f"reg_write({reg.full_name}, {value:#x});")
            for bit in bits:
                pair = bit & ~1
                source, unit = INTR_SOURCES[pair]
                group = group_bit(bit & 1, start.get(unit, 0))
                lines.append(f"intr_notify({source}_{group}, sync_id_{sync});")
                sync += 1
        last = f"sync_id_{sync - 1}" if sync else "0"
        for mem, addr, size, crc, tensor in rec.checks:
            lines.append(f"check_crc({last}, {mem}, {addr:#x}, {size:#x}, {crc:#010x});  // {_safe_name(tensor)}")
        cfg = d / f"{name}.cfg"
        cfg.write_text("\n".join(lines) + "\n")
        return cfg


class _Execution:
    """One sample of a network on one Target."""

    def __init__(self, net: Network, target: Target, timeout_ns: int, progress: Progress | None,
                 sample: tuple[int, int], record: bool = False, profile: Profile | None = None,
                 fallback: Target | None = None, on_fallback: Collection[OpKey] = (), pipeline: bool = False) -> None:
        self.net, self.target, self.timeout_ns = net, target, timeout_ns
        # per-operation profiles, trace records and split targets need one operation at a time
        self.pipeline = pipeline and profile is None and not record and fallback is None
        self.max_in_flight: dict[str, int] = {}
        self.progress, self.sample = progress, sample
        self.host: dict[str, np.ndarray] = {}
        self.profile = profile
        self.fallback = fallback
        self.on_fallback = frozenset(on_fallback) if fallback is not None else frozenset()
        self.targets: list[Target] = [target] + ([fallback] if fallback is not None else [])
        #: Per target (by id): its ping-pong groups.
        self.groups: dict[int, Groups] = {id(t): Groups(symbolic(net.msg)) for t in self.targets}
        self.record = record
        self.records: list[_TaskRecord] = []
        self._current: _TaskRecord | None = None

    @property
    def placement(self) -> Placement:
        return self.net.placement

    # ---- memory ------------------------------------------------------------------------------------
    async def load_regions(self) -> None:
        """Zero every region (so padding and gaps are deterministic on a reused target) and write the
        WEIGHTS contents."""
        for r in self.net.msg.regions:
            data = r.content + bytes(r.size - len(r.content)) if r.kind == pb.Region.WEIGHTS else bytes(r.size)
            if data:
                await self.target.write_mem(self.placement.base[r.id], data, self.placement.mem[r.id])

    def _feature(self, name: str) -> pb.Tensor:
        t = self.net.tensors[name]
        if t.dtype not in FEATURE_NUMPY:
            raise ExecutionError(f"tensor {name!r}: {pb.Tensor.DType.Name(t.dtype)} feature data is not supported "
                                 "by the executor (int8, int16 and fp16 only)")
        return t

    def _where(self, t: pb.Tensor) -> tuple[int, int, str]:
        return self.placement.address(t.region, t.offset), feature_span(t), self.placement.mem[t.region]

    async def write_feature(self, name: str, q: np.ndarray) -> None:
        """Pack (C, H, W) elements (int8, int16 or fp16, as the tensor is) into its cube: read-modify-write
        of its span, so bytes between lines and surfaces (possibly another tensor's) are kept; padding lanes
        are zeroed."""
        t = self._feature(name)
        addr, span, mem = self._where(t)
        buf = np.frombuffer(await self.target.read_mem(addr, span, mem), dtype=np.uint8).copy()
        pack_feature(buf, t, q, self.net.offsets(t))
        await self.target.write_mem(addr, buf.tobytes(), mem)

    async def read_feature(self, name: str) -> np.ndarray:
        """(C, H, W) elements of a FEATURE tensor (int8, int16 or float16)."""
        t = self._feature(name)
        elem = FEATURE_NUMPY[t.dtype]
        addr, span, mem = self._where(t)
        buf = np.frombuffer(await self.target.read_mem(addr, span, mem), dtype=np.uint8)
        off = self.net.offsets(t)[: t.channels]
        raw = np.stack([buf[off + b] for b in range(elem.itemsize)], axis=-1)
        return np.ascontiguousarray(raw).view(elem)[..., 0]

    async def read_float(self, name: str) -> np.ndarray:
        """A tensor as float32 in the model's shape (FEATURE dequantized, HOST as stored)."""
        t = self.net.tensors[name]
        if t.storage == pb.Tensor.HOST:
            if name not in self.host:
                raise ExecutionError(f"host tensor {name!r} is read before any task wrote it")
            return self.host[name]
        q = await self.read_feature(name)
        return from_feature(q, t).reshape(tuple(t.shape) or q.shape)

    async def write_float(self, name: str, x: np.ndarray, what: str) -> None:
        t = self.net.tensors[name]
        shape = tuple(t.shape)
        x = np.asarray(x, dtype=np.float32)
        if shape and x.size != int(np.prod(shape)):
            raise ExecutionError(f"{what}: tensor {name!r} has shape {shape}, got {x.size} values {tuple(x.shape)}")
        if t.storage == pb.Tensor.HOST:
            self.host[name] = x.reshape(shape) if shape else x
        else:
            await self.write_feature(name, to_feature(x, t))

    # ---- tasks -------------------------------------------------------------------------------------
    async def run(self, sample: Mapping[str, np.ndarray], raw: bool = False) -> dict[str, np.ndarray]:
        await self.load_regions()
        if self.fallback is None:
            await self.rebase_groups()
        else:
            for tgt in self.targets:
                await self.rebase_groups(tgt, self._units_on(tgt))
        for name, x in sample.items():
            await self.write_float(name, x, f"input {name!r}")
        tasks = self.net.msg.tasks
        done: set[int] = set()
        index, count = self.sample
        for i, task in enumerate(tasks):
            missing = [d for d in task.deps if d not in done]
            if missing:
                raise ExecutionError(f"task {task.id} ({task.name!r}) runs before its dependency {missing[0]}")
            if task.WhichOneof("kind") == "dla":
                await self.run_dla(task)
            else:
                await self.run_cpu(task)
            done.add(task.id)
            if self.progress is not None:
                self.progress(index * len(tasks) + i + 1, count * len(tasks), task)
        read = self.read_raw if raw else self.read_float
        return {name: await read(name) for name in self.net.msg.outputs}

    async def read_raw(self, name: str) -> np.ndarray:
        """An output as the target left it: FEATURE tensors as int8 in the model's shape, HOST as float."""
        t = self.net.tensors[name]
        if t.storage == pb.Tensor.HOST:
            return await self.read_float(name)
        q = await self.read_feature(name)
        return q.reshape(tuple(t.shape) or q.shape)

    def _units_on(self, target: Target) -> list[str]:
        """Ping-pong units the ops assigned to ``target`` program."""
        units: list[str] = []
        for task, i, op in self.net.dla_ops():
            if self._target_of(task, i) is target:
                for w in op.writes:
                    unit = self.net.pointer_units.get(w.addr)
                    if unit is not None and unit not in units:
                        units.append(unit)
        return units

    def _target_of(self, task: pb.Task, index: int) -> Target:
        return self.fallback if (task.id, index) in self.on_fallback else self.target

    async def rebase_groups(self, target: Target | None = None, units: Sequence[str] | None = None) -> None:
        """Read ``target``'s ping-pong groups (``Groups.read``) before the run: only ``units`` (default: every
        ping-pong unit the network programs), since a DUT need not answer for units it lacks."""
        target = target if target is not None else self.target
        await self.groups[id(target)].read(target, self.net.pointer_units, units)

    async def run_dla_pipelined(self, task: pb.Task) -> None:
        """The task's operations with up to two in flight per ping-pong unit: an operation is started
        (programmed into its group and enabled) once no running operation writes a tensor it reads or
        reads a tensor it writes, and each of its units has a free group; the oldest running operation is
        awaited (its done bits, then write-1-to-clear) until then. ``Groups`` puts consecutive operations of a
        unit in different groups."""
        inflight: list[tuple[str, set[str], set[str], set[str], list[int]]] = []  # where, units, ins, outs, bits

        async def retire() -> None:
            where, _, _, _, bits = inflight.pop(0)
            try:
                for bit in bits:
                    await self.target.wait_interrupt(1 << bit, self.timeout_ns)
                await self.target.write_reg(self.net.intr_status_addr, sum(1 << b for b in bits))
            except (InterruptTimeout, DlaError) as exc:
                raise ExecutionError(f"{where}: {type(exc).__name__}: {exc}") from exc

        write_reg = self.target.write_reg
        for index, op in enumerate(task.dla.ops):
            prog = self.net.program(task, index)
            where = f"task {task.id} ({task.name!r}) op {op.name!r}"
            # every ping-pong unit whose group registers the op writes or whose group it starts
            units, ins, outs = prog.touched, prog.inputs, prog.outputs

            def blocked() -> bool:
                for _, u, i, o, _ in inflight:
                    if ins & o or outs & i:
                        return True
                return any(sum(1 for f in inflight if unit in f[1]) >= 2 for unit in units)

            while inflight and blocked():
                await retire()
            groups = self.groups[id(self.target)]
            try:
                for addr, value, pointer in prog.writes:
                    await write_reg(addr, value if pointer is None else groups.pointer(pointer, value))
            except DlaError as exc:
                raise ExecutionError(f"{where}: {type(exc).__name__}: {exc}") from exc
            bits = groups.done_bits(prog.interrupt_mask)
            await self._check_no_stale_done(self.target, bits, where)
            inflight.append((where, units, ins, outs, bits))
            groups.started(prog.units)
            for unit in units:
                n = sum(1 for f in inflight if unit in f[1])
                self.max_in_flight[unit] = max(self.max_in_flight.get(unit, 0), n)
        while inflight:
            await retire()

    def _value(self, w: pb.RegWrite, groups: Groups) -> int:
        """The word a register write puts on the target: relocations resolved, ping-pong groups chosen."""
        if w.HasField("reloc"):
            return (self.placement.address(w.reloc.region, w.reloc.offset) >> w.reloc.shift) & 0xFFFFFFFF
        unit = self.net.pointer_units.get(w.addr)
        return w.value if unit is None else groups.pointer(unit, w.value)

    async def _check_no_stale_done(self, target, bits: list[int], where: str) -> None:
        """The done bits an operation will wait for must be clear before it starts: a bit an earlier operation
        raised and nobody cleared (an interrupt_mask missing one of its engines) would end this one at once on
        hardware, while golden, which runs an operation when it is enabled, would compute it right anyway."""
        status = await target.read_reg(self.net.intr_status_addr)
        stale = [b for b in bits if status >> b & 1]
        if stale:
            raise ExecutionError(f"{where}: GLB.S_INTR_STATUS bit(s) {stale} it waits for are already set before "
                                 f"it starts: an earlier operation left them (its interrupt_mask misses an engine "
                                 f"that raises a done bit)")

    async def run_dla(self, task: pb.Task) -> None:
        if self.pipeline:
            await self.run_dla_pipelined(task)
            return
        if self.record:
            await self._before_dla(task)
        for index, op in enumerate(task.dla.ops):
            where = f"task {task.id} ({task.name!r}) op {op.name!r}"
            target = self._target_of(task, index)
            groups = self.groups[id(target)]
            writes: list[tuple[int, int]] = []
            measure = self._start_measure(target, op) if self.profile is not None else None
            try:
                await self._check_no_stale_done(target, groups.done_bits(op.interrupt_mask), where)
                for w in op.writes:
                    value = self._value(w, groups)
                    await target.write_reg(w.addr, value)
                    writes.append((w.addr, value))
                bits = groups.done_bits(op.interrupt_mask)
                groups.started(self.net.op_units(op))
                for bit in bits:
                    await target.wait_interrupt(1 << bit, self.timeout_ns)
                # GLB.S_INTR_STATUS is write-1-to-clear, as the player does for intr_notify
                await target.write_reg(self.net.intr_status_addr, sum(1 << b for b in bits))
            except (InterruptTimeout, DlaError) as exc:
                raise ExecutionError(f"{where}: {type(exc).__name__}: {exc}") from exc
            for other in self.targets:
                if other is not target:
                    self.groups[id(other)].ran_elsewhere(self.net.op_units(op))
            if measure is not None:
                self._end_measure(measure, task, op.name, "dla")
            if self._current is not None:
                self._current.ops.append((writes, bits))
        if self.record:
            await self._after_dla(task)

    async def run_cpu(self, task: pb.Task) -> None:
        start = time.perf_counter()
        xs = [await self.read_float(n) for n in task.cpu.inputs]
        outs = run_cpu_task(task, xs, self.net.kernels)
        for name, y in zip(task.cpu.outputs, outs):
            await self.write_float(name, y, f"task {task.id} ({task.name!r})")
        if self.profile is not None:
            self.profile.add(OpProfile(self.sample[0], task.id, task.name, task.cpu.op, "cpu", "cpu", ("CPU",),
                                       time.perf_counter() - start, 0 if self.profile.clock else None))

    # ---- profiling ----------------------------------------------------------------------------------
    def _start_measure(self, target: Target, op: pb.DlaOp) -> tuple:
        assert self.profile is not None
        engines = self.net.op_engines(op)
        traffic = traffic_of(target, enable=True)
        if traffic is not None:
            traffic.engine = "+".join(engines)  # labels accesses a target cannot attribute (AXI ports)
        clock = self.profile.clock
        return (target, engines, traffic, traffic.snapshot() if traffic is not None else None,
                clock() if clock is not None else None, time.perf_counter())

    def _end_measure(self, measure: tuple, task: pb.Task, name: str, kind: str) -> None:
        assert self.profile is not None
        target, engines, traffic, snap, cycles, start = measure
        seconds = time.perf_counter() - start
        read = written = None
        if traffic is not None:
            traffic.engine = None
            read, written = traffic.since(snap)
        clock = self.profile.clock
        self.profile.add(OpProfile(self.sample[0], task.id, task.name, name, kind, target_label(target), engines,
                                   seconds, clock() - cycles if clock is not None else None, read, written))

    # ---- recording for traces ---------------------------------------------------------------------
    def _task_tensors(self, task: pb.Task) -> tuple[list[str], list[str]]:
        touched, written = [], []
        for op in task.dla.ops:
            for n in (*op.inputs, *op.outputs):
                if n not in touched and self.net.tensors[n].storage == pb.Tensor.FEATURE:
                    touched.append(n)
            for n in op.outputs:
                if n not in written and self.net.tensors[n].storage == pb.Tensor.FEATURE:
                    written.append(n)
        return touched, written

    async def _before_dla(self, task: pb.Task) -> None:
        rec = self._current = _TaskRecord(task)
        units = {u for op in task.dla.ops for w in op.writes if (u := self.net._pingpong_unit(w.addr))}
        for unit in sorted(units):
            word = await self.target.read_reg(self.net.regmap.address(unit, "S_POINTER"))
            rec.pointers[unit] = (producer(word), consumer(word))
        regions = sorted({w.reloc.region for op in task.dla.ops for w in op.writes if w.HasField("reloc")})
        for rid in regions:
            r = self.net.regions[rid]
            if r.kind == pb.Region.WEIGHTS and r.content:
                rec.loads.append((self.placement.mem[rid], self.placement.base[rid], r.content))
        # the bytes of every tensor the task touches (inputs, and outputs with their gaps), merged spans
        spans: dict[str, list[list[int]]] = {}
        for name in self._task_tensors(task)[0]:
            addr, span, mem = self._where(self.net.tensors[name])
            spans.setdefault(mem, []).append([addr, addr + span])
        for mem, ranges in spans.items():
            merged: list[list[int]] = []
            for lo, hi in sorted(ranges):
                if merged and lo <= merged[-1][1]:
                    merged[-1][1] = max(merged[-1][1], hi)
                else:
                    merged.append([lo, hi])
            for lo, hi in merged:
                rec.loads.append((mem, lo, await self.target.read_mem(lo, hi - lo, mem)))

    async def _after_dla(self, task: pb.Task) -> None:
        rec = self._current
        seen = set()
        for name in self._task_tensors(task)[1]:
            addr, span, mem = self._where(self.net.tensors[name])
            if (mem, addr, span) in seen:
                continue
            seen.add((mem, addr, span))
            rec.checks.append((mem, addr, span, zlib.crc32(await self.target.read_mem(addr, span, mem)), name))
        self.records.append(rec)
        self._current = None


def load(path: Path | str, *, kernels: Mapping[str, Kernel] | None = None) -> Network:
    """Read and validate a loadable file (``LoadableError`` on any problem) into a runnable Network."""
    return Network(read_loadable(path), path=path, kernels=kernels)
