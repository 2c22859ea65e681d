"""hypothesis strategies for single-layer register programs, one module per engine.

Each engine module declares its legal layers for one ``HwConfig``: field ranges come from the register
table (``golden.regs``: a field's width says what a register can hold), the engine's legality rules narrow
them (e.g. PDP pads smaller than the kernel, the whole conv input in the CBUF data banks), and the
config says what exists (atom sizes, CBUF banks, SDP sub-units). ``hw=None`` draws layers legal on every
preset (what the reference-math and RTL tests parametrize over).

Examples stay small and shrink well: the dimensions are drawn by hypothesis, and each cube's contents come
from a drawn seed inside a drawn value range, so a failing example shrinks to a 1x1x1 cube of small
values. Every drawn value is in the example itself (``regressions.fuzz.serialize`` writes the arrays),
so a saved example replays without hypothesis.

Modules: ``conv`` (direct convolution), ``sdp`` (X1/X2 and the output converter; Y/EW with the LUT),
``pdp`` (pooling, with width splits), ``cdp`` (LRN with its LUT).
"""
from __future__ import annotations

import numpy as np
from hypothesis import strategies as st
from hypothesis.strategies import SearchStrategy

from golden.config import PRESETS, HwConfig
from golden.regs import Field, register_map

#: Seeds of the numpy generators that fill cubes and operands.
SEED_BITS = 32


def reg_field(hw: HwConfig | None, unit: str, register: str, name: str) -> Field:
    """A field of the register table, in ``hw``'s address map (the fields are the same in both)."""
    regs = register_map(hw.address_map if hw is not None else "small")
    return regs.unit(unit).register(register).field(name)


def unsigned_range(f: Field) -> tuple[int, int]:
    return 0, (1 << f.width) - 1


def signed_range(f: Field) -> tuple[int, int]:
    return -(1 << (f.width - 1)), (1 << (f.width - 1)) - 1


def count_range(f: Field) -> tuple[int, int]:
    """Sizes, strides and kernels are stored minus one: a field of w bits holds 1 .. 2**w."""
    return 1, 1 << f.width


def signed_bits(bits: int) -> tuple[int, int]:
    return -(1 << (bits - 1)), (1 << (bits - 1)) - 1


def clamp(rng: tuple[int, int], lo: int | None = None, hi: int | None = None) -> tuple[int, int]:
    """``rng`` narrowed to ``[lo, hi]`` (an engine rule tighter than the field)."""
    a, b = rng
    return max(a, lo) if lo is not None else a, min(b, hi) if hi is not None else b


@st.composite
def ints(draw, rng: tuple[int, int], typical: tuple[int, int] | None = None) -> int:
    """An integer of a legal range, three times in four from its ``typical`` sub-range.

    Full-width values mostly saturate a datapath or round it to 0, so each field gets a sub-range where
    results stay interesting; the full range is still drawn (and shrinks to the typical one)."""
    lo, hi = rng
    if typical is not None:
        t_lo, t_hi = max(lo, typical[0]), min(hi, typical[1])
        if t_lo <= t_hi and draw(st.integers(0, 3)) != 3:
            return draw(st.integers(t_lo, t_hi))
    return draw(st.integers(lo, hi))


def bypassed(draw) -> bool:
    """A BYPASS bit, drawn so that it shrinks to bypassed (the simplest datapath)."""
    return not draw(st.booleans())


def magnitude_bits(value) -> int:
    """Bits of the largest magnitude in an int or array (0 for zeros)."""
    return int(np.max(np.abs(np.asarray(value, dtype=np.int64)))).bit_length()


def rescale_shift(draw, rng: tuple[int, int], value_bits: int, scale: int, out_bits: int = 8) -> int:
    """A right shift of a multiply-shift converter (CVT, truncation): usually one that brings
    ``value_bits``-bit values times ``scale`` near ``out_bits`` bits (so the output neither saturates
    nor rounds to 0), otherwise any value of the field."""
    centre = value_bits + abs(int(scale)).bit_length() - out_bits
    return draw(ints(rng, typical=(centre - 3, centre + 3)))


def field_range(hw: HwConfig | None, unit: str, register: str, name: str, *, signed: bool = False,
                lo: int | None = None, hi: int | None = None) -> tuple[int, int]:
    """Legal values of one register field (signed or unsigned), narrowed by an engine rule."""
    f = reg_field(hw, unit, register, name)
    return clamp(signed_range(f) if signed else unsigned_range(f), lo, hi)


def field_ints(hw: HwConfig | None, unit: str, register: str, name: str, *, signed: bool = False,
               lo: int | None = None, hi: int | None = None,
               typical: tuple[int, int] | None = None) -> SearchStrategy[int]:
    """Values of one register field, preferring ``typical`` (see ``ints``)."""
    return ints(field_range(hw, unit, register, name, signed=signed, lo=lo, hi=hi), typical)


def values(draw, shape: tuple[int, ...], rng: tuple[int, int]) -> np.ndarray:
    """An int64 array of ``shape`` with values in ``rng`` or in a drawn sub-range of it, from a drawn
    seed. Shrinking goes to the sub-range, then towards 0 (a cube of zeros) and seed 0."""
    lo, hi = rng
    if not draw(st.booleans()):
        lo = draw(st.integers(*rng))
        hi = draw(st.integers(lo, rng[1]))
    seed = draw(st.integers(0, (1 << SEED_BITS) - 1))
    return np.random.default_rng(seed).integers(lo, hi + 1, shape, dtype=np.int64)


def int8_cube(draw, channels: int, height: int, width: int) -> np.ndarray:
    return values(draw, (channels, height, width), signed_bits(8))


def atom_elements(hw: HwConfig | None) -> int:
    """Channels per atom; ``None`` stands for the widest preset (the most padding lanes)."""
    if hw is not None:
        return hw.atom_elements()
    return max(c.atom_elements() for c in PRESETS.values())


def channels(hw: HwConfig | None, max_atoms: int = 2, limit: int | None = None) -> SearchStrategy[int]:
    """Channel counts filling at most ``max_atoms`` surfaces: a partial last surface (channels not a
    multiple of the atom) is the common case, exact multiples are drawn too."""
    atom = atom_elements(hw)
    top = max_atoms * atom if limit is None else max(1, min(limit, max_atoms * atom))
    return st.one_of(st.integers(1, top), st.integers(1, max(1, top // atom)).map(lambda n: min(n * atom, top)))


def lut_index_and_slopes(f, select, offset_typical: tuple[int, int]) -> dict[str, int]:
    """The ``S_LUT_*`` fields SDP's and CDP's LUTs share (index offset and selects, priorities, under- and
    overflow slopes): ``f(register, field, typical=None, signed=...)`` draws one field of the unit,
    ``select(table, depth_bits)`` an index select."""
    return dict(
        le_index_offset=f("S_LUT_INFO", "LUT_LE_INDEX_OFFSET", offset_typical),
        le_index_select=select("LE", 6),
        lo_index_select=select("LO", 8),
        uflow_priority=f("S_LUT_CFG", "LUT_UFLOW_PRIORITY", signed=False),
        oflow_priority=f("S_LUT_CFG", "LUT_OFLOW_PRIORITY", signed=False),
        hybrid_priority=f("S_LUT_CFG", "LUT_HYBRID_PRIORITY", signed=False),
        **{f"{t}_slope_{k}_scale": f(f"S_LUT_{t.upper()}_SLOPE_SCALE", f"LUT_{t.upper()}_SLOPE_{k.upper()}_SCALE",
                                     (-1024, 1024))
           for t in ("le", "lo") for k in ("uflow", "oflow")},
        **{f"{t}_slope_{k}_shift": f(f"S_LUT_{t.upper()}_SLOPE_SHIFT", f"LUT_{t.upper()}_SLOPE_{k.upper()}_SHIFT")
           for t in ("le", "lo") for k in ("uflow", "oflow")},
    )


def configs_with(predicate) -> tuple[str, ...]:
    """Preset names whose config satisfies ``predicate`` (e.g. ``lambda hw: hw.sdp_ew``)."""
    return tuple(name for name, hw in PRESETS.items() if predicate(hw))


from regressions.lib.strategies.cdp import lrn_layers  # noqa: E402
from regressions.lib.strategies.conv import conv_layers  # noqa: E402
from regressions.lib.strategies.pdp import pdp_examples, pool_layers  # noqa: E402
from regressions.lib.strategies.sdp import sdp_layers, sdp_y_layers  # noqa: E402

__all__ = [
    "conv_layers",
    "lrn_layers",
    "pdp_examples",
    "pool_layers",
    "sdp_layers",
    "sdp_y_layers",
]
