"""Direct convolutions (CDMA -> CSC -> CMAC -> CACC -> SDP on the fly) with int8 features and weights.

Ranges from the register fields: strides (``CSC.D_CONV_STRIDE_EXT``), dilations (``D_DILATION_EXT``),
kernel sizes (``D_WEIGHT_SIZE_EXT_0``), top/left padding (``CSC.D_ZERO_PADDING``; bottom/right follow
from the output size, ``CDMA.D_ZERO_PADDING`` holds them), the CDMA input CVT, ``CLIP_TRUNCATE`` and the
SDP output CVT. Engine and config rules: channels and kernels not multiples of the MAC atoms (partial
channel and kernel groups), at least one tap of the dilated kernel inside the padded input, the whole
input in the CBUF data banks (``golden.engines.conv.data_banks_needed``; no partial-input mode for direct
conv) and the weights in the remaining banks, ``CLIP_TRUNCATE`` at most 16 (48-bit sums, 32-bit out).

``int16_conv_layers`` and ``fp16_conv_layers`` draw the 16-bit convolutions of nv_full
(``regressions.lib.programs.conv_wide.WideConvLayer``), small enough for the plain-loop references: fp16 cubes
come as bit patterns with exponents in a drawn range (how many alignment blocks a slice spans) plus, at
times, +-0, Inf and NaN; fp16 input may also be int16 that CDMA converts.
"""
from __future__ import annotations

import math

import numpy as np
from hypothesis import assume
from hypothesis import strategies as st

from compiler.codegen.conv import weight_fetch_bytes
from golden.config import HwConfig, PRESETS
from golden.engines.conv_datapath import data_banks_needed
from regressions.lib import programs
from regressions.lib.strategies import (
    SEED_BITS,
    atom_elements,
    count_range,
    field_ints,
    field_range,
    int8_cube,
    ints,
    magnitude_bits,
    reg_field,
    rescale_shift,
    signed_bits,
    values,
)

#: Multiply-accumulates the plain-loop reference does at most (K x OH x OW x C x R x S), about 50 ms.
WORK = 60_000
#: Largest input height/width (narrowed further by WORK and the CBUF).
MAX_SIDE = 32
#: CACC sums are 48-bit and deliver 32 bits: CLIP_TRUNCATE drops at most 16 (the cmod FAILs beyond).
MAX_CLIP_TRUNCATE = 48 - 32


def _cbufs(hw: HwConfig | None) -> list[HwConfig]:
    """The configs whose CBUF must hold the layer: every preset for ``hw=None``."""
    return [hw] if hw is not None else list(PRESETS.values())


def _groups(draw, unit: int) -> int:
    """Up to two whole groups of ``unit`` plus a partial one; exact multiples drawn too."""
    top = 2 * unit + 1
    return draw(st.one_of(st.integers(1, top), st.sampled_from([unit, 2 * unit])))


def _axis(draw, hw, axis: str, pad_before_reg: tuple[str, str, str], pad_after_reg: tuple[str, str, str]):
    """(dilation, pad before, pad after) of one axis ("X" or "Y")."""
    dilation = draw(field_ints(hw, "CSC", "D_DILATION_EXT", f"{axis}_DILATION_EXT", typical=(0, 2))) + 1
    before = draw(field_ints(hw, *pad_before_reg, typical=(0, 3)))
    after = draw(field_ints(hw, *pad_after_reg, typical=(0, 3)))
    return dilation, before, after


def _kernel_size(draw, hw, name: str, span: int, dilation: int, budget: int) -> int:
    """R or S: the dilated kernel fits ``span`` (input plus pads), within the work budget."""
    top = min(count_range(reg_field(hw, "CSC", "D_WEIGHT_SIZE_EXT_0", name))[1], (span - 1) // dilation + 1, budget)
    return draw(ints((1, max(1, top)), typical=(1, 4)))


@st.composite
def conv_layers(draw, hw: HwConfig | None = None) -> programs.ConvLayer:
    """A direct convolution legal on ``hw`` (on every preset when None)."""
    cbufs = _cbufs(hw)
    mac_c = hw.mac_atomic_c if hw is not None else max(c.mac_atomic_c for c in PRESETS.values())
    mac_k = hw.mac_atomic_k if hw is not None else max(c.mac_atomic_k for c in PRESETS.values())
    atom = atom_elements(hw)
    c = _groups(draw, max(mac_c, atom))
    dy, pt, pb = _axis(draw, hw, "Y", ("CSC", "D_ZERO_PADDING", "PAD_TOP"), ("CDMA", "D_ZERO_PADDING", "PAD_BOTTOM"))
    dx, pl, pr = _axis(draw, hw, "X", ("CSC", "D_ZERO_PADDING", "PAD_LEFT"), ("CDMA", "D_ZERO_PADDING", "PAD_RIGHT"))

    side = max(1, min(MAX_SIDE, math.isqrt(WORK // c)))
    w = draw(st.integers(1, side))
    # Input rows that fit all but one CBUF bank (one is left for the weights).
    rows = 1
    while rows < side and all(data_banks_needed(b, c, rows + 1, w) <= b.cbuf_bank_number - 1 for b in cbufs):
        rows += 1
    h = draw(st.integers(1, rows))
    span_y, span_x = h + pt + pb, w + pl + pr
    rs_budget = max(1, WORK // (c * span_y * span_x))
    r = _kernel_size(draw, hw, "WEIGHT_HEIGHT_EXT", span_y, dy, rs_budget)
    s = _kernel_size(draw, hw, "WEIGHT_WIDTH_EXT", span_x, dx, max(1, rs_budget // r))
    sy = draw(field_ints(hw, "CSC", "D_CONV_STRIDE_EXT", "CONV_Y_STRIDE_EXT", typical=(0, 2))) + 1
    sx = draw(field_ints(hw, "CSC", "D_CONV_STRIDE_EXT", "CONV_X_STRIDE_EXT", typical=(0, 2))) + 1
    oh = (span_y - ((r - 1) * dy + 1)) // sy + 1
    ow = (span_x - ((s - 1) * dx + 1)) // sx + 1

    # Kernels: partial groups of atomic K; the weights must fit the banks the data leaves free.
    free = min((b.cbuf_bank_number - data_banks_needed(b, c, h, w)) * b.cbuf_bank_depth * b.cbuf_bank_width
               for b in cbufs)
    k_fit = next((k for k in range(2 * max(mac_k, atom) + 1, 0, -1) if all(weight_fetch_bytes(b, k, c, r, s) <= free for b in cbufs)), 0)
    assume(k_fit >= 1)
    k_top = max(1, min(k_fit, WORK // (oh * ow * c * r * s)))
    k = draw(st.one_of(st.integers(1, k_top), st.just(min(mac_k, k_top))))

    x = int8_cube(draw, c, h, w)
    weights = values(draw, (k, c, r, s), signed_bits(8))
    cvt = None
    if draw(st.booleans()):
        scale = draw(field_ints(hw, "CDMA", "D_CVT_SCALE", "CVT_SCALE", signed=True, typical=(-1024, 1024)))
        cvt = (
            draw(field_ints(hw, "CDMA", "D_CVT_OFFSET", "CVT_OFFSET", signed=True, typical=(-128, 127))),
            scale,
            rescale_shift(draw, field_range(hw, "CDMA", "D_CVT_CFG", "CVT_TRUNCATE"), 9, scale),
        )
    # Sums of C*R*S products of random signs grow like their square root.
    acc_bits = 8 + magnitude_bits(weights) + (c * r * s).bit_length() // 2 + 1
    clip = draw(field_ints(hw, "CACC", "D_CLIP_CFG", "CLIP_TRUNCATE", hi=MAX_CLIP_TRUNCATE))
    bits = max(1, acc_bits - clip)
    near = 1 << max(0, bits - 2)
    scale = draw(field_ints(hw, "SDP", "D_CVT_SCALE", "CVT_SCALE", signed=True, typical=(-1024, 1024)))
    out_cvt = (
        draw(field_ints(hw, "SDP", "D_CVT_OFFSET", "CVT_OFFSET", signed=True, typical=(-near, near))),
        scale,
        rescale_shift(draw, field_range(hw, "SDP", "D_CVT_SHIFT", "CVT_SHIFT"), bits + 1, scale),
    )
    return programs.ConvLayer(
        x=x, w=weights, stride=(sy, sx), dilation=(dy, dx), pad=(pt, pl),
        # The CSC injects the raw low byte of D_ZERO_PADDING_VALUE: an int8.
        pad_value=draw(st.integers(*signed_bits(8))),
        out_hw=(oh, ow), clip_truncate=clip, cvt=cvt, out_cvt=out_cvt,
    )


# ---- 16-bit direct convolution (int16, fp16; nv_full) -------------------------------------------------------
#: Lane-products the plain-loop fp16 reference computes at most (K x OH x OW x 64-lane slices x 64 x R x S);
#: it multiplies through the cmod's Booth tree in Python, about 15 us each.
WIDE_WORK = 12_000
#: fp16 channels per CMAC slice (nv_full MAC atomic C).
WIDE_SLICE = 64
#: fp16 patterns of the specials the CMAC treats apart: +-0 (masked), +-Inf (an ordinary exponent), NaN.
FP16_SPECIALS = (0x0000, 0x8000, 0x7C00, 0xFC00, 0x7E00, 0xFC01, 0x7C3F)


def fp16_cube(draw, shape: tuple[int, ...]) -> np.ndarray:
    """fp16 bit patterns of ``shape``: signs and mantissas from a drawn seed, exponent fields in a drawn range
    (so products fall in a few or many alignment blocks), and sometimes a sprinkle of specials: +-0 only,
    +-0 and Inf, or those and NaN (a NaN weight makes its kernel's slice NaN, so it is the rarest).
    Shrinks to denormal-range values without specials."""
    e_lo = draw(st.integers(0, 30))
    e_hi = draw(st.integers(e_lo, min(30, e_lo + draw(st.sampled_from([0, 2, 4, 8, 30])))))
    specials = draw(st.sampled_from([0, 0, 1, 2, 4, 7]))  # how many of FP16_SPECIALS may appear
    seed = draw(st.integers(0, (1 << SEED_BITS) - 1))
    rng = np.random.default_rng(seed)
    sign, expo = rng.integers(0, 2, shape), rng.integers(e_lo, e_hi + 1, shape)
    bits = (sign << 15) | (expo << 10) | rng.integers(0, 1024, shape)
    if specials:
        pick = rng.random(shape) < 0.06
        bits = np.where(pick, rng.choice(np.array(FP16_SPECIALS[:specials], dtype=np.int64), shape), bits)
    return bits.astype(np.int64)


def _wide_geometry(draw, hw: HwConfig, lane_cost: int) -> dict:
    """Shape, stride, dilation and padding of a 16-bit conv within ``WIDE_WORK`` lane-products."""
    c = draw(st.one_of(st.integers(1, 2 * WIDE_SLICE + 1), st.sampled_from([16, WIDE_SLICE, 2 * WIDE_SLICE])))
    lanes = -(-c // WIDE_SLICE) * WIDE_SLICE if lane_cost else c
    dy, pt, pb = _axis(draw, hw, "Y", ("CSC", "D_ZERO_PADDING", "PAD_TOP"), ("CDMA", "D_ZERO_PADDING", "PAD_BOTTOM"))
    dx, pl, pr = _axis(draw, hw, "X", ("CSC", "D_ZERO_PADDING", "PAD_LEFT"), ("CDMA", "D_ZERO_PADDING", "PAD_RIGHT"))
    budget = max(1, WIDE_WORK // lanes)
    side = max(1, min(8, math.isqrt(budget)))
    h, w = draw(st.integers(1, side)), draw(st.integers(1, side))
    span_y, span_x = h + pt + pb, w + pl + pr
    r = _kernel_size(draw, hw, "WEIGHT_HEIGHT_EXT", span_y, dy, max(1, min(3, budget // (span_y * span_x))))
    s = _kernel_size(draw, hw, "WEIGHT_WIDTH_EXT", span_x, dx, max(1, min(3, budget // (span_y * span_x * r))))
    sy = draw(field_ints(hw, "CSC", "D_CONV_STRIDE_EXT", "CONV_Y_STRIDE_EXT", typical=(0, 2))) + 1
    sx = draw(field_ints(hw, "CSC", "D_CONV_STRIDE_EXT", "CONV_X_STRIDE_EXT", typical=(0, 2))) + 1
    oh = (span_y - ((r - 1) * dy + 1)) // sy + 1
    ow = (span_x - ((s - 1) * dx + 1)) // sx + 1
    k_top = max(1, min(2 * hw.mac_atomic_k_for("fp16") + 1, budget // max(1, oh * ow * r * s)))
    k = draw(st.one_of(st.integers(1, k_top), st.just(min(hw.mac_atomic_k_for("fp16"), k_top)), st.just(k_top)))
    return dict(c=c, h=h, w=w, k=k, r=r, s=s, stride=(sy, sx), dilation=(dy, dx), pad=(pt, pl), out_hw=(oh, ow))


@st.composite
def fp16_conv_layers(draw, hw: HwConfig):
    """An fp16 direct convolution on nv_full: fp16 input (NaN flush sometimes on), or int16 input that CDMA
    converts into fp16 (CVT_EN, ``Int17ToFp16``); any fp16 pad word; FP32 out of CACC, fp16 out of SDP."""
    from regressions.lib.programs.conv_wide import WideConvLayer

    g = _wide_geometry(draw, hw, lane_cost=1)
    weights = fp16_cube(draw, (g["k"], g["c"], g["r"], g["s"]))
    converted = draw(st.integers(0, 3)) == 0
    cvt = None
    if converted:
        x = values(draw, (g["c"], g["h"], g["w"]), signed_bits(16))
        scale = draw(field_ints(hw, "CDMA", "D_CVT_SCALE", "CVT_SCALE", signed=True, typical=(-64, 64)))
        cvt = (draw(field_ints(hw, "CDMA", "D_CVT_OFFSET", "CVT_OFFSET", signed=True, typical=(-256, 256))), scale,
               rescale_shift(draw, field_range(hw, "CDMA", "D_CVT_CFG", "CVT_TRUNCATE"), 16, scale, out_bits=12))
    else:
        x = fp16_cube(draw, (g["c"], g["h"], g["w"]))
    pad_value = int(draw(st.one_of(st.just(0), st.integers(0, 0xFFFF), st.sampled_from(FP16_SPECIALS))))
    return WideConvLayer(
        x=x, w=weights, precision="fp16", in_precision="int16" if converted else None,
        stride=g["stride"], dilation=g["dilation"], pad=g["pad"], pad_value=pad_value, out_hw=g["out_hw"],
        cvt=cvt, nan_to_zero=not converted and draw(st.booleans()),
    )


@st.composite
def int16_conv_layers(draw, hw: HwConfig):
    """An int16 direct convolution on nv_full (optional CDMA CVT, CLIP_TRUNCATE, int16 SDP output CVT)."""
    from regressions.lib.programs.conv_wide import WideConvLayer

    g = _wide_geometry(draw, hw, lane_cost=0)
    weights = values(draw, (g["k"], g["c"], g["r"], g["s"]), signed_bits(16))
    x = values(draw, (g["c"], g["h"], g["w"]), signed_bits(16))
    cvt = None
    if draw(st.booleans()):
        scale = draw(field_ints(hw, "CDMA", "D_CVT_SCALE", "CVT_SCALE", signed=True, typical=(-1024, 1024)))
        cvt = (draw(field_ints(hw, "CDMA", "D_CVT_OFFSET", "CVT_OFFSET", signed=True, typical=(-4096, 4096))), scale,
               rescale_shift(draw, field_range(hw, "CDMA", "D_CVT_CFG", "CVT_TRUNCATE"), 17, scale, out_bits=16))
    acc_bits = 16 + magnitude_bits(weights) + (g["c"] * g["r"] * g["s"]).bit_length() // 2 + 1
    clip = draw(field_ints(hw, "CACC", "D_CLIP_CFG", "CLIP_TRUNCATE", hi=MAX_CLIP_TRUNCATE))
    bits = max(1, acc_bits - clip)
    near = 1 << max(0, bits - 2)
    scale = draw(field_ints(hw, "SDP", "D_CVT_SCALE", "CVT_SCALE", signed=True, typical=(-1024, 1024)))
    out_cvt = (
        draw(field_ints(hw, "SDP", "D_CVT_OFFSET", "CVT_OFFSET", signed=True, typical=(-near, near))),
        scale,
        rescale_shift(draw, field_range(hw, "SDP", "D_CVT_SHIFT", "CVT_SHIFT"), bits + 1, scale, out_bits=16),
    )
    return WideConvLayer(
        x=x, w=weights, precision="int16", stride=g["stride"], dilation=g["dilation"], pad=g["pad"],
        pad_value=draw(st.integers(0, 0xFFFF)), out_hw=g["out_hw"], clip_truncate=clip, cvt=cvt, out_cvt=out_cvt,
    )
