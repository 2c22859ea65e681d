"""The image-input and batch references on hand-computed cases. Golden's pixel-format table against the
reference's reading of the format names is the suite ``regressions/golden/test_conv_image_reference.py``."""

from __future__ import annotations

import numpy as np
import pytest

from regressions.lib.reference.conv import direct_conv
from regressions.lib.reference.conv_batch import batched_conv, place_batches
from regressions.lib.reference.conv_image import convert_pixels, image_conv, layout, unpack_pixels

pytestmark = pytest.mark.reference

#: Bytes per pixel of plane 0 per format, as NVDLA's firmware tabulates them (kmd conv.c ``map_img_fmt``).
FIRMWARE_BYTES = (1, 2, 2, 2, 2, 2, 8, 8, 8, 8, 8, 8, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4,
                  1, 1, 2, 2, 2, 2, 2, 2)


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
