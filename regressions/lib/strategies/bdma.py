"""BDMA transfers: launched groups of up to a few transfers each, random line sizes, repeats, strides
(zero, overlapping and padded), RAM types and addresses above 4 GiB.

Ranges: ``CFG_LINE.SIZE`` and the repeat counts come from their ``BDMA`` fields (``count_range``),
narrowed so the plain-loop reference stays fast; addresses and strides are multiples of 32 (the fields
hold bits [31:5]). Sources and destinations live in separate windows unless ``same_window``, where the
reference (``regressions.lib.reference.bdma.overlaps``) decides whether a transfer is legal.
"""
from __future__ import annotations

from dataclasses import dataclass

from hypothesis import strategies as st

from golden.config import HwConfig
from regressions.lib.reference.bdma import CV, MC, BdmaTransfer
from regressions.lib.strategies import clamp, count_range, ints, reg_field

SRC_WINDOWS = (0x8000_0000, 0x1_0000_0000)
DST_WINDOWS = (0x8100_0000, 0x2_4000_0000)
#: Most 32-byte atoms per line, lines per surface and surfaces drawn; one line in LONG_LINE_ODDS is long
#: (LONG_LINE_ATOMS), so the functional bin of lines over 8 atoms is hit too.
MAX_LINE_ATOMS = 4
LONG_LINE_ATOMS = (9, 24)
LONG_LINE_ODDS = 6
MAX_LINES = 5
MAX_SURFACES = 4
#: Most transfers queued per group and groups launched per example.
MAX_TRANSFERS = 3
MAX_GROUPS = 2


@dataclass(frozen=True)
class BdmaExample:
    """Groups launched in order, each (group 0/1, its transfers), and the seed of the windows' bytes."""

    groups: tuple[tuple[int, tuple[BdmaTransfer, ...]], ...]
    seed: int
    same_window: bool = False


def _a32(draw, hi: int) -> int:
    return 32 * draw(st.integers(0, hi))


def _minus_one(draw, hw: HwConfig | None, register: str, name: str, hi: int) -> int:
    """A count field's register value (count - 1)."""
    return draw(ints(clamp(count_range(reg_field(hw, "BDMA", register, name)), hi=hi), (1, 2))) - 1


@st.composite
def bdma_transfers(draw, hw: HwConfig | None = None, same_window: bool = False) -> BdmaTransfer:
    src_window = draw(st.sampled_from(SRC_WINDOWS))
    return BdmaTransfer(
        src=src_window + _a32(draw, 32),
        dst=(src_window if same_window else draw(st.sampled_from(DST_WINDOWS))) + _a32(draw, 32),
        line_size=(draw(st.integers(*LONG_LINE_ATOMS)) - 1 if draw(st.integers(1, LONG_LINE_ODDS)) == 1
                   else _minus_one(draw, hw, "CFG_LINE", "SIZE", MAX_LINE_ATOMS)),
        line_repeat=_minus_one(draw, hw, "CFG_LINE_REPEAT", "NUMBER", MAX_LINES),
        surf_repeat=_minus_one(draw, hw, "CFG_SURF_REPEAT", "NUMBER", MAX_SURFACES),
        src_line=_a32(draw, 8), dst_line=_a32(draw, 8), src_surf=_a32(draw, 40), dst_surf=_a32(draw, 40),
        src_ram=draw(st.sampled_from((MC, CV))), dst_ram=draw(st.sampled_from((MC, CV))),
    )


@st.composite
def bdma_examples(draw, hw: HwConfig | None = None) -> BdmaExample:
    """Usually groups of transfers between separate windows; one time in four a single transfer whose
    source and destination share a window (legal only when the reference finds no overlap)."""
    if draw(st.integers(0, 3)) == 0:
        return BdmaExample(((0, (draw(bdma_transfers(hw, same_window=True)),)),), draw(st.integers(0, 2**32 - 1)),
                           same_window=True)
    groups = draw(st.lists(st.tuples(st.sampled_from((0, 1)),
                                     st.lists(bdma_transfers(hw), min_size=1, max_size=MAX_TRANSFERS).map(tuple)),
                           min_size=1, max_size=MAX_GROUPS))
    return BdmaExample(tuple(groups), draw(st.integers(0, 2**32 - 1)))
