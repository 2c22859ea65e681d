"""Reference math for PDP pooling (int8 and int16; fp16 is in ``pdp_fp16``).

Rules: NVDLA_NOTES.md section 4 "PDP" (cmod ``cmod/pdp/NV_NVDLA_pdp.cpp``: ``LineOperation``,
``PoolingStage0Calc``, ``PoolingStage1Calc``, ``int_sign_extend``).
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from .arith import check_range, check_signed, check_unsigned, rha, sign_extend

# Bit index of the sign bit the cmod uses for PAD_VALUE_1X..7X: widths 8/9/10/10/11/11/11 (int8) and
# 16/17/18/18/19/19/19 (int16).
_PAD_SIGN_BIT = {"int8": (7, 8, 9, 9, 10, 10, 10), "int16": (15, 16, 17, 17, 18, 18, 18)}
# (input/output bits, accumulator bits) per precision: the cmod's line buffer is int16_t for int8 data
# and int32_t for int16 data.
_WIDTHS = {"int8": (8, 16), "int16": (16, 32)}


def pdp_pad_value(raw: int, n: int, precision: str = "int8") -> int:
    """Value the cmod uses for register ``PAD_VALUE_{n}X``, as an int16 (int8 path) or int32 (int16).

    The cmod's ``int_sign_extend`` ORs ones above the sign bit (int8: bit 7, 8, 9, 9, 10, 10, 10
    for n = 1..7; int16: 15, 16, 17, 17, 18, 18, 18) into the raw 19-bit field and stores the
    result in the accumulator type:

    * sign bit set: the low ``sign_bit + 1`` bits, sign-extended;
    * sign bit clear: the raw field itself, wrapped to the accumulator (stray high bits survive).

    For a raw value that fits its width this is plain sign extension.  ``raw`` may be
    given as the 19-bit field or as a negative Python int (its low 19 bits are used).
    """
    n = check_range("n", n, 1, 7)
    field = int(raw) & 0x7FFFF
    sign_bit = _PAD_SIGN_BIT[precision][n - 1]
    if (field >> sign_bit) & 1:
        return sign_extend(field, sign_bit + 1)
    return sign_extend(field, _WIDTHS[precision][1])


def pool(
    x,
    *,
    method: str,
    kernel: tuple[int, int],
    stride: tuple[int, int],
    pad: tuple[int, int, int, int] = (0, 0, 0, 0),
    pad_values: Sequence[int] = (0, 0, 0, 0, 0, 0, 0),
    recip_w: int = 0x10000,
    recip_h: int = 0x10000,
    out_hw: tuple[int, int],
    precision: str = "int8",
    average: str = "cmod",
) -> np.ndarray:
    """PDP int8/int16 pooling of a (C, H, W) cube; returns int64 (C, OH, OW) in the data range.

    Output (ox, oy) covers input columns ``[ox*sw - pad_left, +kw)`` and rows
    ``[oy*sh - pad_top, +kh)``; ``kernel`` = (kh, kw), ``stride`` = (sh, sw) are actual
    sizes (register + 1), ``pad`` = (top, left, bottom, right).

    * ``max`` / ``min``: over the valid taps only, padding is ignored.
    * ``avg``: the cmod rule.  Each valid row sums its valid taps and, if n of its kw
      columns are padding, adds ``PAD_VALUE_{n}X``; if m of the kh rows are padding, the
      total gets ``PAD_VALUE_{m}X * kw`` once.  The accumulator is an int16 (int8 data) or
      int32 (int16 data) in the cmod (it cannot overflow for in-width pad values; wrapping is
      modelled anyway).  Then ``out = rha(rha(t * RECIP_W, 16) * RECIP_H, 16)`` with unsigned
      1.16 reciprocals, and the low 8 (16) bits are stored, signed.

    ``pad_values`` are the raw PAD_VALUE_1X..7X fields (see :func:`pdp_pad_value`).
    ``average="nv_small_rtl"`` (int8 only) follows NVDLA's nv_small RTL instead (:func:`rtl_average`).
    A window reaching past ``H + pad_bottom`` / ``W + pad_right``, or one with no valid
    row or column, is never produced by the cmod and raises ValueError.
    """
    data = np.asarray(x)
    if data.ndim != 3:
        raise ValueError("x must be (C, H, W)")
    if method not in ("max", "min", "avg"):
        raise ValueError(f"method={method!r} must be 'max', 'min' or 'avg'")
    if precision not in _WIDTHS:
        raise ValueError(f"precision={precision!r} must be 'int8' or 'int16'")
    data_bits, acc_bits = _WIDTHS[precision]
    channels, height, width = data.shape
    kernel_h, kernel_w = (check_range("kernel", k, 1, 8) for k in kernel)
    stride_h, stride_w = (check_range("stride", s, 1, 16) for s in stride)
    pad_top, pad_left, pad_bottom, pad_right = (check_range("pad", p, 0, 7) for p in pad)
    out_h, out_w = (check_range("out_hw", o, 1, 1 << 16) for o in out_hw)
    if len(pad_values) != 7:
        raise ValueError("pad_values must hold PAD_VALUE_1X..7X")
    pad_by_count = {n: pdp_pad_value(raw, n, precision) for n, raw in enumerate(pad_values, start=1)}
    recip_w = check_unsigned("recip_w", recip_w, 17)
    recip_h = check_unsigned("recip_h", recip_h, 17)

    out = np.zeros((channels, out_h, out_w), dtype=np.int64)
    for oy in range(out_h):
        row_start = oy * stride_h - pad_top
        if row_start + kernel_h > height + pad_bottom:
            raise ValueError(f"output row {oy} reaches past the bottom padding")
        rows = [y for y in range(row_start, row_start + kernel_h) if 0 <= y < height]
        for ox in range(out_w):
            col_start = ox * stride_w - pad_left
            if col_start + kernel_w > width + pad_right:
                raise ValueError(f"output column {ox} reaches past the right padding")
            cols = [xx for xx in range(col_start, col_start + kernel_w) if 0 <= xx < width]
            if not rows or not cols:
                raise ValueError(f"output ({oy}, {ox}) covers padding only")
            padded_cols = kernel_w - len(cols)
            padded_rows = kernel_h - len(rows)
            for c in range(channels):
                taps = [check_signed("x", int(data[c, y, xx]), data_bits) for y in rows for xx in cols]
                if method == "max":
                    out[c, oy, ox] = max(taps)
                elif method == "min":
                    out[c, oy, ox] = min(taps)
                else:
                    total = 0
                    for y in rows:
                        total += sum(int(data[c, y, xx]) for xx in cols)
                        if padded_cols:
                            total += pad_by_count[padded_cols]
                    if padded_rows:
                        total += pad_by_count[padded_rows] * kernel_w
                    if average == "nv_small_rtl" and precision == "int8":
                        out[c, oy, ox] = rtl_average(
                            [[int(data[c, y, xx]) for xx in cols] for y in rows], kernel_w, kernel_h,
                            pad_values, recip_w, recip_h)
                        continue
                    total = sign_extend(total, acc_bits)
                    mean = rha(rha(total * recip_w, 16) * recip_h, 16)
                    out[c, oy, ox] = sign_extend(mean, data_bits)
    return out


def _rtl_cut(product: int, ext_bits: int, out_bits: int) -> int:
    """A reciprocal multiply of NVDLA's ``NV_NVDLA_PDP_CORE_cal2d.v``: the product register holds ``ext_bits``
    bits; rounding at bit 16 is half away from zero; a negative result keeps ``out_bits`` bits, a positive one
    ``out_bits - 1`` bits plus the rounding carry (read back as ``out_bits`` signed)."""
    ext = product % (1 << ext_bits)
    whole, frac = ext >> 16, ext & 0xFFFF
    if ext >> (ext_bits - 1):
        value = whole + (1 if frac > 0x8000 else 0)
    else:
        value = whole % (1 << (out_bits - 1)) + (1 if frac >= 0x8000 else 0)
    return sign_extend(value, out_bits)


def rtl_average(rows: Sequence[Sequence[int]], kernel_w: int, kernel_h: int, pad_values: Sequence[int],
                recip_w: int, recip_h: int) -> int:
    """One int8 AVERAGE window on NVDLA's nv_small RTL, from its real taps ``rows`` (each real row's real
    columns). cal1d: a row with n padded columns adds ``PAD_VALUE_nX`` and keeps 11 bits; cal2d: rows
    summed in 14 bits, m padded rows add ``(PAD_VALUE_mX * kw)`` cut to 14 bits, into 15 bits; then
    ``* RECIP_W`` (31-bit product) cut to 11 bits and ``* RECIP_H`` (28-bit product) cut to 8 bits."""
    total = 0
    for row in rows:
        line = sum(row)
        if len(row) < kernel_w:
            line += int(pad_values[kernel_w - len(row) - 1])
        total += sign_extend(line, 11)
    total = sign_extend(total, 14)
    if len(rows) < kernel_h:
        total += sign_extend(int(pad_values[kernel_h - len(rows) - 1]) * kernel_w, 14)
    return _rtl_cut(_rtl_cut(total * recip_w, 31, 11) * recip_h, 28, 8)
