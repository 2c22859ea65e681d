"""The two independent derivations of the pixel formats (the reference parses format names; golden holds a
table from the cmod) agreeing on every format, offset and conversion. The reference's hand-computed cases
are unit tests: ``tests/regressions/lib/reference/test_conv_image_reference.py``."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from golden.engines import cdma_image as golden_image
from regressions.lib.reference.conv_image import FORMAT_NAMES, convert_pixels, layout, unpack_pixels

pytestmark = pytest.mark.reference

SETTINGS = settings(max_examples=60, deadline=None, derandomize=True, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
NON_FP16 = [code for code in range(36) if not FORMAT_NAMES[code].endswith("_F")]


# ---- the two derivations of the pixel formats agree -----------------------------------------------------------
@pytest.mark.parametrize("code", NON_FP16)
def test_golden_table_matches_the_names(code):
    fmt = golden_image.PIXEL_FORMATS[code]
    info = layout(code)
    assert fmt.name == f"T_{FORMAT_NAMES[code]}"
    assert (fmt.lanes, fmt.lane_bits, fmt.bpp0) == (info["lanes"], info["lane_bits"], info["bytes"][0])
    assert fmt.bpp1 == (info["bytes"][1] if len(info["bytes"]) == 2 else 0)
    rng = np.random.default_rng(code)
    for atom in (8, 32):
        for x_off in range(atom // fmt.bpp0):
            width, height = 3, 2
            p0 = rng.integers(0, 256, (height, (x_off + width) * fmt.bpp0))
            p1 = None
            first = 0
            if fmt.bpp1:
                first = x_off % (atom // fmt.bpp1)
                p1 = rng.integers(0, 256, (height, (first + width) * fmt.bpp1))
            want = unpack_pixels(code, p0, p1, width, x_off, atom)
            g0 = p0[:, x_off * fmt.bpp0:].reshape(height, width, fmt.bpp0).astype(np.uint8)
            g1 = None if p1 is None else p1[:, first * fmt.bpp1:].reshape(height, width, fmt.bpp1).astype(np.uint8)
            assert np.array_equal(golden_image.pixel_lanes(fmt, g0, g1), want), (code, atom, x_off)


@SETTINGS
@given(code=st.sampled_from(NON_FP16), signed=st.booleans(), use_cvt=st.booleans(), use_means=st.booleans(),
       offset=st.integers(-(1 << 15), (1 << 15) - 1), scale=st.integers(-(1 << 15), (1 << 15) - 1),
       truncate=st.integers(0, 63), means=st.tuples(*[st.integers(-(1 << 15), (1 << 15) - 1)] * 4),
       out_bits=st.sampled_from([8, 16]), seed=st.integers(0, 2**32 - 1))
def test_golden_conversion_matches_the_reference(code, signed, use_cvt, use_means, offset, scale, truncate, means,
                                                 out_bits, seed):
    fmt = golden_image.PIXEL_FORMATS[code]
    if not use_cvt and fmt.lane_bits != out_bits:
        use_cvt = True  # a lane width other than the datapath's needs the converter
    rng = np.random.default_rng(seed)
    raw = rng.integers(0, 1 << fmt.lane_bits, (fmt.lanes, 2, 5))
    raw[:, 0, :] = [[0], [(1 << fmt.lane_bits) - 1], [1 << (fmt.lane_bits - 1)], [1]][: fmt.lanes]
    cvt = (offset, scale, truncate) if use_cvt else None
    kept = means if use_means else None
    want = convert_pixels(raw, fmt.lane_bits, signed=signed, cvt=cvt, means=kept, out_bits=out_bits)
    geom = golden_image.ConvGeometry(channels=1, height=1, width=1, kernels=1, kernel_height=1, kernel_width=1,
                                     out_height=1, out_width=1)
    op = golden_image.ImageConv(fmt=fmt, width=5, height=2, x_offset=0, line_stride=0, uv_line_stride=0, pad_left=0,
                                pad_right=0, cdma_pad=0, signed=signed, cvt=cvt, means=kept, post_y=1, x_stride=1,
                                geometry=geom)
    assert np.array_equal(golden_image.convert(raw, op, out_bits), want)
