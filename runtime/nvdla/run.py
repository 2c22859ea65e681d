"""Running an NVDLA flatbuffer loadable (``.nvdla``) on any Target, as NVDLA's runtime + kmd do.

``NvdlaNetwork.load(path)`` reads and checks the file. ``run(target)`` allocates every memory entry
(DRAM from 0x8000_0000, CV-SRAM from 0x5000_0000; page-aligned), writes the ``SET`` contents from the
blobs, then runs the tasks in submit-list order: DLA tasks through the firmware scheduler
(``runtime.nvdla.firmware``) with the task's address list, EMU1 tasks (softmax, power) through the CPU
emulator (``runtime.nvdla.emulator``). Outputs are the ``OUTPUT`` memories, read
back as their tensor descriptors say, and written as DIMG files (``o_000000.dimg``, ...) byte-compatible
with NVDLA's runtime.

The descriptor layout (with or without ``dla_data_cube.offset``) follows the descriptor blobs' version:
blobs written for firmware interface < 0.12 use the legacy layout (NVDLA's published regression
loadables are 0.10); ``layout=`` overrides it.
"""
from __future__ import annotations

import asyncio
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable

from dlaio import publish_dir
from golden.budget import MemoryBudgetError, check_size
from golden.config import HwConfig
from runtime.nvdla import fbs
from runtime.nvdla.dimg import DimgError, encode_dimg, surface_format
from runtime.nvdla.emulator import Emulator, EmulatorError
from runtime.nvdla.firmware import Firmware, FirmwareError, FirmwareStats, TaskMemory
from runtime.executor import allocate
from runtime.target import Target

__all__ = ["NvdlaNetwork", "NvdlaRunError", "Output", "is_nvdla_loadable"]

#: the first firmware interface version whose dla_data_cube has the offset member
MODERN_DESCRIPTORS = (0, 12)
_DESCRIPTOR_SUBS = (fbs.SUB_NETWORK, fbs.SUB_DEPGRAPH, fbs.SUB_OPS, fbs.SUB_SURFS, fbs.SUB_LUTS)


class NvdlaRunError(ValueError):
    """A loadable that cannot run (one line naming the task, op, memory or field)."""


def is_nvdla_loadable(head: bytes) -> bool:
    """A flatbuffer (uoffset root, then a vtable) and not our own ``DLALOAD`` container."""
    return len(head) >= 8 and not head.startswith(b"DLALOAD")


@dataclass
class Output:
    name: str
    memory: int
    data: bytes  # the tensor's buffer (tensor size bytes at its memory offset)
    tensor: fbs.TensorDesc

    def dimg(self, native_atom: int | None = None) -> bytes:
        """NVDLA's runtime's DIMG of this output, header as in NVDLA's regression goldens; with ``native_atom``
        (the hardware's int8 channels per atom), int8 features are dumped with their real interleave instead of
        NVDLA's fixed 32, and the header uses today's format enum (the goldens' runtime had no x8 format)."""
        t = self.tensor
        fmt = surface_format(t.pixel_format, t.data_type)
        if native_atom is not None and fmt == "D_F8_CxHWx_x32_I":
            fmt = {8: "D_F8_CxHWx_x8_I", 32: "D_F8_CxHWx_x32_I"}.get(native_atom, fmt)
        return encode_dimg(self.data, fmt, t.c, t.h, t.w, t.strides[1], t.strides[2], t.size,
                           golden_era=native_atom is None)


@dataclass
class TaskResult:
    task: int
    stats: FirmwareStats


@dataclass
class RunResult:
    outputs: list[Output] = field(default_factory=list)
    tasks: list[TaskResult] = field(default_factory=list)
    #: On a simulated DUT (``tb.nvdla_network``): simulated cycles of the whole run, bytes the DUT's AXI
    #: ports read and wrote, and (cycle, event) of the firmware's program/enable/done steps and of the
    #: interrupt line's rises.
    cycles: int | None = None
    dut_read: int | None = None
    dut_written: int | None = None
    timeline: list[tuple[int, str]] = field(default_factory=list)


class NvdlaNetwork:
    def __init__(self, ld: fbs.NvdlaLoadable, *, path: Path | str | None = None, layout: str = "auto") -> None:
        self.ld = ld
        self.path = Path(path) if path else None
        self.name = self.path.name if self.path else "loadable"
        self.legacy = self._legacy(layout)
        self._check()

    @classmethod
    def load(cls, path: Path | str, layout: str = "auto") -> "NvdlaNetwork":
        try:
            st = Path(path).stat()
            if not stat.S_ISREG(st.st_mode):
                raise NvdlaRunError(f"{path}: not a regular file")
            check_size("loadable file", st.st_size)
            buf = Path(path).read_bytes()
        except MemoryBudgetError as exc:
            raise NvdlaRunError(f"{path}: {exc}") from None
        except OSError as exc:
            raise NvdlaRunError(f"{path}: {exc.strerror}") from None
        try:
            return cls(fbs.parse(buf), path=path, layout=layout)
        except fbs.NvdlaLoadableError as exc:
            raise NvdlaRunError(f"{path}: {exc}") from None

    # ---- checks ----------------------------------------------------------------------------------
    def _legacy(self, layout: str) -> bool:
        if layout in ("legacy", "current"):
            return layout == "legacy"
        if layout != "auto":
            raise NvdlaRunError(f"descriptor layout {layout!r}: use auto, legacy or current")
        versions = {(b.version.major, b.version.minor) for b in self.ld.blobs if b.interface != fbs.IF_EMU1
                    and (b.interface == fbs.IF_DLA1 or b.sub_interface in _DESCRIPTOR_SUBS)}
        return bool(versions) and max(versions) < MODERN_DESCRIPTORS

    def _fail(self, message: str) -> NvdlaRunError:
        return NvdlaRunError(f"{self.name}: {message}")

    def _check(self) -> None:
        """Every cross reference resolves before anything runs (dangling ids are user errors)."""
        ld = self.ld
        self.memories = {m.id: m for m in ld.memories}
        self.addresses = {a.id: a for a in ld.addresses}
        self.tensors = {t.id: t for t in ld.tensors}
        self.blobs = {b.name: b for b in ld.blobs}
        if len(self.memories) != len(ld.memories):
            raise self._fail("duplicate memory ids")
        total = 0
        for i, m in enumerate(ld.memories):  # each is allocated (a bytearray of its size) when the network runs
            try:
                check_size(f"memory_list[{i}].size (memory {m.id})", m.size)
                total = check_size(f"sum of memory_list[0..{i}].size", total + m.size)
            except MemoryBudgetError as exc:
                raise self._fail(str(exc)) from None
        for m in ld.memories:
            if len(m.contents) != len(m.offsets) and m.flags & fbs.MEM_SET:
                raise self._fail(f"memory {m.id}: {len(m.contents)} contents but {len(m.offsets)} offsets")
            if m.domain not in (0, 1):
                raise self._fail(f"memory {m.id}: domain {m.domain} is neither SYSTEM nor SRAM")
            if m.flags & fbs.MEM_SET:
                for name, off in zip(m.contents, m.offsets):
                    if not name:
                        continue
                    blob = self.blobs.get(name)
                    if blob is None:
                        raise self._fail(f"memory {m.id}: content blob {name!r} does not exist")
                    if off + len(blob.data) > m.size:
                        raise self._fail(f"memory {m.id}: blob {name!r} ({len(blob.data)} bytes at offset {off}) "
                                         f"does not fit its {m.size} bytes")
        for a in ld.addresses:
            m = self.memories.get(a.mem_id)
            if m is None:
                raise self._fail(f"address {a.id}: memory {a.mem_id} does not exist")
            if a.offset > m.size:
                raise self._fail(f"address {a.id}: offset {a.offset} is past memory {m.id} ({m.size} bytes)")
            if a.offset + a.size > m.size:  # a size of 2^40 is a corrupt entry, not a window to clamp
                raise self._fail(f"address {a.id}: {a.size} bytes at offset {a.offset} do not fit memory {m.id} "
                                 f"({m.size} bytes)")
        for t in ld.tasks:
            for i, aid in enumerate(t.address_list):
                if aid not in self.addresses and aid != 0xFFFF:
                    raise self._fail(f"task {t.id}: address_list[{i}] = {aid} does not exist")
            if t.interface not in (fbs.IF_DLA1, fbs.IF_EMU1):
                raise self._fail(f"task {t.id}: interface {t.interface} is neither DLA1 nor EMU1")
        task_ids = {t.id for t in ld.tasks}
        for s in ld.submits:
            for tid in s.task_id:
                if tid not in task_ids:
                    raise self._fail(f"submit {s.id}: task {tid} does not exist")
        for m in ld.memories:
            if m.flags & fbs.MEM_OUTPUT:
                t = self.tensors.get(m.tensor_desc_id)
                if t is None:
                    raise self._fail(f"memory {m.id}: output tensor descriptor {m.tensor_desc_id} does not exist")
                if t.mem_id != m.id or t.offset + t.size > m.size:
                    raise self._fail(f"tensor {t.name!r}: {t.size} bytes at offset {t.offset} of memory {t.mem_id} "
                                     f"do not fit output memory {m.id} ({m.size} bytes)")

    # ---- running -----------------------------------------------------------------------------------
    def place(self) -> dict[int, tuple[int, str]]:
        """memory id -> (bus address, memory name)."""
        mem = {m.id: "pri_mem" if m.domain == 0 else "sec_mem" for m in self.ld.memories}
        base = allocate((m.id, mem[m.id], m.size, m.alignment) for m in self.ld.memories)
        return {i: (base[i], mem[i]) for i in mem}

    def submit_order(self) -> list[fbs.TaskEntry]:
        by_id = {t.id: t for t in self.ld.tasks}
        if self.ld.submits:
            return [by_id[tid] for s in sorted(self.ld.submits, key=lambda s: s.id) for tid in s.task_id]
        return sorted(self.ld.tasks, key=lambda t: t.id)

    async def _emulate(self, task: fbs.TaskEntry, target: Target, where: dict[int, tuple[int, str]],
                       log: Callable[[str], None] | None) -> FirmwareStats:
        """An EMU1 task through ``runtime.nvdla.emulator``, its address list mapped as NVDLA's runtime maps it
        for the CPU: memory + offset, up to the end of the memory; CV-SRAM unmapped (None)."""
        entries: list[tuple[int, int, str] | None] = []
        for aid in task.address_list:
            a = self.addresses[aid]
            m = self.memories[a.mem_id]
            base, mem = where[m.id]
            entries.append(None if m.domain == 1 else (base + a.offset, m.size - a.offset, mem))
        try:
            return await Emulator(target, entries, legacy=self.legacy, log=log).execute()
        except EmulatorError as exc:
            raise self._fail(f"task {task.id} (EMU): {exc}") from None

    async def run_async(self, target: Target, *, hw: HwConfig | None = None, timeout_ns: int = 10_000_000_000,
                        log: Callable[[str], None] | None = None) -> RunResult:
        hw = hw or target.hw
        where = self.place()
        for m in self.ld.memories:
            if m.domain == 1 and not hw.secondary_memif:
                raise self._fail(f"memory {m.id} is in SRAM (CV-SRAM), which {hw.name} does not have")
        for m in self.ld.memories:
            base, mem = where[m.id]
            data = bytearray(m.size)
            if m.flags & fbs.MEM_SET:
                for name, off in zip(m.contents, m.offsets):
                    if name:
                        blob = self.blobs[name].data
                        data[off:off + len(blob)] = blob
            if m.size:
                await target.write_mem(base, bytes(data), mem)
        result = RunResult()
        for task in self.submit_order():
            if task.interface == fbs.IF_EMU1:  # NVDLA's runtime runs it on the CPU, blocking, in submit order
                result.tasks.append(TaskResult(task.id, await self._emulate(task, target, where, log)))
                continue
            entries = []
            for aid in task.address_list:
                a = self.addresses[aid]
                m = self.memories[a.mem_id]
                base, mem = where[m.id]
                size = min(a.size, m.size - a.offset) if a.size else m.size - a.offset
                entries.append((base + a.offset, size, mem))

            async def read(addr: int, size: int, mem: str) -> bytes:
                return await target.read_mem(addr, size, mem)

            fw = Firmware(target, hw, TaskMemory(entries, read), legacy=self.legacy, timeout_ns=timeout_ns, log=log)
            try:
                stats = await fw.execute()
            except FirmwareError as exc:
                raise self._fail(f"task {task.id}: {exc}") from None
            result.tasks.append(TaskResult(task.id, stats))
        for m in self.ld.memories:
            if m.flags & fbs.MEM_OUTPUT:
                t = self.tensors[m.tensor_desc_id]
                base, mem = where[m.id]
                data = await target.read_mem(base + t.offset, t.size, mem)
                result.outputs.append(Output(t.name, m.id, data, t))
        return result

    def run(self, target: Target, **kw) -> RunResult:
        return asyncio.run(self.run_async(target, **kw))

    def dimgs(self, result: RunResult, native_atom: int | None = None) -> list[bytes]:
        blobs = []
        for out in result.outputs:
            try:
                blobs.append(out.dimg(native_atom))
            except DimgError as exc:
                hint = "" if native_atom else "; --dimg-format native dumps it with the hardware's own atom"
                raise self._fail(f"output {out.name!r}: {exc}{hint}") from None
        return blobs

    def write_dimgs(self, blobs: list[bytes], outdir: Path | str, *, inputs: Iterable[Path | str] = ()) -> list[Path]:
        """o_000000.dimg, o_000001.dimg, ... in output order, all or nothing through the one output writer
        (``dlaio.publish_dir``: never over a device or into a folder holding one of ``inputs``)."""
        files = {f"o_{i:06d}.dimg": blob for i, blob in enumerate(blobs)}
        publish_dir(outdir, files, inputs=inputs)
        return [Path(outdir) / name for name in files]
