"""Sparse byte-addressed memory: primary DRAM (MC) and CV-SRAM (CV), with numpy bulk I/O.

Pages are allocated on first write; unwritten bytes read as 0, which is what NVDLA's memory model and
``check_crc`` assume. Engines move whole cubes with ``gather``/``scatter`` over offset arrays, so no
Python loop runs per element.
"""
from __future__ import annotations

import zlib
from typing import Iterator

import numpy as np

PAGE_BITS = 16
PAGE_SIZE = 1 << PAGE_BITS
#: Largest span (bytes) that gather/scatter read as one block; wider strided accesses go page by page.
_SPAN_LIMIT = 64 << 20

BytesLike = bytes | bytearray | memoryview | np.ndarray


class AddressSpace:
    """One sparse address space."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._pages: dict[int, np.ndarray] = {}

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
        for page, off, pos, n in self._chunks(addr, buf.size):
            p = self._pages.get(page)
            if p is None:
                p = self._pages[page] = np.zeros(PAGE_SIZE, dtype=np.uint8)
            p[off : off + n] = buf[pos : pos + n]

    def fill(self, addr: int, size: int, value: int = 0) -> None:
        for page, off, _, n in self._chunks(addr, size):
            p = self._pages.get(page)
            if p is None:
                if value == 0:
                    continue  # absent pages already read as zero
                p = self._pages[page] = np.zeros(PAGE_SIZE, dtype=np.uint8)
            p[off : off + n] = value

    def read(self, addr: int, size: int) -> np.ndarray:
        """A fresh uint8 array of ``size`` bytes."""
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
        the standard reflected IEEE CRC-32, which is zlib's."""
        crc = 0
        for page, off, _, n in self._chunks(addr, size):
            p = self._pages.get(page)
            crc = zlib.crc32(p[off : off + n] if p is not None else bytes(n), crc)
        return crc

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
        for page in np.unique(pages):
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
        self.dram = AddressSpace("pri_mem")
        self.cvsram = AddressSpace("sec_mem")

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
