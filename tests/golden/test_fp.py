"""golden.fp: the cmod's float library (nvdla_float.h) on bit patterns.

Exhaustive where cheap (all 65536 fp16 patterns, all 2^17 int17 values, all uint16 fractions), numpy's
IEEE arithmetic where the cmod provably agrees (finite conversions, add/mul of normal operands with
normal non-zero results), and hand-picked patterns for every rule where it does not.
"""
from __future__ import annotations

import numpy as np
import pytest

from golden import fp

ALL16 = np.arange(1 << 16, dtype=np.int64)
FINITE16 = ((ALL16 >> 10) & 0x1F) != 0x1F
NAN16 = (((ALL16 >> 10) & 0x1F) == 0x1F) & ((ALL16 & 0x3FF) != 0)


def ieee16_to_32(bits: np.ndarray) -> np.ndarray:
    return bits.astype(np.uint16).view(np.float16).astype(np.float32).view(np.uint32).astype(np.int64)


# ---- conversions ---------------------------------------------------------------------------------------
def test_fp16_to_fp32_is_exact_for_every_finite_pattern() -> None:
    got = fp.fp16_to_fp32(ALL16).astype(np.int64)
    np.testing.assert_array_equal(got[FINITE16], ieee16_to_32(ALL16[FINITE16]))  # denormals normalized
    assert got.dtype == np.int64 and fp.fp16_to_fp32(ALL16).dtype == np.uint32


def test_fp16_inf_and_nan_widen_the_cmod_way() -> None:
    # SetToInf is the largest finite value; a NaN keeps its mantissa bits unshifted (FpMantWidthInc).
    assert int(fp.fp16_to_fp32(0x7C00)) == 0x7F7FFFFF and int(fp.fp16_to_fp32(0xFC00)) == 0xFF7FFFFF
    assert int(fp.fp16_to_fp32(0x7E00)) == 0x7F800200 and int(fp.fp16_to_fp32(0xFC01)) == 0xFF800001
    assert int(fp.fp16_to_fp17(0x7C00)) == 0xFBFF and int(fp.fp16_to_fp17(0x7E00)) == 0xFE00
    nan32 = fp.fp16_to_fp32(ALL16[NAN16]).astype(np.int64)
    np.testing.assert_array_equal(nan32 & 0x7FFFFF, ALL16[NAN16] & 0x3FF)
    np.testing.assert_array_equal(nan32 >> 31, ALL16[NAN16] >> 15)


def test_every_finite_fp16_round_trips_through_fp32_and_fp17() -> None:
    f32 = fp.fp16_to_fp32(ALL16)
    np.testing.assert_array_equal(fp.fp32_to_fp16(f32)[FINITE16], ALL16[FINITE16])
    f17 = fp.fp16_to_fp17(ALL16)
    np.testing.assert_array_equal(fp.fp17_to_fp16(f17)[FINITE16], ALL16[FINITE16])
    # FP17 holds every fp16 value as a normal number, so FP17 -> fp32 agrees with fp16 -> fp32,
    # and fp32 -> FP17 of those values is exact too.
    np.testing.assert_array_equal(fp.fp17_to_fp32(f17)[FINITE16], f32[FINITE16])
    np.testing.assert_array_equal(fp.fp32_to_fp17(f32)[FINITE16], f17[FINITE16])
    # NaNs survive a round trip bit for bit.
    np.testing.assert_array_equal(fp.fp32_to_fp16(f32)[NAN16], ALL16[NAN16])


def test_fp32_to_fp16_is_ieee_rne_except_saturation() -> None:
    rng = np.random.default_rng(0)
    bits = np.concatenate([
        rng.integers(0, 1 << 32, 100_000),
        rng.integers(0x33000000, 0x38800000, 50_000) | (rng.integers(0, 2, 50_000) << 31),  # fp16 denormal range
        rng.integers(0x477F0000, 0x47800000, 20_000),  # around 65504 .. 65536
    ]).astype(np.uint32)
    v = bits.view(np.float32)
    finite = np.isfinite(v)
    with np.errstate(over="ignore"):
        ieee = v.astype(np.float16).view(np.uint16).astype(np.int64)
    ieee = np.where(((ieee & 0x7FFF) == 0x7C00) & finite, (ieee & 0x8000) | 0x7BFF, ieee)  # overflow saturates
    got = fp.fp32_to_fp16(bits).astype(np.int64)
    np.testing.assert_array_equal(got[finite], ieee[finite])


def test_fp32_to_fp16_rounding_boundaries() -> None:
    cases = {
        0x477FE000: 0x7BFF,  # 65504
        0x477FEFFF: 0x7BFF,  # just below the rounding point 65520
        0x477FF000: 0x7BFF,  # 65520 would round to 2^16: saturates, never Inf
        0x7F800000: 0x7BFF,  # Inf -> largest finite
        0xFF800000: 0xFBFF,
        0x33000000: 0x0000,  # 2^-25: tie between 0 and the smallest denormal, to even (0)
        0x33000001: 0x0001,
        0xB3000000: 0x8000,  # signed zero kept
        0x387FC000: 0x03FF,  # largest denormal
        0x387FE000: 0x0400,  # halfway to the smallest normal: ties to even (0x400)
        0x387FDFFF: 0x03FF,
        0x7FC00000: 0x7C00,  # NaN whose low 10 mantissa bits are 0 becomes the Inf pattern
        0x7FC00155: 0x7D55,
    }
    for b32, b16 in cases.items():
        assert int(fp.fp32_to_fp16(b32)) == b16, hex(b32)


def test_fp32_to_fp17_flushes_denormals_and_fp17_denormals_read_with_an_implied_one() -> None:
    # FP17 smallest normal is 2^-30 (0x0400). Below it: zero, unless RNE reaches 2^-30.
    assert int(fp.fp32_to_fp17(0x30800000)) == 0x0400  # 2^-30
    assert int(fp.fp32_to_fp17(0x30000000)) == 0x00000  # 2^-31 would be a denormal: flushed
    assert int(fp.fp32_to_fp17(0xB0000000)) == 0x10000  # -2^-31 -> -0
    assert int(fp.fp32_to_fp17(0x307FFFFF)) == 0x0400  # rounds up to 2^-30
    # Fp17ToFp32 (DENORM_NO): exponent field 0 with a mantissa reads as 1.m x 2^-31.
    assert int(fp.fp17_to_fp32(0x00200)) == 0x30400000  # 1.5 x 2^-31
    assert int(fp.fp17_to_fp32(0x0FC00)) == 0x7F7FFFFF  # FP17 Inf -> largest fp32
    assert int(fp.fp17_to_fp16(0x0FC00)) == 0x7BFF and int(fp.fp17_to_fp16(0x1F7FF)) == 0xFBFF


def test_fp17_to_fp16_rounds_into_denormals() -> None:
    f17 = np.arange(0, 1 << 16, 3, dtype=np.int64)  # positive half of FP17
    v = fp.fp17_value(f17)
    small = (v < 2.0**-14) & ((f17 >> 10) != 0)
    got = fp.fp17_to_fp16(f17[small]).astype(np.int64)
    want = v[small].astype(np.float16).view(np.uint16).astype(np.int64)  # IEEE RNE on exact values
    np.testing.assert_array_equal(got, want)


def test_int17_to_fp16_exhaustive() -> None:
    ints = np.arange(-(1 << 16), 1 << 16, dtype=np.int64)
    got = fp.int17_to_fp16(ints).astype(np.int64)
    with np.errstate(over="ignore"):
        want = ints.astype(np.float64).astype(np.float16).view(np.uint16).astype(np.int64)
    want = np.where((want & 0x7FFF) == 0x7C00, (want & 0x8000) | 0x7BFF, want)
    np.testing.assert_array_equal(got, want)
    assert int(fp.int17_to_fp16(0)) == 0 and int(fp.int16_to_fp16(-32768)) == 0xF800


def test_fp16_to_int16_rounds_half_away_and_saturates() -> None:
    got = fp.fp16_to_int16(ALL16)
    v = ALL16.astype(np.uint16).view(np.float16).astype(np.float64)
    with np.errstate(invalid="ignore"):
        want = np.sign(v) * np.floor(np.abs(v) + 0.5)
    want = np.clip(np.nan_to_num(want, nan=-32768, posinf=32767, neginf=-32768), -32768, 32767).astype(np.int64)
    np.testing.assert_array_equal(got, want)


def test_uint16_fraction_to_fp17_is_rne_of_the_exact_value() -> None:
    u = np.arange(1 << 16, dtype=np.int64)
    exact = (u.astype(np.float64) / 65536).astype(np.float32).view(np.uint32)  # exact in fp32
    np.testing.assert_array_equal(fp.uint16_to_fp17(u), fp.fp32_to_fp17(exact))
    assert int(fp.uint16_to_fp17(0x8000)) == 30 << 10  # 0.5


def test_35_bit_fractions_to_fp17() -> None:
    rng = np.random.default_rng(3)
    shift = rng.integers(0, 12, 20_000)
    frac = rng.integers(1, 1 << 24, 20_000) << shift  # at most 24 significant bits: exact in fp32
    exact = (frac.astype(np.float64) / 2.0**35).astype(np.float32).view(np.uint32)
    np.testing.assert_array_equal(fp.fraction_to_float(frac, 35, fp.FP17), fp.fp32_to_fp17(exact))
    assert int(fp.fraction_to_float(31, 35, fp.FP17)) == 0  # below 2^-30: zero
    assert int(fp.fraction_to_float(32, 35, fp.FP17)) == 0x0400


# ---- arithmetic ------------------------------------------------------------------------------------------
def _normal32(rng, n: int, spread: int = 40) -> np.ndarray:
    return (rng.standard_normal(n) * np.exp2(rng.integers(-spread, spread, n))).astype(np.float32)


def test_fp32_add_and_mul_equal_ieee_on_normal_values() -> None:
    """Where operands and results are normal and non-zero, the cmod's single rounding is IEEE RNE."""
    rng = np.random.default_rng(1)
    a, b = _normal32(rng, 200_000), _normal32(rng, 200_000)
    b[::5] = -a[::5] * np.float32(1.000001)  # heavy cancellation
    for op, got in ((np.add, fp.fp32_add), (np.multiply, fp.fp32_mul)):
        want = op(a, b)
        ok = (np.abs(want) >= np.float32(2.0**-126)) & np.isfinite(want)
        np.testing.assert_array_equal(got(a.view(np.uint32), b.view(np.uint32))[ok], want.view(np.uint32)[ok])
    np.testing.assert_array_equal(fp.fp32_sub(a.view(np.uint32), b.view(np.uint32)), fp.fp32_add(a.view(np.uint32), (-b).view(np.uint32)))


def test_fp17_add_and_mul_are_rne_of_exact_results() -> None:
    """FP17 values are exact float64s; a normal FP17 result is the float64 result rounded once."""
    rng = np.random.default_rng(2)
    expo = rng.integers(20, 43, (2, 50_000))
    a, b = ((rng.integers(0, 2, (2, 50_000)) << 16) | (expo << 10) | rng.integers(0, 1024, (2, 50_000)))
    va, vb = fp.fp17_value(a), fp.fp17_value(b)
    for exact, got in ((va + vb, fp.fp17_add(a, b)), (va * vb, fp.fp17_mul(a, b))):
        ok = np.abs(exact) >= 2.0**-30
        # round the exact float64 (at most 22 significant bits for add of close exponents, 22 for mul)
        want = fp.fp32_to_fp17(exact.astype(np.float32).view(np.uint32))
        exact32 = exact.astype(np.float32).astype(np.float64) == exact
        np.testing.assert_array_equal(got[ok & exact32], want[ok & exact32])


@pytest.mark.parametrize("a,b,want", [
    (0xBF800000, 0x3F800000, 0x80000000),  # (-1) + 1 = -0: the sign of a on equal magnitudes
    (0x3F800000, 0xBF800000, 0x00000000),
    (0x00000000, 0x80000000, 0x00000000),
    (0x80000000, 0x00000000, 0x80000000),
    (0x7F7FFFFF, 0x7F7FFFFF, 0x7F7FFFFF),  # overflow saturates
    (0x00400000, 0x00000000, 0x00000000),  # a denormal (implied 1 at exponent 0) + 0 flushes
    (0x00800000, 0x80400000, 0x00000000),  # 2^-126 - "1.5 x 2^-127": below the normal range -> 0
    (0x7FC00001, 0x7FC00002, 0x7FC00001),  # NaN a wins
    (0x3F800000, 0xFFC00002, 0xFFC00002),
    (0x4B800000, 0x3F800001, 0x4B800001),  # 2^24 + (1 + 2^-23): above the half ulp, rounds up
    (0x4B800000, 0x3F800000, 0x4B800000),  # 2^24 + 1: a tie, to even
])
def test_fp32_add_corners(a: int, b: int, want: int) -> None:
    assert int(fp.fp32_add(a, b)) == want


@pytest.mark.parametrize("a,b,want", [
    (0x7F800000, 0x3F000000, 0x7F000000),  # Inf x 0.5: the Inf exponent is an ordinary one -> 2^127
    (0x7F800000, 0x3F800000, 0x7F7FFFFF),  # Inf x 1: saturates
    (0x7F800000, 0x00000000, 0x00000000),
    (0xBF800000, 0x00000000, 0x80000000),  # sign of zero = sign_a ^ sign_b
    (0x00800000, 0x3F000000, 0x00000000),  # 2^-126 x 0.5: exponent field 0 -> flushed
    (0x00400000, 0x7E800000, 0x3F400000),  # denormal a read as 1.5 x 2^-127 (implied 1)
    (0x3F800001, 0x3F800001, 0x3F800002),
    (0x7F800001, 0x7FC00000, 0x7F800001),
])
def test_fp32_mul_corners(a: int, b: int, want: int) -> None:
    assert int(fp.fp32_mul(a, b)) == want


def test_max_min_eql_relu() -> None:
    a = np.array([0x00000000, 0x80000000, 0x3F800000, 0xBF800000, 0x7FC00000, 0x3F800000])
    b = np.array([0x80000000, 0x00000000, 0x40000000, 0xC0000000, 0x3F800000, 0xFFC00001])
    np.testing.assert_array_equal(fp.fp32_max(a, b), [0, 0, 0x40000000, 0xBF800000, 0x7FC00000, 0xFFC00001])
    np.testing.assert_array_equal(fp.fp32_min(a, b), [0x80000000, 0x80000000, 0x3F800000, 0xC0000000, 0x7FC00000,
                                                     0xFFC00001])
    np.testing.assert_array_equal(fp.fp_eql(a, b, fp.FP32), [0, 0, 0, 0, 0, 0])
    assert int(fp.fp_eql(0x7FC00000, 0x7FC00000, fp.FP32)) == 1
    np.testing.assert_array_equal(fp.fp_relu(np.array([0x80000000, 0xBF800000, 0xFFC00000, 0x3F800000]), fp.FP32),
                                  [0, 0, 0xFFC00000, 0x3F800000])


def test_fp32_to_int_frac_of_the_lut() -> None:
    whole, frac = fp.fp32_to_int_frac(np.array([0x40200000, 0x40200000, 0x3F800000, 0x4F000000, 0x7F800000]),
                                      np.array([0, 1, -3, 0, 0]))
    # 2.5 -> 2 + 0.5; 2.5/2 -> 1 + 0.25; 1·8 -> 8; 2^31 saturates at 511; the Inf field reads as 2^-128.
    np.testing.assert_array_equal(whole, [2, 1, 8, 511, 0])
    np.testing.assert_array_equal(frac, [1 << 34, 1 << 33, 0, 0, 0])
    assert int(fp.pow2_fp32(-128)) == 0x00200000 and int(fp.pow2_fp32(3)) == 0x41000000


def test_scalars_and_dtypes() -> None:
    assert fp.fp32_to_fp16(0x3F800000).shape == () and int(fp.fp32_to_fp16(0x3F800000)) == 0x3C00
    assert fp.fp16_to_fp17(np.uint16(0x3C00)).dtype == np.uint32
    assert fp.fp17_add(np.array([0x7C00]), np.array([0x7C00])).tolist() == [32 << 10]  # FP17 1 + 1 = 2


def test_bit_pattern_views_read_the_low_bits_as_ieee_fields() -> None:
    """``f32_of_bits``/``f16_of_bits`` read the low 32/16 bits of a word as the IEEE pattern (sign,
    exponent, mantissa), however the word is held: unsigned, or sign-extended as a negative int; they
    invert ``bits_of_f32``/``bits_of_f16`` bit for bit."""
    words = np.array([0x3F800000, 0xBF800000, 0xBF800000 - (1 << 32), 0x7F800000, 0x00000001, 0x80000000])
    got = fp.f32_of_bits(words)
    assert got.dtype == np.float32
    assert got[:4].tolist() == [1.0, -1.0, -1.0, np.inf] and got[4] == np.float32(2.0**-149)
    assert np.signbit(got[5]) and got[5] == 0
    vals = np.array([0.1, -3.5, 65504.0, 2.0**-130, -0.0], dtype=np.float32)
    np.testing.assert_array_equal(fp.bits_of_f32(fp.f32_of_bits(fp.bits_of_f32(vals))), fp.bits_of_f32(vals))
    halves = fp.f16_of_bits(np.array([0x3C00, 0xC000 - (1 << 16), 0x7BFF]))
    assert halves.dtype == np.float16 and halves.tolist() == [1.0, -2.0, 65504.0]


def test_int8_to_fp16_is_exact() -> None:
    """``FpIntToFloat<8,5,10>``: every int8 fits fp16's 11-bit significand, so the conversion of a narrow
    integer (no rounding at all: the mantissa is widened, not cut) equals IEEE's exact value."""
    ints = np.arange(-128, 128, dtype=np.int64)
    got = fp.int_to_float(ints, 8, fp.FP16).astype(np.int64)
    np.testing.assert_array_equal(got, ints.astype(np.float16).view(np.uint16).astype(np.int64))


def test_add_rounding_past_the_largest_finite_saturates() -> None:
    """``FpAdd``: a sum of finite operands whose RNE carries out of the top binade (no carry before rounding)
    saturates to the largest finite value instead of wrapping the mantissa to 0: 65504 + 16 = 65520 is the
    tie between 65504 and 2^16 and rounds up (odd mantissa), so the fp16 result is 65504 (0x7BFF); the same
    in fp32 with FLT_MAX + 2^103 (half its ulp)."""
    assert int(fp.fp16_add(0x7BFF, 0x4C00)) == 0x7BFF
    assert int(fp.fp16_add(0xFBFF, 0xCC00)) == 0xFBFF  # the same on the negative side
    assert int(fp.fp32_add(0x7F7FFFFF, 0x73000000)) == 0x7F7FFFFF
    assert int(fp.fp16_add(0x7BFE, 0x4C00)) == 0x7BFE  # 65488 ties to the even 65472: no overflow
