"""Reference math for the convolution pipe: CDMA input conversion, CSC + CMAC + CACC.

Rules: NVDLA_NOTES.md section 4, "CDMA input conversion", "CSC + CMAC", "CACC"
(cmod ``cmod/hls/cdma_libs/cdma_cvt.cpp`` and ``cmod/cacc/NV_NVDLA_cacc.cpp``).
"""

from __future__ import annotations

import numpy as np

from .arith import check_range, check_signed, check_unsigned, rha, sat, sign_extend


def cdma_input_cvt(x, offset: int, scale: int, truncate: int, out_bits: int = 8) -> np.ndarray:
    """CDMA feature-mode input conversion (``D_CVT_CFG.CVT_EN``), elementwise.

    ``x' = sat8(sat17(rha((x - CVT_OFFSET) * CVT_SCALE, CVT_TRUNCATE)))`` with a signed
    16-bit offset and scale and a 6-bit truncate.  The cmod subtracts at 18 bits and
    multiplies at 34 bits, which never overflow for 17-bit inputs, so plain ints are exact.
    MEAN registers are ignored in feature mode and padding is injected later, unconverted.
    int16 (``out_bits=16``) ends in ``sat16`` instead (cmod ``cdma_cvt.cpp``).
    """
    offset = check_signed("offset", offset, 16)
    scale = check_signed("scale", scale, 16)
    truncate = check_unsigned("truncate", truncate, 6)
    src = np.asarray(x)
    out = np.zeros(src.shape, dtype=np.int64)
    for index in np.ndindex(src.shape):
        value = check_signed("x", int(src[index]), 17)
        out[index] = sat(sat(rha((value - offset) * scale, truncate), 17), out_bits)
    return out


def direct_conv(
    x,
    w,
    *,
    stride: tuple[int, int] = (1, 1),
    dilation: tuple[int, int] = (1, 1),
    pad: tuple[int, int] = (0, 0),
    pad_value: int = 0,
    out_hw: tuple[int, int],
    clip_truncate: int = 0,
    precision: str = "int8",
) -> np.ndarray:
    """Direct convolution as CSC + CMAC + CACC compute it; returns int64 (K, OH, OW).

    ``acc[k,oy,ox] = sum_{c,r,s} w[k,c,r,s] * X[c, oy*Sy + r*Dy - pad_top, ox*Sx + s*Dx - pad_left]``
    where taps outside the input take the CSC pad value (the raw low byte of
    ``D_ZERO_PADDING_VALUE``, never converted).  The CACC keeps a 48-bit saturating
    accumulator; an int8 sum cannot reach 2**47, so the reference sums exactly and
    saturates once.  Output: ``sat32(rha(acc, CLIP_TRUNCATE))``.

    ``x`` is the already-converted (C, H, W) input, ``w`` is (K, C, R, S) int8,
    ``stride`` = (Sy, Sx) and ``dilation`` = (Dy, Dx) are the actual factors (register + 1),
    ``pad`` = (top, left).  ``pad_value`` may be given signed or as the raw byte; its low
    8 bits are used.

    ``precision="int16"``: weights and data are int16, the pad value is the low 16 bits of
    ``D_ZERO_PADDING_VALUE``, and the sum is accumulated with the 48-bit saturation applied
    after every product (tap order c, r, s); for sums that never reach 2**47 this equals the
    exact sum, which is the only range the golden model accepts.
    """
    if precision not in ("int8", "int16"):
        raise ValueError(f"precision must be int8 or int16, not {precision!r}")
    bits = 8 if precision == "int8" else 16
    data = np.asarray(x)
    weights = np.asarray(w)
    if data.ndim != 3 or weights.ndim != 4:
        raise ValueError("x must be (C, H, W) and w must be (K, C, R, S)")
    channels, height, width = data.shape
    kernels, w_channels, kernel_h, kernel_w = weights.shape
    if w_channels != channels:
        raise ValueError(f"weight channels {w_channels} != input channels {channels}")
    stride_y, stride_x = (check_range("stride", s, 1, 1 << 16) for s in stride)
    dilation_y, dilation_x = (check_range("dilation", d, 1, 1 << 16) for d in dilation)
    pad_top, pad_left = (check_range("pad", p, 0, 1 << 16) for p in pad)
    out_h, out_w = (check_range("out_hw", o, 1, 1 << 16) for o in out_hw)
    clip_truncate = check_unsigned("clip_truncate", clip_truncate, 5)
    pad_byte = sign_extend(pad_value, bits)

    out = np.zeros((kernels, out_h, out_w), dtype=np.int64)
    for k in range(kernels):
        for oy in range(out_h):
            for ox in range(out_w):
                acc = 0
                for c in range(channels):
                    for r in range(kernel_h):
                        for s in range(kernel_w):
                            iy = oy * stride_y + r * dilation_y - pad_top
                            ix = ox * stride_x + s * dilation_x - pad_left
                            if 0 <= iy < height and 0 <= ix < width:
                                value = int(data[c, iy, ix])
                            else:
                                value = pad_byte
                            acc += check_signed("w", int(weights[k, c, r, s]), bits) * value
                            if bits == 16:
                                acc = sat(acc, 48)
                acc = sat(acc, 48)
                out[k, oy, ox] = sat(rha(acc, clip_truncate), 32)
    return out


def direct_conv_int8_vectorized(x, w, *, stride: tuple[int, int] = (1, 1), dilation: tuple[int, int] = (1, 1),
                                pad: tuple[int, int] = (0, 0), pad_value: int = 0, out_hw: tuple[int, int],
                                clip_truncate: int = 0, precision: str = "int8") -> np.ndarray:
    """``direct_conv`` for int8 (or int16), the same formula summed per tap with numpy int64 products instead
    of one Python multiply per MAC (full-size layers: a ResNet-50 conv is 10^8 MACs). Exact while no partial
    sum reaches 2^47 (int8 never does; int16 below 2^17 products per output): the one saturation at the end is
    then the CACC's. ``tests`` check it equals ``direct_conv``."""
    if precision not in ("int8", "int16"):
        raise ValueError(f"precision {precision!r}: int8 or int16")
    data = np.asarray(x, dtype=np.int64)
    weights = np.asarray(w, dtype=np.int64)
    channels, height, width = data.shape
    kernels, w_channels, kernel_h, kernel_w = weights.shape
    if w_channels != channels:
        raise ValueError(f"weight channels {w_channels} != input channels {channels}")
    (sy, sx), (dy, dx), (pt, pl), (oh, ow) = stride, dilation, pad, out_hw
    clip_truncate = check_unsigned("clip_truncate", clip_truncate, 5)
    pad_byte = sign_extend(pad_value, 8 if precision == "int8" else 16)
    span_h, span_w = (oh - 1) * sy + (kernel_h - 1) * dy + 1, (ow - 1) * sx + (kernel_w - 1) * dx + 1
    plane = np.full((channels, max(span_h, pt + height), max(span_w, pl + width)), pad_byte, dtype=np.int64)
    plane[:, pt:pt + height, pl:pl + width] = data
    acc = np.zeros((kernels, oh * ow), dtype=np.int64)
    for r in range(kernel_h):
        for s in range(kernel_w):
            taps = plane[:, r * dy: r * dy + (oh - 1) * sy + 1: sy, s * dx: s * dx + (ow - 1) * sx + 1: sx]
            acc += weights[:, :, r, s] @ taps.reshape(channels, oh * ow)
    acc = np.clip(acc, -(1 << 47), (1 << 47) - 1)
    return np.clip(_rha_array(acc, clip_truncate), -(1 << 31), (1 << 31) - 1).reshape(kernels, oh, ow)


def _rha_array(v: np.ndarray, shift: int) -> np.ndarray:
    """``rha`` over an int64 array: round half away from zero, ``shift`` >= 0."""
    if shift == 0:
        return v
    mag = (np.abs(v) + (1 << (shift - 1))) >> shift
    return np.where(v < 0, -mag, mag)
