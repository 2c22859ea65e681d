"""RUBIK programming (the firmware's ``rubik.c``): one register group per op, no RDMA. Merge reads planes
(``DAIN_PLANAR_STRIDE``), the others a feature cube (``DAIN_SURF_STRIDE``); split writes planes
(``DAOUT_PLANAR_STRIDE``), the others a cube (``DAOUT_SURF_STRIDE``); contract also gets its stride
registers, derived as kmd does: ``CONTRACT_STRIDE_0`` = output surfaces (channels x bytes per element over
32, rounded up) x the input surface stride, ``CONTRACT_STRIDE_1`` = stride_y x the output line stride.
"""
from __future__ import annotations

from golden.intr import done_bit
from golden.regs import UNITS
from runtime.nvdla.descriptors import MEM_HW, OP_RUBIK, RubikOpDesc, RubikSurfaceDesc
from runtime.nvdla.engines import Programmer, Group, FirmwareStep, hi32, lo32, register

_MODE = ("CONTRACT", "SPLIT", "MERGE")
CONTRACT, SPLIT, MERGE = range(3)
_PRECISION = ("INT8", "INT16", "FP16")
#: bytes per element of each precision (BPE_PRECISION_*)
_BPE = (1, 2, 2)
#: DATAIN/DATAOUT RAM type enum names, indexed by a cube's dla_mem_type (MC, CV)
_RAM = ("MCIF", "CVIF")
_SIZE = {f.name: f for f in (*UNITS["RBK"].register("D_DATAIN_SIZE_0").fields,
                             *UNITS["RBK"].register("D_DATAIN_SIZE_1").fields)}
_STRIDE = UNITS["RBK"].register("D_DECONV_STRIDE").field("DECONV_X_STRIDE")


def _validate(p: FirmwareStep, op: RubikOpDesc, s: RubikSurfaceDesc) -> None:
    if not p.hw.rubik:
        raise p.fail(f"RUBIK is not supported by {p.hw.name}")
    for what, cube in (("src_data", s.src_data), ("dst_data", s.dst_data)):
        if cube.type == MEM_HW:
            raise p.fail(f"{what} must be in memory (MC or CV), not on-the-fly")
        if cube.type >= len(_RAM):
            raise p.fail(f"{what}.type {cube.type} is not a memory type")
    if op.mode >= len(_MODE):
        raise p.fail(f"mode {op.mode} out of range (0 contract, 1 split, 2 merge)")
    if op.precision >= len(_PRECISION):
        raise p.fail(f"precision {op.precision} out of range")
    limits = (("src_data.width", s.src_data.width, "DATAIN_WIDTH"),
              ("src_data.height", s.src_data.height, "DATAIN_HEIGHT"),
              ("src_data.channel", s.src_data.channel, "DATAIN_CHANNEL"),
              ("dst_data.channel", s.dst_data.channel, "DATAIN_CHANNEL"))
    for what, v, fld in limits:
        top = 1 << _SIZE[fld].width
        if not 1 <= v <= top:
            raise p.fail(f"{what} {v} outside 1..{top}")
    if op.mode == CONTRACT:
        top = 1 << _STRIDE.width
        for name in ("stride_x", "stride_y"):
            if not 1 <= getattr(op, name) <= top:
                raise p.fail(f"{name} {getattr(op, name)} outside 1..{top}")
    if op.mode == MERGE and (s.src_data.plane_stride == 0 or s.src_data.plane_stride & 0x1F):
        raise p.fail(f"merge needs src_data.plane_stride a non-zero multiple of 32, not {s.src_data.plane_stride}")


def program(p: FirmwareStep, g: Group) -> None:
    op: RubikOpDesc = g.op
    s: RubikSurfaceDesc = g.surface
    _validate(p, op, s)
    src, dst = s.src_data, s.dst_data
    in_addr = p.cube_address(src, "src_data")
    out_addr = p.cube_address(dst, "dst_data")
    p.reg("RBK", "D_MISC_CFG", RUBIK_MODE=_MODE[op.mode], IN_PRECISION=_PRECISION[op.precision])
    p.reg("RBK", "D_DAIN_RAM_TYPE", DATAIN_RAM_TYPE=_RAM[src.type])
    p.reg("RBK", "D_DATAIN_SIZE_0", DATAIN_WIDTH=src.width - 1, DATAIN_HEIGHT=src.height - 1)
    p.reg("RBK", "D_DATAIN_SIZE_1", DATAIN_CHANNEL=src.channel - 1)
    p.reg("RBK", "D_DAIN_ADDR_LOW", lo32(in_addr))
    p.reg("RBK", "D_DAIN_ADDR_HIGH", hi32(in_addr))
    if op.mode == MERGE:
        p.reg("RBK", "D_DAIN_PLANAR_STRIDE", src.plane_stride)
    else:
        p.reg("RBK", "D_DAIN_SURF_STRIDE", src.surf_stride)
    p.reg("RBK", "D_DAIN_LINE_STRIDE", src.line_stride)
    p.reg("RBK", "D_DAOUT_RAM_TYPE", DATAOUT_RAM_TYPE=_RAM[dst.type])
    p.reg("RBK", "D_DATAOUT_SIZE_1", DATAOUT_CHANNEL=dst.channel - 1)
    p.reg("RBK", "D_DAOUT_ADDR_LOW", lo32(out_addr))
    p.reg("RBK", "D_DAOUT_ADDR_HIGH", hi32(out_addr))
    p.reg("RBK", "D_DAOUT_LINE_STRIDE", dst.line_stride)
    if op.mode == SPLIT:
        p.reg("RBK", "D_DAOUT_PLANAR_STRIDE", dst.plane_stride)
        return
    p.reg("RBK", "D_DAOUT_SURF_STRIDE", dst.surf_stride)
    if op.mode == CONTRACT:
        surfaces = (dst.channel * _BPE[op.precision] + 31) >> 5
        p.reg("RBK", "D_CONTRACT_STRIDE_0", surfaces * src.surf_stride)
        p.reg("RBK", "D_CONTRACT_STRIDE_1", op.stride_y * dst.line_stride)
        p.reg("RBK", "D_DECONV_STRIDE", DECONV_X_STRIDE=op.stride_x - 1, DECONV_Y_STRIDE=op.stride_y - 1)


def enable(p: FirmwareStep, g: Group) -> None:
    p.reg("RBK", "D_OP_ENABLE", OP_EN="ENABLE")


def set_producer(p: FirmwareStep, group: int, rdma_group: int) -> None:
    p.reg("RBK", "S_POINTER", PRODUCER=group)


RUBIK = register(Programmer(
    op_type=OP_RUBIK, name="RUBIK", pointer_unit="RBK", rdma_pointer_unit=None, done_bit=done_bit("RUBIK"),
    set_producer=set_producer, program=program, enable=enable,
    intr_mask_fields=("RUBIK_DONE_MASK0", "RUBIK_DONE_MASK1")))
