"""The Winograd and weight-compression references on their own: Winograd without rounding is plain convolution,
the hardware's integer steps behave as written, the weight writer is the compiler's transform, and
compression round-trips in the documented bit order."""
from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from regressions.lib.reference import conv as ref_conv
from regressions.lib.reference import conv_winograd as ref_wg
from regressions.lib.reference import wcomp as ref_wcomp

pytestmark = pytest.mark.reference

SETTINGS = settings(max_examples=15, deadline=None, derandomize=True)


def _padded_lanes(x: np.ndarray, atom: int) -> np.ndarray:
    c = x.shape[0]
    out = np.zeros((-(-c // atom) * atom,) + x.shape[1:], dtype=np.int64)
    out[:c] = x
    return out


@SETTINGS
@given(seed=st.integers(0, 2**32 - 1), stride=st.sampled_from([(1, 1), (2, 1), (1, 2), (2, 2), (3, 1)]),
       c=st.integers(1, 5), k=st.integers(1, 3), pads=st.tuples(st.integers(0, 2), st.integers(0, 2)),
       pad_value=st.integers(-128, 127))
def test_exact_winograd_is_plain_convolution(seed, stride, c, k, pads, pad_value):
    """No PRA shift or saturation, exact G g G^T weights, no register widths: the Winograd pipeline is exactly
    the direct (strided) convolution of the untransformed kernels, padding included."""
    rng = np.random.default_rng(seed)
    sy, sx = stride
    oh, ow = 4, 4
    top, left = pads
    he, we = oh + 4, ow + 4
    h, w = he * sy - top - 1, we * sx - left - 1
    r, s = rng.integers(1, 3 * sy + 1), rng.integers(1, 3 * sx + 1)
    x = rng.integers(-128, 128, (c, h, w))
    g = rng.integers(-128, 128, (k, c, r, s))
    u = ref_wg.winograd_weights(g, stride=stride, atom=8, exact=True)
    got = ref_wg.winograd_conv(_padded_lanes(x, 8), u, out_hw=(oh, ow), stride=stride, pad=(top, left, 1, 1),
                               pad_value=pad_value, exact=True)
    want = ref_conv.direct_conv(x, g, stride=stride, pad=(top, left), pad_value=pad_value, out_hw=(oh, ow))
    assert all(isinstance(v, (int, Fraction)) for v in got.ravel())
    np.testing.assert_array_equal(got.astype(np.int64), want)
    assert (got == want).all()


@SETTINGS
@given(seed=st.integers(0, 2**32 - 1), precision=st.sampled_from(["int8", "int16"]))
def test_integral_weights_through_the_hardware_steps(seed, precision):
    """With (2G) g (2G)^T weights (4x the transform, integral), PRA_TRUNCATE=0 on inputs too small to saturate
    and CLIP_TRUNCATE=2, the hardware path is exactly the plain convolution."""
    rng = np.random.default_rng(seed)
    x = rng.integers(-7, 8, (3, 7, 6))  # |B^T d B| <= 16 * 7 < 128
    g = rng.integers(-13, 14, (2, 3, 3, 3))  # |(2G) g (2G)^T| <= 9 * 13 < 128
    u = ref_wg.winograd_weights(g, atom=16, scale=2, precision=precision)
    assert np.abs(u).max() < 128
    got = ref_wg.winograd_conv(_padded_lanes(x, 16), u, out_hw=(4, 4), pad=(1, 1, 0, 1), pad_value=-1,
                               clip_truncate=2, precision=precision)
    want = ref_conv.direct_conv(x, g, pad=(1, 1), pad_value=-1, out_hw=(4, 4))
    np.testing.assert_array_equal(got, want)


def test_pra_rounds_half_away_from_zero_and_saturates():
    tile = [[0] * 4 for _ in range(4)]
    tile[1][1] = 3
    exact = ref_wg.input_transform(tile, exact=True)
    assert exact[1][1] == 3 and exact[2][2] == 3 and exact[1][2] == -3 and exact[0][0] == 0
    half = ref_wg.input_transform(tile, 1)
    assert half[1][1] == 2 and half[1][2] == -2  # 1.5 -> 2, -1.5 -> -2
    big = [[127, -128, -128, 127], [127, -128, -128, 127], [-128, 127, 127, -128], [-128, 127, 127, -128]]
    exact = ref_wg.input_transform(big, exact=True)
    assert max(max(map(abs, row)) for row in exact) == 510
    assert ref_wg.input_transform(big, 0, 8)[1][1] == max(-128, min(127, exact[1][1]))
    assert ref_wg.input_transform(big, 0, 16) == exact


def test_output_transform_hand_values():
    m = [[1, 2, 3, 4], [5, 6, 7, 8], [9, 10, 11, 12], [13, 14, 15, 16]]
    # rows 0+1+2 = (15, 18, 21, 24), rows 1-2-3 = (-17, -18, -19, -20); then the same on columns
    assert ref_wg.output_transform(m) == [[15 + 18 + 21, 18 - 21 - 24], [-17 - 18 - 19, -18 + 19 + 20]]


def test_weight_transform_is_the_compilers_float_transform_cast_toward_zero():
    ones = [[1, 1, 1]] * 3
    exact = ref_wg.weight_transform(ones, exact=True)
    assert exact[0] == [1, Fraction(3, 2), Fraction(1, 2), 1] and exact[1][1] == Fraction(9, 4)
    assert ref_wg.weight_transform(ones) == [[1, 1, 0, 1], [1, 2, 0, 1], [0, 0, 0, 0], [1, 1, 0, 1]]
    neg = [[-1, -1, -1]] * 3
    assert ref_wg.weight_transform(neg)[1][1] == -2  # -2.25 -> -2: toward zero, not floor
    assert ref_wg.weight_transform(ones, scale=2) == [[4 * e for e in row] for row in exact]


def test_channel_extension_matches_the_compilers_index_map():
    g = np.arange(1, 1 + 2 * 6 * 5).reshape(1, 2, 6, 5)  # C=2 padded to 4, R=6, S=5, stride (2, 2)
    ext = ref_wg.extend_kernel(g, (2, 2), 4)
    assert ext.shape == (1, 16, 3, 3)
    # extended channel (py*Sx + px)*Cp + c holds tap (r*Sy + py, s*Sx + px) of channel c
    assert ext[0, 1 * 2 * 4 + 1 * 4 + 0, 2, 1] == g[0, 0, 5, 3]
    assert ext[0, 0 * 8 + 1 * 4 + 1, 1, 1] == g[0, 1, 2, 3]
    assert ext[0, 2, 0, 0] == 0 and ext[0, 0 * 8 + 1 * 4 + 0, 2, 2] == 0  # padded channel; tap (4, 5) is outside
    with pytest.raises(ValueError):
        ref_wg.extend_kernel(np.zeros((1, 1, 7, 3)), (2, 1), 4)


def test_pack_weights_order():
    u = np.arange(2 * 8 * 16).reshape(2, 8, 4, 4) % 127
    raw = ref_wg.pack_weights(u, kernel_group=32)
    assert list(raw[:8]) == [u[0, 0, 0, 0], u[0, 1, 0, 0], u[0, 2, 0, 0], u[0, 3, 0, 0],
                             u[0, 0, 0, 1], u[0, 1, 0, 1], u[0, 2, 0, 1], u[0, 3, 0, 1]]
    assert raw[64] == u[1, 0, 0, 0] and raw[128] == u[0, 4, 0, 0]
    raw16 = ref_wg.pack_weights(-u, kernel_group=1, precision="int16")
    assert int.from_bytes(raw16[2 * 128: 2 * 128 + 2], "little", signed=True) == -u[1, 0, 0, 0]


# ---- compression --------------------------------------------------------------------------------------------------
def test_compress_hand_example():
    raw = bytes([0, 7, 0, 0, 0xFD, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 9])
    comp = ref_wcomp.compress(raw, size=1, kernel_group=2, elements_per_kernel=4)
    assert comp.wmb[:2] == bytes([0b0001_0010, 0b1000_0000]) and len(comp.wmb) == 128
    assert comp.stream[:3] == bytes([7, 0xFD, 9]) and len(comp.stream) == 128
    assert comp.group_sizes(2) == [2, 1] and len(comp.wgs) == 32
    assert ref_wcomp.decompress(comp.wmb, comp.stream, elements=16, size=1) == raw
    kept = ref_wcomp.compress(raw, size=1, kernel_group=2, elements_per_kernel=4, keep=[True] + [False] * 15)
    assert kept.wmb[0] == 0b0001_0011 and kept.stream[:4] == bytes([0, 7, 0xFD, 9])
    empty = ref_wcomp.compress(bytes(8), size=2, kernel_group=1, elements_per_kernel=2)
    assert empty.wmb[0] == 1 and empty.group_sizes(2) == [2, 0]  # the hardware needs one stored element


@SETTINGS
@given(seed=st.integers(0, 2**32 - 1), size=st.sampled_from([1, 2]), density=st.sampled_from([0.0, 0.2, 0.9, 1.0]))
def test_compress_round_trip(seed, size, density):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 3000))
    values = rng.integers(0, 1 << (8 * size), n)
    values[rng.random(n) >= density] = 0
    raw = b"".join(int(v).to_bytes(size, "little") for v in values)
    comp = ref_wcomp.compress(raw, size=size, kernel_group=3, elements_per_kernel=n if n < 7 else 1)
    assert ref_wcomp.decompress(comp.wmb, comp.stream, elements=n, size=size) == raw
    stored = max(1, int(np.count_nonzero(values)))
    assert len(comp.stream) == -(-stored * size // 128) * 128
    assert len(comp.wmb) == -(-n // 1024) * 128
    groups = -(-n // (3 * (n if n < 7 else 1)))
    assert sum(comp.group_sizes(groups)) == stored * size
