"""The NVDLA register map: units, registers, fields, both address maps, field encode/decode.

The register/field table is generated from NVDLA's RDL (``tools/gen_regs.py`` -> ``_table.py``). Unit
base addresses are not in the RDL (they come from NVDLA's address-map headers) and live here, for the
small/large map and the nvdlav1 full map (NVDLA_NOTES §2).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from typing import Iterator, Literal, Mapping

from golden.errors import ConfigError, RegisterError
from golden.regs._table import REGISTERS

AddressMapKind = Literal["small", "full"]

#: Unit base byte addresses per address map (NOTES §2). GEC has no RDL in the spec set and is omitted.
UNIT_BASES: dict[str, dict[str, int]] = {
    "small": {
        "CFGROM": 0x0000, "GLB": 0x1000, "MCIF": 0x2000, "CDMA": 0x3000, "CSC": 0x4000,
        "CMAC_A": 0x5000, "CMAC_B": 0x6000, "CACC": 0x7000, "SDP_RDMA": 0x8000, "SDP": 0x9000,
        "PDP_RDMA": 0xA000, "PDP": 0xB000, "CDP_RDMA": 0xC000, "CDP": 0xD000, "CVIF": 0xF000,
        "BDMA": 0x10000, "RBK": 0x11000,
    },
    "full": {
        "GLB": 0x0000, "MCIF": 0x2000, "CVIF": 0x3000, "BDMA": 0x4000, "CDMA": 0x5000, "CSC": 0x6000,
        "CMAC_A": 0x7000, "CMAC_B": 0x8000, "CACC": 0x9000, "SDP_RDMA": 0xA000, "SDP": 0xB000,
        "PDP_RDMA": 0xC000, "PDP": 0xD000, "CDP_RDMA": 0xE000, "CDP": 0xF000, "RBK": 0x10000,
    },
}

#: Every unit uses offsets inside one 4 KiB window (cmod masks ``addr & 0xFFF``).
UNIT_WINDOW = 0x1000


@dataclass(frozen=True)
class Field:
    name: str
    msb: int
    lsb: int
    access: str  # "rw", "r" or "w" as seen by software
    reset: int
    enum: Mapping[str, int] = field(default_factory=dict)

    @cached_property
    def width(self) -> int:
        return self.msb - self.lsb + 1

    @cached_property
    def low_mask(self) -> int:
        """Mask of this field's bits once shifted down (decoding is per field read: engines read ~200 a op)."""
        return (1 << self.width) - 1

    @cached_property
    def mask(self) -> int:
        """Mask of this field's bits in the register word."""
        return self.low_mask << self.lsb

    def decode(self, word: int) -> int:
        return (word >> self.lsb) & self.low_mask

    def decode_signed(self, word: int) -> int:
        v = self.decode(word)
        return v - (1 << self.width) if v >> (self.width - 1) else v

    def encode(self, value: int | str) -> int:
        """Field value (int, or an enum name) placed at its bits; out-of-range values are an error."""
        if isinstance(value, str):
            if value not in self.enum:
                raise RegisterError(f"field {self.name} has no value {value!r} (has {', '.join(self.enum)})")
            value = self.enum[value]
        lo = -(1 << (self.width - 1))
        if not lo <= value < (1 << self.width):
            raise RegisterError(f"value {value} does not fit field {self.name}[{self.msb}:{self.lsb}]")
        return (value & ((1 << self.width) - 1)) << self.lsb


@dataclass(frozen=True)
class Register:
    unit: str
    name: str
    offset: int  # byte offset inside the unit
    fields: tuple[Field, ...]

    @cached_property
    def full_name(self) -> str:
        """NVDLA's name, e.g. ``NVDLA_PDP.D_DATA_CUBE_OUT_WIDTH_0``."""
        return f"NVDLA_{self.unit}.{self.name}_0"

    @cached_property
    def by_name(self) -> dict[str, Field]:
        return {f.name: f for f in self.fields}

    def field(self, name: str) -> Field:
        try:
            return self.by_name[name]
        except KeyError:
            raise RegisterError(f"{self.unit}.{self.name} has no field {name}") from None

    @cached_property
    def value_class(self) -> type:
        """``RegValue`` with a property per field (names that would hide a method keep ``__getattr__``)."""
        props = {f.name: _field_getter(f) for f in self.fields if not hasattr(RegValue, f.name)}
        return type(f"RegValue_{self.unit}_{self.name}", (RegValue,), {"__slots__": (), **props})

    @cached_property
    def reset(self) -> int:
        return sum((f.reset << f.lsb) & f.mask for f in self.fields)

    @cached_property
    def write_mask(self) -> int:
        return sum(f.mask for f in self.fields if "w" in f.access)

    @cached_property
    def read_mask(self) -> int:
        return sum(f.mask for f in self.fields)

    def decode(self, word: int) -> dict[str, int]:
        return {f.name: f.decode(word) for f in self.fields}

    def encode(self, **values: int | str) -> int:
        """Word for the given field values; unnamed fields are 0."""
        word = 0
        for k, v in values.items():
            word |= self.field(k).encode(v)
        return word


@dataclass(frozen=True)
class Unit:
    name: str
    registers: tuple[Register, ...]

    @cached_property
    def by_name(self) -> dict[str, Register]:
        return {r.name: r for r in self.registers}

    @cached_property
    def by_offset(self) -> dict[int, Register]:
        return {r.offset: r for r in self.registers}

    @cached_property
    def config_offsets(self) -> tuple[int, ...]:
        """Offsets of the registers software writes (any writable field): what a decoded configuration can
        depend on; status and counters the engines report are left out."""
        return tuple(r.offset for r in self.registers if r.write_mask)

    @cached_property
    def view_class(self) -> type:
        """``RegView`` with a property per register of this unit."""
        props = {r.name: _register_getter(r) for r in self.registers if not hasattr(RegView, r.name)}
        return type(f"RegView_{self.name}", (RegView,), props)

    def register(self, name: str) -> Register:
        """Register by NVDLA name, with or without the ``_0`` instance suffix."""
        reg = self.by_name.get(name)
        if reg is None and name.endswith("_0"):
            reg = self.by_name.get(name[:-2])
        if reg is None:
            raise RegisterError(f"unit {self.name} has no register {name}")
        return reg

    @cached_property
    def op_enable_offset(self) -> int | None:
        """Offset of D_OP_ENABLE: registers at or above it are duplicated per ping-pong group."""
        reg = self.by_name.get("D_OP_ENABLE")
        return reg.offset if reg is not None and "S_POINTER" in self.by_name else None


def _build_units() -> dict[str, Unit]:
    units = {}
    for uname, regs in REGISTERS.items():
        units[uname] = Unit(
            uname,
            tuple(
                Register(uname, rname, off, tuple(Field(f[0], f[1], f[2], f[3], f[4], dict(f[5])) for f in flds))
                for rname, off, flds in regs
            ),
        )
    return units


UNITS: dict[str, Unit] = _build_units()


class RegisterMap:
    """One address map (small/large or full): name <-> CSB byte address."""

    def __init__(self, kind: AddressMapKind) -> None:
        self.kind = kind
        self.bases = UNIT_BASES[kind]
        self._by_addr: dict[int, Register] = {}
        for uname, base in self.bases.items():
            for reg in UNITS[uname].registers:
                self._by_addr[base + reg.offset] = reg

    def unit(self, name: str) -> Unit:
        if name not in self.bases:
            raise RegisterError(f"unit {name} is not in the {self.kind} address map")
        return UNITS[name]

    def base(self, unit: str) -> int:
        self.unit(unit)
        return self.bases[unit]

    def address(self, unit: str, register: str) -> int:
        return self.bases[unit] + self.unit(unit).register(register).offset

    def lookup(self, addr: int) -> Register | None:
        """Register at a byte address, or None."""
        return self._by_addr.get(addr)

    def unit_at(self, addr: int) -> str | None:
        for uname, base in self.bases.items():
            if base <= addr < base + UNIT_WINDOW:
                return uname
        return None

    def resolve(self, name: str) -> tuple[int, Register]:
        """``NVDLA_PDP.D_DATA_CUBE_OUT_WIDTH_0`` (or ``PDP.D_DATA_CUBE_OUT_WIDTH``) -> (address, register)."""
        try:
            unit_part, reg_part = name.split(".")
        except ValueError:
            raise RegisterError(f"register name {name!r} is not UNIT.REGISTER") from None
        unit_name = unit_part[6:] if unit_part.startswith("NVDLA_") else unit_part
        if unit_name not in UNITS:
            raise RegisterError(f"unknown unit {unit_part!r} in {name!r}")
        reg = self.unit(unit_name).register(reg_part)
        return self.bases[unit_name] + reg.offset, reg

    def registers(self) -> Iterator[tuple[int, Register]]:
        return iter(sorted(self._by_addr.items()))


@lru_cache(maxsize=None)
def register_map(kind: AddressMapKind = "small") -> RegisterMap:
    return RegisterMap(kind)


def _field_getter(f: Field) -> property:
    lsb, low = f.lsb, f.low_mask
    return property(lambda self: (self._word >> lsb) & low, doc=f"{f.name}[{f.msb}:{f.lsb}]")


def _register_getter(reg: Register) -> property:
    offset, reset = reg.offset, reg.reset
    return property(lambda self: reg.value_class(reg, self._words.get(offset, reset)), doc=reg.full_name)


class RegValue:
    """One register word with attribute access to its fields (``cfg.KERNEL_WIDTH``).

    ``RegValue(reg, word)`` is an instance of ``reg.value_class``, a subclass with one property per field:
    engines read a few hundred fields per operation, and a property costs a fifth of ``__getattr__`` (which
    Python reaches only after raising an AttributeError inside)."""

    __slots__ = ("_reg", "_word")

    def __new__(cls, reg: Register, word: int):
        return object.__new__(reg.value_class if cls is RegValue else cls)

    def __init__(self, reg: Register, word: int) -> None:
        self._reg = reg
        self._word = word

    def __int__(self) -> int:
        return self._word

    def __index__(self) -> int:
        return self._word

    def __getattr__(self, name: str) -> int:
        return self._reg.field(name).decode(self._word)  # (a field without a property: raises, naming it)

    def signed(self, name: str) -> int:
        return self._reg.field(name).decode_signed(self._word)

    def where(self, field_name: str) -> str:
        return f"{self._reg.unit}.{self._reg.name}.{field_name}"

    def fail(self, field_name: str, message: str) -> ConfigError:
        """A ConfigError naming UNIT.REGISTER.FIELD (to be raised by the caller)."""
        return ConfigError(self.where(field_name), message)

    def __repr__(self) -> str:
        return f"{self._reg.unit}.{self._reg.name}={self._word:#x}"


class RegView:
    """Decoded view of one unit's register group, as an engine reads it (``view.D_DATA_FORMAT``).

    ``RegView(unit, words)`` is an instance of ``unit.view_class``: one property per register (see
    ``RegValue``); other spellings (``D_DATA_FORMAT_0``) go through ``__getattr__``."""

    def __new__(cls, unit: Unit, words: Mapping[int, int]):
        return object.__new__(unit.view_class if cls is RegView else cls)

    def __init__(self, unit: Unit, words: Mapping[int, int]) -> None:
        self.unit = unit
        self._words = words

    def __getattr__(self, name: str) -> RegValue:
        if name.startswith("_"):
            raise AttributeError(name)
        reg = self.unit.register(name)
        return RegValue(reg, self._words.get(reg.offset, reg.reset))

    def word(self, name: str) -> int:
        return int(getattr(self, name))

    def snapshot(self) -> tuple:
        """The words of every software-written register, as they are now (``golden.decode_memo`` keys)."""
        return tuple(map(self._words.get, self.unit.config_offsets))

    def __repr__(self) -> str:
        return f"RegView({self.unit.name})"
