from __future__ import annotations

import zlib

import numpy as np
import pytest

from golden.layout import CubeLayout, read_cube, write_cube
from golden.memory import PAGE_SIZE, Memory


def test_unwritten_memory_reads_zero_and_crc_matches_zlib():
    mem = Memory()
    assert not mem.read(0x8000_0000, 16).any()
    data = bytes(range(256)) * 600  # crosses page boundaries
    mem.write(0x8000_FF00, data)
    assert mem.read(0x8000_FF00, len(data)).tobytes() == data
    assert mem.crc32(0x8000_FF00, len(data)) == zlib.crc32(data)
    # a range covering unwritten bytes counts them as zeros
    assert mem.crc32(0x8000_FE00, 0x200) == zlib.crc32(bytes(0x100) + data[:0x100])


def test_memory_is_sparse():
    mem = Memory()
    mem.write(0x0, b"\x01")
    mem.write(0xFFFF_0000, b"\x02")
    assert mem.dram.allocated_bytes() == 2 * PAGE_SIZE
    mem.fill(0x4000_0000, 1 << 24, 0)
    assert mem.dram.allocated_bytes() == 2 * PAGE_SIZE


def test_cvsram_is_a_separate_space():
    mem = Memory()
    mem.space("sec_mem").write(0x100, b"\xAA")
    assert mem.read(0x100, 1)[0] == 0
    assert mem.space(0).read(0x100, 1)[0] == 0xAA


def test_gather_scatter_round_trip_including_wide_spans():
    mem = Memory()
    rng = np.random.default_rng(0)
    offs = np.array([0, 5, 1 << 30, (1 << 30) + 3])  # wider than the span limit
    vals = rng.integers(0, 256, offs.size).astype(np.uint8)
    mem.dram.scatter(0x1000, offs, vals)
    assert (mem.dram.gather(0x1000, offs) == vals).all()


def test_cube_layout_places_elements_per_notes():
    # element (c, h, w) at (c // A)*surf + h*line + w*A + c % A
    lay = CubeLayout(channels=10, height=2, width=3, line_stride=0x40, surf_stride=0x100, atom=8)
    cube = np.arange(lay.padded_channels * 2 * 3).reshape(16, 2, 3) - 40
    mem = Memory()
    write_cube(mem.dram, 0x2000, lay, cube)
    raw = mem.read(0x2000, lay.span())
    c, h, w = 9, 1, 2
    assert raw[(c // 8) * 0x100 + h * 0x40 + w * 8 + c % 8].view(np.int8) == cube[c, h, w]
    assert (read_cube(mem.dram, 0x2000, lay) == cube).all()


def test_rha_rounds_half_away_and_is_exact_for_huge_shifts():
    from golden.arith import rha

    assert rha(5, 1) == 3 and rha(-5, 1) == -3 and rha(4, 1) == 2 and rha(-6, 2) == -2
    assert rha(3, -2) == 12  # a negative shift shifts left
    big = (1 << 62) + (1 << 40)
    assert rha(big, 41) == (big + (1 << 40)) >> 41
    assert rha(-big, 1023) == 0 and rha(big, 64) == 0 and rha(1 << 62, 63) == 1
    arr = rha(np.array([7, -7, 7, 1 << 61]), np.array([1, 1, -1, 1000]))
    assert arr.tolist() == [4, -4, 14, 0]


def test_fill_without_a_value_zeroes():
    """``Memory.fill(addr, size)`` is mem_init ALL_ZERO: written bytes in the range read 0 afterwards, the
    bytes around it keep their values."""
    mem = Memory()
    mem.write(0x1000, b"\xAA" * 64)
    mem.fill(0x1010, 32)
    assert mem.read(0x1000, 64).tobytes() == b"\xAA" * 16 + bytes(32) + b"\xAA" * 16


def test_negative_addresses_and_sizes_are_refused():
    """No DMA address or size is negative: one that is (an underflowed base + offset) is a model error,
    refused rather than read as zeros or written to a page no address maps to; strided accesses over a
    narrow span refuse it like contiguous ones."""
    mem = Memory()
    with pytest.raises(ValueError, match="negative address or size"):
        mem.fill(0x1000, -1, 0x5A)
    with pytest.raises(ValueError, match="negative address or size"):
        mem.dram.gather(-8, np.arange(4))
    with pytest.raises(ValueError, match="negative address or size"):
        mem.dram.scatter(-8, np.arange(4), np.ones(4, dtype=np.uint8))
    assert mem.dram.allocated_bytes() == 0


@pytest.mark.parametrize("bpe", [2, 4])
def test_wide_elements_are_little_endian_and_read_back_signed_or_unsigned(bpe: int) -> None:
    """An element of ``bpe`` bytes is stored least significant byte first (two's complement, truncated to its
    width); a signed read sign-extends it, an unsigned one (fp16 bit patterns) zero-extends it."""
    bits = 8 * bpe
    lay = CubeLayout(channels=4, height=1, width=1, line_stride=4 * bpe, surf_stride=4 * bpe, atom=4, bpe=bpe)
    values = [-1, (1 << (bits - 1)) - 1, -(1 << (bits - 1)), 0x1234_5678 & ((1 << (bits - 1)) - 1)]
    mem = Memory()
    write_cube(mem.dram, 0x100, lay, np.array(values).reshape(4, 1, 1))
    raw = mem.read(0x100, 4 * bpe).tobytes()
    assert raw == b"".join((v % (1 << bits)).to_bytes(bpe, "little") for v in values)
    assert read_cube(mem.dram, 0x100, lay)[:, 0, 0].tolist() == values
    assert read_cube(mem.dram, 0x100, lay, signed=False)[:, 0, 0].tolist() == [v % (1 << bits) for v in values]
