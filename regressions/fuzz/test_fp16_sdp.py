"""The fp16 SDP fuzz properties on nv_full: golden through its register program equals the exact-fraction
fp16 reference bit for bit, and the NaN/Inf/saturation counters match (``regressions.fuzz.fp16_sdp``).

Derandomized by default; ``FUZZ_SEED=S`` draws from that seed. ``DLA_FUZZ_EXAMPLES`` (default 100) scales
the example counts (about 10 s at the default). Saved failures in ``regressions/found`` run first.
"""
from __future__ import annotations


import numpy as np
import pytest

from golden import get_config
from golden.lut import LutRegisters
from regressions.fuzz import fp16_sdp, serialize
from regressions.fuzz.properties import PROPERTIES, Property, load
from regressions.fuzz.testing import property_test, scaled
from regressions.lib.programs.fp16 import SdpFp16Layer
from regressions.lib.reference import sdp_fp16 as ref

pytestmark = pytest.mark.reference

#: Examples per property at the default scale (about 4 s each).
BASE_EXAMPLES = {"sdp_fp16": 200, "sdp_y_fp16": 100}

PAIRS = [(prop, config) for prop in fp16_sdp.FP16_PROPERTIES for config in prop.configs]



@pytest.mark.parametrize("prop,config", PAIRS, ids=[f"{p.name}-{c}" for p, c in PAIRS])
def test_golden_equals_fp16_reference(prop: Property, config: str) -> None:
    property_test(prop, config, scaled(BASE_EXAMPLES[prop.name]))()


def test_properties_are_registered_and_loaded() -> None:
    load()
    for prop in fp16_sdp.FP16_PROPERTIES:
        assert PROPERTIES[prop.name] is prop
        assert prop.configs == ("nv_full",) and not prop.rtl and prop.program is not None


def test_examples_round_trip_through_json() -> None:
    x = np.array([0x3C00, 0x7E00, 0x8000]).reshape(3, 1, 1)
    lut = LutRegisters(le_start=0x3F800000, le_slope_uflow_scale=0x3800)
    params = ref.Fp16Params(
        x1=ref.Fp16XParams(bypass=False, alu_bypass=False, alu_operand=np.array([0x4000, 0, 1])),
        y=ref.Fp16YParams(bypass=False, mul_bypass=False, mul_operand=0x40000000, lut_bypass=False),
        lut=lut, nan_to_zero=True, out="int16")
    layer = SdpFp16Layer(x, params)
    back = serialize.from_json(serialize.to_json(layer))
    assert serialize.same(back, layer)
    assert back.params.lut.le_start == 0x3F800000 and back.params.out == "int16"


def test_a_wrong_golden_is_caught() -> None:
    """The check is not vacuous: an exact cancellation x + (-x) of a negative x is -0 in the cmod (the
    larger operand's sign, a on ties); IEEE's +0 there is reported."""
    hw = get_config("nv_full")
    x = np.array([0xBC00, 0x3C00, 0xC000, 0x4000]).reshape(4, 1, 1)
    layer = SdpFp16Layer(x, ref.Fp16Params(x1=ref.Fp16XParams(bypass=False, alu_bypass=False, alu_operand=x ^ 0x8000)))
    fp16_sdp.check(hw, layer)
    assert list(fp16_sdp.reference_output(hw, layer)[:4, 0, 0]) == [0x8000, 0, 0x8000, 0]
    from golden import fp

    ieee = lambda a, b: (fp.f32_of_bits(a) + fp.f32_of_bits(b)).view(np.uint32)  # noqa: E731
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(fp, "fp32_add", ieee)
        with pytest.raises(AssertionError, match="golden 0x0000, reference 0x8000"):
            fp16_sdp.check(hw, layer)
