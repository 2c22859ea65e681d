"""Where the compiler's register programs point: feature cubes and SDP operand placements, plus the
``S_POINTER`` writes every emitter starts with. The program type itself is ``golden.program.RegProgram``."""
from __future__ import annotations

from dataclasses import dataclass

from golden.program import Loc, RegProgram, loc_add

@dataclass(frozen=True)
class Cube:
    """Where an int8 feature cube lives and how it is laid out (NVDLA feature layout, strides in bytes)."""

    loc: Loc
    channels: int
    height: int
    width: int
    line_stride: int
    surface_stride: int

    def rows(self, first: int, count: int) -> "Cube":
        """The band of ``count`` lines starting at line ``first`` (same strides)."""
        return Cube(loc_add(self.loc, first * self.line_stride), self.channels, count, self.width,
                    self.line_stride, self.surface_stride)

    def window(self, rows: tuple[int, int], cols: tuple[int, int], atom_bytes: int) -> "Cube":
        """Lines [r0, r1) and columns [c0, c1) of every surface (same strides): a spatial sub-rectangle one
        engine pass reads or writes in place."""
        (r0, r1), (c0, c1) = rows, cols
        return Cube(loc_add(self.loc, r0 * self.line_stride + c0 * atom_bytes), self.channels, r1 - r0, c1 - c0,
                    self.line_stride, self.surface_stride)

    def surfaces_from(self, first_channel: int, channels: int, atom: int) -> "Cube":
        """``channels`` channels starting at ``first_channel`` (a multiple of the atom)."""
        assert first_channel % atom == 0
        return Cube(loc_add(self.loc, first_channel // atom * self.surface_stride), channels, self.height,
                    self.width, self.line_stride, self.surface_stride)

    def size(self, atom: int) -> int:
        """Bytes from the cube's start to the end of its last atom."""
        surfaces = -(-self.channels // atom)
        return (surfaces - 1) * self.surface_stride + (self.height - 1) * self.line_stride + self.width * atom


@dataclass(frozen=True)
class OperandPlacement:
    """An SDP memory operand: per-kernel ((C,) values) or per-element (a cube), 1 or 2 bytes per value,
    ALU and/or MUL components interleaved (ALU first)."""

    loc: Loc
    mode: str  # "kernel" or "element"
    size: int  # bytes per component
    use: str  # "alu", "mul" or "both"
    line_stride: int = 0
    surface_stride: int = 0


#: ``*_PRECISION`` / ``D_DATA_FORMAT`` encodings of the data types, the same in every unit.
PRECISION_CODES = {"int8": 0, "int16": 1, "fp16": 2}


def u32(v: int) -> int:
    return int(v) & 0xFFFFFFFF


def pointers(p: RegProgram, *units: str) -> None:
    """``S_POINTER`` writes selecting "this operation's" ping-pong group: the runtime picks the group when the
    operation starts (``runtime.groups``), so the value written here is a placeholder 0."""
    for unit in units:
        p.reg(unit, "S_POINTER", 0)
