"""NVDLA's float formats (fp16, FP17, fp32) as bit patterns, bit-exact to the nv_full cmod, vectorized.

Every function takes and returns *bit patterns* (integer numpy arrays or ints): fp16 -> uint16,
FP17 (1 sign, 6 exponent, 10 mantissa bits, bias 31) -> uint32 holding 17 bits, fp32 -> uint32.
Inputs may be any integer dtype; only the format's low bits are used. Scalars come back as 0-d arrays.

The cmod's float library (``hw:nvdlav1:cmod/hls/include/nvdla_float.h``; ``cmod/hls/vlibs/*.cpp`` are
one-line wrappers of it) is *not* IEEE 754. It is emulated here with integer arithmetic (int64), never
with numpy float math, because the rules differ in ways that matter:

Rules (all from nvdla_float.h unless named otherwise):
- Rounding: every narrowing rounds to nearest, ties to even (``FpMantRNE``, ``FpMantDecShiftRight``).
- Overflow saturates: ``SetToInf`` writes the largest *finite* value (exponent max-1, mantissa all ones)
  with the sign, so no operation or conversion ever produces an infinity; an input Inf is max-finite
  after any conversion (``FpExpoWidthInc``, ``FpWidthDec``, ``FpExpoWidthDec``).
- NaN in a conversion keeps sign and the *low* mantissa bits unshifted (``FpMantWidthInc`` skips the
  shift for NaN; narrowing keeps ``mant & (2^M-1)``): fp16 0x7E00 -> fp32 0x7F800200, and an fp32 NaN whose
  low 10 mantissa bits are 0 becomes the fp16/FP17 Inf pattern.
- NaN in add/sub/mul/max/min: the result is operand a if a is NaN, else b if b is NaN, bit for bit.
- Denormals: fp16 -> fp32 / FP17 normalizes them (``DENORM_YES``); fp32 -> fp16 and FP17 -> fp16 produce
  them with RNE; fp32 -> FP17 flushes results below 2^-30 to (signed) zero unless rounding reaches 2^-30
  (``Fp32ToFp17`` is ``DENORM_NO``); FP17 -> fp32 reads an FP17 denormal as if its exponent field 0 were
  a normal exponent (1.m x 2^-31, ``Fp17ToFp32`` is ``DENORM_NO``).
- Arithmetic (``FpAdd``, ``FpMul``) treats any non-zero operand with exponent field 0 as 1.m x 2^(1-bias-1)
  (implied 1 at exponent 0), flushes results whose exponent would be <= 0 to zero of the result sign, and
  treats the Inf exponent as an ordinary one (Inf x 0.5 is finite). Mul sign of zero = sign_a ^ sign_b;
  add of exact opposites gives zero with the sign of the larger-magnitude operand (a on ties), so
  1 + (-1) = +0 but (-1) + 1 = -0.
- FpAdd aligns the smaller operand with a plain right shift into a 2M+3-bit window (bits shifted out
  are lost, not sticky), then normalizes and rounds once (RNE).
- FpMul rounds the exact 2M+2-bit product once (RNE).
- Max/min compare sign-magnitude (+0 > -0); ``fp*_eql`` is bitwise equality.

IEEE float32 arithmetic is *not* used for fp32 add/mul: it agrees on normal operands with normal results
(checked in tests/golden/test_fp.py) but differs on denormals, Inf, NaN payloads, overflow and signed
zeros, so the emulation is the only definition here.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from golden.arith import rha

Bits = np.ndarray | int


@dataclass(frozen=True)
class FloatFormat:
    """A sign/exponent/mantissa format of the cmod (``ExpoWidth``, ``MantWidth``)."""

    name: str
    expo: int
    mant: int

    @property
    def width(self) -> int:
        return 1 + self.expo + self.mant

    @property
    def bias(self) -> int:
        return (1 << (self.expo - 1)) - 1

    @property
    def emax(self) -> int:
        """All-ones exponent field (Inf/NaN)."""
        return (1 << self.expo) - 1

    @property
    def max_finite(self) -> int:
        """Magnitude bits of ``SetToInf``: exponent emax-1, mantissa all ones."""
        return ((self.emax - 1) << self.mant) | ((1 << self.mant) - 1)


FP16 = FloatFormat("fp16", 5, 10)
FP17 = FloatFormat("fp17", 6, 10)
FP32 = FloatFormat("fp32", 8, 23)

_OUT_DTYPE = {16: np.uint16, 17: np.uint32, 32: np.uint32}


# ---------------------------------------------------------------------------------------------------
# Field helpers (int64 arrays)
# ---------------------------------------------------------------------------------------------------
def _i64(x: Bits) -> np.ndarray:
    return np.asarray(x).astype(np.int64)


def _mask(n: int) -> int:
    return (1 << n) - 1


def _split(bits: Bits, f: FloatFormat) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    b = _i64(bits) & _mask(f.width)
    return (b >> (f.width - 1)) & 1, (b >> f.mant) & f.emax, b & _mask(f.mant)


def _pack(sign: np.ndarray, expo: np.ndarray, mant: np.ndarray, f: FloatFormat) -> np.ndarray:
    v = ((sign & 1) << (f.width - 1)) | ((expo & f.emax) << f.mant) | (mant & _mask(f.mant))
    return v.astype(_OUT_DTYPE[f.width])


def _is_nan(expo: np.ndarray, mant: np.ndarray, f: FloatFormat) -> np.ndarray:
    return (expo == f.emax) & (mant != 0)


def bit_length(v: np.ndarray) -> np.ndarray:
    """Bit length of non-negative int64 values below 2^53 (exact via frexp; 0 -> 0)."""
    v = _i64(v)
    return np.frexp(v.astype(np.float64))[1].astype(np.int64)


def _lshift(v: np.ndarray, s: np.ndarray | int) -> np.ndarray:
    """ac_int shift by a signed amount: left for s >= 0, right (truncating) for s < 0."""
    s = _i64(s)
    return np.where(s >= 0, v << np.clip(s, 0, 63), v >> np.clip(-s, 0, 63))


def _rne(v: np.ndarray, in_width: int, out_width: int) -> tuple[np.ndarray, np.ndarray]:
    """``FpMantRNE``: keep the top ``out_width`` of ``in_width`` bits, round to nearest even.

    Returns the kept bits (wrapping to 0 when rounding carries out) and that carry-out flag."""
    t = in_width - out_width
    if t <= 0:
        return (v << -t) & _mask(out_width), np.zeros(np.shape(v), dtype=bool)
    kept = (v >> t) & _mask(out_width)
    guard = (v >> (t - 1)) & 1
    sticky = (v & _mask(t - 1)) != 0
    carry = (guard == 1) & (sticky | ((kept & 1) == 1))
    overflow = carry & (kept == _mask(out_width))
    return (kept + carry) & _mask(out_width), overflow


def _shift_right_rne(mant: np.ndarray, shift: np.ndarray, in_mant: int, out_mant: int) -> tuple[np.ndarray, np.ndarray]:
    """``FpMantDecShiftRight``: (1.mant) >> shift, narrowed from ``in_mant`` to ``out_mant`` bits, RNE.

    Used for results that become denormal; returns (mantissa, carried into the implied bit)."""
    delta = in_mant - out_mant
    p1 = mant | (1 << in_mant)
    pos = delta + shift  # position of the kept LSB in p1 (shift >= 1)
    guard = (p1 >> np.clip(pos - 1, 0, 63)) & 1
    sticky = (p1 & ((np.int64(1) << np.clip(pos - 1, 0, 62)) - 1)) != 0
    least = (p1 >> np.clip(pos, 0, 63)) & 1
    carry = (guard == 1) & (sticky | (least == 1))
    kept = (p1 >> np.clip(pos, 0, 63)) & _mask(out_mant + 1)
    total = (kept + carry) & _mask(out_mant + 1)
    return total & _mask(out_mant), (total >> out_mant) == 1


# ---------------------------------------------------------------------------------------------------
# Width changes (conversions)
# ---------------------------------------------------------------------------------------------------
def _mant_width_inc(bits: Bits, i: FloatFormat, o: FloatFormat) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``FpMantWidthInc``: mantissa shifted up, except a NaN keeps its bits unshifted."""
    s, e, m = _split(bits, i)
    return s, e, np.where(_is_nan(e, m, i), m, m << (o.mant - i.mant))


def _expo_width_inc(s: np.ndarray, e: np.ndarray, m: np.ndarray, i: FloatFormat, o: FloatFormat, denorm: bool) -> np.ndarray:
    """``FpExpoWidthInc`` on split fields (mantissa already ``o.mant`` wide)."""
    delta = o.bias - i.bias
    zero = (e == 0) & (m == 0)
    oe = np.where(zero, 0, (e + delta) & o.emax)
    om = np.where(zero, 0, m)
    if denorm:
        den = (e == 0) & (m != 0)
        zc = o.mant - bit_length(m)  # leading zeros in the o.mant-bit mantissa
        oe = np.where(den, delta - zc, oe)
        om = np.where(den, (m << (zc + 1)) & _mask(o.mant), om)
    inf = (e == i.emax) & (m == 0)
    oe = np.where(inf, o.emax - 1, oe)
    om = np.where(inf, _mask(o.mant), om)
    nan = (e == i.emax) & (m != 0)
    oe = np.where(nan, o.emax, oe)
    return _pack(s, oe, om, o)


def _width_inc(bits: Bits, i: FloatFormat, o: FloatFormat, denorm: bool) -> np.ndarray:
    """``FpWidthInc``: mantissa first (at the input exponent width), then the exponent."""
    s, e, m = _mant_width_inc(bits, i, o) if o.mant != i.mant else _split(bits, i)
    return _expo_width_inc(s, e, m, i, o, denorm)


def _width_dec(bits: Bits, i: FloatFormat, o: FloatFormat, denorm: bool) -> np.ndarray:
    """``FpWidthDec`` (fp32 -> fp16 / FP17): saturate, flush, denormalize or round the mantissa."""
    s, e, m = _split(bits, i)
    delta = i.bias - o.bias
    inf = e >= o.emax + delta
    zero = ~inf & (e < delta - o.mant)
    den = ~inf & ~zero & (e <= delta)
    shift = np.clip(delta - e + 1, 1, 63)
    dm, dovf = _shift_right_rne(m, shift, i.mant, o.mant)
    if not denorm:
        zero = zero | (den & ~dovf)
    de = np.where(dovf, 1, 0)
    nm, novf = _rne(m | (1 << i.mant), i.mant + 1, o.mant + 1)
    ne = e - delta + novf
    inf = inf | (~den & ~zero & (ne == o.emax))
    oe = np.where(den, de, ne)
    om = np.where(den, dm, nm)
    oe = np.where(inf, o.emax - 1, np.where(zero, 0, oe))
    om = np.where(inf, _mask(o.mant), np.where(zero, 0, om))
    nan = _is_nan(e, m, i)
    oe = np.where(nan, o.emax, oe)
    om = np.where(nan, m & _mask(o.mant), om)
    return _pack(s, oe, om, o)


def _expo_width_dec(bits: Bits, i: FloatFormat, o: FloatFormat) -> np.ndarray:
    """``FpExpoWidthDec`` (FP17 -> fp16): same mantissa width, denormals produced with RNE."""
    s, e, m = _split(bits, i)
    delta = i.bias - o.bias
    inf = e >= o.emax + delta
    zero = ~inf & (e < delta - o.mant)
    den = ~inf & ~zero & (e <= delta)
    dm, dovf = _shift_right_rne(m, np.clip(delta - e + 1, 1, 63), i.mant, o.mant)
    oe = np.where(den, np.where(dovf, 1, 0), e - delta)
    om = np.where(den, dm, m)
    oe = np.where(inf, o.emax - 1, np.where(zero, 0, oe))
    om = np.where(inf, _mask(o.mant), np.where(zero, 0, om))
    nan = _is_nan(e, m, i)
    oe = np.where(nan, o.emax, oe)
    om = np.where(nan, m, om)
    return _pack(s, oe, om, o)


def fp16_to_fp32(bits: Bits) -> np.ndarray:
    """``Fp16ToFp32`` (FpWidthInc, DENORM_YES): exact for finite values; Inf -> max finite fp32."""
    return _width_inc(bits, FP16, FP32, denorm=True)


def fp16_to_fp17(bits: Bits) -> np.ndarray:
    """``Fp16ToFp17`` (FpExpoWidthInc, DENORM_YES): exact for finite values; Inf -> max finite FP17."""
    s, e, m = _split(bits, FP16)
    return _expo_width_inc(s, e, m, FP16, FP17, denorm=True)


def fp17_to_fp32(bits: Bits) -> np.ndarray:
    """``Fp17ToFp32`` (FpWidthInc, DENORM_NO): an FP17 denormal reads as 1.m x 2^-31."""
    return _width_inc(bits, FP17, FP32, denorm=False)


def fp32_to_fp16(bits: Bits) -> np.ndarray:
    """``Fp32ToFp16`` (FpWidthDec, DENORM_YES): RNE, fp16 denormals kept, overflow -> +-65504."""
    return _width_dec(bits, FP32, FP16, denorm=True)


def fp32_to_fp17(bits: Bits) -> np.ndarray:
    """``Fp32ToFp17`` (FpWidthDec, DENORM_NO): RNE, results below 2^-30 flush to zero."""
    return _width_dec(bits, FP32, FP17, denorm=False)


def fp17_to_fp16(bits: Bits) -> np.ndarray:
    """``Fp17ToFp16`` (FpExpoWidthDec): RNE into fp16 denormals, overflow -> +-65504."""
    return _expo_width_dec(bits, FP17, FP16)


# ---------------------------------------------------------------------------------------------------
# Arithmetic
# ---------------------------------------------------------------------------------------------------
def fp_add(a: Bits, b: Bits, f: FloatFormat) -> np.ndarray:
    """``FpAdd<E,M>``: align into a 2M+3-bit window (truncating), add, normalize, RNE once."""
    sa, ea, ma = _split(a, f)
    sb, eb, mb = _split(b, f)
    pa = ma | np.where((ea == 0) & (ma == 0), 0, 1 << f.mant)
    pb = mb | np.where((eb == 0) & (mb == 0), 0, 1 << f.mant)
    a_big = (ea > eb) | ((ea == eb) & (ma >= mb))
    oe = np.where(a_big, ea, eb)
    more = f.mant + 2
    iw = 2 * f.mant + 3  # InternalMantWidth
    diff = np.abs(ea - eb)
    big = np.where(a_big, pa, pb) << more
    small = _lshift(np.where(a_big, pb, pa), more - diff) & _mask(iw)
    sign = np.where(a_big, sa, sb)
    total = np.where(sa == sb, big + small, big - small)  # < 2^(iw+1), never negative
    carry = (total >> iw) == 1
    inf = carry & ~(oe < f.emax - 1)
    # carry: one more exponent, drop the LSB (truncating); else normalize the MSB to bit iw-1.
    zc = iw - bit_length(total)
    zero = ~carry & ((oe <= zc) | (total == 0))
    mant = np.where(carry, total >> 1, np.where(zero, 0, (total << np.clip(zc, 0, 63)) & _mask(iw)))
    oe = np.where(carry, oe + 1, np.where(zero, 0, oe - zc))
    kept, ovf = _rne(mant, iw, f.mant + 1)
    inf = inf | (ovf & ~(oe < f.emax - 1))
    oe = oe + (ovf & (oe < f.emax - 1))
    oe = np.where(inf, f.emax - 1, oe)
    om = np.where(inf, _mask(f.mant), kept)
    out = _pack(sign, oe, om, f)
    return _nan_pick(out, a, b, ea, ma, eb, mb, f)


def fp_sub(a: Bits, b: Bits, f: FloatFormat) -> np.ndarray:
    """``FpSub``: a + (b with its sign flipped), so a NaN b keeps its flipped sign."""
    return fp_add(a, _i64(b) ^ (1 << (f.width - 1)), f)


def fp_mul(a: Bits, b: Bits, f: FloatFormat) -> np.ndarray:
    """``FpMul<E,M>``: exact 2M+2-bit product, one RNE; exponent <= 0 flushes to zero, overflow saturates."""
    sa, ea, ma = _split(a, f)
    sb, eb, mb = _split(b, f)
    za = (ea == 0) & (ma == 0)
    zb = (eb == 0) & (mb == 0)
    pa = ma | np.where(za, 0, 1 << f.mant)
    pb = mb | np.where(zb, 0, 1 << f.mant)
    prod = pa * pb  # 2M+2 bits
    pw = 2 * f.mant + 1  # pMantWidth
    esum = ea + eb
    zero = za | zb | (esum < f.bias)
    inf = ~zero & (esum >= f.emax + f.bias)
    pe = esum - f.bias
    top = (prod >> pw) == 1
    inf = inf | (~zero & top & ~(pe < f.emax - 1))
    pe = pe + top
    pm = np.where(top, prod, prod << 1) & _mask(pw)
    kept, ovf = _rne(pm | (1 << pw), pw + 1, f.mant + 1)  # FpMantWidthDec
    oe = pe + ovf
    inf = inf | (ovf & (oe == f.emax))
    zero = zero | (~inf & ((oe & f.emax) == 0))
    sign = sa ^ sb
    oe = np.where(inf, f.emax - 1, np.where(zero, 0, oe))
    om = np.where(inf, _mask(f.mant), np.where(zero, 0, kept))
    out = _pack(sign, oe, om, f)
    return _nan_pick(out, a, b, ea, ma, eb, mb, f)


def _nan_pick(out: np.ndarray, a: Bits, b: Bits, ea, ma, eb, mb, f: FloatFormat) -> np.ndarray:
    dt = _OUT_DTYPE[f.width]
    a_bits = (_i64(a) & _mask(f.width)).astype(dt)
    b_bits = (_i64(b) & _mask(f.width)).astype(dt)
    return np.where(_is_nan(ea, ma, f), a_bits, np.where(_is_nan(eb, mb, f), b_bits, out)).astype(dt)


def _order_key(bits: Bits, f: FloatFormat) -> np.ndarray:
    """Sign-magnitude order of ``FpCmp`` (+0 above -0), as an int64 key."""
    b = _i64(bits) & _mask(f.width)
    mag = b & _mask(f.width - 1)
    return np.where((b >> (f.width - 1)) == 1, -mag - 1, mag)


def fp_max(a: Bits, b: Bits, f: FloatFormat) -> np.ndarray:
    """``FpMax``: the larger in sign-magnitude order; a NaN a (then b) wins."""
    return _cmp(a, b, f, True)


def fp_min(a: Bits, b: Bits, f: FloatFormat) -> np.ndarray:
    """``FpMin``: the smaller in sign-magnitude order; a NaN a (then b) wins."""
    return _cmp(a, b, f, False)


def _cmp(a: Bits, b: Bits, f: FloatFormat, take_max: bool) -> np.ndarray:
    ka, kb = _order_key(a, f), _order_key(b, f)
    dt = _OUT_DTYPE[f.width]
    a_bits = (_i64(a) & _mask(f.width)).astype(dt)
    b_bits = (_i64(b) & _mask(f.width)).astype(dt)
    out = np.where(ka > kb if take_max else ka < kb, a_bits, b_bits)
    _, ea, ma = _split(a, f)
    _, eb, mb = _split(b, f)
    return np.where(_is_nan(ea, ma, f), a_bits, np.where(_is_nan(eb, mb, f), b_bits, out)).astype(dt)


def fp_eql(a: Bits, b: Bits, f: FloatFormat) -> np.ndarray:
    """``FpEql``: 1 where the bit patterns are equal (so +0 != -0 and NaN == same NaN), else 0."""
    return ((_i64(a) & _mask(f.width)) == (_i64(b) & _mask(f.width))).astype(_OUT_DTYPE[f.width])


def fp_relu(bits: Bits, f: FloatFormat) -> np.ndarray:
    """``FpRelu``: negative non-NaN values (including -0) become +0; NaN and positives pass."""
    s, e, m = _split(bits, f)
    keep = (s == 0) | _is_nan(e, m, f)
    return np.where(keep, _i64(bits) & _mask(f.width), 0).astype(_OUT_DTYPE[f.width])


def fp32_add(a: Bits, b: Bits) -> np.ndarray:
    """``Fp32Add`` (vlibs fp32_add.cpp)."""
    return fp_add(a, b, FP32)


def fp32_sub(a: Bits, b: Bits) -> np.ndarray:
    """``Fp32Sub`` (vlibs fp32_sub.cpp)."""
    return fp_sub(a, b, FP32)


def fp32_mul(a: Bits, b: Bits) -> np.ndarray:
    """``Fp32Mul`` (vlibs fp32_mul.cpp)."""
    return fp_mul(a, b, FP32)


def fp32_max(a: Bits, b: Bits) -> np.ndarray:
    return fp_max(a, b, FP32)


def fp32_min(a: Bits, b: Bits) -> np.ndarray:
    return fp_min(a, b, FP32)


def fp17_add(a: Bits, b: Bits) -> np.ndarray:
    """``Fp17Add`` (vlibs fp17_add.cpp)."""
    return fp_add(a, b, FP17)


def fp17_sub(a: Bits, b: Bits) -> np.ndarray:
    """``Fp17Sub`` (vlibs fp17_sub.cpp)."""
    return fp_sub(a, b, FP17)


def fp17_mul(a: Bits, b: Bits) -> np.ndarray:
    """``Fp17Mul`` (vlibs fp17_mul.cpp)."""
    return fp_mul(a, b, FP17)


def fp17_max(a: Bits, b: Bits) -> np.ndarray:
    """vlibs fp17_max.cpp."""
    return fp_max(a, b, FP17)


def fp17_min(a: Bits, b: Bits) -> np.ndarray:
    """vlibs fp17_min.cpp."""
    return fp_min(a, b, FP17)


def fp16_add(a: Bits, b: Bits) -> np.ndarray:
    """vlibs fp16_add.cpp (FpAdd<5,10>)."""
    return fp_add(a, b, FP16)


def fp16_sub(a: Bits, b: Bits) -> np.ndarray:
    """vlibs fp16_sub.cpp."""
    return fp_sub(a, b, FP16)


def fp16_mul(a: Bits, b: Bits) -> np.ndarray:
    """vlibs fp16_mul.cpp (FpMul<5,10>)."""
    return fp_mul(a, b, FP16)


def fp16_max(a: Bits, b: Bits) -> np.ndarray:
    return fp_max(a, b, FP16)


def fp16_min(a: Bits, b: Bits) -> np.ndarray:
    return fp_min(a, b, FP16)


# ---------------------------------------------------------------------------------------------------
# Integers and fractions
# ---------------------------------------------------------------------------------------------------
def int_to_float(value: Bits, int_width: int, f: FloatFormat) -> np.ndarray:
    """``FpIntToFloat<IntWidth,E,M>``: a signed ``int_width``-bit integer, RNE; too large -> max finite."""
    v = _i64(value) & _mask(int_width)
    v = np.where(v >> (int_width - 1) == 1, v - (1 << int_width), v)
    sign = (v < 0).astype(np.int64)
    mag = np.abs(v)
    lz = int_width - bit_length(mag)
    norm = (mag << np.clip(lz, 0, 63)) & _mask(int_width)
    oe = (int_width - 1 - lz + f.bias) & f.emax
    kept, ovf = _rne(norm, int_width, f.mant + 1)
    inf = (oe == f.emax) | (ovf & ~(oe < f.emax - 1))
    oe = oe + (ovf & (oe < f.emax - 1))
    zero = mag == 0
    oe = np.where(inf, f.emax - 1, np.where(zero, 0, oe))
    om = np.where(inf, _mask(f.mant), np.where(zero, 0, kept))
    return _pack(sign, oe, om, f)


def int16_to_fp16(value: Bits) -> np.ndarray:
    """``Int16ToFp16``."""
    return int_to_float(value, 16, FP16)


def int17_to_fp16(value: Bits) -> np.ndarray:
    """``Int17ToFp16`` (SDP output CVT of an int path with OUT_PRECISION=FP16, cmod sdp_c.cpp)."""
    return int_to_float(value, 17, FP16)


def fraction_to_float(frac: Bits, frac_width: int, f: FloatFormat) -> np.ndarray:
    """``FpFractionToFloat<FracWidth,E,M>``: the unsigned fraction frac / 2^frac_width, RNE, positive.

    Values that would be denormal (exponent <= 0) are zero."""
    x = _i64(frac) & _mask(frac_width)
    zc = frac_width - bit_length(x)
    shifted = (x << np.clip(zc + 1, 0, 63)) & _mask(frac_width + 1)
    zero = x == 0
    if frac_width <= f.mant:
        oe = f.bias - zc - 1
        om = (shifted & _mask(frac_width)) << (f.mant - frac_width)
    else:
        kept, ovf = _rne(shifted, frac_width + 1, f.mant + 1)
        zero = zero | (~ovf & (f.bias <= zc + 1))
        oe = np.where(ovf, f.bias - zc, f.bias - zc - 1)
        om = np.where(ovf, kept >> 1, kept)
    oe = np.where(zero, 0, oe & f.emax)
    om = np.where(zero, 0, om)
    return _pack(np.zeros_like(oe), oe, om, f)


def uint16_to_fp17(value: Bits) -> np.ndarray:
    """vlibs uint16_to_fp17.cpp: ``FpFractionToFloat<16,6,10>``, i.e. the FP17 of value / 2^16."""
    return fraction_to_float(value, 16, FP17)


def float_to_int(bits: Bits, int_width: int, f: FloatFormat) -> np.ndarray:
    """``FpFloatToInt<IntWidth,E,M>``: round half away from zero, saturate; NaN -> the minimum integer.

    The implied 1 is always added (exponent-0 inputs read as 1.m x 2^-bias, which round to 0)."""
    s, e, m = _split(bits, f)
    p1 = m | (1 << f.mant)
    shift = f.mant - (e - f.bias)
    internal = rha(p1, shift)  # |p1 << 2^E| stays far below 2^63 for fp16/fp17
    lo, hi = -(1 << (int_width - 1)), (1 << (int_width - 1)) - 1
    out = np.where(internal > hi, np.where(s == 1, lo, hi), np.where(s == 1, -internal, internal))
    out = np.where(_is_nan(e, m, f), lo, out)
    return out.astype(np.int64)


def fp16_to_int16(bits: Bits) -> np.ndarray:
    """``Fp16ToInt16`` (SDP fp16 path with OUT_PRECISION=INT16, cmod sdp_c.cpp); returns int64 values."""
    return float_to_int(bits, 16, FP16)


def fp32_to_int_frac(bits: Bits, rshift: int | np.ndarray, int_width: int = 9, frac_width: int = 35) -> tuple[np.ndarray, np.ndarray]:
    """``FpFloatToIntFrac<8,23,8,IntWidth,FracWidth>`` (SDP fp LUT index): value·2^-rshift split into its
    integer part (saturated to ``int_width`` unsigned bits) and ``frac_width`` fraction bits (truncated).

    Quirks kept: the implied 1 is always set, the unbiased exponent is held in 8 signed bits (so the
    Inf/NaN exponent 255 reads as -128), and ``rshift`` is an 8-bit signed register value."""
    if int_width > FP32.mant:
        raise ValueError("fp32_to_int_frac models integer widths up to 23 bits")
    _, e, m = _split(bits, FP32)
    p1 = m | (1 << FP32.mant)
    abs_expo = e - FP32.bias
    abs_expo = np.where(abs_expo > 127, abs_expo - 256, abs_expo)
    lshift = abs_expo - _i64(rshift) - FP32.mant
    int_max = _mask(int_width)
    # p1 >= 2^23, so any left shift exceeds a 9..23-bit integer maximum.
    whole = np.where(lshift >= 0, int_max, np.minimum(p1 >> np.clip(-lshift, 0, 63), int_max))
    fs = frac_width + lshift
    frac = np.where(lshift >= 0, 0, _lshift(p1, fs) & _mask(frac_width))
    return whole.astype(np.int64), frac.astype(np.int64)


def pow2_fp32(n: Bits) -> np.ndarray:
    """fp32 bits of 2^n for integer n in [-149, 127] (exact; the cmod's ``(float)pow(2.0, n)``)."""
    n = _i64(n)
    return np.where(n >= -126, (n + 127) << 23, np.int64(1) << np.clip(n + 149, 0, 22)).astype(np.uint32)


# ---------------------------------------------------------------------------------------------------
# numpy views (tests and tools)
# ---------------------------------------------------------------------------------------------------
def bits_of_f16(x) -> np.ndarray:
    """fp16 bits of values (converted with numpy's IEEE float16 rounding)."""
    return np.asarray(x, dtype=np.float16).view(np.uint16)


def bits_of_f32(x) -> np.ndarray:
    """fp32 bits of values (numpy IEEE float32)."""
    return np.asarray(x, dtype=np.float32).view(np.uint32)


def f16_of_bits(bits: Bits) -> np.ndarray:
    return np.asarray(_i64(bits) & 0xFFFF).astype(np.uint16).view(np.float16)


def f32_of_bits(bits: Bits) -> np.ndarray:
    return np.asarray(_i64(bits) & 0xFFFFFFFF).astype(np.uint32).view(np.float32)


def fp17_value(bits: Bits) -> np.ndarray:
    """float64 value of FP17 bits read as IEEE-style (denormals 0.m x 2^-30; Inf/NaN as inf/nan)."""
    s, e, m = _split(bits, FP17)
    mag = np.where(e == 0, m * 2.0 ** (1 - FP17.bias - FP17.mant), (m + 1024) * np.exp2(e - FP17.bias - FP17.mant))
    mag = np.where(e == FP17.emax, np.where(m == 0, np.inf, np.nan), mag)
    return np.where(s == 1, -mag, mag)


__all__ = [
    "FP16", "FP17", "FP32", "FloatFormat",
    "fp16_to_fp32", "fp16_to_fp17", "fp17_to_fp32", "fp32_to_fp16", "fp32_to_fp17", "fp17_to_fp16",
    "fp_add", "fp_sub", "fp_mul", "fp_max", "fp_min", "fp_eql", "fp_relu",
    "fp32_add", "fp32_sub", "fp32_mul", "fp32_max", "fp32_min",
    "fp17_add", "fp17_sub", "fp17_mul", "fp17_max", "fp17_min",
    "fp16_add", "fp16_sub", "fp16_mul", "fp16_max", "fp16_min",
    "int_to_float", "int16_to_fp16", "int17_to_fp16", "fraction_to_float", "uint16_to_fp17",
    "float_to_int", "fp16_to_int16", "fp32_to_int_frac", "pow2_fp32",
    "bits_of_f16", "bits_of_f32", "f16_of_bits", "f32_of_bits", "fp17_value", "bit_length",
]
