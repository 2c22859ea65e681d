"""``golden.layout`` moves cubes through one span and a strided view when the layout allows: the bytes written
and read are exactly those of the per-byte offset arrays (``CubeLayout.byte_offsets``), gaps untouched."""
from __future__ import annotations

import numpy as np
import pytest

from golden.layout import CubeLayout, _span_view, read_cube, write_cube
from golden.budget import set_max_memory
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


def test_later_surface_lands_last_where_two_surfaces_overlap() -> None:
    """Two surfaces 1 byte apart (a surface stride below one line): element order (c, h, w) makes all of
    surface 1 the later write, so it covers bytes 1..16 whole and only channel 0 of pixel 0 of surface 0 is
    left (byte 0); byte 8 is surface 1's channel 15 of pixel 0, not surface 0's channel 0 of pixel 1."""
    layout = CubeLayout(16, 1, 2, 16, 1, 8)
    space = AddressSpace("mem")
    data = (1 + 2 * np.arange(16)[:, None, None] + np.arange(2)[None, None, :]).astype(np.int64)  # c, h, w
    write_cube(space, 0x40, layout, data)
    surface1 = [1 + 2 * c + w for w in range(2) for c in range(8, 16)]
    assert space.read(0x40, 17).tolist() == [1] + surface1


@pytest.fixture
def budget():
    """Set a budget for one test and clear it afterwards (it is process-wide)."""
    yield set_max_memory
    set_max_memory(None)


def test_a_one_line_cube_moves_without_offset_arrays(budget) -> None:
    """A one-line cube's line stride is never stepped over (NVDLA ignores it; 0 here): its bytes are one span,
    moved without the int64 offset arrays the budget would have to hold (8 elements x 2 x 8 bytes)."""
    layout = CubeLayout(8, 1, 2, 0, 16, 8)
    space = AddressSpace("mem")
    space.write(0, bytes(64))  # the page the cube lands in, allocated before the budget is set
    budget(64)
    data = np.arange(-8, 8, dtype=np.int64).reshape(8, 1, 2)
    write_cube(space, 0x10, layout, data)
    np.testing.assert_array_equal(read_cube(space, 0x10, layout), data)
    assert space.read(0x10, 16).view(np.int8).tolist() == [-8, -6, -4, -2, 0, 2, 4, 6, -7, -5, -3, -1, 1, 3, 5, 7]


def test_a_cube_spanning_exactly_64_mib_is_read_without_offset_arrays(budget) -> None:
    """Two lines 64 MiB - 8 bytes apart span exactly 64 MiB: still read as one span through a strided view, so
    only the 16 elements are picked out and no int64 offset arrays are made (a budget of 64 bytes is enough;
    reading unwritten memory allocates no pages)."""
    line = (64 << 20) - 8
    layout = CubeLayout(8, 2, 1, line, 2 * line, 8)
    assert layout.span() == 64 << 20
    space = AddressSpace("mem")
    space.write(0, bytes(range(1, 9)))
    budget(64)
    want = np.zeros((8, 2, 1), dtype=np.int64)
    want[:, 0, 0] = np.arange(1, 9)
    np.testing.assert_array_equal(read_cube(space, 0, layout), want)


def test_a_cube_spanning_exactly_64_mib_is_written_without_offset_arrays(budget) -> None:
    """The same 64 MiB span written: one span and a strided view, so only the 16 elements change (the bytes
    between the lines are written back as they were) and no offset arrays are made."""
    line = (64 << 20) - 8
    layout = CubeLayout(8, 2, 1, line, 2 * line, 8)
    space = AddressSpace("mem")
    space.fill(0, 64 << 20, 0x77)  # every page allocated before the budget is set
    budget(64)
    data = np.arange(16, dtype=np.int64).reshape(8, 2, 1)
    write_cube(space, 0, layout, data)
    assert space.read(0, 9).tolist() == [0, 2, 4, 6, 8, 10, 12, 14, 0x77]
    assert space.read(line - 1, 9).tolist() == [0x77, 1, 3, 5, 7, 9, 11, 13, 15]
