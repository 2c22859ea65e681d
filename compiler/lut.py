"""LUT-based operations: LRN on CDP (int8) and sigmoid/tanh on SDP's Y stage (int8, int16 and fp16).

Both units approximate a float function by linear interpolation in two int16 tables (NVDLA_NOTES §4
"LUT" and "CDP / LRN"): LE with 65 entries and LO with 257. A table is uniform (knot i at
``start + i * 2^select``) or, LE only, exponential (knot i at ``start + 2^(i + offset)``, one segment per
octave). Inputs past a table's range under/overflow and take its end entry plus a slope. The compiler
quantizes tensors to symmetric int8 (real = scale * q), so each function below picks the grids, fills the
tables and sets the converters so that the golden model gives ``round(f(in_scale * q) / out_scale)`` up to
interpolation and table rounding.

LRN (``lrn_params``): CDP computes ``r(S) * x'`` with ``x' = 2q`` and S the square sum of x' over the
window, so one table ``r(S) ~ (bias + a*S)^-beta``, ``a = alpha/size * (in_scale/2)^2``, serves every
input. Its relative interpolation error is about ``beta(beta+1)/16 * (step / (S + bias/a))^2``, so the
step may grow with S: a fine uniform grid covers small S and a coarse uniform one the rest up to the
largest reachable S (size * 256^2). When S spans too many multiples of bias/a for that (strong
normalization), the second grid is LE in exponent mode instead, whose segments widen geometrically. A
search over these layouts minimizes the error in output LSBs, which it then bounds over every reachable S.

Sigmoid/tanh (``sdp_activation``): the function only varies over a bounded interval of the int32 input;
LO spans that interval uniformly and the flat tails are its under/overflow with zero slope, so the whole
int32 range maps correctly.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import numpy as np

from compiler.hwparams import CdpParams, YStage
from golden.lut import LE_DEPTH, LO_DEPTH, TABLE_LE, TABLE_LO, LutRegisters

INT16_MIN, INT16_MAX = -(1 << 15), (1 << 15) - 1
INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1
#: CDP's LUT START/END registers are 38-bit signed.
_START_MAX = (1 << 37) - 1

#: Window sizes CDP supports, to their NORMALZ_LEN encoding.
LRN_SIZES = {3: 0, 5: 1, 7: 2, 9: 3}
#: CDP input CVT gain: x' = 2q still fits the 9-bit converter output (-256..254) and doubles the
#: resolution of the product r * x' that the output CVT rescales.
LRN_INPUT_GAIN = 2
#: CDP interpolation fraction bits (cmod ``lookup_lut_int8``).
_CDP_FRACTION_BITS = 16
#: Table entries are kept this far below int16 full scale so the equal-ripple nudges cannot clip.
_TABLE_FULL_SCALE = 32000


@dataclass(frozen=True)
class _Grid:
    """One CDP table: knot i at ``start + i * 2^shift`` (linear; shift = INDEX_SELECT) or at
    ``start + 2^(i + shift)`` (LE exponent mode; shift = INDEX_OFFSET), holding ``values``."""

    name: str  # "le" or "lo"
    exponent: bool
    start: int
    shift: int
    values: np.ndarray  # int16 entries, one per knot

    @property
    def segments(self) -> int:
        return len(self.values) - 1

    @property
    def first(self) -> int:
        """The smallest input that hits the table (earlier ones underflow)."""
        return self.start + (1 << self.shift) if self.exponent else self.start

    @property
    def end(self) -> int:
        """The last knot, where overflow begins."""
        if self.exponent:
            return self.start + (1 << (self.segments + self.shift))
        return self.start + (self.segments << self.shift)


def _knots(exponent: bool, start: int, shift: int, segments: int) -> np.ndarray:
    i = np.arange(segments + 1, dtype=np.float64)
    return start + (2.0 ** (i + shift) if exponent else i * 2.0 ** shift)


def _fit(f: Callable[[np.ndarray], np.ndarray], knots: np.ndarray, gain: float, granule: int,
         away: bool = False) -> np.ndarray:
    """Entries ``gain * f(knot)``, each nudged by a quarter of the chord's mid-segment bow on either side.

    That spreads a smooth f's interpolation error evenly above and below (about half the worst error of
    plain samples). Segments no wider than ``granule`` (the spacing of reachable inputs) only ever see
    their knots, so their samples stay exact. ``away`` rounds magnitudes up instead of to nearest, so an
    exact half-LSB target still rounds away from zero downstream, as the output CVT does.
    """
    v = gain * _nudged(f, knots, granule)
    v = np.sign(v) * np.ceil(np.abs(v)) if away else np.round(v)
    return np.clip(v, INT16_MIN, INT16_MAX).astype(np.int64)


def _nudged(f: Callable[[np.ndarray], np.ndarray], knots: np.ndarray, granule: float = 0.0) -> np.ndarray:
    """``f(knot)`` less a quarter of the mid-segment bow of each segment it ends (``_fit``), as float."""
    v = f(knots)
    width = np.diff(knots)
    bow = np.where(width > granule, (v[:-1] + v[1:]) / 2 - f(knots[:-1] + width / 2), 0.0)
    adj = np.zeros(len(knots))
    adj[:-1] += bow / 4
    adj[1:] += bow / 4
    adj[0] += bow[0] / 4  # an end knot belongs to one segment only
    adj[-1] += bow[-1] / 4
    return v - adj


def _grid(name: str, f: Callable[[np.ndarray], np.ndarray], exponent: bool, start: int, shift: int,
          gain: float, granule: int) -> _Grid:
    segments = (LE_DEPTH if name == "le" else LO_DEPTH) - 1
    return _Grid(name, exponent, start, shift, _fit(f, _knots(exponent, start, shift, segments), gain, granule))


def _cdp_lookup(s: np.ndarray, grid: _Grid) -> np.ndarray:
    """CDP table output for inputs ``s >= grid.first`` (hits, and overflow with a zero slope): the design
    search's model of ``lookup_linear`` / ``lookup_exponent`` (16-bit fraction, rounded half away)."""
    raw = s - grid.start
    if grid.exponent:
        lead = np.frexp(raw.astype(np.float64))[1].astype(np.int64) - 1  # floor(log2 raw), exact
        idx = lead - grid.shift
    else:
        lead = np.full_like(raw, grid.shift)
        idx = raw >> grid.shift
    over = idx >= grid.segments
    i = np.minimum(idx, grid.segments - 1)
    base = (np.int64(1) << lead) if grid.exponent else (i << grid.shift)
    rem = raw - base
    bits = _CDP_FRACTION_BITS
    frac = np.where(lead <= bits, rem << np.maximum(bits - lead, 0), rem >> np.maximum(lead - bits, 0))
    y0, y1 = grid.values[i], grid.values[i + 1]
    d = (y1 - y0) * frac
    hit = y0 + np.sign(d) * ((np.abs(d) + (1 << (bits - 1))) >> bits)
    return np.where(over, grid.values[-1], hit)


def _scale_shift(k: float, max_shift: int = 63, round_up: bool = False) -> tuple[int, int]:
    """(scale, shift) with scale / 2^shift ~ k: scale a positive int16 of 15 significant bits where the
    shift range allows, shift in 0..max_shift. ``round_up`` never goes below k (callers then derive their
    table gain from the result, so the gain can only shrink and the tables still fit)."""
    if not (k > 0 and math.isfinite(k)):
        raise ValueError(f"multiplier {k} must be positive and finite")
    shift = min(max(14 - math.floor(math.log2(k)), 0), max_shift)
    scale = max(1, (math.ceil if round_up else round)(k * 2.0 ** shift))
    if scale > INT16_MAX:
        if shift == 0:
            raise ValueError(f"multiplier {k} does not fit a 16-bit scale")
        shift -= 1
        scale = max(1, (math.ceil if round_up else round)(k * 2.0 ** shift))
    return scale, shift


# ---- LRN on CDP ------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class LrnDesign:
    """The chosen CDP program and its predicted worst error before the final rounding, in output LSBs
    (so ``|q_golden - q_ideal| <= 1`` wherever it is below 1)."""

    params: CdpParams
    max_error: float


def _lrn_table_output(s: np.ndarray, first: _Grid, second: _Grid) -> np.ndarray:
    """CDP LUT output when the first grid starts at 0 and the second takes over at its first knot (the
    priorities set in ``design_lrn`` make it so)."""
    return np.where(s < second.first, _cdp_lookup(s, first), _cdp_lookup(np.maximum(s, second.first), second))


def _lrn_samples(smax: int, granule: int) -> np.ndarray:
    """Square sums the search checks: every reachable one up to 4096 granules, then ~0.1 % apart."""
    top = smax // granule
    dense = np.arange(0, min(top, 4096) + 1, dtype=np.int64)
    if top <= 4096:
        return dense * granule
    sparse = np.round(np.geomspace(4096, top, 6000)).astype(np.int64)
    return np.union1d(dense, sparse) * granule


def design_lrn(size: int, alpha: float, beta: float, bias: float, in_scale: float, out_scale: float) -> LrnDesign:
    """``lrn_params`` plus its predicted accuracy (see ``lrn_params``)."""
    if size not in LRN_SIZES:
        raise ValueError(f"CDP windows are 3, 5, 7 or 9 channels, not {size}: run this LRN on the CPU")
    for name, value in (("alpha", alpha), ("beta", beta), ("bias", bias), ("in_scale", in_scale),
                        ("out_scale", out_scale)):
        if not math.isfinite(value):
            raise ValueError(f"LRN {name}={value} is not finite")
    if alpha < 0 or bias <= 0 or in_scale <= 0 or out_scale <= 0:
        raise ValueError(f"LRN needs alpha >= 0, bias > 0 and positive scales (alpha={alpha}, bias={bias}, "
                         f"in_scale={in_scale}, out_scale={out_scale})")
    g = LRN_INPUT_GAIN
    granule = g * g  # S = g^2 * sum q^2
    a = alpha / size * (in_scale / g) ** 2  # per unit of S

    def f(s: np.ndarray) -> np.ndarray:
        return (bias + a * np.asarray(s, dtype=np.float64)) ** -beta

    smax = size * (128 * g) ** 2
    fmax = float(max(f(np.array(0.0)), f(np.array(float(smax)))))
    c = in_scale / out_scale  # output LSBs per unit of q * f
    # r = gain * f and the output CVT multiplies r * x' = gain * f * g * q by c / (g * gain). The gain
    # puts f's largest value at full scale, or, when even |q| = 1 saturates there, the largest f that
    # does not: entries clipped above it give saturated results anyway (|q| >= 1), and the small f that
    # matter keep more bits. Fix the converter first (rounding its scale up) and derive the gain from it,
    # so the two agree exactly.
    gain_target = _TABLE_FULL_SCALE / min(fmax, 128.5 / c)
    d_scale, d_shift = _scale_shift(c / (g * gain_target), round_up=True)
    gain = c / (g * d_scale / 2.0 ** d_shift)

    def error(s: np.ndarray, r: np.ndarray) -> np.ndarray:
        """Worst output error in LSBs, before rounding, at square sums s given table outputs r, over every
        integer centre |q| <= sqrt(s)/g a sum allows. It grows with |q| until the larger of the two results
        saturates and shrinks after, so it peaks next to there or at the largest |q| (saturation taken at
        128.5, the negative side's, which bounds the positive one)."""
        qmax = np.minimum(128, np.floor(np.sqrt(s) / g))
        hw, ideal = c * r / gain, c * f(s)
        peak = 128.5 / np.maximum(np.maximum(hw, ideal), 1e-300)
        worst = np.zeros_like(hw)
        for q in (np.floor(peak), np.ceil(peak)):
            q = np.minimum(np.maximum(q, 1), qmax)  # an integer centre the sum allows (0 for s = 0)
            worst = np.maximum(worst, np.abs(np.minimum(q * hw, 128.5) - np.minimum(q * ideal, 128.5)))
        return worst

    samples = _lrn_samples(smax, granule)
    candidates: list[tuple[tuple[int, float], float, _Grid, _Grid]] = []

    def consider(first: _Grid, second: _Grid) -> None:
        """Rank a layout: first by the whole LSBs its worst error may cost (below 1, every result is
        within 1 of the ideal; below 2, within 2), then by its mean error, which is about the share of
        results off by one."""
        e = error(samples, _lrn_table_output(samples, first, second))
        worst = float(np.max(e))
        candidates.append(((math.floor(worst), float(np.mean(e))), worst, first, second))

    # Uniform then uniform, either table first: the first from 0 with step 2^sel1, the second from its
    # end with the smallest step that reaches smax.
    for first, second in (("lo", "le"), ("le", "lo")):
        n1 = (LO_DEPTH if first == "lo" else LE_DEPTH) - 1
        n2 = (LO_DEPTH if second == "lo" else LE_DEPTH) - 1
        for sel1 in range(0, max(0, math.ceil(math.log2(smax / n1))) + 1):
            g1 = _grid(first, f, False, 0, sel1, gain, granule)
            rest = smax - g1.end
            sel2 = max(0, math.ceil(math.log2(rest / n2))) if rest > 0 else 0
            consider(g1, _grid(second, f, False, g1.end, sel2, gain, granule))
    # Strong normalization (S spans many multiples of bias/a): uniform LO up to e1, then LE in exponent
    # mode from e1, whose segments widen geometrically (2^o, 2^(o+1), ...). Its worst error is lower,
    # its mean higher (about 1-2 % everywhere past e1), so it only competes when the above cannot keep
    # every result within 1.
    if min(t[1] for t in candidates) >= 1:
        for sel1 in range(0, max(0, math.ceil(math.log2(smax / (LO_DEPTH - 1))))):
            g1 = _grid("lo", f, False, 0, sel1, gain, granule)
            top = g1.end.bit_length() - 1  # e1 = 2^top
            for o in range(max(0, top - 10), top + 1):
                consider(g1, _grid("le", f, True, g1.end - (1 << o), o, gain, granule))
    _, _, g1, g2 = min(candidates, key=lambda t: t[0])
    every = np.arange(0, smax + 1, granule, dtype=np.int64)  # every reachable square sum
    err = float(np.max(error(every, _lrn_table_output(every, g1, g2))))

    grids = {g1.name: g1, g2.name: g2}
    le, lo = grids["le"], grids["lo"]
    first_id = TABLE_LO if g1.name == "lo" else TABLE_LE
    second_id = TABLE_LE if first_id == TABLE_LO else TABLE_LO
    lut = LutRegisters(
        le_table=tuple(int(v) for v in le.values),
        lo_table=tuple(int(v) for v in lo.values),
        le_function="exp" if le.exponent else "linear",
        le_start=le.start,
        le_end=min(le.end, _START_MAX),  # only anchors the (zero, unreachable) overflow slope
        lo_start=lo.start,
        lo_end=lo.end,
        le_index_offset=le.shift if le.exponent else 0,
        le_index_select=0 if le.exponent else le.shift,
        lo_index_select=lo.shift,
        # S = 0 underflows both (the first grid's entry 0 is f(0)). From the second grid's first knot on,
        # the first overflows and the second hits, or (uniform second grid, at that knot) the second
        # underflows and gives its entry 0. Nothing reaches the second grid's end.
        uflow_priority=first_id,
        oflow_priority=second_id,
        hybrid_priority=second_id,
    )
    params = CdpParams(
        lut=lut,
        datin_offset=0,
        datin_scale=g,
        datin_shifter=0,
        normalz_len=LRN_SIZES[size],
        sqsum_bypass=False,
        mul_bypass=False,
        datout_offset=0,
        datout_scale=d_scale,
        datout_shifter=d_shift,
    )
    return LrnDesign(params, err)


def lrn_params(size: int, alpha: float, beta: float, bias: float, in_scale: float, out_scale: float,
               *, max_error: float | None = 2.0) -> CdpParams:
    """CDP parameters for ONNX/Caffe cross-channel LRN on symmetric int8 tensors:
    ``y = x / (bias + alpha/size * sum_{size channels centred on c} x^2)^beta`` with x = in_scale * q_in
    and q_out ~ round(y / out_scale), saturated.

    ValueError for a window CDP lacks (anything but 3, 5, 7, 9), for invalid constants (bias <= 0,
    alpha < 0, scales <= 0), and when the predicted worst error before rounding over every reachable input
    exceeds ``max_error`` output LSBs (None: never): the caller then runs the layer on the CPU. Below 1
    every result is within 1 LSB of the ideal; below 2, within 2. That holds up to a normalization
    strength ``alpha * (128 * in_scale)^2 / bias`` of several hundred (more if the output scale leaves
    headroom); the default refuses the rare layers, around 10^4 and beyond, that would be off by 3.
    """
    design = design_lrn(size, alpha, beta, bias, in_scale, out_scale)
    if max_error is not None and design.max_error > max_error:
        raise ValueError(f"CDP LRN would be off by up to {design.max_error:.2f} LSB (limit {max_error}): "
                         "run this LRN on the CPU")
    return design.params


# ---- LRN on CDP in fp16 -----------------------------------------------------------------------------------
#: Largest step of the fp16 LRN's LO table in units of bias/a (u = a*s/bias): linear interpolation of
#: (1 + u)^-beta over a step du is off by about du^2 * beta(beta+1) / 8 relatively at u = 0, less past it,
#: and the nudged entries halve that; 0.04 keeps it near 1e-4, within half an fp16 step (2.4e-4).
FP16_LRN_MAX_STEP = 0.04


@dataclass(frozen=True)
class LrnFp16Design:
    """The fp16 CDP program and its predicted worst relative error of the LUT value r ~ f(S), over the LO
    range (u = a*S/bias up to ``lo_reach``) and past it (LE's octaves, up to the largest square sum of fp16
    values)."""

    params: CdpParams
    lo_reach: float
    lo_error: float
    le_error: float


def lrn_fp16(size: int, alpha: float, beta: float, bias: float) -> LrnFp16Design:
    """CDP parameters for cross-channel LRN on fp16 tensors: ``y = x * f(S)``, ``f(S) = (bias + a*S)^-beta``,
    ``a = alpha/size``, S the fp32 sum of the window's squares (CDP's fp16 path has no converters: values
    are the network's own).

    LO (linear, 256 segments of 2^select from 0) tabulates where f bends most, u = a*S/bias below about
    10, with steps of at most ``FP16_LRN_MAX_STEP``; LE in exponent mode takes the octaves from LO's end
    (2^offset = LO's END) up, 64 of them, so every finite S is covered; past them the last entry holds.
    Priorities: both hit -> LO; S = 0 underflows both and LO's entry 0 is f(0). LE's octaves interpolate
    a power law coarsely (a few percent off mid-octave for beta = 3/4), so strongly normalized values are
    less exact than fp16; the error figures say how much. Entries are fp16 (``_nudged``), START/END fp32
    patterns, slope scales 0. ValueError when the window, the constants or the ranges do not fit."""
    if size not in LRN_SIZES:
        raise ValueError(f"CDP windows are 3, 5, 7 or 9 channels, not {size}: run this LRN on the CPU")
    if not all(math.isfinite(v) for v in (alpha, beta, bias)) or alpha <= 0 or bias <= 0:
        raise ValueError(f"LRN needs finite alpha > 0 and bias > 0 (alpha={alpha}, beta={beta}, bias={bias})")
    a = alpha / size

    def f(s: np.ndarray) -> np.ndarray:
        return (bias + a * np.asarray(s, dtype=np.float64)) ** -beta

    select = math.floor(math.log2(FP16_LRN_MAX_STEP * bias / a))
    offset = select + 8  # LO's END = 256 * 2^select: LE's first octave starts there
    if not (-128 <= select <= 127 and -128 <= offset and offset + 64 < 128):
        raise ValueError(f"LRN alpha={alpha}, bias={bias}: the table steps (2^{select}) leave fp32's "
                         "exponent range: run this LRN on the CPU")
    lo_knots = (2.0 ** select) * np.arange(LO_DEPTH)
    le_knots = 2.0 ** (offset + np.arange(LE_DEPTH, dtype=np.float64))
    with np.errstate(over="ignore"):
        lo = _f16(_nudged(f, lo_knots))
        le = _f16(_nudged(f, le_knots))
    if not (np.all(np.isfinite(lo.astype(np.uint16).view(np.float16)))
            and np.all(np.isfinite(le.astype(np.uint16).view(np.float16)))):
        raise ValueError(f"LRN bias={bias}, beta={beta}: f(0) = {float(f(np.array(0.0))):g} is beyond fp16")

    reachable = size * 65504.0 ** 2  # the largest square sum of fp16 values

    def worst(knots: np.ndarray, table: np.ndarray) -> float:
        keep = int(np.searchsorted(knots, reachable)) + 1
        knots, table = knots[:keep], table[:keep]
        t = np.linspace(0.0, 1.0, 65)[None, :]
        s = knots[:-1, None] + t * np.diff(knots)[:, None]
        v = table.astype(np.uint16).view(np.float16).astype(np.float64)
        r = v[:-1, None] + t * np.diff(v)[:, None]
        return float(np.max(np.abs(r / f(s) - 1.0)))

    lut = LutRegisters(
        le_table=tuple(int(v) for v in le),
        lo_table=tuple(int(v) for v in lo),
        le_function="exp",
        le_start=_f32(0.0),
        le_end=_f32(float(le_knots[-1])),
        lo_start=_f32(0.0),
        lo_end=_f32(float(lo_knots[-1])),
        le_index_offset=offset,
        le_index_select=0,
        lo_index_select=select,
        uflow_priority=TABLE_LO,
        oflow_priority=TABLE_LE,
        hybrid_priority=TABLE_LO,
    )
    params = CdpParams(lut=lut, normalz_len=LRN_SIZES[size], precision="fp16")
    return LrnFp16Design(params, float(a * lo_knots[-1] / bias), worst(lo_knots, lo), worst(le_knots, le))


# ---- sigmoid / tanh on SDP's Y stage ------------------------------------------------------------------------
def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + np.tanh(0.5 * np.asarray(x, dtype=np.float64)))  # no overflow for any x


ACTIVATIONS: dict[str, Callable[[np.ndarray], np.ndarray]] = {"sigmoid": _sigmoid, "tanh": np.tanh}

#: Targets (in output LSBs) past these saturate int8 with half an LSB to spare.
_SAT_LO, _SAT_HI = -129.0, 128.0
#: The table clips its targets no further out than this (keeps at least ~8 table units per LSB).
_CLIP_MAX = 4096.0
#: Outside the tabulated interval the function is within this many output LSBs of its limit.
_TAIL_TOLERANCE = 1 / 256


def _edge(t: Callable[[float], float], limit: float, toward: float) -> float:
    """The x nearest 0 beyond which the monotone ``t`` stays within ``_TAIL_TOLERANCE`` of ``limit``,
    searching from 0 toward ``toward`` (bisection)."""
    inside, outside = 0.0, toward
    if abs(t(inside) - limit) <= _TAIL_TOLERANCE:
        return inside
    for _ in range(200):
        mid = (inside + outside) / 2
        if abs(t(mid) - limit) <= _TAIL_TOLERANCE:
            outside = mid
        else:
            inside = mid
    return outside


def sdp_activation(fn: str, in_scale: float, out_scale: float, qmax: int = 127
                   ) -> tuple[YStage, LutRegisters, int, int, int]:
    """SDP Y stage, LUT and output CVT ``(cvt_offset, cvt_scale, cvt_shift)`` computing ``fn`` ("sigmoid"
    or "tanh") of an int32 value v arriving at Y (real = in_scale * v): q ~ round(fn(in_scale*v) /
    out_scale) saturated to int8 (``qmax`` 127; int16: 32767), for every int32 v. Needs a config with the
    SDP LUT (``hw.sdp_lut``).

    Y's MUL and ALU stay bypassed. The LO table spans, uniformly, the interval of v where the rounded
    result still changes (clipped to int32); v below/above it underflows/overflows LO into its end entries
    with zero slope. LE is parked at the top of int32 so it never hits, and every priority selects LO. The
    table holds ``fn/out_scale * 2^shift / scale``, clipped where the output saturates anyway, and the
    output CVT multiplies by ``scale / 2^shift``.
    """
    if fn not in ACTIVATIONS:
        raise ValueError(f"no SDP LUT activation {fn!r}; have {', '.join(ACTIVATIONS)}")
    for name, value in (("in_scale", in_scale), ("out_scale", out_scale)):
        if not (math.isfinite(value) and value > 0):
            raise ValueError(f"{name}={value} must be positive and finite")
    func = ACTIVATIONS[fn]

    def raw(x: np.ndarray) -> np.ndarray:  # the target in output LSBs
        return func(np.asarray(x, dtype=np.float64)) / out_scale

    sat_lo, sat_hi = _SAT_LO - (qmax - 127), _SAT_HI + (qmax - 127)  # half a step past the saturation
    clip_max = max(_CLIP_MAX, 2.0 * (qmax + 1))  # int16: ~1 table unit per output step

    def saturated(x: float) -> float:
        return float(np.clip(raw(np.array(x)), sat_lo, sat_hi))

    far = 1000.0  # both functions are flat to float precision well before this
    x_lo = _edge(saturated, saturated(-far), -far)
    x_hi = _edge(saturated, saturated(far), far)
    v_lo = max(INT32_MIN, math.floor(x_lo / in_scale))
    v_hi = min(INT32_MAX, math.ceil(x_hi / in_scale))
    start = max(INT32_MIN, v_lo - 1)  # a hit needs v > start
    segments = LO_DEPTH - 1
    select = max(0, math.ceil(math.log2(max(v_hi - start, 1) / segments)))

    # Clip where the output saturates, but never inside the segment that crosses the saturation
    # threshold: that one must follow the function itself, and past it every chord stays saturated.
    knots = raw(in_scale * (start + float(2 ** select) * np.arange(segments + 1)))
    hi, lo = sat_hi, sat_lo
    above, below = np.nonzero(knots >= qmax + 0.5)[0], np.nonzero(knots <= -qmax - 1.5)[0]
    if above.size:
        hi = min(max(hi, float(knots[above[0]])), clip_max)
    if below.size:
        lo = max(min(lo, float(knots[below[-1]])), -clip_max)

    def target(v: np.ndarray) -> np.ndarray:
        return np.clip(raw(in_scale * np.asarray(v, dtype=np.float64)), lo, hi)

    peak = max(float(np.max(np.abs(np.clip(knots, lo, hi)))), 1.0 / 64)
    # Table = target * gain with gain = 2^shift / scale exactly, so the output CVT undoes it exactly.
    scale, shift = _scale_shift(peak / _TABLE_FULL_SCALE, round_up=True)
    lo_table = _fit(target, _knots(False, start, select, segments), 2.0 ** shift / scale, granule=1, away=True)
    lut = LutRegisters(
        le_table=(0,) * LE_DEPTH,
        lo_table=tuple(int(x) for x in lo_table),
        le_function="linear",
        le_start=INT32_MAX,  # v <= start: LE always underflows
        le_end=INT32_MAX,
        lo_start=start,
        lo_end=min(INT32_MAX, start + (segments << select)),
        le_index_select=0,
        lo_index_select=select,
        uflow_priority=TABLE_LO,
        oflow_priority=TABLE_LO,
        hybrid_priority=TABLE_LO,  # LO overflow with LE underflow
    )
    y = YStage(bypass=False, alu_bypass=True, mul_bypass=True, lut_bypass=False)
    return y, lut, 0, scale, shift


# ---- sigmoid / tanh in fp16 ---------------------------------------------------------------------------------------
#: Half-width of the interval LO tabulates in fp16: past it the function is within fp16's rounding of its limit
#: (sigmoid: e^-16 ~ 1e-7 below 2^-11; tanh: 2e^-16 ~ 2e-7), so the tails are the end entries with zero slope.
FP16_LUT_RANGE = {"sigmoid": 16.0, "tanh": 8.0}


def _f16(v) -> np.ndarray:
    return np.asarray(v, dtype=np.float64).astype(np.float16).view(np.uint16).astype(np.int64)


def _f32(v: float) -> int:
    return int(np.array([v], dtype=np.float32).view(np.uint32)[0])


def sdp_activation_fp16(fn: str) -> tuple[YStage, LutRegisters]:
    """SDP Y stage and LUT computing ``fn`` on the fp16 datapath (PROC_PRECISION=FP16): LO spans
    [-R, R] uniformly (``FP16_LUT_RANGE``: 256 segments of 2^-select, select a negative power here), its
    entries the fp16 function values nudged as the int8 tables are (``_fit``: the interpolation error spread
    evenly), and inputs outside take the end entries with zero slope (fp16 slope scale 0). START/END are fp32
    bit patterns; LE is parked beyond fp32's largest finite value so it always underflows and every priority
    selects LO. The interpolation error is below one fp16 step near the function's limits."""
    if fn not in ACTIVATIONS:
        raise ValueError(f"no SDP LUT activation {fn!r}; have {', '.join(ACTIVATIONS)}")
    func = ACTIVATIONS[fn]
    half = FP16_LUT_RANGE[fn]
    segments = LO_DEPTH - 1
    select = int(math.log2(2 * half / segments))  # exact: both are powers of two
    table = _f16(_nudged(func, -half + (2.0 ** select) * np.arange(segments + 1)))
    lut = LutRegisters(
        le_table=(0,) * LE_DEPTH,
        lo_table=tuple(int(x) for x in table),
        le_function="linear",
        le_start=_f32(float(np.finfo(np.float32).max)),  # every finite input underflows LE
        le_end=_f32(float(np.finfo(np.float32).max)),
        lo_start=_f32(-half),
        lo_end=_f32(half),
        le_index_select=0,
        lo_index_select=select,
        uflow_priority=TABLE_LO,
        oflow_priority=TABLE_LO,
        hybrid_priority=TABLE_LO,
    )
    return YStage(bypass=False, alu_bypass=True, mul_bypass=True, lut_bypass=False), lut
