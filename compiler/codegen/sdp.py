"""SDP: from memory (SDP_RDMA reads the input cube) or on the fly behind CACC, with X1/X2/Y operands from
registers or memory, the LUT, and the output converter."""
from __future__ import annotations

import numpy as np

from compiler.codegen.lut import emit_lut
from compiler.codegen.program import PRECISION_CODES, Cube, OperandPlacement, pointers, u32
from golden.program import RegProgram

STAGES = (("x1", "BS", "B"), ("x2", "BN", "N"), ("y", "EW", "E"))


def is_reg_operand(op) -> bool:
    """A plain integer is a register operand; arrays and tensor references come from memory."""
    return isinstance(op, (int, np.integer)) or (isinstance(op, np.ndarray) and op.ndim == 0)


def reg_operand(op, bits: int) -> int:
    """Register word of a REG operand; 0 when the operand comes from memory."""
    return int(op) & ((1 << bits) - 1) if is_reg_operand(op) else 0


def stage_mem_use(st) -> tuple[bool, bool]:
    """(ALU operand from memory, MUL operand from memory) of an X/Y stage."""
    alu = not st.bypass and not st.alu_bypass and not is_reg_operand(st.alu_operand)
    mul = not st.bypass and not st.mul_bypass and not is_reg_operand(st.mul_operand)
    return alu, mul


def emit_sdp(p: RegProgram, src: Cube | None, dst: Cube, prm, operands: dict[str, OperandPlacement] | None = None,
             ram_type: int = 1, enable: bool = True, winograd: bool = False, to_pdp: bool = False) -> bool:
    """``src`` None means the input arrives on the fly from CACC (the conv pipeline writes the enables
    itself, so ``enable`` is False there). ``operands`` places each stage's memory operand. Returns whether
    SDP_RDMA takes part. ``winograd``: the data comes on the fly from a Winograd convolution (2x2 tiles).
    ``to_pdp``: the result goes to PDP on the fly, not to memory."""
    operands = operands or {}
    c, h, w = dst.channels, dst.height, dst.width
    flying = src is None
    needs_rdma = not flying or any(any(stage_mem_use(getattr(prm, s))) for s, _, _ in STAGES)
    pointers(p, *(("SDP_RDMA", "SDP") if needs_rdma else ("SDP",)))
    lut = getattr(prm, "lut", None)
    if lut is not None and not prm.y.bypass and not prm.y.lut_bypass:
        emit_lut(p, "SDP", lut)
    for unit in ("SDP_RDMA", "SDP") if needs_rdma else ("SDP",):
        p.reg(unit, "D_DATA_CUBE_WIDTH", w - 1)
        p.reg(unit, "D_DATA_CUBE_HEIGHT", h - 1)
        p.reg(unit, "D_DATA_CUBE_CHANNEL", c - 1)
    if not flying:
        p.addr("SDP_RDMA", "D_SRC_BASE_ADDR_LOW", src.loc)
        p.reg("SDP_RDMA", "D_SRC_LINE_STRIDE", src.line_stride)
        p.reg("SDP_RDMA", "D_SRC_SURFACE_STRIDE", src.surface_stride)
        p.reg("SDP_RDMA", "D_SRC_DMA_CFG", SRC_RAM_TYPE=ram_type)
    code = PRECISION_CODES[getattr(prm, "precision", "int8")]
    out_code = PRECISION_CODES[getattr(prm, "out_precision", None) or getattr(prm, "precision", "int8")]
    if needs_rdma:
        p.reg("SDP_RDMA", "D_FEATURE_MODE_CFG", FLYING_MODE=int(flying), IN_PRECISION=code, PROC_PRECISION=code,
              OUT_PRECISION=out_code, **({"WINOGRAD": 1} if winograd else {}))
    p.reg("SDP", "D_FEATURE_MODE_CFG", FLYING_MODE=int(flying), OUTPUT_DST=int(to_pdp),
          **({"WINOGRAD": 1} if winograd else {}))
    p.reg("SDP", "D_DATA_FORMAT", PROC_PRECISION=code, OUT_PRECISION=out_code)
    for stage, prefix, rdma in STAGES:
        st = getattr(prm, stage)
        alu_mem, mul_mem = stage_mem_use(st)
        if needs_rdma:
            if alu_mem or mul_mem:
                pl = operands[stage]
                use = 2 if alu_mem and mul_mem else (1 if alu_mem else 0)
                p.reg("SDP_RDMA", f"D_{rdma}RDMA_CFG", 0, **{
                    f"{rdma}RDMA_DISABLE": 0, f"{rdma}RDMA_DATA_USE": use, f"{rdma}RDMA_DATA_SIZE": int(pl.size == 2),
                    f"{rdma}RDMA_DATA_MODE": int(pl.mode == "element"), f"{rdma}RDMA_RAM_TYPE": ram_type})
                p.addr("SDP_RDMA", f"D_{prefix}_BASE_ADDR_LOW", pl.loc)
                p.reg("SDP_RDMA", f"D_{prefix}_LINE_STRIDE", pl.line_stride)
                p.reg("SDP_RDMA", f"D_{prefix}_SURFACE_STRIDE", pl.surface_stride)
            else:
                p.reg("SDP_RDMA", f"D_{rdma}RDMA_CFG", 0, **{f"{rdma}RDMA_DISABLE": 1})
        if stage == "y":
            p.reg("SDP", "D_DP_EW_CFG", EW_BYPASS=int(st.bypass), EW_ALU_BYPASS=int(st.alu_bypass),
                  EW_ALU_ALGO=st.alu_algo, EW_MUL_BYPASS=int(st.mul_bypass), EW_MUL_PRELU=int(st.mul_prelu),
                  EW_LUT_BYPASS=int(st.lut_bypass))
            if st.bypass:
                continue
            p.reg("SDP", "D_DP_EW_ALU_CFG", EW_ALU_SRC=int(alu_mem), EW_ALU_CVT_BYPASS=int(st.alu_cvt.bypass))
            p.reg("SDP", "D_DP_EW_ALU_SRC_VALUE", reg_operand(st.alu_operand, 32))
            p.reg("SDP", "D_DP_EW_ALU_CVT_OFFSET_VALUE", u32(st.alu_cvt.offset))
            p.reg("SDP", "D_DP_EW_ALU_CVT_SCALE_VALUE", st.alu_cvt.scale & 0xFFFF)
            p.reg("SDP", "D_DP_EW_ALU_CVT_TRUNCATE_VALUE", st.alu_cvt.truncate)
            p.reg("SDP", "D_DP_EW_MUL_CFG", EW_MUL_SRC=int(mul_mem), EW_MUL_CVT_BYPASS=int(st.mul_cvt.bypass))
            p.reg("SDP", "D_DP_EW_MUL_SRC_VALUE", reg_operand(st.mul_operand, 32))
            p.reg("SDP", "D_DP_EW_MUL_CVT_OFFSET_VALUE", u32(st.mul_cvt.offset))
            p.reg("SDP", "D_DP_EW_MUL_CVT_SCALE_VALUE", st.mul_cvt.scale & 0xFFFF)
            p.reg("SDP", "D_DP_EW_MUL_CVT_TRUNCATE_VALUE", st.mul_cvt.truncate)
            p.reg("SDP", "D_DP_EW_TRUNCATE_VALUE", st.truncate)
        else:
            p.reg("SDP", f"D_DP_{prefix}_CFG", 0, **{
                f"{prefix}_BYPASS": int(st.bypass), f"{prefix}_ALU_BYPASS": int(st.alu_bypass),
                f"{prefix}_ALU_ALGO": st.alu_algo, f"{prefix}_MUL_BYPASS": int(st.mul_bypass),
                f"{prefix}_MUL_PRELU": int(st.mul_prelu), f"{prefix}_RELU_BYPASS": int(st.relu_bypass)})
            if st.bypass:
                continue
            p.reg("SDP", f"D_DP_{prefix}_ALU_CFG", 0, **{f"{prefix}_ALU_SRC": int(alu_mem),
                                                       f"{prefix}_ALU_SHIFT_VALUE": st.alu_shift})
            p.reg("SDP", f"D_DP_{prefix}_ALU_SRC_VALUE", reg_operand(st.alu_operand, 16))
            p.reg("SDP", f"D_DP_{prefix}_MUL_CFG", 0, **{f"{prefix}_MUL_SRC": int(mul_mem),
                                                       f"{prefix}_MUL_SHIFT_VALUE": st.mul_shift})
            p.reg("SDP", f"D_DP_{prefix}_MUL_SRC_VALUE", reg_operand(st.mul_operand, 16))
    p.addr("SDP", "D_DST_BASE_ADDR_LOW", dst.loc)
    p.reg("SDP", "D_DST_LINE_STRIDE", dst.line_stride)
    p.reg("SDP", "D_DST_SURFACE_STRIDE", dst.surface_stride)
    p.reg("SDP", "D_DST_DMA_CFG", DST_RAM_TYPE=ram_type)
    p.reg("SDP", "D_CVT_OFFSET", u32(prm.cvt_offset))
    p.reg("SDP", "D_CVT_SCALE", prm.cvt_scale & 0xFFFF)
    p.reg("SDP", "D_CVT_SHIFT", prm.cvt_shift)
    if enable:
        sdp_enables(p, needs_rdma)
    return needs_rdma


def sdp_enables(p: RegProgram, needs_rdma: bool) -> None:
    if needs_rdma:
        p.reg("SDP_RDMA", "D_OP_ENABLE", 1)
    p.reg("SDP", "D_OP_ENABLE", 1)
