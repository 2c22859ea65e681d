"""RUBIK: the data-reshape engine of nv_full, a pure byte mover in 32-byte atoms (NVDLA_NOTES §4 RUBIK).

Semantics follow NVDLA's cmod (``hw:nvdlav1:cmod/rubik/NV_NVDLA_rbk.cpp``, ``RubikRdmaSequence*``,
``RubikDataPathSequenceContract``, ``RubikWdmaSequence*``; sizes from ``NV_NVDLA_rbk.h``). Addresses are
``DAIN/DAOUT_ADDR_HIGH << 32 | ADDR_LOW``; LOW and every stride are fields [31:5] (the cmod shifts them
left by 5). ``IN_PRECISION`` sets the element size ``e`` (int8 1 byte, int16/fp16 2) and the elements per
atom ``A = 32 / e`` (32 or 16). ``D_MISC_CFG.RUBIK_MODE``:

- CONTRACT (deconvolution reshuffle). ``S = ceil((DATAOUT_CHANNEL+1) / A)`` output surfaces, input
  ``W x H`` = DATAIN_WIDTH/HEIGHT + 1, ``sx, sy`` = DECONV_X/Y_STRIDE + 1. For every s < S, h < H,
  j < sy, w < W, i < sx the input atom at ``DAIN + ((j*sx + i)*S + s)*DAIN_SURF_STRIDE + h*DAIN_LINE_STRIDE
  + w*32`` is copied whole to ``DAOUT + s*DAOUT_SURF_STRIDE + h*CONTRACT_STRIDE_1 + j*DAOUT_LINE_STRIDE +
  (w*sx + i)*32``. DATAIN_CHANNEL is not used. The cmod steps from one stride group of input surfaces to
  the next by ``S * DAIN_SURF_STRIDE``; the RTL (``NV_NVDLA_RUBIK_seq_gen.v`` ``cube_stride``) by
  ``CONTRACT_STRIDE_0``, which kmd programs to that product: any other value is a ConfigError here.
- SPLIT (feature cube -> one plane per channel). The input has ``ceil((DATAIN_CHANNEL+1)/A)`` surfaces
  (DAIN_SURF/LINE_STRIDE); planes ``c < DATAOUT_CHANNEL+1`` are written, line h of plane c at
  ``DAOUT + h*DAOUT_LINE_STRIDE + c*DAOUT_PLANAR_STRIDE``: the W elements, then zeros up to the next
  32-byte boundary (the write payload is whole atoms taken from a zeroed reorder buffer). Both channel
  counts must give the same number of surfaces (the read and write sides count atoms by different
  registers; otherwise the hardware hangs or leaves atoms in its FIFO): ConfigError otherwise.
- MERGE (planes -> feature cube). ``C = DATAIN_CHANNEL+1`` planes (DAIN_PLANAR/LINE_STRIDE), element x
  of line h of plane c at ``DAIN + h*DAIN_LINE_STRIDE + c*DAIN_PLANAR_STRIDE + x*e``; output atom (s, h, x)
  at ``DAOUT + s*DAOUT_SURF_STRIDE + h*DAOUT_LINE_STRIDE + x*32`` holds channels s*A .. s*A+A-1, lanes
  past C zero. DATAOUT_CHANNEL is not used.

Writes land in the cmod's request order, so where output atoms overlap the later one wins: CONTRACT line
by line (s, h, j); SPLIT by surface, line, 64-element chunk, plane; MERGE by surface, line, column. An operation
whose writes hit atoms it also reads (same RAM) is a ConfigError: the DMA reads run ahead of the writes,
so the result would depend on timing. Configs without RUBIK (or without its contract / reshape halves)
raise UnsupportedError naming RUBIK.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from golden.config import HwConfig
from golden.dma import space_for
from golden.engines import Engine, OpContext, register
from golden.errors import UnsupportedError
from golden.memory import AddressSpace
from golden.intr import unit_done_bits
from golden.regs import RegView

#: Bytes per atom (``RUBIK_ATOM_CUBE_SIZE``), the unit of every RUBIK memory access.
ATOM = 32
#: Elements per split/merge transfer (``RUBIK_INTERNAL_BUF_SIZE`` 2048 / 32): the line chunk of the cmod.
CHUNK = 64
CONTRACT, SPLIT, MERGE = 0, 1, 2
MODE_NAMES = {CONTRACT: "contract", SPLIT: "split", MERGE: "merge"}
#: IN_PRECISION -> (name, bytes per element).
PRECISIONS = {0: ("int8", 1), 1: ("int16", 2), 2: ("fp16", 2)}


@dataclass(frozen=True)
class RubikOp:
    """One RUBIK operation decoded from its register group (sizes are counts, addresses bytes)."""

    view: RegView
    mode: int
    precision: str
    bpe: int
    width: int
    height: int
    in_channels: int
    out_channels: int
    src: int
    dst: int
    src_line: int
    src_surf: int
    src_planar: int
    dst_line: int
    dst_surf: int
    dst_planar: int
    contract_stride_0: int
    contract_stride_1: int
    stride_x: int
    stride_y: int
    src_ram: int
    dst_ram: int

    @property
    def atom_elements(self) -> int:
        return ATOM // self.bpe

    @property
    def out_surfaces(self) -> int:
        return -(-self.out_channels // self.atom_elements)

    @property
    def in_surfaces(self) -> int:
        return -(-self.in_channels // self.atom_elements)

    @property
    def plane_atoms(self) -> int:
        """Atoms one plane line occupies (split writes / merge reads): W elements rounded up to atoms."""
        return -(-self.width * self.bpe // ATOM)

    @classmethod
    def from_view(cls, hw: HwConfig, view: RegView) -> "RubikOp":
        misc = view.D_MISC_CFG
        mode = misc.RUBIK_MODE
        if mode not in MODE_NAMES:
            raise misc.fail("RUBIK_MODE", f"{mode} is not a mode (0 contract, 1 split, 2 merge)")
        if misc.IN_PRECISION not in PRECISIONS:
            raise misc.fail("IN_PRECISION", f"{misc.IN_PRECISION} is not a precision (0 int8, 1 int16, 2 fp16)")
        check_present(hw, mode)
        precision, bpe = PRECISIONS[misc.IN_PRECISION]
        if not hw.supports(precision):  # type: ignore[arg-type]
            raise UnsupportedError("RUBIK", f"RUBIK {precision} ({misc.where('IN_PRECISION')}) needs a config "
                                            f"with {precision} features; {hw.name} has {', '.join(hw.feature_types)}")
        size0 = view.D_DATAIN_SIZE_0
        stride = view.D_DECONV_STRIDE
        return cls(
            view=view, mode=mode, precision=precision, bpe=bpe,
            width=size0.DATAIN_WIDTH + 1, height=size0.DATAIN_HEIGHT + 1,
            in_channels=view.D_DATAIN_SIZE_1.DATAIN_CHANNEL + 1,
            out_channels=view.D_DATAOUT_SIZE_1.DATAOUT_CHANNEL + 1,
            src=(view.D_DAIN_ADDR_HIGH.DAIN_ADDR_HIGH << 32) | view.D_DAIN_ADDR_LOW.DAIN_ADDR_LOW * ATOM,
            dst=(view.D_DAOUT_ADDR_HIGH.DAOUT_ADDR_HIGH << 32) | view.D_DAOUT_ADDR_LOW.DAOUT_ADDR_LOW * ATOM,
            src_line=view.D_DAIN_LINE_STRIDE.DAIN_LINE_STRIDE * ATOM,
            src_surf=view.D_DAIN_SURF_STRIDE.DAIN_SURF_STRIDE * ATOM,
            src_planar=view.D_DAIN_PLANAR_STRIDE.DAIN_PLANAR_STRIDE * ATOM,
            dst_line=view.D_DAOUT_LINE_STRIDE.DAOUT_LINE_STRIDE * ATOM,
            dst_surf=view.D_DAOUT_SURF_STRIDE.DAOUT_SURF_STRIDE * ATOM,
            dst_planar=view.D_DAOUT_PLANAR_STRIDE.DAOUT_PLANAR_STRIDE * ATOM,
            contract_stride_0=view.D_CONTRACT_STRIDE_0.CONTRACT_STRIDE_0 * ATOM,
            contract_stride_1=view.D_CONTRACT_STRIDE_1.CONTRACT_STRIDE_1 * ATOM,
            stride_x=stride.DECONV_X_STRIDE + 1, stride_y=stride.DECONV_Y_STRIDE + 1,
            src_ram=view.D_DAIN_RAM_TYPE.DATAIN_RAM_TYPE, dst_ram=view.D_DAOUT_RAM_TYPE.DATAOUT_RAM_TYPE,
        )


def check_present(hw: HwConfig, mode: int) -> None:
    """UnsupportedError naming RUBIK when ``hw`` lacks the engine or the half a mode needs."""
    if not hw.rubik:
        raise UnsupportedError("RUBIK", f"{hw.name} has no RUBIK")
    if mode == CONTRACT and not hw.rubik_contract:
        raise UnsupportedError("RUBIK", f"RUBIK contract mode needs RUBIK_CONTRACT, which {hw.name} lacks")
    if mode != CONTRACT and not hw.rubik_reshape:
        raise UnsupportedError("RUBIK", f"RUBIK {MODE_NAMES[mode]} mode needs RUBIK_RESHAPE, which {hw.name} lacks")


# ---- the three modes: (atoms read, atoms written in request order, their bytes) -----------------------------
_LANES = np.arange(ATOM, dtype=np.int64)


@dataclass
class Moves:
    """What one operation does to memory, as absolute atom start addresses."""

    reads: np.ndarray  # every atom the DMA reads (int64, any order)
    writes: np.ndarray  # every atom written, in request order (int64)
    data: np.ndarray  # (len(writes), 32) uint8


def _read_atoms(space: AddressSpace, base: int, offsets: np.ndarray) -> np.ndarray:
    """Bytes of the atoms at ``base + offsets`` (any shape), shape ``offsets.shape + (32,)``."""
    return space.gather(base, offsets[..., None] + _LANES)


def contract(op: RubikOp, src: AddressSpace) -> Moves:
    s_out, sx, sy = op.out_surfaces, op.stride_x, op.stride_y
    if op.contract_stride_0 != s_out * op.src_surf:
        raise op.view.D_CONTRACT_STRIDE_0.fail(
            "CONTRACT_STRIDE_0",
            f"{op.contract_stride_0} bytes, but {s_out} output surface(s) x DAIN_SURF_STRIDE {op.src_surf} = "
            f"{s_out * op.src_surf}: the cmod steps input stride groups by the product, the RTL by this register",
        )
    i64 = np.int64
    s = np.arange(s_out, dtype=i64)[:, None, None, None, None]
    h = np.arange(op.height, dtype=i64)[None, :, None, None, None]
    j = np.arange(sy, dtype=i64)[None, None, :, None, None]
    w = np.arange(op.width, dtype=i64)[None, None, None, :, None]
    i = np.arange(sx, dtype=i64)[None, None, None, None, :]
    src_off = ((j * sx + i) * s_out + s) * op.src_surf + h * op.src_line + w * ATOM
    dst_off = s * op.dst_surf + h * op.contract_stride_1 + j * op.dst_line + (w * sx + i) * ATOM
    shape = (s_out, op.height, sy, op.width, sx)
    src_off, dst_off = np.broadcast_to(src_off, shape).reshape(-1), np.broadcast_to(dst_off, shape).reshape(-1)
    # Request order is (s, h, j) line by line; inside one line (8x8 blocks of (w, i) when sx > 8) the atoms
    # have distinct addresses, so that order never shows and line order is enough.
    return Moves(op.src + src_off, op.dst + dst_off, _read_atoms(src, op.src, src_off))


def split(op: RubikOp, src: AddressSpace) -> Moves:
    if op.out_surfaces != op.in_surfaces:
        raise op.view.D_DATAOUT_SIZE_1.fail(
            "DATAOUT_CHANNEL",
            f"{op.out_channels} planes fill {op.out_surfaces} surface(s) of {op.atom_elements}, but DATAIN_CHANNEL "
            f"({op.in_channels} channels) reads {op.in_surfaces}: the write side would hang or leave atoms queued",
        )
    i64 = np.int64
    a, e = op.atom_elements, op.bpe
    s = np.arange(op.in_surfaces, dtype=i64)[:, None, None]
    h = np.arange(op.height, dtype=i64)[None, :, None]
    w = np.arange(op.width, dtype=i64)[None, None, :]
    src_off = np.broadcast_to(s * op.src_surf + h * op.src_line + w * ATOM,
                              (op.in_surfaces, op.height, op.width))
    cube = _read_atoms(src, op.src, src_off)  # (S, H, W, 32)
    # output: plane c, line h, byte b of the zero-padded plane line
    c = np.arange(op.out_channels, dtype=i64)[:, None, None]
    hh = np.arange(op.height, dtype=i64)[None, :, None]
    b = np.arange(op.plane_atoms * ATOM, dtype=i64)[None, None, :]
    x = b // e
    valid = x < op.width
    lines = cube[c // a, hh, np.minimum(x, op.width - 1), (c % a) * e + b % e]
    lines = np.where(valid, lines, 0).astype(np.uint8)  # (C, H, plane bytes)
    atoms = lines.reshape(op.out_channels, op.height, op.plane_atoms, ATOM)
    k = np.arange(op.plane_atoms, dtype=i64)[None, None, :]
    dst_off = np.broadcast_to(hh * op.dst_line + c * op.dst_planar + k * ATOM, atoms.shape[:3])
    # request order: surface, line, 64-element chunk, plane, atom
    cc, hi, ki = np.indices(atoms.shape[:3]).reshape(3, -1)
    order = np.lexsort((ki, cc, ki * ATOM // (CHUNK * e), hi, cc // a))
    read_off = src_off.reshape(-1)
    return Moves(op.src + read_off, op.dst + dst_off.reshape(-1)[order], atoms.reshape(-1, ATOM)[order])


def merge(op: RubikOp, src: AddressSpace) -> Moves:
    i64 = np.int64
    a, e = op.atom_elements, op.bpe
    surfaces = op.in_surfaces
    # input bytes: plane c, line h, byte b of the plane line (whole atoms are read)
    c = np.arange(op.in_channels, dtype=i64)[:, None, None]
    h = np.arange(op.height, dtype=i64)[None, :, None]
    k = np.arange(op.plane_atoms, dtype=i64)[None, None, :]
    atom_off = np.broadcast_to(h * op.src_line + c * op.src_planar + k * ATOM,
                               (op.in_channels, op.height, op.plane_atoms))
    planes = _read_atoms(src, op.src, atom_off).reshape(op.in_channels, op.height, -1)
    # output atom (s, h, x), lane l: channel s*a + l//e, byte l%e of element x
    s = np.arange(surfaces, dtype=i64)[:, None, None, None]
    hh = np.arange(op.height, dtype=i64)[None, :, None, None]
    x = np.arange(op.width, dtype=i64)[None, None, :, None]
    lane = _LANES[None, None, None, :]
    ch = s * a + lane // e
    valid = ch < op.in_channels
    data = planes[np.minimum(ch, op.in_channels - 1), hh, x * e + lane % e]
    data = np.where(valid, data, 0).astype(np.uint8).reshape(-1, ATOM)
    dst_off = np.broadcast_to(s[..., 0] * op.dst_surf + hh[..., 0] * op.dst_line + x[..., 0] * ATOM,
                              (surfaces, op.height, op.width)).reshape(-1)
    return Moves(op.src + atom_off.reshape(-1), op.dst + dst_off, data)


MODES = {CONTRACT: contract, SPLIT: split, MERGE: merge}


# ---- the engine ---------------------------------------------------------------------------------------------
def check_no_overlap(op: RubikOp, moves: Moves) -> None:
    """ConfigError if an atom written is also read by the same operation (same RAM)."""
    if op.src_ram != op.dst_ram:
        return
    hit = np.intersect1d(moves.reads, moves.writes)
    if hit.size:
        raise op.view.D_DAOUT_ADDR_LOW.fail(
            "DAOUT_ADDR_LOW",
            f"the output atom at {int(hit[0]):#x} is also read by this {MODE_NAMES[op.mode]} operation "
            f"({hit.size} atom(s) in all); the hardware result would depend on read/write timing",
        )


def write_atoms(space: AddressSpace, moves: Moves) -> None:
    """Write every atom; where several land on one address the last in request order wins."""
    if moves.writes.size == 0:
        return
    rev = moves.writes[::-1]
    _, first_in_rev = np.unique(rev, return_index=True)
    keep = moves.writes.size - 1 - first_in_rev
    base = int(moves.writes.min())
    offsets = (moves.writes[keep] - base)[:, None] + _LANES
    space.scatter(base, offsets, moves.data[keep])


def run(ctx: OpContext) -> None:
    view = ctx.regs["RBK"]
    op = RubikOp.from_view(ctx.hw, view)
    src = space_for(ctx.hw, ctx.mem, op.src_ram, view.D_DAIN_RAM_TYPE.where("DATAIN_RAM_TYPE"))
    dst = space_for(ctx.hw, ctx.mem, op.dst_ram, view.D_DAOUT_RAM_TYPE.where("DATAOUT_RAM_TYPE"))
    moves = MODES[op.mode](op, src)
    check_no_overlap(op, moves)
    write_atoms(dst, moves)
    for reg in ("D_PERF_READ_STALL", "D_PERF_WRITE_STALL"):
        ctx.report("RBK", reg, 0)  # the model has no timing: no stalls


ENGINE = register(
    Engine(
        name="RUBIK",
        units=("RBK",),
        rdma=None,
        done_bits=unit_done_bits("RBK"),
        run=run,
    )
)

__all__ = ["ENGINE", "RubikOp", "Moves", "CONTRACT", "SPLIT", "MERGE", "ATOM", "CHUNK"]
