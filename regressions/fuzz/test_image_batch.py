"""The image-input and batched-convolution fuzz properties on each of their presets: golden through the
register program equals the independent references bit for bit (``regressions.fuzz.image_batch``).

Derandomized by default; ``FUZZ_SEED=S`` draws from that seed instead. ``DLA_FUZZ_EXAMPLES`` (default 100)
scales the example counts (the default file takes about 30 s on one core). Saved failures run first.
"""
from __future__ import annotations


import pytest
from hypothesis import HealthCheck, given, settings

from golden import PRESETS, get_config
from regressions.fuzz import image_batch, serialize
from regressions.fuzz.properties import Property, load
from regressions.fuzz.testing import property_test, scaled

pytestmark = pytest.mark.reference

#: Examples per preset at the default scale.
BASE_EXAMPLES = {"conv_image": 40, "conv_batch": 40}

PAIRS = [(prop, config) for prop in image_batch.IMAGE_BATCH_PROPERTIES for config in prop.configs]



@pytest.mark.parametrize("prop,config", PAIRS, ids=[f"{p.name}-{c}" for p, c in PAIRS])
def test_golden_equals_reference(prop: Property, config: str) -> None:
    property_test(prop, config, scaled(BASE_EXAMPLES[prop.name]))()


def test_properties_are_registered_with_programs() -> None:
    props = load()
    assert {p.name for p in image_batch.IMAGE_BATCH_PROPERTIES} == {"conv_image", "conv_batch"}
    for prop in image_batch.IMAGE_BATCH_PROPERTIES:
        assert props[prop.name] is prop and prop.program is not None and not prop.rtl
        assert set(prop.configs) <= set(PRESETS)
    assert {"nv_small", "nv_full"} <= set(image_batch.CONV_IMAGE.configs)
    assert image_batch.CONV_BATCH.configs == ("nv_full",)


@pytest.mark.parametrize("prop", image_batch.IMAGE_BATCH_PROPERTIES, ids=lambda p: p.name)
def test_examples_round_trip_through_json(prop: Property) -> None:
    """Drawn examples survive the JSON a saved failure is stored as, and build the same program."""
    hw = get_config(prop.configs[-1])

    @settings(max_examples=5, deadline=None, database=None, derandomize=True,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much])
    @given(example=prop.strategy(hw))
    def round_trip(example) -> None:
        back = prop.from_json(prop.to_json(example))
        assert serialize.same(back, example)
        program, want = prop.program(hw, back)  # type: ignore[misc]
        again, _ = prop.program(hw, example)  # type: ignore[misc]
        assert program.writes == again.writes and program.memory == again.memory
        assert program.output[1] == len(want)

    round_trip()
