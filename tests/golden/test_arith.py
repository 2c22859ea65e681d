"""golden.arith: the integer rounding/saturation helpers every NVDLA datapath model shares."""
from __future__ import annotations

import numpy as np

from golden.arith import rha


def _rha_reference(v: int, shift: int) -> int:
    """NVDLA's rounding right shift (round half away from zero), in Python's unbounded integers."""
    mag = (abs(v) + (1 << (shift - 1))) >> shift
    return -mag if v < 0 else mag


def test_rha_is_exact_for_values_near_2_63_at_shifts_62_and_63() -> None:
    """The rounding right shift must stay exact for values near 2^63 (wide products shifted by the largest
    truncations), where adding the rounding constant 2^(s-1) first would overflow int64: 1.75·2^62 rounds
    to 2, not to a wrapped negative. Scalar and per-lane shifts go the same way."""
    values = [7 << 60, (1 << 63) - 1, -(7 << 60), -(1 << 63) + 1, (3 << 61) + 1, 5]
    for shift in (62, 63):
        expect = [_rha_reference(v, shift) for v in values]
        assert [int(rha(np.int64(v), shift)) for v in values] == expect, shift
        assert rha(np.array(values, dtype=np.int64), np.full(len(values), shift)).tolist() == expect, shift
