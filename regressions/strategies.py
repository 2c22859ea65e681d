"""hypothesis strategies for single-layer register programs (``regressions.programs``), shared by the
reference-math tests and the golden-vs-RTL differential tests. Each draws a legal layer for every preset's
atom size; the cube contents come from a drawn seed, so examples stay small to print and to shrink."""
from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

from regressions import programs
from regressions.reference import cdp as ref_cdp
from regressions.reference import sdp as ref_sdp


def cube(draw, max_c=40, max_hw=10):
    c = draw(st.integers(1, max_c))
    h = draw(st.integers(1, max_hw))
    w = draw(st.integers(1, max_hw))
    seed = draw(st.integers(0, 2**32 - 1))
    return np.random.default_rng(seed).integers(-128, 128, (c, h, w))


@st.composite
def pool_layers(draw):
    x = cube(draw, max_hw=12)
    _, h, w = x.shape
    kh, kw = draw(st.integers(1, 8)), draw(st.integers(1, 8))
    pt, pb = draw(st.integers(0, min(kh - 1, 7))), draw(st.integers(0, min(kh - 1, 7)))
    pl, pr = draw(st.integers(0, min(kw - 1, 7))), draw(st.integers(0, min(kw - 1, 7)))
    if h + pt + pb < kh or w + pl + pr < kw:
        kh, kw, pt, pb, pl, pr = 1, 1, 0, 0, 0, 0
    sh, sw = draw(st.integers(1, 8)), draw(st.integers(1, 8))
    method = draw(st.sampled_from(["max", "min", "avg"]))
    pad_value = draw(st.integers(-128, 127))
    pad_values = [(n * pad_value) & 0x7FFFF for n in range(1, 8)]
    return programs.PoolLayer(x, method, (kh, kw), (sh, sw), (pt, pl, pb, pr), pad_values)


@st.composite
def lrn_layers(draw):
    x = cube(draw, max_c=48, max_hw=6)
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    le_exp = draw(st.booleans())
    lut = ref_cdp.CdpLut(
        le_table=tuple(int(v) for v in rng.integers(-32768, 32768, 65)),
        lo_table=tuple(int(v) for v in rng.integers(-32768, 32768, 257)),
        le_function="exp" if le_exp else "linear",
        le_start=draw(st.integers(0, 64)) if le_exp else draw(st.integers(-64, 64)),
        le_end=draw(st.integers(1 << 10, 1 << 20)),
        lo_start=draw(st.integers(-64, 256)),
        lo_end=draw(st.integers(1 << 10, 1 << 20)),
        le_index_offset=draw(st.integers(-4, 8)),
        le_index_select=draw(st.integers(0, 12)),
        lo_index_select=draw(st.integers(0, 12)),
        uflow_priority=draw(st.integers(0, 1)),
        oflow_priority=draw(st.integers(0, 1)),
        hybrid_priority=draw(st.integers(0, 1)),
        le_slope_uflow_scale=draw(st.integers(-32768, 32767)),
        le_slope_uflow_shift=draw(st.integers(-16, 15)),
        le_slope_oflow_scale=draw(st.integers(-32768, 32767)),
        le_slope_oflow_shift=draw(st.integers(-16, 15)),
        lo_slope_uflow_scale=draw(st.integers(-32768, 32767)),
        lo_slope_uflow_shift=draw(st.integers(-16, 15)),
        lo_slope_oflow_scale=draw(st.integers(-32768, 32767)),
        lo_slope_oflow_shift=draw(st.integers(-16, 15)),
    )
    return programs.LrnLayer(
        x, lut,
        datin_offset=draw(st.integers(-128, 127)),
        datin_scale=draw(st.integers(-32768, 32767)),
        datin_shifter=draw(st.integers(0, 31)),
        normalz_len=draw(st.integers(0, 3)),
        sqsum_bypass=draw(st.booleans()),
        mul_bypass=draw(st.booleans()),
        datout_offset=draw(st.integers(-(1 << 20), 1 << 20)),
        datout_scale=draw(st.integers(-32768, 32767)),
        datout_shifter=draw(st.integers(0, 63)),
    )


def operand(draw, rng, shape, bits):
    kind = draw(st.sampled_from(["reg", "kernel", "element"]))
    lo, hi = -(1 << (bits - 1)), 1 << (bits - 1)
    if kind == "reg":
        return draw(st.integers(lo, hi - 1))
    if kind == "kernel":
        return rng.integers(lo, hi, shape[0])
    return rng.integers(lo, hi, shape)


@st.composite
def x_stage(draw, rng, shape, mem_kind):
    """One X stage; both MEM operands of a stage share one DMA stream, so they share a mode."""
    bypass = draw(st.booleans())
    alu_bypass, mul_bypass = draw(st.booleans()), draw(st.booleans())
    alu_op = operand(draw, rng, shape, mem_kind)
    mul_op = operand(draw, rng, shape, mem_kind)
    if np.ndim(alu_op) and np.ndim(mul_op) and np.ndim(alu_op) != np.ndim(mul_op):
        mul_op = rng.integers(-(1 << (mem_kind - 1)), 1 << (mem_kind - 1), np.shape(alu_op))
    return ref_sdp.SdpXParams(
        bypass=bypass, alu_bypass=alu_bypass, alu_algo=draw(st.integers(0, 3)), alu_operand=alu_op,
        alu_shift=draw(st.integers(0, 20)), mul_bypass=mul_bypass, mul_prelu=draw(st.booleans()),
        mul_operand=mul_op, mul_shift=draw(st.integers(0, 40)), relu_bypass=draw(st.booleans()),
    )


@st.composite
def sdp_layers(draw):
    x = cube(draw, max_c=40, max_hw=6)
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    size = draw(st.sampled_from([1, 2]))
    params = ref_sdp.SdpParams(
        x1=draw(x_stage(rng, x.shape, 8 * size)),
        x2=draw(x_stage(rng, x.shape, 8 * size)),
        cvt_offset=draw(st.integers(-(1 << 20), 1 << 20)),
        cvt_scale=draw(st.integers(-32768, 32767)),
        cvt_shift=draw(st.integers(0, 40)),
    )
    return programs.SdpLayer(x, params, operand_bytes=size)


@st.composite
def conv_layers(draw):
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    c, h, w = draw(st.integers(1, 40)), draw(st.integers(1, 9)), draw(st.integers(1, 9))
    k, r, s = draw(st.integers(1, 40)), draw(st.integers(1, 4)), draw(st.integers(1, 4))
    dy, dx = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    pt, pl = draw(st.integers(0, 3)), draw(st.integers(0, 3))
    sy, sx = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    eff_r, eff_s = (r - 1) * dy + 1, (s - 1) * dx + 1
    oh = (h + 2 * pt - eff_r) // sy + 1
    ow = (w + 2 * pl - eff_s) // sx + 1
    if oh < 1 or ow < 1:
        dy = dx = 1
        r, s, pt, pl = 1, 1, 0, 0
        oh, ow = (h - 1) // sy + 1, (w - 1) // sx + 1
    cvt = None
    if draw(st.booleans()):
        cvt = (draw(st.integers(-128, 127)), draw(st.integers(-1024, 1024)), draw(st.integers(0, 12)))
    return programs.ConvLayer(
        x=rng.integers(-128, 128, (c, h, w)), w=rng.integers(-128, 128, (k, c, r, s)),
        stride=(sy, sx), dilation=(dy, dx), pad=(pt, pl), pad_value=draw(st.integers(-128, 127)),
        out_hw=(oh, ow), clip_truncate=draw(st.integers(0, 16)), cvt=cvt,
        out_cvt=(draw(st.integers(-1000, 1000)), draw(st.integers(1, 64)), draw(st.integers(0, 12))),
    )


def operand_cvt(draw):
    return ref_sdp.SdpOperandCvt(
        bypass=draw(st.booleans()), offset=draw(st.integers(-(1 << 31), (1 << 31) - 1)),
        scale=draw(st.integers(-32768, 32767)), truncate=draw(st.integers(0, 63)),
    )


@st.composite
def sdp_y_layers(draw):
    x = cube(draw, max_c=40, max_hw=5)
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))

    def y_operand():
        kind = draw(st.sampled_from(["reg", "kernel", "element"]))
        if kind == "reg":
            return draw(st.integers(-(1 << 31), (1 << 31) - 1))
        return rng.integers(-32768, 32768, x.shape[0] if kind == "kernel" else x.shape)

    alu_op, mul_op = y_operand(), y_operand()
    if np.ndim(alu_op) and np.ndim(mul_op) and np.ndim(alu_op) != np.ndim(mul_op):
        mul_op = rng.integers(-32768, 32768, np.shape(alu_op))
    algo = draw(st.integers(0, 2))  # EQL (3) writes no output: checked separately
    y = ref_sdp.SdpYParams(
        bypass=False, alu_bypass=draw(st.booleans()), alu_algo=algo, alu_operand=alu_op,
        alu_cvt=operand_cvt(draw), mul_bypass=draw(st.booleans()), mul_prelu=draw(st.booleans()),
        mul_operand=mul_op, mul_cvt=operand_cvt(draw), truncate=draw(st.integers(0, 1023)),
        lut_bypass=draw(st.booleans()),
    )
    le_exp = draw(st.booleans())
    lut = ref_sdp.SdpLut(
        le_table=tuple(int(v) for v in rng.integers(-32768, 32768, 65)),
        lo_table=tuple(int(v) for v in rng.integers(-32768, 32768, 257)),
        le_function="exp" if le_exp else "linear",
        le_start=draw(st.integers(-(1 << 20), 1 << 20)), le_end=draw(st.integers(-(1 << 20), 1 << 24)),
        lo_start=draw(st.integers(-(1 << 20), 1 << 20)), lo_end=draw(st.integers(-(1 << 20), 1 << 24)),
        le_index_offset=draw(st.integers(-8, 24)), le_index_select=draw(st.integers(0, 24)),
        lo_index_select=draw(st.integers(0, 24)),
        uflow_priority=draw(st.integers(0, 1)), oflow_priority=draw(st.integers(0, 1)),
        hybrid_priority=draw(st.integers(0, 1)),
        **{f"{t}_slope_{k}_scale": draw(st.integers(-32768, 32767)) for t in ("le", "lo") for k in ("uflow", "oflow")},
        **{f"{t}_slope_{k}_shift": draw(st.integers(-16, 15)) for t in ("le", "lo") for k in ("uflow", "oflow")},
    )
    eql = not y.alu_bypass and algo == 3
    params = ref_sdp.SdpParams(
        x1=draw(x_stage(rng, x.shape, 16)), y=y, lut=lut,
        cvt_offset=0 if eql else draw(st.integers(-(1 << 20), 1 << 20)),
        cvt_scale=1 if eql else draw(st.integers(-32768, 32767)),
        cvt_shift=0 if eql else draw(st.integers(0, 40)),
    )
    return programs.SdpLayer(x, params, operand_bytes=2)
