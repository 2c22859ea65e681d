"""fp16 SDP from memory (nv_full): the fp16 counterpart of ``compiler.codegen.sdp.emit_sdp``.

The parameters are an ``Fp16Params``-like object (x1/x2/y stages, lut, out, nan_to_zero): X-stage REG
operands are fp16 bit patterns in the fields' low 16 bits, Y-stage REG operands fp32 words, and the LUT
holds fp16 entries and slope scales with fp32 START/END. Memory operands are 2-byte fp16 elements.
"""
from __future__ import annotations

from compiler.codegen.lut import emit_lut
from compiler.codegen.program import PRECISION_CODES, Cube, OperandPlacement, pointers, u32
from compiler.codegen.sdp import is_reg_operand, stage_mem_use
from golden.program import RegProgram

#: (parameter stage, register prefix, operand DMA prefix)
FP16_STAGES = (("x1", "BS", "B"), ("x2", "BN", "N"), ("y", "EW", "E"))
#: ``D_DATA_FORMAT`` / ``*_PRECISION`` encodings.
PRECISION = PRECISION_CODES
_DATA_USE = {"mul": 0, "alu": 1, "both": 2}


def emit_sdp_fp16(p: RegProgram, src: Cube, dst: Cube, prm, operands: dict[str, OperandPlacement],
                  counters: bool = True) -> None:
    """An fp16 SDP operation reading ``src`` and writing ``dst`` (same geometry), its memory operands
    placed per stage in ``operands``. ``counters`` also enables the NaN/Inf and LUT/saturation counters."""
    c, h, w = dst.channels, dst.height, dst.width
    pointers(p, "SDP_RDMA", "SDP")
    if not prm.y.bypass and not prm.y.lut_bypass:
        emit_lut(p, "SDP", prm.lut)  # slope shifts stay 0: fp16 has none
    for unit in ("SDP_RDMA", "SDP"):
        p.reg(unit, "D_DATA_CUBE_WIDTH", w - 1)
        p.reg(unit, "D_DATA_CUBE_HEIGHT", h - 1)
        p.reg(unit, "D_DATA_CUBE_CHANNEL", c - 1)
    p.addr("SDP_RDMA", "D_SRC_BASE_ADDR_LOW", src.loc)
    p.reg("SDP_RDMA", "D_SRC_LINE_STRIDE", src.line_stride)
    p.reg("SDP_RDMA", "D_SRC_SURFACE_STRIDE", src.surface_stride)
    p.reg("SDP_RDMA", "D_SRC_DMA_CFG", SRC_RAM_TYPE=1)
    out = PRECISION[prm.out]
    p.reg("SDP_RDMA", "D_FEATURE_MODE_CFG", FLYING_MODE=0, IN_PRECISION=2, PROC_PRECISION=2, OUT_PRECISION=out)
    p.reg("SDP", "D_FEATURE_MODE_CFG", FLYING_MODE=0, NAN_TO_ZERO=int(prm.nan_to_zero))
    p.reg("SDP", "D_DATA_FORMAT", PROC_PRECISION=2, OUT_PRECISION=out)
    for stage, prefix, rdma in FP16_STAGES:
        st = getattr(prm, stage)
        alu_mem, mul_mem = stage_mem_use(st)
        placed = operands.get(stage)
        if placed is not None:
            p.reg("SDP_RDMA", f"D_{rdma}RDMA_CFG", 0, **{
                f"{rdma}RDMA_DISABLE": 0, f"{rdma}RDMA_DATA_USE": _DATA_USE[placed.use], f"{rdma}RDMA_DATA_SIZE": 1,
                f"{rdma}RDMA_DATA_MODE": int(placed.mode == "element"), f"{rdma}RDMA_RAM_TYPE": 1})
            p.addr("SDP_RDMA", f"D_{prefix}_BASE_ADDR_LOW", placed.loc)
            p.reg("SDP_RDMA", f"D_{prefix}_LINE_STRIDE", placed.line_stride)
            p.reg("SDP_RDMA", f"D_{prefix}_SURFACE_STRIDE", placed.surface_stride)
        else:
            p.reg("SDP_RDMA", f"D_{rdma}RDMA_CFG", 0, **{f"{rdma}RDMA_DISABLE": 1})
        reg_alu = int(st.alu_operand) if is_reg_operand(st.alu_operand) else 0
        reg_mul = int(st.mul_operand) if is_reg_operand(st.mul_operand) else 0
        if stage == "y":
            p.reg("SDP", "D_DP_EW_CFG", EW_BYPASS=int(st.bypass), EW_ALU_BYPASS=int(st.alu_bypass),
                  EW_ALU_ALGO=st.alu_algo, EW_MUL_BYPASS=int(st.mul_bypass), EW_MUL_PRELU=int(st.mul_prelu),
                  EW_LUT_BYPASS=int(st.lut_bypass))
            p.reg("SDP", "D_DP_EW_ALU_CFG", EW_ALU_SRC=int(alu_mem), EW_ALU_CVT_BYPASS=1)
            p.reg("SDP", "D_DP_EW_ALU_SRC_VALUE", u32(reg_alu))
            p.reg("SDP", "D_DP_EW_MUL_CFG", EW_MUL_SRC=int(mul_mem), EW_MUL_CVT_BYPASS=1)
            p.reg("SDP", "D_DP_EW_MUL_SRC_VALUE", u32(reg_mul))
        else:
            p.reg("SDP", f"D_DP_{prefix}_CFG", 0, **{
                f"{prefix}_BYPASS": int(st.bypass), f"{prefix}_ALU_BYPASS": int(st.alu_bypass),
                f"{prefix}_ALU_ALGO": st.alu_algo, f"{prefix}_MUL_BYPASS": int(st.mul_bypass),
                f"{prefix}_MUL_PRELU": int(st.mul_prelu), f"{prefix}_RELU_BYPASS": int(st.relu_bypass)})
            p.reg("SDP", f"D_DP_{prefix}_ALU_CFG", 0, **{f"{prefix}_ALU_SRC": int(alu_mem)})
            p.reg("SDP", f"D_DP_{prefix}_ALU_SRC_VALUE", reg_alu & 0xFFFF)
            p.reg("SDP", f"D_DP_{prefix}_MUL_CFG", 0, **{f"{prefix}_MUL_SRC": int(mul_mem)})
            p.reg("SDP", f"D_DP_{prefix}_MUL_SRC_VALUE", reg_mul & 0xFFFF)
    p.addr("SDP", "D_DST_BASE_ADDR_LOW", dst.loc)
    p.reg("SDP", "D_DST_LINE_STRIDE", dst.line_stride)
    p.reg("SDP", "D_DST_SURFACE_STRIDE", dst.surface_stride)
    p.reg("SDP", "D_DST_DMA_CFG", DST_RAM_TYPE=1)
    p.reg("SDP", "D_CVT_SCALE", 1)
    if counters:
        p.reg("SDP_RDMA", "D_PERF_ENABLE", PERF_NAN_INF_COUNT_EN=1)
        p.reg("SDP", "D_PERF_ENABLE", PERF_LUT_EN=1, PERF_SAT_EN=1, PERF_NAN_INF_COUNT_EN=1)
    p.reg("SDP_RDMA", "D_OP_ENABLE", 1)
    p.reg("SDP", "D_OP_ENABLE", 1)
