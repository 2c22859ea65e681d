"""fp16 direct convolution (nv_full): CDMA -> CSC -> CMAC -> CACC exactly as NVDLA's nvdlav1 cmod computes it.

The arithmetic is not IEEE float: it is integer hardware with its own alignment, truncation and rounding
(``hw:nvdlav1:cmod/cmac/NV_NVDLA_cmac.h`` ``calculation_fp16``, ``cmod/cacc/NV_NVDLA_cacc.cpp``
``cacc_fp16_add`` / ``cacc_fp48_to_fp32``, ``cmod/csc`` and ``cmod/cdma``). Every step below is integer
arithmetic on bit patterns, so the model is bit exact by construction, not by tolerance.

CDMA
  * fp16 input passes unconverted: the converter (``cdma_cvt.cpp``) is a pass-through for fp16, and direct-conv
    CDMA FAILs when CVT_EN is set with IN_PRECISION=FP16 (ConfigError, ``decode``). The only float conversion
    is int16 input with PROC_PRECISION=FP16 and CVT_EN: ``Int17ToFp16(sat17(rha((x - offset) * scale,
    truncate)))``, rounding to nearest even (``FpIntToFloat``; exact in numpy's float16 cast, since every
    17-bit integer is exact in float64 and both round ties to even and overflow to Inf at 65520).
  * ``D_NAN_FLUSH_TO_ZERO.NAN_TO_ZERO`` replaces data NaNs by +0 (weights are never flushed); the NaN/Inf
    counters count every fetched lane (D_NAN/INF_INPUT_DATA_NUM) and weight half-entry (..._WEIGHT_NUM).

CSC
  * Out-of-cube taps take the raw low 16 bits of ``D_ZERO_PADDING_VALUE`` (an fp16 bit pattern, unconverted);
    lanes at or beyond DATAIN_CHANNEL of the last 64-channel slice are 0.
  * An element takes part only if it is neither +0 nor -0, for data and weights alike (the per-lane masks).

CMAC (per MAC cell = kernel, per 64-channel slice and kernel tap)
  * NaN: if any of the slice's 64 weights is a NaN, the result is that of the lowest such lane, else of the
    lowest NaN data lane: exponent field 63, mantissa ``sign << 37 | fraction << 27`` (masks play no part).
  * Otherwise each element e = 4·eh + el splits its exponent: the mantissa (hidden bit for e != 0) is
    pre-shifted by el (by 1 for a denormal) and the product's block exponent is eh_w + eh_d. The slice's
    exponent is ``4·max``; each product is aligned right by ``4·(max - own)`` *inside* a radix-4 Booth
    multiplier: its carry-save sum and carry vectors are shifted separately, truncating each, then added
    with a sign-compensation constant (so a product is within 1 of ``floor(w·d / 2^shift)``, not equal to
    it), products shifted by 32 or more are 0. Infinity is an ordinary exponent (65536).
  * The 64 products (int32) sum exactly into a 38-bit mantissa; the cell emits (exp6, mant38): value
    ``mant · 2^(exp - 50)``.

CACC (per output: slices outer, taps inner, in CSC order; the first adds to 0)
  * 48-bit float: 8-bit exponent (bias 63), 40-bit two's-complement mantissa, value ``m · 2^(e - 101)``.
    Each add normalizes the MAC word to 38 bits then 40, aligns the smaller operand by a right shift keeping
    the shifted-out bits (dropped entirely beyond 40), adds in 40 bits, renormalizes (right by 1 on overflow,
    left pulling shifted-out bits back in) and rounds with a guard bit and a sticky only for negative
    results (ties go away from zero); exponents wrap in 8 bits as the cmod's ``sc_uint<8>``.
  * Output FP48 -> FP32: magnitude from two's complement, 24 bits kept, +1 if the next bit is set (ties away
    from zero, no sticky); NaN keeps sign and fraction. Delivered as ``np.float32`` (C_pad, OH, OW), the
    kernels beyond WEIGHT_KERNEL (padding lanes) 0.0, as the contract with SDP's fp16 path says.

Vectorized (numpy, no loops over pixels or kernels): for each (slice, tap) the CMAC runs as array operations
over (kernels, pixels, 64 lanes): block maximum, per-element shifts, the Booth partial products (the Booth
digits depend on the weight only, negation is a lane-wise XOR) and the 3:2 carry-save tree as uint32 bitwise
operations, then the lane sum. The CACC add is a handful of array operations over (kernels, pixels) per step.
Lanes no (kernel, pixel) pair uses (channels past C of the last slice) are dropped before the Booth stage.
Loops run over slices x taps (the hardware's accumulation order, needed for its rounding) and over blocks
that bound memory. That array code is about 6 MMAC/s (80 passes over memory per lane product), so without
NaNs the same steps run compiled (``conv_fp16_jit``, numba), one output at a time, about 100x faster: each
(slice, tap) of an output is one 64-lane vector block that finds the block exponent, sums the exact products
of the unshifted lanes and ``floor(p / 16)`` of the lanes shifted by 4 (which is what the Booth tree gives at
that shift) and lists the lanes shifted by 8..28 for a branch-free Booth emulation; the FP48 add has no
branches.
``regressions/lib/reference/conv_fp16.py`` is the independent plain-loop reference.
"""
from __future__ import annotations

import numpy as np

from golden.dma import dma_address, dma_bytes, ram_space
from golden.engines import OpContext
from golden.engines import conv_fp16_jit as jit
from golden.engines.conv_datapath import ConvGeometry, cdma_convert, unpack_weights
from golden.layout import CubeLayout, read_cube
from golden.regs import RegView

#: fp16 channels one CMAC slice (MAC atomic C of nv_full) multiplies: PARALLEL_CHANNEL_NUM.
SLICE = 64
#: Elements of (kernels x pixels x lanes) one CMAC block works on at once.
_BLOCK = 1 << 18
#: Booth radix-4 digit magnitude and negation by 3-bit code (cmod ``cal_fp16_booth``).
_BOOTH_MAG = np.array([0, 1, 1, 2, 2, 1, 1, 0], dtype=np.uint32)
_BOOTH_NEG = np.array([0, 0, 0, 0, 1, 1, 1, 0], dtype=np.uint32)
#: Sign compensation added after the shift, by shift // 4 (shifts are multiples of 4; 32 and up give 0).
_SIGN_COMP = np.array([0xAAAB0000, 0xFAAAB000, 0xFFAAAB00, 0xFFFAAAB0, 0xFFFFAAAB, 0xFFFFFAAB, 0xFFFFFFAB,
                       0xFFFFFFFB], dtype=np.uint32)
_M40 = (1 << 40) - 1
#: CACC FP48 exponent field value of a NaN; CMAC FP44 exponent field value of a NaN.
_ACC_NAN, _MAC_NAN = 255, 63


# ---- fp16 fields --------------------------------------------------------------------------------------------
def is_nan16(bits: np.ndarray) -> np.ndarray:
    b = np.asarray(bits, dtype=np.int64)
    return ((b >> 10) & 0x1F == 0x1F) & (b & 0x3FF != 0)


def is_inf16(bits: np.ndarray) -> np.ndarray:
    b = np.asarray(bits, dtype=np.int64)
    return ((b >> 10) & 0x1F == 0x1F) & (b & 0x3FF == 0)


def _fields(bits: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(takes part, exponent high part e >> 2, pre-shifted mantissa, sign) of fp16 bit patterns, as the
    CMAC splits them (``cal_fp16_exp``/``cal_fp16_mul``)."""
    b = np.asarray(bits, dtype=np.int64) & 0xFFFF
    e = (b >> 10) & 0x1F
    mts = (b & 0x3FF) | np.where(e != 0, 0x400, 0)
    low = np.where(e == 0, 1, e & 3)
    nz = (b != 0) & (b != 0x8000)
    return nz, (e >> 2).astype(np.int16), (mts << low).astype(np.uint32), (b >> 15).astype(np.uint32)


# ---- CMAC ----------------------------------------------------------------------------------------------------
def _csa(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """One 3:2 carry-save adder on uint32 vectors (the carry shifted left, bit 32 lost)."""
    x = a ^ b
    return x ^ c, ((a & b) | (c & x)) << np.uint32(1)


def booth_products(mag: np.ndarray, neg: np.ndarray, dat: np.ndarray, shift: np.ndarray) -> np.ndarray:
    """``cal_fp16_booth`` over arrays: int32 products of the pre-shifted mantissas, aligned right by ``shift``.

    ``mag``/``neg`` (8, ...) are the radix-4 Booth digits of the weight mantissa with the product's sign
    applied (negation swaps a digit's sign), ``dat`` the data mantissa; all broadcast together. The partial
    products go through the cmod's carry-save tree, whose two outputs are shifted (truncated) separately."""
    pp, inv = [], []
    for i in range(8):
        x = mag[i] * dat  # < 2^15
        pp.append(np.where(neg[i] != 0, np.uint32(0xFFFF) - x, x + np.uint32(0x10000)))
        inv.append(neg[i])
    c = [
        pp[0],
        (pp[1] << 2) | inv[0],
        (pp[2] << 4) | (inv[1] << 2),
        (pp[3] << 6) | (inv[2] << 4),
        inv[3] << 6,
        pp[4] << 8,
        (pp[5] << 10) | (inv[4] << 8),
        (pp[6] << 12) | (inv[5] << 10),
        (pp[7] << 14) | (inv[6] << 12),
        inv[7] << 14,
    ]
    s, k = _csa(c[0], c[1], c[2])
    s, k = _csa(s, k, c[3])
    s, k = _csa(s, k, c[4])
    t, m = _csa(c[5], c[6], c[7])
    t, m = _csa(t, m, c[8])
    t, m = _csa(t, m, c[9])
    u, v = _csa(s, k, t)
    u, v = _csa(u, v, m)
    sh = np.minimum(shift, 28).astype(np.uint32)
    out = (u >> sh) + (v >> sh) + _SIGN_COMP[sh >> 2]
    return np.where(shift >= 32, 0, out.view(np.int32))


def booth_digits(wmts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Radix-4 Booth digits (magnitude 0..2, negative flag) of the weight mantissas, shape (8, ...)."""
    w = np.asarray(wmts, dtype=np.uint32) << np.uint32(1)
    codes = np.stack([(w >> np.uint32(2 * i)) & np.uint32(7) for i in range(8)])
    return _BOOTH_MAG[codes], _BOOTH_NEG[codes]


def _nan_word(bits: np.ndarray) -> np.ndarray:
    """The CMAC's NaN mantissa field for an fp16 NaN: sign at bit 37, fraction at bits 36..27 (38-bit signed)."""
    b = np.asarray(bits, dtype=np.int64)
    m = ((b >> 15) << 37) | ((b & 0x3FF) << 27)
    return np.where(m >= 1 << 37, m - (1 << 38), m)


def _first_nan(bits: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(any NaN, NaN word of the lowest NaN lane) along the last axis."""
    nan = is_nan16(bits)
    first = np.take_along_axis(np.asarray(bits, dtype=np.int64), np.argmax(nan, axis=-1)[..., None], -1)[..., 0]
    return nan.any(axis=-1), _nan_word(first)


def cmac_slice(wbits: np.ndarray, dbits: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """One 64-lane slice of every MAC cell: weights (K, L) and data (P, L) fp16 bits -> (exponent field
    (K, P) 0..63, 38-bit signed mantissa (K, P)), as ``calculation_fp16`` emits them (direct conv)."""
    K, P = wbits.shape[0], dbits.shape[0]
    exp = np.zeros((K, P), dtype=np.int64)
    man = np.zeros((K, P), dtype=np.int64)
    w_nz, w_hi, w_mts, w_sign = _fields(wbits)
    d_nz, d_hi, d_mts, d_sign = _fields(dbits)
    # Lanes no (kernel, pixel) pair uses contribute neither products nor exponents (the block maximum starts
    # at 0): drop them (the channels past C of a last slice, all-zero channels).
    used = np.flatnonzero(w_nz.any(axis=0) & d_nz.any(axis=0))
    if len(used) < w_nz.shape[-1]:
        w_nz, w_hi, w_mts, w_sign = (a[:, used] for a in (w_nz, w_hi, w_mts, w_sign))
        d_nz, d_hi, d_mts, d_sign = (a[:, used] for a in (d_nz, d_hi, d_mts, d_sign))
    mag, neg = booth_digits(w_mts)
    lanes = len(used)
    kb = max(1, min(K, _BLOCK // (max(lanes, 1) * max(P, 1))))
    pb = max(1, min(P, _BLOCK // (max(lanes, 1) * kb)))
    for k0 in range(0, K if lanes else 0, kb):
        ks = slice(k0, k0 + kb)
        for p0 in range(0, P, pb):
            ps = slice(p0, p0 + pb)
            mask = w_nz[ks, None, :] & d_nz[None, ps, :]
            esum = np.where(mask, w_hi[ks, None, :] + d_hi[None, ps, :], 0)
            emax = esum.max(axis=-1)
            shift = (emax[..., None] - esum).astype(np.uint32) << np.uint32(2)
            sign = w_sign[ks, None, :] ^ d_sign[None, ps, :]
            negs = (neg[:, ks, None, :] ^ sign[None]) & (mag[:, ks, None, :] != 0)
            prod = booth_products(mag[:, ks, None, :], negs, d_mts[None, ps, :], shift)
            man[ks, ps] = np.where(mask, prod, 0).sum(axis=-1, dtype=np.int64)
            exp[ks, ps] = emax.astype(np.int64) << 2
    w_nan, w_word = _first_nan(wbits)
    d_nan, d_word = _first_nan(dbits)
    nan = w_nan[:, None] | d_nan[None, :]
    if nan.any():
        exp = np.where(nan, _MAC_NAN, exp)
        man = np.where(w_nan[:, None], w_word[:, None], np.where(d_nan[None, :], d_word[None, :], man))
    return exp, man


# ---- CACC ----------------------------------------------------------------------------------------------------
def _signed(v: np.ndarray, bits: int) -> np.ndarray:
    v = v & ((1 << bits) - 1)
    return np.where(v >> (bits - 1) != 0, v - (1 << bits), v)


def _bit_length(v: np.ndarray) -> np.ndarray:
    """Bit length of non-negative int64 values below 2^53 (exact through float64)."""
    return np.frexp(v.astype(np.float64))[1].astype(np.int64)


def _lead(v: np.ndarray) -> np.ndarray:
    """Bit length of the magnitude part of a two's-complement value (``~v`` for negatives)."""
    return _bit_length(np.where(v < 0, ~v, v))


def cacc_add(ae: np.ndarray, am: np.ndarray, me: np.ndarray, mm: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``cacc_fp16_add``: FP48 accumulator (exp 0..255, 40-bit signed mantissa) + CMAC FP44 word (exp 0..63,
    38-bit signed mantissa), element-wise. Returns the new (exponent, mantissa)."""
    # MAC word normalized to bit 36 (38 bits), then 2 guard bits (40 bits); exponent rebased to bias 63.
    sh0 = 37 - _lead(mm)
    mac = (mm << sh0) << 2
    mac_e = (me - sh0 + 49) & 0xFF
    acc_e = np.where(am == 0, 0, ae)
    # Align the smaller-exponent operand; keep what is shifted out (beyond 40 bits: operand 0, nothing kept).
    diff = mac_e - acc_e
    d = np.abs(diff)
    dcl = np.minimum(d, 40)
    big = np.maximum(mac_e, acc_e)
    small = np.where(diff > 0, am, mac)
    out_bits = np.where((d > 0) & (d <= 40), ((small & _M40) & ((1 << dcl) - 1)) << (40 - dcl), 0)
    shifted = np.where(d > 40, 0, small >> dcl)
    a = np.where(diff > 0, shifted, am)
    b = np.where(diff < 0, shifted, mac)
    total = a + b  # exact (41 bits)
    tmp = _signed(total, 40)
    ovf = ((a < 0) == (b < 0)) & ((tmp < 0) != (b < 0))
    # Renormalize: right by one on overflow, else left, pulling the shifted-out bits back in.
    sh1 = np.where(ovf, 0, 39 - _lead(tmp))
    left = _signed((tmp << sh1) | (out_bits >> (40 - sh1)), 40)
    out_left = (out_bits << sh1) & _M40
    s = np.where(ovf, total >> 1, left)
    out_bits = np.where(ovf, out_bits, out_left)
    e = np.where(ovf, big + 1, big - sh1)
    # Round: positive results on the guard bit, negative ones on guard and sticky.
    guard = np.where(ovf, total & 1, out_bits >> 39)
    sticky = np.where(ovf, out_bits != 0, (out_bits & ((1 << 39) - 1)) != 0)
    up = np.where(s < 0, (guard != 0) & sticky, guard != 0)
    r = _signed(s + up, 40)
    flip = (r < 0) != (s < 0)
    r = np.where(flip, np.where(s < 0, -(1 << 39), 0) | ((r & _M40) >> 1), r)
    e = np.where(flip, e + 1, e)
    e = np.where(r == 0, 0, e & 0xFF)
    # NaN and zero inputs (checked first in the cmod: a zero MAC word leaves the accumulator alone).
    acc_nan, mac_nan = ae == _ACC_NAN, me == _MAC_NAN
    nan_m = np.where(acc_nan, am & ~((1 << 29) - 1), _signed(((mm >> 27) & 0x7FF) << 29, 40))
    e = np.where(acc_nan | mac_nan, _ACC_NAN, e)
    r = np.where(acc_nan | mac_nan, nan_m, r)
    keep = mm == 0
    return np.where(keep, ae, e), np.where(keep, am, r)


def fp48_to_fp32(ae: np.ndarray, am: np.ndarray) -> np.ndarray:
    """``cacc_fp48_to_fp32``: FP32 bit patterns (uint32) of FP48 accumulators."""
    u = am & _M40
    neg = am < 0
    mag = np.where(neg, (1 << 39) | ((~u + 1) & ((1 << 39) - 1)), u)
    exp = np.where(u == 0, 0, (ae + 64) & 0xFF)
    top = ((mag >> 15) + 1) & 0x1FFFFFF
    carry = (top >> 24) != (mag >> 39)
    top = np.where(carry, (top >> 1) | ((mag >> 39) << 24), top)
    frac = np.where((mag >> 14) & 1 != 0, top, mag >> 15) & 0x7FFFFF
    exp = np.where(((mag >> 14) & 1 != 0) & carry, (exp + 1) & 0xFF, exp)
    bits = (neg.astype(np.int64) << 31) | (exp << 23) | frac
    bits = np.where(am == -(1 << 39), (1 << 31) | (((ae + 65) & 0xFF) << 23), bits)
    nan = ae == _ACC_NAN
    bits = np.where(nan, (neg.astype(np.int64) << 31) | (0xFF << 23) | ((u >> 29) & 0x3FF), bits)
    return bits.astype(np.uint32)


# ---- the convolution -------------------------------------------------------------------------------------------
def direct_conv_fp16(xbits: np.ndarray, wbits: np.ndarray, geom: ConvGeometry, compiled: bool = True
                     ) -> np.ndarray:
    """CSC + CMAC + CACC: fp16 bits x (C, H, W) and w (K, C, R, S) -> FP32 bits (K, OH, OW) uint32.
    ``geom.pad_value`` holds the CSC pad bits (low 16 bits used). Without NaNs (and unless not ``compiled``)
    the compiled loop of ``conv_fp16_jit`` computes it, else the array operations below."""
    g = geom
    C, K, R, S, OH, OW = g.channels, g.kernels, g.kernel_height, g.kernel_width, g.out_height, g.out_width
    slices = -(-C // SLICE)
    span_h = (OH - 1) * g.stride_y + (R - 1) * g.dilation_y + 1
    span_w = (OW - 1) * g.stride_x + (S - 1) * g.dilation_x + 1
    # Lanes past C read 0 (CSC), every other lane outside the cube the pad value.
    padded = np.zeros((slices * SLICE, span_h, span_w), dtype=np.int64)
    padded[:C] = g.pad_value & 0xFFFF
    y0, y1 = max(0, -g.pad_top), min(g.height, span_h - g.pad_top)
    x0, x1 = max(0, -g.pad_left), min(g.width, span_w - g.pad_left)
    if y0 < y1 and x0 < x1:
        padded[:C, y0 + g.pad_top: y1 + g.pad_top, x0 + g.pad_left: x1 + g.pad_left] = \
            np.asarray(xbits, dtype=np.int64)[:C, y0:y1, x0:x1] & 0xFFFF
    wpad = np.zeros((K, slices * SLICE, R, S), dtype=np.int64)
    wpad[:, :C] = np.asarray(wbits, dtype=np.int64) & 0xFFFF
    if compiled and not (is_nan16(padded).any() or is_nan16(wpad).any()):
        return _direct_conv_jit(padded, wpad, geom)

    ae = np.zeros((K, OH * OW), dtype=np.int64)
    am = np.zeros((K, OH * OW), dtype=np.int64)
    for sl in range(slices):
        lanes = slice(sl * SLICE, (sl + 1) * SLICE)
        for r in range(R):
            for s in range(S):
                ys, xs = r * g.dilation_y, s * g.dilation_x
                taps = padded[lanes, ys: ys + (OH - 1) * g.stride_y + 1: g.stride_y,
                              xs: xs + (OW - 1) * g.stride_x + 1: g.stride_x]
                me, mm = cmac_slice(wpad[:, lanes, r, s], taps.reshape(SLICE, OH * OW).T)
                ae, am = cacc_add(ae, am, me, mm)
    return fp48_to_fp32(ae, am).reshape(K, OH, OW)


def _direct_conv_jit(padded: np.ndarray, wpad: np.ndarray, geom: ConvGeometry) -> np.ndarray:
    """``direct_conv_fp16`` without NaNs, compiled (``conv_fp16_jit``): the fields of every padded data lane
    and weight lane, lanes last (levels int8, signed mantissas int16, the weights' packed Booth digits), then
    one loop over outputs."""
    g = geom
    K, R, S = wpad.shape[0], g.kernel_height, g.kernel_width
    slices = wpad.shape[1] // SLICE
    data = padded.reshape(slices, SLICE, *padded.shape[1:]).transpose(0, 2, 3, 1)
    weights = wpad.reshape(K, slices, SLICE, R, S).transpose(0, 1, 3, 4, 2).reshape(K, slices * R * S, SLICE)
    (d_lv, d_sm, _), (w_lv, w_sm, w_mts) = _jit_fields(data), _jit_fields(weights)
    w_code = jit.booth_code(*booth_digits(w_mts), np.asarray(weights) >> 15)
    ae = np.zeros((K, g.out_height * g.out_width), dtype=np.int64)
    am = np.zeros_like(ae)
    jit.kernel()(w_lv, w_sm, np.ascontiguousarray(w_code), d_lv, d_sm, R, S, g.out_width,
                 g.stride_y, g.stride_x, g.dilation_y, g.dilation_x, ae, am)
    return fp48_to_fp32(ae, am).reshape(K, g.out_height, g.out_width)


def _jit_fields(bits: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(level int8, ``jit.ABSENT`` for lanes that take no part; signed pre-shifted mantissa int16, 0 there;
    mantissa) of fp16 bit patterns, C-contiguous as the kernel's vector loads need."""
    nz, hi, mts, sign = _fields(bits)
    level = np.ascontiguousarray(np.where(nz, hi, jit.ABSENT), dtype=np.int8)
    signed = np.where(sign != 0, -mts.astype(np.int64), mts)
    return level, np.ascontiguousarray(np.where(nz, signed, 0), dtype=np.int16), mts


def input_conversion(cdma: RegView) -> str:
    """How CDMA turns memory into fp16: "none" (fp16 input) or "int16" (int16 input, CVT to fp16)."""
    return "int16" if cdma.D_MISC_CFG.IN_PRECISION == 1 else "none"


def run_fp16(ctx: OpContext, geom: ConvGeometry) -> np.ndarray:
    """The fp16 operation ``conv.run`` hands over after decoding: returns FP32 values (C_pad, OH, OW) float32."""
    hw, regs = ctx.hw, ctx.regs
    cdma = regs["CDMA"]
    atom = hw.atom_elements("fp16")
    layout = CubeLayout(
        channels=geom.channels, height=geom.height, width=geom.width,
        line_stride=dma_bytes(hw, cdma.D_LINE_STRIDE.LINE_STRIDE),
        surf_stride=dma_bytes(hw, cdma.D_SURF_STRIDE.SURF_STRIDE),
        atom=atom, bpe=2,
    )
    plan = ctx.cbuf  # CBUF state: DATA_REUSE / WEIGHT_REUSE read what an earlier operation kept
    if plan is not None and plan.weights is not None:  # CDMA fetches no weights: it counts none
        wraw = np.frombuffer(plan.weights, dtype=np.uint8)
        whalf = np.zeros(0, dtype="<u2")
    else:
        wspace = ram_space(hw, ctx.mem, cdma.D_WEIGHT_RAM_TYPE, "WEIGHT_RAM_TYPE")
        wraw = wspace.read(dma_address(hw, cdma, "D_WEIGHT_ADDR"), cdma.D_WEIGHT_BYTES.WEIGHT_BYTES)
        whalf = np.ascontiguousarray(wraw[: len(wraw) // 2 * 2]).view("<u2")
    w = unpack_weights(wraw, geom, hw, "fp16") & 0xFFFF
    ctx.report("CDMA", "D_NAN_INPUT_WEIGHT_NUM", int(np.count_nonzero(is_nan16(whalf))))
    ctx.report("CDMA", "D_INF_INPUT_WEIGHT_NUM", int(np.count_nonzero(is_inf16(whalf))))

    if plan is not None and plan.data is not None:  # the resident cube, already converted; nothing fetched
        x = plan.data
        ctx.report("CDMA", "D_NAN_INPUT_DATA_NUM", 0)
        ctx.report("CDMA", "D_INF_INPUT_DATA_NUM", 0)
        return _finish(x, w, geom, atom, ctx)
    fspace = ram_space(hw, ctx.mem, cdma.D_DAIN_RAM_TYPE, "DATAIN_RAM_TYPE")
    raw = read_cube(fspace, dma_address(hw, cdma, "D_DAIN_ADDR", "_0"), layout, signed=False)
    if input_conversion(cdma) == "int16":
        cvt = cdma.D_CVT_CFG
        ints = np.where(raw >= 1 << 15, raw - (1 << 16), raw)[: geom.channels]
        v = cdma_convert(ints, cdma.D_CVT_OFFSET.signed("CVT_OFFSET"), cdma.D_CVT_SCALE.signed("CVT_SCALE"),
                         cvt.CVT_TRUNCATE, 17)
        with np.errstate(over="ignore"):  # |v| >= 65520 rounds to Inf, as FpIntToFloat does
            x = v.astype(np.float64).astype(np.float16).view(np.uint16).astype(np.int64)
        ctx.report("CDMA", "D_NAN_INPUT_DATA_NUM", 0)
        ctx.report("CDMA", "D_INF_INPUT_DATA_NUM", 0)
    else:
        ctx.report("CDMA", "D_NAN_INPUT_DATA_NUM", int(np.count_nonzero(is_nan16(raw))))
        ctx.report("CDMA", "D_INF_INPUT_DATA_NUM", int(np.count_nonzero(is_inf16(raw))))
        x = raw[: geom.channels]
        if cdma.D_NAN_FLUSH_TO_ZERO.NAN_TO_ZERO:
            x = np.where(is_nan16(x), 0, x)
    if plan is not None:
        plan.cube = x  # what a later DATA_REUSE reads
    return _finish(x, w, geom, atom, ctx)


def _finish(x: np.ndarray, w: np.ndarray, geom: ConvGeometry, atom: int, ctx: OpContext) -> np.ndarray:
    """CSC/CMAC/CACC on the (converted) fp16 cube: FP32 values (C_pad, OH, OW) float32."""
    bits = direct_conv_fp16(x, w, geom)
    out = np.zeros((-(-geom.kernels // atom) * atom, geom.out_height, geom.out_width), dtype=np.uint32)
    out[: geom.kernels] = bits
    ctx.report("CACC", "D_OUT_SATURATION", 0)
    return out.view(np.float32)
