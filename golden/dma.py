"""How engines' DMA registers become memory accesses: address/stride words, RAM type, data format,
and the legality of a cube's strides. One copy for every engine, so they agree on the rules.

- Address and stride registers count bytes, except on configs with coarser address units (nv_full:
  fields [31:5], 32-byte units), where the low bits of the word are ignored, as the cmod shifts them out.
- RAM_TYPE 1 selects primary DRAM (MC), 0 the CV-SRAM (CV); CV-SRAM on a config without a secondary
  memory interface needs a unit the config lacks (UnsupportedError naming CVIF).
"""
from __future__ import annotations

import numpy as np

from golden.config import BYTES_PER_ELEMENT, DataType, HwConfig
from golden.errors import UnsupportedError
from golden.layout import CubeLayout
from golden.memory import AddressSpace, Memory
from golden.regs import RegValue, RegView

#: D_DATA_FORMAT / precision field encoding shared by every unit.
DATA_FORMATS = {0: "int8", 1: "int16", 2: "fp16"}


def space_for(hw: HwConfig, mem: Memory, ram_type: int, where: str) -> AddressSpace:
    """The address space a RAM_TYPE value selects; ``where`` names the field for the error."""
    if ram_type == Memory.RAM_CV and not hw.secondary_memif:
        raise UnsupportedError("CVIF", f"{where} selects CV-SRAM, which {hw.name} does not have")
    return mem.space(ram_type)


def ram_space(hw: HwConfig, mem: Memory, reg: RegValue, field: str) -> AddressSpace:
    return space_for(hw, mem, getattr(reg, field), reg.where(field))


def dma_address(hw: HwConfig, view: RegView, name: str, suffix: str = "") -> int:
    """Byte address from a ``<name>_HIGH<suffix>``/``<name>_LOW<suffix>`` register pair
    (``D_SRC_BASE_ADDR``; CDMA's planes: ``D_DAIN_ADDR`` with suffix ``_0``)."""
    return dma_bytes(hw, (view.word(f"{name}_HIGH{suffix}") << 32) | view.word(f"{name}_LOW{suffix}"))


#: The conv pipeline's units, in the order their precision fields are checked.
CONV_UNITS = ("CDMA", "CSC", "CMAC_A", "CMAC_B", "CACC")


def conv_precisions(regs, with_input: tuple[str, ...] = ("CDMA", "CSC")) -> list[tuple[str, RegValue, str, str]]:
    """``(dtype, D_MISC_CFG view, field, unit)`` of every conv unit's PROC_PRECISION (and IN_PRECISION of the
    units in ``with_input``), in unit order; a reserved encoding is a ConfigError naming the field. Direct,
    Winograd and image convolution each judge the combinations themselves."""
    out = []
    for unit in CONV_UNITS:
        misc = regs[unit].D_MISC_CFG
        for name in ("IN_PRECISION", "PROC_PRECISION") if unit in with_input else ("PROC_PRECISION",):
            code = getattr(misc, name)
            if code not in DATA_FORMATS:
                raise misc.fail(name, f"reserved precision encoding {code}")
            out.append((DATA_FORMATS[code], misc, name, unit))
    return out


def check_format(reg: RegValue, name: str, hw: HwConfig | None = None) -> str:
    """The data type a D_DATA_FORMAT-style field selects ("int8", "int16" or "fp16").

    The encoding 3 is illegal (ConfigError naming the field); a type ``hw`` has no datapath for (int16/fp16
    on every config but nv_full) raises UnsupportedError naming the type, as NVDLA's CFGROM would report it.
    """
    fmt = getattr(reg, name)
    if fmt not in DATA_FORMATS:
        raise reg.fail(name, f"{fmt} is not a data format (0 int8, 1 int16, 2 fp16)")
    dtype = DATA_FORMATS[fmt]
    if hw is not None and not hw.supports(dtype):  # type: ignore[arg-type]
        raise UnsupportedError(
            dtype.upper(), f"{reg.where(name)}={dtype.upper()} but {hw.name} has no {dtype} datapath"
        )
    return dtype


def check_int8(reg: RegValue, name: str, unit: str) -> None:
    """For engines that model int8 only: int16/fp16 raise UnsupportedError naming the precision."""
    dtype = check_format(reg, name)
    if dtype != "int8":
        fmt = getattr(reg, name)
        raise UnsupportedError(unit, f"{unit} {dtype} ({reg.where(name)}={fmt}) is not modelled yet; only int8 is")


def dma_bytes(hw: HwConfig, word: int) -> int:
    """Byte value of an address/stride register word. nv_full fields are [31:5] (32-byte units), which
    the cmod shifts back by 5, i.e. the low bits of the word are ignored."""
    return word & ~(hw.address_unit - 1)


def feature_cube(
    hw: HwConfig,
    mem: Memory,
    view: RegView,
    side: str,
    ram_reg: str,
    channels: int,
    height: int,
    width: int,
    dtype: DataType = "int8",
) -> tuple[AddressSpace, int, CubeLayout]:
    """Memory space, base address and layout of a feature cube from ``D_{SRC,DST}_*`` registers.

    ``dtype`` sets the element size (int16/fp16: 2-byte little-endian elements) and so the channels per
    atom (``hw.atom_elements``: memory_atomic_size / 2 for the 16-bit types).
    """
    layout = CubeLayout(
        channels,
        height,
        width,
        dma_bytes(hw, view.word(f"D_{side}_LINE_STRIDE")),
        dma_bytes(hw, view.word(f"D_{side}_SURFACE_STRIDE")),
        hw.atom_elements(dtype),
        BYTES_PER_ELEMENT[dtype],
    )
    check_fits(layout, view, side)
    return ram_space(hw, mem, getattr(view, ram_reg), f"{side}_RAM_TYPE"), dma_address(hw, view, f"D_{side}_BASE_ADDR"), layout


def check_fits(layout: CubeLayout, view: RegView, side: str) -> None:
    """Raise ConfigError when the cube's atoms overlap in memory (a stride too small for the cube).

    Lines must not overlap inside a surface; surfaces must not overlap one another. Layouts that
    interleave surfaces between lines are legal when no two atoms share a byte, which is checked exactly.
    """
    atom_bytes = layout.atom * layout.bpe
    line_bytes = layout.width * atom_bytes
    line_name, surf_name = f"D_{side}_LINE_STRIDE", f"D_{side}_SURFACE_STRIDE"
    if layout.height > 1 and layout.line_stride < line_bytes:
        reg = getattr(view, line_name)
        raise reg.fail(
            f"{side}_LINE_STRIDE",
            f"{layout.line_stride} bytes is less than one line of {layout.width} atoms ({line_bytes} bytes)",
        )
    if layout.surfaces <= 1:
        return
    if layout.surf_stride >= (layout.height - 1) * layout.line_stride + line_bytes:
        return
    s = np.arange(layout.surfaces, dtype=np.int64)[:, None, None] * layout.surf_stride
    h = np.arange(layout.height, dtype=np.int64)[None, :, None] * layout.line_stride
    w = np.arange(layout.width, dtype=np.int64)[None, None, :] * atom_bytes
    starts = np.sort((s + h + w).ravel())
    if np.any(np.diff(starts) < atom_bytes):
        reg = getattr(view, surf_name)
        raise reg.fail(
            f"{side}_SURFACE_STRIDE",
            f"{layout.surf_stride} bytes makes the {layout.surfaces} surfaces of a "
            f"{layout.height}x{layout.width} cube (line stride {layout.line_stride}) overlap",
        )


# ---- traffic counters (profiling; off unless a Dla's ``traffic`` is set) ---------------------------------
class Traffic:
    """Bytes read and written in memory, by engine. ``Dla.traffic`` set to one makes every engine see its
    memory through ``CountedMemory``, so what the engines' DMAs move is counted where they access memory
    (whole atoms of a cube, operands, weights); with it unset (the default) nothing is wrapped or counted.
    ``engine`` labels accesses made through a ``CountedSpace`` bound to no engine (an RTL's AXI port: the
    runtime sets the label of the operation it is running)."""

    def __init__(self) -> None:
        self.engine: str | None = None
        self.read: dict[str, int] = {}
        self.written: dict[str, int] = {}

    def count(self, engine: str | None, read: int = 0, written: int = 0) -> None:
        key = engine or self.engine or "other"
        if read:
            self.read[key] = self.read.get(key, 0) + read
        if written:
            self.written[key] = self.written.get(key, 0) + written

    def snapshot(self) -> tuple[dict[str, int], dict[str, int]]:
        return dict(self.read), dict(self.written)

    def since(self, before: tuple[dict[str, int], dict[str, int]]) -> tuple[dict[str, int], dict[str, int]]:
        """(read, written) per engine since ``before`` (a ``snapshot``), engines that moved nothing left out."""
        def diff(now: dict[str, int], old: dict[str, int]) -> dict[str, int]:
            return {k: v - old.get(k, 0) for k, v in now.items() if v != old.get(k, 0)}

        return diff(self.read, before[0]), diff(self.written, before[1])

    def memory(self, mem: Memory, engine: str) -> CountedMemory:
        return CountedMemory(mem, self, engine)


class CountedSpace:
    """An AddressSpace whose bulk accesses are counted in a ``Traffic`` (one add per access, numpy sizes)."""

    def __init__(self, space: AddressSpace, traffic: Traffic, engine: str | None = None) -> None:
        self.space, self.traffic, self.engine = space, traffic, engine
        self.name = space.name

    def gather(self, base: int, offsets: np.ndarray) -> np.ndarray:
        out = self.space.gather(base, offsets)
        self.traffic.count(self.engine, read=out.size)
        return out

    def scatter(self, base: int, offsets: np.ndarray, values: np.ndarray) -> None:
        self.space.scatter(base, offsets, values)
        self.traffic.count(self.engine, written=int(np.size(offsets)))

    def read(self, addr: int, size: int) -> np.ndarray:
        self.traffic.count(self.engine, read=size)
        return self.space.read(addr, size)

    def read_bytes(self, addr: int, size: int) -> bytes:
        self.traffic.count(self.engine, read=size)
        return self.space.read_bytes(addr, size)

    def write(self, addr: int, data) -> None:
        self.space.write(addr, data)
        self.traffic.count(self.engine, written=data.nbytes if isinstance(data, np.ndarray) else len(data))

    def __getattr__(self, name: str):  # fill, crc32, allocated_bytes: not engine traffic
        return getattr(self.space, name)


class CountedMemory:
    """A Memory whose address spaces count into ``traffic`` under ``engine`` (what one engine sees)."""

    RAM_CV, RAM_MC = Memory.RAM_CV, Memory.RAM_MC

    def __init__(self, mem: Memory, traffic: Traffic, engine: str) -> None:
        self.mem, self.traffic, self.engine = mem, traffic, engine

    def space(self, ram_type: int | str = 1) -> CountedSpace:
        return CountedSpace(self.mem.space(ram_type), self.traffic, self.engine)

    def __getattr__(self, name: str):
        return getattr(self.mem, name)
