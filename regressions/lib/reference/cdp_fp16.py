"""Reference math for CDP fp16 (LRN), one element at a time.

Rules: the nv_full cmod ``cmod/hls_wrapper/cdp_hls_wrapper.cpp`` (``HLS_CDP_lookup_fp16``,
``HLS_CDP_lookup_lut``) with ``cmod/hls/cdp_libs/cdp_icvt.cpp`` / ``cdp_ocvt.cpp`` (fp16: plain
Fp16ToFp17 / Fp17ToFp16, the CVT registers unused) and ``cmod/cdp/NV_NVDLA_cdp.cpp`` (padding channels are
fed +0, NaN inputs flushed to +0 with D_NAN_FLUSH_TO_ZERO). The cmod's float library is the exact-fraction
emulation of ``regressions.lib.reference.sdp_fp16``; the LUT index arithmetic the cmod does in C ``float`` is
done here with exact fractions and an explicit IEEE single rounding. Nothing here imports the golden model but the
LUT parameter container (``golden.lut``, data only).
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from golden.lut import LE_DEPTH, LO_DEPTH, TABLE_LE, TABLE_LO, LutRegisters

from .arith import check_range, check_signed
from .sdp_fp16 import (
    F16, F17, F32, fields, fp16_to_fp17, fp16_to_fp32, fp17_to_fp32, fp32_to_fp17, fp_add, fp_mul, fp_sub,
    fraction_to_fp17, is_nan, narrow, pow2_bits,
)


def c_float(v: Fraction) -> Fraction | None:
    """``v >= 0`` rounded to IEEE single (RNE, denormals on the 2^-149 grid); None for +Inf."""
    if v == 0:
        return Fraction(0)
    k = v.numerator.bit_length() - v.denominator.bit_length()
    while Fraction(2) ** k > v:
        k -= 1
    while Fraction(2) ** (k + 1) <= v:
        k += 1
    unit = Fraction(2) ** (max(k, -126) - 23)
    q, r = divmod(v, unit)
    q = int(q)
    if 2 * r > unit or (2 * r == unit and q % 2):
        q += 1
    result = q * unit
    return None if result >= Fraction(2) ** 128 else result


def _f32_value(bits: int) -> Fraction:
    """IEEE value of finite fp32 bits."""
    s, e, m = fields(bits, F32)
    mag = Fraction(m, 2**23) * Fraction(2) ** -126 if e == 0 else Fraction(2**23 + m, 2**23) * Fraction(2) ** (e - 127)
    return -mag if s else mag


def lut_lookup(s: int, table: tuple[int, ...], start: int, end: int, uflow_scale: int, oflow_scale: int,
               exp_mode: bool, le_exp: bool, index_offset: int, index_select: int) -> tuple[str, int]:
    """One LUT (``HLS_CDP_lookup_lut``) for the fp32 square sum ``s``: (state, FP17 result).

    ``d = s - START`` in fp32; underflow when d <= 0 or NaN. Exponent mode: index = exponent(d) -
    LE_INDEX_OFFSET (negative: underflow), fraction = the top 16 of d's 23 mantissa bits. Linear mode:
    t = float(d / 2^INDEX_SELECT); t >= depth-1 overflows; index = int(t), fraction = int(frac(t)*2^16).
    Hit: ``FP17(L1 - L0 in fp32) * FP17(fraction / 2^16) + FP17(L0)``; underflow/overflow:
    ``FP17(s - START [+ 2^LE_INDEX_OFFSET for the LE in exponent mode] or s - END) * slope + edge``.
    """
    upper = len(table) - 1
    d = fp_sub(s, start, F32)
    sign, expo, mant = fields(d, F32)
    special = expo == F32.emax  # NaN underflows, -Inf underflows, +Inf (dv None) is above any table
    dv = None if special else _f32_value(d)
    under = (mant != 0 or sign == 1) if special else dv <= 0
    over = False
    index, offset = 0, 0
    if not under:
        if exp_mode:
            _, e, m = fields(d, F32)
            index = e - 127 - index_offset
            offset = (m >> 7) & 0xFFFF
            if index < 0:
                under = True
            elif index >= upper:
                over = True
        else:
            t = c_float(dv * Fraction(2) ** -index_select) if dv is not None else None
            if t is None or t >= upper:
                over = True
            else:
                index = int(t)
                offset = int((t - index) * 65536)
    if under:
        point = start
        if le_exp:
            point = fp_add(start, 0 if index_offset <= -127 else pow2_bits(index_offset), F32)
        diff = fp32_to_fp17(fp_sub(s, point, F32))
        value = fp_add(fp_mul(diff, fp16_to_fp17(uflow_scale & 0xFFFF), F17), fp16_to_fp17(table[0] & 0xFFFF), F17)
        return "uflow", value
    if over:
        diff = fp32_to_fp17(fp_sub(s, end, F32))
        value = fp_add(fp_mul(diff, fp16_to_fp17(oflow_scale & 0xFFFF), F17), fp16_to_fp17(table[upper] & 0xFFFF), F17)
        return "oflow", value
    l0, l1 = table[index] & 0xFFFF, table[index + 1] & 0xFFFF
    step = fp32_to_fp17(fp_sub(fp16_to_fp32(l1), fp16_to_fp32(l0), F32))
    value = fp_add(fp_mul(step, fraction_to_fp17(offset, 16), F17), fp16_to_fp17(l0), F17)
    return "hit", value


def _le_is_exp(lut: LutRegisters) -> bool:
    if lut.le_function in ("exp", 0):
        return True
    if lut.le_function in ("linear", 1):
        return False
    raise ValueError(f"le_function={lut.le_function!r} must be 'exp'/0 or 'linear'/1")


def cdp_fp16_lut(s: int, lut: LutRegisters) -> int:
    """The chosen FP17 LUT result for fp32 square sum ``s`` (the int path's priority rules)."""
    if len(lut.le_table) != LE_DEPTH or len(lut.lo_table) != LO_DEPTH:
        raise ValueError(f"tables must have {LE_DEPTH}/{LO_DEPTH} entries")
    offset = check_signed("le_index_offset", lut.le_index_offset, 8)
    exp = _le_is_exp(lut)
    le = lut_lookup(s, lut.le_table, lut.le_start, lut.le_end, lut.le_slope_uflow_scale, lut.le_slope_oflow_scale,
                    exp, exp, offset, check_signed("le_index_select", lut.le_index_select, 8))
    lo = lut_lookup(s, lut.lo_table, lut.lo_start, lut.lo_end, lut.lo_slope_uflow_scale, lut.lo_slope_oflow_scale,
                    False, False, 0, check_signed("lo_index_select", lut.lo_index_select, 8))
    if le[0] == "uflow" and lo[0] == "uflow":
        chosen = lut.uflow_priority
    elif le[0] == "oflow" and lo[0] == "oflow":
        chosen = lut.oflow_priority
    elif (le[0] == "hit") != (lo[0] == "hit"):
        chosen = TABLE_LE if le[0] == "hit" else TABLE_LO
    else:
        chosen = lut.hybrid_priority
    return lo[1] if chosen == TABLE_LO else le[1]


def lrn_fp16(
    x,
    *,
    lut: LutRegisters,
    normalz_len: int = 0,
    sqsum_bypass: bool = False,
    mul_bypass: bool = False,
    nan_to_zero: bool = False,
    channel_count: int | None = None,
) -> np.ndarray:
    """CDP fp16 LRN of a (C, H, W) cube of fp16 patterns; returns fp16 patterns (C, H, W).

    x -> FP17 -> fp32 (channels at or beyond ``channel_count`` and outside the cube are +0); square in
    fp32 (or x itself with SQSUM_BYPASS); sum ``((c-1 + c+1) + c) + (c-2 + c+2) + ...`` in fp32; LUT;
    ``FP17(x) * r`` (MUL_BYPASS: r, or x if x is NaN); Fp17ToFp16.
    """
    data = np.asarray(x)
    if data.ndim != 3:
        raise ValueError("x must be (C, H, W)")
    channels, height, width = data.shape
    count = check_range("channel_count", channels if channel_count is None else channel_count, 1, channels)
    half = check_range("normalz_len", normalz_len, 0, 3) + 1
    out = np.zeros(data.shape, dtype=np.int64)
    for h in range(height):
        for w in range(width):
            x17, x32, sq = {}, {}, {}
            for c in range(-4, channels + 4):
                b = int(data[c, h, w]) & 0xFFFF if 0 <= c < count else 0
                if nan_to_zero and is_nan(b, F16):
                    b = 0
                x17[c] = fp16_to_fp17(b)
                x32[c] = fp17_to_fp32(x17[c])
                sq[c] = x32[c] if sqsum_bypass else fp_mul(x32[c], x32[c], F32)
            for c in range(channels):
                if sqsum_bypass:
                    total = sq[c]
                else:
                    total = fp_add(fp_add(sq[c - 1], sq[c + 1], F32), sq[c], F32)
                    for d in range(2, half + 1):
                        total = fp_add(total, fp_add(sq[c - d], sq[c + d], F32), F32)
                r = cdp_fp16_lut(total, lut)
                if mul_bypass:
                    m = x17[c] if is_nan(x32[c], F32) else r
                else:
                    m = fp_mul(x17[c], r, F17)
                out[c, h, w] = narrow(m, F17, F16, True)
    return out
