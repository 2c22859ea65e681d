"""Image (pixel) input convolutions and batched direct convolutions.

Image layers (``regressions.lib.programs.image.ImageLayer``): every PIXEL_FORMAT the config fetches (8-bit lanes
everywhere, 16-bit and packed 10-bit lanes where there is an int16 datapath; fp16 pixels are not modelled),
PIXEL_X_OFFSET inside the first atom (RTL assertion), line and chroma pitches of whole atoms beyond the
fetched bytes, PIXEL_SIGN_OVERRIDE, CVT with or without per-lane means (mandatory for 16-bit lanes on the int8
datapath), CDMA left/right and CSC top padding with raw 16-bit pad words (only the low byte counts), strides,
and post Y extension where the extended channels fit one atom block. Windows stay inside the padded line
(the model refuses reads past it). Batched layers: ``conv_layers``' direct convolutions with 2..4 batches,
batch strides with 32-byte gaps (so output lines start on and off 64-byte boundaries), on configs with batch
mode; the batched input must fit the CBUF data banks.
"""
from __future__ import annotations

import numpy as np
from hypothesis import assume
from hypothesis import strategies as st

from compiler.codegen.conv_image import FORMATS, image_formats
from golden.config import HwConfig
from golden.engines.conv_datapath import cbuf_geometry, entries_per_slice
from regressions.lib.strategies import (
    field_ints,
    field_range,
    int8_cube,
    ints,
    magnitude_bits,
    rescale_shift,
    signed_bits,
    values,
)
from regressions.lib.programs.image import BatchConvLayer, ImageLayer
from regressions.lib.strategies.conv import MAX_CLIP_TRUNCATE, conv_layers

#: Multiply-accumulates of the plain-loop reference (K x OH x OW x lanes x R x S) at most.
WORK = 40_000
MAX_SIDE = 16
MAX_PAD = 5
MAX_KERNEL = 6


def _pad(draw, hw: HwConfig, unit: str, name: str) -> int:
    return draw(field_ints(hw, unit, "D_ZERO_PADDING", name, hi=MAX_PAD, typical=(0, 2)))


def _pad_word(draw, hw: HwConfig, unit: str) -> int:
    """A raw 16-bit pad word: usually an int8 pattern, sometimes with a high byte the int8 datapath ignores."""
    return draw(field_ints(hw, unit, "D_ZERO_PADDING_VALUE", "PAD_VALUE", typical=(0, 255)))


@st.composite
def image_layers(draw, hw: HwConfig) -> ImageLayer:
    """An image convolution legal on ``hw`` (int8 datapath)."""
    fmt = draw(st.sampled_from(image_formats(hw)))
    sizes, lanes, bits = FORMATS[fmt]
    atom = hw.memory_atomic_size
    x_off = draw(ints((0, atom // sizes[0] - 1), typical=(0, 1)))
    width = draw(st.integers(1, MAX_SIDE))
    height = draw(st.integers(1, MAX_SIDE // 2))
    pl, pr = _pad(draw, hw, "CDMA", "PAD_LEFT"), _pad(draw, hw, "CDMA", "PAD_RIGHT")
    pt, pb = _pad(draw, hw, "CSC", "PAD_TOP"), draw(st.integers(0, MAX_PAD))
    padded = pl + width + pr
    s = draw(st.integers(1, min(padded, MAX_KERNEL)))
    r = draw(st.integers(1, min(height + pt + pb, MAX_KERNEL)))
    sy = draw(field_ints(hw, "CSC", "D_CONV_STRIDE_EXT", "CONV_Y_STRIDE_EXT", typical=(0, 2))) + 1
    sx = draw(field_ints(hw, "CSC", "D_CONV_STRIDE_EXT", "CONV_X_STRIDE_EXT", typical=(0, 2))) + 1
    oh, ow = (height + pt + pb - r) // sy + 1, (padded - s) // sx + 1
    k_top = max(1, min(2 * hw.mac_atomic_k + 1, WORK // (oh * ow * lanes * r * s)))
    k = draw(st.one_of(st.integers(1, k_top), st.just(min(hw.mac_atomic_k, k_top))))
    extended = s * lanes
    y_ext = draw(st.sampled_from([e for e in (0, 1, 2) if e == 0 or extended <= hw.mac_atomic_c >> e]))
    # The whole image in the data banks, one bank left for the weights.
    entry, depth = cbuf_geometry(hw)
    assume(height * -(-padded * lanes // entry) <= (hw.cbuf_bank_number - 1) * depth)

    plane0 = values(draw, (height, (x_off + width) * sizes[0]), (0, 255))
    plane1 = None
    line = -(-(x_off + width) * sizes[0] // atom) * atom + atom * draw(st.integers(0, 2))
    uv = 0
    if len(sizes) == 2:
        pairs = atom // sizes[1]
        plane1 = values(draw, (height, (x_off % pairs + width) * sizes[1]), (0, 255))
        uv = -(-(x_off % pairs + width) * sizes[1] // atom) * atom + atom * draw(st.integers(0, 2))

    cvt = means = None
    if bits == 16 or draw(st.booleans()):
        typical = (-2000, 2000) if bits == 16 else (-128, 255)
        scale = draw(field_ints(hw, "CDMA", "D_CVT_SCALE", "CVT_SCALE", signed=True, typical=(-512, 512)))
        cvt = (
            draw(field_ints(hw, "CDMA", "D_CVT_OFFSET", "CVT_OFFSET", signed=True, typical=typical)),
            scale,
            rescale_shift(draw, field_range(hw, "CDMA", "D_CVT_CFG", "CVT_TRUNCATE"), bits + 1, scale),
        )
        if draw(st.booleans()):
            means = tuple(draw(field_ints(hw, "CDMA", "D_MEAN_GLOBAL_0", "MEAN_RY", signed=True, typical=typical))
                          for _ in range(4))
    w = values(draw, (k, lanes, r, s), signed_bits(8))
    acc_bits = 8 + magnitude_bits(w) + (lanes * r * s).bit_length() // 2 + 1
    clip = draw(field_ints(hw, "CACC", "D_CLIP_CFG", "CLIP_TRUNCATE", hi=MAX_CLIP_TRUNCATE))
    out_bits = max(1, acc_bits - clip)
    out_scale = draw(field_ints(hw, "SDP", "D_CVT_SCALE", "CVT_SCALE", signed=True, typical=(-1024, 1024)))
    near = 1 << max(0, out_bits - 2)
    out_cvt = (
        draw(field_ints(hw, "SDP", "D_CVT_OFFSET", "CVT_OFFSET", signed=True, typical=(-near, near))),
        out_scale,
        rescale_shift(draw, field_range(hw, "SDP", "D_CVT_SHIFT", "CVT_SHIFT"), out_bits + 1, out_scale),
    )
    return ImageLayer(
        fmt=fmt, plane0=plane0, w=w, width=width, plane1=plane1, x_offset=x_off, line_stride=line,
        uv_line_stride=uv, signed=draw(st.booleans()), cvt=cvt, means=means, stride=(sy, sx), pad_top=pt,
        pad_left=pl, pad_right=pr, out_hw=(oh, ow), cdma_pad=_pad_word(draw, hw, "CDMA"),
        csc_pad=_pad_word(draw, hw, "CSC"), y_extension=y_ext, clip_truncate=clip, out_cvt=out_cvt,
    )


@st.composite
def batch_layers(draw, hw: HwConfig) -> BatchConvLayer:
    """A batched direct convolution legal on ``hw`` (which must have batch mode)."""
    layer = draw(conv_layers(hw))
    c, h, w = layer.x.shape
    capacity = (hw.cbuf_bank_number - 1) * cbuf_geometry(hw)[1]
    most = min(4, hw.max_batch, capacity // (h * entries_per_slice(hw, c, w)))
    assume(most >= 2)
    n = draw(st.integers(2, most))
    xs = [layer.x] + [int8_cube(draw, c, h, w) for _ in range(n - 1)]
    unit = hw.address_unit if hw.address_unit > 1 else 32
    return BatchConvLayer(
        xs=np.stack(xs), w=layer.w, stride=layer.stride, dilation=layer.dilation, pad=layer.pad,
        pad_value=layer.pad_value, out_hw=layer.output_hw(), clip_truncate=layer.clip_truncate, cvt=layer.cvt,
        out_cvt=layer.out_cvt, src_gap=unit * draw(st.integers(0, 3)), dst_gap=unit * draw(st.integers(0, 3)),
    )
