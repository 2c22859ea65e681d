"""PDP pooling layers: kernels, strides, padding, pad values, reciprocals and width splits.

Ranges: kernel and stride sizes from ``PDP.D_POOLING_KERNEL_CFG`` (minus-one fields), pads from
``D_POOLING_PADDING_CFG``, raw ``PAD_VALUE_nX`` and ``RECIP_KERNEL_*`` from their fields. Engine rules:
kernels of at most ``golden.engines.pdp.MAX_KERNEL``, each pad smaller than its kernel (a window must hold
data), and split widths that tile the unsplit pooling (``PdpSplit``).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from hypothesis import strategies as st

from golden.config import HwConfig
from golden.engines.pdp import MAX_KERNEL
from regressions.lib import programs
from regressions.lib.strategies import (
    atom_elements,
    channels,
    clamp,
    count_range,
    field_ints,
    int8_cube,
    ints,
    reg_field,
    unsigned_range,
)

#: Taps the plain-loop reference visits at most (padded channels x outputs x kernel), about 30 ms.
WORK = 40_000
#: Largest input height/width of an unsplit layer; split layers are as wide as their splits make them.
MAX_SIDE = 12
#: Most width splits drawn (SPLIT_NUM holds up to 256).
MAX_SPLITS = 4
#: Most output columns per split.
MAX_SPLIT_OUT = 4
METHODS = ("max", "min", "avg")


@dataclass(frozen=True)
class PdpSplit:
    """Split-width mode (``SPLIT_NUM`` + ``D_PARTIAL_WIDTH_IN/OUT``): ``count`` splits of the input
    width, first/mid/last input and output widths (actual sizes). Split i > 0 re-reads ``kw - sw``
    columns of its neighbour and only the outer splits pad, so together they are the unsplit pooling."""

    count: int
    in_widths: tuple[int, int, int]  # first, mid, last
    out_widths: tuple[int, int, int]

    @property
    def width(self) -> int:
        first, mid, last = self.in_widths
        return first + (self.count - 2) * mid + last

    @property
    def out_width(self) -> int:
        first, mid, last = self.out_widths
        return first + (self.count - 2) * mid + last


@dataclass
class PdpExample:
    """A pooling layer, optionally run in split-width mode."""

    layer: programs.PoolLayer
    split: PdpSplit | None = None


def _kernel(draw, hw: HwConfig | None, axis: str) -> tuple[int, int, int, int]:
    """(kernel, stride, pad before, pad after) along ``axis`` ("WIDTH" or "HEIGHT")."""
    kfield = reg_field(hw, "PDP", "D_POOLING_KERNEL_CFG", f"KERNEL_{axis}")
    sfield = reg_field(hw, "PDP", "D_POOLING_KERNEL_CFG", f"KERNEL_STRIDE_{axis}")
    kernel = draw(ints(clamp(count_range(kfield), hi=MAX_KERNEL)))
    stride = draw(ints(count_range(sfield), typical=(1, 4)))
    before, after = ("PAD_LEFT", "PAD_RIGHT") if axis == "WIDTH" else ("PAD_TOP", "PAD_BOTTOM")
    pads = [draw(field_ints(hw, "PDP", "D_POOLING_PADDING_CFG", name, hi=kernel - 1)) for name in (before, after)]
    return kernel, stride, pads[0], pads[1]


def _side(draw, kernel: int, stride: int, pad_before: int, pad_after: int, top: int) -> tuple[int, int]:
    """(input size, output size) along one axis: at least one whole window fits the padded extent."""
    lo = max(1, kernel - pad_before - pad_after)
    size = draw(st.integers(lo, max(lo, top)))
    return size, (size + pad_before + pad_after - kernel) // stride + 1


def _split(draw, hw: HwConfig | None, kw: int, sw: int, pl: int, pr: int) -> PdpSplit | None:
    """Split widths that tile the unsplit pooling (golden.engines.pdp.splits checks the same rules):
    split 1 starts at input column ``first_out*sw - pl`` (so ``first_in = first_out*sw - pl + kw - sw``),
    middle splits advance ``mid_out*sw`` columns, and the last one holds its outputs' columns up to the
    right padding."""
    count = draw(st.integers(2, MAX_SPLITS))
    first_out = draw(st.integers(max(1, -(-pl // sw)), max(1, -(-pl // sw)) + MAX_SPLIT_OUT - 1))
    mid_out = draw(st.integers(1, MAX_SPLIT_OUT)) if count > 2 else 1
    last_lo = max(1, -(-(1 + pr - sw + 1) // sw))  # smallest last_out with a non-empty input range
    last_out = draw(st.integers(last_lo, last_lo + MAX_SPLIT_OUT - 1))
    first_in = first_out * sw - pl + kw - sw
    mid_in = mid_out * sw
    last_min, last_max = max(1, last_out * sw - pr), last_out * sw - pr + sw - 1
    if first_in < 1 or last_min > last_max:
        return None
    last_in = draw(st.integers(last_min, last_max))
    in_limit = count_range(reg_field(hw, "PDP", "D_PARTIAL_WIDTH_IN", "PARTIAL_WIDTH_IN_FIRST"))[1]
    out_limit = count_range(reg_field(hw, "PDP", "D_PARTIAL_WIDTH_OUT", "PARTIAL_WIDTH_OUT_FIRST"))[1]
    count_limit = count_range(reg_field(hw, "PDP", "D_OPERATION_MODE_CFG", "SPLIT_NUM"))[1]
    if max(first_in, mid_in, last_in) > in_limit or max(first_out, mid_out, last_out) > out_limit \
            or count > count_limit:
        return None
    return PdpSplit(count, (first_in, mid_in if count > 2 else 1, last_in),
                    (first_out, mid_out if count > 2 else 1, last_out))


def _pad_values(draw, hw: HwConfig | None) -> list[int]:
    """Raw ``PAD_VALUE_1X..7X``: usually n times one int8 value (what a compiler writes for an
    average over zero-point padding), sometimes any raw 19-bit field."""
    f = reg_field(hw, "PDP", "D_POOLING_PADDING_VALUE_1_CFG", "PAD_VALUE_1X")
    if draw(st.booleans()):
        return [draw(ints(unsigned_range(f))) for _ in range(7)]
    value = draw(st.integers(-128, 127))
    return [(n * value) & ((1 << f.width) - 1) for n in range(1, 8)]


def _recip(draw, hw: HwConfig | None, axis: str, kernel: int) -> int | None:
    """``RECIP_KERNEL_*``: 1/kernel in 0.16 fixed point (None: the program's default) or any value."""
    if not draw(st.booleans()):
        return None
    near = 0x10000 // kernel
    return draw(field_ints(hw, "PDP", f"D_RECIP_KERNEL_{axis}", f"RECIP_KERNEL_{axis}", typical=(near - 64, near + 64)))


@st.composite
def pdp_examples(draw, hw: HwConfig | None = None, splits: bool = True, recips: bool = True) -> PdpExample:
    """A pooling layer of ``hw`` and, when ``splits``, sometimes a width split of it. Without ``recips``
    the reciprocals are the program's default 1/kernel."""
    kh, sh, pt, pb = _kernel(draw, hw, "HEIGHT")
    kw, sw, pl, pr = _kernel(draw, hw, "WIDTH")
    atom = atom_elements(hw)
    # One surface of outputs, times the kernel, within the budget: sqrt of it per axis.
    side = max(1, min(MAX_SIDE, math.isqrt(WORK // (atom * kh * kw))))
    split = _split(draw, hw, kw, sw, pl, pr) if splits and draw(st.booleans()) else None
    if split is not None:
        w, ow = split.width, split.out_width
    else:
        w, ow = _side(draw, kw, sw, pl, pr, side)
    h, oh = _side(draw, kh, sh, pt, pb, max(1, min(MAX_SIDE, WORK // (atom * kh * kw * ow))))
    taps = max(oh * ow * kh * kw, h * w)
    c = draw(channels(hw, max_atoms=max(1, min(3, WORK // (taps * atom)))))
    method = draw(st.sampled_from(METHODS))
    layer = programs.PoolLayer(
        int8_cube(draw, c, h, w), method, (kh, kw), (sh, sw), (pt, pl, pb, pr), _pad_values(draw, hw),
        recip_w=_recip(draw, hw, "WIDTH", kw) if recips else None,
        recip_h=_recip(draw, hw, "HEIGHT", kh) if recips else None,
    )
    assert layer.out_hw() == (oh, ow)
    return PdpExample(layer, split)


def pool_layers(hw: HwConfig | None = None):
    """Unsplit pooling layers (``programs.PoolLayer``) with default reciprocals, legal on ``hw`` (every
    preset when None): what ``regressions/golden`` and ``regressions/rtl`` draw."""
    return pdp_examples(hw, splits=False, recips=False).map(lambda example: example.layer)
