"""Sparse byte-addressed memory: primary DRAM (MC) and CV-SRAM (CV), with numpy bulk I/O.

Pages are allocated on first write; unwritten bytes read as 0, which is what NVDLA's memory model and
``check_crc`` assume. Engines move whole cubes with ``gather``/``scatter`` over offset arrays, so no
Python loop runs per element.

Allocated pages (of both spaces of a ``Memory`` together) count against the memory budget
(``golden.budget``): a write that would take more raises ``MemoryBudgetError`` naming the space and
address, so a trace that fills 8 GB ends in one line instead of the OOM killer. Reading or CRC-ing memory
never allocates pages; a CRC over unwritten memory is computed without materialising the zeros.
"""
from __future__ import annotations

import zlib
from typing import Iterator

import numpy as np

from golden.budget import MemoryBudgetError, check_size, max_memory
from golden.crc import crc32_zeros

PAGE_BITS = 16
PAGE_SIZE = 1 << PAGE_BITS
#: Largest span (bytes) that gather/scatter read as one block; wider strided accesses go page by page.
_SPAN_LIMIT = 64 << 20

BytesLike = bytes | bytearray | memoryview | np.ndarray


class PagePool:
    """The pages allocated by the address spaces that share one memory budget."""

    def __init__(self) -> None:
        self.pages = 0


class AddressSpace:
    """One sparse address space."""

    def __init__(self, name: str, pool: PagePool | None = None) -> None:
        self.name = name
        self._pages: dict[int, np.ndarray] = {}
        self._pool = pool if pool is not None else PagePool()

    def _reserve(self, new_pages: int, addr: int) -> None:
        """Account for ``new_pages`` about to be allocated by a write at ``addr``, or refuse it."""
        if new_pages <= 0:
            return
        total = (self._pool.pages + new_pages) * PAGE_SIZE
        limit = max_memory()
        if total > limit:
            raise MemoryBudgetError(f"{self.name} write at {addr:#x} (memory in use)", total, limit)
        self._pool.pages += new_pages

    def _missing_pages(self, addr: int, size: int) -> int:
        """How many pages of [addr, addr+size) are not allocated yet."""
        if size <= 0:
            return 0
        first, last = addr >> PAGE_BITS, (addr + size - 1) >> PAGE_BITS
        return sum(1 for page in range(first, last + 1) if page not in self._pages)

    # ---- contiguous access ------------------------------------------------------------------
    def _chunks(self, addr: int, size: int) -> Iterator[tuple[int, int, int, int]]:
        """(page number, offset in page, offset in buffer, length) covering [addr, addr+size)."""
        if addr < 0 or size < 0:
            raise ValueError(f"{self.name}: negative address or size ({addr:#x}, {size})")
        done = 0
        while done < size:
            a = addr + done
            page, off = a >> PAGE_BITS, a & (PAGE_SIZE - 1)
            n = min(PAGE_SIZE - off, size - done)
            yield page, off, done, n
            done += n

    def write(self, addr: int, data: BytesLike) -> None:
        buf = np.frombuffer(bytes(data), dtype=np.uint8) if not isinstance(data, np.ndarray) else data.reshape(-1).view(np.uint8)
        if addr >= 0:
            self._reserve(self._missing_pages(addr, buf.size), addr)
        for page, off, pos, n in self._chunks(addr, buf.size):
            p = self._pages.get(page)
            if p is None:
                p = self._pages[page] = np.zeros(PAGE_SIZE, dtype=np.uint8)
            p[off : off + n] = buf[pos : pos + n]

    def _allocated_in(self, addr: int, size: int) -> Iterator[tuple[int, int, int]]:
        """(page, first byte, end byte) of the allocated pages in [addr, addr+size), ascending: what a
        zero fill or a CRC has to look at, however large the range."""
        if addr < 0 or size < 0:
            raise ValueError(f"{self.name}: negative address or size ({addr:#x}, {size})")
        end = addr + size
        first, last = addr >> PAGE_BITS, (end - 1) >> PAGE_BITS
        if last - first + 1 <= len(self._pages):
            pages = [p for p in range(first, last + 1) if p in self._pages]
        else:
            pages = sorted(p for p in self._pages if first <= p <= last)
        for page in pages:
            yield page, max(page << PAGE_BITS, addr), min((page + 1) << PAGE_BITS, end)

    def fill(self, addr: int, size: int, value: int = 0) -> None:
        if value == 0:  # absent pages already read as zero: only allocated ones are cleared
            for page, start, stop in self._allocated_in(addr, size):
                off = start & (PAGE_SIZE - 1)
                self._pages[page][off : off + stop - start] = 0
            return
        if addr >= 0:
            self._reserve(self._missing_pages(addr, size), addr)
        for page, off, _, n in self._chunks(addr, size):
            p = self._pages.get(page)
            if p is None:
                p = self._pages[page] = np.zeros(PAGE_SIZE, dtype=np.uint8)
            p[off : off + n] = value

    def read(self, addr: int, size: int) -> np.ndarray:
        """A fresh uint8 array of ``size`` bytes (checked against the budget first: it is allocated)."""
        if size > _SPAN_LIMIT:  # smaller reads fit any sane budget; engines make many of them
            check_size(f"{self.name} read at {addr:#x}", size)
        out = np.zeros(size, dtype=np.uint8)
        for page, off, pos, n in self._chunks(addr, size):
            p = self._pages.get(page)
            if p is not None:
                out[pos : pos + n] = p[off : off + n]
        return out

    def read_bytes(self, addr: int, size: int) -> bytes:
        return self.read(addr, size).tobytes()

    def crc32(self, addr: int, size: int) -> int:
        """CRC-32 of [addr, addr+size) in ascending address order, exactly as NVDLA's ``check_crc``:
        the standard reflected IEEE CRC-32, which is zlib's. Unwritten runs cost no memory."""
        crc, pos = 0, addr
        for page, start, stop in self._allocated_in(addr, size):
            off = start & (PAGE_SIZE - 1)
            crc = zlib.crc32(self._pages[page][off : off + stop - start], crc32_zeros(crc, start - pos))
            pos = stop
        return crc32_zeros(crc, addr + size - pos)

    # ---- strided access over offset arrays ---------------------------------------------------------
    def gather(self, base: int, offsets: np.ndarray) -> np.ndarray:
        """Bytes at ``base + offsets`` (any shape); result has the shape of ``offsets``."""
        offsets = np.asarray(offsets, dtype=np.int64)
        if offsets.size == 0:
            return np.zeros(offsets.shape, dtype=np.uint8)
        lo, hi = int(offsets.min()), int(offsets.max())
        if hi - lo < _SPAN_LIMIT:
            return self.read(base + lo, hi - lo + 1)[offsets - lo]
        addrs = base + offsets
        out = np.zeros(offsets.shape, dtype=np.uint8)
        pages = addrs >> PAGE_BITS
        for page in np.unique(pages):
            p = self._pages.get(int(page))
            if p is not None:
                sel = pages == page
                out[sel] = p[addrs[sel] & (PAGE_SIZE - 1)]
        return out

    def scatter(self, base: int, offsets: np.ndarray, values: np.ndarray) -> None:
        """Write ``values`` (uint8, same shape as ``offsets``) to ``base + offsets``."""
        offsets = np.asarray(offsets, dtype=np.int64).reshape(-1)
        values = np.asarray(values).astype(np.uint8, copy=False).reshape(-1)
        if offsets.size == 0:
            return
        lo, hi = int(offsets.min()), int(offsets.max())
        if hi - lo < _SPAN_LIMIT:
            span = self.read(base + lo, hi - lo + 1)
            span[offsets - lo] = values
            self.write(base + lo, span)
            return
        addrs = base + offsets
        pages = addrs >> PAGE_BITS
        touched = np.unique(pages)
        self._reserve(sum(1 for page in touched if int(page) not in self._pages), base + lo)
        for page in touched:
            sel = pages == page
            p = self._pages.get(int(page))
            if p is None:
                p = self._pages[int(page)] = np.zeros(PAGE_SIZE, dtype=np.uint8)
            p[addrs[sel] & (PAGE_SIZE - 1)] = values[sel]

    def allocated_bytes(self) -> int:
        return len(self._pages) * PAGE_SIZE


class Memory:
    """The DLA's memories: ``dram`` (primary, MC) and ``cvsram`` (secondary, CV).

    The plain methods address primary DRAM, which is what traces and the Target protocol use unless
    they name the secondary memory.
    """

    #: RAM_TYPE field encoding in NVDLA's DMA config registers: 0 = CV (CV-SRAM), 1 = MC (DRAM).
    RAM_CV, RAM_MC = 0, 1

    def __init__(self) -> None:
        pool = PagePool()  # one budget for both memories
        self.dram = AddressSpace("pri_mem", pool)
        self.cvsram = AddressSpace("sec_mem", pool)

    def space(self, ram_type: int | str = 1) -> AddressSpace:
        """The space for a RAM_TYPE field value (1 MC, 0 CV) or a trace name (pri_mem/sec_mem)."""
        if ram_type in (1, "pri_mem", "pri", "1", "dram", "mc"):
            return self.dram
        if ram_type in (0, "sec_mem", "sec", "2", "cvsram", "cv"):
            return self.cvsram
        raise ValueError(f"unknown memory {ram_type!r}")

    def write(self, addr: int, data: BytesLike) -> None:
        self.dram.write(addr, data)

    def read(self, addr: int, size: int) -> np.ndarray:
        return self.dram.read(addr, size)

    def fill(self, addr: int, size: int, value: int = 0) -> None:
        self.dram.fill(addr, size, value)

    def crc32(self, addr: int, size: int) -> int:
        return self.dram.crc32(addr, size)
