"""PDP programming (the firmware's ``pdp.c``): RDMA registers only when the source is in memory
(on-the-fly pooling of SDP output has no RDMA), reciprocal kernel sizes from a fixed table."""
from __future__ import annotations

from golden.engines.pdp import FIRMWARE_RECIP_KERNEL
from golden.intr import done_bit
from runtime.nvdla.descriptors import MEM_HW, OP_PDP, PdpOpDesc, PdpSurfaceDesc
from runtime.nvdla.engines import PRECISION, RAM, Programmer, Group, FirmwareStep, hi32, lo32, register

_POOL = ("POOLING_METHOD_AVERAGE", "POOLING_METHOD_MAX", "POOLING_METHOD_MIN")
#: 1/kernel size in the int (16.16) and fp16 encodings the firmware writes, kernel sizes 1..8
RECIP_KERNEL = FIRMWARE_RECIP_KERNEL
MAX_SPLIT_NUM = 64
MAX_CUBE = 8192  # DCUBE_MAX_WIDTH/HEIGHT/CHANNEL


def _minus1(v: int) -> int:
    return 0 if v == 0 else v - 1


def validate_cubes(p: FirmwareStep, src, dst, max_type: int) -> None:
    for what, cube in (("src_data", src), ("dst_data", dst)):
        if max(cube.width, cube.height, cube.channel) > MAX_CUBE:
            raise p.fail(f"{what} {cube.width}x{cube.height}x{cube.channel} exceeds {MAX_CUBE}")
        if cube.type > max_type:
            raise p.fail(f"{what}.type {cube.type} is not a memory type")


def _validate(p: FirmwareStep, op: PdpOpDesc, s: PdpSurfaceDesc) -> None:
    if s.dst_data.type == MEM_HW:
        raise p.fail("dst_data must be in memory (MC or CV), not on-the-fly")
    validate_cubes(p, s.src_data, s.dst_data, MEM_HW)
    if op.precision >= len(PRECISION):
        raise p.fail(f"precision {op.precision} out of range")
    if not (1 <= op.stride_x <= 8 and 1 <= op.stride_y <= 8):
        raise p.fail(f"stride ({op.stride_x}, {op.stride_y}) outside 1..8")
    if op.split_num > MAX_SPLIT_NUM or op.split_num < 1:
        raise p.fail(f"split_num {op.split_num} outside 1..{MAX_SPLIT_NUM}")
    for name in ("pool_width", "pool_height"):
        if getattr(op, name) >= 8:
            raise p.fail(f"{name} {getattr(op, name)} (kernel size - 1) outside 0..7")
    if op.pool_mode >= len(_POOL):
        raise p.fail(f"pool_mode {op.pool_mode} out of range")
    if op.precision == 2 and any(op.padding_value):
        raise p.fail("fp16 pooling needs padding_value all 0")


def program(p: FirmwareStep, g: Group) -> None:
    op: PdpOpDesc = g.op
    s: PdpSurfaceDesc = g.surface
    _validate(p, op, s)
    src, dst = s.src_data, s.dst_data
    in_addr = p.cube_address(src, "src_data")
    out_addr = p.cube_address(dst, "dst_data")
    partial_in = dict(PARTIAL_WIDTH_IN_FIRST=_minus1(op.partial_in_width_first),
                      PARTIAL_WIDTH_IN_MID=_minus1(op.partial_in_width_mid),
                      PARTIAL_WIDTH_IN_LAST=_minus1(op.partial_in_width_last))
    if src.type != MEM_HW:
        p.reg("PDP_RDMA", "D_DATA_CUBE_IN_WIDTH", src.width - 1)
        p.reg("PDP_RDMA", "D_DATA_CUBE_IN_HEIGHT", src.height - 1)
        p.reg("PDP_RDMA", "D_DATA_CUBE_IN_CHANNEL", src.channel - 1)
        p.reg("PDP_RDMA", "D_SRC_BASE_ADDR_HIGH", hi32(in_addr))
        p.reg("PDP_RDMA", "D_SRC_BASE_ADDR_LOW", lo32(in_addr))
        p.reg("PDP_RDMA", "D_SRC_LINE_STRIDE", src.line_stride)
        p.reg("PDP_RDMA", "D_SRC_SURFACE_STRIDE", src.surf_stride)
        p.reg("PDP_RDMA", "D_DATA_FORMAT", INPUT_DATA=PRECISION[op.precision])
        p.reg("PDP_RDMA", "D_SRC_RAM_CFG", SRC_RAM_TYPE=RAM[src.type])
        p.reg("PDP_RDMA", "D_OPERATION_MODE_CFG", SPLIT_NUM=op.split_num - 1)
        p.reg("PDP_RDMA", "D_POOLING_KERNEL_CFG", KERNEL_WIDTH=op.pool_width, KERNEL_STRIDE_WIDTH=op.stride_x - 1)
        p.reg("PDP_RDMA", "D_POOLING_PADDING_CFG", PAD_WIDTH=op.pad_left)
        p.reg("PDP_RDMA", "D_PARTIAL_WIDTH_IN", **partial_in)
    elif op.split_num != 1:
        raise p.fail("on-the-fly pooling needs split_num 1")
    p.reg("PDP", "D_DATA_CUBE_IN_WIDTH", src.width - 1)
    p.reg("PDP", "D_DATA_CUBE_IN_HEIGHT", src.height - 1)
    p.reg("PDP", "D_DATA_CUBE_IN_CHANNEL", src.channel - 1)
    p.reg("PDP", "D_DATA_CUBE_OUT_WIDTH", dst.width - 1)
    p.reg("PDP", "D_DATA_CUBE_OUT_HEIGHT", dst.height - 1)
    p.reg("PDP", "D_DATA_CUBE_OUT_CHANNEL", dst.channel - 1)
    p.reg("PDP", "D_OPERATION_MODE_CFG", POOLING_METHOD=_POOL[op.pool_mode],
          FLYING_MODE="ON_FLYING" if src.type == MEM_HW else "OFF_FLYING", SPLIT_NUM=op.split_num - 1)
    p.reg("PDP", "D_PARTIAL_WIDTH_IN", **partial_in)
    p.reg("PDP", "D_PARTIAL_WIDTH_OUT", PARTIAL_WIDTH_OUT_FIRST=_minus1(op.partial_width_first),
          PARTIAL_WIDTH_OUT_MID=_minus1(op.partial_width_mid), PARTIAL_WIDTH_OUT_LAST=_minus1(op.partial_width_last))
    p.reg("PDP", "D_POOLING_KERNEL_CFG", KERNEL_WIDTH=op.pool_width, KERNEL_HEIGHT=op.pool_height,
          KERNEL_STRIDE_WIDTH=op.stride_x - 1, KERNEL_STRIDE_HEIGHT=op.stride_y - 1)
    fp16 = int(op.precision == 2)
    p.reg("PDP", "D_RECIP_KERNEL_WIDTH", RECIP_KERNEL[fp16][op.pool_width])
    p.reg("PDP", "D_RECIP_KERNEL_HEIGHT", RECIP_KERNEL[fp16][op.pool_height])
    p.reg("PDP", "D_POOLING_PADDING_CFG", PAD_LEFT=op.pad_left, PAD_RIGHT=op.pad_right, PAD_TOP=op.pad_top,
          PAD_BOTTOM=op.pad_bottom)
    for i, v in enumerate(op.padding_value):
        p.reg("PDP", f"D_POOLING_PADDING_VALUE_{i + 1}_CFG", v)
    if src.type != MEM_HW:
        p.reg("PDP", "D_SRC_LINE_STRIDE", src.line_stride)
        p.reg("PDP", "D_SRC_SURFACE_STRIDE", src.surf_stride)
    p.reg("PDP", "D_DST_BASE_ADDR_LOW", lo32(out_addr))
    p.reg("PDP", "D_DST_BASE_ADDR_HIGH", hi32(out_addr))
    p.reg("PDP", "D_DST_LINE_STRIDE", dst.line_stride)
    p.reg("PDP", "D_DST_SURFACE_STRIDE", dst.surf_stride)
    p.reg("PDP", "D_DST_RAM_CFG", DST_RAM_TYPE=RAM[dst.type])
    p.reg("PDP", "D_DATA_FORMAT", INPUT_DATA=PRECISION[op.precision])


def enable(p: FirmwareStep, g: Group) -> None:
    if g.rdma_needed:
        p.reg("PDP_RDMA", "D_OP_ENABLE", OP_EN="ENABLE")
    p.reg("PDP", "D_OP_ENABLE", OP_EN="ENABLE")


def set_producer(p: FirmwareStep, group: int, rdma_group: int) -> None:
    p.reg("PDP", "S_POINTER", PRODUCER=group)
    p.reg("PDP_RDMA", "S_POINTER", PRODUCER=rdma_group)


PDP = register(Programmer(
    op_type=OP_PDP, name="PDP", pointer_unit="PDP", rdma_pointer_unit="PDP_RDMA", done_bit=done_bit("PDP"),
    set_producer=set_producer, program=program, enable=enable,
    rdma_needed=lambda op, surface: surface.src_data.type != MEM_HW,
    intr_mask_fields=("PDP_DONE_MASK0", "PDP_DONE_MASK1")))
