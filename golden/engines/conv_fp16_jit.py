"""The fp16 CMAC + CACC of ``conv_fp16`` compiled with numba: the same integer steps, one output at a time.

Why compiled: the CMAC's products are not IEEE products but radix-4 Booth multiplications whose carry-save
sum and carry vectors are aligned (truncated) separately, so an aligned product is within 1 of the exact one
and no BLAS formulation gives the right bits. As numpy array operations each lane product costs ~80 passes
over memory (about 6 MMAC/s); here each is a few dozen register operations, and the CACC's FP48 add runs in
the same loop, in the hardware's order (slices outer, taps inner).

``conv_fp16.direct_conv_fp16`` calls ``conv`` when no input or weight is a NaN (NaN words follow their own
CMAC/CACC rules, kept in the array code only); ``tests/golden/test_conv_fp16_jit.py`` checks the two paths
bit for bit, and the plain-loop reference (``regressions/lib/reference/conv_fp16.py``) checks both.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

_M32 = 0xFFFFFFFF
_M40 = (1 << 40) - 1
#: Sign compensation of an aligned Booth product by shift // 4 (``conv_fp16._SIGN_COMP``).
SIGN_COMP = np.array([0xAAAB0000, 0xFAAAB000, 0xFFAAAB00, 0xFFFAAAB0, 0xFFFFAAAB, 0xFFFFFAAB, 0xFFFFFFAB,
                      0xFFFFFFFB], dtype=np.int64)
#: An exponent for lanes that take no part (zero data or weight): never the block maximum, shifted out.
ABSENT = -100
#: ``numba.prange`` once compiled (``kernel``); the plain functions below run as Python until then.
prange = range
#: Helpers the kernel inlines.
_INLINED = ("_csa", "_pp", "_booth", "_bit_length", "_lead", "_signed")
_KERNEL: list[Callable] = []


def kernel() -> Callable:
    """``conv`` compiled (numba imported on first use: it costs a third of a second, and only fp16
    convolutions need it). Compiled code is cached on disk next to this module."""
    if not _KERNEL:
        import numba

        space = globals()
        space["prange"] = numba.prange
        for name in _INLINED:
            space[name] = numba.njit(cache=True, inline="always")(space[name])
        space["cacc_add"] = numba.njit(cache=True)(space["cacc_add"])
        _KERNEL.append(numba.njit(cache=True, parallel=True)(conv))
    return _KERNEL[0]


def _csa(a, b, c):
    x = a ^ b
    return x ^ c, (((a & b) | (c & x)) << 1) & _M32


def _pp(mag, neg, sign, dat):
    """One Booth partial product (digit magnitude 0..2, digit sign, product sign) and its inversion bit."""
    n = (neg ^ sign) & (mag != 0)
    x = mag * dat  # < 2^15, so 0xFFFF - x == x ^ 0xFFFF
    return (x ^ (n * 0xFFFF)) | ((1 - n) << 16), n


def _booth(mag, neg, k, lane, sign, dat, shift, comp):
    """``cal_fp16_booth``: the product of a weight (Booth digits ``mag``/``neg`` at [k, :, lane]) and the data
    mantissa ``dat``, its two carry-save vectors aligned right by ``shift`` separately (int32 result)."""
    p0, i0 = _pp(mag[k, 0, lane], neg[k, 0, lane], sign, dat)
    p1, i1 = _pp(mag[k, 1, lane], neg[k, 1, lane], sign, dat)
    p2, i2 = _pp(mag[k, 2, lane], neg[k, 2, lane], sign, dat)
    p3, i3 = _pp(mag[k, 3, lane], neg[k, 3, lane], sign, dat)
    p4, i4 = _pp(mag[k, 4, lane], neg[k, 4, lane], sign, dat)
    p5, i5 = _pp(mag[k, 5, lane], neg[k, 5, lane], sign, dat)
    p6, i6 = _pp(mag[k, 6, lane], neg[k, 6, lane], sign, dat)
    p7, i7 = _pp(mag[k, 7, lane], neg[k, 7, lane], sign, dat)
    s, c = _csa(p0, ((p1 << 2) | i0) & _M32, ((p2 << 4) | (i1 << 2)) & _M32)
    s, c = _csa(s, c, ((p3 << 6) | (i2 << 4)) & _M32)
    s, c = _csa(s, c, i3 << 6)
    t, m = _csa((p4 << 8) & _M32, ((p5 << 10) | (i4 << 8)) & _M32, ((p6 << 12) | (i5 << 10)) & _M32)
    t, m = _csa(t, m, ((p7 << 14) | (i6 << 12)) & _M32)
    t, m = _csa(t, m, i7 << 14)
    u, v = _csa(s, c, t)
    u, v = _csa(u, v, m)
    sh = min(shift, 28)
    # + the sign compensation: -(0x55550000 >> sh), i.e. SIGN_COMP[sh // 4] (0xAAAB0000 ... 0xFFFFFFFB)
    out = ((u >> sh) + (v >> sh) - (0x55550000 >> sh)) & _M32
    out -= (out >> 31) << 32
    return out * (shift < 32)


def _bit_length(v):
    n = 0
    if v >> 32:
        v >>= 32
        n += 32
    if v >> 16:
        v >>= 16
        n += 16
    if v >> 8:
        v >>= 8
        n += 8
    while v:
        v >>= 1
        n += 1
    return n


def _lead(v):
    return _bit_length(~v if v < 0 else v)


def _signed(v, bits):
    v &= (1 << bits) - 1
    return v - (1 << bits) if v >> (bits - 1) else v


def cacc_add(ae, am, me, mm):
    """``conv_fp16.cacc_add`` for one accumulator and one (non-NaN) CMAC word."""
    if mm == 0:
        return ae, am
    sh0 = 37 - _lead(mm)
    mac = (mm << sh0) << 2
    mac_e = (me - sh0 + 49) & 0xFF
    acc_e = 0 if am == 0 else ae
    diff = mac_e - acc_e
    d = abs(diff)
    dcl = min(d, 40)
    big = max(mac_e, acc_e)
    small = am if diff > 0 else mac
    out_bits = (((small & _M40) & ((1 << dcl) - 1)) << (40 - dcl)) if 0 < d <= 40 else 0
    shifted = 0 if d > 40 else small >> dcl
    a = shifted if diff > 0 else am
    b = shifted if diff < 0 else mac
    total = a + b
    tmp = _signed(total, 40)
    ovf = ((a < 0) == (b < 0)) and ((tmp < 0) != (b < 0))
    if ovf:
        s = total >> 1
        e = big + 1
        guard = total & 1
        sticky = out_bits != 0
    else:
        sh1 = 39 - _lead(tmp)
        s = _signed((tmp << sh1) | (out_bits >> (40 - sh1)), 40)
        out_bits = (out_bits << sh1) & _M40
        e = big - sh1
        guard = out_bits >> 39
        sticky = (out_bits & ((1 << 39) - 1)) != 0
    up = (guard != 0) and sticky if s < 0 else guard != 0
    r = _signed(s + up, 40)
    if (r < 0) != (s < 0):
        r = (-(1 << 39) if s < 0 else 0) | ((r & _M40) >> 1)
        e += 1
    if r == 0:
        e = 0
    return e & 0xFF, r


def conv(w_hi, w_sign, w_mts, mag, neg, d_hi, d_mts, d_sign, out_h, out_w, sy, sx, dy, dx, comp, out_e, out_m):
    """Every output (kernel k, pixel): for each 64-channel slice and tap, the CMAC's block exponent and Booth
    product sum, added into the CACC's FP48 accumulator.

    Weights: exponent high parts ``w_hi`` (K, slices, R, S, 64) (``ABSENT`` for lanes that take no part) and
    signs; Booth digits ``mag``/``neg`` (K * slices * R * S, 8, 64). Data: exponent high parts ``d_hi``,
    pre-shifted mantissas and signs (slices, H_span, W_span, 64), the padded cube."""
    kernels, slices, taps_r, taps_s, lanes = w_hi.shape
    for k in prange(kernels):
        aligned = np.empty(lanes, dtype=np.int64)
        for oy in range(out_h):
            for ox in range(out_w):
                ae = 0
                am = 0
                for sl in range(slices):
                    for r in range(taps_r):
                        y = oy * sy + r * dy
                        for s in range(taps_s):
                            x = ox * sx + s * dx
                            wh, dh = w_hi[k, sl, r, s], d_hi[sl, y, x]
                            emax = 0
                            for lane in range(lanes):
                                emax = max(emax, wh[lane] + dh[lane])
                            # Unshifted lanes (most of them) sum their exact signed products in a loop the
                            # compiler vectorizes; the aligned ones (shift 4..28) are listed for the Booth path.
                            wm, dm = w_mts[k, sl, r, s], d_mts[sl, y, x]
                            ws, ds = w_sign[k, sl, r, s], d_sign[sl, y, x]
                            mm = 0
                            n = 0
                            for lane in range(lanes):
                                gap = emax - wh[lane] - dh[lane]
                                prod = wm[lane] * dm[lane]
                                mm += (gap == 0) * (prod - 2 * (ws[lane] ^ ds[lane]) * prod)
                                aligned[n] = lane
                                n += (gap > 0) & (gap < 8)
                            row = ((k * slices + sl) * taps_r + r) * taps_s + s
                            for j in range(n):
                                lane = aligned[j]
                                mm += _booth(mag, neg, row, lane, ws[lane] ^ ds[lane], dm[lane],
                                             4 * (emax - wh[lane] - dh[lane]), comp)
                            ae, am = cacc_add(ae, am, emax << 2, mm)
                out_e[k, oy * out_w + ox] = ae
                out_m[k, oy * out_w + ox] = am
