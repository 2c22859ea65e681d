"""Golden against the fp16 SDP reference where the fuzz properties do not reach: every float primitive of
``golden.fp`` over arbitrary bit patterns (NaN, Inf and denormal fields included), and SDP's EQL compare mode
in fp16 (no output cube, D_STATUS only). The reference on its own is unit-tested in
``tests/regressions/lib/reference/test_sdp_fp16_reference.py``.

Output cubes of whole fp16 operations are compared by ``regressions/fuzz/test_fp16_sdp.py``.
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from golden import Dla, fp, get_config
from regressions.fuzz.engines import padded
from regressions.fuzz.fp16_sdp import padded_params
from regressions.lib.programs import fp16 as programs_fp16
from regressions.lib.reference import sdp_fp16 as ref
from regressions.lib.strategies.sdp_fp16 import sdp_fp16_layers

pytestmark = pytest.mark.reference

SETTINGS = settings(max_examples=400, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


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
