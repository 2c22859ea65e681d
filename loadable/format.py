"""The loadable file container: a small checked header around the ``Loadable`` protobuf, plus validation.

Layout (little endian)::

    8 bytes  magic b"DLALOAD\\0"
    u32      format major version (readers refuse any other major)
    u32      payload length
    u32      crc32(payload)
    payload  serialized dla.loadable.Loadable

The header lets a reader tell "not a loadable", "a loadable from another major version" and "a truncated
or corrupted file" apart before protobuf (which happily decodes garbage into defaults) sees the bytes.
Validation then checks everything the executor would otherwise trip over half way through a network, so
a bad file fails at load with one line naming it.
"""
from __future__ import annotations

import stat
import struct
import zlib
from pathlib import Path
from typing import Iterable

from google.protobuf.message import DecodeError

from dlaio import write_atomic
from golden.budget import MemoryBudgetError, check_size
from golden.config import get_config
from golden.errors import clip_tokens
from golden.regs import register_map
from loadable import loadable_pb2 as pb

MAGIC = b"DLALOAD\x00"
#: (major, minor). Bump the major on any incompatible change of loadable.proto or of its meaning. 1.1 added
#: ``Loadable.pingpong``; 1.0 files (groups fixed by the compiler) still read and run as before.
LOADABLE_VERSION = (1, 1)
HEADER = struct.Struct("<8sIII")

#: Bytes per element of a FEATURE tensor's dtype.
BYTES_PER_ELEMENT = {pb.Tensor.INT8: 1, pb.Tensor.INT16: 2, pb.Tensor.FP16: 2, pb.Tensor.FLOAT32: 4}


class LoadableError(Exception):
    """A file that is not a valid loadable; prints as one line ``path: message``."""

    def __init__(self, path: Path | str, msg: str) -> None:
        self.path, self.msg = Path(path), clip_tokens(msg)
        super().__init__(f"{path}: {self.msg}")


# ---- geometry of FEATURE tensors ---------------------------------------------------------------------
def surfaces(t: pb.Tensor) -> int:
    return -(-t.channels // t.atom) if t.atom else 0


def feature_span(t: pb.Tensor) -> int:
    """Bytes a FEATURE cube occupies from its offset: every surface (gaps included) and, for strides
    tighter than the cube, at least up to its last element."""
    bpe = BYTES_PER_ELEMENT.get(t.dtype, 1)
    s = surfaces(t)
    if s == 0 or t.height == 0 or t.width == 0:
        return 0
    tight = (s - 1) * t.surface_stride + (t.height - 1) * t.line_stride + t.width * t.atom * bpe
    return max(s * t.surface_stride, tight)


# ---- file container ----------------------------------------------------------------------------------
def encode_loadable(msg: pb.Loadable) -> bytes:
    """Header + payload. The proto's version fields are set to this writer's version."""
    out = pb.Loadable()
    out.CopyFrom(msg)
    out.version_major, out.version_minor = LOADABLE_VERSION
    payload = out.SerializeToString()
    return HEADER.pack(MAGIC, LOADABLE_VERSION[0], len(payload), zlib.crc32(payload)) + payload


def write_loadable(path: Path | str, msg: pb.Loadable, *, validate: bool = True,
                   inputs: Iterable[Path | str] = ()) -> None:
    """Write through the one output writer (``dlaio.write_atomic``): whole or not at all, never over a
    device, a FIFO or one of ``inputs`` (the files the command read). Validates first so the compiler
    cannot write a file the runtime would refuse."""
    path = Path(path)
    if validate:
        check_loadable(msg, path)
    write_atomic(path, encode_loadable(msg), inputs=inputs)


def decode_loadable(data: bytes, path: Path | str = "<bytes>", *, validate: bool = True) -> pb.Loadable:
    """Check the header and decode (and validate) the payload."""
    if len(data) < HEADER.size:
        if not MAGIC.startswith(data[: len(MAGIC)]):
            raise LoadableError(path, "not a loadable (bad magic)")
        raise LoadableError(path, f"truncated: {len(data)} bytes, shorter than the {HEADER.size}-byte header")
    magic, major, length, crc = HEADER.unpack_from(data)
    if magic != MAGIC:
        raise LoadableError(path, "not a loadable (bad magic)")
    if major != LOADABLE_VERSION[0]:
        raise LoadableError(path, f"loadable format version {major}, this runtime reads version {LOADABLE_VERSION[0]}; "
                                  "recompile the model")
    payload = data[HEADER.size:]
    if len(payload) != length:
        what = "truncated" if len(payload) < length else "trailing bytes"
        raise LoadableError(path, f"{what}: header says {length} payload bytes, file has {len(payload)}")
    if zlib.crc32(payload) != crc:
        raise LoadableError(path, f"corrupted: payload crc {zlib.crc32(payload):#010x}, header says {crc:#010x}")
    msg = pb.Loadable()
    try:
        msg.ParseFromString(payload)
    except DecodeError as exc:
        raise LoadableError(path, f"cannot decode the loadable: {exc}") from None
    if msg.version_major != major:
        raise LoadableError(path, f"header version {major} but payload version {msg.version_major}")
    if validate:
        check_loadable(msg, path)
    return msg


def read_loadable(path: Path | str, *, validate: bool = True) -> pb.Loadable:
    """Read, check and decode a loadable; every problem is a one-line ``LoadableError`` naming ``path``."""
    path = Path(path)
    try:
        st = path.stat()
        if not stat.S_ISREG(st.st_mode) and not stat.S_ISDIR(st.st_mode):
            raise LoadableError(path, "is not a regular file (a device or FIFO), not a loadable")
        check_size("loadable file", st.st_size)
        data = path.read_bytes()
    except MemoryBudgetError as exc:
        raise LoadableError(path, str(exc)) from None
    except FileNotFoundError:
        raise LoadableError(path, "no such file") from None
    except IsADirectoryError:
        raise LoadableError(path, "is a directory, not a loadable") from None
    except OSError as exc:
        raise LoadableError(path, f"cannot read: {exc.strerror or exc}") from None
    return decode_loadable(data, path, validate=validate)


# ---- semantic validation ------------------------------------------------------------------------------
def check_loadable(msg: pb.Loadable, path: Path | str = "<loadable>") -> None:
    """Raise ``LoadableError`` for the first inconsistency that would break execution: unknown config,
    dangling region/tensor/task references, tensors or relocations outside their region, registers
    the config's address map lacks, dependencies that do not point backwards."""

    def fail(what: str) -> None:
        raise LoadableError(path, what)

    try:
        hw = get_config(msg.hw_config)
    except KeyError as exc:
        fail(str(exc.args[0]))
    regmap = register_map(hw.address_map)

    regions: dict[int, pb.Region] = {}
    total = 0
    for i, r in enumerate(msg.regions):
        try:  # every region is allocated when the loadable runs: bound them before anything is
            check_size(f"regions[{i}].size (region {r.id} {r.name!r})", r.size)
            total = check_size(f"sum of regions[0..{i}].size", total + r.size)
        except MemoryBudgetError as exc:
            fail(str(exc))
        if r.id in regions:
            fail(f"region id {r.id} ({r.name!r}) is used twice")
        regions[r.id] = r
        if r.alignment & (r.alignment - 1):
            fail(f"region {r.id} ({r.name!r}): alignment {r.alignment} is not a power of two")
        if r.ram_type not in (0, 1):
            fail(f"region {r.id} ({r.name!r}): ram_type {r.ram_type} (expected 1 DRAM or 0 CV-SRAM)")
        if r.content and r.kind != pb.Region.WEIGHTS:
            fail(f"region {r.id} ({r.name!r}): only WEIGHTS regions carry content")
        if len(r.content) > r.size:
            fail(f"region {r.id} ({r.name!r}): content of {len(r.content)} bytes exceeds its size {r.size}")

    tensors: dict[str, pb.Tensor] = {}
    for t in msg.tensors:
        if not t.name:
            fail("a tensor has no name")
        if t.name in tensors:
            fail(f"tensor {t.name!r} is defined twice")
        tensors[t.name] = t
        if any(d <= 0 for d in t.shape):
            fail(f"tensor {t.name!r}: shape {tuple(t.shape)} has a non-positive dimension")
        if t.storage != pb.Tensor.FEATURE:
            continue
        where = f"tensor {t.name!r}"
        if t.region not in regions:
            fail(f"{where}: region {t.region} does not exist")
        if not (t.channels and t.height and t.width and t.atom):
            fail(f"{where}: FEATURE cube needs channels, height, width and atom > 0")
        if not t.scale > 0:
            fail(f"{where}: scale {t.scale} must be > 0")
        n = 1
        for d in t.shape:
            n *= d
        if t.shape and n != t.channels * t.height * t.width:
            fail(f"{where}: shape {tuple(t.shape)} does not fold to the cube {t.channels}x{t.height}x{t.width}")
        bpe = BYTES_PER_ELEMENT.get(t.dtype, 1)
        if t.line_stride < t.width * t.atom * bpe:
            fail(f"{where}: line stride {t.line_stride} is below a line of {t.width * t.atom * bpe} bytes")
        if surfaces(t) > 1 and t.surface_stride < t.height * t.line_stride:
            fail(f"{where}: surface stride {t.surface_stride} is below a surface of {t.height * t.line_stride} bytes")
        region = regions[t.region]
        end = t.offset + feature_span(t)
        if end > region.size:
            fail(f"{where}: ends at byte {end} of region {t.region} ({region.name!r}), whose size is {region.size}")

    def need_tensor(name: str, where: str) -> None:
        if name not in tensors:
            fail(f"{where}: tensor {name!r} does not exist")

    if not msg.inputs:
        fail("no network inputs")
    if not msg.outputs:
        fail("no network outputs")
    for name in msg.inputs:
        need_tensor(name, "network input")
    for name in msg.outputs:
        need_tensor(name, "network output")

    seen: set[int] = set()
    for task in msg.tasks:
        tw = f"task {task.id} ({task.name!r})"
        if task.id in seen:
            fail(f"{tw}: id used twice")
        for dep in task.deps:
            if dep not in seen:
                fail(f"{tw}: depends on task {dep}, which does not come before it")
        seen.add(task.id)
        kind = task.WhichOneof("kind")
        if kind == "cpu":
            if not task.cpu.op:
                fail(f"{tw}: CPU task without an op")
            for name in task.cpu.inputs:
                need_tensor(name, tw)
            for name in task.cpu.outputs:
                need_tensor(name, tw)
        elif kind == "dla":
            for op in task.dla.ops:
                ow = f"{tw} op {op.name!r}"
                for name in (*op.inputs, *op.outputs):
                    need_tensor(name, ow)
                if not op.interrupt_mask:
                    fail(f"{ow}: no interrupt_mask, so its completion cannot be awaited")
                for w in op.writes:
                    if regmap.lookup(w.addr) is None:
                        fail(f"{ow}: no register at CSB address {w.addr:#x} ({w.name or 'unnamed'}) in "
                             f"{hw.name}'s address map")
                    if w.HasField("reloc"):
                        rr = regions.get(w.reloc.region)
                        if rr is None:
                            fail(f"{ow}: {w.name or hex(w.addr)} relocates against region {w.reloc.region}, "
                                 "which does not exist")
                        if w.reloc.offset >= max(rr.size, 1):
                            fail(f"{ow}: {w.name or hex(w.addr)} points at offset {w.reloc.offset} of region "
                                 f"{rr.id} ({rr.name!r}), whose size is {rr.size}")
                        if w.reloc.shift > 63:
                            fail(f"{ow}: {w.name or hex(w.addr)} has relocation shift {w.reloc.shift}")
        else:
            fail(f"{tw}: neither a DLA nor a CPU task")
