"""``RegProgram``: one NVDLA register program, ordered register writes by name, some of whose values are
relocated addresses.

The one currency of register programming: the compiler's emitters (``compiler.codegen``) append to it, the
NVDLA firmware model's programmers (``runtime.nvdla.engines``) wrap it with their address resolvers and
polls, and regressions' single-layer tests (``regressions.lib.programs.LayerTest``) put a memory image and an
expected output around it. It sits in golden because it needs only the register table.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, NamedTuple, Union

from golden.config import HwConfig
from golden.errors import RegisterError
from golden.regs import UNITS, Register

__all__ = ["Loc", "RegProgram", "RegWrite", "loc_add"]

#: An address: absolute bytes, or (region id, byte offset) resolved when the runtime places the region.
Loc = Union[int, tuple[int, int]]


def loc_add(loc: Loc, delta: int) -> Loc:
    return loc + delta if isinstance(loc, int) else (loc[0], loc[1] + delta)


class RegWrite(NamedTuple):
    """One write: the register, its 32-bit value and, for an address the runtime places, the (region,
    offset) relocation (then ``value`` is 0)."""

    register: Register
    value: int
    reloc: tuple[int, int] | None = None

    @property
    def unit(self) -> str:
        return self.register.unit

    @property
    def name(self) -> str:
        """The register's name in its unit (``D_OP_ENABLE``)."""
        return self.register.name

    @property
    def full_name(self) -> str:
        """NVDLA's name (``NVDLA_PDP.D_OP_ENABLE_0``), as traces and loadables spell it."""
        return self.register.full_name


def _register(name: str) -> Register:
    """``NVDLA_PDP.D_OP_ENABLE_0`` or ``PDP.D_OP_ENABLE`` -> the register."""
    unit, reg = name.split(".")
    return UNITS[unit.removeprefix("NVDLA_")].register(reg)


def _check_whole(reg, value: int) -> None:
    """A whole-register value must fit the register's fields: a layer dimension beyond DATAIN_CHANNEL's 13 bits
    would otherwise be cut to its low bits and run a different layer. A negative value must fit the register's
    one (signed) field."""
    if value < 0:
        if len(reg.fields) == 1:
            reg.fields[0].encode(value)
        return
    mask = 0
    for f in reg.fields:
        mask |= f.mask
    if value & ~mask:
        names = ", ".join(f"{f.name}[{f.msb}:{f.lsb}]" for f in reg.fields)
        raise RegisterError(f"value {value} does not fit {reg.unit}.{reg.name} ({names})")


#: (unit, register, value, strict, *fields) -> the RegWrite ``RegProgram.reg`` made of them (immutable).
_ENCODED: dict[tuple, RegWrite] = {}


@dataclass
class RegProgram:
    """Ordered register writes for ``hw`` (emitters read its sizes)."""

    hw: HwConfig
    writes: list[RegWrite] = field(default_factory=list)
    #: Refuse whole-register values beyond the register's fields (``_check_whole``). The compiler's emitters
    #: are strict; NVDLA's firmware (``runtime.nvdla.engines``) writes descriptor words as they are, undefined
    #: bits included, as its kmd does.
    strict: bool = False

    @classmethod
    def of(cls, hw: HwConfig, writes: Iterable[tuple[str, int]]) -> "RegProgram":
        """A program from (NVDLA register name, value) pairs, as traces and ``absolute`` give them."""
        return cls(hw, [RegWrite(_register(name), int(value) & 0xFFFFFFFF) for name, value in writes])

    def reg(self, unit: str, register: str, value: int = 0, **fields: int | str) -> None:
        """Write ``value`` OR the encoded fields (enum names allowed) to UNIT.REGISTER."""
        key = (unit, register, value, self.strict, *fields.items())
        write = _ENCODED.get(key)
        if write is None:  # (a compiler emits the same few thousand words again and again: encode each once)
            reg = UNITS[unit].register(register)
            if value and self.strict:
                _check_whole(reg, value)
            write = RegWrite(reg, (value & 0xFFFFFFFF) | (reg.encode(**fields) if fields else 0))
            if len(_ENCODED) >= 1 << 16:
                _ENCODED.clear()
            _ENCODED[key] = write
        self.writes.append(write)

    def addr(self, unit: str, register: str, loc: Loc) -> None:
        """An address register (``*_LOW``): absolute value, or a relocation the runtime resolves."""
        reg = UNITS[unit].register(register)
        if isinstance(loc, int):
            self.writes.append(RegWrite(reg, loc & 0xFFFFFFFF))
        else:
            self.writes.append(RegWrite(reg, 0, (int(loc[0]), int(loc[1]))))

    def absolute(self) -> list[tuple[str, int]]:
        """The writes as (NVDLA register name, value); every address must be absolute."""
        out = []
        for w in self.writes:
            if w.reloc is not None:
                raise ValueError(f"{w.full_name} is relocated against region {w.reloc[0]}")
            out.append((w.full_name, w.value))
        return out
