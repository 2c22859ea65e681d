"""The 16-bit conv fuzz properties (``regressions.fuzz.fp16_conv``) on nv_full: golden through its register
program equals the plain-loop reference bit for bit.

Derandomized by default; ``FUZZ_SEED=S`` draws from that seed. ``DLA_FUZZ_EXAMPLES`` (default 100) scales the
example counts as in ``test_engines.py`` (the default run takes about 10 s of one core). Failures
saved in ``regressions/found`` run first, as ``@example``s.
"""
from __future__ import annotations

import json

import numpy as np
import pytest

from golden import Dla, get_config
from regressions.fuzz import fp16_conv, serialize
from regressions.fuzz.properties import Property, load
from regressions.fuzz.testing import property_test, scaled
from regressions.lib.programs.conv_wide import WideConvLayer

pytestmark = pytest.mark.reference

#: Examples at the default scale (the fp16 reference multiplies through the Booth tree in Python).
BASE_EXAMPLES = {"conv_fp16": 150, "conv_int16": 150}

PAIRS = [(prop, config) for prop in fp16_conv.WIDE_CONV_PROPERTIES for config in prop.configs]



@pytest.mark.parametrize("prop,config", PAIRS, ids=[f"{p.name}-{c}" for p, c in PAIRS])
def test_golden_equals_reference(prop: Property, config: str) -> None:
    property_test(prop, config, scaled(BASE_EXAMPLES[prop.name]))()


def test_properties_are_registered_on_nv_full_with_programs() -> None:
    props = load()
    assert {"conv_fp16", "conv_int16"} <= set(props)
    for prop in fp16_conv.WIDE_CONV_PROPERTIES:
        assert props[prop.name] is prop
        assert prop.configs == ("nv_full",) and prop.program is not None and not prop.rtl
        assert get_config(prop.configs[0]).supports("fp16")


def test_examples_round_trip_through_json() -> None:
    layer = WideConvLayer(x=np.array([[[0x3C00]]]), w=np.array([[[[0xBC00]]]]), in_precision="int16",
                          cvt=(1, 2, 3), nan_to_zero=True)
    back = serialize.from_json(json.loads(json.dumps(serialize.to_json(layer))))
    assert isinstance(back, WideConvLayer) and serialize.same(layer, back)


def test_check_reports_a_wrong_lane_in_hex() -> None:
    """A wrong golden value is reported with its channel and the two 16-bit words."""
    hw = get_config("nv_full")
    layer = WideConvLayer(x=np.array([[[0x3C00]]]), w=np.array([[[[0x4000]]]]))  # 1.0 * 2.0
    program, want = fp16_conv.CONV_FP16.program(hw, layer)
    assert want[:2] == (0x4000).to_bytes(2, "little")
    got = program.run(Dla(hw))
    assert got == want
    message = fp16_conv.describe(hw, got, bytes([0x01]) + want[1:], (1, 1, 1))
    assert "channel 0" in message and "golden 0x4000, reference 0x4001" in message
