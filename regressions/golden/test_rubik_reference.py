"""Golden RUBIK against the plain-loop reference (``regressions/lib/reference/rubik.py``) on nv_full: contract,
split and merge in int8/int16/fp16 with random sizes, strides (packed, padded and overlapping), RAM types,
addresses above 4 GiB and the cmod's request-size edges (8-wide contract blocks, 64-element chunks).
The reference's hand-worked cases are unit tests: ``tests/regressions/lib/reference/test_rubik_reference.py``."""
from __future__ import annotations

import pytest
from hypothesis import HealthCheck, assume, event, given, settings

from golden import ConfigError, Dla, get_config
from regressions.fuzz.rubik_bdma import assert_same, fill, play, rubik_ranges, rubik_writes
from regressions.lib.reference.rubik import problems, rubik
from regressions.lib.strategies.rubik import rubik_examples, rubik_ops

pytestmark = pytest.mark.reference

SETTINGS = settings(max_examples=200, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
HW = get_config("nv_full")


# ---- golden == reference ----------------------------------------------------------------------------------
@SETTINGS
@given(example=rubik_examples(HW, same_window=False))
def test_golden_matches_reference(example):
    op = example.op
    assume(not problems(op))
    event(f"mode {op.mode}, precision {op.precision}")
    dla = Dla(HW)
    ranges = rubik_ranges(op)
    ref = fill(dla, ranges, example.seed)
    play(dla, rubik_writes(op))
    rubik(ref, op)
    assert dla.read("NVDLA_GLB.S_INTR_STATUS_0") == 1 << 8
    assert_same(dla, ref, ranges)


@SETTINGS
@given(op=rubik_ops(HW, same_window=True))
def test_golden_refuses_exactly_what_the_reference_finds_illegal(op):
    """Source and destination in one window, some strides and channel counts off: golden raises a
    ConfigError naming the first field ``problems`` names, and otherwise moves the same bytes."""
    found = problems(op)
    event(found[0] if found else "legal")
    dla = Dla(HW)
    ranges = rubik_ranges(op)
    ref = fill(dla, ranges, 1)
    if found:
        with pytest.raises(ConfigError, match=rf"RBK\.D_\w+\.{found[0]}:"):
            play(dla, rubik_writes(op))
        return
    play(dla, rubik_writes(op))
    rubik(ref, op)
    assert_same(dla, ref, ranges)
