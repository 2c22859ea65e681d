"""NVDLA's flatbuffer loadable (nvdla/sw ``umd/core/src/common/loadable.fbs``, version 0.7.x): a
bounds-checked reader and a writer.

The accessors are written by hand from the schema's field order (a table's n-th field sits in vtable
slot ``4 + 2n``). Reading never trusts an offset: every access is checked against the buffer, so a
truncated or corrupt file raises ``NvdlaLoadableError`` naming what could not be read, never an
IndexError or garbage. Writing uses the ``flatbuffers`` package's Builder.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Callable, TypeVar

import flatbuffers

__all__ = [
    "NvdlaLoadableError", "Version", "Blob", "MemoryEntry", "EventEntry", "TaskEntry", "AddressEntry",
    "SubmitEntry", "TensorDesc", "RelocEntry", "NvdlaLoadable", "parse", "build", "SCHEMA_VERSION",
    "IF_NONE", "IF_DLA1", "IF_EMU1", "MEM_ALLOC", "MEM_SET", "MEM_INPUT", "MEM_OUTPUT",
    "SUB_NETWORK", "SUB_DEPGRAPH", "SUB_OPS", "SUB_SURFS", "SUB_LUTS",
]

#: The schema version this reader and writer follow; files must have the same major and minor.
SCHEMA_VERSION = (0, 7, 0)
IF_NONE, IF_DLA1, IF_EMU1 = 0, 1, 2
MEM_ALLOC, MEM_SET, MEM_INPUT, MEM_OUTPUT = 1, 2, 4, 8
#: Blob sub_interface of the DLA1 task descriptors.
SUB_NETWORK, SUB_DEPGRAPH, SUB_OPS, SUB_SURFS, SUB_LUTS = 1, 2, 3, 4, 5


class NvdlaLoadableError(ValueError):
    """The file is not a readable NVDLA flatbuffer loadable (one line, names what is wrong)."""


@dataclass
class Version:
    major: int = SCHEMA_VERSION[0]
    minor: int = SCHEMA_VERSION[1]
    sub_minor: int = SCHEMA_VERSION[2]

    def __str__(self) -> str:
        return f"{self.major}.{self.minor}.{self.sub_minor}"


@dataclass
class Blob:
    name: str
    data: bytes
    interface: int = IF_NONE
    sub_interface: int = 0
    version: Version = field(default_factory=lambda: Version(0, 0, 0))
    size: int | None = None  # the declared size; None: len(data)


@dataclass
class MemoryEntry:
    id: int
    size: int
    domain: int = 0  # 0 SYSTEM (DRAM), 1 SRAM
    flags: int = MEM_ALLOC
    alignment: int = 4096
    contents: list[str] = field(default_factory=list)
    offsets: list[int] = field(default_factory=list)
    bind_id: int = 0
    tensor_desc_id: int = 0


@dataclass
class EventEntry:
    id: int
    type: int = 0
    target: int = 0
    val: int = 0
    op: int = 0


@dataclass
class TaskEntry:
    id: int
    interface: int = IF_DLA1
    instance: int = -1
    address_list: list[int] = field(default_factory=list)
    pre_actions: list[int] = field(default_factory=list)
    post_actions: list[int] = field(default_factory=list)


@dataclass
class AddressEntry:
    id: int
    mem_id: int
    offset: int = 0
    size: int = 0


@dataclass
class SubmitEntry:
    id: int
    task_id: list[int] = field(default_factory=list)


@dataclass
class TensorDesc:
    name: str
    id: int
    mem_id: int
    size: int
    offset: int = 0
    data_format: int = 1  # NCHW
    data_type: int = 4  # INT8
    data_category: int = 2  # FEATURE
    pixel_format: int = 36  # FEATURE
    pixel_mapping: int = 0
    n: int = 1
    c: int = 1
    h: int = 1
    w: int = 1
    strides: list[int] = field(default_factory=lambda: [0] * 8)  # stride_0..7


@dataclass
class RelocEntry:
    address_id: int
    write_id: int
    offset: int
    interface: int = IF_DLA1
    sub_interface: int = 0
    reloc_type: int = 0


@dataclass
class NvdlaLoadable:
    version: Version = field(default_factory=Version)
    tasks: list[TaskEntry] = field(default_factory=list)
    memories: list[MemoryEntry] = field(default_factory=list)
    addresses: list[AddressEntry] = field(default_factory=list)
    events: list[EventEntry] = field(default_factory=list)
    blobs: list[Blob] = field(default_factory=list)
    tensors: list[TensorDesc] = field(default_factory=list)
    relocs: list[RelocEntry] = field(default_factory=list)
    submits: list[SubmitEntry] = field(default_factory=list)

    def blob(self, name: str) -> Blob:
        for b in self.blobs:
            if b.name == name:
                return b
        raise NvdlaLoadableError(f"no blob named {name!r}")


# ---- reading ---------------------------------------------------------------------------------------------
_T = TypeVar("_T")


#: field names per table, in schema order (for error messages)
_FIELDS = {
    "Loadable": ("version", "task_list", "memory_list", "address_list", "event_list", "blobs", "tensor_desc_list",
                 "reloc_list", "submit_list"),
    "task_list": ("id", "interface", "instance", "address_list", "pre_actions", "post_actions"),
    "memory_list": ("id", "domain", "flags", "size", "alignment", "contents", "offsets", "bind_id", "tensor_desc_id"),
    "address_list": ("id", "mem_id", "offset", "size"),
    "event_list": ("id", "type", "target", "val", "op"),
    "blobs": ("name", "size", "interface", "sub_interface", "version", "data"),
    "tensor_desc_list": ("name", "id", "mem_id", "size", "offset", "data_format", "data_type", "data_category",
                         "pixel_format", "pixel_mapping", "n", "c", "h", "w") + tuple(f"stride_{i}" for i in range(8)),
    "reloc_list": ("address_id", "write_id", "offset", "interface", "sub_interface", "reloc_type"),
    "submit_list": ("id", "task_id"),
}


class _Table:
    """One flatbuffer table at ``pos`` in ``buf``, every read bounds-checked."""

    def __init__(self, buf: bytes, pos: int, what: str) -> None:
        self.buf, self.pos, self.what = buf, pos, what
        self.names = _FIELDS.get(what.split("[")[0], ())
        soff = self._get("<i", pos, "vtable offset")
        self.vt = pos - soff
        self.vt_len = self._get("<H", self.vt, "vtable size")
        if self.vt_len < 4 or self.vt_len % 2:
            raise NvdlaLoadableError(f"{what}: corrupt vtable (size {self.vt_len})")
        self._get("<H", self.vt + self.vt_len - 2, "vtable")

    def _name(self, index: int) -> str:
        return self.names[index] if index < len(self.names) else f"field {index}"

    def _get(self, fmt: str, at: int, what: str) -> int:
        n = struct.calcsize(fmt)
        if at < 0 or at + n > len(self.buf):
            raise NvdlaLoadableError(f"{self.what}: {what} at byte {at} is outside the {len(self.buf)}-byte file "
                                     "(truncated or corrupt)")
        return struct.unpack_from(fmt, self.buf, at)[0]

    def _field(self, index: int) -> int:
        slot = 4 + 2 * index
        if slot >= self.vt_len:
            return 0
        off = self._get("<H", self.vt + slot, f"{self._name(index)} slot")
        return self.pos + off if off else 0

    def scalar(self, index: int, fmt: str, default: int = 0) -> int:
        at = self._field(index)
        return self._get("<" + fmt, at, f"{self._name(index)}") if at else default

    def _indirect(self, at: int, what: str) -> int:
        return at + self._get("<I", at, what)

    def string(self, index: int, default: str = "") -> str:
        at = self._field(index)
        if not at:
            return default
        return self._string_at(self._indirect(at, f"{self._name(index)}"), f"{self._name(index)}")

    def _string_at(self, s: int, what: str) -> str:
        n = self._get("<I", s, f"{what} length")
        if s + 4 + n > len(self.buf):
            raise NvdlaLoadableError(f"{self.what}: {what} ({n} bytes) runs past the end of the file (truncated)")
        try:
            return self.buf[s + 4:s + 4 + n].decode("utf-8")
        except UnicodeDecodeError:
            raise NvdlaLoadableError(f"{self.what}: {what} is not UTF-8") from None

    def _vector(self, index: int, elem: int) -> tuple[int, int]:
        at = self._field(index)
        if not at:
            return 0, 0
        v = self._indirect(at, f"{self._name(index)}")
        n = self._get("<I", v, f"{self._name(index)} length")
        if v + 4 + n * elem > len(self.buf):
            raise NvdlaLoadableError(f"{self.what}: field {index} ({n} elements) runs past the end of the file "
                                     "(truncated)")
        return v + 4, n

    def bytes_(self, index: int) -> bytes:
        start, n = self._vector(index, 1)
        return bytes(self.buf[start:start + n])

    def scalars(self, index: int, fmt: str) -> list[int]:
        size = struct.calcsize("<" + fmt)
        start, n = self._vector(index, size)
        return list(struct.unpack_from(f"<{n}{fmt}", self.buf, start)) if n else []

    def strings(self, index: int) -> list[str]:
        start, n = self._vector(index, 4)
        return [self._string_at(self._indirect(start + 4 * i, f"{self._name(index)}[{i}]"), f"{self._name(index)}[{i}]")
                for i in range(n)]

    def tables(self, index: int, what: str, read: Callable[["_Table"], _T]) -> list[_T]:
        start, n = self._vector(index, 4)
        return [read(_Table(self.buf, self._indirect(start + 4 * i, f"{what}[{i}]"), f"{what}[{i}]"))
                for i in range(n)]

    def version(self, index: int) -> Version | None:
        at = self._field(index)
        if not at:
            return None
        return Version(*(self._get("<B", at + i, f"{self._name(index)}") for i in range(3)))


def _blob(t: _Table) -> Blob:
    data = t.bytes_(5)
    return Blob(name=t.string(0), data=data, interface=t.scalar(2, "I"), sub_interface=t.scalar(3, "I"),
                version=t.version(4) or Version(0, 0, 0), size=t.scalar(1, "Q", len(data)))


def _memory(t: _Table) -> MemoryEntry:
    return MemoryEntry(id=t.scalar(0, "H"), domain=t.scalar(1, "B"), flags=t.scalar(2, "H"), size=t.scalar(3, "Q"),
                       alignment=t.scalar(4, "I"), contents=t.strings(5), offsets=t.scalars(6, "Q"),
                       bind_id=t.scalar(7, "H"), tensor_desc_id=t.scalar(8, "H"))


def _event(t: _Table) -> EventEntry:
    return EventEntry(id=t.scalar(0, "H"), type=t.scalar(1, "B"), target=t.scalar(2, "H"), val=t.scalar(3, "I"),
                      op=t.scalar(4, "B"))


def _task(t: _Table) -> TaskEntry:
    return TaskEntry(id=t.scalar(0, "H"), interface=t.scalar(1, "I"), instance=t.scalar(2, "h"),
                     address_list=t.scalars(3, "H"), pre_actions=t.scalars(4, "H"), post_actions=t.scalars(5, "H"))


def _address(t: _Table) -> AddressEntry:
    return AddressEntry(id=t.scalar(0, "H"), mem_id=t.scalar(1, "H"), offset=t.scalar(2, "Q"), size=t.scalar(3, "Q"))


def _submit(t: _Table) -> SubmitEntry:
    return SubmitEntry(id=t.scalar(0, "H"), task_id=t.scalars(1, "H"))


def _tensor(t: _Table) -> TensorDesc:
    return TensorDesc(name=t.string(0), id=t.scalar(1, "H"), mem_id=t.scalar(2, "H"), size=t.scalar(3, "Q"),
                      offset=t.scalar(4, "Q"), data_format=t.scalar(5, "B"), data_type=t.scalar(6, "B"),
                      data_category=t.scalar(7, "B"), pixel_format=t.scalar(8, "B"), pixel_mapping=t.scalar(9, "B"),
                      n=t.scalar(10, "i"), c=t.scalar(11, "i"), h=t.scalar(12, "i"), w=t.scalar(13, "i"),
                      strides=[t.scalar(14 + i, "I") for i in range(8)])


def _reloc(t: _Table) -> RelocEntry:
    return RelocEntry(address_id=t.scalar(0, "H"), write_id=t.scalar(1, "H"), offset=t.scalar(2, "Q"),
                      interface=t.scalar(3, "I"), sub_interface=t.scalar(4, "I"), reloc_type=t.scalar(5, "B"))


def parse(buf: bytes) -> NvdlaLoadable:
    """Decode a whole loadable. Raises NvdlaLoadableError on a truncated/corrupt buffer or another
    schema version."""
    if len(buf) < 12:
        raise NvdlaLoadableError(f"{len(buf)} bytes is too short for a flatbuffer loadable")
    root = _Table(buf, struct.unpack_from("<I", buf, 0)[0], "Loadable")
    version = root.version(0)
    if version is None:
        raise NvdlaLoadableError("the Loadable table has no version (not an NVDLA loadable?)")
    if (version.major, version.minor) != SCHEMA_VERSION[:2]:
        raise NvdlaLoadableError(f"loadable version {version}, this reader supports "
                                 f"{SCHEMA_VERSION[0]}.{SCHEMA_VERSION[1]}.x")
    return NvdlaLoadable(
        version=version, tasks=root.tables(1, "task_list", _task), memories=root.tables(2, "memory_list", _memory),
        addresses=root.tables(3, "address_list", _address), events=root.tables(4, "event_list", _event),
        blobs=root.tables(5, "blobs", _blob), tensors=root.tables(6, "tensor_desc_list", _tensor),
        relocs=root.tables(7, "reloc_list", _reloc), submits=root.tables(8, "submit_list", _submit))


# ---- writing ---------------------------------------------------------------------------------------------
def _vec(b: flatbuffers.Builder, items: list[int], fmt: str) -> int:
    size = struct.calcsize("<" + fmt)
    b.StartVector(size, len(items), size)
    prepend = {"H": b.PrependUint16, "Q": b.PrependUint64, "I": b.PrependUint32}[fmt]
    for v in reversed(items):
        prepend(v)
    return b.EndVector()


def _offsets(b: flatbuffers.Builder, offs: list[int]) -> int:
    b.StartVector(4, len(offs), 4)
    for o in reversed(offs):
        b.PrependUOffsetTRelative(o)
    return b.EndVector()


def _table(b: flatbuffers.Builder, nfields: int, slots: list[tuple[int, str, int]]) -> int:
    """slots: (field index, kind, value) with kind a struct letter, 'o' for an offset or 'v' for Version."""
    b.StartObject(nfields)
    for index, kind, value in slots:
        if kind == "o":
            b.PrependUOffsetTRelativeSlot(index, value, 0)
        elif kind == "v":
            b.Prep(1, 3)
            for part in reversed(value):
                b.PrependUint8(part)
            b.Slot(index)
        else:
            adder = {"B": b.PrependUint8Slot, "H": b.PrependUint16Slot, "h": b.PrependInt16Slot,
                     "I": b.PrependUint32Slot, "i": b.PrependInt32Slot, "Q": b.PrependUint64Slot}[kind]
            adder(index, value, None)  # always written: the reader needs no defaults
    return b.EndObject()


def build(ld: NvdlaLoadable) -> bytes:
    """Encode a loadable (the inverse of ``parse``)."""
    b = flatbuffers.Builder(1024)

    def tables(items, one) -> int:
        return _offsets(b, [one(x) for x in items])

    def blob(x: Blob) -> int:
        name, data = b.CreateString(x.name), b.CreateByteVector(x.data)
        v = x.version
        return _table(b, 6, [(0, "o", name), (1, "Q", len(x.data) if x.size is None else x.size),
                             (2, "I", x.interface), (3, "I", x.sub_interface), (4, "v", (v.major, v.minor, v.sub_minor)),
                             (5, "o", data)])

    def memory(x: MemoryEntry) -> int:
        contents = _offsets(b, [b.CreateString(s) for s in x.contents])
        offsets = _vec(b, x.offsets, "Q")
        return _table(b, 9, [(0, "H", x.id), (1, "B", x.domain), (2, "H", x.flags), (3, "Q", x.size),
                             (4, "I", x.alignment), (5, "o", contents), (6, "o", offsets), (7, "H", x.bind_id),
                             (8, "H", x.tensor_desc_id)])

    def event(x: EventEntry) -> int:
        return _table(b, 5, [(0, "H", x.id), (1, "B", x.type), (2, "H", x.target), (3, "I", x.val), (4, "B", x.op)])

    def task(x: TaskEntry) -> int:
        al, pre, post = (_vec(b, v, "H") for v in (x.address_list, x.pre_actions, x.post_actions))
        return _table(b, 6, [(0, "H", x.id), (1, "I", x.interface), (2, "h", x.instance), (3, "o", al),
                             (4, "o", pre), (5, "o", post)])

    def address(x: AddressEntry) -> int:
        return _table(b, 4, [(0, "H", x.id), (1, "H", x.mem_id), (2, "Q", x.offset), (3, "Q", x.size)])

    def tensor(x: TensorDesc) -> int:
        name = b.CreateString(x.name)
        slots = [(0, "o", name), (1, "H", x.id), (2, "H", x.mem_id), (3, "Q", x.size), (4, "Q", x.offset),
                 (5, "B", x.data_format), (6, "B", x.data_type), (7, "B", x.data_category), (8, "B", x.pixel_format),
                 (9, "B", x.pixel_mapping), (10, "i", x.n), (11, "i", x.c), (12, "i", x.h), (13, "i", x.w)]
        slots += [(14 + i, "I", s) for i, s in enumerate(x.strides)]
        return _table(b, 22, slots)

    def reloc(x: RelocEntry) -> int:
        return _table(b, 6, [(0, "H", x.address_id), (1, "H", x.write_id), (2, "Q", x.offset),
                             (3, "I", x.interface), (4, "I", x.sub_interface), (5, "B", x.reloc_type)])

    def submit(x: SubmitEntry) -> int:
        return _table(b, 2, [(0, "H", x.id), (1, "o", _vec(b, x.task_id, "H"))])

    lists = [tables(ld.tasks, task), tables(ld.memories, memory), tables(ld.addresses, address),
             tables(ld.events, event), tables(ld.blobs, blob), tables(ld.tensors, tensor),
             tables(ld.relocs, reloc), tables(ld.submits, submit)]
    v = ld.version
    root = _table(b, 9, [(0, "v", (v.major, v.minor, v.sub_minor))] + [(i + 1, "o", o) for i, o in enumerate(lists)])
    b.Finish(root)
    return bytes(b.Output())
