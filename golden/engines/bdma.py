"""BDMA: the bridge DMA, a strided byte copy between DRAM (MC) and CV-SRAM (CV) (NVDLA_NOTES §2, §4 BDMA).

Programming model (``cmod/bdma/``, RTL ``vmod/nvdla/bdma/NV_NVDLA_BDMA_csb.v``, the nvdlav1 programming
guide "BDMA programming"):

- BDMA has no ping-pong groups. Software writes one transfer into the ``CFG_*`` registers, then
  ``CFG_OP.EN=1`` copies them into one of 20 slots (RTL: pushed into the CSB command FIFO only when the
  written EN is 1; ``STATUS.FREE_SLOT`` = 20 - queued, its RDL reset value).
- ``CFG_LAUNCH0.GRP0_LAUNCH=1`` (or ``CFG_LAUNCH1.GRP1_LAUNCH=1``) closes a group: every queued transfer
  runs in order, and when the last one's writes complete, GLB ``BDMA_DONE_STATUS0`` (or ``1``) is raised.
  ``CFG_OP`` and ``CFG_LAUNCH*`` are plain registers that read back what was written (the RTL register
  file keeps them; the nvdlav1 sanity traces read 1 back after the launch).
- One transfer: for each of SURF_REPEAT+1 surfaces s and LINE_REPEAT+1 lines l, copy (LINE.SIZE+1)*32
  bytes from ``SRC + s*SRC_SURF + l*SRC_LINE`` to ``DST + s*DST_SURF + l*DST_LINE``. Addresses are
  ``HIGH << 32 | LOW`` where LOW and the strides are fields [31:5] (``BdmaCore.cpp`` shifts them left by
  5), so their low five bits are ignored like every nv_full DMA field (``golden.dma.dma_bytes``).
- ``CFG_CMD.SRC_RAM_TYPE``/``DST_RAM_TYPE``: 1 MC (DRAM), 0 CVSRAM.

The model runs the transfers synchronously inside the launch write, so STATUS always shows both groups
idle after it returns. Rules the hardware leaves to timing are errors here:

- a launch with nothing queued (the RTL pops nothing and never raises the done bit): ConfigError;
- queueing into a full queue (RTL assertion "memory copy command is dropped"): ConfigError;
- a destination line overlapping a source line of the same transfer in the same memory (reads run ahead
  of writes through the DMA FIFO, so what is copied depends on latency): ConfigError.
Destination lines that overlap each other are legal: writes leave in order, so the later line wins.
"""
from __future__ import annotations

import numpy as np

from golden.dma import space_for
from golden.engines import CommandQueue, Engine, OpContext, register
from golden.intr import unit_done_bits
from golden.memory import AddressSpace
from golden.regs import UNITS, RegView

#: Bytes per line unit and the shift of the [31:5] address/stride fields.
ATOM = 32
_STATUS = UNITS["BDMA"].register("STATUS")
#: Slots of the operation queue: STATUS.FREE_SLOT resets to it (RTL: ``20 - csb_fifo_wr_count``).
SLOTS = _STATUS.field("FREE_SLOT").reset
#: A strided access reads/writes one span when it is at most this many bytes or twice the data moved;
#: sparser accesses go line by line.
_SPAN_BYTES = 64 << 20


class Transfer:
    """One queued BDMA operation, decoded from a snapshot of the CFG_* registers."""

    def __init__(self, view: RegView) -> None:
        self.view = view
        self.line_bytes = (view.CFG_LINE.SIZE + 1) * ATOM
        self.lines = view.CFG_LINE_REPEAT.NUMBER + 1
        self.surfaces = view.CFG_SURF_REPEAT.NUMBER + 1
        self.src = (view.CFG_SRC_ADDR_HIGH.V8 << 32) | (view.CFG_SRC_ADDR_LOW.V32 * ATOM)
        self.dst = (view.CFG_DST_ADDR_HIGH.V8 << 32) | (view.CFG_DST_ADDR_LOW.V32 * ATOM)
        self.src_line = view.CFG_SRC_LINE.STRIDE * ATOM
        self.dst_line = view.CFG_DST_LINE.STRIDE * ATOM
        self.src_surf = view.CFG_SRC_SURF.STRIDE * ATOM
        self.dst_surf = view.CFG_DST_SURF.STRIDE * ATOM

    def starts(self, surf_stride: int, line_stride: int) -> np.ndarray:
        """Offsets of every line from the base, in hardware order (surface-major), int64."""
        s = np.arange(self.surfaces, dtype=np.int64)[:, None] * surf_stride
        line = np.arange(self.lines, dtype=np.int64)[None, :] * line_stride
        return (s + line).reshape(-1)

    def span(self, surf_stride: int, line_stride: int) -> int:
        """Bytes from the first line's start to the last byte any line touches."""
        return (self.surfaces - 1) * surf_stride + (self.lines - 1) * line_stride + self.line_bytes


def _strided(buf: np.ndarray, t: Transfer, surf_stride: int, line_stride: int) -> np.ndarray:
    """(surfaces, lines, line_bytes) view of ``buf`` (no copy)."""
    return np.lib.stride_tricks.as_strided(
        buf, shape=(t.surfaces, t.lines, t.line_bytes), strides=(surf_stride, line_stride, 1), writeable=True
    )


def _bulk(t: Transfer, span: int) -> bool:
    return span <= max(_SPAN_BYTES, 2 * t.surfaces * t.lines * t.line_bytes)


def _raw(space: AddressSpace, read: int = 0, written: int = 0) -> AddressSpace:
    """The space under a profiling ``CountedSpace`` with the bytes the lines move counted (a span access
    also touches the gaps between lines, which the DMA does not move); ``space`` itself otherwise."""
    traffic = getattr(space, "traffic", None)
    if traffic is None:
        return space
    traffic.count(space.engine, read=read, written=written)
    return space.space


def read_lines(space: AddressSpace, t: Transfer) -> np.ndarray:
    """Source bytes as (surfaces*lines, line_bytes) uint8, in hardware order."""
    span = t.span(t.src_surf, t.src_line)
    if _bulk(t, span):
        buf = _raw(space, read=t.surfaces * t.lines * t.line_bytes).read(t.src, span)
        return np.array(_strided(buf, t, t.src_surf, t.src_line)).reshape(-1, t.line_bytes)
    starts = t.starts(t.src_surf, t.src_line)
    return np.stack([space.read(t.src + int(a), t.line_bytes) for a in starts])


def write_lines(space: AddressSpace, t: Transfer, data: np.ndarray) -> None:
    """Write (surfaces*lines, line_bytes) at the destination lines; a later line wins where lines overlap."""
    starts = t.starts(t.dst_surf, t.dst_line)
    ordered = np.sort(starts)
    disjoint = bool(np.all(np.diff(ordered) >= t.line_bytes))
    span = t.span(t.dst_surf, t.dst_line)
    if disjoint and _bulk(t, span):
        raw = _raw(space, written=data.size)
        buf = raw.read(t.dst, span)  # keep the bytes between lines
        _strided(buf, t, t.dst_surf, t.dst_line)[...] = data.reshape(t.surfaces, t.lines, t.line_bytes)
        raw.write(t.dst, buf)
        return
    for a, line in zip(starts, data):  # overlapping or very sparse lines: one write per line, in order
        space.write(t.dst + int(a), line)


def check_no_overlap(t: Transfer) -> None:
    """ConfigError if a destination line shares a byte with a source line (same memory, same transfer)."""
    src = np.sort(t.src + t.starts(t.src_surf, t.src_line))
    dst = t.dst + t.starts(t.dst_surf, t.dst_line)
    # the first source line starting after d - line_bytes overlaps [d, d + line_bytes) iff it starts before its end
    j = np.searchsorted(src, dst - t.line_bytes, side="right")
    hit = j < src.size
    hit[hit] = src[j[hit]] < dst[hit] + t.line_bytes
    if hit.any():
        i = int(np.argmax(hit))
        surface, line = divmod(i, t.lines)
        raise t.view.CFG_DST_ADDR_LOW.fail(
            "V32",
            f"destination line (surface {surface}, line {line}) at {int(dst[i]):#x} overlaps the source lines "
            f"({t.line_bytes} bytes each); the hardware result would depend on read/write timing",
        )


def run(ctx: OpContext) -> None:
    """Run one queued transfer."""
    view = ctx.regs["BDMA"]
    t = Transfer(view)
    cmd = view.CFG_CMD
    src_space = space_for(ctx.hw, ctx.mem, cmd.SRC_RAM_TYPE, cmd.where("SRC_RAM_TYPE"))
    dst_space = space_for(ctx.hw, ctx.mem, cmd.DST_RAM_TYPE, cmd.where("DST_RAM_TYPE"))
    if cmd.SRC_RAM_TYPE == cmd.DST_RAM_TYPE:
        check_no_overlap(t)
    write_lines(dst_space, t, read_lines(src_space, t))


def status_words(queued: int) -> dict[str, int]:
    """Hardware-owned STATUS with ``queued`` operations waiting for a launch (both groups idle: the model
    completes a group inside its launch write; the stall counters stay 0)."""
    return {
        "STATUS": _STATUS.encode(FREE_SLOT=SLOTS - queued, IDLE=int(queued == 0)),
        "STATUS_GRP0_READ_STALL": 0,
        "STATUS_GRP0_WRITE_STALL": 0,
        "STATUS_GRP1_READ_STALL": 0,
        "STATUS_GRP1_WRITE_STALL": 0,
    }


ENGINE = register(
    Engine(
        name="BDMA",
        units=("BDMA",),
        rdma=None,
        done_bits=unit_done_bits("BDMA"),
        run=run,
        queue=CommandQueue(
            enqueue="CFG_OP", launches=("CFG_LAUNCH0", "CFG_LAUNCH1"), depth=SLOTS, status=status_words
        ),
    )
)
