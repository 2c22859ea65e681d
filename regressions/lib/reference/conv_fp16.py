"""Reference math for fp16 direct convolution (nv_full): CSC + CMAC + CACC as NVDLA's nvdlav1 cmod computes them.

Written from the cmod (``cmod/cmac/NV_NVDLA_cmac.h`` ``calculation_fp16``, ``cal_fp16_exp``, ``cal_fp16_mul``,
``cal_fp16_booth``, ``cal_fp16_nan``; ``cmod/cacc/NV_NVDLA_cacc.cpp`` ``cacc_fp16_add``,
``cacc_fp48_to_fp32``; ``cmod/csc`` masks and padding), one element at a time with Python ints, the
hardware's registers kept as unsigned bit fields of their width. It shares no code with ``golden``.

This is not IEEE arithmetic:

* the CMAC aligns the 64 products of a channel slice to the largest block exponent (exponents split into
  ``4*hi + lo``), inside a radix-4 Booth multiplier whose carry-save outputs are truncated *separately*
  when shifted, so an aligned product may be one off ``floor(w*d / 2^shift)``;
* the CACC keeps a 48-bit float (8-bit exponent, 40-bit two's-complement mantissa), rounds every add with a
  guard bit (plus a sticky bit for negative sums only) and delivers FP32 rounded half away from zero.

NaN: a NaN weight (lowest lane first), else a NaN data lane, makes the slice result NaN, which the
accumulator then keeps. Inf is an ordinary exponent (65536). +0 and -0 never take part.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from .arith import check_range, check_signed, check_unsigned, rha, sat

LANES = 64  # fp16 channels per CMAC slice (PARALLEL_CHANNEL_NUM)
_SIGN_COMP = {0: 0xAAAB0000, 4: 0xFAAAB000, 8: 0xFFAAAB00, 12: 0xFFFAAAB0, 16: 0xFFFFAAAB, 20: 0xFFFFFAAB,
              24: 0xFFFFFFAB, 28: 0xFFFFFFFB}


def _bit(v: int, i: int) -> int:
    return (v >> i) & 1


def _field(v: int, hi: int, lo: int) -> int:
    return (v >> lo) & ((1 << (hi - lo + 1)) - 1)


def _to_signed(v: int, bits: int) -> int:
    v &= (1 << bits) - 1
    return v - (1 << bits) if v >> (bits - 1) else v


def is_nan16(h: int) -> bool:
    return _field(h, 14, 10) == 31 and _field(h, 9, 0) != 0


def is_inf16(h: int) -> bool:
    return _field(h, 14, 10) == 31 and _field(h, 9, 0) == 0


# ---- CMAC ---------------------------------------------------------------------------------------------------
def booth_multiply(negative: bool, wt_mts: int, dat_mts: int, shift: int) -> int:
    """``cal_fp16_booth``: signed product of two pre-shifted mantissas (< 2^14) aligned right by ``shift``
    (a multiple of 4), as a signed 32-bit int."""
    if shift >= 32:
        return 0
    code_rev = 7 if negative else 0
    w = wt_mts << 1
    pp, inv = [], []
    for _ in range(8):
        code = (w & 7) ^ code_rev
        w >>= 2
        if code in (0, 7):
            pp.append(0x10000), inv.append(0)
        elif code in (1, 2):
            pp.append(dat_mts | 0x10000), inv.append(0)
        elif code == 3:
            pp.append((dat_mts << 1) | 0x10000), inv.append(0)
        elif code == 4:
            pp.append(~(dat_mts << 1) & 0xFFFF), inv.append(1)
        else:
            pp.append(~dat_mts & 0xFFFF), inv.append(1)
    m32 = 0xFFFFFFFF
    rows = [pp[0], (pp[1] << 2) | inv[0], (pp[2] << 4) | (inv[1] << 2), (pp[3] << 6) | (inv[2] << 4),
            inv[3] << 6, pp[4] << 8, (pp[5] << 10) | (inv[4] << 8), (pp[6] << 12) | (inv[5] << 10),
            (pp[7] << 14) | (inv[6] << 12), inv[7] << 14]
    rows = [r & m32 for r in rows]

    def reduce(vs: list[int]) -> list[int]:
        """The cmod's Wallace loop: 3:2 compress groups of three until two vectors remain."""
        vs = list(vs)
        while len(vs) >= 3:
            groups = len(vs) // 3
            out = []
            for j in range(groups):
                a, b, c = vs[3 * j: 3 * j + 3]
                out += [a ^ b ^ c, (((a & b) | (b & c) | (a & c)) << 1) & m32]
            vs = out + vs[3 * groups:]
        return vs

    top, bottom = reduce(rows[:5]), reduce(rows[5:])
    s, c = reduce(top + bottom)
    return _to_signed((s >> shift) + (c >> shift) + _SIGN_COMP[shift], 32)


def cmac_fp16(weights: list[int], data: list[int]) -> tuple[int, int]:
    """One MAC cell on one slice: 64 weight and 64 data fp16 bit patterns -> (exponent field, signed 38-bit
    mantissa) of ``calculation_fp16`` (direct conv). Value ``mantissa * 2^(exponent - 50)``; NaN has exponent
    63 and ``sign << 37 | fraction << 27``."""
    assert len(weights) == len(data) == LANES
    for lanes in (weights, data):  # weights first, then data; lowest lane first
        for h in lanes:
            if is_nan16(h):
                return 63, _to_signed((_bit(h, 15) << 37) | (_field(h, 9, 0) << 27), 38)
    parts = []
    for wh, dh in zip(weights, data):
        if wh in (0, 0x8000) or dh in (0, 0x8000):
            parts.append(None)
            continue
        we, de = _field(wh, 14, 10), _field(dh, 14, 10)
        wm = _field(wh, 9, 0) | ((we != 0) << 10)
        dm = _field(dh, 9, 0) | ((de != 0) << 10)
        wm <<= 1 if we == 0 else we & 3
        dm <<= 1 if de == 0 else de & 3
        parts.append(((we >> 2) + (de >> 2), _bit(wh, 15) ^ _bit(dh, 15), wm, dm))
    block = max([p[0] for p in parts if p is not None], default=0)
    total = 0
    for p in parts:
        if p is not None:
            e, neg, wm, dm = p
            total += booth_multiply(bool(neg), wm, dm, (block - e) * 4)
    return block * 4, total


# ---- CACC ---------------------------------------------------------------------------------------------------
def cacc_add(acc: tuple[int, int], mac: tuple[int, int]) -> tuple[int, int]:
    """``cacc_fp16_add``: FP48 (exponent 8 bits, signed 40-bit mantissa) plus FP44 (6, signed 38) -> FP48."""
    ae, am = acc
    me, mm = mac
    if mm == 0:
        return acc
    if ae == 255:
        return 255, _to_signed(am & ~((1 << 29) - 1), 40)
    if me == 63:
        return 255, _to_signed(_field(mm, 37, 27) << 29, 40)
    mbits = mm & ((1 << 38) - 1)
    i = 36
    if _bit(mbits, 37) == _bit(mbits, 36):
        while i >= 0 and _bit(mbits, i) == _bit(mbits, 37):
            i -= 1
    sh0 = 36 - i
    mac_m = (((mbits << sh0) & ((1 << 38) - 1)) << 2)  # 40-bit pattern
    mac_e = (me - sh0 + 49) & 0xFF
    acc_m = am & ((1 << 40) - 1)
    acc_e = 0 if am == 0 else ae

    def ashr(bits40: int, n: int) -> int:
        return (_to_signed(bits40, 40) >> n) & ((1 << 40) - 1)

    shifted_out = 0
    big = mac_e
    if mac_e > acc_e:
        d = mac_e - acc_e
        if d <= 40:
            shifted_out = _field(acc_m, d - 1, 0) << (40 - d)
            acc_m = ashr(acc_m, d)
        else:
            acc_m = 0
    elif mac_e < acc_e:
        big = acc_e
        d = acc_e - mac_e
        if d <= 40:
            shifted_out = _field(mac_m, d - 1, 0) << (40 - d)
            mac_m = ashr(mac_m, d)
        else:
            mac_m = 0
    tmp = (acc_m + mac_m) & ((1 << 40) - 1)
    overflow = _bit(mac_m, 39) == _bit(acc_m, 39) and _bit(mac_m, 39) != _bit(tmp, 39)
    high_bit = 0
    if overflow:
        high_bit = _bit(tmp, 0)
        s = (_bit(mac_m, 39) << 39) | (tmp >> 1)
        e = big + 1
    elif _bit(tmp, 38) == _bit(tmp, 39):
        j = 38
        while j >= 0 and _bit(tmp, j) == _bit(tmp, 39):
            j -= 1
        n = 38 - j
        s = ((tmp << n) & ((1 << 40) - 1)) | (shifted_out >> (40 - n))
        shifted_out = (shifted_out << n) & ((1 << 40) - 1)
        e = big - n
    else:
        s, e = tmp, big
    if overflow:
        guard, sticky = high_bit, int(shifted_out != 0)
    else:
        guard, sticky = _bit(shifted_out, 39), int(_field(shifted_out, 38, 0) != 0)
    negative = _bit(s, 39)
    up = (guard and sticky) if negative else guard
    r = (s + up) & ((1 << 40) - 1) if up else s
    if _bit(r, 39) != _bit(s, 39):
        r = (_bit(s, 39) << 39) | (r >> 1)
        e += 1
    e &= 0xFF
    if r == 0:
        e = 0
    return e, _to_signed(r, 40)


def fp48_to_fp32(acc: tuple[int, int]) -> int:
    """``cacc_fp48_to_fp32``: the FP32 bit pattern CACC hands to SDP."""
    ae, am = acc
    u = am & ((1 << 40) - 1)
    sign = _bit(u, 39)
    if ae == 255:
        return (sign << 31) | (0xFF << 23) | _field(u, 38, 29)
    if sign and _field(u, 38, 0) == 0:
        return (1 << 31) | (((ae + 65) & 0xFF) << 23)
    mag = (1 << 39) | ((~_field(u, 38, 0) + 1) & ((1 << 39) - 1)) if sign else u
    exp = 0 if u == 0 else (ae + 64) & 0xFF
    if _bit(mag, 14):
        t = (_field(mag, 39, 15) + 1) & 0x1FFFFFF
        if _bit(t, 24) != _bit(mag, 39):
            t = (sign << 24) | (t >> 1)
            exp = (exp + 1) & 0xFF
        frac = t & 0x7FFFFF
    else:
        frac = _field(mag, 37, 15)
    return (sign << 31) | (exp << 23) | frac


# ---- the convolution ------------------------------------------------------------------------------------------
def direct_conv_fp16(
    x,
    w,
    *,
    stride: tuple[int, int] = (1, 1),
    dilation: tuple[int, int] = (1, 1),
    pad: tuple[int, int] = (0, 0),
    pad_value: int = 0,
    out_hw: tuple[int, int],
) -> np.ndarray:
    """fp16 bit patterns x (C, H, W) and w (K, C, R, S) -> FP32 bit patterns (K, OH, OW) as int64.

    Taps outside the input take ``pad_value`` (its low 16 bits, the raw CSC pad word); each output sums its
    64-channel slices (outer) over the kernel taps (inner, row-major), the CSC's order, starting from 0."""
    data, weights = np.asarray(x), np.asarray(w)
    if data.ndim != 3 or weights.ndim != 4 or weights.shape[1] != data.shape[0]:
        raise ValueError("x must be (C, H, W) and w (K, C, R, S) with the same C")
    channels, height, width = data.shape
    kernels, _, kh, kw = weights.shape
    sy, sx = (check_range("stride", s, 1, 1 << 16) for s in stride)
    dy, dx = (check_range("dilation", d, 1, 1 << 16) for d in dilation)
    pt, pl = (check_range("pad", p, 0, 1 << 16) for p in pad)
    oh, ow = (check_range("out_hw", o, 1, 1 << 16) for o in out_hw)
    padv = pad_value & 0xFFFF
    xs = [[[check_unsigned("x", int(data[c, i, j]), 16) for j in range(width)] for i in range(height)]
          for c in range(channels)]
    ws = [[[[check_unsigned("w", int(weights[k, c, r, s]), 16) for s in range(kw)] for r in range(kh)]
           for c in range(channels)] for k in range(kernels)]
    out = np.zeros((kernels, oh, ow), dtype=np.int64)
    for k in range(kernels):
        for oy in range(oh):
            for ox in range(ow):
                acc = (0, 0)
                for c0 in range(0, channels, LANES):
                    for r in range(kh):
                        for s in range(kw):
                            iy, ix = oy * sy + r * dy - pt, ox * sx + s * dx - pl
                            inside = 0 <= iy < height and 0 <= ix < width
                            dl, wl = [], []
                            for c in range(c0, c0 + LANES):
                                if c >= channels:
                                    dl.append(0)
                                    wl.append(0)
                                else:
                                    dl.append(xs[c][iy][ix] if inside else padv)
                                    wl.append(ws[k][c][r][s])
                            acc = cacc_add(acc, cmac_fp16(wl, dl))
                out[k, oy, ox] = fp48_to_fp32(acc)
    return out


# ---- conversions around it ------------------------------------------------------------------------------------
def _round_half_even(q: Fraction) -> int:
    n, rem = divmod(q.numerator, q.denominator)
    twice = 2 * rem
    if twice > q.denominator or (twice == q.denominator and n % 2):
        n += 1
    return n


def _encode16(value: Fraction, negative: bool, overflow: int) -> int:
    """fp16 bits of ``|value|`` rounded to nearest even (denormals kept); ``overflow`` is the pattern for a
    result at or past 2^16 (0x7C00 Inf, or 0x7BFF saturating)."""
    sign = 0x8000 if negative else 0
    if value == 0:
        return sign
    e = value.numerator.bit_length() - value.denominator.bit_length()
    if Fraction(2) ** e > value:
        e -= 1
    e = max(e, -14)
    q = _round_half_even(value / Fraction(2) ** (e - 10))
    if q == 2048:
        q, e = 1024, e + 1
    if e > 15:
        return sign | overflow
    if q < 1024:
        return sign | q  # denormal (e == -14)
    return sign | ((e + 15) << 10) | (q - 1024)


def int16_cvt_to_fp16(x: int, offset: int, scale: int, truncate: int) -> int:
    """CDMA's conversion of int16 input into fp16 (CVT_EN, IN_PRECISION=INT16, PROC_PRECISION=FP16):
    ``Int17ToFp16(sat17(rha((x - offset) * scale, truncate)))``, nearest even, Inf from 65520 up."""
    x = check_signed("x", int(x), 16)
    v = sat(rha((x - check_signed("offset", offset, 16)) * check_signed("scale", scale, 16),
                check_unsigned("truncate", truncate, 6)), 17)
    return _encode16(Fraction(abs(v)), v < 0, 0x7C00)


def fp32_to_fp16(bits: int) -> int:
    """SDP's ``Fp32ToFp16`` (the fp16 output of an otherwise bypassed SDP): nearest even with fp16
    denormals, saturating at +-65504 (Inf too); NaN keeps the sign and the low 10 fraction bits."""
    bits = int(bits) & 0xFFFFFFFF
    sign, e, m = bits >> 31, _field(bits, 30, 23), _field(bits, 22, 0)
    if e == 255 and m:
        return (sign << 15) | 0x7C00 | (m & 0x3FF)
    if e == 255:
        return (sign << 15) | 0x7BFF
    value = Fraction(m | (1 << 23), 1 << 23) * Fraction(2) ** (e - 127) if e else Fraction(0)
    return _encode16(value, bool(sign), 0x7BFF)


def fp32_value(bits: int) -> float:
    """The float an FP32 bit pattern holds (for readable test expectations)."""
    return float(np.array([bits & 0xFFFFFFFF], dtype=np.uint32).view(np.float32)[0])


def nan_to_zero(x) -> np.ndarray:
    """CDMA ``D_NAN_FLUSH_TO_ZERO``: fp16 NaN data become +0 (weights are never flushed)."""
    src = np.asarray(x)
    out = np.zeros(src.shape, dtype=np.int64)
    for index in np.ndindex(src.shape):
        h = int(src[index]) & 0xFFFF
        out[index] = 0 if is_nan16(h) else h
    return out
