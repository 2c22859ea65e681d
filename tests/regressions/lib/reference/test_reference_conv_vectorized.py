"""The vectorized int8 reference convolution equals the per-MAC loop it shortcuts (full-size layer replays use it)."""
from __future__ import annotations

import numpy as np
import pytest

from regressions.lib.reference.conv import direct_conv, direct_conv_int8_vectorized

CASES = [  # C, H, W, K, R, S, stride, dilation, pad, pad_value, clip
    (3, 5, 6, 4, 3, 3, (1, 1), (1, 1), (1, 1), 0, 0),
    (5, 7, 8, 3, 2, 3, (2, 1), (1, 2), (2, 0), -7, 3),
    (2, 4, 4, 2, 1, 1, (1, 1), (1, 1), (0, 0), 0x85, 1),  # raw pad byte, sign-extended
    (8, 6, 6, 5, 3, 2, (3, 2), (2, 1), (1, 2), 127, 5),
]


@pytest.mark.parametrize("case", CASES, ids=[str(i) for i in range(len(CASES))])
def test_vectorized_equals_the_loop(case) -> None:
    c, h, w, k, r, s, stride, dil, pad, pad_value, clip = case
    rng = np.random.default_rng(len(CASES) + c)
    x = rng.integers(-128, 128, (c, h, w))
    wt = rng.integers(-128, 128, (k, c, r, s))
    oh = (h + 2 * pad[0] - ((r - 1) * dil[0] + 1)) // stride[0] + 1
    ow = (w + 2 * pad[1] - ((s - 1) * dil[1] + 1)) // stride[1] + 1
    args = dict(stride=stride, dilation=dil, pad=pad, pad_value=pad_value, out_hw=(oh, ow), clip_truncate=clip)
    np.testing.assert_array_equal(direct_conv_int8_vectorized(x, wt, **args), direct_conv(x, wt, **args))
