"""Reference math for CDP (local response normalisation), int8 and int16 paths (fp16: ``cdp_fp16``).

Rules: NVDLA_NOTES.md section 4 "CDP / LRN" (cmod ``cmod/cdp/NV_NVDLA_cdp.cpp``
``lookup_lut_int8``, ``lookup_lut`` (int16) and ``convert``, ``cmod/hls/cdp_libs/cdp_icvt.cpp``,
``cdp_ocvt.cpp``).  int16 differs from int8 only in widths: x' is 17-bit (DATIN_OFFSET 16-bit),
the output 16-bit (DATOUT_OFFSET 32-bit), the index selects 7-bit signed.

nv_small's RTL differs from the cmod in two int8 LUT details, both selectable here (defaults: the cmod):
``start_bits`` -- the LUT controller compares S with, and subtracts, only the low 22 bits of START read as
signed (``NV_NVDLA_CDP_DP_LUT_CTRL_unit.v``, ``reg2dp_X_offset[pPP_BW:0]``); the slopes outside the
table still measure from all 38 bits -- and ``lo_select_minus32=False`` -- LO_INDEX_SELECT = -32 shifts by
0, not 32 (its shift amount ``Y_shift_bits_int8_abs`` is 5 bits wide).

The cmod computes the LUT in int64.  Where an int64 intermediate would overflow, or a
native shift count reaches the operand width, the cmod's result is undefined C and the
reference raises :class:`OutsideCmodDomain` instead of guessing.
"""

from __future__ import annotations

import numpy as np

from golden.lut import LE_DEPTH, LO_DEPTH, TABLE_LE, TABLE_LO, LutRegisters

from .arith import (
    OutsideCmodDomain,
    check_range,
    check_signed,
    check_unsigned,
    rha,
    sat,
    sign_extend,
)

INTERP_BITS = 56  # INTERP_INTERMIDIATE_BITS_INT8 in the cmod
FRACTION_BITS = 16


def _int64(v: int, what: str) -> int:
    """Return ``v`` if it fits a signed int64; the cmod's value is undefined otherwise."""
    if not -(1 << 63) <= v < (1 << 63):
        raise OutsideCmodDomain(f"CDP LUT: {what} = {v} overflows int64 in the cmod")
    return v


def _cv(v: int, shift: int) -> int:
    """The cmod's ``convert(v, shift, 56, true)``: ``sat56(rha(v, shift))``.

    The cmod goes through double precision; the only inexact cases have magnitudes
    >= 2**52 and end up saturated by the final sat16 either way.
    """
    return sat(rha(v, shift), INTERP_BITS)


def _table(values, depth: int, name: str) -> list[int]:
    if len(values) != depth:
        raise ValueError(f"{name} must have {depth} entries, got {len(values)}")
    return [sign_extend(check_range(name, int(v), -(1 << 15), (1 << 16) - 1), 16) for v in values]


def _le_is_exp(lut: LutRegisters) -> bool:
    if lut.le_function in ("exp", 0):
        return True
    if lut.le_function in ("linear", 1):
        return False
    raise ValueError(f"le_function={lut.le_function!r} must be 'exp'/0 or 'linear'/1")


def _window(start: int, bits: int) -> int:
    """START as the LUT controller compares it: its low ``bits`` bits, signed (38: all of it)."""
    return sign_extend(start & ((1 << bits) - 1), bits)


def _linear_table(s: int, table: list[int], start: int, end: int, select: int,
                  uflow_scale: int, uflow_shift: int, oflow_scale: int, oflow_shift: int,
                  start_bits: int = 38) -> tuple[str, int]:
    """Linear-mode lookup (LE with FUNCTION=1, and always LO); returns (state, sat16 result).

    ``idx = (S - start) >> select`` (left shift for a negative select).  Underflow when
    ``S - start <= 0``: ``T[0] + cv((S - start) * uscale, ushift)``.  Overflow when
    ``idx >= depth - 1``: ``T[last] + cv((S - end) * oscale, oshift)``.  Hit:
    ``T[i] + cv((T[i+1] - T[i]) * f16, 16)`` with the remainder renormalised to 16
    fraction bits (0 for a negative select). Underflow, index and fraction use START's low
    ``start_bits`` bits (signed); the underflow slope uses all of START.
    """
    depth = len(table)
    distance = s - _window(start, start_bits)
    if distance <= 0:
        return "uflow", sat(table[0] + _cv((s - start) * uflow_scale, uflow_shift), 16)
    if select < 0:
        index = _int64(distance << (-select), "(S - start) << -index_select")
    else:
        index = distance >> select
    if index >= depth - 1:
        return "oflow", sat(table[depth - 1] + _cv((s - end) * oflow_scale, oflow_shift), 16)
    if select < 0:
        fraction = 0
    else:
        remainder = distance % (1 << select)
        if select > FRACTION_BITS:
            fraction = remainder >> (select - FRACTION_BITS)
        else:
            fraction = remainder << (FRACTION_BITS - select)
    y0, y1 = table[index], table[index + 1]
    return "hit", sat(y0 + _cv((y1 - y0) * fraction, FRACTION_BITS), 16)


def _exp_table(s: int, table: list[int], start: int, end: int, offset: int,
               uflow_scale: int, uflow_shift: int, oflow_scale: int, oflow_shift: int,
               start_bits: int = 38) -> tuple[str, int]:
    """LE exponent-mode lookup; returns (state, sat16 result).

    ``raw = S - start``; ``idx = floor(log2 raw) - offset``.  Underflow when ``raw <= 0``
    or ``idx < 0``: ``LE[0] + cv((S - start - bias) * uscale, ushift)`` with
    ``bias = 2**offset`` for ``offset >= 0`` (offset 0 gives 1) and 0 otherwise.
    Overflow when ``idx >= 64``: ``LE[64] + cv((S - end) * oscale, oshift)``.  Hit:
    ``LE[i] + cv((LE[i+1] - LE[i]) * f16, 16)`` where ``f16`` is ``raw - 2**floor(log2 raw)``
    renormalised to 16 fraction bits. ``raw`` uses START's low ``start_bits`` bits (signed), the
    underflow slope all of START.
    """
    raw = s - _window(start, start_bits)
    log_sum = raw.bit_length() - 1 if raw > 0 else 0
    index = log_sum - offset
    if raw <= 0 or index < 0:
        if offset < 0:
            bias = 0
        elif offset >= 63:
            raise OutsideCmodDomain("CDP LUT: int64 1 << LE_INDEX_OFFSET with offset >= 63")
        else:
            bias = 1 << offset
        product = _int64(_int64(s - start - bias, "S - start - bias") * uflow_scale, "(S - start - bias) * scale")
        return "uflow", sat(table[0] + _cv(product, uflow_shift), 16)
    if index >= LE_DEPTH - 1:
        return "oflow", sat(table[LE_DEPTH - 1] + _cv((s - end) * oflow_scale, oflow_shift), 16)
    remainder = raw - (1 << log_sum)
    if log_sum > FRACTION_BITS:
        fraction = remainder >> (log_sum - FRACTION_BITS)
    else:
        fraction = remainder << (FRACTION_BITS - log_sum)
    y0, y1 = table[index], table[index + 1]
    return "hit", sat(y0 + _cv((y1 - y0) * fraction, FRACTION_BITS), 16)


def _select16(name: str, v: int) -> int:
    """int16 index select: 7-bit signed; the cmod's ``1 << sel`` remainder is a 32-bit C shift and a
    left shift by 64 is undefined, so only -63..31 are defined."""
    v = check_signed(name, v, 7)
    if not -63 <= v <= 31:
        raise OutsideCmodDomain(f"CDP LUT: int16 {name}={v} outside -63..31")
    return v


def cdp_lut_lookup(s: int, lut: LutRegisters, precision: str = "int8", start_bits: int = 38,
                   lo_select_minus32: bool = True) -> int:
    """CDP LUT result (int16) for a square sum ``s`` (``lookup_lut_int8`` / ``lookup_lut``).

    Both tables are evaluated; both underflow -> UFLOW_PRIORITY, both overflow ->
    OFLOW_PRIORITY, exactly one hit -> that table, otherwise HYBRID_PRIORITY.
    ``precision`` "int16" reads the index selects as 7-bit signed (LE's only in linear mode).
    int8 only: ``start_bits`` (22 on nv_small's RTL) and ``lo_select_minus32`` (False on nv_small's RTL:
    an LO select of -32 is 0), see the module docstring.
    """
    s = int(s)
    le_table = _table(lut.le_table, LE_DEPTH, "le_table")
    lo_table = _table(lut.lo_table, LO_DEPTH, "lo_table")
    le_start = check_signed("le_start", lut.le_start, 38)
    le_end = check_signed("le_end", lut.le_end, 38)
    lo_start = check_signed("lo_start", lut.lo_start, 38)
    lo_end = check_signed("lo_end", lut.lo_end, 38)
    offset = check_signed("le_index_offset", lut.le_index_offset, 8)
    if precision == "int16":
        le_select = 0 if _le_is_exp(lut) else _select16("le_index_select", lut.le_index_select)
        lo_select = _select16("lo_index_select", lut.lo_index_select)
    else:
        le_select = check_signed("le_index_select", lut.le_index_select, 6)
        lo_select = check_signed("lo_index_select", lut.lo_index_select, 6)
        if lo_select == -32 and not lo_select_minus32:
            lo_select = 0
    if precision != "int8":
        start_bits = 38
    start_bits = check_range("start_bits", start_bits, 22, 38)
    slopes = {
        name: check_signed(name, getattr(lut, name), 16 if name.endswith("scale") else 5)
        for prefix in ("le", "lo")
        for flow in ("uflow", "oflow")
        for name in (f"{prefix}_slope_{flow}_scale", f"{prefix}_slope_{flow}_shift")
    }
    uflow_pri = check_range("uflow_priority", lut.uflow_priority, 0, 1)
    oflow_pri = check_range("oflow_priority", lut.oflow_priority, 0, 1)
    hybrid_pri = check_range("hybrid_priority", lut.hybrid_priority, 0, 1)

    le_slopes = (slopes["le_slope_uflow_scale"], slopes["le_slope_uflow_shift"],
                 slopes["le_slope_oflow_scale"], slopes["le_slope_oflow_shift"])
    lo_slopes = (slopes["lo_slope_uflow_scale"], slopes["lo_slope_uflow_shift"],
                 slopes["lo_slope_oflow_scale"], slopes["lo_slope_oflow_shift"])
    if _le_is_exp(lut):
        le_state, le_result = _exp_table(s, le_table, le_start, le_end, offset, *le_slopes, start_bits)
    else:
        le_state, le_result = _linear_table(s, le_table, le_start, le_end, le_select, *le_slopes, start_bits)
    lo_state, lo_result = _linear_table(s, lo_table, lo_start, lo_end, lo_select, *lo_slopes, start_bits)

    if le_state == "uflow" and lo_state == "uflow":
        chosen = uflow_pri
    elif le_state == "oflow" and lo_state == "oflow":
        chosen = oflow_pri
    elif (le_state == "hit") != (lo_state == "hit"):
        chosen = TABLE_LE if le_state == "hit" else TABLE_LO
    else:
        chosen = hybrid_pri
    return le_result if chosen == TABLE_LE else lo_result


def cdp_input_cvt(x: int, offset: int, scale: int, shift: int, bits: int = 9) -> int:
    """CDP input converter: ``sat9(rha((x - DATIN_OFFSET) * DATIN_SCALE, DATIN_SHIFTER))``
    (int16: ``sat17``, ``bits=17``).

    Offset is the signed low byte (int16: all 16 bits), scale signed 16-bit, shift 0..31.
    """
    return sat(rha((int(x) - offset) * scale, shift), bits)


def cdp_output_cvt(v: int, offset: int, scale: int, shift: int, bits: int = 8) -> int:
    """CDP output converter: ``sat8(rha((v - DATOUT_OFFSET) * DATOUT_SCALE, DATOUT_SHIFTER))``
    (int16: ``sat16``, ``bits=16``).

    Offset is signed 25-bit (``[24:0]``; int16: 32-bit), scale signed 16-bit, shift 0..63.
    """
    return sat(rha((int(v) - offset) * scale, shift), bits)


# (data bits, x' bits, DATIN_OFFSET bits, DATOUT_OFFSET bits) per precision.
_LRN_WIDTHS = {"int8": (8, 9, 8, 25), "int16": (16, 17, 16, 32)}


def lrn(
    x,
    *,
    datin_offset: int = 0,
    datin_scale: int = 1,
    datin_shifter: int = 0,
    normalz_len: int = 0,
    sqsum_bypass: bool = False,
    mul_bypass: bool = False,
    lut: LutRegisters,
    datout_offset: int = 0,
    datout_scale: int = 1,
    datout_shifter: int = 0,
    channel_count: int | None = None,
    precision: str = "int8",
    start_bits: int = 38,
    lo_select_minus32: bool = True,
) -> np.ndarray:
    """CDP int8/int16 LRN of a (C, H, W) cube; returns int64 (C, H, W) in the data range.

    1. ``x' = sat9(rha((x - DATIN_OFFSET) * DATIN_SCALE, DATIN_SHIFTER))``; channels at or
       beyond ``channel_count`` (padding lanes) and outside the cube are fed DATIN_OFFSET,
       so their x' is 0.
    2. ``S = sum of x'^2`` over channels ``c - (NORMALZ_LEN+1) .. c + (NORMALZ_LEN+1)``
       (3/5/7/9 channels for NORMALZ_LEN 0..3); ``S = x'_c`` if SQSUM_BYPASS.
    3. ``r = cdp_lut_lookup(S)`` (int16).
    4. ``v = r * x'_c``, or ``r`` if MUL_BYPASS.
    5. ``out = sat8(rha((v - DATOUT_OFFSET) * DATOUT_SCALE, DATOUT_SHIFTER))``.

    ``precision="int16"``: 16-bit data, ``sat17`` x', ``sat16`` output, 16/32-bit offsets.
    ``start_bits``/``lo_select_minus32``: the LUT controller of nv_small's RTL (22/False), see
    :func:`cdp_lut_lookup`.
    ``x`` may include padding lanes: output is computed for every channel of ``x`` (the
    hardware writes padding lanes too); ``channel_count`` (default: all) says how many
    are real.
    """
    data = np.asarray(x)
    if data.ndim != 3:
        raise ValueError("x must be (C, H, W)")
    channels, height, width = data.shape
    if channel_count is None:
        channel_count = channels
    channel_count = check_range("channel_count", channel_count, 1, channels)
    if precision not in _LRN_WIDTHS:
        raise ValueError(f"precision={precision!r} must be 'int8' or 'int16'")
    data_bits, cvt_bits, din_bits, dout_bits = _LRN_WIDTHS[precision]
    datin_offset = check_signed("datin_offset", datin_offset, din_bits)
    datin_scale = check_signed("datin_scale", datin_scale, 16)
    datin_shifter = check_unsigned("datin_shifter", datin_shifter, 5)
    normalz_len = check_range("normalz_len", normalz_len, 0, 3)
    datout_offset = check_signed("datout_offset", datout_offset, dout_bits)
    datout_scale = check_signed("datout_scale", datout_scale, 16)
    datout_shifter = check_unsigned("datout_shifter", datout_shifter, 6)
    half_window = normalz_len + 1

    out = np.zeros(data.shape, dtype=np.int64)
    for h in range(height):
        for w in range(width):
            converted = []
            for c in range(channels):
                if c < channel_count:
                    raw = check_signed("x", int(data[c, h, w]), data_bits)
                else:
                    raw = datin_offset
                converted.append(cdp_input_cvt(raw, datin_offset, datin_scale, datin_shifter, cvt_bits))
            for c in range(channels):
                if sqsum_bypass:
                    square_sum = converted[c]
                else:
                    square_sum = 0
                    for j in range(c - half_window, c + half_window + 1):
                        if 0 <= j < channels:
                            square_sum += converted[j] * converted[j]
                lut_result = cdp_lut_lookup(square_sum, lut, precision, start_bits, lo_select_minus32)
                value = lut_result if mul_bypass else lut_result * converted[c]
                out[c, h, w] = cdp_output_cvt(value, datout_offset, datout_scale, datout_shifter, data_bits)
    return out
