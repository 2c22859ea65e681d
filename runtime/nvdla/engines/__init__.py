"""Per-engine programmers of NVDLA's kmd firmware (``kmd/firmware/<engine>.c``: ``dla_<engine>_program``,
``dla_<engine>_enable``...), as register writes.

An engine's programmer is one ``Programmer`` registration in ``PROGRAMMERS`` (by op type name): how its op is programmed (``program``: every D_ register of
the group the firmware picked), enabled (``enable``: the OP_EN writes, in the firmware's order), which
S_POINTERs ``set_producer`` writes, which GLB interrupt bits mean "group done", whether an op needs the
RDMA (``rdma_needed``) and whether a group may be programmed now (``is_ready``, LUT sharing). The
scheduler in ``runtime.nvdla.firmware`` drives these; it knows nothing engine-specific.

Programmers are pure: they append register writes to a ``FirmwareStep`` (a ``golden.program.RegProgram``
with the step's resolvers and polls) and raise
``FirmwareError`` for a descriptor the firmware would reject (with the op index and the field).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from golden.config import HwConfig
from golden.program import RegProgram
from golden.regs import RegisterMap
from runtime.groups import consumer
from golden.registry import Registry
from runtime.nvdla.descriptors import OP_NAMES, DataCube, LutParam, MEM_HW, Struct

__all__ = ["FirmwareError", "Group", "FirmwareStep", "Programmer", "PROGRAMMERS", "programmer_of", "register", "hi32", "lo32", "RAM", "PRECISION"]

#: RAM_TYPE enum names of the engines' DMA registers, indexed by a cube's dla_mem_type (MC, CV)
RAM = ("MC", "CV")
#: data-format enum names, indexed by dla_precision (INT8, INT16, FP16)
PRECISION = ("INT8", "INT16", "FP16")


class FirmwareError(ValueError):
    """A descriptor the firmware refuses (one line: op index, engine, field)."""


@dataclass
class Group:
    """One of an engine's two ping-pong register groups, holding one op (``dla_processor_group``)."""

    id: int
    rdma_id: int
    index: int  # the op's index in the dependency graph
    op: Struct  # the engine's dla_*_op_desc
    surface: Struct  # the engine's dla_*_surface_desc
    rdma_needed: bool = False
    lut_index: int = -1  # the LUT this group's op loaded (-1: none)
    pending: bool = True  # prepared, not yet programmed
    programming: bool = False
    active: bool = False  # enabled, running


@dataclass
class FirmwareStep:
    """One firmware step (set_producer, program or enable of an op): its register program, plus what the
    programmers need to resolve (addresses, LUTs) and the polls the firmware makes between writes."""

    regmap: RegisterMap
    hw: HwConfig
    address_of: Callable[[int, int], int]  # (address-list index, offset) -> bus address
    lut: Callable[[int], LutParam]  # LUT list index -> its parameters
    where: str = ""  # "op 3 (PDP)" for error messages
    regs: RegProgram = field(init=False)
    #: polls made before a write: write index -> (unit, register, field) read until non-zero
    polls: dict[int, tuple[str, str, str]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.regs = RegProgram(self.hw)

    @property
    def writes(self) -> list[tuple[str, str, int]]:
        """The writes as (unit, register, value), in order."""
        return [(w.unit, w.name, w.value) for w in self.regs.writes]

    def poll(self, unit: str, name: str, field_name: str) -> None:
        """Before the next write, read UNIT.NAME until FIELD is non-zero (bdma.c waits for a free slot)."""
        self.regmap.unit(unit).register(name).field(field_name)  # the name must exist
        self.polls[len(self.regs.writes)] = (unit, name, field_name)

    def reg(self, unit: str, name: str, value: int = 0, **fields: int | str) -> None:
        """Write ``value`` OR the encoded fields (enum names allowed) to UNIT.NAME (a unit of this address map)."""
        self.regmap.unit(unit)
        self.regs.reg(unit, name, value, **fields)

    def cube_address(self, cube: DataCube, what: str) -> int:
        """The bus address of a cube in memory (MC or CV), as ``dla_get_dma_cube_address``."""
        if cube.type == MEM_HW:
            return 0
        if cube.address < 0:
            raise FirmwareError(f"{self.where}: {what} has no address (address index -1) but is not on-the-fly")
        return self.address_of(cube.address, getattr(cube, "offset", 0))

    def fail(self, message: str) -> FirmwareError:
        return FirmwareError(f"{self.where}: {message}")


def hi32(v: int) -> int:
    return (v >> 32) & 0xFFFFFFFF


def lo32(v: int) -> int:
    return v & 0xFFFFFFFF


@dataclass(frozen=True)
class Programmer:
    """How the firmware drives one engine (``dla_<engine>_*``): its op type, group registers, done bits and steps."""

    op_type: int
    name: str
    #: units whose S_POINTER holds the CONSUMER read by utils_get_free_group (main, rdma or None)
    pointer_unit: str
    rdma_pointer_unit: str | None
    #: GLB.S_INTR_STATUS bit of "group 0 done" (group 1 is the next bit)
    done_bit: int
    set_producer: Callable[[FirmwareStep, int, int], None]
    program: Callable[[FirmwareStep, Group], None]
    enable: Callable[[FirmwareStep, Group], None]
    rdma_needed: Callable[[Struct, Struct], bool] = lambda op, surface: False
    #: is_ready(group, other group): may this group be programmed now
    is_ready: Callable[[Group, Group | None], bool] = lambda group, other: True
    #: extra GLB status bits (bit of group 0) -> firmware event raised on the same group (CDMA done)
    extra_events: tuple[tuple[int, int], ...] = ()
    #: GLB.S_INTR_MASK fields the program step unmasks
    intr_mask_fields: tuple[str, ...] = ()
    #: units whose S_STATUS must show the chosen group IDLE before it is programmed (conv.c checks this)
    idle_units: tuple[str, ...] = ()
    #: (unit, register, field) polled until non-zero before the op is enabled (conv: CBUF flush done)
    enable_poll: tuple[str, str, str] | None = None
    #: register of ``pointer_unit`` utils_get_free_group reads, and the hardware's consumer group in it
    #: (S_POINTER.CONSUMER; BDMA has no pointer and reads STATUS.GRP0_BUSY instead)
    pointer_register: str = "S_POINTER"
    consumer_of: Callable[[int], int] = consumer
    #: an op the enable step completes in software, with no hardware done interrupt (a BDMA op with no
    #: transfers): the firmware raises its OP_COMPLETED event itself
    completes_at_enable: Callable[[Group], bool] = lambda group: False


#: The firmware's programmers by op type name (``descriptors.OP_NAMES``: BDMA, CONV, SDP, PDP, CDP, RUBIK).
PROGRAMMERS: Registry[Programmer] = Registry("firmware programmer")


def register(programmer: Programmer) -> Programmer:
    return PROGRAMMERS.add(programmer.name, programmer)


def programmer_of(op_type: int) -> Programmer | None:
    """The programmer of a descriptor's ``op_type`` (``dla_op_type``), None for one the firmware lacks."""
    if not 0 <= op_type < len(OP_NAMES):
        return None
    return PROGRAMMERS.get(OP_NAMES[op_type])


def _load_all() -> None:
    from runtime.nvdla.engines import bdma, cdp, conv, pdp, rubik, sdp  # noqa: F401  (registrations)


_load_all()
