"""The pytest side of the fuzz properties, shared by every ``regressions/fuzz/test_*.py``: one hypothesis test
per (property, preset), derandomized unless ``FUZZ_SEED`` is set, sized by ``DLA_FUZZ_EXAMPLES`` (percent of
the default counts, as the regression levels set it), with the failures saved in ``regressions/found`` run
first as ``@example``s."""
from __future__ import annotations

import os

from hypothesis import HealthCheck, given, seed, settings

from golden import get_config
from regressions.fuzz import found
from regressions.fuzz.properties import PROPERTIES, Property

SCALE = int(os.environ.get("DLA_FUZZ_EXAMPLES", "100")) / 100
FUZZ_SEED = os.environ.get("FUZZ_SEED", "").strip()


def scaled(base: int) -> int:
    """Examples for a property whose default-scale count is ``base`` (at least one)."""
    return max(1, round(base * SCALE))


def property_test(prop: Property, config: str, max_examples: int):
    """The hypothesis test of one property on one preset, with the saved failures as ``@example``s."""
    hw = get_config(config)

    @settings(max_examples=max_examples, deadline=None, database=None, derandomize=not FUZZ_SEED,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                     HealthCheck.filter_too_much, HealthCheck.large_base_example])
    @given(example=prop.strategy(hw))
    def test(example) -> None:
        prop.check(hw, example)

    if FUZZ_SEED:
        test = seed(int(FUZZ_SEED, 0))(test)
    return found.with_found_examples(test, PROPERTIES, prop.name, config)
