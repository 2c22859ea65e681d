"""CDP: cross-channel local response normalization (LRN), int8, int16 and fp16 (NVDLA_NOTES §4 CDP).

Follows NVDLA's cmod (``cmod/cdp/NV_NVDLA_cdp.cpp lookup_lut_int8`` / ``lookup_lut``, ``cmod/hls/cdp_libs``,
fp16 in ``cmod/hls_wrapper/cdp_hls_wrapper.cpp``), int8 checked bit for bit against the nv_small trace tests.
Per element (c, h, w) of the padded cube, int8 / int16:

1. input CVT ``x' = sat9(rha((x - DATIN_OFFSET[7:0]s) * DATIN_SCALE, DATIN_SHIFTER))`` (int16:
   ``sat17`` and the whole 16-bit DATIN_OFFSET); channels outside [0, C) -- the padding lanes of the last
   surface and the neighbours beyond either end -- are fed DATIN_OFFSET, so their x' is 0;
2. ``S = sum of x'^2`` over channels c-(NORMALZ_LEN+1) .. c+(NORMALZ_LEN+1) (``S = x'_c`` with SQSUM_BYPASS);
3. two LUTs (LE: exponent or linear, 65 entries; LO: linear, 257 entries) each classify S as underflow,
   overflow or hit and produce a value; the priorities in S_LUT_CFG pick one; the index selects are 6-bit
   signed for int8, 7-bit signed for int16;
4. ``m = r * x'_c`` (or r with MUL_BYPASS);
5. output CVT ``sat8(rha((m - DATOUT_OFFSET[24:0]s) * DATOUT_SCALE, DATOUT_SHIFTER))`` (int16: ``sat16``
   and the whole 32-bit DATOUT_OFFSET).

fp16 (``HLS_CDP_lookup_fp16``; the CVT registers are ignored, ``golden.fp`` emulates the cmod's floats):
x becomes FP17 then fp32 (padding/outside channels are +0; NaNs become +0 with D_NAN_FLUSH_TO_ZERO);
squares are fp32 products summed in the cmod's order ``((x[c-1]+x[c+1])+x[c]) + (x[c-2]+x[c+2]) + ...``;
each LUT subtracts START (S_LUT_*_START_LOW read as an fp32 pattern) in fp32, takes the exponent (LE
exponent mode, index = exponent - LE_INDEX_OFFSET, fraction = the top 16 mantissa bits) or scales by
2^-INDEX_SELECT (8-bit signed) in C float arithmetic, and interpolates in FP17:
``L0 + FP17(L1 - L0) * FP17(fraction / 2^16)``; outside the table ``edge + FP17(S - START or END) * slope``
with table entries and slope scales as fp16 patterns. The result is multiplied by x in FP17 (MUL_BYPASS
passes r, or x when x is NaN) and narrowed to fp16.

Channel-wise the window needs at most nine taps, so everything runs on whole cubes.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from golden import fp
from golden.arith import rha, sat, sign_extend
from golden.config import HwConfig
from golden.dma import check_format, feature_cube
from golden.engines import Engine, OpContext, register
from golden.errors import UnsupportedError
from golden.intr import unit_done_bits
from golden.layout import read_cube, write_cube
from golden.lut import LE_DEPTH, LO_DEPTH, lut_mode
from golden.regs import RegValue, RegView

#: ``S_LUT_CFG.LUT_LE_FUNCTION``.
EXPONENT, LINEAR = 0, 1
#: ``S_LUT_CFG`` priorities: 0 selects LE, 1 selects LO.
LE, LO = 0, 1
#: The cmod's interpolation/slope intermediate width (``INTERP_INTERMIDIATE_BITS_INT8``).
INTERP_BITS = 56
#: Fraction bits of the interpolation weight (the RTL keeps 16).
FRACTION_BITS = 16


# ---- configuration -------------------------------------------------------------------------------
@dataclass(frozen=True)
class Table:
    """One LUT's registers: range, index scaling and the slopes used outside the range."""

    start: int  # 38-bit signed
    end: int
    index_select: int  # linear mode: index = (S - start) >> index_select (negative: left shift)
    uflow_scale: int  # int16
    uflow_shift: int  # signed 5-bit: negative shifts left
    oflow_scale: int
    oflow_shift: int
    #: START as the LUT controller compares and subtracts it (underflow, index, fraction); None: ``start``.
    #: nv_small's RTL keeps 22 bits of it (``HwConfig.cdp_lut_start_bits``), the slopes use all 38.
    index_start: int | None = None

    @property
    def window_start(self) -> int:
        return self.start if self.index_start is None else self.index_start


@dataclass(frozen=True)
class Lut:
    """CDP's ``S_LUT_*`` registers (``golden.lut.LutRegisters``) decoded for one precision, per table.

    Kept apart from the register block because the decode depends on the operation: the index selects
    are 6-, 7- or 8-bit signed by precision, nv_small's LUT controller compares a narrower START
    (``Table.index_start``), and a bad field must fail naming its register."""

    le_function: int
    uflow_priority: int
    oflow_priority: int
    hybrid_priority: int
    le_index_offset: int  # int8, exponent mode
    le: Table
    lo: Table

    @classmethod
    def from_view(cls, cdp: RegView, dtype: str = "int8", hw: HwConfig | None = None) -> "Lut":
        """fp16 keeps the raw words: START/END's low 32 bits are fp32 patterns, slopes fp16 patterns.
        ``hw`` (int8 only): the RTL's LUT controller widths (``HwConfig.cdp_lut_start_bits``,
        ``cdp_lo_select_minus32``); None: the cmod's."""
        cfg, info = cdp.S_LUT_CFG, cdp.S_LUT_INFO
        decode = {"int8": _index_select, "int16": _index_select16, "fp16": _index_select_fp16}[dtype]
        rtl = hw if hw is not None and dtype == "int8" else None
        bits = rtl.cdp_lut_start_bits if rtl else 38
        lo_select = decode(info, "LUT_LO_INDEX_SELECT")
        if rtl and lo_select == -32 and not rtl.cdp_lo_select_minus32:
            lo_select = 0  # the 5-bit shift amount drops the 32: no shift, no fraction, like 0
        le_used = cfg.LUT_LE_FUNCTION == LINEAR or dtype == "int8"  # int8: checked as before, whatever the mode
        return cls(
            **lut_mode(cdp),
            le=_table(cdp, "LE", decode(info, "LUT_LE_INDEX_SELECT") if le_used else 0, bits),
            lo=_table(cdp, "LO", lo_select, bits),
        )


def _start38(cdp: RegView, t: str, edge: str) -> int:
    """S_LUT_{LE,LO}_{START,END}: 32 low bits plus a 6-bit signed high part (38-bit signed)."""
    high = getattr(cdp, f"S_LUT_{t}_{edge}_HIGH").signed(f"LUT_{t}_{edge}_HIGH")
    low = getattr(getattr(cdp, f"S_LUT_{t}_{edge}_LOW"), f"LUT_{t}_{edge}_LOW")
    return (high << 32) | low


def _index_select(info: RegValue, name: str) -> int:
    """The cmod sign-extends bit 5 of the 8-bit field (a 6-bit signed shift). Bits 7:6 without bit 5
    would make it shift by 64 or more, which the cmod leaves undefined."""
    v = getattr(info, name)
    if v & 0x20:
        return (v & 0x3F) - 0x40
    if v > 0x1F:
        raise info.fail(name, f"{v:#x} is not a 6-bit signed shift (-32..31)")
    return v


def _index_select16(info: RegValue, name: str) -> int:
    """int16 (cmod ``lookup_lut``): bit 6 is the sign (-64..63). The cmod's remainder ``x % (1 << sel)`` is
    a 32-bit C shift and a left shift by 64 is undefined too, so only -63..31 have a defined result."""
    v = getattr(info, name)
    sel = (v & 0x7F) - 0x80 if v & 0x40 else v
    if not -63 <= sel <= 31:
        raise info.fail(name, f"{v:#x} is a shift of {sel}, outside -63..31 where the cmod's int16 LUT is defined")
    return sel


def _index_select_fp16(info: RegValue, name: str) -> int:
    """fp16 (cmod ``HLS_CDP_lookup_lut``): the whole byte as int8, a power-of-two scale in C floats."""
    return int(sign_extend(getattr(info, name), 8))


def _table(cdp: RegView, t: str, index_select: int, start_bits: int = 38) -> Table:
    scale, shift = getattr(cdp, f"S_LUT_{t}_SLOPE_SCALE"), getattr(cdp, f"S_LUT_{t}_SLOPE_SHIFT")
    start = _start38(cdp, t, "START")
    return Table(
        start=start,
        end=_start38(cdp, t, "END"),
        index_select=index_select,
        uflow_scale=scale.signed(f"LUT_{t}_SLOPE_UFLOW_SCALE"),
        uflow_shift=shift.signed(f"LUT_{t}_SLOPE_UFLOW_SHIFT"),
        oflow_scale=scale.signed(f"LUT_{t}_SLOPE_OFLOW_SCALE"),
        oflow_shift=shift.signed(f"LUT_{t}_SLOPE_OFLOW_SHIFT"),
        index_start=None if start_bits >= 38 else int(sign_extend(start & ((1 << start_bits) - 1), start_bits)),
    )


@dataclass(frozen=True)
class Lrn:
    """Datapath settings outside the LUT."""

    normalz_len: int  # NORMALZ_LEN field: window of 2*(len+1)+1 channels
    sqsum_bypass: bool
    mul_bypass: bool
    datin_offset: int  # int8: the low byte of DATIN_OFFSET; int16: all 16 bits (signed)
    datin_scale: int  # int16
    datin_shift: int  # 0..31
    datout_offset: int  # int8: 25-bit signed; int16: 32-bit signed
    datout_scale: int  # int16
    datout_shift: int  # 0..63
    nan_to_zero: bool = False  # fp16 only

    @classmethod
    def from_view(cls, cdp: RegView, dtype: str = "int8") -> "Lrn":
        bypass = cdp.D_FUNC_BYPASS
        wide = dtype != "int8"
        return cls(
            normalz_len=cdp.D_LRN_CFG.NORMALZ_LEN,
            sqsum_bypass=bool(bypass.SQSUM_BYPASS),
            mul_bypass=bool(bypass.MUL_BYPASS),
            datin_offset=int(sign_extend(cdp.D_DATIN_OFFSET.DATIN_OFFSET, 16 if wide else 8)),
            datin_scale=cdp.D_DATIN_SCALE.signed("DATIN_SCALE"),
            datin_shift=cdp.D_DATIN_SHIFTER.DATIN_SHIFTER,
            datout_offset=int(sign_extend(cdp.D_DATOUT_OFFSET.DATOUT_OFFSET, 32 if wide else 25)),
            datout_scale=cdp.D_DATOUT_SCALE.signed("DATOUT_SCALE"),
            datout_shift=cdp.D_DATOUT_SHIFTER.DATOUT_SHIFTER,
            nan_to_zero=bool(cdp.D_NAN_FLUSH_TO_ZERO.NAN_TO_ZERO),
        )


# ---- arithmetic ----------------------------------------------------------------------------------
def cmod_convert(v: np.ndarray, shift: int, bits: int = INTERP_BITS) -> np.ndarray:
    """The cmod's ``convert``: v / 2^shift in double precision, rounded half away from zero, clamped to
    ``bits`` signed. For every |v| < 2^53 (all legal START/END/slope settings) this is exactly
    ``sat(rha(v, shift), bits)``; beyond that it reproduces the cmod's double rounding."""
    f = np.asarray(v, dtype=np.int64).astype(np.float64) / (2.0 ** shift)
    r = np.trunc(np.where(np.asarray(v) > 0, f + 0.5, f - 0.5))
    r = np.clip(r, -(2.0 ** 62), 2.0 ** 62).astype(np.int64)
    return sat(r, bits)


#: Widths of x' (input CVT) and of the stored result (output CVT) per integer type.
CVT_BITS = {"int8": (9, 8), "int16": (17, 16)}


def input_cvt(x: np.ndarray, p: Lrn, bits: int = 9) -> np.ndarray:
    return sat(rha((x - p.datin_offset) * p.datin_scale, p.datin_shift), bits)


def square_sum(xc: np.ndarray, channels: int, normalz_len: int) -> np.ndarray:
    """Sum of x'^2 over the channel window; channels >= ``channels`` (padding lanes) count as 0."""
    half = normalz_len + 1
    sq = xc * xc
    sq[channels:] = 0
    padded = np.concatenate([np.zeros((half,) + sq.shape[1:], np.int64), sq, np.zeros((half,) + sq.shape[1:], np.int64)])
    out = np.zeros_like(sq)
    for d in range(2 * half + 1):
        out += padded[d : d + sq.shape[0]]
    return out


# LUT classification codes
UFLOW, OFLOW, HIT = 0, 1, 2


def _interp(table: np.ndarray, idx: np.ndarray, frac16: np.ndarray) -> np.ndarray:
    y0 = table[idx]
    y1 = table[idx + 1]
    return y0 + cmod_convert((y1 - y0) * frac16, FRACTION_BITS)


def _outside(s: np.ndarray, tbl: np.ndarray, t: Table, kind: np.ndarray, uflow_bias: int = 0) -> np.ndarray:
    """Underflow/overflow value: the edge entry plus the slope times the distance past START/END."""
    # int64 arithmetic wraps exactly like the cmod's.
    under = tbl[0] + cmod_convert((s - t.start - uflow_bias) * t.uflow_scale, t.uflow_shift)
    over = tbl[-1] + cmod_convert((s - t.end) * t.oflow_scale, t.oflow_shift)
    return np.where(kind == UFLOW, under, over)


def lookup_linear(s: np.ndarray, tbl: np.ndarray, t: Table) -> tuple[np.ndarray, np.ndarray]:
    """Linear table (LO always, LE with LUT_LE_FUNCTION=LINEAR): (value sat16, classification)."""
    depth = tbl.size
    raw = s - t.window_start
    sel = t.index_select
    idx = raw >> sel if sel >= 0 else np.left_shift(raw, -sel)  # int64 wrap like the cmod
    kind = np.where((idx < 0) | (raw <= 0), UFLOW, np.where(idx >= depth - 1, OFLOW, HIT))
    safe = np.where(kind == HIT, idx, 0)
    if sel < 0:
        frac = np.zeros_like(raw)
    else:
        rem = raw & ((1 << sel) - 1)
        frac = rem >> (sel - FRACTION_BITS) if sel > FRACTION_BITS else rem << (FRACTION_BITS - sel)
    value = np.where(kind == HIT, _interp(tbl, safe, frac), _outside(s, tbl, t, kind))
    return sat(value, 16), kind


def lookup_exponent(s: np.ndarray, tbl: np.ndarray, t: Table, index_offset: int) -> tuple[np.ndarray, np.ndarray]:
    """LE in exponent mode: the index is floor(log2(S - start)) - LE_INDEX_OFFSET."""
    raw = s - t.window_start
    pos = np.maximum(raw, 1)
    log2 = np.frexp(pos.astype(np.float64))[1].astype(np.int64) - 1  # exact for |raw| < 2^53
    idx = np.where(raw > 0, log2, 0) - index_offset
    kind = np.where((idx < 0) | (raw <= 0), UFLOW, np.where(idx >= tbl.size - 1, OFLOW, HIT))
    safe = np.where(kind == HIT, idx, 0)
    lead = np.where(kind == HIT, log2, 0)  # = idx + offset
    rem = pos - (np.int64(1) << lead)
    frac = np.where(
        lead > FRACTION_BITS,
        rem >> np.maximum(lead - FRACTION_BITS, 0),
        rem << np.maximum(FRACTION_BITS - lead, 0),
    )
    # Underflow measures from START + 2^offset (offset >= 0); the cmod's int64 shift wraps the count.
    bias = 0 if index_offset < 0 else int(np.int64(1) << np.int64(index_offset & 63))
    value = np.where(kind == HIT, _interp(tbl, safe, frac), _outside(s, tbl, t, kind, bias))
    return sat(value, 16), kind


@dataclass(frozen=True)
class LutStats:
    """The CDP's LUT and saturation counters (``D_PERF_LUT_*``, ``D_OUT_SATURATION``)."""

    uflow: int
    oflow: int
    hybrid: int
    le_hit: int
    lo_hit: int
    saturation: int


def lut_select(lut: Lut, le_val, le_kind, lo_val, lo_kind) -> tuple[np.ndarray, dict[str, int]]:
    """Pick LE or LO per element: both underflow -> UFLOW_PRIORITY, both overflow -> OFLOW_PRIORITY,
    exactly one hit -> that one, anything else (both hit, or under/over mixed) -> HYBRID_PRIORITY."""
    both_u = (le_kind == UFLOW) & (lo_kind == UFLOW)
    both_o = (le_kind == OFLOW) & (lo_kind == OFLOW)
    le_hit = le_kind == HIT
    lo_hit = lo_kind == HIT
    only_le = ~both_u & ~both_o & le_hit & ~lo_hit
    only_lo = ~both_u & ~both_o & lo_hit & ~le_hit
    hybrid = ~(both_u | both_o | only_le | only_lo)
    use_lo = (
        (both_u & (lut.uflow_priority == LO))
        | (both_o & (lut.oflow_priority == LO))
        | only_lo
        | (hybrid & (lut.hybrid_priority == LO))
    )
    counts = {
        "uflow": int(both_u.sum()),
        "oflow": int(both_o.sum()),
        "le_hit": int(only_le.sum()),
        "lo_hit": int(only_lo.sum()),
        "hybrid": int(hybrid.sum()),
    }
    return np.where(use_lo, lo_val, le_val), counts


def output_cvt(m: np.ndarray, p: Lrn, bits: int = 8) -> tuple[np.ndarray, np.ndarray]:
    """(int8/int16 result, saturation flag) as the HLS IntShiftRightSat: the flag is raised when the
    rounded, saturated result is more than 1 away from the floor-shifted value."""
    v = (m - p.datout_offset) * p.datout_scale
    out = sat(rha(v, p.datout_shift), bits)
    floor = v >> p.datout_shift
    return out, np.abs(floor - out) > 1


def lrn(
    x: np.ndarray, channels: int, p: Lrn, lut: Lut, le_table: np.ndarray, lo_table: np.ndarray, dtype: str = "int8"
) -> tuple[np.ndarray, LutStats]:
    """LRN of a padded (C_pad, H, W) int8/int16-valued cube; lanes >= ``channels`` are padding."""
    in_bits, out_bits = CVT_BITS[dtype]
    xc = input_cvt(np.asarray(x, dtype=np.int64), p, in_bits)
    xc[channels:] = 0  # padding lanes are fed DATIN_OFFSET, which converts to 0
    s = xc.copy() if p.sqsum_bypass else square_sum(xc, channels, p.normalz_len)
    le_table = np.asarray(le_table, dtype=np.int64)
    lo_table = np.asarray(lo_table, dtype=np.int64)
    if lut.le_function == EXPONENT:
        le_val, le_kind = lookup_exponent(s, le_table, lut.le, lut.le_index_offset)
    else:
        le_val, le_kind = lookup_linear(s, le_table, lut.le)
    lo_val, lo_kind = lookup_linear(s, lo_table, lut.lo)
    r, counts = lut_select(lut, le_val, le_kind, lo_val, lo_kind)
    m = r if p.mul_bypass else r * xc
    out, saturated = output_cvt(m, p, out_bits)
    return out, LutStats(saturation=int(saturated.sum()), **counts)


# ---- fp16 ------------------------------------------------------------------------------------------
def _f32(bits: np.ndarray) -> np.ndarray:
    return (np.asarray(bits, dtype=np.int64) & 0xFFFFFFFF).astype(np.uint32).view(np.float32)


def lookup_fp16(
    s: np.ndarray, tbl: np.ndarray, t: Table, exp_mode: bool, index_offset: int, flush_exp: bool
) -> tuple[np.ndarray, np.ndarray]:
    """One fp16 LUT (cmod ``HLS_CDP_lookup_lut``): (FP17 result, classification) for fp32 square sums.

    ``exp_mode``: LE in exponent mode. ``flush_exp``: this is LE in exponent mode (its underflow measures
    from START + 2^LE_INDEX_OFFSET, an fp32 add)."""
    tbl = np.asarray(tbl, dtype=np.int64) & 0xFFFF
    upper = tbl.size - 1
    start, end = t.start & 0xFFFFFFFF, t.end & 0xFFFFFFFF
    diff = fp.fp32_sub(s, start).astype(np.int64)
    f = _f32(diff)
    under = (f <= 0) | np.isnan(f)
    if exp_mode:
        idx = ((diff >> 23) & 0xFF) - 127 - index_offset
        offset16 = (diff >> 7) & 0xFFFF
        under = under | (idx < 0)
        over = ~under & (idx >= upper)
    else:
        with np.errstate(over="ignore", invalid="ignore"):
            shifted = np.ldexp(f.astype(np.float64), -t.index_select).astype(np.float32)  # C: float(f / 2^sel)
            over = ~under & (shifted >= upper)
            safe = np.where(under | over, np.float32(0), shifted)
        whole = np.trunc(safe)
        idx = whole.astype(np.int64)
        offset16 = ((safe - whole) * np.float32(65536)).astype(np.int64)
    hit = ~under & ~over
    i = np.where(hit, idx, 0)
    l0, l1 = tbl[i], tbl[i + 1]
    step = fp.fp32_to_fp17(fp.fp32_sub(fp.fp16_to_fp32(l1), fp.fp16_to_fp32(l0)))
    inside = fp.fp17_add(fp.fp17_mul(step, fp.uint16_to_fp17(offset16)), fp.fp16_to_fp17(l0))
    if flush_exp:
        bias = 0 if index_offset <= -127 else int(fp.pow2_fp32(index_offset))
        below = fp.fp32_sub(s, fp.fp32_add(start, bias))
    else:
        below = diff
    under_val = fp.fp17_add(
        fp.fp17_mul(fp.fp32_to_fp17(below), fp.fp16_to_fp17(t.uflow_scale & 0xFFFF)), fp.fp16_to_fp17(tbl[0])
    )
    over_val = fp.fp17_add(
        fp.fp17_mul(fp.fp32_to_fp17(fp.fp32_sub(s, end)), fp.fp16_to_fp17(t.oflow_scale & 0xFFFF)),
        fp.fp16_to_fp17(tbl[upper]),
    )
    value = np.where(hit, inside, np.where(under, under_val, over_val)).astype(np.int64)
    return value, np.where(under, UFLOW, np.where(over, OFLOW, HIT))


def _is_nan16(bits: np.ndarray) -> np.ndarray:
    return ((bits & 0x7C00) == 0x7C00) & ((bits & 0x3FF) != 0)


def lrn_fp16(
    x: np.ndarray, channels: int, p: Lrn, lut: Lut, le_table: np.ndarray, lo_table: np.ndarray
) -> tuple[np.ndarray, LutStats]:
    """LRN of a padded (C_pad, H, W) cube of fp16 patterns (module docstring); returns fp16 patterns."""
    x = np.asarray(x, dtype=np.int64) & 0xFFFF
    x = np.where(np.arange(x.shape[0])[:, None, None] < channels, x, 0)  # padding lanes are fed +0
    if p.nan_to_zero:
        x = np.where(_is_nan16(x), 0, x)
    x17 = fp.fp16_to_fp17(x).astype(np.int64)
    x32 = fp.fp17_to_fp32(x17).astype(np.int64)
    if p.sqsum_bypass:
        s = x32
    else:
        sq = fp.fp32_mul(x32, x32).astype(np.int64)
        half = 4
        ext = np.pad(sq, ((half, half), (0, 0), (0, 0)))  # channels outside the cube: +0 squared

        def at(d: int) -> np.ndarray:
            return ext[half + d : half + d + sq.shape[0]]

        s = fp.fp32_add(fp.fp32_add(at(-1), at(1)), at(0))
        for d in range(2, p.normalz_len + 2):
            s = fp.fp32_add(s, fp.fp32_add(at(-d), at(d)))
        s = s.astype(np.int64)
    exp_mode = lut.le_function == EXPONENT
    le_val, le_kind = lookup_fp16(s, le_table, lut.le, exp_mode, lut.le_index_offset, exp_mode)
    lo_val, lo_kind = lookup_fp16(s, lo_table, lut.lo, False, 0, False)
    r, counts = lut_select(lut, le_val, le_kind, lo_val, lo_kind)
    if p.mul_bypass:
        nan32 = ((x32 & 0x7F800000) == 0x7F800000) & ((x32 & 0x7FFFFF) != 0)
        m = np.where(nan32, x17, r)
    else:
        m = fp.fp17_mul(x17, r)
    return fp.fp17_to_fp16(m).astype(np.int64), LutStats(saturation=0, **counts)


# ---- the engine ----------------------------------------------------------------------------------
def _check_tables(le: np.ndarray, lo: np.ndarray) -> None:
    if np.asarray(le).shape != (LE_DEPTH,) or np.asarray(lo).shape != (LO_DEPTH,):
        raise ValueError(f"CDP LUTs must have {LE_DEPTH}/{LO_DEPTH} entries")


def run(ctx: OpContext) -> None:
    cdp, rdma = ctx.regs["CDP"], ctx.regs["CDP_RDMA"]
    dtype = check_format(cdp.D_DATA_FORMAT, "INPUT_DATA_TYPE", ctx.hw)
    fetched = check_format(rdma.D_DATA_FORMAT, "INPUT_DATA", ctx.hw)
    if fetched != dtype:
        raise rdma.D_DATA_FORMAT.fail("INPUT_DATA", f"CDP_RDMA fetches {fetched}, the CDP core computes {dtype}")
    for view, reg, name in ((rdma, "D_SRC_COMPRESSION_EN", "SRC_COMPRESSION_EN"), (cdp, "D_DST_COMPRESSION_EN", "DST_COMPRESSION_EN")):
        value = getattr(view, reg)
        if getattr(value, name):
            raise UnsupportedError(view.unit.name, f"{value.where(name)}: compressed surfaces are not modelled")
    channels = rdma.D_DATA_CUBE_CHANNEL.CHANNEL + 1
    height = rdma.D_DATA_CUBE_HEIGHT.HEIGHT + 1
    width = rdma.D_DATA_CUBE_WIDTH.WIDTH + 1
    p = Lrn.from_view(cdp, dtype)
    lut = Lut.from_view(cdp, dtype, ctx.hw)
    tables = ctx.lut["CDP"]
    _check_tables(tables["LE"], tables["LO"])

    space, base, layout = feature_cube(
        ctx.hw, ctx.mem, rdma, "SRC", "D_SRC_DMA_CFG", channels, height, width, dtype  # type: ignore[arg-type]
    )
    x = read_cube(space, base, layout, signed=dtype != "fp16")
    nan_in = inf_in = nan_out = 0
    if dtype == "fp16":
        special = (x & 0x7C00) == 0x7C00
        nan_in, inf_in = int(_is_nan16(x).sum()), int((special & ((x & 0x3FF) == 0)).sum())
        out, stats = lrn_fp16(x, channels, p, lut, tables["LE"], tables["LO"])
        nan_out = int(_is_nan16(out).sum())
    else:
        out, stats = lrn(x, channels, p, lut, tables["LE"], tables["LO"], dtype)
    space, base, out_layout = feature_cube(
        ctx.hw, ctx.mem, cdp, "DST", "D_DST_DMA_CFG", channels, height, width, dtype  # type: ignore[arg-type]
    )
    write_cube(space, base, out_layout, out)

    ctx.report("CDP", "D_OUT_SATURATION", stats.saturation)
    ctx.report("CDP", "D_PERF_LUT_UFLOW", stats.uflow)
    ctx.report("CDP", "D_PERF_LUT_OFLOW", stats.oflow)
    ctx.report("CDP", "D_PERF_LUT_HYBRID", stats.hybrid)
    ctx.report("CDP", "D_PERF_LUT_LE_HIT", stats.le_hit)
    ctx.report("CDP", "D_PERF_LUT_LO_HIT", stats.lo_hit)
    ctx.report("CDP", "D_NAN_INPUT_NUM", nan_in)
    ctx.report("CDP", "D_INF_INPUT_NUM", inf_in)
    ctx.report("CDP", "D_NAN_OUTPUT_NUM", nan_out)
    return None


ENGINE = register(
    Engine(
        name="CDP",
        units=("CDP",),
        rdma="CDP_RDMA",
        done_bits=unit_done_bits("CDP"),
        run=run,
        lut_units=("CDP",),
    )
)
