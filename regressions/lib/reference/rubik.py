"""Reference math for RUBIK: the byte moves of contract, split and merge, as plain loops over byte maps.

Rules: NVDLA_NOTES.md section 4 "RUBIK", read off NVDLA's cmod (``cmod/rubik/NV_NVDLA_rbk.cpp``). Each
mode is written here as the cmod's read and write request sequences, byte by byte: every written byte
names the source byte it copies (or is a zero the hardware pads with), in the order the requests leave.
An operation reads every source byte before its first write lands (a write that hits a byte the same
operation reads is timing-dependent in hardware: ``problems`` reports it). Memories are plain
``{address: byte}`` dicts (absent bytes read 0), keyed by RAM type: 1 MC (DRAM), 0 CV (CV-SRAM).

Sizes are actual counts; addresses and strides are bytes, multiples of 32 (the registers hold bits
[31:5]). Nothing here imports the golden model.
"""
from __future__ import annotations

from dataclasses import dataclass

from .arith import check_range

MC, CV = 1, 0
CONTRACT, SPLIT, MERGE = 0, 1, 2
#: IN_PRECISION -> bytes per element (int8, int16, fp16).
ELEMENT_BYTES = {0: 1, 1: 2, 2: 2}
ATOM = 32
#: Elements per split/merge request (the cmod's 2048-byte reorder buffer over 32 lanes).
CHUNK = 64
#: Contract requests cover at most 8 input columns and 8 x-stride phases.
BLOCK = 8


@dataclass(frozen=True)
class RubikOp:
    """One RUBIK operation in register terms (sizes as counts, addresses and strides in bytes)."""

    mode: int
    precision: int
    width: int  # DATAIN_WIDTH + 1
    height: int  # DATAIN_HEIGHT + 1
    in_channels: int  # DATAIN_CHANNEL + 1
    out_channels: int  # DATAOUT_CHANNEL + 1
    src: int
    dst: int
    src_line: int = 0
    src_surf: int = 0
    src_planar: int = 0
    dst_line: int = 0
    dst_surf: int = 0
    dst_planar: int = 0
    contract_stride_0: int = 0
    contract_stride_1: int = 0
    stride_x: int = 1  # DECONV_X_STRIDE + 1
    stride_y: int = 1
    src_ram: int = MC
    dst_ram: int = MC

    def __post_init__(self) -> None:
        check_range("mode", self.mode, 0, 2)
        check_range("precision", self.precision, 0, 2)
        for name in ("width", "height", "in_channels", "out_channels"):
            check_range(name, getattr(self, name), 1, 1 << 13)
        check_range("stride_x", self.stride_x, 1, 32)
        check_range("stride_y", self.stride_y, 1, 32)
        for name in ("src", "dst", "src_line", "src_surf", "src_planar", "dst_line", "dst_surf", "dst_planar",
                     "contract_stride_0", "contract_stride_1"):
            value = getattr(self, name)
            if value < 0 or value % ATOM:
                raise ValueError(f"{name}={value:#x} is not a non-negative multiple of 32")
        check_range("src_ram", self.src_ram, 0, 1)
        check_range("dst_ram", self.dst_ram, 0, 1)

    @property
    def element_bytes(self) -> int:
        return ELEMENT_BYTES[self.precision]

    @property
    def per_atom(self) -> int:
        """Channels per atom (surface)."""
        return ATOM // self.element_bytes

    def surfaces(self, channels: int) -> int:
        return (channels + self.per_atom - 1) // self.per_atom


# ---- request sequences ------------------------------------------------------------------------------------
def _chunks(width: int, step: int) -> list[tuple[int, int]]:
    """(start, size) of the pieces a line of ``width`` is cut into, ``step`` at most."""
    out, start = [], 0
    while start < width:
        out.append((start, min(width - start, step)))
        start += step
    return out


def read_atoms(op: RubikOp) -> list[int]:
    """Start address of every atom the read DMA requests, in request order."""
    e, a = op.element_bytes, op.per_atom
    out = []
    if op.mode == CONTRACT:
        s_out = op.surfaces(op.out_channels)
        for s in range(s_out):
            for h in range(op.height):
                for j in range(op.stride_y):
                    for w0, ws in _chunks(op.width, BLOCK):
                        for i0, i_step in _chunks(op.stride_x, BLOCK):
                            for i in range(i0, i0 + i_step):
                                base = op.src + ((j * op.stride_x + i) * s_out + s) * op.src_surf + h * op.src_line
                                out += [base + (w0 + n) * ATOM for n in range(ws)]
    elif op.mode == SPLIT:
        for s in range(op.surfaces(op.in_channels)):
            for h in range(op.height):
                for w0, ws in _chunks(op.width, CHUNK):
                    base = op.src + s * op.src_surf + h * op.src_line + w0 * ATOM
                    out += [base + n * ATOM for n in range(ws)]
    else:
        for s in range(op.surfaces(op.in_channels)):
            planes = min(op.in_channels - s * a, a)
            for h in range(op.height):
                for w0, ws in _chunks(op.width, CHUNK):
                    atoms = (max(ATOM, ws * e) + ATOM - 1) // ATOM
                    for ch in range(planes):
                        base = op.src + h * op.src_line + (s * a + ch) * op.src_planar + w0 * e
                        out += [base + n * ATOM for n in range(atoms)]
    return out


def writes(op: RubikOp) -> list[tuple[int, int | None]]:
    """(destination byte, source byte or None for a zero) of every byte written, in request order."""
    e, a = op.element_bytes, op.per_atom
    out: list[tuple[int, int | None]] = []
    if op.mode == CONTRACT:
        s_out = op.surfaces(op.out_channels)
        sx = op.stride_x

        def atom(s: int, h: int, j: int, w: int, i: int) -> None:
            dst = op.dst + s * op.dst_surf + h * op.contract_stride_1 + j * op.dst_line + (w * sx + i) * ATOM
            src = op.src + ((j * sx + i) * s_out + s) * op.src_surf + h * op.src_line + w * ATOM
            out.extend((dst + b, src + b) for b in range(ATOM))

        for s in range(s_out):
            for h in range(op.height):
                for j in range(op.stride_y):
                    if sx > BLOCK:  # blocks of 8 columns x 8 phases, one request per column
                        for w0, ws in _chunks(op.width, BLOCK):
                            for i0, i_step in _chunks(sx, BLOCK):
                                for w in range(w0, w0 + ws):
                                    for i in range(i0, i0 + i_step):
                                        atom(s, h, j, w, i)
                    else:  # one request for the whole output line
                        for w in range(op.width):
                            for i in range(sx):
                                atom(s, h, j, w, i)
    elif op.mode == SPLIT:
        channels = op.out_channels
        for s in range(op.surfaces(channels)):
            planes = min(channels - s * a, a)
            for h in range(op.height):
                for w0, ws in _chunks(op.width, CHUNK):
                    payload = (max(ATOM, ws * e) + ATOM - 1) // ATOM * ATOM
                    for ch in range(planes):
                        dst = op.dst + h * op.dst_line + (s * a + ch) * op.dst_planar + w0 * e
                        for b in range(payload):
                            x = w0 + b // e
                            src = op.src + s * op.src_surf + h * op.src_line + x * ATOM + ch * e + b % e
                            out.append((dst + b, src if x < w0 + ws else None))
    else:
        channels = op.in_channels
        for s in range(op.surfaces(channels)):
            planes = min(channels - s * a, a)
            for h in range(op.height):
                for w0, ws in _chunks(op.width, CHUNK):
                    for x in range(w0, w0 + ws):
                        dst = op.dst + h * op.dst_line + s * op.dst_surf + x * ATOM
                        for lane in range(ATOM):
                            ch = lane // e
                            src = op.src + h * op.src_line + (s * a + ch) * op.src_planar + x * e + lane % e
                            out.append((dst + lane, src if ch < planes else None))
    return out


# ---- legality and the operation ----------------------------------------------------------------------------
def problems(op: RubikOp) -> list[str]:
    """Register fields that make the operation illegal (empty for a legal one):

    - ``CONTRACT_STRIDE_0``: contract with CONTRACT_STRIDE_0 other than output surfaces x DAIN_SURF_STRIDE
      (the cmod steps input stride groups by that product, the RTL by the register);
    - ``DATAOUT_CHANNEL``: split whose input and output channel counts fill different numbers of surfaces;
    - ``DAOUT_ADDR_LOW``: a written byte is also a byte the operation reads, in the same memory.
    """
    found = []
    if op.mode == CONTRACT and op.contract_stride_0 != op.surfaces(op.out_channels) * op.src_surf:
        found.append("CONTRACT_STRIDE_0")
    if op.mode == SPLIT and op.surfaces(op.out_channels) != op.surfaces(op.in_channels):
        found.append("DATAOUT_CHANNEL")
    if not found and op.src_ram == op.dst_ram:
        read = set()
        for start in read_atoms(op):
            read.update(range(start, start + ATOM))
        if any(dst in read for dst, _ in writes(op)):
            found.append("DAOUT_ADDR_LOW")
    return found


def rubik(memories: dict[int, dict[int, int]], op: RubikOp) -> None:
    """Run one legal operation on ``memories`` in place."""
    if problems(op):
        raise ValueError(f"illegal RUBIK operation: {', '.join(problems(op))}")
    src_mem, dst_mem = memories[op.src_ram], memories[op.dst_ram]
    moves = [(dst, 0 if src is None else src_mem.get(src, 0)) for dst, src in writes(op)]
    for dst, byte in moves:
        dst_mem[dst] = byte
