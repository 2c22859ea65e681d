"""compiler.lut: LRN on CDP and sigmoid/tanh on SDP, run through the golden model and compared with the
float function of the dequantized input; the independent reference math must give the same bytes.

Errors are in output LSBs against ``round_half_away(f(in_scale * q) / out_scale)`` saturated to int8
(the hardware's own rounding, so exact ties are not counted as errors).
"""
from __future__ import annotations

import math
import zlib
from dataclasses import fields, replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from compiler.codegen.pack import unpack_feature
from compiler.hwparams import ALU_SUM, CdpParams, SdpParams, XStage, YStage
from compiler.lut import LRN_INPUT_GAIN, design_lrn, lrn_params, sdp_activation
from golden.config import PRESETS, get_config
from golden.dla import Dla
from golden.engines import cdp as gcdp
from golden.engines.sdp import OutCvt
from golden.engines.sdp import output_cvt as sdp_output_cvt
from golden.engines.sdp_lut import lut_lookup
from golden.errors import UnsupportedError
from golden.lut import LutRegisters
from regressions.lib.programs import LrnLayer, SdpLayer, program_cdp, program_sdp
from regressions.lib.reference import cdp as rcdp
from regressions.lib.reference import sdp as rsdp

LUT_CONFIGS = [name for name, hw in PRESETS.items() if hw.sdp_lut]
INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1


def round_away(t: np.ndarray) -> np.ndarray:
    return np.sign(t) * np.floor(np.abs(t) + 0.5)


def to_int8(t: np.ndarray) -> np.ndarray:
    return np.clip(round_away(t), -128, 127).astype(np.int64)


# ---- LRN --------------------------------------------------------------------------------------------------
def lrn_float(x: np.ndarray, size: int, alpha: float, beta: float, bias: float) -> np.ndarray:
    """ONNX LRN over axis 0 of a (C, H, W) cube, zero beyond the channel ends."""
    sq = x * x
    c = x.shape[0]
    s = np.zeros_like(x)
    for i in range(c):
        s[i] = sq[max(0, i - (size - 1) // 2): min(c, i + size // 2 + 1)].sum(axis=0)
    return x / (bias + alpha / size * s) ** beta


def lrn_ideal(q: np.ndarray, size, alpha, beta, bias, in_scale, out_scale) -> np.ndarray:
    return to_int8(lrn_float(in_scale * q.astype(np.float64), size, alpha, beta, bias) / out_scale)


def lrn_out_scale(size: int, alpha: float, beta: float, bias: float, in_scale: float, factor: float) -> float:
    """The calibration a compiler would pick: the largest |LRN| of a lone channel, over 127, times factor
    (< 1 lets the largest results saturate)."""
    x = in_scale * np.arange(1, 129, dtype=np.float64)
    return float(np.max(x * (bias + alpha / size * x * x) ** -beta)) / 127 * factor


def run_cdp(hw_name: str, q: np.ndarray, p: CdpParams) -> np.ndarray:
    hw = get_config(hw_name)
    layer = LrnLayer(x=q, **{f.name: getattr(p, f.name) for f in fields(p) if f.name != "precision"})
    raw = program_cdp(hw, layer).run(Dla(hw))
    return unpack_feature(raw, *q.shape, hw.atom_elements())


def lrn_inputs(rng: np.random.Generator, c: int = 20, h: int = 4, w: int = 8) -> np.ndarray:
    """Full-range uniform rows, rows of small values, rows of extremes and sparse rows with big spikes."""
    q = rng.integers(-128, 128, (c, h, w))
    q[:, 1] = rng.integers(-6, 7, (c, w))
    q[:, 2] = rng.choice([-128, -127, 0, 127], (c, w))
    q[:, 3] = np.where(rng.random((c, w)) < 0.2, rng.integers(-128, 128, (c, w)), rng.integers(-2, 3, (c, w)))
    return q


def lrn_case(size, alpha, beta, bias, x_range, factor):
    in_scale = x_range / 127
    return size, alpha, beta, bias, in_scale, lrn_out_scale(size, alpha, beta, bias, in_scale, factor)


def strength(size, alpha, beta, bias, in_scale, out_scale) -> float:
    """alpha * (128 * in_scale)^2 / bias: how far the normalizer varies (~1 + this, to the power beta)."""
    return alpha * (128 * in_scale) ** 2 / bias


def _seeded_lrn_grid(n: int) -> list[tuple]:
    rng = np.random.default_rng(2024)
    cases = []
    while len(cases) < n:
        size = int(rng.choice([3, 5, 7, 9]))
        alpha = float(10 ** rng.uniform(-4, 0))
        beta = float(rng.uniform(0.5, 1.0))
        bias = float(rng.choice([0.5, 1.0, 2.0]))
        x_range = float(10 ** rng.uniform(-0.5, math.log10(255)))
        case = lrn_case(size, alpha, beta, bias, x_range, float(rng.choice([0.5, 1.0, 2.0])))
        if strength(*case) <= 500:
            cases.append(case)
    return cases


LRN_CASES = [
    lrn_case(5, 1e-4, 0.75, 2.0, 200.0, 1.0),  # AlexNet (k=2) on large activations
    lrn_case(5, 1e-4, 0.75, 1.0, 20.0, 1.0),  # GoogLeNet
    lrn_case(3, 1e-2, 0.75, 1.0, 64.0, 0.5),
    lrn_case(7, 0.1, 0.5, 2.0, 32.0, 1.0),
    lrn_case(9, 1.0, 1.0, 1.0, 8.0, 1.0),
    lrn_case(5, 1.0, 0.75, 1.0, 16.0, 1.0),  # normalizer varies ~64x over the input range
    lrn_case(9, 0.5, 0.75, 2.0, 24.0, 2.0),
    *_seeded_lrn_grid(12),
]


@pytest.mark.parametrize("case", LRN_CASES, ids=lambda c: "s{}-a{:.2g}-b{:.2g}-k{:g}-in{:.3g}".format(*c[:5]))
def test_lrn_golden_within_one_lsb(case):
    design = design_lrn(*case)
    assert design.max_error < 1  # so every result is within 1 LSB of the ideal
    rng = np.random.default_rng(zlib.crc32(repr(case).encode()))
    q = lrn_inputs(rng)
    err = np.abs(run_cdp("nv_small", q, design.params) - lrn_ideal(q, *case))
    assert err.max() <= 1
    assert err.mean() < 0.02


@pytest.mark.parametrize("hw_name", LUT_CONFIGS + ["nv_small"])
def test_lrn_every_config(hw_name):
    case = lrn_case(5, 1e-4, 0.75, 2.0, 100.0, 1.0)
    q = lrn_inputs(np.random.default_rng(7), c=40)
    assert np.abs(run_cdp(hw_name, q, lrn_params(*case)) - lrn_ideal(q, *case)).max() <= 1


def golden_lut(p: CdpParams) -> tuple[gcdp.Lut, np.ndarray, np.ndarray]:
    lut = p.lut

    def table(t: str, select: int) -> gcdp.Table:
        g = lambda name: getattr(lut, f"{t}_{name}")  # noqa: E731
        return gcdp.Table(g("start"), g("end"), select, g("slope_uflow_scale"), g("slope_uflow_shift"),
                          g("slope_oflow_scale"), g("slope_oflow_shift"))

    glut = gcdp.Lut(
        le_function=gcdp.EXPONENT if lut.le_function == "exp" else gcdp.LINEAR,
        uflow_priority=lut.uflow_priority, oflow_priority=lut.oflow_priority,
        hybrid_priority=lut.hybrid_priority, le_index_offset=lut.le_index_offset,
        le=table("le", lut.le_index_select), lo=table("lo", lut.lo_index_select),
    )
    return glut, np.array(lut.le_table, dtype=np.int64), np.array(lut.lo_table, dtype=np.int64)


def lrn_every_input(case) -> tuple[float, np.ndarray]:
    """The golden CDP's LUT, multiply and output CVT for every reachable (square sum, centre) pair:
    S = 4 * (q_c^2 + rest) with rest up to (size-1) * 128^2. Returns (predicted bound, |errors|)."""
    size, alpha, beta, bias, in_scale, out_scale = case
    design = design_lrn(*case)
    p = design.params
    g = LRN_INPUT_GAIN
    glut, le, lo = golden_lut(p)
    s = np.arange(0, size * (128 * g) ** 2 + 1, g * g, dtype=np.int64)
    if glut.le_function == gcdp.EXPONENT:
        le_val, le_kind = gcdp.lookup_exponent(s, le, glut.le, glut.le_index_offset)
    else:
        le_val, le_kind = gcdp.lookup_linear(s, le, glut.le)
    lo_val, lo_kind = gcdp.lookup_linear(s, lo, glut.lo)
    r, _ = gcdp.lut_select(glut, le_val, le_kind, lo_val, lo_kind)
    lrn = gcdp.Lrn(p.normalz_len, False, False, p.datin_offset, p.datin_scale, p.datin_shifter,
                   p.datout_offset, p.datout_scale, p.datout_shifter)
    errs = []
    for qc in range(-128, 128):
        m = (s >= g * g * qc * qc) & (s <= g * g * (qc * qc + (size - 1) * 128 * 128))
        out, _ = gcdp.output_cvt(r[m] * (g * qc), lrn)
        x = in_scale * qc
        ideal = to_int8(x * (bias + alpha / size * in_scale ** 2 * (s[m] / (g * g))) ** -beta / out_scale)
        errs.append(np.abs(out - ideal))
    return design.max_error, np.concatenate(errs)


@pytest.mark.parametrize("case", [
    lrn_case(9, 1e-4, 0.75, 2.0, 255.0, 1.0),
    lrn_case(5, 1.0, 0.75, 1.0, 16.0, 0.5),
    lrn_case(3, 1.0, 1.0, 1.0, 40.0, 1.0),
])
def test_lrn_bound_holds_for_every_input(case):
    bound, err = lrn_every_input(case)
    assert bound < 1 and err.max() <= 1


@pytest.mark.parametrize("case", [
    lrn_case(5, 1.0, 0.75, 1.0, 64.0, 1.0),  # strength ~4000: the LE table switches to exponent mode
    lrn_case(9, 1.0, 1.0, 1.0, 40.0, 0.5),
])
def test_lrn_strong_normalization_within_two_lsb(case):
    bound, err = lrn_every_input(case)
    assert 1 <= bound < 2
    assert err.max() <= 2
    assert np.mean(err > 1) < 1e-3
    assert np.mean(err) < 0.3
    with pytest.raises(ValueError, match="CPU"):
        lrn_params(*case, max_error=1.0)


def test_lrn_refuses_what_it_cannot_do():
    for size in (1, 2, 4, 11):
        with pytest.raises(ValueError, match="3, 5, 7 or 9"):
            lrn_params(size, 1e-4, 0.75, 1.0, 0.1, 0.01)
    with pytest.raises(ValueError):
        lrn_params(5, 1e-4, 0.75, 0.0, 0.1, 0.01)
    with pytest.raises(ValueError):
        lrn_params(5, 1e-4, 0.75, 1.0, -0.1, 0.01)
    extreme = lrn_case(5, 1.0, 0.5, 1.0, 255.0, 0.5)  # strength ~66000, saturating output scale
    assert design_lrn(*extreme).max_error >= 2
    with pytest.raises(ValueError, match="CPU"):
        lrn_params(*extreme)
    assert isinstance(lrn_params(*extreme, max_error=None), CdpParams)


def test_lrn_program_fields():
    p = lrn_params(*lrn_case(7, 1e-4, 0.75, 1.0, 10.0, 1.0))
    assert (p.normalz_len, p.datin_scale, p.datin_shifter, p.sqsum_bypass, p.mul_bypass) == (2, 2, 0, False, False)
    assert len(p.lut.le_table) == 65 and len(p.lut.lo_table) == 257
    assert all(-32768 <= v <= 32767 for v in p.lut.le_table + p.lut.lo_table)
    assert 0 < p.datout_scale <= 32767 and 0 <= p.datout_shifter <= 63


@pytest.mark.reference
@pytest.mark.parametrize("case", [LRN_CASES[0], LRN_CASES[5], lrn_case(5, 1.0, 0.75, 1.0, 64.0, 1.0)])
def test_lrn_reference_gives_golden_bytes(case):
    p = design_lrn(*case).params
    q = lrn_inputs(np.random.default_rng(3), c=12, h=4, w=3)
    kw = {f.name: getattr(p, f.name) for f in fields(p) if f.name != "lut"}
    expected = rcdp.lrn(q, lut=p.lut, **kw)
    np.testing.assert_array_equal(run_cdp("nv_small", q, p), expected)


# ---- sigmoid / tanh on SDP ---------------------------------------------------------------------------------
FUNCS = {"sigmoid": lambda x: 0.5 * (1 + np.tanh(0.5 * x)), "tanh": np.tanh}


def sdp_lut_model(fn: str, in_scale: float, out_scale: float, v: np.ndarray) -> np.ndarray:
    """The golden SDP LUT and output CVT (engine functions) applied to int32 values v."""
    y, lut, off, scale, shift = sdp_activation(fn, in_scale, out_scale)
    assert not y.bypass and not y.lut_bypass and y.alu_bypass and y.mul_bypass
    cfg = replace(lut, le_function=0 if lut.le_function == "exp" else 1)  # golden reads the register value
    out, _ = lut_lookup(v, cfg, np.array(lut.le_table), np.array(lut.lo_table))
    q, _ = sdp_output_cvt(out, OutCvt(offset=off, scale=scale, shift=shift))
    return q


def assert_activation_close(q: np.ndarray, fn: str, v: np.ndarray, in_scale: float, out_scale: float) -> None:
    """Every result within 1 LSB, and an off-by-one only where the exact value is within 0.1 LSB of a
    rounding boundary (so it comes from the LUT's small interpolation/rounding error, not a bad range)."""
    t = FUNCS[fn](in_scale * v.astype(np.float64)) / out_scale
    err = np.abs(q - to_int8(t))
    assert err.max() <= 1
    off = np.abs(t[err == 1])
    assert np.all(np.abs(off - np.floor(off) - 0.5) < 0.1), t[err == 1][:5]


def activation_inputs(rng: np.random.Generator, in_scale: float, n: int) -> np.ndarray:
    """int32 values: dense over |x| <= 12, uniform over all of int32, and the ends."""
    dense = np.clip(np.round(rng.uniform(-12, 12, n) / in_scale), INT32_MIN, INT32_MAX).astype(np.int64)
    wide = rng.integers(INT32_MIN, INT32_MAX, n, endpoint=True)
    ends = np.array([INT32_MIN, INT32_MIN + 1, -1, 0, 1, INT32_MAX - 1, INT32_MAX], dtype=np.int64)
    return np.concatenate([dense, wide, ends])


@settings(max_examples=60, deadline=None)
@given(fn=st.sampled_from(sorted(FUNCS)), log_in=st.floats(-9.5, 1.5), log_out=st.floats(-3, 0.5),
       seed=st.integers(0, 2**32 - 1))
def test_activation_within_one_lsb_over_int32(fn, log_in, log_out, seed):
    in_scale, out_scale = 10.0 ** log_in, 10.0 ** log_out
    v = activation_inputs(np.random.default_rng(seed), in_scale, 4000)
    assert_activation_close(sdp_lut_model(fn, in_scale, out_scale, v), fn, v, in_scale, out_scale)


def sdp_layer(q: np.ndarray, operand: np.ndarray, shift: int, fn: str, in_scale: float, out_scale: float):
    """X1 builds v = sat32(q + sat32(operand << shift)) from int8 q and an int16 per-element operand, so
    the Y stage sees values across int32; Y and the CVT come from ``sdp_activation``."""
    y, lut, off, scale, cvt_shift = sdp_activation(fn, in_scale, out_scale)
    x1 = XStage(bypass=False, alu_bypass=False, alu_algo=ALU_SUM, alu_operand=operand, alu_shift=shift)
    params = SdpParams(x1=x1, y=y, lut=lut, cvt_offset=off, cvt_scale=scale, cvt_shift=cvt_shift)
    v = np.clip(q + np.clip(operand.astype(np.int64) << shift, INT32_MIN, INT32_MAX), INT32_MIN, INT32_MAX)
    return SdpLayer(x=q, params=params), v


def run_sdp(hw_name: str, layer: SdpLayer) -> np.ndarray:
    hw = get_config(hw_name)
    raw = program_sdp(hw, layer).run(Dla(hw))
    return unpack_feature(raw, *layer.x.shape, hw.atom_elements())


ACT_SCALES = [(1e-6, 1 / 127), (2e-4, 1 / 255), (1e-3, 1 / 64), (0.03, 1 / 127), (0.5, 1 / 100), (3e-9, 0.02)]


@pytest.mark.parametrize("hw_name", LUT_CONFIGS)
@pytest.mark.parametrize("fn", ["sigmoid", "tanh"])
def test_activation_golden(hw_name, fn):
    rng = np.random.default_rng(11)
    shape = (24, 4, 8)
    for in_scale, out_scale in ACT_SCALES:
        # One layer over the active interval (|x| up to ~12), one over the whole int32 range.
        active = max(0, math.ceil(math.log2(12 / in_scale / 32768)))
        for shift in (active, 16):
            q = rng.integers(-128, 128, shape)
            operand = rng.integers(-32768, 32768, shape)
            operand.flat[:4] = [-32768, 32767, 0, -1]
            layer, v = sdp_layer(q, operand, shift, fn, in_scale, out_scale)
            assert_activation_close(run_sdp(hw_name, layer), fn, v, in_scale, out_scale)


def test_activation_needs_the_sdp_lut():
    assert set(LUT_CONFIGS) >= {"nv_small_256_full", "nv_large", "nv_full"}
    q = np.zeros((8, 1, 2), dtype=np.int64)
    layer, _ = sdp_layer(q, q, 0, "tanh", 0.01, 1 / 127)
    with pytest.raises(UnsupportedError):
        run_sdp("nv_small", layer)


def test_activation_rejects_unknown():
    with pytest.raises(ValueError):
        sdp_activation("relu", 0.1, 0.1)
    with pytest.raises(ValueError):
        sdp_activation("tanh", 0.0, 0.1)
    y, lut, off, scale, shift = sdp_activation("sigmoid", 1e-4, 1 / 127)
    assert isinstance(y, YStage) and isinstance(lut, LutRegisters)
    assert off == 0 and 0 < scale <= 32767 and 0 <= shift <= 63
    assert all(-32768 <= v <= 32767 for v in lut.lo_table)


def ref_sdp_params(p: SdpParams) -> rsdp.SdpParams:
    def conv(obj, cls, **override):
        return cls(**{**{f.name: getattr(obj, f.name) for f in fields(obj)}, **override})

    y = conv(p.y, rsdp.SdpYParams, alu_cvt=conv(p.y.alu_cvt, rsdp.SdpOperandCvt),
             mul_cvt=conv(p.y.mul_cvt, rsdp.SdpOperandCvt))
    return rsdp.SdpParams(x1=conv(p.x1, rsdp.SdpXParams), x2=conv(p.x2, rsdp.SdpXParams), y=y,
                          lut=p.lut, cvt_offset=p.cvt_offset, cvt_scale=p.cvt_scale,
                          cvt_shift=p.cvt_shift)


@pytest.mark.reference
@pytest.mark.parametrize("fn", ["sigmoid", "tanh"])
@pytest.mark.parametrize("in_scale,out_scale,shift", [(1e-4, 1 / 127, 2), (3e-9, 0.02, 16), (0.05, 1 / 255, 0)])
def test_activation_reference_gives_golden_bytes(fn, in_scale, out_scale, shift):
    rng = np.random.default_rng(5)
    q = rng.integers(-128, 128, (10, 3, 4))
    operand = rng.integers(-32768, 32768, q.shape)
    layer, _ = sdp_layer(q, operand, shift, fn, in_scale, out_scale)
    np.testing.assert_array_equal(run_sdp("nv_large", layer), rsdp.sdp(q, ref_sdp_params(layer.params)))
