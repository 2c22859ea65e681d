"""NVDLA's CPU emulator (nvdla/sw ``umd/core/src/runtime/Emulator.cpp``): the EMU1 tasks of a loadable,
run where NVDLA's user-mode runtime runs them, between the DLA tasks of the submit list, each to
completion before the next task starts (``Runtime::submitInternal`` submits EMU tasks blocking).

Addressing (``Runtime::fillEMUTaskAddressList``): entry *i* of the task's address list is the CPU mapping of
the entry's memory plus the address entry's offset; CV-SRAM memories are not mapped (NULL). Entry 0 holds
the ``emu_network_desc``, which names the entries holding the op and buffer-descriptor arrays. All bytes
are read and written through the same ``Target`` memory interface the firmware model uses, so an EMU
task runs the same way on the golden model and inside an RTL simulation.

Descriptor layouts (``umd/core/src/common/include/priv/emu/emu1/A/emu_interface.h``), little-endian; the
sizes are ``sizeof`` of the C structs, the stride of their arrays:

====================== ========================================================== ===== ======
struct                 members (byte offset) -- current layout                      size  legacy
====================== ========================================================== ===== ======
emu_network_desc       operation_desc_index:s16 (0), operation_buffer_desc_index:    256   256
                       s16 (2), num_operations:u16 (4); aligned(256)
emu_common_op_desc     op_type:u8 (0), 3 padding bytes, input_scale_factor:f32 (4),  12     1
                       output_scale_factor:f32 (8) (not packed); legacy: op_type only
emu_power_op_desc      common (0), power:f32 (12), scale:f32 (16), shift:f32 (20);   24    16
                       packed, aligned(4) (legacy: power at 1, scale 5, shift 9)
emu_softmax_op_desc    common (0), axis:u8 (12); packed, aligned(4) (legacy: 1)       16     4
operation container    union of the two op descs                                     24    16
emu_buffer_desc        addressIndex:s16 (0), addressIndexOffset:u32 (2), size:u32   256   256
                       (6), format:u16 (10), width, height, channel:u16 (12, 14,
                       16), line_stride:u32 (18), surf_stride:u32 (22); packed,
                       aligned(256) (legacy: no addressIndexOffset, so size at 2...)
buffer container       src_data (0), dst_data (256)                                 512   512
====================== ========================================================== ===== ======

The legacy layout is the emulator interface before NVDLA's int8 support (2019-04, the same release that
gave ``dla_data_cube`` its ``offset``), which NVDLA's published regression loadables use: no scale
factors, no ``addressIndexOffset``, FP16 only (format 2, the value FF16 had then), one op per task.
``NvdlaNetwork``'s descriptor-layout choice (blob versions, or ``--descriptor-layout``) selects it.

Arithmetic, as the C++ code computes it (``NvF32`` is IEEE binary32, ``half`` is the half 1.11 library
NVDLA ships, rounding to nearest with ties away from zero):

- POWER, per element of the src cube: ``y = powf(shift + scale * x, power)``; FP16 data is converted
  to float exactly and ``y`` back to half; INT8 data is ``x = int8 * input_scale_factor`` and the result
  ``saturate(y / output_scale_factor)`` (clamped to [-128, 127], then truncated toward zero, NaN -> 0).
  Element addresses: ``(c / k) * surf_stride + h * line_stride + w * 32 + (c % k) * bpe`` with k = 16
  channels per 32-byte atom for FF16, 32 for INT8 and 8 (8-byte atoms) for INT8_8.
- SOFTMAX over ``channel`` *contiguous* elements of the src (the C code ignores width, height, strides
  and ``axis``): ``max`` ignoring NaN, ``sum`` of ``expf(x - max)`` accumulated in float in order,
  ``expf(x - max) / sum`` rounded to half. INT8 data first becomes ``half(int8 * input_scale_factor)``
  and the half results are written as ``saturate(half / output_scale_factor)``.
- ``expf``/``powf`` are evaluated in double precision and rounded once to float: the correctly rounded
  results, which glibc's (double-evaluated) ``expf``/``powf`` return except in rare near-ties.
  ``shift + scale * x`` is rounded after the multiply (no fused multiply-add).

Where the C code would read garbage or crash (an op type it does not know, formats that differ, an
address index outside the list, a CV-SRAM buffer, bytes outside the buffer's memory), ``EmulatorError``
names the op and field instead.
"""
from __future__ import annotations

import struct
import time
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from runtime.nvdla.firmware import FirmwareStats
from runtime.target import Target

__all__ = [
    "EmulatorError", "EmuNetworkDesc", "EmuOp", "EmuBufferDesc", "Emulator", "half_bits", "LAYOUTS",
    "EMU_OP_POWER", "EMU_OP_SOFTMAX", "FORMAT_INT8", "FORMAT_INT8_8", "FORMAT_INT16", "FORMAT_FF16",
    "FORMAT_UINT8", "FORMAT_UINT16", "LEGACY_FORMAT_FF16",
    "NETWORK_DESC_SIZE", "BUFFER_DESC_SIZE", "BUFFER_CONTAINER_SIZE", "op_container_size",
]

EMU_OP_POWER, EMU_OP_SOFTMAX = 0, 1
OP_NAMES = {EMU_OP_POWER: "POWER", EMU_OP_SOFTMAX: "SOFTMAX"}
#: emu_buffer_desc.format (EMUInterface.h, current layout)
FORMAT_INT8, FORMAT_INT8_8, FORMAT_INT16, FORMAT_FF16, FORMAT_UINT8, FORMAT_UINT16 = range(6)
FORMAT_NAMES = ("INT8", "INT8_8", "INT16", "FF16", "UINT8", "UINT16")
#: the legacy emulator knew one format, FP16, numbered 2
LEGACY_FORMAT_FF16 = 2
#: (bytes per element, channels per atom) of the formats Emulator.cpp can address
_GEOMETRY = {FORMAT_FF16: (2, 16), FORMAT_INT8: (1, 32), FORMAT_INT8_8: (1, 8)}


class EmulatorError(ValueError):
    """An EMU task that NVDLA's emulator cannot run (one line naming the op and field)."""


# ---- layouts ------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Layout:
    """One emu_interface.h struct: (member, struct letter) in order, ``""`` members being C's padding, and
    ``sizeof`` (the array stride, with tail padding)."""

    name: str
    members: tuple[tuple[str, str], ...]
    size: int

    @property
    def fmt(self) -> str:
        return "<" + "".join(f for _, f in self.members)

    def decode(self, buf: bytes, offset: int = 0) -> dict[str, int | float]:
        values = struct.unpack_from(self.fmt, buf, offset)
        return dict(zip((n for n, _ in self.members if n), values))

    def encode(self, values: dict[str, int | float]) -> bytes:
        args = [values[n] for n, _ in self.members if n]
        try:
            raw = struct.pack(self.fmt, *args)
        except struct.error as exc:
            raise EmulatorError(f"{self.name}: {exc}") from None
        return raw.ljust(self.size, b"\0")


def _layouts(legacy: bool) -> dict[str, Layout]:
    common = (("op_type", "B"),) if legacy else (("op_type", "B"), ("", "3x"), ("input_scale_factor", "f"),
                                                  ("output_scale_factor", "f"))
    offset = () if legacy else (("address_offset", "I"),)
    out = {
        "network": Layout("emu_network_desc", (("operation_desc_index", "h"), ("operation_buffer_desc_index", "h"),
                                               ("num_operations", "H")), 256),
        "power": Layout("emu_power_op_desc", common + (("power", "f"), ("scale", "f"), ("shift", "f")),
                        16 if legacy else 24),
        "softmax": Layout("emu_softmax_op_desc", common + (("axis", "B"),), 4 if legacy else 16),
        "buffer": Layout("emu_buffer_desc", (("address_index", "h"),) + offset + (
            ("size", "I"), ("format", "H"), ("width", "H"), ("height", "H"), ("channel", "H"),
            ("line_stride", "I"), ("surf_stride", "I")), 256),
    }
    for lay in out.values():
        assert struct.calcsize(lay.fmt) <= lay.size and lay.size % 4 == 0, lay
    return out


#: the two layouts: LAYOUTS[legacy][struct]
LAYOUTS = {False: _layouts(False), True: _layouts(True)}
NETWORK_DESC_SIZE = BUFFER_DESC_SIZE = 256
#: sizeof(emu_operation_buffer_container): an op's src and dst descriptors (both layouts)
BUFFER_CONTAINER_SIZE = 2 * BUFFER_DESC_SIZE


def op_container_size(legacy: bool) -> int:
    """sizeof(emu_operation_container): the stride of the op array."""
    return max(LAYOUTS[legacy]["power"].size, LAYOUTS[legacy]["softmax"].size)


@dataclass
class EmuNetworkDesc:
    operation_desc_index: int = 1
    operation_buffer_desc_index: int = 2
    num_operations: int = 1

    @classmethod
    def decode(cls, buf: bytes) -> "EmuNetworkDesc":
        return cls(**LAYOUTS[False]["network"].decode(buf))

    def encode(self) -> bytes:
        return LAYOUTS[False]["network"].encode(vars(self))


@dataclass
class EmuOp:
    """An op descriptor: POWER uses power/scale/shift, SOFTMAX axis; the scale factors are INT8's."""

    op_type: int
    power: float = 1.0
    scale: float = 1.0
    shift: float = 0.0
    axis: int = 0
    input_scale_factor: float = 1.0
    output_scale_factor: float = 1.0

    @property
    def name(self) -> str:
        return OP_NAMES.get(self.op_type, f"op_type {self.op_type}")

    @classmethod
    def decode(cls, buf: bytes, offset: int, legacy: bool) -> "EmuOp":
        op_type = buf[offset]
        lay = LAYOUTS[legacy]["softmax" if op_type == EMU_OP_SOFTMAX else "power"]
        return cls(**lay.decode(buf, offset))

    def encode(self, legacy: bool) -> bytes:
        kind = "softmax" if self.op_type == EMU_OP_SOFTMAX else "power"
        return LAYOUTS[legacy][kind].encode(vars(self)).ljust(op_container_size(legacy), b"\0")


@dataclass
class EmuBufferDesc:
    """A cube of an EMU op: ``address_index`` into the task's address list, plus ``address_offset`` bytes
    (current layout only)."""

    address_index: int
    size: int = 0
    format: int = FORMAT_FF16
    width: int = 1
    height: int = 1
    channel: int = 1
    line_stride: int = 0
    surf_stride: int = 0
    address_offset: int = 0

    @classmethod
    def decode(cls, buf: bytes, offset: int, legacy: bool) -> "EmuBufferDesc":
        return cls(**LAYOUTS[legacy]["buffer"].decode(buf, offset))

    def encode(self, legacy: bool) -> bytes:
        if legacy and self.address_offset:
            raise EmulatorError("emu_buffer_desc: the legacy layout has no addressIndexOffset")
        return LAYOUTS[legacy]["buffer"].encode(vars(self))


# ---- float arithmetic as the C++ code does it -----------------------------------------------------------
def half_bits(x: np.ndarray) -> np.ndarray:
    """float32 -> binary16 bits as NVDLA's half library converts (round to nearest, ties away from zero;
    NaN payloads truncated), vectorized: numpy's own conversion breaks ties to even."""
    bits = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    sign = ((bits >> 16) & 0x8000).astype(np.uint32)
    e = ((bits >> 23) & 0xFF).astype(np.int64)
    mant = bits & 0x7FFFFF
    sub = (e >= 103) & (e <= 112)
    normal = (e >= 113) & (e <= 142)
    base = np.where(normal, (e - 112) << 10, 0)
    base = np.where(sub, 0x400 >> np.clip(113 - e, 0, 31), base)
    base = np.where((e >= 143), 0x7C00, base)
    shift = np.where(sub, 126 - e, np.where(normal | (e == 255), 13, 24))
    h = sign + base.astype(np.uint32) + (mant >> shift.astype(np.uint32))
    round_bit = ((mant >> (shift - 1).astype(np.uint32)) & 1) | (e == 102)
    h = h + (round_bit & ((h & 0x7C00) != 0x7C00))
    return h.astype(np.uint16)


def _f32(bits: np.ndarray) -> np.ndarray:
    """binary16 bits -> float32 (exact)."""
    return bits.astype(np.uint16).view(np.float16).astype(np.float32)


def _expf(x: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore", invalid="ignore"):
        return np.exp(x.astype(np.float64)).astype(np.float32)


def _powf(base: np.ndarray, power: np.float32) -> np.ndarray:
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        return np.power(base.astype(np.float64), np.float64(power)).astype(np.float32)


def _saturate_int8(y: np.ndarray) -> np.ndarray:
    """saturate<NvF32, NvS8>: clamp (NaN passes std::min/max), then the float->int conversion truncates;
    the CPU's conversion of NaN ends in a low byte of 0."""
    clamped = np.clip(np.nan_to_num(y, nan=0.0), -128.0, 127.0)
    return np.trunc(clamped).astype(np.int8)


def _softmax(x: np.ndarray) -> np.ndarray:
    """Emulator.cpp's softmax of float32 values (in memory order) -> float32 quotients."""
    maxval = np.fmax.reduce(x, initial=-np.inf)  # `x > maxval` never picks a NaN
    with np.errstate(invalid="ignore"):
        e = _expf((x - maxval).astype(np.float32))
    total = np.add.accumulate(e, dtype=np.float32)[-1]  # float += in order
    with np.errstate(divide="ignore", invalid="ignore"):
        return (e / total).astype(np.float32)


# ---- running a task ----------------------------------------------------------------------------------------
Entry = tuple[int, int, str]  # (bus address, bytes available, memory name)


@dataclass
class _Buffer:
    what: str
    desc: EmuBufferDesc
    base: int
    avail: int
    mem: str


class Emulator:
    """Runs one EMU1 task on ``target``. ``entries`` is the task's address list as NVDLA's runtime maps it:
    (bus address, bytes up to the end of the memory, memory name), or None for an entry the CPU cannot
    see (CV-SRAM)."""

    def __init__(self, target: Target, entries: Sequence[Entry | None], *, legacy: bool = False,
                 log: Callable[[str], None] | None = None) -> None:
        self.target, self.entries, self.legacy, self.log = target, list(entries), legacy, log
        self.lay = LAYOUTS[legacy]
        self.stats = FirmwareStats()

    # ---- memory ------------------------------------------------------------------------------------
    def _entry(self, index: int, what: str) -> Entry:
        if not 0 <= index < len(self.entries):
            raise EmulatorError(f"{what} = {index} is outside the task's address list ({len(self.entries)} entries)")
        entry = self.entries[index]
        if entry is None:
            raise EmulatorError(f"{what} = {index} is CV-SRAM, which NVDLA's runtime does not map for the CPU")
        return entry

    async def _read(self, index: int, size: int, what: str) -> bytes:
        base, avail, mem = self._entry(index, what)
        if size > avail:
            raise EmulatorError(f"{what} = {index}: {size} bytes needed, the memory has {avail} from there")
        return await self.target.read_mem(base, size, mem)

    def _buffer(self, desc: EmuBufferDesc, what: str) -> _Buffer:
        base, avail, mem = self._entry(desc.address_index, f"{what}.addressIndex")
        if desc.address_offset > avail:
            raise EmulatorError(f"{what}.addressIndexOffset = {desc.address_offset} is past the end of address "
                                f"{desc.address_index} ({avail} bytes)")
        return _Buffer(what, desc, base + desc.address_offset, avail - desc.address_offset, mem)

    async def _gather(self, buf: _Buffer, offsets: np.ndarray, bpe: int) -> np.ndarray:
        """The elements at byte ``offsets`` of the buffer, as little-endian unsigned integers."""
        if offsets.size == 0:
            return np.zeros(0, dtype=np.uint16 if bpe == 2 else np.uint8)
        span = self._span(buf, offsets, bpe)
        raw = np.frombuffer(await self.target.read_mem(buf.base, span, buf.mem), dtype=np.uint8)
        if bpe == 1:
            return raw[offsets]
        return raw[offsets].astype(np.uint16) | (raw[offsets + 1].astype(np.uint16) << 8)

    async def _scatter(self, buf: _Buffer, offsets: np.ndarray, values: np.ndarray, bpe: int) -> None:
        if offsets.size == 0:
            return
        span = self._span(buf, offsets, bpe)
        raw = np.frombuffer(await self.target.read_mem(buf.base, span, buf.mem), dtype=np.uint8).copy()
        v = values.astype(np.uint16)
        raw[offsets] = (v & 0xFF).astype(np.uint8)
        if bpe == 2:
            raw[offsets + 1] = (v >> 8).astype(np.uint8)
        await self.target.write_mem(buf.base, raw.tobytes(), buf.mem)

    @staticmethod
    def _span(buf: _Buffer, offsets: np.ndarray, bpe: int) -> int:
        span = int(offsets.max()) + bpe
        if span > buf.avail:
            d = buf.desc
            raise EmulatorError(f"{buf.what}: a {d.width}x{d.height}x{d.channel} cube (line_stride {d.line_stride}, "
                                f"surf_stride {d.surf_stride}) reaches byte {span}, past the {buf.avail} bytes of "
                                f"address {d.address_index} from offset {d.address_offset}")
        return span

    # ---- task ----------------------------------------------------------------------------------------
    async def execute(self) -> FirmwareStats:
        start = time.perf_counter()
        net = EmuNetworkDesc.decode(await self._read(0, struct.calcsize(self.lay["network"].fmt),
                                                     "network descriptor: address index"))
        n = net.num_operations
        if self.legacy and n != 1:
            raise EmulatorError(f"network descriptor: num_operations = {n}, but the legacy emulator runs exactly one "
                                "op per task")
        op_size, buf_size = op_container_size(self.legacy), BUFFER_CONTAINER_SIZE
        ops = await self._read(net.operation_desc_index, n * op_size,
                               f"network descriptor: operation_desc_index for {n} ops")
        bufs = await self._read(net.operation_buffer_desc_index, n * buf_size,
                                f"network descriptor: operation_buffer_desc_index for {n} ops")
        for i in range(n):
            op = EmuOp.decode(ops, i * op_size, self.legacy)
            if op.op_type not in OP_NAMES:
                raise EmulatorError(f"op {i}: op_type {op.op_type} is neither POWER (0) nor SOFTMAX (1)")
            where = f"op {i} ({op.name})"
            src = self._buffer(EmuBufferDesc.decode(bufs, i * buf_size, self.legacy), f"{where}: src_data")
            dst = self._buffer(EmuBufferDesc.decode(bufs, i * buf_size + BUFFER_DESC_SIZE, self.legacy),
                               f"{where}: dst_data")
            fmt = self._format(src, dst, where)
            if self.log:
                d = src.desc
                self.log(f"emu {where}: {FORMAT_NAMES[fmt]} {d.width}x{d.height}x{d.channel}, {op}")
            if op.op_type == EMU_OP_POWER:
                await self._power(op, src, dst, fmt)
            else:
                await self._softmax(op, src, dst, fmt, where)
            key = f"EMU_{op.name}"
            self.stats.ops[key] = self.stats.ops.get(key, 0) + 1
            self.stats.max_in_flight[key] = 1
        self.stats.seconds = time.perf_counter() - start
        return self.stats

    def _format(self, src: _Buffer, dst: _Buffer, where: str) -> int:
        """The current-layout format both cubes are in (what Emulator.cpp accepts: equal, FF16 or INT8)."""
        for b in (src, dst):
            f = b.desc.format
            if self.legacy:
                if f != LEGACY_FORMAT_FF16:
                    raise EmulatorError(f"{b.what}.format = {f}: the legacy emulator supports FP16 (2) only")
            elif f not in _GEOMETRY:
                name = FORMAT_NAMES[f] if f < len(FORMAT_NAMES) else "unknown"
                raise EmulatorError(f"{b.what}.format = {f} ({name}): NVDLA's emulator supports FF16 (3), "
                                    "INT8 (0) and INT8_8 (1)")
        if self.legacy:
            return FORMAT_FF16
        if src.desc.format != dst.desc.format:
            raise EmulatorError(f"{where}: src_data.format = {src.desc.format} but dst_data.format = "
                                f"{dst.desc.format}; the emulator does not convert")
        return src.desc.format

    @staticmethod
    def _offsets(desc: EmuBufferDesc, c: int, h: int, w: int, fmt: int) -> np.ndarray:
        """Byte offsets of the (c, h, w) elements in C loop order (getAddrOffset)."""
        bpe, k = _GEOMETRY[fmt]
        cc = np.arange(c, dtype=np.int64)[:, None, None]
        hh = np.arange(h, dtype=np.int64)[None, :, None]
        ww = np.arange(w, dtype=np.int64)[None, None, :]
        off = (cc // k) * desc.surf_stride + hh * desc.line_stride + ww * (k * bpe) + (cc % k) * bpe
        return off.reshape(-1)

    async def _power(self, op: EmuOp, src: _Buffer, dst: _Buffer, fmt: int) -> None:
        d = src.desc  # the loops run over the src cube's dimensions
        bpe = _GEOMETRY[fmt][0]
        s_off = self._offsets(d, d.channel, d.height, d.width, fmt)
        d_off = self._offsets(dst.desc, d.channel, d.height, d.width, fmt)
        if s_off.size:  # both cubes checked before anything is read or written
            self._span(src, s_off, bpe)
            self._span(dst, d_off, bpe)
        raw = await self._gather(src, s_off, bpe)
        power, scale, shift = (np.float32(v) for v in (op.power, op.scale, op.shift))
        if fmt == FORMAT_FF16:
            x = _f32(raw)
        else:
            x = raw.view(np.int8).astype(np.float32) * np.float32(op.input_scale_factor)
        with np.errstate(over="ignore", invalid="ignore"):
            y = _powf((shift + (scale * x).astype(np.float32)).astype(np.float32), power)
            if fmt == FORMAT_FF16:
                out = half_bits(y)
            else:
                out = _saturate_int8((y / np.float32(op.output_scale_factor)).astype(np.float32)).view(np.uint8)
        await self._scatter(dst, d_off, out, bpe)

    async def _softmax(self, op: EmuOp, src: _Buffer, dst: _Buffer, fmt: int, where: str) -> None:
        c = src.desc.channel
        if dst.desc.channel != c:
            raise EmulatorError(f"{where}: dst_data.channel = {dst.desc.channel} but src_data.channel = {c}")
        bpe = _GEOMETRY[fmt][0]
        off = np.arange(c, dtype=np.int64) * bpe  # channel contiguous elements, whatever the strides say
        if c:
            self._span(src, off, bpe)
            self._span(dst, off, bpe)
        raw = await self._gather(src, off, bpe)
        if c == 0:
            return
        if fmt == FORMAT_FF16:
            out = half_bits(_softmax(_f32(raw)))
        else:
            x = half_bits(raw.view(np.int8).astype(np.float32) * np.float32(op.input_scale_factor))
            q = _f32(half_bits(_softmax(_f32(x))))
            with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
                out = _saturate_int8((q / np.float32(op.output_scale_factor)).astype(np.float32)).view(np.uint8)
        await self._scatter(dst, off, out, bpe)
