"""CDP programming (the firmware's ``cdp.c``): always through its RDMA, LUT uploaded at program time
(so two groups with different LUTs cannot overlap), local size n written as (n - 1) / 2 - 1."""
from __future__ import annotations

from golden.intr import done_bit
from runtime.nvdla.descriptors import MEM_HW, OP_CDP, CdpOpDesc, CdpSurfaceDesc
from runtime.nvdla.engines import PRECISION, RAM, Programmer, Group, FirmwareStep, hi32, lo32, register
from runtime.nvdla.engines.lut import lut_is_ready, upload_lut



def program(p: FirmwareStep, g: Group) -> None:
    op: CdpOpDesc = g.op
    s: CdpSurfaceDesc = g.surface
    src, dst = s.src_data, s.dst_data
    if src.type == MEM_HW or dst.type == MEM_HW:
        raise p.fail("CDP source and destination must be in memory (MC or CV)")
    if src.type > MEM_HW or dst.type > MEM_HW:
        raise p.fail("CDP cube type out of range")
    if op.in_precision != op.out_precision:
        raise p.fail(f"in_precision {op.in_precision} != out_precision {op.out_precision} (no conversion in CDP)")
    if op.in_precision >= len(PRECISION):
        raise p.fail(f"in_precision {op.in_precision} out of range")
    if op.local_size not in (3, 5, 7, 9):
        raise p.fail(f"local_size {op.local_size} is not 3, 5, 7 or 9")
    in_addr = p.cube_address(src, "src_data")
    out_addr = p.cube_address(dst, "dst_data")
    lut = None
    if op.lut_index >= 0:
        g.lut_index = op.lut_index
        lut = p.lut(op.lut_index)
    p.reg("CDP_RDMA", "D_DATA_CUBE_WIDTH", src.width - 1)
    p.reg("CDP_RDMA", "D_DATA_CUBE_HEIGHT", src.height - 1)
    p.reg("CDP_RDMA", "D_DATA_CUBE_CHANNEL", src.channel - 1)
    p.reg("CDP_RDMA", "D_SRC_BASE_ADDR_LOW", lo32(in_addr))
    p.reg("CDP_RDMA", "D_SRC_BASE_ADDR_HIGH", hi32(in_addr))
    p.reg("CDP_RDMA", "D_SRC_LINE_STRIDE", src.line_stride)
    p.reg("CDP_RDMA", "D_SRC_SURFACE_STRIDE", src.surf_stride)
    p.reg("CDP_RDMA", "D_SRC_DMA_CFG", SRC_RAM_TYPE=RAM[src.type])
    p.reg("CDP_RDMA", "D_DATA_FORMAT", INPUT_DATA=PRECISION[op.in_precision])
    if lut is not None:
        upload_lut(p, "CDP", lut, op.in_precision)
    p.reg("CDP", "D_DST_BASE_ADDR_LOW", lo32(out_addr))
    p.reg("CDP", "D_DST_BASE_ADDR_HIGH", hi32(out_addr))
    p.reg("CDP", "D_DST_LINE_STRIDE", dst.line_stride)
    p.reg("CDP", "D_DST_SURFACE_STRIDE", dst.surf_stride)
    p.reg("CDP", "D_DST_DMA_CFG", DST_RAM_TYPE=RAM[dst.type])
    p.reg("CDP", "D_DATA_FORMAT", INPUT_DATA_TYPE=PRECISION[op.in_precision])
    p.reg("CDP", "D_LRN_CFG", NORMALZ_LEN=(op.local_size - 1) // 2 - 1)
    p.reg("CDP", "D_DATIN_OFFSET", op.in_cvt.offset)
    p.reg("CDP", "D_DATIN_SCALE", op.in_cvt.scale)
    p.reg("CDP", "D_DATIN_SHIFTER", op.in_cvt.truncate)
    p.reg("CDP", "D_DATOUT_OFFSET", op.out_cvt.offset)
    p.reg("CDP", "D_DATOUT_SCALE", op.out_cvt.scale)
    p.reg("CDP", "D_DATOUT_SHIFTER", op.out_cvt.truncate)
    p.reg("CDP", "D_FUNC_BYPASS", SQSUM_BYPASS="ENABLE" if op.bypass_sqsum else "DISABLE",
          MUL_BYPASS="ENABLE" if op.bypass_out_mul else "DISABLE")


def enable(p: FirmwareStep, g: Group) -> None:
    p.reg("CDP_RDMA", "D_OP_ENABLE", OP_EN="ENABLE")
    p.reg("CDP", "D_OP_ENABLE", OP_EN="ENABLE")


def set_producer(p: FirmwareStep, group: int, rdma_group: int) -> None:
    # the firmware gives CDP's RDMA the main group, not the RDMA one
    p.reg("CDP", "S_POINTER", PRODUCER=group)
    p.reg("CDP_RDMA", "S_POINTER", PRODUCER=group)


CDP = register(Programmer(
    op_type=OP_CDP, name="CDP", pointer_unit="CDP", rdma_pointer_unit="CDP_RDMA", done_bit=done_bit("CDP"),
    set_producer=set_producer, program=program, enable=enable,
    rdma_needed=lambda op, surface: True,
    is_ready=lambda group, other: lut_is_ready(group.op.lut_index, other),
    intr_mask_fields=("CDP_DONE_MASK0", "CDP_DONE_MASK1")))
