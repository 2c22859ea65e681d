"""BDMA programming (the firmware's ``bdma.c``): every transfer of the op's surface descriptor is queued
into a slot (``CFG_*`` then ``CFG_OP.EN``, after waiting for ``STATUS.FREE_SLOT``), and enabling the op
launches the queued set as the op's group (``CFG_LAUNCH0/1``).

BDMA has no register groups: there is no producer pointer to set, the firmware's free group comes from
``STATUS.GRP0_BUSY`` (busy: use group 1), and a group is only programmed while the other one is not
programmed-but-unlaunched (``dla_bdma_is_ready``), because both would fill the same slot queue. An op with
no transfers is complete as soon as it is enabled. The transfers are copied as the descriptor gives
them: addresses are address-list entries (no offset), sizes and strides bytes, repeats counts.
"""
from __future__ import annotations

from golden.intr import done_bit
from golden.regs import UNITS
from runtime.nvdla.descriptors import OP_BDMA, BdmaSurfaceDesc, BdmaTransferDesc
from runtime.nvdla.engines import Programmer, Group, FirmwareStep, hi32, lo32, register

#: CFG_CMD RAM type enum names, indexed by the surface's dla_mem_type (MC, CV)
_RAM = ("MC", "CVSRAM")
#: NUM_MAX_BDMA_OPS: the slots of the hardware queue and the transfers a surface descriptor holds
MAX_TRANSFERS = 20
#: the firmware's bounds on a transfer's repeat counts
MAX_REPEAT = 8192
_GRP0_BUSY = UNITS["BDMA"].register("STATUS").field("GRP0_BUSY")


def _validate(p: FirmwareStep, s: BdmaSurfaceDesc, i: int, t: BdmaTransferDesc) -> None:
    """``processor_bdma_program_slot``'s asserts, plus what would underflow the minus-one fields."""
    where = f"transfers[{i}]"
    for name in ("line_repeat", "surface_repeat"):
        if not 1 <= getattr(t, name) <= MAX_REPEAT:
            raise p.fail(f"{where}.{name} {getattr(t, name)} outside 1..{MAX_REPEAT}")
    if t.line_size == 0 or t.line_size % 32:
        raise p.fail(f"{where}.line_size {t.line_size} is not a positive multiple of 32 bytes")
    for side in ("source", "destination"):
        line, surf = getattr(t, f"{side}_line"), getattr(t, f"{side}_surface")
        if line < t.line_size:
            raise p.fail(f"{where}.{side}_line {line} is shorter than line_size {t.line_size}")
        if surf < line * t.line_repeat:
            raise p.fail(f"{where}.{side}_surface {surf} is shorter than {t.line_repeat} lines of {line} bytes")


def program(p: FirmwareStep, g: Group) -> None:
    s: BdmaSurfaceDesc = g.surface
    if not p.hw.bdma:
        raise p.fail(f"BDMA is not supported by {p.hw.name}")
    if s.num_transfers == 0:
        return
    if s.num_transfers > MAX_TRANSFERS:
        raise p.fail(f"num_transfers {s.num_transfers} is more than {MAX_TRANSFERS}")
    for what in ("source_type", "destination_type"):
        if getattr(s, what) >= len(_RAM):
            raise p.fail(f"{what} {getattr(s, what)} is not a memory type (0 MC, 1 CV)")
    for i, t in enumerate(s.transfers[:s.num_transfers]):
        p.poll("BDMA", "STATUS", "FREE_SLOT")
        src = p.address_of(t.source_address, 0)
        dst = p.address_of(t.destination_address, 0)
        _validate(p, s, i, t)
        p.reg("BDMA", "CFG_SRC_ADDR_LOW", lo32(src))
        p.reg("BDMA", "CFG_SRC_ADDR_HIGH", hi32(src))
        p.reg("BDMA", "CFG_DST_ADDR_LOW", lo32(dst))
        p.reg("BDMA", "CFG_DST_ADDR_HIGH", hi32(dst))
        p.reg("BDMA", "CFG_LINE", (t.line_size >> 5) - 1)
        p.reg("BDMA", "CFG_CMD", SRC_RAM_TYPE=_RAM[s.source_type], DST_RAM_TYPE=_RAM[s.destination_type])
        p.reg("BDMA", "CFG_LINE_REPEAT", t.line_repeat - 1)
        p.reg("BDMA", "CFG_SRC_LINE", t.source_line)
        p.reg("BDMA", "CFG_DST_LINE", t.destination_line)
        p.reg("BDMA", "CFG_SURF_REPEAT", t.surface_repeat - 1)
        p.reg("BDMA", "CFG_SRC_SURF", t.source_surface)
        p.reg("BDMA", "CFG_DST_SURF", t.destination_surface)
        p.reg("BDMA", "CFG_OP", EN="ENABLE")


def enable(p: FirmwareStep, g: Group) -> None:
    if g.surface.num_transfers == 0:
        return  # completed by the firmware itself (completes_at_enable)
    if g.id == 0:
        p.reg("BDMA", "CFG_LAUNCH0", GRP0_LAUNCH="YES")
    else:
        p.reg("BDMA", "CFG_LAUNCH1", GRP1_LAUNCH="YES")


def set_producer(p: FirmwareStep, group: int, rdma_group: int) -> None:
    """No producer pointer: the launch register chooses the group."""


def is_ready(group: Group, other: Group | None) -> bool:
    """Not while the other group is programmed but not launched: both would queue into the same slots."""
    return other is None or other.active


BDMA = register(Programmer(
    op_type=OP_BDMA, name="BDMA", pointer_unit="BDMA", rdma_pointer_unit=None, done_bit=done_bit("BDMA"),
    set_producer=set_producer, program=program, enable=enable, is_ready=is_ready,
    intr_mask_fields=("BDMA_DONE_MASK0", "BDMA_DONE_MASK1"),
    pointer_register="STATUS", consumer_of=_GRP0_BUSY.decode,  # group 0 busy: take group 1
    completes_at_enable=lambda group: group.surface.num_transfers == 0))
