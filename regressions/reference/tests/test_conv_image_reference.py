"""The image-input and batch references: hand-computed cases, and the two independent derivations of the
pixel formats (the reference parses format names; golden holds a table from the cmod) agreeing on every
format, offset and conversion."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from golden.engines import cdma_image as golden_image
from regressions.reference.conv import direct_conv
from regressions.reference.conv_batch import batched_conv, place_batches
from regressions.reference.conv_image import (
    FORMAT_NAMES,
    convert_pixels,
    image_conv,
    layout,
    unpack_pixels,
)

pytestmark = pytest.mark.reference

SETTINGS = settings(max_examples=60, deadline=None, derandomize=True, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
#: Bytes per pixel of plane 0 per format, as NVDLA's firmware tabulates them (kmd conv.c ``map_img_fmt``).
FIRMWARE_BYTES = (1, 2, 2, 2, 2, 2, 8, 8, 8, 8, 8, 8, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4,
                  1, 1, 2, 2, 2, 2, 2, 2)
NON_FP16 = [code for code in range(36) if not FORMAT_NAMES[code].endswith("_F")]


# ---- hand-computed cases -----------------------------------------------------------------------------------
def test_layout_from_names():
    assert [layout(c)["bytes"][0] for c in range(36)] == list(FIRMWARE_BYTES)
    abgr = layout(12)  # A8B8G8R8: R is bits 7..0
    assert abgr["planes"] == [[(3, 24, 8, 32), (2, 16, 8, 32), (1, 8, 8, 32), (0, 0, 8, 32)]]
    assert layout(26)["planes"][0][1] == (0, 16, 8, 32)  # A8Y8U8V8: Y is byte 2, lane 0
    assert layout(20)["packed"] and layout(20)["lane_bits"] == 16
    y10 = layout(30)  # Y10___U10V10: 16-bit containers, chroma pair of 4 bytes, V first
    assert y10["bytes"] == [2, 4] and y10["planes"][1] == [(1, 16, 16, 32), (2, 0, 16, 32)]
    assert layout(5)["fp16"] and not layout(4)["fp16"]


def test_unpack_offsets_and_chroma_pairs():
    # Y8___V8U8, atom 8: pairs per atom 4; x offset 5 -> luma pixel 5, chroma pair 5 mod 4 = 1.
    luma = np.arange(8).reshape(1, 8)
    chroma = np.array([[10, 11, 12, 13, 14, 15, 16, 17]])
    lanes = unpack_pixels(29, luma, chroma, width=2, x_offset=5, atom_bytes=8)
    assert lanes[:, 0, :].tolist() == [[5, 6], [12, 14], [13, 15]]  # (Y, U, V): V8U8 has U in byte 0


def test_conversion_by_hand():
    raw = np.array([200, 3]).reshape(2, 1, 1)
    # unsigned 200 - mean 10 = 190, x2 = 380, >>1 = 190 -> sat8 127; lane 1: (3 - (-5)) * 2 >> 1 = 8
    assert convert_pixels(raw, 8, signed=False, cvt=(0, 2, 1), means=(10, -5, 0, 0), out_bits=8).ravel().tolist() \
        == [127, 8]
    # signed override: 200 is -56; (-56 - 0) * 2 >> 1 = -56
    assert convert_pixels(raw, 8, signed=True, cvt=(0, 2, 1), means=None, out_bits=8).ravel().tolist() == [-56, 3]
    # no CVT: raw bits as int8
    assert convert_pixels(raw, 8, signed=False, cvt=None, means=(1, 1, 1, 1), out_bits=8).ravel().tolist() == [-56, 3]


def test_image_conv_by_hand():
    # One lane, 1x2 image [1, 2], kernel 1x2 [[3, 4]], CDMA pad left 1 (value 5), right 0, CSC pad 7, top 1.
    x = np.array([[[1, 2]]])
    w = np.array([[[[3, 4]]]])
    out = image_conv(x, w, stride=(1, 1), pad_top=1, pad_left=1, pad_right=0, cdma_pad=5, csc_pad=7,
                     out_hw=(2, 2))
    # row -1 is CSC padding: 7*3 + 7*4 = 49 for both columns;
    # row 0: (pad 5, 1) -> 15 + 4 = 19; (1, 2) -> 3 + 8 = 11
    assert out[0].tolist() == [[49, 49], [19, 11]]
    assert image_conv(x, w, stride=(1, 1), pad_top=0, pad_left=0, pad_right=0, cdma_pad=0x1FF, csc_pad=0,
                      out_hw=(1, 1), clip_truncate=1)[0, 0, 0] == 6  # (3 + 8) / 2 = 5.5 -> 6
    with pytest.raises(ValueError):
        image_conv(x, w, stride=(1, 1), pad_top=0, pad_left=0, pad_right=0, cdma_pad=0, csc_pad=0, out_hw=(1, 2))


def test_batches_are_independent_and_placed_at_their_stride():
    xs = np.arange(2 * 2 * 2 * 2).reshape(2, 2, 2, 2) - 8
    w = np.ones((1, 2, 1, 1), dtype=np.int64)
    acc = batched_conv(xs, w, out_hw=(2, 2))
    for b in range(2):
        assert np.array_equal(acc[b], direct_conv(xs[b], w, out_hw=(2, 2)))
    cube = np.zeros((1, 4, 1, 2), dtype=np.int64)
    cube[0, 1, 0, 1] = -1
    data = place_batches(np.concatenate([cube, cube]), atom=4, line_stride=8, surface_stride=8, batch_stride=12,
                         size=24)
    # element (c=1, y=0, x=1) sits at x*atom + c = 5, and 12 further for batch 1
    assert [i for i, v in enumerate(data) if v] == [5, 17] and data[5] == 0xFF


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
