"""The compiled fp16 CMAC + CACC (``golden.engines.conv_fp16_jit``) against the array code it replaces for
NaN-free inputs (``direct_conv_fp16(..., compiled=False)``) and against the plain-loop reference, bit for bit,
over drawn geometries and values: exponent spreads wide enough to shift products out, Inf, denormals, +-0,
pad values, strides, dilations, partial last slices."""
from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from golden.engines import conv_fp16 as F
from golden.engines.conv_datapath import ConvGeometry
from regressions.lib.reference import conv_fp16 as ref

SPECIAL = np.array([0x0000, 0x8000, 0x7C00, 0xFC00, 0x0001, 0x83FF, 0x7BFF, 0x0400], dtype=np.int64)


def _bits(rng: np.random.Generator, shape, spread: float, special: float) -> np.ndarray:
    """fp16 patterns of N(0,1) * 2^U(-spread, spread), some replaced by special values."""
    v = rng.standard_normal(shape) * np.exp2(rng.uniform(-spread, spread, shape))
    with np.errstate(over="ignore"):  # beyond fp16: Inf
        b = v.astype(np.float16).view(np.uint16).astype(np.int64)
    pick = rng.random(shape) < special
    return np.where(pick, SPECIAL[rng.integers(0, len(SPECIAL), shape)], b)


@st.composite
def layers(draw, max_channels: int = 140):
    c, k = draw(st.integers(1, max_channels)), draw(st.integers(1, 6))
    r, s = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    sy, sx, dy, dx = (draw(st.integers(1, 2)) for _ in range(4))
    pt, pl = draw(st.integers(0, r - 1)), draw(st.integers(0, s - 1))
    h = draw(st.integers((r - 1) * dy + 1, 6))
    w = draw(st.integers((s - 1) * dx + 1, 6))
    oh, ow = (h + pt - (r - 1) * dy - 1) // sy + 1, (w + pl - (s - 1) * dx - 1) // sx + 1
    pad_value = draw(st.sampled_from([0, 0x3C00, 0xC500, 0x7C00]))
    geom = ConvGeometry(c, h, w, k, r, s, oh, ow, stride_y=sy, stride_x=sx, dilation_y=dy, dilation_x=dx,
                        pad_top=pt, pad_left=pl, pad_value=pad_value, dtype="fp16")
    return geom, draw(st.floats(0, 20)), draw(st.sampled_from([0.0, 0.05, 0.3])), draw(st.integers(0, 2**31))


def _operands(case) -> tuple[ConvGeometry, np.ndarray, np.ndarray]:
    geom, spread, special, seed = case
    rng = np.random.default_rng(seed)
    x = _bits(rng, (geom.channels, geom.height, geom.width), spread, special)
    w = _bits(rng, (geom.kernels, geom.channels, geom.kernel_height, geom.kernel_width), spread, special)
    return geom, x, w


@settings(max_examples=60, deadline=None)
@given(case=layers())
def test_compiled_equals_array_code(case) -> None:
    geom, x, w = _operands(case)
    got = F.direct_conv_fp16(x, w, geom)
    want = F.direct_conv_fp16(x, w, geom, compiled=False)
    assert got.dtype == want.dtype == np.uint32
    np.testing.assert_array_equal(got, want)


@settings(max_examples=12, deadline=None)
@given(case=layers(max_channels=70))
def test_compiled_equals_the_plain_loop_reference(case) -> None:
    geom, x, w = _operands(case)
    got = F.direct_conv_fp16(x, w, geom)
    want = ref.direct_conv_fp16(x, w, stride=(geom.stride_y, geom.stride_x),
                                dilation=(geom.dilation_y, geom.dilation_x),
                                pad=(geom.pad_top, geom.pad_left), pad_value=geom.pad_value,
                                out_hw=(geom.out_height, geom.out_width))
    np.testing.assert_array_equal(got, np.asarray(want, dtype=np.uint32))
