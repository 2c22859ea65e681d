"""CDP (local response normalisation) from memory to memory."""
from __future__ import annotations

from compiler.codegen.lut import emit_lut
from compiler.codegen.program import Cube, pointers, u32
from golden.program import RegProgram


def emit_cdp(p: RegProgram, src: Cube, dst: Cube, prm, ram_type: int = 1) -> None:
    """``prm``: a ``compiler.hwparams.CdpParams`` (or any object with its fields)."""
    pointers(p, "CDP_RDMA", "CDP")
    emit_lut(p, "CDP", prm.lut)
    p.reg("CDP_RDMA", "D_DATA_CUBE_WIDTH", src.width - 1)
    p.reg("CDP_RDMA", "D_DATA_CUBE_HEIGHT", src.height - 1)
    p.reg("CDP_RDMA", "D_DATA_CUBE_CHANNEL", src.channels - 1)
    p.addr("CDP_RDMA", "D_SRC_BASE_ADDR_LOW", src.loc)
    p.reg("CDP_RDMA", "D_SRC_LINE_STRIDE", src.line_stride)
    p.reg("CDP_RDMA", "D_SRC_SURFACE_STRIDE", src.surface_stride)
    p.reg("CDP_RDMA", "D_SRC_DMA_CFG", SRC_RAM_TYPE=ram_type)
    p.reg("CDP_RDMA", "D_DATA_FORMAT", INPUT_DATA=0)  # int8 (the reset value is int16)
    p.reg("CDP", "D_DATA_FORMAT", INPUT_DATA_TYPE=0)
    p.reg("CDP", "D_FUNC_BYPASS", SQSUM_BYPASS=int(prm.sqsum_bypass), MUL_BYPASS=int(prm.mul_bypass))
    p.addr("CDP", "D_DST_BASE_ADDR_LOW", dst.loc)
    p.reg("CDP", "D_DST_LINE_STRIDE", dst.line_stride)
    p.reg("CDP", "D_DST_SURFACE_STRIDE", dst.surface_stride)
    p.reg("CDP", "D_DST_DMA_CFG", DST_RAM_TYPE=ram_type)
    p.reg("CDP", "D_LRN_CFG", NORMALZ_LEN=prm.normalz_len)
    p.reg("CDP", "D_DATIN_OFFSET", prm.datin_offset & 0xFFFF)
    p.reg("CDP", "D_DATIN_SCALE", prm.datin_scale & 0xFFFF)
    p.reg("CDP", "D_DATIN_SHIFTER", prm.datin_shifter)
    p.reg("CDP", "D_DATOUT_OFFSET", u32(prm.datout_offset))
    p.reg("CDP", "D_DATOUT_SCALE", prm.datout_scale & 0xFFFF)
    p.reg("CDP", "D_DATOUT_SHIFTER", prm.datout_shifter)
    p.reg("CDP_RDMA", "D_OP_ENABLE", 1)
    p.reg("CDP", "D_OP_ENABLE", 1)
