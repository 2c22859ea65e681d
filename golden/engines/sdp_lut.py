"""The SDP Y-stage lookup table (integer and fp16 paths), vectorized over a whole cube.

Two tables of raw int16 entries: LE (65 entries, exponent or linear spacing) and LO (257 entries, always
linear). Each input is indexed in both tables; priority bits in ``S_LUT_CFG`` choose the table whose result
is used; the output is a linear interpolation on a hit, or a slope extrapolation from the end entry on an
under/overflow (NVDLA_NOTES §4 "LUT"; cmod ``sdp_y_idx.cpp``, ``sdp_y_inp.cpp``, ``sdp_hls_wrapper.cpp``).

Integer widths follow the cmod: the index is 9 bits unsigned, the fraction 35 bits unsigned, the hit result
``rha(y0·(2^35−f) + y1·f, 35)`` and the flow result ``y0 + sat32(rha((x − (bias + P))·scale, shift))``, both
saturated to 32 bits. Every intermediate fits int64 (products stay below 2^52).

The fp16 path (``lut_lookup_fp``, PROC_PRECISION=FP16) keeps the table choice and the counters but indexes
and interpolates in floating point (cmod ``sdp_y_idx.cpp`` / ``sdp_y_inp.cpp`` fp branches, arithmetic from
``golden.fp``): inputs, START/END registers are fp32 bits, table entries and slope scales fp16 bits, the
slope shifts are unused.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from golden import fp
from golden.arith import rha, sat, sign_extend
from golden.lut import LE_DEPTH, LO_DEPTH, LutRegisters

#: Fraction bits of the interpolation weight (cmod ``yLutFracSize``).
FRAC_BITS = 35
#: The index computed by the idx stage is 9 bits unsigned and saturates (cmod ``yLutIndexSize``).
INDEX_MAX = 511
LE, LO = 0, 1


def signed_shift_sat32(v: np.ndarray, shift: np.ndarray) -> np.ndarray:
    """cmod ``IntSignedShiftRight<.., 5, 32>``: a right shift (rha) by a signed amount, a negative amount
    shifting left, then saturation to 32 bits. |v| < 2^50 and shift in [-16, 15] here."""
    v = np.asarray(v, dtype=np.int64)
    shift = np.asarray(shift, dtype=np.int64)
    # Anything of magnitude >= 2^32 saturates whatever the left shift, so clip before shifting.
    left = np.clip(v, -(1 << 33), 1 << 33) << np.clip(-shift, 0, 16)
    return sat(np.where(shift < 0, left, rha(v, np.maximum(shift, 0))), 32)


@dataclass(frozen=True)
class TableIndex:
    """Where one table puts each input: index, 35-bit fraction, underflow/overflow flags."""

    index: np.ndarray
    fraction: np.ndarray
    uflow: np.ndarray
    oflow: np.ndarray

    @property
    def hit(self) -> np.ndarray:
        return ~(self.uflow | self.oflow)


@dataclass(frozen=True)
class LutStats:
    """Per-operation counters (``D_PERF_LUT_*``), over the lanes of the cube."""

    uflow: int
    oflow: int
    hybrid: int  # lanes whose chosen table hit
    le_hit: int
    lo_hit: int


def exponent_index(x: np.ndarray, start: int, offset: int) -> TableIndex:
    """LE exponent spacing: entry i covers [start + 2^(i+offset), start + 2^(i+offset+1)).

    x <= start, or floor(log2(x − start)) < offset, underflows; an index >= 64 overflows (index 64).
    The fraction is the bits below the leading one of ``x − start``, aligned to 35 bits.
    """
    uflow = x <= start
    d = np.where(uflow, 1, x - start)  # 1 .. 2^32-1
    e = np.frexp(d.astype(np.float64))[1].astype(np.int64) - 1  # exact: d < 2^53
    uflow = uflow | (e < offset)
    idx = e - offset
    oflow = ~uflow & (idx >= LE_DEPTH - 1)
    hit = ~(uflow | oflow)
    frac = np.where(hit, (d - (np.int64(1) << e)) << np.maximum(FRAC_BITS - e, 0), 0)
    index = np.where(uflow, 0, np.where(oflow, LE_DEPTH - 1, idx))
    return TableIndex(index.astype(np.int64), frac.astype(np.int64), uflow, oflow)


def linear_index(x: np.ndarray, start: int, select: int, depth: int) -> TableIndex:
    """Linear spacing: index = (x − start) >> select (a negative select shifts left), saturated to 9 bits.

    The fraction is ``(x − start) mod 2^select`` aligned to 35 bits (0 for a negative select). For the LE
    table only, the cmod holds the masked value in a *signed* 32-bit variable (``yLutInType le_data_f``;
    LO uses an unsigned one) before widening it to the 35-bit fraction: with select >= 32 an offset
    ``x − start >= 2^31`` gains sign-extension bits 32..34. Modelled as the cmod does (the RTL's
    ``NV_NVDLA_HLS_shiftrightusz`` has no such bits).
    """
    uflow = x <= start
    u = np.where(uflow, 0, x - start)  # 0 .. 2^32-1
    if select >= 0:
        q = u >> min(select, 63)
    else:
        q = u << min(-select, 10)  # u >= 1 on non-underflow lanes, so >= 2^10 saturates anyway
    q = np.minimum(q, INDEX_MAX)
    oflow = ~uflow & (q >= depth - 1)
    hit = ~(uflow | oflow)
    if select < 0:
        frac = np.zeros_like(u)
    else:
        val = u & ((1 << select) - 1) if select < 32 else u
        if depth == LE_DEPTH:
            val = np.where(val >= (1 << 31), val + ((1 << FRAC_BITS) - (1 << 32)), val)
        if select <= FRAC_BITS:
            frac = (val << (FRAC_BITS - select)) & ((1 << FRAC_BITS) - 1)
        else:
            frac = val >> min(select - FRAC_BITS, 63)
    frac = np.where(hit, frac, 0)
    index = np.where(uflow, 0, np.where(oflow, depth - 1, q))
    return TableIndex(index.astype(np.int64), frac.astype(np.int64), uflow, oflow)


def _table(raw: np.ndarray | None, depth: int) -> np.ndarray:
    t = np.zeros(depth, dtype=np.int64)
    if raw is not None:
        raw = np.asarray(raw, dtype=np.int64).reshape(-1)[:depth]
        t[: raw.size] = raw
    return np.asarray(sign_extend(t, 16), dtype=np.int64)


def lut_lookup(
    x: np.ndarray, cfg: LutRegisters, le_table: np.ndarray | None, lo_table: np.ndarray | None
) -> tuple[np.ndarray, LutStats]:
    """The LUT output for 32-bit inputs ``x`` (int64 array of any shape), and the lane counters."""
    x = np.asarray(x, dtype=np.int64)
    le_t, lo_t = _table(le_table, LE_DEPTH), _table(lo_table, LO_DEPTH)
    if cfg.le_function == 0:
        le = exponent_index(x, cfg.le_start, cfg.le_index_offset)
    else:
        le = linear_index(x, cfg.le_start, cfg.le_index_select, LE_DEPTH)
    lo = linear_index(x, cfg.lo_start, cfg.lo_index_select, LO_DEPTH)

    # Table choice (cmod sdp_y_idx.cpp): both underflow -> UFLOW_PRIORITY; both overflow -> OFLOW_PRIORITY;
    # both hit, or one underflows while the other overflows -> HYBRID_PRIORITY; else the table that hits.
    both_u = le.uflow & lo.uflow
    both_o = le.oflow & lo.oflow
    both_same = le.hit == lo.hit  # both hit, or both miss
    use_lo = np.where(
        both_u,
        bool(cfg.uflow_priority),
        np.where(both_o, bool(cfg.oflow_priority), np.where(both_same, bool(cfg.hybrid_priority), lo.hit)),
    )

    index = np.where(use_lo, lo.index, le.index)
    frac = np.where(use_lo, lo.fraction, le.fraction)
    uflow = np.where(use_lo, lo.uflow, le.uflow)
    oflow = np.where(use_lo, lo.oflow, le.oflow)
    flow = uflow | oflow

    y0 = np.where(use_lo, lo_t[np.minimum(index, LO_DEPTH - 1)], le_t[np.minimum(index, LE_DEPTH - 1)])
    y1 = np.where(use_lo, lo_t[np.minimum(index + 1, LO_DEPTH - 1)], le_t[np.minimum(index + 1, LE_DEPTH - 1)])
    hit_out = sat(rha(y0 * ((1 << FRAC_BITS) - frac) + y1 * frac, FRAC_BITS), 32)

    # Under/overflow: extrapolate from the end entry with the slope registers. Only LE in exponent mode
    # underflowing adds bias 2^LE_INDEX_OFFSET, for offset > 0 (cmod; the RTL also adds 1 for offset 0).
    # The cmod's uint32 ``1 << offset`` is undefined C for offset >= 32; the RTL's 32-bit shift gives 0 there.
    offset = cfg.le_index_offset
    le_bias = (1 << offset) if (cfg.le_function == 0 and 0 < offset < 32) else 0
    bias = np.where(~use_lo & uflow, le_bias, 0)
    point = np.where(
        use_lo,
        np.where(oflow, cfg.lo_end, cfg.lo_start),
        np.where(oflow, cfg.le_end, cfg.le_start),
    )
    scale = np.where(
        use_lo,
        np.where(oflow, cfg.lo_slope_oflow_scale, cfg.lo_slope_uflow_scale),
        np.where(oflow, cfg.le_slope_oflow_scale, cfg.le_slope_uflow_scale),
    )
    shift = np.where(
        use_lo,
        np.where(oflow, cfg.lo_slope_oflow_shift, cfg.lo_slope_uflow_shift),
        np.where(oflow, cfg.le_slope_oflow_shift, cfg.le_slope_uflow_shift),
    )
    # x − (bias + P) is 34 bits, times a 16-bit scale: below 2^50.
    slope = signed_shift_sat32((x - (bias + point)) * scale, shift)
    flow_out = sat(y0 + slope, 32)

    out = np.where(flow, flow_out, hit_out)
    stats = LutStats(
        uflow=int(np.count_nonzero(uflow)),
        oflow=int(np.count_nonzero(oflow)),
        hybrid=int(np.count_nonzero(~flow)),
        le_hit=int(np.count_nonzero(le.hit)),
        lo_hit=int(np.count_nonzero(lo.hit)),
    )
    return out.astype(np.int64), stats


# ---------------------------------------------------------------------------------------------------
# fp16 path (PROC_PRECISION=FP16): x and the result are fp32 bit patterns (int64 holding uint32)
# ---------------------------------------------------------------------------------------------------
def _fp_offset(x: np.ndarray, start: int) -> tuple[np.ndarray, np.ndarray]:
    """``FpSub(x, start)`` and the underflow of every fp index rule: a negative, zero or NaN offset."""
    d = fp.fp32_sub(x, start & 0xFFFFFFFF).astype(np.int64)
    expo, mant = (d >> 23) & 0xFF, d & 0x7FFFFF
    uflow = ((d >> 31) == 1) | ((expo == 0) & (mant == 0)) | ((expo == 0xFF) & (mant != 0))
    return d, uflow


def exponent_index_fp(x: np.ndarray, start: int, offset: int) -> TableIndex:
    """LE exponent spacing on floats: index = unbiased exponent of (x − start) − LE_INDEX_OFFSET.

    The fraction is the 23 mantissa bits aligned to 35 bits. The exponent field is read raw, so a denormal
    offset has exponent −127 and the Inf pattern +128."""
    d, uflow = _fp_offset(x, start)
    e = ((d >> 23) & 0xFF) - 127
    uflow = uflow | (e < offset)
    idx = e - offset
    oflow = ~uflow & (idx >= LE_DEPTH - 1)
    hit = ~(uflow | oflow)
    frac = np.where(hit, (d & 0x7FFFFF) << (FRAC_BITS - 23), 0)
    index = np.where(uflow, 0, np.where(oflow, LE_DEPTH - 1, idx))
    return TableIndex(index.astype(np.int64), frac.astype(np.int64), uflow, oflow)


def linear_index_fp(x: np.ndarray, start: int, select: int, depth: int) -> TableIndex:
    """Linear spacing on floats: (x − start)·2^−select split by ``FpFloatToIntFrac`` into a 9-bit index
    (saturated) and a 35-bit fraction (truncated)."""
    d, uflow = _fp_offset(x, start)
    whole, frac = fp.fp32_to_int_frac(d, select, 9, FRAC_BITS)
    oflow = ~uflow & (whole >= depth - 1)
    hit = ~(uflow | oflow)
    index = np.where(uflow, 0, np.where(oflow, depth - 1, whole))
    return TableIndex(index.astype(np.int64), np.where(hit, frac, 0).astype(np.int64), uflow, oflow)


def lut_lookup_fp(
    x: np.ndarray, cfg: LutRegisters, le_table: np.ndarray | None, lo_table: np.ndarray | None
) -> tuple[np.ndarray, LutStats]:
    """The fp16-mode LUT output (fp32 bits) for fp32-bit inputs ``x``, and the lane counters.

    - Hit: ``y0·(1 − f) + y1·f`` in FP17: the weights are FP17 fractions of the 35-bit f (1 − f is exactly
      1.0 when f = 0), y0/y1 are fp16 table entries widened to FP17, two FP17 products then one FP17 sum.
    - Under/overflow: ``y0 + FP17(x − (P + bias))·scale`` with P = START/END (fp32 bits), bias the fp32
      2^LE_INDEX_OFFSET for an LE exponent-mode underflow (any offset sign; else 0), the difference taken
      in fp32, narrowed to FP17 and multiplied by the fp16 slope scale widened to FP17.
    """
    x = np.asarray(x, dtype=np.int64) & 0xFFFFFFFF
    le_t = _table(le_table, LE_DEPTH) & 0xFFFF
    lo_t = _table(lo_table, LO_DEPTH) & 0xFFFF
    if cfg.le_function == 0:
        le = exponent_index_fp(x, cfg.le_start, cfg.le_index_offset)
    else:
        le = linear_index_fp(x, cfg.le_start, cfg.le_index_select, LE_DEPTH)
    lo = linear_index_fp(x, cfg.lo_start, cfg.lo_index_select, LO_DEPTH)
    use_lo, index, frac, uflow, oflow = _choose(le, lo, cfg)
    flow = uflow | oflow

    y0 = np.where(use_lo, lo_t[np.minimum(index, LO_DEPTH - 1)], le_t[np.minimum(index, LE_DEPTH - 1)])
    y1 = np.where(use_lo, lo_t[np.minimum(index + 1, LO_DEPTH - 1)], le_t[np.minimum(index + 1, LE_DEPTH - 1)])

    # Hit: FP17 interpolation.
    one = np.int64(FP17_ONE)
    w0 = np.where(frac == 0, one, fp.fraction_to_float((1 << FRAC_BITS) - frac, FRAC_BITS, fp.FP17))
    w1 = fp.fraction_to_float(frac, FRAC_BITS, fp.FP17)
    hit_out = fp.fp17_add(fp.fp17_mul(w0, fp.fp16_to_fp17(y0)), fp.fp17_mul(w1, fp.fp16_to_fp17(y1)))

    # Under/overflow: FP17 slope extrapolation.
    le_bias = int(fp.pow2_fp32(cfg.le_index_offset)) if cfg.le_function == 0 else 0
    bias = np.where(~use_lo & uflow, le_bias, 0)
    point = np.where(
        use_lo, np.where(oflow, cfg.lo_end, cfg.lo_start), np.where(oflow, cfg.le_end, cfg.le_start)
    ) & 0xFFFFFFFF
    scale = np.where(
        use_lo,
        np.where(oflow, cfg.lo_slope_oflow_scale, cfg.lo_slope_uflow_scale),
        np.where(oflow, cfg.le_slope_oflow_scale, cfg.le_slope_uflow_scale),
    ) & 0xFFFF
    delta = fp.fp32_to_fp17(fp.fp32_sub(x, fp.fp32_add(point, bias)))
    flow_out = fp.fp17_add(fp.fp16_to_fp17(y0), fp.fp17_mul(delta, fp.fp16_to_fp17(scale)))

    out = fp.fp17_to_fp32(np.where(flow, flow_out, hit_out))
    return out.astype(np.int64), _stats(le, lo, uflow, oflow)


#: FP17 1.0 (exponent = bias 31, mantissa 0): the cmod's weight of y0 when the fraction is 0.
FP17_ONE = 31 << 10


def _choose(le: TableIndex, lo: TableIndex, cfg: LutRegisters):
    """Table choice of ``sdp_y_idx.cpp``: (use_lo, index, fraction, uflow, oflow) per lane."""
    both_u = le.uflow & lo.uflow
    both_o = le.oflow & lo.oflow
    both_same = le.hit == lo.hit
    use_lo = np.where(
        both_u,
        bool(cfg.uflow_priority),
        np.where(both_o, bool(cfg.oflow_priority), np.where(both_same, bool(cfg.hybrid_priority), lo.hit)),
    )
    pick = lambda a, b: np.where(use_lo, b, a)  # noqa: E731
    return use_lo, pick(le.index, lo.index), pick(le.fraction, lo.fraction), pick(le.uflow, lo.uflow), pick(le.oflow, lo.oflow)


def _stats(le: TableIndex, lo: TableIndex, uflow: np.ndarray, oflow: np.ndarray) -> LutStats:
    return LutStats(
        uflow=int(np.count_nonzero(uflow)),
        oflow=int(np.count_nonzero(oflow)),
        hybrid=int(np.count_nonzero(~(uflow | oflow))),
        le_hit=int(np.count_nonzero(le.hit)),
        lo_hit=int(np.count_nonzero(lo.hit)),
    )
