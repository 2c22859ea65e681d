"""The memory budget inside the golden memory: allocated pages count against it, reads and CRCs of
unwritten memory allocate nothing, and the CRC of zeros is zlib's without materialising them."""
from __future__ import annotations

import zlib

import numpy as np
import pytest

from golden.budget import MemoryBudgetError, set_max_memory
from golden.crc import crc32_zeros
from golden.layout import CubeLayout, read_cube
from golden.memory import PAGE_SIZE, Memory


@pytest.fixture
def budget():
    """Set a budget for one test and clear it afterwards (it is process-wide)."""
    yield set_max_memory
    set_max_memory(None)


@pytest.mark.parametrize("n", [0, 1, 3, 255, PAGE_SIZE - 1, PAGE_SIZE, 3 * PAGE_SIZE + 17])
@pytest.mark.parametrize("start", [0, 0xDEADBEEF, zlib.crc32(b"nvdla")])
def test_crc32_zeros_is_zlibs(n: int, start: int) -> None:
    assert crc32_zeros(start, n) == zlib.crc32(bytes(n), start)


def test_crc_of_unwritten_terabyte_allocates_nothing() -> None:
    mem = Memory()
    size = (1 << 40) - 1
    assert mem.dram.crc32(0, size) == crc32_zeros(0, size)
    assert mem.dram.allocated_bytes() == 0


def test_crc_mixes_written_pages_and_unwritten_runs() -> None:
    mem = Memory()
    data = np.arange(1000, dtype=np.uint8)
    mem.write(5 * PAGE_SIZE + 100, data)
    mem.write(9 * PAGE_SIZE - 3, b"\x01\x02\x03\x04\x05\x06")
    size = 12 * PAGE_SIZE + 7
    assert mem.dram.crc32(17, size) == zlib.crc32(mem.dram.read_bytes(17, size))


def test_zero_fill_of_unwritten_memory_allocates_nothing(budget) -> None:
    budget(4 * PAGE_SIZE)
    mem = Memory()
    mem.fill(0x8000_0000, 1 << 32, 0)  # mem_init ALL_ZERO of 4 GiB
    assert mem.dram.allocated_bytes() == 0


def test_write_beyond_the_budget_names_space_and_address(budget) -> None:
    budget(4 * PAGE_SIZE)
    mem = Memory()
    mem.write(0, bytes(3 * PAGE_SIZE))
    with pytest.raises(MemoryBudgetError, match=r"pri_mem write at 0x80000000 .*exceeds the memory budget of 256 KiB"):
        mem.write(0x8000_0000, bytes(2 * PAGE_SIZE))
    assert mem.dram.allocated_bytes() == 3 * PAGE_SIZE  # refused before any page was allocated
    mem.write(100, b"\xff" * 1000)  # rewriting allocated pages costs nothing


def test_both_memories_share_one_budget(budget) -> None:
    budget(4 * PAGE_SIZE)
    mem = Memory()
    mem.dram.write(0, bytes(3 * PAGE_SIZE))
    with pytest.raises(MemoryBudgetError, match=r"sec_mem write at 0x50000000"):
        mem.cvsram.fill(0x5000_0000, 2 * PAGE_SIZE, 0xFF)


def test_scatter_beyond_the_budget_is_refused(budget) -> None:
    budget(4 * PAGE_SIZE)
    mem = Memory()
    offsets = np.arange(8, dtype=np.int64) * (128 << 20)  # 8 pages far apart: the page-by-page path
    with pytest.raises(MemoryBudgetError, match=r"pri_mem write at 0x0 "):
        mem.dram.scatter(0, offsets, np.ones(8, dtype=np.uint8))


def test_reading_more_than_the_budget_is_refused(budget) -> None:
    budget(32 << 20)
    with pytest.raises(MemoryBudgetError, match=r"pri_mem read at 0x80000000: 96 MiB exceeds"):
        Memory().read(0x8000_0000, 96 << 20)


def test_a_cube_beyond_the_budget_is_refused_before_its_offsets(budget) -> None:
    """Registers declare cubes: 8192^3 int8 would be 8 TiB of int64 offsets and values."""
    budget(1 << 30)
    cube = CubeLayout(8192, 8192, 8192, 8192 * 32, 8192 * 8192 * 32, 32)
    with pytest.raises(MemoryBudgetError, match=r"feature cube 8192x8192x8192 as int64 offsets and values: 8 TiB"):
        read_cube(Memory().dram, 0x8000_0000, cube)


def test_a_wide_scatter_counts_each_new_page_once(budget) -> None:
    """A scatter wider than one span goes page by page: each page it allocates counts once against the
    budget, so three far-apart pages fit a four-page budget and leave room for exactly one more."""
    budget(4 * PAGE_SIZE)
    mem = Memory()
    offsets = np.arange(3, dtype=np.int64) * (128 << 20)
    mem.dram.scatter(0, offsets, np.full(3, 7, dtype=np.uint8))
    assert mem.dram.allocated_bytes() == 3 * PAGE_SIZE
    assert (mem.dram.gather(0, offsets) == 7).all()
    mem.cvsram.write(0, b"\x01")  # the fourth page (both memories share the budget)
    with pytest.raises(MemoryBudgetError, match=r"pri_mem write at 0x40000000"):
        mem.dram.write(1 << 30, b"\x01")


def test_a_fill_at_address_zero_is_checked_against_the_budget(budget) -> None:
    """mem_init with a pattern allocates every page it covers: from address 0 too it is refused before any
    page is allocated when they do not fit."""
    budget(4 * PAGE_SIZE)
    mem = Memory()
    with pytest.raises(MemoryBudgetError, match=r"pri_mem write at 0x0 "):
        mem.fill(0, 5 * PAGE_SIZE, 0xA5)
    assert mem.dram.allocated_bytes() == 0


def test_a_narrow_scatter_allocates_only_the_pages_it_writes(budget) -> None:
    """A strided write far from its base address (a cube's last surfaces) takes the pages its bytes land in,
    not the pages between the base and them, so it fits a budget of one page."""
    budget(PAGE_SIZE)
    mem = Memory()
    offsets = np.array([0x30_0010, 0x30_0000, 0x30_0020], dtype=np.int64)
    mem.dram.scatter(0x8000_0000, offsets, np.array([1, 2, 3], dtype=np.uint8))
    assert mem.dram.allocated_bytes() == PAGE_SIZE
    assert mem.dram.gather(0x8000_0000, offsets).tolist() == [1, 2, 3]


def test_the_budget_holds_exactly_its_pages(budget) -> None:
    """A fresh memory has no page allocated: a budget of four pages takes four pages' writes, of both memories
    together, and refuses only the fifth."""
    budget(4 * PAGE_SIZE)
    mem = Memory()
    mem.dram.write(0, bytes(3 * PAGE_SIZE))
    mem.cvsram.write(0, b"\x01")
    with pytest.raises(MemoryBudgetError):
        mem.dram.write(3 * PAGE_SIZE, b"\x01")


def test_a_read_wider_than_64_mib_is_checked_against_the_budget(budget) -> None:
    """A read allocates its result: one of more than 64 MiB (a declared transfer size) is refused by a budget
    it exceeds before the array is made, naming the space and address."""
    budget(1 << 20)
    mem = Memory()
    with pytest.raises(MemoryBudgetError, match=r"pri_mem read at 0x8000000"):
        mem.dram.read(0x800_0000, (64 << 20) + 1)


def test_gathering_two_bytes_64_mib_apart_needs_no_budget(budget) -> None:
    """A gather reads memory, it allocates no pages: two bytes whose addresses span exactly 64 MiB are read
    under a budget of one page (the only page written, the first byte's)."""
    mem = Memory()
    mem.dram.write(0x100, b"\x5a")
    budget(PAGE_SIZE)
    got = mem.dram.gather(0x100, np.array([0, (64 << 20) - 1], dtype=np.int64))
    assert got.tolist() == [0x5A, 0]


def test_a_scatter_ending_on_a_page_boundary_takes_no_next_page(budget) -> None:
    """Scattered bytes take the pages they land in and no more: bytes up to the last of a page leave the next
    page unallocated, so they fit a budget of that one page."""
    budget(PAGE_SIZE)
    mem = Memory()
    offsets = np.array([PAGE_SIZE - 1, PAGE_SIZE - 3], dtype=np.int64)
    mem.dram.scatter(0, offsets, np.array([9, 8], dtype=np.uint8))
    assert mem.dram.allocated_bytes() == PAGE_SIZE
    assert mem.dram.gather(0, offsets).tolist() == [9, 8]


def test_empty_ranges_are_legal_for_crc_and_fill() -> None:
    """A zero-byte range is empty, not an error: its CRC-32 is zlib's of no bytes (0) and zero-filling it
    changes nothing."""
    mem = Memory()
    mem.write(0x8000_0000, b"\x11\x22")
    assert mem.crc32(0x8000_0001, 0) == zlib.crc32(b"") == 0
    mem.fill(0x8000_0001, 0, 0)
    assert mem.read(0x8000_0000, 2).tobytes() == b"\x11\x22"
