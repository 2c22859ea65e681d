"""The 16-bit PDP/CDP fuzz properties ("pdp_int16", "pdp_fp16", "cdp_int16", "cdp_fp16") on nv_full: golden
through its register program equals the plain-loop reference bit for bit, and the fp16 NaN/Inf counters
match what the reference's data imply (``regressions.fuzz.wide_pool_lrn``).

Derandomized by default, so a run is repeatable; ``FUZZ_SEED=S`` draws from that seed instead.
``DLA_FUZZ_EXAMPLES`` (default 100) scales the example counts (the default file takes about 25 s on one
core; the fp16 references compute with exact fractions). Every failure saved in ``regressions/found`` runs
first, as an ``@example``.
"""
from __future__ import annotations


import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

from golden import get_config
from regressions.fuzz import serialize, wide_pool_lrn
from regressions.fuzz.properties import PROPERTIES, Property, load
from regressions.fuzz.testing import property_test, scaled
from regressions.lib.reference.arith import OutsideCmodDomain

pytestmark = pytest.mark.reference

#: Examples at the default scale (about 10, 30, 70 and 50 ms each).
BASE_EXAMPLES = {"pdp_int16": 300, "pdp_fp16": 250, "cdp_int16": 100, "cdp_fp16": 120}

PAIRS = [(prop, config) for prop in wide_pool_lrn.WIDE_PROPERTIES for config in prop.configs]



@pytest.mark.parametrize("prop,config", PAIRS, ids=[f"{p.name}-{c}" for p, c in PAIRS])
def test_golden_equals_reference(prop: Property, config: str) -> None:
    property_test(prop, config, scaled(BASE_EXAMPLES[prop.name]))()


def test_properties_are_registered_for_nv_full_with_programs() -> None:
    props = load()
    assert {p.name for p in wide_pool_lrn.WIDE_PROPERTIES} == set(BASE_EXAMPLES)
    for prop in wide_pool_lrn.WIDE_PROPERTIES:
        assert props[prop.name] is prop
        assert prop.configs == ("nv_full",)
        assert prop.program is not None and not prop.rtl


@pytest.mark.parametrize("name", sorted(BASE_EXAMPLES))
def test_examples_round_trip_through_json(name: str) -> None:
    """A drawn example survives JSON (how failures are saved) and checks the same way after reading back."""
    prop = PROPERTIES[name] if name in PROPERTIES else load()[name]
    hw = get_config("nv_full")
    examples = []

    @settings(max_examples=5, deadline=None, database=None, derandomize=True,
              suppress_health_check=list(HealthCheck))
    @given(example=prop.strategy(hw))
    def collect(example) -> None:
        examples.append(example)

    collect()
    programmed = 0
    for example in examples:
        back = prop.from_json(prop.to_json(example))
        assert serialize.same(back, example)
        try:
            program, want = prop.program(hw, back)
        except OutsideCmodDomain:  # the reference refuses (undefined C in the cmod); the fuzz rejects these
            continue
        assert len(want) == program.output[1] and program.output[1] % 32 == 0
        programmed += 1
    assert programmed


def test_a_wrong_reference_value_is_reported_with_its_position() -> None:
    """The check names the first differing 16-bit output value (here: a corrupted expected byte)."""
    from golden import Dla
    from regressions.lib.programs.wide import WidePoolLayer

    hw = get_config("nv_full")
    x = np.arange(-8, 8, dtype=np.int64).reshape(1, 4, 4) * 1000
    layer = WidePoolLayer(x, "int16", "max", (2, 2), (2, 2))
    program, want, ref, _ = wide_pool_lrn.build_pdp(hw, wide_pool_lrn.WidePdpExample(layer))
    got = program.run(Dla(hw))
    assert got == want
    assert ref[0].tolist() == [[-3000, -1000], [5000, 7000]]
    broken = ref.copy()
    broken[0, 1, 1] += 1
    message = wide_pool_lrn._describe(got, broken, 1, 16)
    assert "1 of 64" in message and "channel 0, y 1, x 1" in message
