"""Sanity of the int16/fp16 PDP and CDP reference math on hand-computed cases (no golden model involved).

fp16 cases use values every format on the way holds exactly, or spell out the cmod rule they pin down.
"""
from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from golden.lut import LutRegisters
from regressions.lib.reference import cdp as ref_cdp
from regressions.lib.reference import cdp_fp16, pdp_fp16
from regressions.lib.reference.arith import OutsideCmodDomain
from regressions.lib.reference.pdp import pdp_pad_value, pool

ONE, HALF = 0x7C00, 0x7800  # FP17 1.0 and 0.5


def f16(values) -> np.ndarray:
    return np.asarray(values, dtype=np.float16).view(np.uint16).astype(np.int64)


def as_f16(bits) -> list[float]:
    return (np.asarray(bits, dtype=np.int64) & 0xFFFF).astype(np.uint16).view(np.float16).astype(float).tolist()


def f32(value: float) -> int:
    return int(np.float32(value).view(np.uint32))


# ---- PDP int16 ------------------------------------------------------------------------------------------
def test_int16_pad_values_use_the_int16_sign_bits() -> None:
    assert pdp_pad_value(0x00FF, 1, "int16") == 255 and pdp_pad_value(0x00FF, 1) == -1
    assert pdp_pad_value(0x8000, 1, "int16") == -32768
    assert pdp_pad_value(0x1FFFE, 2, "int16") == -2  # sign bit 16
    assert pdp_pad_value(0x10000, 1, "int16") == 0x10000  # sign bit clear: the raw field survives in int32
    assert pdp_pad_value(0x7FFF0, 7, "int16") == -16


def test_int16_average_rounds_and_keeps_the_low_16_bits() -> None:
    x = np.array([[[32767, 32767], [32767, 32765]]])
    got = pool(x, method="avg", kernel=(2, 2), stride=(1, 1), recip_w=0x8000, recip_h=0x8000, out_hw=(1, 1),
               precision="int16")
    assert got.tolist() == [[[32767]]]  # 131066 / 4 = 32766.5 -> away from zero
    got = pool(np.array([[[30000]]]), method="avg", kernel=(1, 1), stride=(1, 1), recip_w=0x1FFFF,
               out_hw=(1, 1), precision="int16")
    assert got.tolist() == [[[60000 - 65536]]]


def test_int16_max_with_padding_ignored() -> None:
    x = np.array([[[-32768, -5], [7, -32768]]])
    got = pool(x, method="max", kernel=(2, 2), stride=(1, 1), pad=(1, 1, 0, 0), out_hw=(2, 2), precision="int16")
    assert got.tolist() == [[[-32768, -5], [7, 7]]]
    with pytest.raises(ValueError):
        pool(np.array([[[40000]]]), method="max", kernel=(1, 1), stride=(1, 1), out_hw=(1, 1), precision="int16")


# ---- PDP fp16 -------------------------------------------------------------------------------------------
def test_fp16_average_and_max_of_exact_values() -> None:
    x = f16([[[1.0, 2.0, 3.5], [3.0, 4.0, -8.0]]])
    got = pdp_fp16.pool_fp16(x, method="avg", kernel=(2, 2), stride=(1, 1), recip_w=HALF, recip_h=HALF, out_hw=(1, 2))
    assert as_f16(got) == [[[2.5, 0.375]]]
    got = pdp_fp16.pool_fp16(x, method="max", kernel=(2, 3), stride=(1, 1), out_hw=(1, 1))
    assert as_f16(got) == [[[4.0]]]


def test_fp16_pads_and_the_kernel_width_scaling() -> None:
    x = f16([[[3.0, 5.0]]])
    pads = (ONE,) + (0,) * 6
    got = pdp_fp16.pool_fp16(x, method="avg", kernel=(1, 2), stride=(1, 1), pad=(0, 1, 0, 0), pad_values=pads,
                             out_hw=(1, 2))
    assert as_f16(got) == [[[4.0, 8.0]]]  # [pad 1.0, 3] and [3, 5]
    got = pdp_fp16.pool_fp16(x, method="avg", kernel=(2, 2), stride=(1, 1), pad=(1, 0, 0, 0), pad_values=pads,
                             out_hw=(1, 1))
    assert as_f16(got) == [[[10.0]]]  # 3 + 5 + a padded row of 1.0 * kw
    assert pdp_fp16.KERNEL_WIDTH_FP17[3] == 0x8200 and pdp_fp16.KERNEL_WIDTH_FP17[8] == 0x8800


def test_fp16_signed_zero_and_saturation_rules() -> None:
    x = f16([[[-1.0, 1.0, -1.0]]])
    got = pdp_fp16.pool_fp16(x, method="avg", kernel=(1, 2), stride=(1, 1), recip_w=HALF, out_hw=(1, 2))
    assert got.tolist() == [[[0x8000, 0x0000]]]  # the first operand's sign on an exact cancellation
    got = pdp_fp16.pool_fp16(f16([[[65504.0, 65504.0]]]), method="avg", kernel=(1, 2), stride=(1, 1), out_hw=(1, 1))
    assert got.tolist() == [[[0x7BFF]]]  # never Inf


def test_fp16_nan_handling() -> None:
    x = np.array([[[int(f16(1.0)), 0x7E05, int(f16(3.0))]]])
    assert pdp_fp16.pool_fp16(x, method="max", kernel=(1, 2), stride=(1, 1), out_hw=(1, 2)).tolist() == [[[0x7E05] * 2]]
    got = pdp_fp16.pool_fp16(x, method="avg", kernel=(1, 2), stride=(1, 1), recip_w=HALF, out_hw=(1, 2),
                             nan_to_zero=True)
    assert as_f16(got) == [[[0.5, 1.5]]]


# ---- CDP int16 ------------------------------------------------------------------------------------------
def test_int16_lrn_widths() -> None:
    lut = LutRegisters(le_function="linear", le_start=1 << 36, le_end=(1 << 36) + 64,
                         lo_start=-1, lo_end=255, lo_table=tuple(range(-1, 256)), uflow_priority=1)
    x = np.array([[[0x1234 + 10]], [[0x1234 + 50]]])
    got = ref_cdp.lrn(x, datin_offset=0x1234, datin_scale=3, sqsum_bypass=True, mul_bypass=True, lut=lut,
                      precision="int16")
    assert got.tolist() == [[[30]], [[150]]]
    assert ref_cdp.cdp_input_cvt(-32768, 32767, 4, 0, 17) == -65536  # sat17
    assert ref_cdp.cdp_output_cvt(30000, -0x10000, 1, 0, 16) == 32767  # sat16, 32-bit offset


def test_int16_index_select_range() -> None:
    lut = LutRegisters(le_function="linear", lo_index_select=-64)
    with pytest.raises(OutsideCmodDomain):
        ref_cdp.cdp_lut_lookup(5, lut, "int16")
    lut = LutRegisters(le_function="exp", le_index_select=-64, lo_index_select=31, lo_start=0,
                         lo_table=(0,) * 257, uflow_priority=1)
    assert ref_cdp.cdp_lut_lookup(0, lut, "int16") == 0  # LE's select is unused in exponent mode


# ---- CDP fp16 -------------------------------------------------------------------------------------------
def test_c_float_rounds_to_single_precision() -> None:
    assert cdp_fp16.c_float(Fraction(1, 3)) == Fraction(int(np.float32(1 / 3).view(np.uint32)) & 0x7FFFFF | 1 << 23,
                                                         1 << 25)
    assert cdp_fp16.c_float(Fraction(2) ** 128) is None
    assert cdp_fp16.c_float(Fraction(2) ** -150) == 0  # a tie below the smallest denormal rounds to even (0)
    assert cdp_fp16.c_float(Fraction(3, 2) * Fraction(2) ** -149) == Fraction(2) ** -148


def test_fp16_linear_and_exponent_lookups() -> None:
    lo = tuple(int(v) for v in f16(np.arange(257)))
    lut = LutRegisters(le_function="exp", le_start=f32(2.0 ** 30), le_end=f32(2.0 ** 31), lo_table=lo,
                              lo_start=0, lo_end=f32(256.0), uflow_priority=1)
    assert as_f16(cdp_fp16.narrow(cdp_fp16.cdp_fp16_lut(f32(6.5), lut), cdp_fp16.F17, cdp_fp16.F16, True)) == 6.5
    le = tuple(int(v) for v in f16(np.arange(65)))
    state, value = cdp_fp16.lut_lookup(f32(6.0), le, 0, f32(2.0 ** 62), 0, 0, True, True, -2, 0)
    assert state == "hit" and as_f16(cdp_fp16.narrow(value, cdp_fp16.F17, cdp_fp16.F16, True)) == 4.5
    state, value = cdp_fp16.lut_lookup(f32(0.1), le, 0, 0, 0, 0, True, True, 5, 0)  # 2^-4 < 2^5: underflow
    assert state == "uflow"


def test_fp16_lrn_square_sums_and_mul() -> None:
    lo = tuple(int(v) for v in f16(np.arange(257)))
    lut = LutRegisters(le_function="exp", le_start=f32(2.0 ** 30), le_end=f32(2.0 ** 31), lo_table=lo,
                              lo_start=0, lo_end=f32(256.0), uflow_priority=1)
    x = np.zeros((4, 1, 1), dtype=np.int64)
    x[:3, 0, 0] = f16([1.0, 2.0, 3.0])
    got = cdp_fp16.lrn_fp16(x, lut=lut, mul_bypass=True, channel_count=3)
    assert as_f16(got[:, 0, 0]) == [5.0, 14.0, 13.0, 9.0]
    got = cdp_fp16.lrn_fp16(x, lut=lut, sqsum_bypass=True, channel_count=3)
    assert as_f16(got[:, 0, 0]) == [1.0, 4.0, 9.0, 0.0]  # x * LUT(x)
    x[1, 0, 0] = 0xFE07
    got = cdp_fp16.lrn_fp16(x, lut=lut, sqsum_bypass=True, mul_bypass=True, channel_count=3)
    assert got[1, 0, 0] == 0xFE07  # MUL_BYPASS passes a NaN x
