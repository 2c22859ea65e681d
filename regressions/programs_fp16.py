"""Register programs for fp16 SDP operations (nv_full), built from the fp16 reference's parameters.

The fp16 counterpart of ``regressions.programs.program_sdp``: an ``SdpFp16Layer`` holds the input cube as
fp16 bit patterns and a ``regressions.lib.reference.sdp_fp16.Fp16Params``; ``program_sdp_fp16`` writes the
registers (fp16 REG operands in the X fields' low 16 bits, fp32 words in the Y REG fields, fp16 LUT
entries and slope scales, fp32 LUT START/END) and lays out the memory image (2-byte fp16 elements,
16-channel atoms on nv_full). The NaN/Inf counters and the LUT/saturation counters are switched on so a
run reports them.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from compiler.codegen.lut import emit_lut
from compiler.codegen.pack import pack_feature, pack_operands, strides
from compiler.codegen.program import Cube, pointers, u32
from golden.program import RegProgram
from golden.config import HwConfig
from regressions.programs import DST_BASE, OPERAND_BASE, SRC_BASE, LayerTest

#: (parameter stage, register prefix, operand DMA prefix)
STAGES = (("x1", "BS", "B"), ("x2", "BN", "N"), ("y", "EW", "E"))
PRECISION = {"int8": 0, "int16": 1, "fp16": 2}


@dataclass
class SdpFp16Layer:
    """An fp16 SDP operation from memory: ``x`` is (C, H, W) fp16 bits, ``params`` an ``Fp16Params``."""

    x: np.ndarray
    params: object
    #: Also enable the NaN/Inf counters (SDP_RDMA input, SDP output) and LUT/saturation counters.
    counters: bool = True


def _is_reg(op) -> bool:
    return np.ndim(op) == 0


def _mem_use(st) -> tuple[bool, bool]:
    alu = not st.bypass and not st.alu_bypass and not _is_reg(st.alu_operand)
    mul = not st.bypass and not st.mul_bypass and not _is_reg(st.mul_operand)
    return alu, mul


def atom_of(hw: HwConfig) -> int:
    return hw.atom_elements("fp16")


def program_sdp_fp16(hw: HwConfig, layer: SdpFp16Layer) -> LayerTest:
    """Registers and memory of an fp16 SDP operation reading its input from memory."""
    prm = layer.params
    atom = atom_of(hw)
    c, h, w = layer.x.shape
    line, surf = strides(c, h, w, atom, 2)
    dst = Cube(DST_BASE, c, h, w, line, surf)
    prog = LayerTest(RegProgram(hw), intr="SDP_0")
    prog.memory.append((SRC_BASE, pack_feature(np.asarray(layer.x) & 0xFFFF, atom, 2)))
    prog.output = (DST_BASE, -(-c // atom) * surf)

    p = RegProgram(hw)
    pointers(p, "SDP_RDMA", "SDP")
    if not prm.y.bypass and not prm.y.lut_bypass:
        emit_lut(p, "SDP", prm.lut)  # slope shifts stay 0: fp16 has none
    for unit in ("SDP_RDMA", "SDP"):
        p.reg(unit, "D_DATA_CUBE_WIDTH", w - 1)
        p.reg(unit, "D_DATA_CUBE_HEIGHT", h - 1)
        p.reg(unit, "D_DATA_CUBE_CHANNEL", c - 1)
    p.addr("SDP_RDMA", "D_SRC_BASE_ADDR_LOW", SRC_BASE)
    p.reg("SDP_RDMA", "D_SRC_LINE_STRIDE", line)
    p.reg("SDP_RDMA", "D_SRC_SURFACE_STRIDE", surf)
    p.reg("SDP_RDMA", "D_SRC_DMA_CFG", SRC_RAM_TYPE=1)
    out = PRECISION[prm.out]
    p.reg("SDP_RDMA", "D_FEATURE_MODE_CFG", FLYING_MODE=0, IN_PRECISION=2, PROC_PRECISION=2, OUT_PRECISION=out)
    p.reg("SDP", "D_FEATURE_MODE_CFG", FLYING_MODE=0, NAN_TO_ZERO=int(prm.nan_to_zero))
    p.reg("SDP", "D_DATA_FORMAT", PROC_PRECISION=2, OUT_PRECISION=out)

    base = OPERAND_BASE
    for stage, prefix, rdma in STAGES:
        st = getattr(prm, stage)
        alu_mem, mul_mem = _mem_use(st)
        if alu_mem or mul_mem:
            ops = ([np.asarray(st.alu_operand)] if alu_mem else []) + ([np.asarray(st.mul_operand)] if mul_mem else [])
            mode = "kernel" if ops[0].ndim == 1 else "element"
            if any(o.ndim != ops[0].ndim for o in ops):
                raise ValueError(f"{stage}: ALU and MUL memory operands share one DMA, so one mode (kernel/element)")
            data, oline, osurf = pack_operands([o & 0xFFFF for o in ops], c, h, w, atom, 2, mode)
            prog.memory.append((base, data))
            use = 2 if alu_mem and mul_mem else (1 if alu_mem else 0)
            p.reg("SDP_RDMA", f"D_{rdma}RDMA_CFG", 0, **{
                f"{rdma}RDMA_DISABLE": 0, f"{rdma}RDMA_DATA_USE": use, f"{rdma}RDMA_DATA_SIZE": 1,
                f"{rdma}RDMA_DATA_MODE": int(mode == "element"), f"{rdma}RDMA_RAM_TYPE": 1})
            p.addr("SDP_RDMA", f"D_{prefix}_BASE_ADDR_LOW", base)
            p.reg("SDP_RDMA", f"D_{prefix}_LINE_STRIDE", oline)
            p.reg("SDP_RDMA", f"D_{prefix}_SURFACE_STRIDE", osurf)
            base += (len(data) + 0xFFFF) & ~0xFFFF
        else:
            p.reg("SDP_RDMA", f"D_{rdma}RDMA_CFG", 0, **{f"{rdma}RDMA_DISABLE": 1})
        reg_alu = int(st.alu_operand) if _is_reg(st.alu_operand) else 0
        reg_mul = int(st.mul_operand) if _is_reg(st.mul_operand) else 0
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
    p.reg("SDP", "D_DST_LINE_STRIDE", line)
    p.reg("SDP", "D_DST_SURFACE_STRIDE", surf)
    p.reg("SDP", "D_DST_DMA_CFG", DST_RAM_TYPE=1)
    p.reg("SDP", "D_CVT_SCALE", 1)
    if layer.counters:
        p.reg("SDP_RDMA", "D_PERF_ENABLE", PERF_NAN_INF_COUNT_EN=1)
        p.reg("SDP", "D_PERF_ENABLE", PERF_LUT_EN=1, PERF_SAT_EN=1, PERF_NAN_INF_COUNT_EN=1)
    p.reg("SDP_RDMA", "D_OP_ENABLE", 1)
    p.reg("SDP", "D_OP_ENABLE", 1)
    prog.extend(p)
    return prog


def expected_bytes(out: np.ndarray, hw: HwConfig) -> bytes:
    """Output bytes of a (padded C, H, W) result of fp16 bits or int16 values, in the feature layout."""
    return pack_feature(np.asarray(out, dtype=np.int64), atom_of(hw), 2)


__all__ = ["SdpFp16Layer", "atom_of", "expected_bytes", "program_sdp_fp16"]
