"""SDP: the single data point processor (int8, int16 and fp16 paths), bit-accurate to NVDLA's cmod.

Pipeline (NVDLA_NOTES §4 "SDP"; cmod ``hls/sdp/*.cpp``, ``hls_wrapper/sdp_hls_wrapper.cpp``,
``sdp/NV_NVDLA_sdp.cpp``)::

    input (int8/int16/fp16 from SDP_RDMA, or int32 / FP32 from CACC on the fly)
      -> X1 (BS): ALU -> MUL -> truncate -> ReLU
      -> X2 (BN): same stage
      -> Y  (EW): MUL -> ALU -> LUT
      -> C: output CVT -> int8/int16/fp16 to memory (D_DST_*), or on the fly to PDP

int16 (nv_full) runs the same integer formulas: input elements are 2-byte little-endian, an atom holds
``memory_atomic_size / 2`` channels, and the output CVT saturates to 16 instead of 8 bits (cmod ``sdp_c.cpp``:
``IntSaturation<17, 16>`` for OUT_PRECISION=INT16).

fp16 (PROC_PRECISION=FP16, nv_full) computes in FP32 with the cmod's own float library (``golden.fp``):
fp16 input widened by Fp16ToFp32 (CACC hands FP32), X operands are fp16 (REG fields [15:0] or 2-byte MEM;
a 1-byte BRDMA operand is its sign-extended byte read as fp16 bits, as the cmod's RDMA delivers it, and
1-byte NRDMA/ERDMA operands are a cmod assertion, ConfigError),
Y REG operands are fp32 words and MEM operands fp16 (the EW CVT's offset/scale/truncate and every shift
and truncate register are unused), the LUT indexes and interpolates in fp (``sdp_lut.lut_lookup_fp``),
and the output is Fp32ToFp16 (or Fp16ToInt16 for OUT_PRECISION=INT16). D_FEATURE_MODE_CFG.NAN_TO_ZERO
flushes NaN inputs and operands to +0; the NaN/Inf counters are reported when their PERF enables are set.
Precision pairs are listed in ``PRECISION_PAIRS``; others (int8 <-> 16-bit) raise UnsupportedError.

Every stage works on the whole padded cube (C rounded up to the memory atom, H, W) as int64; all lanes of
the last surface are computed and written (NOTES §8.3). Widths follow the cmod exactly: X keeps a 33-bit
ALU result and a 49-bit product; Y multiplies 32 x 32 bits, which fits int64 exactly since
|x·op| <= 2^62, and truncates with ``golden.arith.rha`` (the 10-bit EW shift goes up to 1023). The fp16
path carries fp32 bit patterns (0 .. 2^32-1) in the same int64 arrays.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from golden import fp
from golden.arith import rha, sat, sign_extend
from golden.engines import Engine, OpContext, Views, conv_batch, register
from golden.config import HwConfig
from golden.decode_memo import memo_view, memo_views
from golden.dma import dma_address, dma_bytes, space_for
from golden.engines.sdp_lut import lut_lookup, lut_lookup_fp
from golden.lut import LutRegisters
from golden.errors import UnsupportedError
from golden.intr import unit_done_bits
from golden.layout import CubeLayout, cube_bytes, read_cube, write_cube
from golden.memory import AddressSpace
from golden.regs import RegView

# Register encodings (NVDLA_SDP.rdl / NVDLA_SDP_RDMA.rdl).
FLYING_ON = 1
OUTPUT_DST_PDP = 1
ALU_MAX, ALU_MIN, ALU_SUM, ALU_EQL = 0, 1, 2, 3
DATA_USE_MUL, DATA_USE_ALU, DATA_USE_BOTH = 0, 1, 2
PRECISIONS = {0: "INT8", 1: "INT16", 2: "FP16"}


# ---------------------------------------------------------------------------------------------------
# Decoded configuration
# ---------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class XConfig:
    """One X stage (BS = X1 or BN = X2): ``D_DP_{BS,BN}_*``."""

    name: str  # "BS" or "BN"
    bypass: bool
    alu_bypass: bool
    alu_algo: int  # 0 MAX, 1 MIN, 2/3 SUM
    alu_mem: bool
    alu_shift: int  # 6 bits
    alu_operand: int  # signed 16 bits
    mul_bypass: bool
    mul_prelu: bool
    mul_mem: bool
    mul_shift: int  # low 6 bits of the 8-bit field
    mul_operand: int  # signed 16 bits
    relu_bypass: bool

    @classmethod
    def from_view(cls, sdp: RegView, name: str) -> "XConfig":
        cfg = getattr(sdp, f"D_DP_{name}_CFG")
        alu = getattr(sdp, f"D_DP_{name}_ALU_CFG")
        mul = getattr(sdp, f"D_DP_{name}_MUL_CFG")
        return cls(
            name=name,
            bypass=bool(getattr(cfg, f"{name}_BYPASS")),
            alu_bypass=bool(getattr(cfg, f"{name}_ALU_BYPASS")),
            alu_algo=getattr(cfg, f"{name}_ALU_ALGO"),
            alu_mem=bool(getattr(alu, f"{name}_ALU_SRC")),
            alu_shift=getattr(alu, f"{name}_ALU_SHIFT_VALUE") & 0x3F,
            alu_operand=getattr(sdp, f"D_DP_{name}_ALU_SRC_VALUE").signed(f"{name}_ALU_OPERAND"),
            mul_bypass=bool(getattr(cfg, f"{name}_MUL_BYPASS")),
            mul_prelu=bool(getattr(cfg, f"{name}_MUL_PRELU")),
            mul_mem=bool(getattr(mul, f"{name}_MUL_SRC")),
            mul_shift=getattr(mul, f"{name}_MUL_SHIFT_VALUE") & 0x3F,
            mul_operand=getattr(sdp, f"D_DP_{name}_MUL_SRC_VALUE").signed(f"{name}_MUL_OPERAND"),
            relu_bypass=bool(getattr(cfg, f"{name}_RELU_BYPASS")),
        )

    @property
    def uses_alu_mem(self) -> bool:
        return not self.bypass and not self.alu_bypass and self.alu_mem

    @property
    def uses_mul_mem(self) -> bool:
        return not self.bypass and not self.mul_bypass and self.mul_mem


@dataclass(frozen=True)
class OperandCvt:
    """The EW operand converter: ``sat32(rha((v − offset)·scale, truncate))`` unless bypassed."""

    bypass: bool
    offset: int  # signed 32 bits
    scale: int  # signed 16 bits
    truncate: int  # 6 bits


@dataclass(frozen=True)
class YConfig:
    """The Y (EW) stage: ``D_DP_EW_*``."""

    bypass: bool
    alu_bypass: bool
    alu_algo: int  # 0 MAX, 1 MIN, 2 SUM, 3 EQL
    alu_mem: bool
    alu_operand: int  # signed 32 bits (REG operands are not converted)
    alu_cvt: OperandCvt
    mul_bypass: bool
    mul_prelu: bool
    mul_mem: bool
    mul_operand: int  # signed 32 bits
    mul_cvt: OperandCvt
    truncate: int  # 10 bits
    lut_bypass: bool

    @classmethod
    def from_view(cls, sdp: RegView) -> "YConfig":
        cfg, alu, mul = sdp.D_DP_EW_CFG, sdp.D_DP_EW_ALU_CFG, sdp.D_DP_EW_MUL_CFG

        def cvt(kind: str, bypass: int) -> OperandCvt:
            return OperandCvt(
                bypass=bool(bypass),
                offset=getattr(sdp, f"D_DP_EW_{kind}_CVT_OFFSET_VALUE").signed(f"EW_{kind}_CVT_OFFSET"),
                scale=getattr(sdp, f"D_DP_EW_{kind}_CVT_SCALE_VALUE").signed(f"EW_{kind}_CVT_SCALE"),
                truncate=getattr(getattr(sdp, f"D_DP_EW_{kind}_CVT_TRUNCATE_VALUE"), f"EW_{kind}_CVT_TRUNCATE"),
            )

        return cls(
            bypass=bool(cfg.EW_BYPASS),
            alu_bypass=bool(cfg.EW_ALU_BYPASS),
            alu_algo=cfg.EW_ALU_ALGO,
            alu_mem=bool(alu.EW_ALU_SRC),
            alu_operand=sdp.D_DP_EW_ALU_SRC_VALUE.signed("EW_ALU_OPERAND"),
            alu_cvt=cvt("ALU", alu.EW_ALU_CVT_BYPASS),
            mul_bypass=bool(cfg.EW_MUL_BYPASS),
            mul_prelu=bool(cfg.EW_MUL_PRELU),
            mul_mem=bool(mul.EW_MUL_SRC),
            mul_operand=sdp.D_DP_EW_MUL_SRC_VALUE.signed("EW_MUL_OPERAND"),
            mul_cvt=cvt("MUL", mul.EW_MUL_CVT_BYPASS),
            truncate=sdp.D_DP_EW_TRUNCATE_VALUE.EW_TRUNCATE,
            lut_bypass=bool(cfg.EW_LUT_BYPASS),
        )

    @property
    def uses_alu_mem(self) -> bool:
        return not self.bypass and not self.alu_bypass and self.alu_mem

    @property
    def uses_mul_mem(self) -> bool:
        return not self.bypass and not self.mul_bypass and self.mul_mem

    @property
    def uses_lut(self) -> bool:
        return not self.bypass and not self.lut_bypass

    @property
    def eql_mode(self) -> bool:
        """EQL compare mode: the output CVT passes the low 16 bits, nothing is written (cmod
        ``sdp_cfg_mode_eql``; RTL WDMA ``cfg_mode_quite``) and D_STATUS.STATUS_UNEQUAL reports."""
        return not self.bypass and not self.alu_bypass and self.alu_algo == ALU_EQL


@dataclass(frozen=True)
class OutCvt:
    """The C stage: ``D_CVT_OFFSET`` (signed 32), ``D_CVT_SCALE`` (signed 16), ``D_CVT_SHIFT`` (6 bits)."""

    offset: int
    scale: int
    shift: int

    @classmethod
    def from_view(cls, sdp: RegView) -> "OutCvt":
        return cls(
            offset=sdp.D_CVT_OFFSET.signed("CVT_OFFSET"),
            scale=sdp.D_CVT_SCALE.signed("CVT_SCALE"),
            shift=sdp.D_CVT_SHIFT.CVT_SHIFT,
        )


@dataclass(frozen=True)
class DmaOperand:
    """One operand read DMA of SDP_RDMA (BRDMA/NRDMA/ERDMA for BS/BN/EW)."""

    prefix: str  # "B", "N", "E"
    stage: str  # "BS", "BN", "EW"
    enabled: bool
    data_use: int  # 0 MUL, 1 ALU, 2 BOTH
    data_size: int  # bytes per component, 1 or 2
    per_element: bool
    ram_type: int
    base: int
    line_stride: int
    surf_stride: int

    @classmethod
    def from_view(cls, rdma: RegView, prefix: str, stage: str, hw: HwConfig) -> "DmaOperand":
        cfg = getattr(rdma, f"D_{prefix}RDMA_CFG")
        p = f"{prefix}RDMA"
        return cls(
            prefix=prefix,
            stage=stage,
            enabled=not getattr(cfg, f"{p}_DISABLE"),
            data_use=getattr(cfg, f"{p}_DATA_USE"),
            data_size=2 if getattr(cfg, f"{p}_DATA_SIZE") else 1,
            per_element=bool(getattr(cfg, f"{p}_DATA_MODE")),
            ram_type=getattr(cfg, f"{p}_RAM_TYPE"),
            base=dma_address(hw, rdma, f"D_{stage}_BASE_ADDR"),
            line_stride=dma_bytes(hw, rdma.word(f"D_{stage}_LINE_STRIDE")),
            surf_stride=dma_bytes(hw, rdma.word(f"D_{stage}_SURFACE_STRIDE")),
        )

    @property
    def components(self) -> int:
        return 2 if self.data_use == DATA_USE_BOTH else 1

    @property
    def bytes_per_element(self) -> int:
        return self.components * self.data_size

    @property
    def cfg_register(self) -> str:
        return f"D_{self.prefix}RDMA_CFG"


def _x_configs(sdp: RegView) -> tuple[XConfig, XConfig]:
    return XConfig.from_view(sdp, "BS"), XConfig.from_view(sdp, "BN")


@memo_views
def _dma_operands(regs: Views, hw: HwConfig) -> dict[str, DmaOperand]:
    """SDP_RDMA's three operand DMAs (B/N/E), decoded once per distinct program (``golden.decode_memo``)."""
    rdma = regs["SDP_RDMA"]
    return {p: DmaOperand.from_view(rdma, p, stage, hw) for p, stage in (("B", "BS"), ("N", "BN"), ("E", "EW"))}


@memo_view
def _configs(sdp: RegView) -> tuple[XConfig, XConfig, YConfig, OutCvt]:
    """X1, X2, Y and the output CVT, decoded once per distinct SDP program (``golden.decode_memo``)."""
    return (*_x_configs(sdp), YConfig.from_view(sdp), OutCvt.from_view(sdp))


# ---------------------------------------------------------------------------------------------------
# Datapath stages: pure functions of int64 arrays (operands broadcast against the data)
# ---------------------------------------------------------------------------------------------------
def x_stage(x: np.ndarray, cfg: XConfig, alu_op: np.ndarray | int, mul_op: np.ndarray | int) -> np.ndarray:
    """X1/X2 (cmod ``sdp_x.cpp``): ALU -> MUL -> truncate -> ReLU on 32-bit data.

    - ALU: the 16-bit operand is shifted left by ALU_SHIFT_VALUE and saturated to 32 bits; MAX/MIN, or SUM
      kept at 33 bits (algo 3 acts as SUM).
    - MUL: x·op at 49 bits. With PReLU, x >= 0 (33-bit sign) passes and skips truncation; it is then cut
      to its low 32 bits (cmod ``TrtOut = TrtIn``, RTL ``mul_data_out[31:0]``), so a 33-bit SUM wraps.
    - Truncation ``sat32(rha(v, MUL_SHIFT_VALUE))`` also applies when MUL is bypassed.
    - ReLU: max(v, 0) unless bypassed.
    """
    if cfg.bypass:
        return x
    v = x
    if not cfg.alu_bypass:
        # |op| >= 1 shifted by >= 32 saturates anyway: capping the shift keeps int64 exact.
        op = sat(np.left_shift(np.asarray(alu_op, dtype=np.int64), min(cfg.alu_shift, 32)), 32)
        if cfg.alu_algo == ALU_MAX:
            v = np.maximum(v, op)
        elif cfg.alu_algo == ALU_MIN:
            v = np.minimum(v, op)
        else:
            v = v + op
    if cfg.mul_bypass:
        return _relu(sat(rha(v, cfg.mul_shift), 32), cfg.relu_bypass)
    product = v * np.asarray(mul_op, dtype=np.int64)
    truncated = sat(rha(product, cfg.mul_shift), 32)
    if cfg.mul_prelu:
        passed = np.asarray(sign_extend(v, 32), dtype=np.int64)
        truncated = np.where(v >= 0, passed, truncated)
    return _relu(truncated, cfg.relu_bypass)


def _relu(v: np.ndarray, bypass: bool) -> np.ndarray:
    return v if bypass else np.maximum(v, 0)


def operand_cvt(v: np.ndarray, cvt: OperandCvt) -> np.ndarray:
    """EW MEM operand conversion (cmod ``sdp_y_cvt.cpp``): 16-bit operand to 32 bits."""
    v = np.asarray(v, dtype=np.int64)
    if cvt.bypass:
        return v
    return sat(rha((v - cvt.offset) * cvt.scale, cvt.truncate), 32)


def y_core(x: np.ndarray, cfg: YConfig, alu_op: np.ndarray | int, mul_op: np.ndarray | int) -> np.ndarray:
    """Y MUL then ALU (cmod ``sdp_y_core.cpp``; operands already converted to 32 bits).

    - MUL: PReLU passes x >= 0; otherwise ``sat32(rha(x·op, EW_TRUNCATE))`` (|x·op| <= 2^62).
    - ALU: MAX, MIN, SUM saturated to 32 bits, or EQL: 0 if equal else 1.
    """
    v = x
    if not cfg.mul_bypass:
        product = v * np.asarray(mul_op, dtype=np.int64)
        truncated = sat(rha(product, cfg.truncate), 32)
        v = np.where(v >= 0, v, truncated) if cfg.mul_prelu else truncated
    if not cfg.alu_bypass:
        op = np.asarray(alu_op, dtype=np.int64)
        if cfg.alu_algo == ALU_MAX:
            v = np.maximum(v, op)
        elif cfg.alu_algo == ALU_MIN:
            v = np.minimum(v, op)
        elif cfg.alu_algo == ALU_EQL:
            v = (v != op).astype(np.int64)
        else:
            v = sat(v + op, 32)
    return np.asarray(v, dtype=np.int64)


def output_cvt(x: np.ndarray, cvt: OutCvt, out_bits: int = 8, count: bool = True) -> tuple[np.ndarray, int]:
    """C stage (cmod ``sdp_c.cpp``): ``sat_out(sat17(rha((x − offset)·scale, shift)))`` with ``out_bits`` 8
    (int8) or 16 (int16).

    Also returns the cmod's D_PERF_OUT_SATURATION count: lanes where the 17-bit result differs by more
    than 1 from the plain arithmetic shift (``IntShiftRightSat``; the final int8/int16 clamp is not counted),
    or 0 without ``count`` (D_PERF_ENABLE.PERF_SAT_EN off: nobody reads it).
    """
    v = (np.asarray(x, dtype=np.int64) - cvt.offset) * cvt.scale  # 33 x 16 bits
    t = sat(rha(v, cvt.shift), 17)
    saturated = int(np.count_nonzero(np.abs((v >> cvt.shift) - t) > 1)) if count else 0
    return sat(t, out_bits), saturated


# ---------------------------------------------------------------------------------------------------
# fp16 datapath (PROC_PRECISION=FP16): data are fp32 bit patterns held in int64 (0 .. 2^32-1)
# ---------------------------------------------------------------------------------------------------
def _fp_alu(algo: int, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """cmod ``FpAlu``: 0 MAX, 1 MIN, 2 SUM, 3 EQL (the fp32 bits 1 where the patterns differ, else 0).

    Unlike the integer X stage, ALU_ALGO=3 in X1/X2 is EQL here too (FpAlu is shared by X and Y)."""
    if algo == ALU_MAX:
        return fp.fp32_max(a, b).astype(np.int64)
    if algo == ALU_MIN:
        return fp.fp32_min(a, b).astype(np.int64)
    if algo == ALU_EQL:
        return 1 - fp.fp_eql(a, b, fp.FP32).astype(np.int64)
    return fp.fp32_add(a, b).astype(np.int64)


def flush_nan16(op: np.ndarray | int, nan_to_zero: bool) -> np.ndarray:
    """fp16 operand bits with NaNs replaced by +0 when D_FEATURE_MODE_CFG.NAN_TO_ZERO (cmod sdp_x.cpp,
    sdp_y_cvt.cpp)."""
    op = np.asarray(op, dtype=np.int64) & 0xFFFF
    if not nan_to_zero:
        return op
    return np.where(((op & 0x7C00) == 0x7C00) & ((op & 0x3FF) != 0), 0, op)


def is_nan32(x: np.ndarray) -> np.ndarray:
    return ((x & 0x7F800000) == 0x7F800000) & ((x & 0x7FFFFF) != 0)


def x_stage_fp(
    x: np.ndarray, cfg: XConfig, alu_op: np.ndarray | int, mul_op: np.ndarray | int, nan_to_zero: bool
) -> np.ndarray:
    """X1/X2 in fp (cmod ``sdp_x.cpp`` FP16 branches) on fp32 bits; operands are fp16 bits.

    - ALU: operand NaN-flushed (NAN_TO_ZERO), widened by Fp16ToFp32; ``FpAlu``. ALU_SHIFT_VALUE is unused.
    - MUL: PReLU passes x with sign bit 0; otherwise ``FpMul(x, Fp16ToFp32(op))``.
    - No truncation (MUL_SHIFT_VALUE unused); ReLU = ``FpRelu`` (negatives, -0 included, become +0; NaN
      passes).
    """
    if cfg.bypass:
        return x
    v = x
    if not cfg.alu_bypass:
        v = _fp_alu(cfg.alu_algo, v, fp.fp16_to_fp32(flush_nan16(alu_op, nan_to_zero)))
    if not cfg.mul_bypass:
        product = fp.fp32_mul(v, fp.fp16_to_fp32(flush_nan16(mul_op, nan_to_zero))).astype(np.int64)
        v = np.where((v >> 31) == 0, v, product) if cfg.mul_prelu else product
    if not cfg.relu_bypass:
        v = fp.fp_relu(v, fp.FP32).astype(np.int64)
    return np.asarray(v, dtype=np.int64)


def y_operand_fp(mem: np.ndarray | None, reg: int, from_mem: bool, nan_to_zero: bool) -> np.ndarray | int:
    """A Y operand as fp32 bits: MEM data are fp16 (NaN-flushed, widened; the CVT's offset/scale/truncate
    are unused for fp16, cmod sdp_y_cvt.cpp); a REG operand is the 32-bit register word as fp32 bits."""
    if from_mem:
        return fp.fp16_to_fp32(flush_nan16(mem, nan_to_zero)).astype(np.int64)
    return reg & 0xFFFFFFFF


def y_core_fp(x: np.ndarray, cfg: YConfig, alu_op: np.ndarray | int, mul_op: np.ndarray | int) -> np.ndarray:
    """Y MUL then ALU in fp32 (cmod ``sdp_y_core.cpp``): PReLU passes sign-0 x, else ``FpMul``
    (EW_TRUNCATE unused); then ``FpAlu`` (EQL gives the bits 0/1)."""
    v = x
    if not cfg.mul_bypass:
        product = fp.fp32_mul(v, mul_op).astype(np.int64)
        v = np.where((v >> 31) == 0, v, product) if cfg.mul_prelu else product
    if not cfg.alu_bypass:
        v = _fp_alu(cfg.alu_algo, v, np.asarray(alu_op, dtype=np.int64))
    return np.asarray(v, dtype=np.int64)


def output_fp(x: np.ndarray, out: str) -> tuple[np.ndarray, int]:
    """C stage of the fp16 path (cmod ``sdp_c.cpp``): ``Fp32ToFp16``, then ``Fp16ToInt16`` for an INT16
    output. Returns the output (fp16 bits or int16 values, int64) and D_PERF_OUT_SATURATION: fp16 lanes
    equal to +-65504 (0x7BFF, cmod sdp_hls_wrapper.cpp); the INT16 conversion reports no saturation."""
    half = fp.fp32_to_fp16(x).astype(np.int64)
    if out == "int16":
        return fp.fp16_to_int16(half), 0
    return half, int(np.count_nonzero((half & 0x7FFF) == 0x7BFF))


# ---------------------------------------------------------------------------------------------------
# Legality and presence checks
# ---------------------------------------------------------------------------------------------------
#: (processing, output) precision pairs the model runs: one precision throughout, or the cmod's float
#: conversions at the output CVT (fp16 -> int16 by ``Fp16ToInt16``, int16 -> fp16 by ``Int17ToFp16``).
PRECISION_PAIRS = {("int8", "int8"), ("int16", "int16"), ("fp16", "fp16"), ("fp16", "int16"), ("int16", "fp16")}


def _check_precision(sdp: RegView, rdma: RegView | None, reads_input: bool, hw: HwConfig) -> tuple[str, str]:
    """(processing, output) precision of the operation. SDP_RDMA's IN_PRECISION matters only when it reads
    the input cube and must equal PROC_PRECISION; SDP_RDMA's PROC/OUT must equal SDP's. Pairs outside
    ``PRECISION_PAIRS`` (int8 <-> 16-bit regrouping) and types the config lacks raise UnsupportedError."""
    fmt = sdp.D_DATA_FORMAT
    for name in ("PROC_PRECISION", "OUT_PRECISION"):
        if getattr(fmt, name) not in PRECISIONS:
            raise fmt.fail(name, f"reserved precision encoding {getattr(fmt, name)}")
    proc = PRECISIONS[fmt.PROC_PRECISION].lower()
    out = PRECISIONS[fmt.OUT_PRECISION].lower()
    where = {"proc": fmt.where("PROC_PRECISION"), "out": fmt.where("OUT_PRECISION")}
    if rdma is not None:
        mode = rdma.D_FEATURE_MODE_CFG
        names = ("IN_PRECISION",) * reads_input + ("PROC_PRECISION", "OUT_PRECISION")
        for name in names:
            prec = getattr(mode, name)
            if prec not in PRECISIONS:
                raise mode.fail(name, f"reserved precision encoding {prec}")
            want = out if name == "OUT_PRECISION" else proc
            got = PRECISIONS[prec].lower()
            if got != want:
                key = "out" if name == "OUT_PRECISION" else "proc"
                raise UnsupportedError(
                    "FP16" if "fp16" in (got, want) else "INT16",
                    f"{mode.where(name)}={got.upper()} with {where[key]}={want.upper()}: mixed precisions are not modelled",
                )
    if (proc, out) not in PRECISION_PAIRS:
        raise UnsupportedError(
            "FP16" if "fp16" in (proc, out) else "INT16",
            f"{where['out']}={out.upper()} with {where['proc']}={proc.upper()}: mixed precisions are not modelled",
        )
    for dtype, key in ((proc, "proc"), (out, "out")):
        if not hw.supports(dtype):  # type: ignore[arg-type]
            raise UnsupportedError(dtype.upper(), f"{where[key]}={dtype.upper()} but {hw.name} has no {dtype} datapath")
    return proc, out


def _check_presence(ctx: OpContext, x1: XConfig, x2: XConfig, y: YConfig) -> None:
    """A stage that is not bypassed needs its unit in the hardware config (nv_small has no EW/LUT)."""
    hw = ctx.hw
    if not x1.bypass and not hw.sdp_bs:
        raise UnsupportedError("SDP_BS", f"{hw.name} has no SDP BS (X1) unit but D_DP_BS_CFG.BS_BYPASS=0")
    if not x2.bypass and not hw.sdp_bn:
        raise UnsupportedError("SDP_BN", f"{hw.name} has no SDP BN (X2) unit but D_DP_BN_CFG.BN_BYPASS=0")
    if not y.bypass and not hw.sdp_ew:
        raise UnsupportedError("SDP_EW", f"{hw.name} has no SDP EW (Y) unit but D_DP_EW_CFG.EW_BYPASS=0")
    if y.uses_lut and not hw.sdp_lut:
        raise UnsupportedError("SDP_LUT", f"{hw.name} has no SDP LUT but D_DP_EW_CFG.EW_LUT_BYPASS=0")


def _check_mode(sdp: RegView, y: YConfig, cvt: OutCvt) -> None:
    mode = sdp.D_FEATURE_MODE_CFG
    if mode.WINOGRAD:  # 2x2-tile order from a Winograd CACC (golden.engines.conv_winograd checks both agree)
        if not mode.FLYING_MODE:
            raise mode.fail("WINOGRAD", "Winograd order comes only on the fly from CACC (cmod asserts FLYING_MODE)")
        if mode.OUTPUT_DST == OUTPUT_DST_PDP or y.eql_mode:
            raise mode.fail("WINOGRAD", "Winograd mode writes to memory only, not to PDP or in EQL mode (cmod asserts)")
    if mode.BATCH_NUMBER:
        raise UnsupportedError("BATCH", f"SDP D_FEATURE_MODE_CFG.BATCH_NUMBER={mode.BATCH_NUMBER} is not modelled")
    if y.eql_mode:
        # cmod NV_NVDLA_sdp.cpp asserts an identity output CVT in EQL mode.
        if cvt.offset != 0:
            raise sdp.D_CVT_OFFSET.fail("CVT_OFFSET", "must be 0 in EW EQL mode")
        if cvt.scale != 1:
            raise sdp.D_CVT_SCALE.fail("CVT_SCALE", "must be 1 in EW EQL mode")
        if cvt.shift != 0:
            raise sdp.D_CVT_SHIFT.fail("CVT_SHIFT", "must be 0 in EW EQL mode")
        if mode.OUTPUT_DST == OUTPUT_DST_PDP:
            raise mode.fail("OUTPUT_DST", "EW EQL mode sends no data, so it cannot feed PDP on the fly")


def _check_half_beat(hw: HwConfig, rdma: RegView, dma: DmaOperand | None, x, is_fp: bool, atoms: int) -> None:
    """``HwConfig.sdp_brdma_fp16_half_beat_hang``: refuse what that RTL never finishes (X1's BRDMA and X2's
    NRDMA measured, on the fly from CONV and from memory)."""
    limit = hw.sdp_brdma_fp16_half_beat_hang
    if not limit or not is_fp or dma is None or dma.per_element or dma.data_size != 2:
        return
    if not (x.uses_alu_mem or x.uses_mul_mem) or dma.data_use == DATA_USE_BOTH:
        return
    if atoms % 2 and atoms >= limit:
        p = f"{dma.prefix}RDMA"
        raise getattr(rdma, dma.cfg_register).fail(
            f"{p}_DATA_USE", f"one 2-byte fp16 component per channel over {atoms} channel atoms (odd, >= {limit}): "
            f"{hw.name}'s RTL never finishes this SDP operation (measured); read ALU and MUL pairs (DATA_USE BOTH)")


def _check_operand_dma(rdma: RegView, dma: DmaOperand, uses_alu: bool, uses_mul: bool) -> None:
    """A MEM operand needs its DMA enabled and delivering that component (else the cmod waits forever)."""
    cfg = getattr(rdma, dma.cfg_register)
    p = f"{dma.prefix}RDMA"
    if not (uses_alu or uses_mul):
        return
    if not dma.enabled:
        raise cfg.fail(f"{p}_DISABLE", f"SDP {dma.stage} uses a MEM operand but {p} is disabled")
    if dma.data_use not in (DATA_USE_MUL, DATA_USE_ALU, DATA_USE_BOTH):
        raise cfg.fail(f"{p}_DATA_USE", f"reserved encoding {dma.data_use}")
    if uses_alu and dma.data_use == DATA_USE_MUL:
        raise cfg.fail(f"{p}_DATA_USE", f"SDP {dma.stage} ALU uses a MEM operand but {p} delivers MUL data only")
    if uses_mul and dma.data_use == DATA_USE_ALU:
        raise cfg.fail(f"{p}_DATA_USE", f"SDP {dma.stage} MUL uses a MEM operand but {p} delivers ALU data only")


def _check_rdma_cube(sdp: RegView, rdma: RegView) -> None:
    for reg, fld in (("D_DATA_CUBE_WIDTH", "WIDTH"), ("D_DATA_CUBE_HEIGHT", "HEIGHT"),
                     ("D_DATA_CUBE_CHANNEL", "CHANNEL")):
        core, dma = getattr(getattr(sdp, reg), fld), getattr(getattr(rdma, reg), fld)
        if core != dma:
            raise getattr(rdma, reg).fail(fld, f"SDP_RDMA cube {fld.lower()} {dma} differs from SDP's {core}")
    if not sdp.D_FEATURE_MODE_CFG.FLYING_MODE and rdma.D_FEATURE_MODE_CFG.FLYING_MODE:
        raise rdma.D_FEATURE_MODE_CFG.fail(
            "FLYING_MODE", "SDP reads its input from memory but SDP_RDMA is in flying mode"
        )


def _check_dst_layout(sdp: RegView, layout: CubeLayout) -> None:
    """Written lines (runs of W atoms) must not overlap: the write order would otherwise decide the data."""
    s = np.arange(layout.surfaces, dtype=np.int64)[:, None]
    h = np.arange(layout.height, dtype=np.int64)[None, :]
    starts = np.sort((s * layout.surf_stride + h * layout.line_stride).reshape(-1))
    run = layout.width * layout.atom * layout.bpe
    if starts.size > 1 and int(np.min(np.diff(starts))) < run:
        if layout.height > 1 and layout.line_stride < run:
            raise sdp.D_DST_LINE_STRIDE.fail(
                "DST_LINE_STRIDE", f"{layout.line_stride} is below one line ({run} bytes)"
            )
        raise sdp.D_DST_SURFACE_STRIDE.fail(
            "DST_SURFACE_STRIDE", f"{layout.surf_stride} makes surfaces overlap (line stride {layout.line_stride})"
        )


# ---------------------------------------------------------------------------------------------------
# Memory access
# ---------------------------------------------------------------------------------------------------
def _little_endian(raw: np.ndarray, size: int) -> np.ndarray:
    """Signed values of ``size``-byte little-endian groups along the last axis."""
    v = raw[..., 0].astype(np.int64)
    if size == 2:
        v = v | (raw[..., 1].astype(np.int64) << 8)
    return np.asarray(sign_extend(v, 8 * size), dtype=np.int64)


def read_operands(
    space: AddressSpace, dma: DmaOperand, channels: int, height: int, width: int, atom: int
) -> tuple[np.ndarray | None, np.ndarray | None]:
    """(ALU, MUL) operand arrays from one operand DMA, broadcastable to (C_pad, H, W).

    PER_ELEMENT: the feature layout with ``bytes_per_element`` = components x bytes; PER_KERNEL: one
    contiguous vector of C_pad elements at the base address (strides ignored). With DATA_USE=BOTH each
    element holds the ALU component then the MUL component (cmod ``NvdlaPacker``: A0 B0 A1 B1 ...).
    1-byte components are sign-extended to 16 bits.
    """
    bpe = dma.bytes_per_element
    if dma.per_element:
        layout = CubeLayout(channels, height, width, dma.line_stride, dma.surf_stride, atom, bpe)
        raw = cube_bytes(space, dma.base, layout)
    else:
        c_pad = -(-channels // atom) * atom
        offsets = np.arange(c_pad, dtype=np.int64)[:, None] * bpe + np.arange(bpe, dtype=np.int64)[None, :]
        raw = space.gather(dma.base, offsets)[:, None, None, :]
    size = dma.data_size
    first = _little_endian(raw[..., :size], size)
    if dma.data_use == DATA_USE_BOTH:
        return first, _little_endian(raw[..., size : 2 * size], size)
    if dma.data_use == DATA_USE_ALU:
        return first, None
    return None, first


# ---------------------------------------------------------------------------------------------------
# Engine hooks
# ---------------------------------------------------------------------------------------------------
def source(regs: Views) -> str | None:
    """CACC feeds SDP on the fly when D_FEATURE_MODE_CFG.FLYING_MODE=ON."""
    return "CONV" if regs["SDP"].D_FEATURE_MODE_CFG.FLYING_MODE == FLYING_ON else None


def sink(regs: Views) -> str | None:
    """SDP feeds PDP on the fly when D_FEATURE_MODE_CFG.OUTPUT_DST=PDP."""
    return "PDP" if regs["SDP"].D_FEATURE_MODE_CFG.OUTPUT_DST == OUTPUT_DST_PDP else None


def rdma_needed(regs: Views) -> bool:
    """SDP waits for SDP_RDMA when it reads its input from memory or any stage uses a MEM operand
    (cmod ``is_rdma_enabled || is_bs_has_rdma || is_bn_has_rdma || is_ew_has_rdma``)."""
    sdp = regs["SDP"]
    if sdp.D_FEATURE_MODE_CFG.FLYING_MODE != FLYING_ON:
        return True
    x1, x2, y, _ = _configs(sdp)
    return any(s.uses_alu_mem or s.uses_mul_mem for s in (x1, x2, y))


def run(ctx: OpContext) -> np.ndarray | None:
    sdp = ctx.regs["SDP"]
    if sdp.D_FEATURE_MODE_CFG.BATCH_NUMBER:
        return conv_batch.sdp_batches(ctx, run)
    needs_rdma = rdma_needed(ctx.regs)
    rdma = ctx.regs["SDP_RDMA"] if needs_rdma else None
    hw = ctx.hw

    x1, x2, y, cvt = _configs(sdp)
    proc, out_dtype = _check_precision(sdp, rdma, reads_input=source(ctx.regs) is None, hw=hw)
    is_fp = proc == "fp16"
    # Every modelled precision pair keeps the element size, so input and output share one layout.
    bpe = 1 if proc == "int8" else 2
    nan_to_zero = is_fp and bool(sdp.D_FEATURE_MODE_CFG.NAN_TO_ZERO)
    _check_presence(ctx, x1, x2, y)
    _check_mode(sdp, y, cvt)

    width = sdp.D_DATA_CUBE_WIDTH.WIDTH + 1
    height = sdp.D_DATA_CUBE_HEIGHT.HEIGHT + 1
    channels = sdp.D_DATA_CUBE_CHANNEL.CHANNEL + 1
    atom = hw.atom_elements(proc)  # type: ignore[arg-type]
    c_pad = -(-channels // atom) * atom
    # A 1x1 cube of several surfaces is moved as one contiguous block (cmod SdpRdmaCore / WdmaSequenceDC
    # assert the surface stride is one atom), so any other stride is an illegal config.
    packed_only = width == 1 and height == 1 and c_pad > atom

    dmas: dict[str, DmaOperand] = {}
    if rdma is not None:
        _check_rdma_cube(sdp, rdma)
        for prefix, stage, cfg in (("B", "BS", x1), ("N", "BN", x2), ("E", "EW", y)):
            dma = _dma_operands({"SDP_RDMA": rdma}, hw)[prefix]
            _check_operand_dma(rdma, dma, cfg.uses_alu_mem, cfg.uses_mul_mem)
            used = cfg.uses_alu_mem or cfg.uses_mul_mem
            if used and dma.per_element and packed_only and dma.surf_stride != atom * dma.bytes_per_element:
                raise getattr(rdma, f"D_{stage}_SURFACE_STRIDE").fail(
                    f"{stage}_SURFACE_STRIDE", f"a 1x1 cube needs {atom * dma.bytes_per_element} (packed surfaces)"
                )
            if used and is_fp and prefix != "B" and dma.data_size != 2 and source(ctx.regs) is None:
                # cmod SdpRdma: NRDMA/ERDMA must deliver 2-byte components for a 16-bit input and datapath.
                raise getattr(rdma, dma.cfg_register).fail(f"{prefix}RDMA_DATA_SIZE", "fp16 needs TWO_BYTE operands")
            dmas[stage] = dma
        for stage, cfg in (("BS", x1), ("BN", x2)):
            _check_half_beat(hw, rdma, dmas.get(stage), cfg, is_fp, c_pad // atom)

    # ---- input ----
    if source(ctx.regs) == "CONV":
        x = _flying_input(ctx, sdp, (c_pad, height, width), is_fp)
    else:
        assert rdma is not None
        x = _read_input(ctx, rdma, CubeLayout(channels, height, width, 0, 0, atom, bpe), packed_only, signed=not is_fp)
    if rdma is not None and rdma.D_PERF_ENABLE.PERF_NAN_INF_COUNT_EN and rdma.D_FEATURE_MODE_CFG.IN_PRECISION == 2:
        # Counted on the fp16 input SDP_RDMA reads (every atom lane); nothing is counted on the fly.
        counted = is_fp and source(ctx.regs) is None
        ctx.report("SDP_RDMA", "D_STATUS_NAN_INPUT_NUM", _count16(x, nan=True) if counted else 0)
        ctx.report("SDP_RDMA", "D_STATUS_INF_INPUT_NUM", _count16(x, nan=False) if counted else 0)
    if is_fp:
        if source(ctx.regs) is None:
            x = fp.fp16_to_fp32(x).astype(np.int64)
        if sdp.D_FEATURE_MODE_CFG.NAN_TO_ZERO:
            x = np.where(is_nan32(x), 0, x)  # cmod sdp_hls_wrapper::sdp: fp32 input NaN -> +0

    def operands(stage: str, cfg: XConfig | YConfig) -> tuple[np.ndarray | int | None, np.ndarray | int | None]:
        alu = mul = None
        if cfg.uses_alu_mem or cfg.uses_mul_mem:
            dma = dmas[stage]
            space = space_for(ctx.hw, ctx.mem, dma.ram_type, f"SDP_RDMA.{dma.cfg_register}.{dma.prefix}RDMA_RAM_TYPE")
            alu, mul = read_operands(space, dma, channels, height, width, atom)
        return alu, mul

    # ---- X1, X2 ----
    for stage, cfg in (("BS", x1), ("BN", x2)):
        if cfg.bypass:
            continue
        alu_mem, mul_mem = operands(stage, cfg)
        alu_op = alu_mem if cfg.uses_alu_mem else cfg.alu_operand
        mul_op = mul_mem if cfg.uses_mul_mem else cfg.mul_operand
        x = x_stage_fp(x, cfg, alu_op, mul_op, nan_to_zero) if is_fp else x_stage(x, cfg, alu_op, mul_op)

    # ---- Y ----
    perf = sdp.D_PERF_ENABLE
    if not y.bypass:
        alu_mem, mul_mem = operands("EW", y)
        if is_fp:
            alu_op = y_operand_fp(alu_mem, y.alu_operand, y.uses_alu_mem, nan_to_zero)
            mul_op = y_operand_fp(mul_mem, y.mul_operand, y.uses_mul_mem, nan_to_zero)
            x = y_core_fp(x, y, alu_op, mul_op)
        else:
            alu_op = operand_cvt(alu_mem, y.alu_cvt) if y.uses_alu_mem else y.alu_operand
            mul_op = operand_cvt(mul_mem, y.mul_cvt) if y.uses_mul_mem else y.mul_operand
            x = y_core(x, y, alu_op, mul_op)
        if y.uses_lut:
            tables = ctx.lut.get("SDP", {})
            lookup = lut_lookup_fp if is_fp else lut_lookup
            x, stats = lookup(x, LutRegisters.from_sdp_view(sdp), tables.get("LE"), tables.get("LO"))
            if perf.PERF_LUT_EN:
                ctx.report("SDP", "D_PERF_LUT_UFLOW", stats.uflow)
                ctx.report("SDP", "D_PERF_LUT_OFLOW", stats.oflow)
                ctx.report("SDP", "D_PERF_LUT_HYBRID", stats.hybrid)
                ctx.report("SDP", "D_PERF_LUT_LE_HIT", stats.le_hit)
                ctx.report("SDP", "D_PERF_LUT_LO_HIT", stats.lo_hit)

    if y.eql_mode:
        # Quiet mode: the low 16 bits of each lane are compared with 0; nothing is written or sent.
        ctx.report("SDP", "D_STATUS", int(np.any((x & 0xFFFF) != 0)))
        if is_fp or out_dtype == "fp16":
            # The cmod's fp16-output counters see those low 16 bits as the output (sdp_hls_wrapper.cpp).
            low = x & 0xFFFF
            if perf.PERF_SAT_EN:
                sat_lanes = np.count_nonzero((low & 0x7FFF) == 0x7BFF) if out_dtype == "fp16" else 0
                ctx.report("SDP", "D_PERF_OUT_SATURATION", int(sat_lanes))
            if out_dtype == "fp16" and perf.PERF_NAN_INF_COUNT_EN:
                ctx.report("SDP", "D_STATUS_NAN_OUTPUT_NUM", _count16(low, nan=True))
        return None

    # ---- C ----
    if is_fp:
        out, saturated = output_fp(x, out_dtype)
    elif out_dtype == "fp16":
        out, saturated = output_cvt_to_fp16(x, cvt)
    else:
        out, saturated = output_cvt(x, cvt, 8 * bpe, count=bool(perf.PERF_SAT_EN))
    if perf.PERF_SAT_EN:
        ctx.report("SDP", "D_PERF_OUT_SATURATION", saturated)
    if out_dtype == "fp16" and perf.PERF_NAN_INF_COUNT_EN:
        ctx.report("SDP", "D_STATUS_NAN_OUTPUT_NUM", _count16(out, nan=True))
    out = np.ascontiguousarray(out, dtype=np.int64)

    if sink(ctx.regs) == "PDP":
        if out_dtype == "fp16":
            return out.astype(np.uint16).view(np.float16)  # fp16 bit patterns, NaN payloads intact
        return out
    _write_output(ctx, sdp, out, CubeLayout(channels, height, width, 0, 0, atom, bpe), packed_only)
    return None


def output_cvt_to_fp16(x: np.ndarray, cvt: OutCvt) -> tuple[np.ndarray, int]:
    """C stage of an integer path with OUT_PRECISION=FP16 (cmod ``sdp_c.cpp``): the 17-bit CVT result
    through ``Int17ToFp16``; D_PERF_OUT_SATURATION then counts +-65504 lanes, as for any fp16 output."""
    v = (np.asarray(x, dtype=np.int64) - cvt.offset) * cvt.scale
    half = fp.int17_to_fp16(sat(rha(v, cvt.shift), 17)).astype(np.int64)
    return half, int(np.count_nonzero((half & 0x7FFF) == 0x7BFF))


def _count16(bits: np.ndarray, nan: bool) -> int:
    """fp16 NaN (or Inf) lanes: exponent all ones with a non-zero (zero) mantissa."""
    b = np.asarray(bits, dtype=np.int64)
    top = (b & 0x7C00) == 0x7C00
    return int(np.count_nonzero(top & (((b & 0x3FF) != 0) if nan else ((b & 0x3FF) == 0))))


def _flying_input(ctx: OpContext, sdp: RegView, shape: tuple[int, int, int], is_fp: bool = False) -> np.ndarray:
    """The cube CACC hands over (all atom lanes): int32 values, or for fp16 the FP32 values as a
    ``np.float32`` array (its bit patterns are used; uint32 bit patterns are accepted too)."""
    if ctx.flying_input is None:
        raise sdp.D_FEATURE_MODE_CFG.fail("FLYING_MODE", "flying mode but no data from CACC")
    data = np.asarray(ctx.flying_input)
    if is_fp:
        if data.dtype == np.float32:
            x = data.view(np.uint32).astype(np.int64)
        elif data.dtype.kind in "ui":
            x = data.astype(np.int64) & 0xFFFFFFFF
        else:
            raise UnsupportedError("FP16", f"fp16 SDP needs FP32 data from CACC (np.float32), got {data.dtype}")
    elif data.dtype == np.int64 and data.size and -(1 << 31) <= int(data.min()) and int(data.max()) < (1 << 31):
        x = data  # CACC's sat32 output: already the int32 values (read only below)
    else:
        x = np.asarray(sign_extend(data.astype(np.int64), 32), dtype=np.int64)
    if x.shape != shape:
        raise sdp.D_DATA_CUBE_CHANNEL.fail("CHANNEL", f"CACC delivers a {x.shape} cube, SDP expects {shape}")
    return x


def _read_input(ctx: OpContext, rdma: RegView, cube: CubeLayout, packed_only: bool, signed: bool = True) -> np.ndarray:
    """The input cube SDP_RDMA reads (D_SRC_*): int8/int16 sign-extended, or fp16 bit patterns."""
    line = dma_bytes(ctx.hw, rdma.word("D_SRC_LINE_STRIDE"))
    surf = dma_bytes(ctx.hw, rdma.word("D_SRC_SURFACE_STRIDE"))
    atom_bytes = cube.atom * cube.bpe
    if packed_only and surf != atom_bytes:
        raise rdma.D_SRC_SURFACE_STRIDE.fail("SRC_SURFACE_STRIDE", f"a 1x1 cube needs {atom_bytes} (packed surfaces)")
    space = space_for(ctx.hw, ctx.mem, rdma.D_SRC_DMA_CFG.SRC_RAM_TYPE, "SDP_RDMA.D_SRC_DMA_CFG.SRC_RAM_TYPE")
    return read_cube(
        space, dma_address(ctx.hw, rdma, "D_SRC_BASE_ADDR"), replace(cube, line_stride=line, surf_stride=surf), signed
    )


def _write_output(ctx: OpContext, sdp: RegView, out: np.ndarray, cube: CubeLayout, packed_only: bool) -> None:
    """Write every atom lane of the int8/int16/fp16 result at D_DST_* (NOTES §8.3: the CRC covers padding
    lanes)."""
    line = dma_bytes(ctx.hw, sdp.word("D_DST_LINE_STRIDE"))
    surf = dma_bytes(ctx.hw, sdp.word("D_DST_SURFACE_STRIDE"))
    atom_bytes = cube.atom * cube.bpe
    if packed_only and surf != atom_bytes:
        raise sdp.D_DST_SURFACE_STRIDE.fail("DST_SURFACE_STRIDE", f"a 1x1 cube needs {atom_bytes} (packed surfaces)")
    layout = replace(cube, line_stride=line, surf_stride=surf)
    _check_dst_layout(sdp, layout)
    space = space_for(ctx.hw, ctx.mem, sdp.D_DST_DMA_CFG.DST_RAM_TYPE, "SDP.D_DST_DMA_CFG.DST_RAM_TYPE")
    write_cube(space, dma_address(ctx.hw, sdp, "D_DST_BASE_ADDR"), layout, out)


ENGINE = register(
    Engine(
        name="SDP",
        units=("SDP",),
        rdma="SDP_RDMA",
        done_bits=unit_done_bits("SDP"),
        run=run,
        source=source,
        sink=sink,
        rdma_needed=rdma_needed,
        lut_units=("SDP",),
    )
)
