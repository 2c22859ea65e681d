"""NVDLA's kmd firmware scheduler (``kmd/firmware/scheduler.c``) over the async Target protocol.

It executes one DLA task the way the firmware does, so a loadable's register traffic on our targets is
the traffic NVDLA's own software would produce:

- ``initiate``: for each engine, submit the op at ``op_head`` and then the next one of the same engine
  (found through the tail op's consumer slot of its own type): up to two ops in flight per engine, one
  per ping-pong group;
- submit = prepare (a free group from the hardware's S_POINTER CONSUMER and the firmware's own group
  bookkeeping; descriptors read from memory) + program (``set_producer``, unmask the done interrupts,
  every D_ register) + enable when the op's ``dependency_count`` is 0;
- events (OP_PROGRAMMED, OP_ENABLED, OP_COMPLETED, CDMA_WT/DT_DONE) decrement the dependency counts of the
  consumers listed in the op's ``dla_common_op_desc``; a consumer reaching 0 is enabled. A fused pair
  (conv -> SDP, SDP -> PDP on the fly) is enabled consumer first, because the producer waits for the
  consumer's OP_ENABLED;
- interrupts: GLB.S_INTR_STATUS is read, written back to clear it, and turned into group events; the
  engines are then served in op-type order, each starting from the group after the one that last
  completed, as ``dla_process_events`` does.

Differences from the C firmware: a descriptor the firmware would read out of bounds, an unknown op type,
or a dependency graph that can never finish (the C firmware would hang) raise ``FirmwareError`` naming the
op; an op the firmware completes itself (a BDMA op with no transfers) is handled at once instead of with
the next interrupt. Stats (STAT_ENABLE) and dynamic ROIs are not supported.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable

from golden.config import HwConfig
from golden.errors import DlaError
from golden.regs import register_map
from runtime.groups import consumer, group_bit
from runtime.nvdla import descriptors as d
from runtime.nvdla.engines import PROGRAMMERS, FirmwareError, FirmwareStep, Group, Programmer, programmer_of
from runtime.target import InterruptTimeout, Target

__all__ = ["FirmwareError", "TaskMemory", "Firmware", "FirmwareStats"]


@dataclass
class TaskMemory:
    """The task's address list as the firmware sees it: index -> (bus address, size, memory name), and a
    reader of descriptor bytes."""

    entries: list[tuple[int, int, str]]
    read: Callable[[int, int, str], "bytes"]  # async in practice; see Firmware._read

    def address(self, index: int, offset: int, what: str) -> int:
        if not 0 <= index < len(self.entries):
            raise FirmwareError(f"{what}: address index {index} is outside the task's address list "
                                f"({len(self.entries)} entries)")
        base, size, _ = self.entries[index]
        if offset > size:
            raise FirmwareError(f"{what}: offset {offset} is past the end of address {index} ({size} bytes)")
        return base + offset


@dataclass
class FirmwareStats:
    """What one task did: ops per engine, register writes, interrupts serviced, wall time."""

    ops: dict[str, int] = field(default_factory=dict)
    writes: int = 0
    reads: int = 0
    interrupts: int = 0
    max_in_flight: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0


class _Processor:
    """One engine's firmware state (``dla_processor``)."""

    def __init__(self, engine: Programmer) -> None:
        self.engine = engine
        self.groups: list[Group | None] = [None, None]
        self.events = [0, 0]
        self.group_status = 0
        self.rdma_status = 0
        self.last_group = 1
        self.tail_op: d.Struct | None = None


class Firmware:
    """Runs the DLA task whose address list is ``memory`` on ``target``."""

    def __init__(self, target: Target, hw: HwConfig, memory: TaskMemory, *, legacy: bool = False,
                 timeout_ns: int = 10_000_000_000, log: Callable[[str], None] | None = None) -> None:
        self.target, self.hw, self.mem, self.legacy = target, hw, memory, legacy
        self.timeout_ns = timeout_ns
        self.log = log
        self.regmap = register_map(hw.address_map)
        self.stats = FirmwareStats()
        self.procs = {e.op_type: _Processor(e) for e in sorted(PROGRAMMERS.values(), key=lambda e: e.op_type)}
        self.op_cache: dict[int, d.Struct] = {}
        self.done_ops = 0
        self.in_flight: dict[int, int] = {}

    # ---- memory ----------------------------------------------------------------------------------
    async def _read(self, index: int, offset: int, size: int, what: str) -> bytes:
        if not 0 <= index < len(self.mem.entries):
            raise FirmwareError(f"{what}: address index {index} is outside the task's address list "
                                f"({len(self.mem.entries)} entries)")
        base, avail, mem = self.mem.entries[index]
        if offset + size > avail:
            raise FirmwareError(f"{what}: bytes {offset}..{offset + size} are outside address {index} "
                                f"({avail} bytes)")
        return await self.mem.read(base + offset, size, mem)

    async def _write(self, unit: str, name: str, value: int) -> None:
        self.stats.writes += 1
        await self.target.write_reg(self.regmap.address(unit, name), value)

    async def _run_program(self, p: FirmwareStep) -> None:
        for i, (unit, name, value) in enumerate(p.writes):
            if i in p.polls:
                await self._poll(p.polls[i], p.where)
            await self._write(unit, name, value)

    def _program(self, where: str) -> FirmwareStep:
        return FirmwareStep(self.regmap, self.hw, lambda i, off: self.mem.address(i, off, where), self._lut_sync, where)

    # ---- network -----------------------------------------------------------------------------------
    async def load_network(self) -> None:
        raw = await self._read(0, 0, d.NetworkDesc.nbytes(), "network descriptor (address 0)")
        net = self.net = d.NetworkDesc.decode(raw)
        if net.num_rois > 1 or net.dynamic_roi:
            raise FirmwareError(f"network descriptor: {net.num_rois} ROIs / dynamic ROI are not supported")
        n = net.num_operations
        what = "network descriptor"
        self.ops_raw = await self._read(net.operation_desc_index, 0, n * d.OPERATION_CONTAINER_SIZE,
                                        f"{what}: operation_desc_index for {n} operations")
        self.surfs_raw = await self._read(net.surface_desc_index, 0, n * d.SURFACE_CONTAINER_SIZE,
                                          f"{what}: surface_desc_index for {n} operations")
        self.deps_raw = await self._read(net.dependency_graph_index, 0, n * d.CommonOpDesc.nbytes(),
                                         f"{what}: dependency_graph_index for {n} operations")
        self.luts: list[d.Struct] = []
        if net.num_luts:
            raw = await self._read(net.lut_data_index, 0, net.num_luts * d.LutParam.nbytes(),
                                   f"{what}: lut_data_index for {net.num_luts} LUTs")
            self.luts = [d.LutParam.decode(raw, i * d.LutParam.nbytes()) for i in range(net.num_luts)]
        for t, head in enumerate(net.op_head):
            if head >= n or head < -1:
                raise FirmwareError(f"{what}: op_head[{d.OP_NAMES[t]}] = {head}, but there are {n} operations")

    def _lut_sync(self, index: int) -> d.Struct:
        if not 0 <= index < len(self.luts):
            raise FirmwareError(f"lut_index {index}: the network has {len(self.luts)} LUTs")
        return self.luts[index]

    def get_op(self, index: int, what: str, op_type: int | None = None) -> d.Struct | None:
        """The cached dla_common_op_desc (its dependency_count is the live one), None for index -1.
        Like the firmware's op cache, the descriptor's own ``index`` is overwritten with the index it was
        fetched by, and a fetched ``op_type`` other than the one the caller expects is an error."""
        if index == -1:
            return None
        if not 0 <= index < self.net.num_operations:
            raise FirmwareError(f"{what}: op index {index} outside 0..{self.net.num_operations - 1}")
        op = self.op_cache.get(index)
        if op is None:
            op = d.CommonOpDesc.decode(self.deps_raw, index * d.CommonOpDesc.nbytes())
            op.index = index
            if programmer_of(op.op_type) is None:
                name = d.OP_NAMES[op.op_type] if op.op_type < len(d.OP_NAMES) else f"type {op.op_type}"
                raise FirmwareError(f"op {index}: {name} operations are not supported by this firmware model "
                                    f"(engines: {', '.join(PROGRAMMERS)})")
            self.op_cache[index] = op
        if op_type is not None and op.op_type != op_type:
            raise FirmwareError(f"{what}: op {index} is {d.OP_NAMES[op.op_type]}, expected {d.OP_NAMES[op_type]}")
        return op

    def _where(self, op: d.Struct) -> str:
        return f"op {op.index} ({d.OP_NAMES[op.op_type]})"

    # ---- the scheduler -----------------------------------------------------------------------------
    async def _free_group(self, proc: _Processor) -> tuple[int, int] | None:
        e = proc.engine
        if proc.group_status == 0x3:
            return None
        running = e.consumer_of(await self.target.read_reg(self.regmap.address(e.pointer_unit, e.pointer_register)))
        rdma = 0
        if e.rdma_pointer_unit is not None:
            rdma = consumer(await self.target.read_reg(self.regmap.address(e.rdma_pointer_unit, "S_POINTER")))
        self.stats.reads += 2 if e.rdma_pointer_unit else 1
        group = running if not proc.group_status else int(not (proc.group_status >> 1))
        rdma_id = rdma if not proc.rdma_status else int(not (proc.rdma_status >> 1))
        return group, rdma_id

    async def submit(self, proc: _Processor, op: d.Struct) -> None:
        ids = await self._free_group(proc)
        if ids is None:
            return  # both groups busy: the op is picked up on a completion (dequeue)
        gid, rdma_id = ids
        op_cls, surf_cls = d.OP_STRUCTS[op.op_type]
        try:
            op_desc = op_cls.decode(self.ops_raw, op.index * d.OPERATION_CONTAINER_SIZE, self.legacy)
            surf = surf_cls.decode(self.surfs_raw, op.index * d.SURFACE_CONTAINER_SIZE, self.legacy)
        except d.DescriptorError as exc:
            raise FirmwareError(f"{self._where(op)}: {exc}") from None
        g = Group(id=gid, rdma_id=rdma_id, index=op.index, op=op_desc, surface=surf)
        proc.groups[gid] = g
        proc.group_status |= 1 << gid
        g.rdma_needed = proc.engine.rdma_needed(op_desc, surf)
        if g.rdma_needed:
            proc.rdma_status |= 1 << rdma_id
        proc.tail_op = op
        if not proc.engine.is_ready(g, proc.groups[1 - gid]):
            return
        await self.program(proc, g)
        if op.dependency_count == 0:
            await self.enable(proc, op)

    async def program(self, proc: _Processor, g: Group) -> None:
        op = self.op_cache[g.index]
        e = proc.engine
        g.programming = True
        p = self._program(self._where(op))
        e.set_producer(p, g.id, g.rdma_id)
        await self._run_program(p)
        if e.intr_mask_fields:  # dla_enable_intr: clear the engine's done bits in the mask
            mask_addr = self.regmap.address("GLB", "S_INTR_MASK")
            bits = self.regmap.unit("GLB").register("S_INTR_MASK").encode(**{f: 1 for f in e.intr_mask_fields})
            mask = await self.target.read_reg(mask_addr)
            self.stats.reads += 1
            await self._write("GLB", "S_INTR_MASK", mask & ~bits)
        for unit in e.idle_units:  # the group must not be running anything
            status = await self.target.read_reg(self.regmap.address(unit, "S_STATUS"))
            self.stats.reads += 1
            if self.regmap.unit(unit).register("S_STATUS").field(f"STATUS_{g.id}").decode(status) != 0:
                raise FirmwareError(f"{self._where(op)}: {unit} group {g.id} is not idle (S_STATUS {status:#x})")
        p = self._program(self._where(op))
        e.program(p, g)
        await self._run_program(p)
        if self.log:
            self.log(f"program {self._where(op)} group {g.id}: {len(p.writes)} writes")
        # the consumers are resolved now (dla_get_op_desc validates them)
        for i, c in enumerate(op.consumers):
            self.get_op(c.index, f"{self._where(op)} consumer[{d.OP_NAMES[i]}]", i)
        if op.fused_parent.index != -1 and op.op_type == 0:
            raise FirmwareError(f"{self._where(op)}: BDMA ops have no fused parent")
        self.get_op(op.fused_parent.index, f"{self._where(op)} fused_parent", op.op_type - 1)
        g.pending = False
        await self.update_consumers(op, d.EVENT_OP_PROGRAMMED)
        g.programming = False

    async def enable(self, proc: _Processor, op: d.Struct) -> None:
        for g in proc.groups:
            if g is not None and proc.group_status >> g.id & 1 and g.index == op.index and not g.pending:
                break
        else:
            return  # not programmed yet: submit/complete enables it once it is
        if g.programming or g.active:
            return
        if proc.engine.enable_poll is not None:
            await self._poll(proc.engine.enable_poll, self._where(op))
        p = self._program(self._where(op))
        proc.engine.set_producer(p, g.id, g.rdma_id)
        proc.engine.enable(p, g)
        await self._run_program(p)
        if self.log:
            self.log(f"enable {self._where(op)} group {g.id}")
        g.active = True
        if proc.engine.completes_at_enable(g):  # e.g. dla_bdma_enable with no transfers
            proc.events[g.id] |= 1 << d.EVENT_OP_COMPLETED
        name = proc.engine.name
        self.stats.ops[name] = self.stats.ops.get(name, 0) + 1
        live = sum(1 for x in proc.groups if x is not None and x.active)
        self.stats.max_in_flight[name] = max(self.stats.max_in_flight.get(name, 0), live)
        await self.update_consumers(op, d.EVENT_OP_ENABLED)

    async def _poll(self, what: tuple[str, str, str], where: str, limit: int = 100_000) -> None:
        unit, name, fld = what
        addr = self.regmap.address(unit, name)
        field_ = self.regmap.unit(unit).register(name).field(fld)
        for _ in range(limit):
            self.stats.reads += 1
            if field_.decode(await self.target.read_reg(addr)):
                return
        raise FirmwareError(f"{where}: {unit}.{name}.{fld} never became set ({limit} reads)")

    async def update_consumers(self, op: d.Struct, event: int) -> None:
        for c in (*op.consumers, op.fused_parent):
            if c.index == -1 or c.event != event:
                continue
            target = self.get_op(c.index, f"{self._where(op)} consumer")
            if target is None:
                continue
            if target.dependency_count == 0:
                raise FirmwareError(f"{self._where(op)}: consumer op {target.index} has dependency_count 0 "
                                    "but is signalled again (inconsistent dependency graph)")
            target.dependency_count -= 1
            if target.dependency_count == 0:
                await self.enable(self.procs[target.op_type], target)

    async def dequeue(self, proc: _Processor) -> None:
        if proc.tail_op is None:
            return
        index = proc.tail_op.consumers[proc.engine.op_type].index
        if index == -1:
            return
        nxt = self.get_op(index, f"{self._where(proc.tail_op)} next {proc.engine.name} op", proc.engine.op_type)
        await self.submit(proc, nxt)

    async def complete(self, proc: _Processor, g: Group) -> None:
        op = self.op_cache[g.index]
        self.done_ops += 1
        proc.group_status &= ~(1 << g.id)
        if g.rdma_needed:
            proc.rdma_status &= ~(1 << g.rdma_id)
        g.active = False
        g.lut_index = -1
        proc.last_group = g.id
        if self.log:
            self.log(f"done {self._where(op)} group {g.id}")
        await self.update_consumers(op, d.EVENT_OP_COMPLETED)
        proc.groups[g.id] = None
        if self.done_ops == self.net.num_operations:
            return
        nxt = proc.groups[1 - g.id]
        if nxt is not None and nxt.pending and proc.engine.is_ready(nxt, None):
            await self.program(proc, nxt)
            if self.op_cache[nxt.index].dependency_count == 0:
                await self.enable(proc, self.op_cache[nxt.index])
        await self.dequeue(proc)

    async def initiate(self) -> None:
        for t, head in enumerate(self.net.op_head):
            if head == -1:
                continue
            op = self.get_op(head, f"op_head[{d.OP_NAMES[t]}]", t)
            proc = self.procs[op.op_type]
            await self.submit(proc, op)
            await self.dequeue(proc)

    # ---- interrupts ----------------------------------------------------------------------------------
    def _watched_bits(self) -> int:
        bits = 0
        for proc in self.procs.values():
            e = proc.engine
            bits |= 0b11 << e.done_bit
            for bit, _ in e.extra_events:
                bits |= 0b11 << bit
        return bits

    async def _take_interrupt(self) -> None:
        """Wait for an interrupt, clear it and turn its bits into group events (dla_isr_handler)."""
        await self.target.wait_interrupt(self._watched_bits(), self.timeout_ns)
        status_addr = self.regmap.address("GLB", "S_INTR_STATUS")
        status = await self.target.read_reg(status_addr)
        await self._write("GLB", "S_INTR_STATUS", status)
        self.stats.reads += 1
        self.stats.interrupts += 1
        for proc in self.procs.values():
            e = proc.engine
            for gid in (0, 1):
                if status >> group_bit(e.done_bit, gid) & 1:
                    proc.events[gid] |= 1 << d.EVENT_OP_COMPLETED
                for bit, event in e.extra_events:
                    if status >> group_bit(bit, gid) & 1:
                        proc.events[gid] |= 1 << event

    async def service(self) -> None:
        """Take an interrupt and handle every event it carries (dla_isr_handler + dla_process_events).
        Events the firmware raised itself (a BDMA op with no transfers) are handled without waiting: the C
        firmware sees them with the next interrupt, which never comes when nothing else runs."""
        if not any(any(proc.events) for proc in self.procs.values()):
            await self._take_interrupt()
        for proc in self.procs.values():
            gid = 1 - proc.last_group
            for _ in range(2):
                events, g = proc.events[gid], proc.groups[gid]
                proc.events[gid] = 0
                if events and g is None:
                    raise FirmwareError(f"{proc.engine.name} group {gid} raised an interrupt but holds no op")
                if g is not None:
                    op = self.op_cache[g.index]
                    for event in (d.EVENT_CDMA_WT_DONE, d.EVENT_CDMA_DT_DONE):
                        if events >> event & 1:
                            await self.update_consumers(op, event)
                    if events >> d.EVENT_OP_COMPLETED & 1:
                        await self.complete(proc, g)
                gid = 1 - gid

    def _stall_report(self) -> str:
        waiting = []
        for proc in self.procs.values():
            for g in proc.groups:
                if g is not None:
                    op = self.op_cache[g.index]
                    state = "running" if g.active else "pending" if g.pending else \
                        f"waiting on {op.dependency_count} event(s)"
                    waiting.append(f"{self._where(op)} group {g.id} {state}")
        return "; ".join(waiting) or "no op is programmed"

    async def execute(self) -> FirmwareStats:
        start = time.perf_counter()
        try:
            await self.load_network()
            if self.net.num_operations:
                await self.initiate()
            while self.done_ops < self.net.num_operations:
                try:
                    await self.service()
                except InterruptTimeout:
                    raise FirmwareError(f"task stalled after {self.done_ops} of {self.net.num_operations} ops: "
                                        f"{self._stall_report()}") from None
        except DlaError as exc:
            raise FirmwareError(f"the DLA refused a register program: {exc}") from exc
        self.stats.seconds = time.perf_counter() - start
        return self.stats
