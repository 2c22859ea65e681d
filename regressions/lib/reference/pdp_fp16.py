"""Reference math for PDP fp16 pooling, simulating the cmod's element stream one value at a time.

Rules: the nv_full cmod ``cmod/pdp/NV_NVDLA_pdp.cpp`` (``PoolingStage0SequenceCommon``: the loop over
input elements and kernel taps, ``LineOperation``, ``PoolingStage0Calc``) with the fp16 bodies of
``cmod/hls_wrapper/pdp_hls_wrapper.cpp`` (``HLS_PDP_PoolingStage0Calc_FP16_W/_H``,
``HLS_PDP_PoolingStage1Calc_FP16``).

Unlike the golden model, which works per output window on whole cubes, this walks the input in raster
order exactly as the cmod does: every input element updates the line-operation entry of each output
column it belongs to, with the cmod's "first element" and left/right padding conditions evaluated per
(element, tap); the last tap of a window row passes the row to the vertical stage, which has the same
structure. Floats use the exact-fraction emulation of ``regressions.lib.reference.sdp_fp16``; nothing here
imports the golden model.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Sequence

import numpy as np

from .arith import check_range, check_unsigned
from .sdp_fp16 import F16, F17, fp16_to_fp17, fp_add, fp_max, fp_min, fp_mul, is_nan, narrow, round_to_format

#: FP17 pattern of a kernel width k (the cmod's ``kernel_width_map``, 1.0 .. 7.0; an 8-wide kernel reads
#: past that table in the cmod -- undefined -- and the golden model continues the pattern with 8.0).
KERNEL_WIDTH_FP17 = {k: round_to_format(0, Fraction(k), F17, denormals=False) for k in range(1, 9)}


def _add(a: int, b: int) -> int:
    return fp_add(a, b, F17)


def pool_fp16(
    x,
    *,
    method: str,
    kernel: tuple[int, int],
    stride: tuple[int, int],
    pad: tuple[int, int, int, int] = (0, 0, 0, 0),
    pad_values: Sequence[int] = (0,) * 7,
    recip_w: int = 0x7C00,
    recip_h: int = 0x7C00,
    out_hw: tuple[int, int],
    nan_to_zero: bool = False,
) -> np.ndarray:
    """PDP fp16 pooling of a (C, H, W) cube of fp16 bit patterns; returns (C, OH, OW) fp16 patterns.

    ``kernel`` = (kh, kw), ``stride`` = (sh, sw), ``pad`` = (top, left, bottom, right) as in
    :func:`regressions.lib.reference.pdp.pool`. ``pad_values`` are the raw PAD_VALUE_1X..7X fields (their low
    17 bits are FP17 patterns); ``recip_w``/``recip_h`` are FP17 patterns (firmware: 0x7C00 = 1.0,
    0x7800 = 0.5, ...). ``nan_to_zero``: D_NAN_FLUSH_TO_ZERO on data read from memory.

    * max/min: fp16 sign-magnitude comparison (a NaN operand wins, the accumulator first).
    * avg: FP17 sums in stream order, pads added after each tap (zero except at a row's last real tap),
      rows multiplied by ``kw`` in FP17 for vertical pads; then ``sum * recip_w * recip_h`` -> fp16.
    """
    data = np.asarray(x)
    if data.ndim != 3:
        raise ValueError("x must be (C, H, W)")
    if method not in ("max", "min", "avg"):
        raise ValueError(f"method={method!r} must be 'max', 'min' or 'avg'")
    channels, height, width = data.shape
    kh, kw = (check_range("kernel", k, 1, 8) for k in kernel)
    sh, sw = (check_range("stride", s, 1, 16) for s in stride)
    pt, pl, pb, pr = (check_range("pad", p, 0, 7) for p in pad)
    out_h, out_w = out_hw
    if len(pad_values) != 7:
        raise ValueError("pad_values must hold PAD_VALUE_1X..7X")
    pads = [check_unsigned("pad_value", int(v) & 0x7FFFF, 19) & 0x1FFFF for v in pad_values]
    recip_w = check_unsigned("recip_w", recip_w, 17)
    recip_h = check_unsigned("recip_h", recip_h, 17)
    kw17 = KERNEL_WIDTH_FP17[kw]
    average = method == "avg"

    def cmp(a: int, b: int) -> int:  # HLS_fp16_max/min(a, b): a NaN a wins, then a NaN b
        return fp_max(a, b, F16) if method == "max" else fp_min(a, b, F16)

    out = np.zeros((channels, out_h, out_w), dtype=np.int64)
    for c in range(channels):
        line: dict[int, int] = {}  # line-operation entries by output column
        acc: dict[tuple[int, int], int] = {}  # line buffer by (output row, output column)
        for h in range(height):
            for w in range(width):
                b = int(data[c, h, w]) & 0xFFFF
                if nan_to_zero and is_nan(b, F16):
                    b = 0
                for kwi in range(kw):
                    if not (pl + w >= kwi and pl + w + kw - kwi <= pl + pr + width and (pl + w - kwi) % sw == 0):
                        continue
                    ox = (pl + w - kwi) // sw
                    first = w == 0 or kwi == 0
                    left = w + 1 < kw and (kwi + 1 == kw or (w + 1 == width and w < kwi and pl > 0))
                    right = w + kw - kwi > width and w + 1 == width
                    pad_l = pads[kw - (w + 1) - 1] if left else 0
                    pad_r = pads[kw - (kwi + 1) - 1] if right and not left else 0
                    if average:
                        value = fp16_to_fp17(b) if first else _add(line[ox], fp16_to_fp17(b))
                        line[ox] = _add(_add(value, pad_l), pad_r)
                    else:
                        line[ox] = b if first else cmp(line[ox], b)
                    if not (kwi + 1 == kw or (w + kw - kwi > width and w + 1 == width)):
                        continue
                    for khi in range(kh):
                        if not (pt + h >= khi and pt + h + kh - khi <= pt + pb + height and (pt + h - khi) % sh == 0):
                            continue
                        oy = (pt + h - khi) // sh
                        first_row = h == 0 or khi == 0
                        top = h + 1 < kh and (khi + 1 == kh or (h + 1 == height and h < khi))
                        bottom = h + kh - khi > height and h + 1 == height
                        pad_t = pads[kh - (h + 1) - 1] if top else 0
                        pad_b = pads[kh - (khi + 1) - 1] if bottom and not top else 0
                        row = line[ox]
                        if average:
                            value = row if first_row else _add(row, acc[oy, ox])
                            value = _add(value, fp_mul(pad_t, kw17, F17))
                            acc[oy, ox] = _add(value, fp_mul(pad_b, kw17, F17))
                        else:
                            acc[oy, ox] = row if first_row else cmp(row, acc[oy, ox])
        for oy in range(out_h):
            for ox in range(out_w):
                total = acc[oy, ox]
                if average:
                    total = narrow(fp_mul(fp_mul(total, recip_w, F17), recip_h, F17), F17, F16, True)
                out[c, oy, ox] = total
    return out
