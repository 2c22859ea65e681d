"""The fp16 SDP reference (exact fractions) on its own, and against golden where the fuzz properties do not
reach: every float primitive of ``golden.fp`` over arbitrary bit patterns (NaN, Inf and denormal fields
included), and SDP's EQL compare mode in fp16 (no output cube, D_STATUS only).

Output cubes of whole fp16 operations are compared by ``regressions/fuzz/test_fp16_sdp.py``.
"""
from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from golden import Dla, fp, get_config
from golden.lut import LutRegisters
from regressions import programs_fp16
from regressions.fuzz.engines import padded
from regressions.fuzz.fp16_sdp import padded_params
from regressions.fuzz.strategies.sdp_fp16 import sdp_fp16_layers
from regressions.reference import sdp_fp16 as ref

pytestmark = pytest.mark.reference

SETTINGS = settings(max_examples=400, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


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


# ---- golden.fp against the reference over arbitrary bit patterns --------------------------------------------
def _bits32() -> st.SearchStrategy[int]:
    special = st.sampled_from([0, 0x80000000, 0x7F800000, 0xFF800000, 0x7FC00000, 0x7F800001, 0x00000001,
                               0x007FFFFF, 0x00800000, 0x7F7FFFFF, 0x3F800000, 0xBF800000])
    near = st.tuples(st.integers(0, 1), st.integers(100, 150), st.integers(0, (1 << 23) - 1)).map(
        lambda t: (t[0] << 31) | (t[1] << 23) | t[2])
    return st.one_of(special, near, st.integers(0, (1 << 32) - 1))


@SETTINGS
@given(a=_bits32(), b=_bits32())
def test_golden_fp32_arithmetic_equals_reference(a: int, b: int) -> None:
    assert int(fp.fp32_add(a, b)) == ref.fp_add(a, b, ref.F32)
    assert int(fp.fp32_sub(a, b)) == ref.fp_sub(a, b, ref.F32)
    assert int(fp.fp32_mul(a, b)) == ref.fp_mul(a, b, ref.F32)
    assert int(fp.fp32_max(a, b)) == ref.fp_max(a, b, ref.F32)
    assert int(fp.fp32_min(a, b)) == ref.fp_min(a, b, ref.F32)


@SETTINGS
@given(a=st.integers(0, (1 << 17) - 1), b=st.integers(0, (1 << 17) - 1))
def test_golden_fp17_arithmetic_equals_reference(a: int, b: int) -> None:
    assert int(fp.fp17_add(a, b)) == ref.fp_add(a, b, ref.F17)
    assert int(fp.fp17_mul(a, b)) == ref.fp_mul(a, b, ref.F17)
    assert int(fp.fp17_to_fp32(a)) == ref.fp17_to_fp32(a)
    assert int(fp.fp17_to_fp16(a)) == ref.narrow(a, ref.F17, ref.F16, True)


@SETTINGS
@given(a=_bits32(), h=st.integers(0, 0xFFFF), frac=st.integers(0, (1 << 35) - 1),
       i=st.integers(-(1 << 16), (1 << 16) - 1))
def test_golden_conversions_equal_reference(a: int, h: int, frac: int, i: int) -> None:
    assert int(fp.fp32_to_fp16(a)) == ref.fp32_to_fp16(a)
    assert int(fp.fp32_to_fp17(a)) == ref.fp32_to_fp17(a)
    assert int(fp.fp16_to_fp32(h)) == ref.fp16_to_fp32(h)
    assert int(fp.fp16_to_fp17(h)) == ref.fp16_to_fp17(h)
    assert int(fp.fp16_to_int16(h)) == ref.fp16_to_int16(h)
    assert int(fp.fraction_to_float(frac, 35, fp.FP17)) == ref.fraction_to_fp17(frac)
    assert int(fp.int17_to_fp16(i)) == ref.int_to_fp16(i)


# ---- EQL compare mode in fp16 ------------------------------------------------------------------------------------
@settings(max_examples=40, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(layer=sdp_fp16_layers(get_config("nv_full")), equal=st.booleans())
def test_fp16_eql_writes_nothing_and_reports_inequality(layer, equal) -> None:
    """Y ALU EQL in fp16: 1 (as fp32 bits) where X's result differs from the operand bit for bit; nothing
    is written and D_STATUS.STATUS_UNEQUAL is set when any lane's low 16 bits are non-zero."""
    hw = get_config("nv_full")
    atom = programs_fp16.atom_of(hw)
    p = layer.params
    op = layer.x.copy() if equal else p.y.alu_operand if np.ndim(p.y.alu_operand) == 3 else layer.x ^ 1
    y = ref.Fp16YParams(bypass=False, alu_bypass=False, alu_algo=ref.ALU_EQL, alu_operand=op)
    params = ref.Fp16Params(x1=ref.Fp16XParams(), x2=ref.Fp16XParams(), y=y, nan_to_zero=p.nan_to_zero)
    program = programs_fp16.program_sdp_fp16(hw, programs_fp16.SdpFp16Layer(layer.x, params))
    dla = Dla(hw)
    dla.mem.write(program.output[0], b"\xA5" * program.output[1])
    assert program.run(dla) == b"\xA5" * program.output[1]
    x, pp = padded(layer.x, atom), padded_params(params, atom)

    def y_of(index: tuple[int, int, int], bits: int) -> int:
        v = ref.fp16_to_fp32(bits)
        v = 0 if pp.nan_to_zero and ref.is_nan(v, ref.F32) else v
        return ref.y_stage(v, pp.y, pp.lut, pp.nan_to_zero, index, x.shape)

    compared = [y_of(idx, int(v)) for idx, v in np.ndenumerate(x)]
    unequal = dla.read("NVDLA_SDP.D_STATUS_0") & 1
    assert unequal == int(any(v & 0xFFFF for v in compared))
    if equal:  # NaN == the same NaN bit for bit; with NAN_TO_ZERO both sides flush to +0
        assert unequal == 0
