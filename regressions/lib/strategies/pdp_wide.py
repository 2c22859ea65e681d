"""int16 and fp16 PDP pooling layers (nv_full): the int8 strategy's geometry (kernels, strides, pads, width
splits; ``strategies.pdp``) with 16-bit data, pad values and reciprocals.

- int16: values anywhere in int16 or a drawn sub-range; PAD_VALUE_nX usually n times one int16 value
  (what a compiler writes for zero-point padding), else any raw 19-bit field; reciprocals near 1/kernel
  in 0.16 fixed point or any 17-bit value.
- fp16: cubes of fp16 patterns (``fp16_cube``: ordinary values, or with NaN/Inf/denormal/signed-zero
  lanes mixed in, or raw 16-bit patterns); pad values 0 (the firmware's rule), FP17 patterns of n·v, or raw
  19-bit fields; reciprocals the firmware's FP17 1/kernel or any 17-bit pattern; NAN_FLUSH_TO_ZERO either.

Average pooling, the longest datapath (sums, pads, reciprocals), is drawn half the time.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from hypothesis import strategies as st

from compiler.codegen.wide import RECIP_FP17, RECIP_INT
from golden.config import HwConfig
from regressions.lib.programs.wide import WidePoolLayer
from regressions.lib.strategies import SEED_BITS, channels, field_ints, reg_field, signed_bits, unsigned_range, values
from regressions.lib.strategies.pdp import METHODS, PdpSplit, _kernel, _side, _split

#: Taps times padded channels the reference visits at most: int16 is plain integer loops (like int8), the
#: fp16 reference does exact-fraction float operations (~30 µs each), so its budget is much smaller.
WORK = {"int16": 20_000, "fp16": 1_500}
MAX_SIDE = 8
#: fp16 patterns mixed into "special" cubes: +-0, +-Inf, NaNs, the largest finite, denormals.
SPECIAL_FP16 = (0x0000, 0x8000, 0x7C00, 0xFC00, 0x7E00, 0xFD01, 0x7BFF, 0xFBFF, 0x0001, 0x83FF, 0x0400)


@dataclass
class WidePdpExample:
    """A 16-bit pooling layer, optionally run in split-width mode."""

    layer: WidePoolLayer
    split: PdpSplit | None = None


def fp16_cube(draw, shape: tuple[int, ...]) -> np.ndarray:
    """fp16 bit patterns (int64): normal-ish values of a drawn scale, sometimes with special lanes, or
    raw random patterns. Shrinks to all +0."""
    kind = draw(st.sampled_from(("zeros", "values", "special", "raw")))
    seed = draw(st.integers(0, (1 << SEED_BITS) - 1))
    rng = np.random.default_rng(seed)
    if kind == "zeros":
        return np.zeros(shape, dtype=np.int64)
    if kind == "raw":
        return rng.integers(0, 1 << 16, shape, dtype=np.int64)
    scale = 2.0 ** draw(st.integers(-16, 15))
    with np.errstate(over="ignore"):  # large scales overflow to Inf on purpose
        bits = (rng.standard_normal(shape) * scale).astype(np.float16).view(np.uint16).astype(np.int64)
    if kind == "special":
        mask = rng.random(shape) < 0.25
        bits = np.where(mask, rng.choice(np.array(SPECIAL_FP16, dtype=np.int64), shape), bits)
    return bits


def fp17_bits(value: float) -> int:
    """FP17 pattern (1/6/10, bias 31) of a float that fp16 represents exactly, written directly from
    its fp16 fields (the strategy's own conversion, independent of the models)."""
    half = int(np.float16(value).view(np.uint16))
    sign, expo, mant = half >> 15, (half >> 10) & 0x1F, half & 0x3FF
    if expo == 0 and mant == 0:
        return sign << 16
    if expo == 0:  # denormal: normalize
        shift = 11 - mant.bit_length()
        return (sign << 16) | ((17 - shift) << 10) | ((mant << shift) & 0x3FF)
    return (sign << 16) | ((expo + 16) << 10) | mant


def _pad_values(draw, hw: HwConfig | None, dtype: str) -> list[int]:
    field = reg_field(hw, "PDP", "D_POOLING_PADDING_VALUE_1_CFG", "PAD_VALUE_1X")
    kind = draw(st.sampled_from(("zero", "multiples", "raw")))
    if kind == "zero":
        return [0] * 7
    if kind == "raw":
        return [draw(st.integers(*unsigned_range(field))) for _ in range(7)]
    if dtype == "int16":
        v = draw(st.integers(*signed_bits(16)))
        return [(n * v) & ((1 << field.width) - 1) for n in range(1, 8)]
    v = float(np.float16(draw(st.integers(-2048, 2048)) / 64))
    return [fp17_bits(n * v) for n in range(1, 8)]


def _recip(draw, hw: HwConfig | None, axis: str, kernel: int, dtype: str) -> int | None:
    """None (the firmware's 1/kernel), a value near it (int16), or any 17-bit field."""
    kind = draw(st.sampled_from(("firmware", "near", "any")))
    if kind == "firmware":
        return None
    if kind == "near" and dtype == "int16":
        near = RECIP_INT[kernel - 1]
        return draw(st.integers(max(0, near - 64), near + 64))
    if kind == "near":
        return RECIP_FP17[draw(st.integers(0, 7))]
    return draw(field_ints(hw, "PDP", f"D_RECIP_KERNEL_{axis}", f"RECIP_KERNEL_{axis}"))


@st.composite
def wide_pdp_examples(draw, hw: HwConfig | None = None, dtype: str = "int16", splits: bool = True) -> WidePdpExample:
    """An int16 or fp16 pooling layer of ``hw`` and, when ``splits``, sometimes a width split of it."""
    kh, sh, pt, pb = _kernel(draw, hw, "HEIGHT")
    kw, sw, pl, pr = _kernel(draw, hw, "WIDTH")
    atom = hw.atom_elements(dtype) if hw is not None else 16  # type: ignore[arg-type]
    work = WORK[dtype]
    side = max(1, min(MAX_SIDE, math.isqrt(work // (atom * kh * kw))))
    split = _split(draw, hw, kw, sw, pl, pr) if splits and draw(st.booleans()) else None
    if split is not None:
        w, ow = split.width, split.out_width
    else:
        w, ow = _side(draw, kw, sw, pl, pr, side)
    h, oh = _side(draw, kh, sh, pt, pb, max(1, min(MAX_SIDE, work // (atom * kh * kw * ow))))
    taps = max(oh * ow * kh * kw, h * w)
    c = draw(channels(hw, max_atoms=max(1, min(2, work // (taps * atom))), limit=2 * atom))
    x = values(draw, (c, h, w), signed_bits(16)) if dtype == "int16" else fp16_cube(draw, (c, h, w))
    layer = WidePoolLayer(
        x, dtype, draw(st.sampled_from(METHODS + ("avg",))), (kh, kw), (sh, sw), (pt, pl, pb, pr),
        tuple(_pad_values(draw, hw, dtype)),
        recip_w=_recip(draw, hw, "WIDTH", kw, dtype), recip_h=_recip(draw, hw, "HEIGHT", kh, dtype),
        nan_to_zero=dtype == "fp16" and draw(st.booleans()),
    )
    assert layer.out_hw() == (oh, ow)
    return WidePdpExample(layer, split)


__all__ = ["WidePdpExample", "fp16_cube", "fp17_bits", "wide_pdp_examples"]
