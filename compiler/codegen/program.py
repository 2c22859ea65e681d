"""``RegProgram``: ordered NVDLA register writes, some of whose values are relocated addresses."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Union

from golden.config import HwConfig
from golden.regs import UNITS

#: An address: absolute bytes, or (region id, byte offset) resolved when the runtime places the region.
Loc = Union[int, tuple[int, int]]


def loc_add(loc: Loc, delta: int) -> Loc:
    return loc + delta if isinstance(loc, int) else (loc[0], loc[1] + delta)


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


@dataclass
class RegProgram:
    hw: HwConfig
    #: (full register name, value, relocation or None); with a relocation the value is the offset's shift.
    writes: list[tuple[str, int, tuple[int, int] | None]] = field(default_factory=list)

    def reg(self, unit: str, register: str, value: int = 0, **fields: int) -> None:
        reg = UNITS[unit].register(register)
        word = reg.encode(**fields) if fields else value & 0xFFFFFFFF
        self.writes.append((reg.full_name, word, None))

    def addr(self, unit: str, register: str, loc: Loc) -> None:
        """An address register (``*_LOW``): absolute value, or a relocation the runtime resolves."""
        reg = UNITS[unit].register(register)
        if isinstance(loc, int):
            self.writes.append((reg.full_name, loc & 0xFFFFFFFF, None))
        else:
            self.writes.append((reg.full_name, 0, (int(loc[0]), int(loc[1]))))

    def absolute(self) -> list[tuple[str, int]]:
        """The writes as (name, value); every address must be absolute."""
        out = []
        for name, value, reloc in self.writes:
            if reloc is not None:
                raise ValueError(f"{name} is relocated against region {reloc[0]}")
            out.append((name, value))
        return out


def u32(v: int) -> int:
    return int(v) & 0xFFFFFFFF


def pointers(p: RegProgram, *units: str) -> None:
    """``S_POINTER`` writes selecting "this operation's" ping-pong group: the runtime picks the group when the
    operation starts (``runtime.groups``), so the value written here is a placeholder 0."""
    for unit in units:
        p.reg(unit, "S_POINTER", 0)
