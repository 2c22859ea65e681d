"""The fp16 direct-convolution reference (``regressions.lib.reference.conv_fp16``) on hand-checked cases.
Golden against it is the suite ``regressions/golden/test_conv_fp16_reference.py``.

fp16 patterns: 0x3C00 1.0, 0x3E00 1.5, 0x7000 2^13, 0x0800 2^-13, 0x0C01 2^-12 (1 + 2^-10), 0x7BFF 65504.
"""
from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from regressions.lib.reference import conv_fp16 as ref

pytestmark = pytest.mark.reference


def slice_of(pairs: dict[int, int]) -> list[int]:
    out = [0] * ref.LANES
    for lane, value in pairs.items():
        out[lane] = value
    return out


# ---- hand-checked -------------------------------------------------------------------------------------------
def test_booth_multiplier_exact_and_truncated() -> None:
    assert ref.booth_multiply(False, 0x2000, 0x2000, 0) == 1 << 26  # 1.0 * 1.0
    assert ref.booth_multiply(True, 0x2000, 0x2000, 0) == -(1 << 26)
    assert ref.booth_multiply(False, 0x2008, 0x3000, 16) == 1537  # 0x6018000 / 2^16 = 1537.5 -> 1537
    assert ref.booth_multiply(False, 0x2000, 0x2000, 16) == 1023  # 1024 exactly, but sum and carry truncate apart
    assert ref.booth_multiply(True, 0x2000, 0x2000, 16) == -1024
    assert ref.booth_multiply(False, 0x3FF8, 0x3FF8, 32) == 0  # aligned out entirely


def test_slice_exponent_word_and_masks() -> None:
    assert ref.cmac_fp16(slice_of({0: 0x3C00}), slice_of({0: 0x3C00})) == (24, 1 << 26)  # 2^26 * 2^(24-50)
    # -0 data beside the largest weight takes no part: the block exponent stays 6
    assert ref.cmac_fp16(slice_of({0: 0x3C00, 1: 0x7BFF}), slice_of({0: 0x3C00, 1: 0x8000})) == (24, 1 << 26)
    assert ref.cmac_fp16(slice_of({}), slice_of({0: 0x3C00})) == (0, 0)


def test_alignment_truncation_differs_from_exact_float_math() -> None:
    """2^13 * 2^-13 sets block exponent 7; 1.5 * 2^-12 (1 + 2^-10) sits in block 3 and is shifted right by 16,
    losing half a unit: the FP32 result is 1 + 1537 * 2^-22, one ulp below the exact (FP32-representable) sum."""
    e, m = ref.cmac_fp16(slice_of({0: 0x0800, 1: 0x0C01}), slice_of({0: 0x7000, 1: 0x3E00}))
    assert (e, m) == (28, (1 << 22) + 1537)
    bits = ref.fp48_to_fp32(ref.cacc_add((0, 0), (e, m)))
    assert bits == 0x3F800C02
    exact = Fraction(1) + Fraction(3, 2) * Fraction(1, 4096) * (1 + Fraction(1, 1024))
    assert exact == 1 + Fraction(3075, 1 << 23)  # exactly 0x3F800C03 in FP32
    assert Fraction(ref.fp32_value(bits)) == exact - Fraction(1, 1 << 23)


def test_nan_priority_and_infinity() -> None:
    nan_w = ref.cmac_fp16(slice_of({3: 0x3C00, 9: 0xFC05, 12: 0x7C01}), slice_of({2: 0x7E00, 3: 0x3C00}))
    assert nan_w == (63, -(1 << 38) + (1 << 37) + (5 << 27))  # lowest NaN weight lane, sign and fraction
    assert ref.cmac_fp16(slice_of({3: 0x3C00}), slice_of({2: 0x7E00})) == (63, 0x200 << 27)
    assert ref.fp48_to_fp32(ref.cacc_add((0, 0), nan_w)) == 0xFF800005
    inf = ref.cmac_fp16(slice_of({0: 0x4000}), slice_of({0: 0x7C00}))  # 2 * Inf = 2 * 65536
    assert ref.fp32_value(ref.fp48_to_fp32(ref.cacc_add((0, 0), inf))) == 131072.0


def test_cacc_rounding_and_special_words() -> None:
    assert ref.cacc_add((101, 1 << 38), (48, 2)) == (101, (1 << 38) + 1)  # +0.5: guard rounds a positive up
    assert ref.cacc_add((101, -3 << 37), (48, 2)) == (101, -3 << 37)  # negative: guard without sticky stays
    assert ref.cacc_add((101, 1 << 38), (48, -2)) == (100, (1 << 39) - 1)
    assert ref.cacc_add((90, 5 << 36), (20, 0)) == (90, 5 << 36)
    assert ref.cacc_add((255, (1 << 35) | 0x1FFF), (20, 7)) == (255, 1 << 35)


def test_fp48_to_fp32_ties_away_from_zero() -> None:
    half = (1 << 38) + (1 << 14)
    assert ref.fp48_to_fp32((101, half)) == 0x52800001  # 2^38 (1 + 2^-24): IEEE would keep 0x52800000
    assert ref.fp48_to_fp32((101, -half)) == 0xD2800001
    assert ref.fp48_to_fp32((101, half - 1)) == 0x52800000
    assert ref.fp48_to_fp32((101, -(1 << 39))) == 0xD3000000  # -2^39: its own path, exponent + 65
    assert ref.fp48_to_fp32((0, 0)) == 0


def test_whole_convolution_by_hand() -> None:
    x = np.full((70, 1, 2), 0x3E00)  # 1.5 everywhere, two 64-channel slices
    w = np.full((1, 70, 1, 2), 0xC080)  # -2.25
    out = ref.direct_conv_fp16(x, w, pad=(0, 1), pad_value=0x3C00, out_hw=(1, 3))
    values = [ref.fp32_value(int(b)) for b in out[0, 0]]
    assert values == [70 * -2.25 * (1.0 + 1.5), 70 * -2.25 * 3.0, 70 * -2.25 * (1.5 + 1.0)]


def test_conversions_around_the_convolution() -> None:
    assert [ref.int16_cvt_to_fp16(v, 0, 1, 0) for v in (3, 2049, 2051, -2051)] == [0x4200, 0x6800, 0x6802, 0xE802]
    assert ref.int16_cvt_to_fp16(32767, -32768, 2, 0) == 0x7C00  # sat17 65535 -> Inf (RNE overflows)
    assert ref.int16_cvt_to_fp16(5, 0, 1, 3) == 0x3C00  # 5 / 8 rounds half away to 1
    assert ref.fp32_to_fp16(0x3F800C02) == 0x3C00
    assert ref.fp32_to_fp16(0x47800000) == 0x7BFF  # 65536 saturates to 65504
    assert ref.fp32_to_fp16(0x7F800000) == 0x7BFF and ref.fp32_to_fp16(0xFF800005) == 0xFC05
    assert ref.fp32_to_fp16(0x33800000) == 0x0001  # 2^-24, the smallest denormal
    assert ref.fp32_to_fp16(0x33000000) == 0x0000  # 2^-25 is a tie with 0: nearest even
    assert ref.nan_to_zero(np.array([0x7E00, 0x7C00, 0xFC01])).tolist() == [0, 0x7C00, 0]
