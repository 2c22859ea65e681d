"""int16 and fp16 CDP (LRN) layers (nv_full).

- int16: the int8 strategy's shape with the int16 widths (NVDLA_NOTES §4 CDP; cmod ``lookup_lut``): 16-bit
  data and DATIN_OFFSET, x' of 17 bits (so square sums of up to ~2^36), 32-bit DATOUT_OFFSET, 16-bit
  output, index selects restricted to -63..31 (the range where the cmod's int16 LUT is defined).
- fp16: fp16 cubes (``strategies.pdp_wide.fp16_cube``) and an fp16 LUT: fp16 table entries and slope
  scales, START/END as fp32 patterns usually around the square sums' range, 8-bit index selects and
  offset usually near the values that spread the sums over the tables; NAN_FLUSH_TO_ZERO either. The CVT
  registers are unused by fp16 and stay at their defaults.
"""
from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

from golden.config import HwConfig
from golden.lut import LutRegisters
from regressions.lib.strategies import (
    SEED_BITS, bypassed, channels, field_ints, field_range, ints, rescale_shift, signed_bits, values,
)
from regressions.lib.programs.wide import WideLrnLayer
from regressions.lib.reference import cdp_fp16 as ref_fp16
from regressions.lib.strategies.cdp import lut
from regressions.lib.strategies.pdp_wide import fp16_cube

#: Padded channels x H x W the reference visits at most: int16 is integer loops (the LUT ~60 µs per
#: element), fp16 exact-fraction floats (~1 ms per element).
WORK = {"int16": 1_000, "fp16": 48}
MAX_SIDE = 6
#: Index selects where the cmod's int16 LUT is defined (a 7-bit field, but see golden.engines.cdp).
INT16_SELECT = (-63, 31)


def _f32(value: float) -> int:
    return int(np.float32(value).view(np.uint32))


def _fp16_lut(draw, scale_exp: int) -> LutRegisters:
    """An fp16 LUT whose tables usually cover square sums around 2^``scale_exp``."""
    seed = draw(st.integers(0, (1 << SEED_BITS) - 1))
    rng = np.random.default_rng(seed)
    if draw(st.booleans()):
        tables = (rng.standard_normal(ref_fp16.LE_DEPTH + ref_fp16.LO_DEPTH) * 4).astype(np.float16).view(np.uint16)
    else:
        tables = rng.integers(0, 1 << 16, ref_fp16.LE_DEPTH + ref_fp16.LO_DEPTH)
    tables = tuple(int(v) for v in tables)

    def edge(typical: float) -> int:
        kind = draw(st.sampled_from(("typical", "zero", "raw")))
        if kind == "raw":
            return draw(st.integers(0, (1 << 32) - 1))
        return 0 if kind == "zero" else _f32(typical * draw(st.integers(-64, 64)) / 32)

    def select(depth_bits: int) -> int:
        centre = scale_exp + 1 - depth_bits
        return draw(ints(signed_bits(8), typical=(centre - 3, centre + 3)))

    def half() -> int:
        return int(np.float16(draw(st.integers(-4096, 4096)) / 256).view(np.uint16)) if draw(st.booleans()) \
            else draw(st.integers(0, 0xFFFF))

    span = 2.0 ** scale_exp
    return LutRegisters(
        le_table=tables[: ref_fp16.LE_DEPTH], lo_table=tables[ref_fp16.LE_DEPTH :],
        le_function=draw(st.sampled_from(("exp", "linear"))),
        le_start=edge(span / 64), le_end=edge(span), lo_start=edge(span / 64), lo_end=edge(span),
        le_index_offset=draw(ints(signed_bits(8), typical=(scale_exp - 40, scale_exp + 2))),
        le_index_select=select(6), lo_index_select=select(8),
        uflow_priority=draw(st.integers(0, 1)), oflow_priority=draw(st.integers(0, 1)),
        hybrid_priority=draw(st.integers(0, 1)),
        le_slope_uflow_scale=half(), le_slope_oflow_scale=half(),
        lo_slope_uflow_scale=half(), lo_slope_oflow_scale=half(),
    )


@st.composite
def wide_lrn_layers(draw, hw: HwConfig | None = None, dtype: str = "int16") -> WideLrnLayer:
    """An int16 or fp16 LRN layer of ``hw`` with channels over one or two 16-channel surfaces."""
    atom = hw.atom_elements(dtype) if hw is not None else 16  # type: ignore[arg-type]
    work = WORK[dtype]
    h = draw(st.integers(1, min(MAX_SIDE, max(1, work // atom))))
    w = draw(st.integers(1, min(MAX_SIDE, max(1, work // (atom * h)))))
    max_atoms = max(1, min(2, work // (atom * h * w)))
    c = draw(channels(hw, max_atoms=2, limit=max_atoms * atom))
    normalz_len = draw(field_ints(hw, "CDP", "D_LRN_CFG", "NORMALZ_LEN"))
    sqsum_bypass, mul_bypass = bypassed(draw), bypassed(draw)
    if dtype == "fp16":
        x = fp16_cube(draw, (c, h, w))
        scale_exp = draw(st.integers(-20, 40))
        return WideLrnLayer(x, dtype, _fp16_lut(draw, scale_exp), normalz_len=normalz_len,
                            sqsum_bypass=sqsum_bypass, mul_bypass=mul_bypass, nan_to_zero=draw(st.booleans()))

    def f(reg: str, name: str, typical=None, signed=False, lo=None, hi=None):
        return draw(field_ints(hw, "CDP", reg, name, signed=signed, typical=typical, lo=lo, hi=hi))

    x = values(draw, (c, h, w), signed_bits(16))
    datin_offset = f("D_DATIN_OFFSET", "DATIN_OFFSET", signed=True)
    datin_scale = f("D_DATIN_SCALE", "DATIN_SCALE", signed=True, typical=(-512, 512))
    # x' = sat17((x - offset) * scale >> shifter): aim at 16 bits.
    datin_shifter = rescale_shift(draw, field_range(hw, "CDP", "D_DATIN_SHIFTER", "DATIN_SHIFTER"), 17, datin_scale, 16)
    sum_bits = 17 if sqsum_bypass else 32 + (2 * normalz_len + 3).bit_length()
    table = lut(draw, hw, sum_bits, signed_sum=sqsum_bypass, select_range=INT16_SELECT)
    out_bits = 16 if mul_bypass else 33  # LUT result (int16), times x' (17 bits)
    near = 1 << (out_bits - 2)
    datout_scale = f("D_DATOUT_SCALE", "DATOUT_SCALE", signed=True, typical=(-1024, 1024))
    return WideLrnLayer(
        x, dtype, table, normalz_len=normalz_len, sqsum_bypass=sqsum_bypass, mul_bypass=mul_bypass,
        datin_offset=datin_offset, datin_scale=datin_scale, datin_shifter=datin_shifter,
        datout_offset=f("D_DATOUT_OFFSET", "DATOUT_OFFSET", signed=True, typical=(-near, near)),
        datout_scale=datout_scale,
        datout_shifter=rescale_shift(draw, field_range(hw, "CDP", "D_DATOUT_SHIFTER", "DATOUT_SHIFTER"),
                                     out_bits, datout_scale, 16),
    )


__all__ = ["wide_lrn_layers"]
