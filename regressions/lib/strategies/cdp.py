"""CDP local response normalisation layers: input CVT, window (``NORMALZ_LEN``), LUT, output CVT.

Ranges from the CDP register fields. Engine rules on top of the fields (NVDLA_NOTES §4 CDP, the
golden engine's decoding): the int8 path uses the signed low byte of ``DATIN_OFFSET`` and 25 bits of
``DATOUT_OFFSET``; LUT start/end are 38-bit (``*_LOW`` plus the 6-bit ``*_HIGH``); an index select is a
6-bit signed shift (bit 5 sign-extended, wider values are undefined in the cmod).
"""
from __future__ import annotations

from hypothesis import strategies as st

from golden.config import HwConfig
from golden.lut import LutRegisters
from regressions.lib import programs
from regressions.lib.strategies import (
    lut_index_and_slopes,
    atom_elements,
    bypassed,
    channels,
    field_ints,
    field_range,
    int8_cube,
    ints,
    reg_field,
    rescale_shift,
    signed_bits,
    signed_range,
    values,
)
from regressions.lib.reference import cdp as ref_cdp

#: Elements (padded channels x H x W) the plain-loop reference visits at most (the LUT: ~60 µs each).
WORK = 1_000
MAX_SIDE = 6
#: Bits of the int8 path's DATIN_OFFSET and DATOUT_OFFSET, and of an index select.
DATIN_OFFSET_BITS, DATOUT_OFFSET_BITS, INDEX_SELECT_BITS = 8, 25, 6


def _edge_bits(hw: HwConfig | None, table: str, edge: str) -> int:
    """``S_LUT_{LE,LO}_{START,END}``: LOW and HIGH together."""
    low = reg_field(hw, "CDP", f"S_LUT_{table}_{edge}_LOW", f"LUT_{table}_{edge}_LOW")
    high = reg_field(hw, "CDP", f"S_LUT_{table}_{edge}_HIGH", f"LUT_{table}_{edge}_HIGH")
    return low.width + high.width


def lut(draw, hw: HwConfig | None, sum_bits: int, signed_sum: bool,
        select_range: tuple[int, int] | None = None) -> LutRegisters:
    """Tables and ``S_LUT_*`` settings, usually spanning the ``sum_bits``-bit range of the square sum
    (the input itself with SQSUM_BYPASS, then signed) so lookups hit, underflow and overflow alike.
    ``select_range``: the index selects' legal range (default: int8's 6-bit signed shift)."""
    entry = signed_range(reg_field(hw, "CDP", "S_LUT_ACCESS_DATA", "LUT_DATA"))
    tables = values(draw, (ref_cdp.LE_DEPTH + ref_cdp.LO_DEPTH,), entry)
    le_exp = draw(st.booleans())
    span = 1 << sum_bits
    start = (-span, span // 8) if signed_sum else (-64, span // 8)

    def edge(table: str, which: str, typical: tuple[int, int]) -> int:
        return draw(ints(signed_bits(_edge_bits(hw, table, which)), typical=typical))

    def f(reg: str, name: str, typical=None, signed=True, hi=None, lo=None):
        return draw(field_ints(hw, "CDP", reg, name, signed=signed, typical=typical, lo=lo, hi=hi))

    select_lo, select_hi = select_range if select_range is not None else signed_bits(INDEX_SELECT_BITS)

    def select(table: str, depth_bits: int) -> int:
        centre = sum_bits + 1 - depth_bits
        return f("S_LUT_INFO", f"LUT_{table}_INDEX_SELECT", (centre - 2, centre + 2), lo=select_lo, hi=select_hi)

    return LutRegisters(
        le_table=tuple(int(v) for v in tables[: ref_cdp.LE_DEPTH]),
        lo_table=tuple(int(v) for v in tables[ref_cdp.LE_DEPTH :]),
        le_function="exp" if le_exp else "linear",
        le_start=edge("LE", "START", start),
        le_end=edge("LE", "END", (0, span)),
        lo_start=edge("LO", "START", start),
        lo_end=edge("LO", "END", (0, span)),
        **lut_index_and_slopes(f, select, (-4, 8)),
    )


@st.composite
def lrn_layers(draw, hw: HwConfig | None = None) -> programs.LrnLayer:
    """An LRN layer of ``hw`` (every preset when None); channels spanning up to three surfaces so the
    window crosses surface boundaries and reads the zero padding lanes."""
    h = draw(st.integers(1, MAX_SIDE))
    w = draw(st.integers(1, MAX_SIDE))
    c = draw(channels(hw, max_atoms=max(1, min(3, WORK // (atom_elements(hw) * h * w)))))
    x = int8_cube(draw, c, h, w)

    def f(reg: str, name: str, typical=None, signed=False, lo=None, hi=None):
        return draw(field_ints(hw, "CDP", reg, name, signed=signed, typical=typical, lo=lo, hi=hi))

    din_lo, din_hi = signed_bits(DATIN_OFFSET_BITS)
    dout_lo, dout_hi = signed_bits(DATOUT_OFFSET_BITS)
    datin_offset = f("D_DATIN_OFFSET", "DATIN_OFFSET", signed=True, lo=din_lo, hi=din_hi)
    datin_scale = f("D_DATIN_SCALE", "DATIN_SCALE", signed=True, typical=(-512, 512))
    # x' = sat9((x - offset) * scale >> shifter): aim at 8 bits.
    datin_shifter = rescale_shift(draw, field_range(hw, "CDP", "D_DATIN_SHIFTER", "DATIN_SHIFTER"), 9, datin_scale)
    normalz_len = f("D_LRN_CFG", "NORMALZ_LEN")
    sqsum_bypass = bypassed(draw)
    mul_bypass = bypassed(draw)
    sum_bits = 9 if sqsum_bypass else 16 + (2 * normalz_len + 3).bit_length()
    table = lut(draw, hw, sum_bits, signed_sum=sqsum_bypass)
    out_bits = 16 if mul_bypass else 25  # LUT result (int16), times x' (9 bits)
    near = 1 << (out_bits - 2)
    datout_scale = f("D_DATOUT_SCALE", "DATOUT_SCALE", signed=True, typical=(-1024, 1024))
    return programs.LrnLayer(
        x, table,
        datin_offset=datin_offset, datin_scale=datin_scale, datin_shifter=datin_shifter,
        normalz_len=normalz_len, sqsum_bypass=sqsum_bypass, mul_bypass=mul_bypass,
        datout_offset=f("D_DATOUT_OFFSET", "DATOUT_OFFSET", signed=True, lo=dout_lo, hi=dout_hi,
                        typical=(-near, near)),
        datout_scale=datout_scale,
        datout_shifter=rescale_shift(draw, field_range(hw, "CDP", "D_DATOUT_SHIFTER", "DATOUT_SHIFTER"),
                                     out_bits, datout_scale),
    )
