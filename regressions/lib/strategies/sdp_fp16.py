"""fp16 SDP layers from memory (PROC_PRECISION=FP16, nv_full): X1/X2, optionally Y with the fp LUT.

Values are fp16 bit patterns: each cube or operand comes from a drawn seed, a drawn exponent window
(typically around 1.0, so sums and products neither vanish nor saturate) and a drawn share of special
patterns (signed zeros, denormals, +-65504, Inf and NaN with several payloads), so the cmod's corner
rules (NaN propagation and NAN_TO_ZERO, Inf read as the largest finite, denormal flush) are reached.
Y REG operands and LUT START/END are fp32 words, mostly exact widenings of such values and sometimes
arbitrary 32-bit patterns. EQL in Y writes no output, so Y's ALU draws MAX/MIN/SUM; X's ALU draws all
four algorithms (algo 3 is the fp EQL there, whose 0/1 result is still written).
"""
from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

from golden.config import HwConfig
from golden.lut import LutRegisters
from regressions.lib.programs.fp16 import SdpFp16Layer, atom_of
from regressions.lib.reference import sdp_fp16 as ref
from regressions.lib.strategies import SEED_BITS, bypassed, ints

#: Padded elements the plain reference visits at most (X ~0.1 ms per element, LUT ~0.5 ms).
WORK_X = 600
WORK_Y = 250
MAX_SIDE = 4
#: fp16 patterns the drawn values mix in: zeros, denormals, 1.0, the largest finite, Inf, NaNs.
SPECIALS16 = (0x0000, 0x8000, 0x0001, 0x83FF, 0x0400, 0x3C00, 0xBC00, 0x7BFF, 0xFBFF, 0x7C00, 0xFC00,
              0x7E00, 0x7C01, 0xFE00, 0x7FFF)


def fp16_values(draw, shape: tuple[int, ...], typical: tuple[int, int] = (11, 19)) -> np.ndarray:
    """fp16 bits of ``shape``: random sign and mantissa, a biased exponent from a drawn window (usually
    within ``typical``), and a drawn share (usually none) of ``SPECIALS16``. Shrinks to zeros."""
    lo = draw(ints((0, 31), typical))
    hi = draw(ints((lo, 31), (lo, min(31, max(lo, typical[1])))))
    specials = draw(st.sampled_from([0.0, 0.0, 0.1, 0.5]))
    seed = draw(st.integers(0, (1 << SEED_BITS) - 1))
    rng = np.random.default_rng(seed)
    sign = rng.integers(0, 2, shape, dtype=np.int64)
    expo = rng.integers(lo, hi + 1, shape, dtype=np.int64)
    mant = rng.integers(0, 1 << 10, shape, dtype=np.int64)
    bits = (sign << 15) | (expo << 10) | mant
    pick = rng.random(shape) < specials
    return np.where(pick, np.asarray(SPECIALS16, dtype=np.int64)[rng.integers(0, len(SPECIALS16), shape)], bits)


def fp16_scalar(draw, typical: tuple[int, int] = (11, 19)) -> int:
    return int(fp16_values(draw, (1,), typical)[0])


def fp32_word(draw, typical: tuple[int, int] = (11, 19)) -> int:
    """An fp32 register word: usually the exact widening of an fp16 value, else any 32-bit pattern."""
    if draw(st.integers(0, 4)) == 4:
        return draw(st.integers(0, (1 << 32) - 1))
    return ref.fp16_to_fp32(fp16_scalar(draw, typical))


def _cube(draw, hw: HwConfig, work: int) -> np.ndarray:
    h = draw(st.integers(1, MAX_SIDE))
    w = draw(st.integers(1, MAX_SIDE))
    atom = atom_of(hw)
    top = max(1, min(2, work // (atom * h * w))) * atom  # a partial last surface is the common case
    c = draw(st.one_of(st.integers(1, top), st.just(top)))
    return fp16_values(draw, (c, h, w))


def _operands(draw, shape, alu: bool, mul: bool, reg32: bool, x: np.ndarray | None = None):
    """(alu, mul) operands: a REG scalar (fp16 bits, or an fp32 word for Y) or fp16 MEM data of one mode.

    A per-element ALU operand may copy or negate the input ``x`` on a drawn share of elements, so exact
    cancellations (the cmod's signed zero of x + (-x)) and equal compares happen."""
    mode = draw(st.sampled_from(["kernel", "element"]))
    mem_shape = shape[:1] if mode == "kernel" else shape
    out = []
    for i, used in enumerate((alu, mul)):
        if used and draw(st.booleans()):
            op = fp16_values(draw, mem_shape, (12, 17))
            if i == 0 and x is not None and mode == "element":
                rng = np.random.default_rng(draw(st.integers(0, (1 << SEED_BITS) - 1)))
                share = rng.random(shape)
                op = np.where(share < 0.3, x ^ 0x8000, np.where(share < 0.45, x, op))
            out.append(op)
        else:
            out.append(fp32_word(draw, (12, 17)) if reg32 else fp16_scalar(draw, (12, 17)))
    return tuple(out)


def _x_stage(draw, hw: HwConfig, shape, x: np.ndarray) -> ref.Fp16XParams:
    if bypassed(draw):
        return ref.Fp16XParams()
    alu_bypass, mul_bypass = bypassed(draw), bypassed(draw)
    alu, mul = _operands(draw, shape, not alu_bypass, not mul_bypass, reg32=False, x=x)
    return ref.Fp16XParams(
        bypass=False, alu_bypass=alu_bypass, alu_algo=draw(st.sampled_from([2, 0, 1, 3, 2])), alu_operand=alu,
        mul_bypass=mul_bypass, mul_prelu=draw(st.booleans()), mul_operand=mul, relu_bypass=bypassed(draw),
    )


def _lut(draw) -> LutRegisters:
    """fp16 tables and fp32 START/END near the data (|x| ~ 2^-4 .. 2^4), index selects and the LE offset
    around what spreads such inputs over the tables."""
    seed = draw(st.integers(0, (1 << SEED_BITS) - 1))
    rng = np.random.default_rng(seed)
    expo = rng.integers(9, 20, ref.LE_DEPTH + ref.LO_DEPTH)
    tables = (rng.integers(0, 2, expo.shape) << 15) | (expo << 10) | rng.integers(0, 1024, expo.shape)
    if draw(st.booleans()):
        tables = np.where(rng.random(expo.shape) < 0.05, 0x7E00, tables)
    return LutRegisters(
        le_table=tuple(int(v) for v in tables[: ref.LE_DEPTH]),
        lo_table=tuple(int(v) for v in tables[ref.LE_DEPTH:]),
        le_function="exp" if draw(st.booleans()) else "linear",
        le_start=fp32_word(draw, (10, 16)), le_end=fp32_word(draw, (14, 19)),
        lo_start=fp32_word(draw, (10, 16)), lo_end=fp32_word(draw, (14, 19)),
        le_index_offset=draw(ints((-128, 127), (-8, 2))),
        le_index_select=draw(ints((-128, 127), (-6, 0))),
        lo_index_select=draw(ints((-128, 127), (-8, -2))),
        uflow_priority=draw(st.integers(0, 1)), oflow_priority=draw(st.integers(0, 1)),
        hybrid_priority=draw(st.integers(0, 1)),
        le_slope_uflow_scale=fp16_scalar(draw, (12, 16)), le_slope_oflow_scale=fp16_scalar(draw, (12, 16)),
        lo_slope_uflow_scale=fp16_scalar(draw, (12, 16)), lo_slope_oflow_scale=fp16_scalar(draw, (12, 16)),
    )


@st.composite
def sdp_fp16_layers(draw, hw: HwConfig, with_y: bool = False) -> SdpFp16Layer:
    """X1 and X2 with REG/MEM fp16 operands, NAN_TO_ZERO on or off, fp16 or int16 output; with ``with_y``
    also Y (MUL, ALU MAX/MIN/SUM, the LUT) and a smaller cube."""
    if not hw.supports("fp16"):
        raise ValueError(f"{hw.name} has no fp16 datapath")
    x = _cube(draw, hw, WORK_Y if with_y else WORK_X)
    x1 = _x_stage(draw, hw, x.shape, x)
    x2 = _x_stage(draw, hw, x.shape, x)
    y = ref.Fp16YParams()
    lut = LutRegisters()
    if with_y:
        alu_bypass, mul_bypass = bypassed(draw), bypassed(draw)
        alu, mul = _operands(draw, x.shape, not alu_bypass, not mul_bypass, reg32=True)
        y = ref.Fp16YParams(bypass=False, alu_bypass=alu_bypass, alu_algo=draw(st.integers(0, 2)), alu_operand=alu,
                            mul_bypass=mul_bypass, mul_prelu=draw(st.booleans()), mul_operand=mul,
                            lut_bypass=draw(st.integers(0, 3)) == 0)
        if not y.lut_bypass:
            lut = _lut(draw)
    params = ref.Fp16Params(x1=x1, x2=x2, y=y, lut=lut, nan_to_zero=draw(st.booleans()),
                            out=draw(st.sampled_from(["fp16", "fp16", "int16"])))
    return SdpFp16Layer(x, params)


__all__ = ["fp16_values", "fp32_word", "sdp_fp16_layers"]
