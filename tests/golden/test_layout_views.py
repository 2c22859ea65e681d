"""``golden.layout`` moves cubes through one span and a strided view when the layout allows: the bytes written
and read are exactly those of the per-byte offset arrays (``CubeLayout.byte_offsets``), gaps untouched."""
from __future__ import annotations

import numpy as np
import pytest

from golden.layout import CubeLayout, _span_view, read_cube, write_cube
from golden.memory import AddressSpace

LAYOUTS = [
    CubeLayout(8, 1, 1, 8, 8, 8),  # one pixel
    CubeLayout(20, 3, 5, 64, 256, 8),  # gaps after lines and surfaces, partial last surface
    CubeLayout(32, 4, 4, 128, 512, 32),  # packed
    CubeLayout(17, 2, 3, 100, 300, 16, 2),  # int16, odd strides
    CubeLayout(40, 2, 2, 32, 64, 8),  # 5 surfaces, 16 B of gap after each
    CubeLayout(16, 3, 2, 8, 64, 8),  # lines overlap (stride < line): the offset arrays decide
    CubeLayout(24, 2, 1, 16, 8, 8),  # surfaces overlap other surfaces' lines (surface 2 line 0 = surface 0 line 1)
]


@pytest.mark.parametrize("layout", LAYOUTS, ids=[f"{i}" for i in range(len(LAYOUTS))])
def test_views_move_the_same_bytes_as_the_offset_arrays(layout: CubeLayout) -> None:
    rng = np.random.default_rng(1)
    lo, hi = (-(1 << 15), 1 << 15) if layout.bpe == 2 else (-128, 128)
    data = rng.integers(lo, hi, (layout.padded_channels, layout.height, layout.width))
    base, size = 0x1234, layout.span() + 64
    fast, ref = AddressSpace("fast"), AddressSpace("ref")
    background = rng.integers(0, 256, size + 0x1234 + 64).astype(np.uint8)
    fast.write(0, background)
    ref.write(0, background)
    write_cube(fast, base, layout, data)
    dt = {1: "<i1", 2: "<i2"}[layout.bpe]
    raw = np.ascontiguousarray(data.astype(dt)).view(np.uint8).reshape(data.shape + (layout.bpe,))
    ref.scatter(base, layout.byte_offsets(), raw)
    np.testing.assert_array_equal(fast.read(0, background.size), ref.read(0, background.size))
    got = read_cube(fast, base, layout)
    want = ref.gather(base, layout.byte_offsets())
    want = np.ascontiguousarray(want).view(dt)[..., 0].astype(np.int64)
    np.testing.assert_array_equal(got, want)


def test_overlapping_layouts_take_the_offset_path() -> None:
    for overlapping in LAYOUTS[-2:]:
        assert _span_view(overlapping, np.zeros(overlapping.span(), np.uint8)) is None
    assert _span_view(LAYOUTS[1], np.zeros(LAYOUTS[1].span(), np.uint8)) is not None


@pytest.mark.parametrize("layout", LAYOUTS, ids=[f"{i}" for i in range(len(LAYOUTS))])
def test_span_ends_one_past_the_last_byte(layout: CubeLayout) -> None:
    """``span`` is the bytes from the base to one past the cube's last byte: the highest element
    (C_pad - 1, H - 1, W - 1) sits at (S - 1) * surf + (H - 1) * line + (W - 1) * atom * bpe + (atom - 1) * bpe
    and is bpe bytes long (NVDLA_NOTES §3)."""
    last = ((layout.surfaces - 1) * layout.surf_stride + (layout.height - 1) * layout.line_stride
            + (layout.width - 1) * layout.atom * layout.bpe + (layout.atom - 1) * layout.bpe)
    assert layout.span() == last + layout.bpe == int(layout.byte_offsets().max()) + 1


def test_an_empty_cube_spans_nothing() -> None:
    """A cube without channels, lines or pixels occupies no bytes, whatever its strides."""
    assert CubeLayout(0, 3, 5, 64, 256, 8).span() == 0
    assert CubeLayout(8, 0, 2, 64, 256, 8).span() == 0
    assert CubeLayout(8, 3, 0, 64, 256, 8).span() == 0
