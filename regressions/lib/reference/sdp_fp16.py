"""Reference math for the SDP fp16 pipeline (PROC_PRECISION=FP16), one element at a time.

Rules: NVDLA_NOTES.md section 4 "fp16 / int16" and the nv_full cmod (``cmod/hls/sdp/sdp_x.cpp``,
``sdp_y_core.cpp``, ``sdp_y_cvt.cpp``, ``sdp_y_idx.cpp``, ``sdp_y_inp.cpp``, ``sdp_c.cpp``,
``cmod/hls_wrapper/sdp_hls_wrapper.cpp``) whose float arithmetic is ``cmod/hls/include/nvdla_float.h``.

How the floats are computed here (independently of ``golden.fp``, which works on bit fields with
vectorised integer masks): every value is an exact ``fractions.Fraction`` and every result is rounded by
one explicit routine, :func:`round_to_format` (round to nearest, ties to even, then the format's own
saturation / denormal rule). numpy's IEEE float32 is *not* used because the cmod is not IEEE:
overflow saturates to the largest finite value, a non-zero operand with exponent field 0 is read as
1.m x 2^-bias (implied 1), sums are formed from a truncated alignment window, results with exponent
field 0 flush to zero, and NaN payloads are copied bit for bit. Each of these is a rule below.

Values are bit patterns everywhere at the interface: fp16 ints (0..0xFFFF) and fp32 ints (0..2^32-1).
Operands follow the int reference (``regressions.lib.reference.sdp``): a scalar is the REG operand, a 1-D
array of length C a per-channel (PER_KERNEL) MEM operand, a (C, H, W) array a per-element operand. In X
both sources are fp16 bits; in Y a scalar is the 32-bit fp32 REG word and an array holds fp16 bits.

Nothing here imports the golden model but the LUT parameter container (``golden.lut``, data only).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from typing import Union

import numpy as np

from golden.lut import LE_DEPTH, LO_DEPTH, TABLE_LE, TABLE_LO, LutRegisters

from .arith import check_range

Operand = Union[int, np.ndarray]

ALU_MAX, ALU_MIN, ALU_SUM, ALU_EQL = 0, 1, 2, 3
FRACTION_BITS = 35


@dataclass(frozen=True)
class Fmt:
    """A float format: exponent and mantissa widths."""

    expo: int
    mant: int

    @property
    def bias(self) -> int:
        return 2 ** (self.expo - 1) - 1

    @property
    def emax(self) -> int:
        return 2**self.expo - 1

    @property
    def width(self) -> int:
        return 1 + self.expo + self.mant


F16 = Fmt(5, 10)
F17 = Fmt(6, 10)
F32 = Fmt(8, 23)


# ----------------------------------------------------------------------------- bit fields


def fields(bits: int, f: Fmt) -> tuple[int, int, int]:
    bits = int(bits) % (1 << f.width)
    return bits >> (f.width - 1), (bits >> f.mant) % (1 << f.expo), bits % (1 << f.mant)


def pack(sign: int, expo: int, mant: int, f: Fmt) -> int:
    return (sign << (f.width - 1)) | (expo << f.mant) | mant


def is_nan(bits: int, f: Fmt) -> bool:
    _, e, m = fields(bits, f)
    return e == f.emax and m != 0


def largest(sign: int, f: Fmt) -> int:
    """The cmod's saturation value (``SetToInf``): largest finite magnitude with the sign."""
    return pack(sign, f.emax - 1, 2**f.mant - 1, f)


def ieee_value(bits: int, f: Fmt) -> Fraction:
    """Magnitude of a finite pattern the IEEE way (denormal = 0.m x 2^(1-bias))."""
    _, e, m = fields(bits, f)
    if e == 0:
        return Fraction(m) * Fraction(2) ** (1 - f.bias - f.mant)
    return Fraction(2**f.mant + m) * Fraction(2) ** (e - f.bias - f.mant)


def arith_value(e: int, m: int, f: Fmt) -> Fraction:
    """Magnitude as the cmod's FpAdd/FpMul read it: exact zero is 0, everything else 1.m x 2^(e-bias),
    exponent field 0 and the Inf/NaN field included."""
    if e == 0 and m == 0:
        return Fraction(0)
    return Fraction(2**f.mant + m) * Fraction(2) ** (e - f.bias - f.mant)


def _floor_log2(v: Fraction) -> int:
    k = v.numerator.bit_length() - v.denominator.bit_length()
    while Fraction(2) ** k > v:
        k -= 1
    while Fraction(2) ** (k + 1) <= v:
        k += 1
    return k


def rne(v: Fraction) -> int:
    """Nearest integer to v >= 0, ties to even."""
    q, r = divmod(v.numerator, v.denominator)
    twice = 2 * r
    if twice > v.denominator or (twice == v.denominator and q % 2 == 1):
        q += 1
    return q


def round_to_format(sign: int, v: Fraction, f: Fmt, denormals: bool) -> int:
    """Round |value| = v to ``f``: RNE at M+1 significant bits; >= 2^(emax-bias) after rounding saturates
    to the largest finite; below 2^(1-bias) the value is rounded on the denormal grid 2^(1-bias-M) and,
    if ``denormals`` is False, kept only when it rounds up to the smallest normal (else signed zero)."""
    if v == 0:
        return pack(sign, 0, 0, f)
    k = _floor_log2(v)
    if k + f.bias >= 1:
        q = rne(v / Fraction(2) ** (k - f.mant))
        if q == 2 ** (f.mant + 1):
            k, q = k + 1, 2**f.mant
        if k + f.bias >= f.emax:
            return largest(sign, f)
        return pack(sign, k + f.bias, q - 2**f.mant, f)
    q = rne(v / Fraction(2) ** (1 - f.bias - f.mant))
    if q >= 2**f.mant:
        return pack(sign, 1, 0, f)
    if not denormals:
        return pack(sign, 0, 0, f)
    return pack(sign, 0, q, f)


# ----------------------------------------------------------------------------- conversions


def widen(bits: int, src: Fmt, dst: Fmt, denormals: bool) -> int:
    """fp16 -> fp32 / fp16 -> FP17 (``denormals``: read IEEE-style) and FP17 -> fp32 (exponent-0 patterns
    read with an implied 1). Exact for finite inputs; Inf -> largest finite; a NaN keeps its mantissa
    bits unshifted."""
    s, e, m = fields(bits, src)
    if e == src.emax:
        return pack(s, dst.emax, m, dst) if m else largest(s, dst)
    if e == 0 and m == 0:
        return pack(s, 0, 0, dst)
    v = ieee_value(bits, src) if denormals else arith_value(e, m, src)
    return round_to_format(s, v, dst, denormals=True)  # exact: always a normal of dst


def narrow(bits: int, src: Fmt, dst: Fmt, denormals: bool) -> int:
    """fp32 -> fp16 (denormals kept), fp32 -> FP17 (flushed), FP17 -> fp16: RNE; Inf saturates; a NaN
    keeps its low mantissa bits (an all-zero low part gives the Inf pattern)."""
    s, e, m = fields(bits, src)
    if e == src.emax:
        return pack(s, dst.emax, m % (1 << dst.mant), dst) if m else largest(s, dst)
    return round_to_format(s, ieee_value(bits, src), dst, denormals)


def fp16_to_fp32(b: int) -> int:
    return widen(b, F16, F32, True)


def fp16_to_fp17(b: int) -> int:
    return widen(b, F16, F17, True)


def fp17_to_fp32(b: int) -> int:
    return widen(b, F17, F32, False)


def fp32_to_fp16(b: int) -> int:
    return narrow(b, F32, F16, True)


def fp32_to_fp17(b: int) -> int:
    return narrow(b, F32, F17, False)


def fp16_to_int16(b: int) -> int:
    """``Fp16ToInt16``: value (implied 1 always; so exponent-0 inputs are below 1) rounded half away
    from zero, saturated; NaN -> -32768."""
    s, e, m = fields(b, F16)
    if e == F16.emax and m:
        return -(1 << 15)
    v = Fraction(2**10 + m) * Fraction(2) ** (e - 15 - 10)
    q = int(v)
    if 2 * (v - q) >= 1:
        q += 1
    if q > (1 << 15) - 1:
        return -(1 << 15) if s else (1 << 15) - 1
    return -q if s else q


def int_to_fp16(v: int) -> int:
    """``Int17ToFp16`` on a 17-bit signed integer: RNE, saturating."""
    return round_to_format(1 if v < 0 else 0, Fraction(abs(v)), F16, denormals=True) if v else 0


def fraction_to_fp17(frac: int, width: int = FRACTION_BITS) -> int:
    """``FpFractionToFloat``: the FP17 of frac / 2^width, RNE, values below 2^-30 flushed."""
    return round_to_format(0, Fraction(frac, 2**width), F17, denormals=False)


# ----------------------------------------------------------------------------- arithmetic


def _nan_first(a: int, b: int, f: Fmt) -> int | None:
    if is_nan(a, f):
        return a % (1 << f.width)
    if is_nan(b, f):
        return b % (1 << f.width)
    return None


def _finish(sign: int, expo: int, value: Fraction, f: Fmt, bumped_from: int | None) -> int:
    """Round a positive value whose exponent field is ``expo`` to M+1 bits (RNE). A rounding carry bumps
    the exponent; any bump (``bumped_from`` before rounding, or the carry) from a field >= emax-1
    saturates. Exponent field 0 after rounding flushes to zero."""
    if bumped_from is not None and bumped_from >= f.emax - 1:
        return largest(sign, f)
    q = rne(value / Fraction(2) ** (expo - f.bias - f.mant))
    if q == 2 ** (f.mant + 1):
        if expo >= f.emax - 1:
            return largest(sign, f)
        expo, q = expo + 1, 2**f.mant
    if expo == 0:
        return pack(sign, 0, 0, f)
    return pack(sign, expo, q - 2**f.mant, f)


def fp_add(a: int, b: int, f: Fmt) -> int:
    """``FpAdd``: the smaller-magnitude operand (by exponent field, then mantissa; a on ties) is cut to
    the window of 2M+3 bits below the larger's leading bit, the exact sum/difference is normalized
    (a carry first drops its lowest window bit; a leading bit at exponent field <= 0 gives zero) and
    rounded once. The sign is the larger operand's, also for an exact zero."""
    nan = _nan_first(a, b, f)
    if nan is not None:
        return nan
    sa, ea, ma = fields(a, f)
    sb, eb, mb = fields(b, f)
    if (ea, ma) >= (eb, mb):
        (sl, el, ml), (es, ms) = (sa, ea, ma), (eb, mb)
    else:
        (sl, el, ml), (es, ms) = (sb, eb, mb), (ea, ma)
    big, small = arith_value(el, ml, f), arith_value(es, ms, f)
    lsb = Fraction(2) ** (el - f.bias - 2 * f.mant - 2)
    small = (small // lsb) * lsb
    total = big + small if sa == sb else big - small
    if total >= Fraction(2) ** (el - f.bias + 1):  # carry out of the window
        total = (total // (2 * lsb)) * (2 * lsb)
        return _finish(sl, el + 1, total, f, bumped_from=el)
    if total == 0:
        return pack(sl, 0, 0, f)
    expo = _floor_log2(total) + f.bias
    if expo <= 0:
        return pack(sl, 0, 0, f)
    return _finish(sl, expo, total, f, bumped_from=None)


def fp_sub(a: int, b: int, f: Fmt) -> int:
    """``FpSub``: a + b with b's sign bit flipped (a NaN b comes back flipped)."""
    return fp_add(a, int(b) ^ (1 << (f.width - 1)), f)


def fp_mul(a: int, b: int, f: Fmt) -> int:
    """``FpMul``: zero when an operand is exactly zero or the exponent fields sum below the bias; the
    largest finite when they sum to emax+bias or more; else the exact product rounded once. A product
    that needs one more exponent at field >= emax-1 saturates; exponent field 0 flushes."""
    nan = _nan_first(a, b, f)
    if nan is not None:
        return nan
    sa, ea, ma = fields(a, f)
    sb, eb, mb = fields(b, f)
    sign = sa ^ sb
    if (ea == 0 and ma == 0) or (eb == 0 and mb == 0) or ea + eb < f.bias:
        return pack(sign, 0, 0, f)
    if ea + eb >= f.emax + f.bias:
        return largest(sign, f)
    prod = arith_value(ea, ma, f) * arith_value(eb, mb, f)
    expo = ea + eb - f.bias
    if prod >= Fraction(2) ** (expo - f.bias + 1):
        return _finish(sign, expo + 1, prod, f, bumped_from=expo)
    return _finish(sign, expo, prod, f, bumped_from=None)


def _key(bits: int, f: Fmt) -> int:
    s, e, m = fields(bits, f)
    mag = (e << f.mant) | m
    return -mag - 1 if s else mag


def fp_max(a: int, b: int, f: Fmt) -> int:
    nan = _nan_first(a, b, f)
    if nan is not None:
        return nan
    return a % (1 << f.width) if _key(a, f) > _key(b, f) else b % (1 << f.width)


def fp_min(a: int, b: int, f: Fmt) -> int:
    nan = _nan_first(a, b, f)
    if nan is not None:
        return nan
    return a % (1 << f.width) if _key(a, f) < _key(b, f) else b % (1 << f.width)


def fp_alu(algo: int, a: int, b: int) -> int:
    """``FpAlu`` on fp32: MAX, MIN, SUM, or EQL = 1 if the bit patterns differ else 0 (in X too)."""
    if algo == ALU_MAX:
        return fp_max(a, b, F32)
    if algo == ALU_MIN:
        return fp_min(a, b, F32)
    if algo == ALU_SUM:
        return fp_add(a, b, F32)
    return 0 if a % 2**32 == b % 2**32 else 1


def fp_relu(bits: int) -> int:
    s, _, _ = fields(bits, F32)
    return bits if (s == 0 or is_nan(bits, F32)) else 0


# ----------------------------------------------------------------------------- parameters


@dataclass(frozen=True)
class Fp16XParams:
    """X1/X2 in fp16 mode. Operands are fp16 bit patterns (REG field [15:0] or MEM)."""

    bypass: bool = True
    alu_bypass: bool = True
    alu_algo: int = ALU_SUM
    alu_operand: Operand = 0
    mul_bypass: bool = True
    mul_prelu: bool = False
    mul_operand: Operand = 0
    relu_bypass: bool = True


@dataclass(frozen=True)
class Fp16YParams:
    """Y in fp16 mode. A scalar operand is the fp32 REG word, an array fp16 MEM data."""

    bypass: bool = True
    alu_bypass: bool = True
    alu_algo: int = ALU_SUM
    alu_operand: Operand = 0
    mul_bypass: bool = True
    mul_prelu: bool = False
    mul_operand: Operand = 0
    lut_bypass: bool = True


@dataclass(frozen=True)
class Fp16Params:
    x1: Fp16XParams = field(default_factory=Fp16XParams)
    x2: Fp16XParams = field(default_factory=Fp16XParams)
    y: Fp16YParams = field(default_factory=Fp16YParams)
    lut: LutRegisters = field(default_factory=LutRegisters)
    nan_to_zero: bool = False
    out: str = "fp16"  # or "int16"


# ----------------------------------------------------------------------------- stages


def _operand_at(operand: Operand, index: tuple[int, int, int], shape: tuple[int, ...]) -> int:
    if np.ndim(operand) == 0:
        return int(operand)
    array = np.asarray(operand)
    if array.ndim == 1:
        return int(array[index[0]])
    if array.shape != tuple(shape):
        raise ValueError(f"per-element operand shape {array.shape} != cube shape {tuple(shape)}")
    return int(array[index])


def _flush(op16: int, nan_to_zero: bool) -> int:
    op16 = int(op16) % 2**16
    return 0 if nan_to_zero and is_nan(op16, F16) else op16


def x_stage(v: int, xp: Fp16XParams, nan_to_zero: bool, index=(0, 0, 0), shape=(1, 1, 1)) -> int:
    """X1/X2: ALU with the widened fp16 operand, MUL (PReLU passes sign-0 data), ReLU. No shifts."""
    if xp.bypass:
        return v
    check_range("alu_algo", xp.alu_algo, 0, 3)
    if not xp.alu_bypass:
        op = fp16_to_fp32(_flush(_operand_at(xp.alu_operand, index, shape), nan_to_zero))
        v = fp_alu(xp.alu_algo, v, op)
    if not xp.mul_bypass and not (xp.mul_prelu and v >> 31 == 0):
        op = fp16_to_fp32(_flush(_operand_at(xp.mul_operand, index, shape), nan_to_zero))
        v = fp_mul(v, op, F32)
    if not xp.relu_bypass:
        v = fp_relu(v)
    return v


def _y_operand(operand: Operand, nan_to_zero: bool, index, shape) -> int:
    if np.ndim(operand) == 0:
        return int(operand) % 2**32
    return fp16_to_fp32(_flush(_operand_at(operand, index, shape), nan_to_zero))


def y_stage(v: int, yp: Fp16YParams, lut: LutRegisters, nan_to_zero: bool, index=(0, 0, 0), shape=(1, 1, 1)) -> int:
    """Y: MUL (PReLU passes sign-0 data) then ALU, then the LUT."""
    if yp.bypass:
        return v
    if not yp.mul_bypass and not (yp.mul_prelu and v >> 31 == 0):
        v = fp_mul(v, _y_operand(yp.mul_operand, nan_to_zero, index, shape), F32)
    if not yp.alu_bypass:
        v = fp_alu(yp.alu_algo, v, _y_operand(yp.alu_operand, nan_to_zero, index, shape))
    if yp.lut_bypass:
        return v
    return lut_lookup(v, lut)


# ----------------------------------------------------------------------------- LUT


def _offset(x: int, start: int) -> tuple[bool, int]:
    """(underflow, x - start as fp32 bits): a negative, zero or NaN difference underflows."""
    d = fp_sub(x, start, F32)
    s, e, m = fields(d, F32)
    return (s == 1 or (e == 0 and m == 0) or is_nan(d, F32)), d


def _linear(x: int, start: int, select: int, depth: int) -> tuple[str, int, int]:
    """(state, index, fraction): the difference scaled by 2^-select, integer part capped at 511 (the
    difference is read with an implied 1 and an exponent taken as an 8-bit signed number, so the Inf
    field reads as -128), fraction = the next 35 bits, truncated."""
    uflow, d = _offset(x, start)
    if uflow:
        return "uflow", 0, 0
    _, e, m = fields(d, F32)
    unbiased = e - 127 if e - 127 <= 127 else e - 127 - 256
    t = Fraction(2**23 + m) * Fraction(2) ** (unbiased - 23 - select)
    whole = min(int(t), 511)
    if whole >= depth - 1:
        return "oflow", depth - 1, 0
    return "hit", whole, int((t - int(t)) * 2**FRACTION_BITS)


def _exponent(x: int, lut: LutRegisters) -> tuple[str, int, int]:
    uflow, d = _offset(x, lut.le_start)
    if uflow:
        return "uflow", 0, 0
    _, e, m = fields(d, F32)
    if e - 127 < lut.le_index_offset:
        return "uflow", 0, 0
    index = e - 127 - lut.le_index_offset
    if index >= LE_DEPTH - 1:
        return "oflow", LE_DEPTH - 1, 0
    return "hit", index, m * 2 ** (FRACTION_BITS - 23)


def lut_select(x: int, lut: LutRegisters) -> tuple[int, str, int, int]:
    """(table, state, index, fraction) with the int path's table choice rules."""
    le = _exponent(x, lut) if lut.le_function == "exp" else _linear(x, lut.le_start, lut.le_index_select, LE_DEPTH)
    lo = _linear(x, lut.lo_start, lut.lo_index_select, LO_DEPTH)
    if le[0] == "uflow" and lo[0] == "uflow":
        chosen = lut.uflow_priority
    elif le[0] == "oflow" and lo[0] == "oflow":
        chosen = lut.oflow_priority
    elif (le[0] == "hit") == (lo[0] == "hit"):
        chosen = lut.hybrid_priority
    else:
        chosen = TABLE_LE if le[0] == "hit" else TABLE_LO
    return (chosen, *(lo if chosen == TABLE_LO else le))


def pow2_bits(n: int) -> int:
    """fp32 bits of 2^n (n in [-149, 127])."""
    return round_to_format(0, Fraction(2) ** n, F32, denormals=True)


def lut_lookup(x: int, lut: LutRegisters) -> int:
    """The fp16-mode LUT (``sdp_y_inp.cpp`` fp branch) for fp32 bits x; returns fp32 bits.

    * Hit: FP17 weights (1 - f, exactly 1.0 when f = 0; and f) times the fp16 entries widened to FP17,
      summed in FP17, widened to fp32.
    * Under/overflow: fp32 ``x - (P + bias)`` narrowed to FP17, times the fp16 slope scale in FP17, plus
      the FP17 end entry; bias = 2^LE_INDEX_OFFSET (fp32) for an LE exponent-mode underflow, else 0.
    """
    table_id, state, index, frac = lut_select(x, lut)
    table = lut.lo_table if table_id == TABLE_LO else lut.le_table
    y0 = int(table[index]) % 2**16
    if state == "hit":
        y1 = int(table[index + 1]) % 2**16
        w0 = pack(0, F17.bias, 0, F17) if frac == 0 else fraction_to_fp17(2**FRACTION_BITS - frac)
        w1 = fraction_to_fp17(frac)
        o = fp_add(fp_mul(w0, fp16_to_fp17(y0), F17), fp_mul(w1, fp16_to_fp17(y1), F17), F17)
        return fp17_to_fp32(o)
    prefix = "lo" if table_id == TABLE_LO else "le"
    point = getattr(lut, f"{prefix}_start" if state == "uflow" else f"{prefix}_end") % 2**32
    scale = getattr(lut, f"{prefix}_slope_{state}_scale") % 2**16
    bias = 0
    if state == "uflow" and table_id == TABLE_LE and lut.le_function == "exp":
        bias = pow2_bits(lut.le_index_offset)
    a = fp32_to_fp17(fp_sub(x, fp_add(point, bias, F32), F32))
    o = fp_add(fp16_to_fp17(y0), fp_mul(a, fp16_to_fp17(scale), F17), F17)
    return fp17_to_fp32(o)


# ----------------------------------------------------------------------------- pipeline


def sdp_fp16(x, p: Fp16Params, fp32_input: bool = False) -> np.ndarray:
    """The SDP fp16 pipeline on a (C, H, W) cube; returns fp16 bits (or int16 values for ``out="int16"``).

    ``x`` holds fp16 bits read from memory, or (``fp32_input``) the FP32 bits CACC hands over. Order:
    Fp16ToFp32 (memory input) -> NaN flush (NAN_TO_ZERO) -> X1 -> X2 -> Y -> Fp32ToFp16 [-> Fp16ToInt16].
    EQL mode is not handled here (no output is written in that mode).
    """
    data = np.asarray(x)
    if data.ndim != 3:
        raise ValueError("x must be (C, H, W)")
    out = np.zeros(data.shape, dtype=np.int64)
    for index in np.ndindex(data.shape):
        v = int(data[index]) % 2**32 if fp32_input else fp16_to_fp32(int(data[index]) % 2**16)
        if p.nan_to_zero and is_nan(v, F32):
            v = 0
        v = x_stage(v, p.x1, p.nan_to_zero, index, data.shape)
        v = x_stage(v, p.x2, p.nan_to_zero, index, data.shape)
        v = y_stage(v, p.y, p.lut, p.nan_to_zero, index, data.shape)
        half = fp32_to_fp16(v)
        out[index] = fp16_to_int16(half) if p.out == "int16" else half
    return out


__all__ = [
    "F16", "F17", "F32", "Fmt", "Fp16Params", "Fp16XParams", "Fp16YParams",
    "fp16_to_fp17", "fp16_to_fp32", "fp16_to_int16", "fp17_to_fp32", "fp32_to_fp16", "fp32_to_fp17",
    "fp_add", "fp_alu", "fp_max", "fp_min", "fp_mul", "fp_relu", "fp_sub", "fraction_to_fp17",
    "int_to_fp16", "lut_lookup", "lut_select", "narrow", "pow2_bits", "round_to_format", "sdp_fp16", "widen",
]
