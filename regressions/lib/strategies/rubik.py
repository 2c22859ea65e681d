"""RUBIK operations: contract, split and merge in every precision the config has, with random strides
(zero, overlapping and padded ones: overlapping writes are legal, the later request wins), both RAMs,
addresses above 4 GiB, and now and then an illegal register the golden model must refuse.

Ranges: sizes and the deconvolution strides come from the ``RBK`` fields (``count_range``), narrowed so
the plain-loop reference stays fast (a few thousand atoms). The legality rules are the reference's
(``regressions.lib.reference.rubik.problems``); the strategy draws mostly legal examples:

- contract: CONTRACT_STRIDE_0 = output surfaces x DAIN_SURF_STRIDE, as kmd programs it, one time in eight
  any other multiple of 32;
- split: output channels filling as many surfaces as the input, one time in eight any count;
- sources and destinations in separate windows (``same_window=True`` puts both in one window, where the
  reference decides whether a write hits a byte the operation reads).

An example is the operation plus the seed of the bytes every window starts with.
"""
from __future__ import annotations

from dataclasses import dataclass

from hypothesis import strategies as st

from golden.config import HwConfig
from regressions.lib.reference.rubik import CONTRACT, CV, MC, MERGE, SPLIT, RubikOp
from regressions.lib.strategies import clamp, count_range, ints, reg_field

#: Windows sources and destinations are placed in (both memories; the second of each above 4 GiB).
SRC_WINDOWS = (0x8000_0000, 0x1_0000_0000)
DST_WINDOWS = (0x8800_0000, 0x2_4000_0000)
#: Largest contract input width / x stride drawn: past the cmod's 8-wide request blocks, kept small.
MAX_CONTRACT_WIDTH = 10
MAX_STRIDE_X = 10
MAX_STRIDE_Y = 3
#: Largest split/merge width: past one 64-element chunk.
MAX_PLANE_WIDTH = 70
MAX_HEIGHT = 3
#: Most surfaces of a cube drawn.
MAX_SURFACES = 2
PRECISION_NAMES = {0: "int8", 1: "int16", 2: "fp16"}


@dataclass(frozen=True)
class RubikExample:
    """One RUBIK operation and the seed of the random bytes its windows start with."""

    op: RubikOp
    seed: int


def _a32(draw, hi: int) -> int:
    """A multiple of 32 bytes, 0 .. 32*hi."""
    return 32 * draw(st.integers(0, max(0, hi)))


def _stride(draw, exact: int) -> int:
    """A stride in bytes for data ``exact`` atoms long: packed (half the time), padded by up to two atoms,
    or shorter, overlapping the previous line/surface/plane (writes then land in request order)."""
    kind = draw(st.integers(0, 3))
    if kind <= 1:
        return 32 * exact
    if kind == 2:
        return 32 * draw(st.integers(exact, exact + 2))
    return 32 * draw(st.integers(0, exact))


def _width(draw, hw: HwConfig | None, hi: int, typical: tuple[int, int], edges: tuple[int, ...]) -> int:
    """DATAIN_WIDTH + 1: typical small widths, sometimes one at a block/chunk edge, sometimes any."""
    if draw(st.integers(0, 3)) == 0:
        return draw(st.sampled_from(edges))
    return _count(draw, hw, "D_DATAIN_SIZE_0", "DATAIN_WIDTH", hi, typical)


def _count(draw, hw: HwConfig | None, register: str, name: str, hi: int, typical: tuple[int, int]) -> int:
    return draw(ints(clamp(count_range(reg_field(hw, "RBK", register, name)), hi=hi), typical))


def precisions(hw: HwConfig | None) -> list[int]:
    return [p for p, name in PRECISION_NAMES.items() if hw is None or hw.supports(name)]  # type: ignore[arg-type]


@st.composite
def rubik_ops(draw, hw: HwConfig | None = None, same_window: bool = False) -> RubikOp:
    mode = draw(st.sampled_from((CONTRACT, SPLIT, MERGE)))
    precision = draw(st.sampled_from(precisions(hw)))
    per_atom = 32 // (1 if precision == 0 else 2)
    height = _count(draw, hw, "D_DATAIN_SIZE_0", "DATAIN_HEIGHT", MAX_HEIGHT, (1, 2))
    src_ram = draw(st.sampled_from((MC, CV)))
    dst_ram = draw(st.sampled_from((MC, CV)))
    src_window = draw(st.sampled_from(SRC_WINDOWS))
    src = src_window + _a32(draw, 16)
    dst = (src_window if same_window else draw(st.sampled_from(DST_WINDOWS))) + _a32(draw, 16)
    kw: dict[str, int] = {}
    if mode == CONTRACT:
        width = _width(draw, hw, MAX_CONTRACT_WIDTH, (1, 4), (8, 9))
        sx = _count(draw, hw, "D_DECONV_STRIDE", "DECONV_X_STRIDE", MAX_STRIDE_X, (1, 3))
        sy = _count(draw, hw, "D_DECONV_STRIDE", "DECONV_Y_STRIDE", MAX_STRIDE_Y, (1, 2))
        surfaces = draw(st.integers(1, MAX_SURFACES))
        out_channels = draw(st.integers((surfaces - 1) * per_atom + 1, surfaces * per_atom))
        in_channels = sx * sy * surfaces * per_atom if draw(st.booleans()) else draw(st.integers(1, 256))
        src_line = _stride(draw, width)
        src_surf = _stride(draw, height * src_line // 32)
        dst_line = _stride(draw, width * sx)
        contract_stride_1 = _stride(draw, sy * dst_line // 32)
        kw = dict(
            src_line=src_line, src_surf=src_surf,
            contract_stride_0=surfaces * src_surf if draw(st.integers(0, 7)) else _a32(draw, 64),
            dst_line=dst_line, contract_stride_1=contract_stride_1,
            dst_surf=_stride(draw, height * contract_stride_1 // 32), stride_x=sx, stride_y=sy,
        )
    else:
        width = _width(draw, hw, MAX_PLANE_WIDTH, (1, 8), (16, 32, 64, 65, 70))
        plane_atoms = -(-width * (32 // per_atom) // 32)  # atoms of one plane line
        in_channels = draw(st.integers(1, MAX_SURFACES * per_atom))
        if mode == SPLIT:
            surfaces = -(-in_channels // per_atom)
            same = st.integers((surfaces - 1) * per_atom + 1, surfaces * per_atom)
            out_channels = draw(same if draw(st.integers(0, 7)) else st.integers(1, MAX_SURFACES * per_atom))
            src_line, dst_line = _stride(draw, width), _stride(draw, plane_atoms)
            kw = dict(src_line=src_line, src_surf=_stride(draw, height * src_line // 32),
                      dst_line=dst_line, dst_planar=_stride(draw, height * dst_line // 32))
        else:
            out_channels = draw(st.integers(1, MAX_SURFACES * per_atom))
            src_line, dst_line = _stride(draw, plane_atoms), _stride(draw, width)
            kw = dict(src_line=src_line, src_planar=_stride(draw, height * src_line // 32),
                      dst_line=dst_line, dst_surf=_stride(draw, height * dst_line // 32))
    return RubikOp(mode=mode, precision=precision, width=width, height=height, in_channels=in_channels,
                   out_channels=out_channels, src=src, dst=dst, src_ram=src_ram, dst_ram=dst_ram, **kw)


@st.composite
def rubik_examples(draw, hw: HwConfig | None = None, same_window: bool | None = None) -> RubikExample:
    """An operation (one time in four with source and destination in one window unless ``same_window``
    says) and a seed."""
    if same_window is None:
        same_window = draw(st.integers(0, 3)) == 0
    return RubikExample(draw(rubik_ops(hw, same_window)), draw(st.integers(0, 2**32 - 1)))
