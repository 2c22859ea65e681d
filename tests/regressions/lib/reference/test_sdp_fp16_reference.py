"""The fp16 SDP reference (exact fractions) on its own: hand-worked rounding, conversion, arithmetic, LUT
and pipeline cases, and its rounding against IEEE float16. Golden against it is the suite
``regressions/golden/test_sdp_fp16_reference.py``.
"""
from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from golden.lut import LutRegisters
from regressions.lib.reference import sdp_fp16 as ref

pytestmark = pytest.mark.reference


def f16(v: float) -> int:
    return int(np.float16(v).view(np.uint16))


def f32(v: float) -> int:
    return int(np.float32(v).view(np.uint32))


# ---- the reference by hand ---------------------------------------------------------------------------------
def test_rounding_rule_by_hand() -> None:
    half = Fraction(1, 2)
    assert ref.round_to_format(0, 1 + Fraction(1, 2048), ref.F16, True) == 0x3C00  # tie -> even
    assert ref.round_to_format(0, 1 + Fraction(3, 2048), ref.F16, True) == 0x3C02  # tie -> even (up)
    assert ref.round_to_format(1, Fraction(65520), ref.F16, True) == 0xFBFF  # rounds to 2^16: saturates
    assert ref.round_to_format(0, Fraction(1, 2**25), ref.F16, True) == 0x0000  # half the smallest denormal
    assert ref.round_to_format(0, Fraction(3, 2**26), ref.F16, True) == 0x0001
    assert ref.round_to_format(0, Fraction(1, 2**31), ref.F17, False) == 0  # FP17 denormal: flushed
    assert ref.round_to_format(0, Fraction(2**11 - 1, 2**41), ref.F17, False) == 0x0400  # rounds up to 2^-30
    assert ref.round_to_format(0, half, ref.F32, True) == 0x3F000000


def test_conversion_rules_by_hand() -> None:
    assert ref.fp16_to_fp32(0x7C00) == 0x7F7FFFFF  # Inf -> largest finite
    assert ref.fp16_to_fp32(0x7E00) == 0x7F800200  # NaN payload unshifted
    assert ref.fp16_to_fp32(0x0001) == f32(2.0**-24)
    assert ref.fp32_to_fp16(0x7FC00000) == 0x7C00  # NaN with zero low bits -> the Inf pattern
    assert ref.fp17_to_fp32(0x00200) == f32(1.5 * 2.0**-31)  # FP17 denormal read with an implied 1
    assert ref.fp16_to_int16(f16(-2.5)) == -3 and ref.fp16_to_int16(0x7E00) == -32768
    assert ref.int_to_fp16(65535) == 0x7BFF and ref.int_to_fp16(-3) == f16(-3.0)
    assert ref.fraction_to_fp17(2**34) == 30 << 10  # 0.5


def test_arithmetic_rules_by_hand() -> None:
    F32 = ref.F32
    assert ref.fp_add(f32(-1.0), f32(1.0), F32) == 0x80000000  # exact zero: sign of a on equal magnitudes
    assert ref.fp_add(f32(1.0), f32(-1.0), F32) == 0x00000000
    assert ref.fp_add(f32(1.0), f32(2.0**-30), F32) == f32(1.0)
    assert ref.fp_add(0x7F7FFFFF, 0x7F7FFFFF, F32) == 0x7F7FFFFF  # saturates
    assert ref.fp_mul(0x7F800000, f32(0.5), F32) == f32(2.0**127)  # the Inf field is an ordinary exponent
    assert ref.fp_mul(f32(2.0**-126), f32(0.5), F32) == 0  # exponent field 0: flushed
    assert ref.fp_mul(f32(-1.0), 0, F32) == 0x80000000
    assert ref.fp_mul(0x7FC00001, 0x7FC00002, F32) == 0x7FC00001  # NaN a wins
    assert ref.fp_max(0x80000000, 0x00000000, F32) == 0 and ref.fp_min(0x80000000, 0, F32) == 0x80000000
    assert ref.fp_alu(ref.ALU_EQL, f32(1.0), f32(1.0)) == 0 and ref.fp_alu(ref.ALU_EQL, 0, 0x80000000) == 1


def test_lut_by_hand() -> None:
    lo = tuple(f16(float(i)) for i in range(257))
    lut = LutRegisters(lo_table=lo, le_start=0x7F7FFFFF, le_function="linear", uflow_priority=1, oflow_priority=1,
                      hybrid_priority=1, lo_end=f32(256.0), lo_slope_uflow_scale=f16(0.5), lo_slope_oflow_scale=f16(2.0))
    assert ref.lut_select(f32(3.25), lut) == (ref.TABLE_LO, "hit", 3, 2**33)
    assert ref.lut_lookup(f32(3.25), lut) == f32(3.25)
    assert ref.lut_lookup(f32(-2.0), lut) == f32(-1.0)  # LO[0] + (x - 0)·0.5
    assert ref.lut_lookup(f32(300.0), lut) == f32(344.0)  # LO[256] + (x - 256)·2
    exp = LutRegisters(le_function="exp", le_table=tuple(f16(float(i)) for i in range(65)), le_start=0,
                      le_index_offset=-2, lo_start=0x7F7FFFFF, le_slope_uflow_scale=f16(1.0))
    assert ref.lut_select(f32(1.5), exp) == (ref.TABLE_LE, "hit", 2, 2**34)
    assert ref.lut_lookup(f32(0.125), exp) == f32(-0.125)  # LE[0] + (x - (0 + 2^-2))·1


def test_pipeline_by_hand() -> None:
    x = np.array([f16(1.5), f16(-2.0), 0x7E00]).reshape(3, 1, 1)
    p = ref.Fp16Params(x1=ref.Fp16XParams(bypass=False, alu_bypass=False, alu_operand=f16(1.0), mul_bypass=False,
                                          mul_operand=f16(2.0), relu_bypass=False), nan_to_zero=True)
    assert ref.sdp_fp16(x, p).reshape(-1).tolist() == [f16(5.0), 0, f16(2.0)]  # NaN -> 0, then (0 + 1)·2


@given(v=st.floats(min_value=-70000.0, max_value=70000.0, allow_nan=False, width=32))
@settings(max_examples=300, deadline=None, derandomize=True)
def test_reference_rounding_equals_ieee_float16_in_range(v: float) -> None:
    bits = f32(v)
    with np.errstate(over="ignore"):
        want = int(np.float32(v).astype(np.float16).view(np.uint16))
    if (want & 0x7FFF) == 0x7C00:
        want = (want & 0x8000) | 0x7BFF
    assert ref.fp32_to_fp16(bits) == want
