"""``golden.decode_memo``: a decoded configuration is reused only while the software-written words are the same."""
from __future__ import annotations

import pytest

from golden.config import get_config
from golden.decode_memo import memo_view, memo_views
from golden.errors import ConfigError
from golden.regs import UNITS, RegView


def _sdp(words: dict[int, int]) -> RegView:
    return RegView(UNITS["SDP"], words)


def test_a_config_word_changes_the_decode_a_status_word_does_not() -> None:
    calls = []

    @memo_view
    def width(v: RegView) -> int:
        calls.append(1)
        return v.D_DATA_CUBE_WIDTH.WIDTH

    sdp = UNITS["SDP"]
    words = {sdp.register("D_DATA_CUBE_WIDTH").offset: 7}
    assert width(_sdp(words)) == 7 and width(_sdp(dict(words))) == 7 and len(calls) == 1
    words[sdp.register("D_PERF_OUT_SATURATION").offset] = 123  # read-only: reported by the engine
    assert width(_sdp(words)) == 7 and len(calls) == 1
    words[sdp.register("D_DATA_CUBE_WIDTH").offset] = 9
    assert width(_sdp(words)) == 9 and len(calls) == 2


def test_errors_are_not_cached_and_the_hardware_is_part_of_the_key() -> None:
    calls = []

    @memo_views
    def check(regs: dict[str, RegView], hw: object) -> str:
        calls.append(hw)
        if regs["SDP"].D_DATA_CUBE_WIDTH.WIDTH == 0:
            raise regs["SDP"].D_DATA_CUBE_WIDTH.fail("WIDTH", "zero")
        return getattr(hw, "name")

    small, full = get_config("nv_small"), get_config("nv_full")
    bad = {"SDP": _sdp({})}
    for _ in range(2):
        with pytest.raises(ConfigError, match="WIDTH: zero"):
            check(bad, small)
    assert len(calls) == 2
    good = {"SDP": _sdp({UNITS["SDP"].register("D_DATA_CUBE_WIDTH").offset: 3})}
    assert check(good, small) == "nv_small" and check(good, full) == "nv_full" and check(good, small) == "nv_small"
    assert len(calls) == 4


def test_views_are_per_unit_classes_with_the_old_spellings() -> None:
    v = _sdp({UNITS["SDP"].register("D_DATA_CUBE_WIDTH").offset: 5})
    assert isinstance(v, RegView) and v.D_DATA_CUBE_WIDTH.WIDTH == v.D_DATA_CUBE_WIDTH_0.WIDTH == 5
    assert v.word("D_DATA_CUBE_WIDTH") == 5
