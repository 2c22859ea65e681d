"""Reference math for BDMA: a strided byte copy, written as plain loops over a byte map.

Rules: NVDLA_NOTES.md section 4 "BDMA" (``cmod/bdma/BdmaCore.cpp``), section 2 (queue and launch):
for each surface s in 0..SURF_REPEAT and line l in 0..LINE_REPEAT, (LINE.SIZE+1)*32 bytes go from
``src + s*SRC_SURF + l*SRC_LINE`` to ``dst + s*DST_SURF + l*DST_LINE``; transfers of a group run in
queue order; each transfer reads its whole source before writing (a transfer whose destination overlaps
its own source in the same memory is illegal, see ``overlaps``). Memories are plain ``{address: byte}``
dicts (absent bytes read 0), keyed by RAM type: 1 MC (DRAM), 0 CV (CV-SRAM).
"""
from __future__ import annotations

from dataclasses import dataclass

from .arith import check_range

MC, CV = 1, 0


@dataclass(frozen=True)
class BdmaTransfer:
    """One BDMA operation in register terms: sizes as the *_REPEAT/LINE fields (count - 1), addresses and
    strides in bytes (multiples of 32, as the [31:5] fields hold them)."""

    src: int
    dst: int
    line_size: int  # CFG_LINE.SIZE: (bytes per line / 32) - 1
    line_repeat: int  # CFG_LINE_REPEAT.NUMBER: lines per surface - 1
    surf_repeat: int  # CFG_SURF_REPEAT.NUMBER: surfaces - 1
    src_line: int
    dst_line: int
    src_surf: int
    dst_surf: int
    src_ram: int = MC
    dst_ram: int = MC

    def __post_init__(self) -> None:
        check_range("line_size", self.line_size, 0, (1 << 13) - 1)
        check_range("line_repeat", self.line_repeat, 0, (1 << 24) - 1)
        check_range("surf_repeat", self.surf_repeat, 0, (1 << 24) - 1)
        for name in ("src", "dst", "src_line", "dst_line", "src_surf", "dst_surf"):
            value = getattr(self, name)
            if value < 0 or value % 32:
                raise ValueError(f"{name}={value:#x} is not a non-negative multiple of 32")
        check_range("src_ram", self.src_ram, 0, 1)
        check_range("dst_ram", self.dst_ram, 0, 1)

    @property
    def line_bytes(self) -> int:
        return (self.line_size + 1) * 32

    def line_addresses(self, side: str) -> list[int]:
        """Start address of every line of ``side`` ("src" or "dst"), surface-major."""
        base = getattr(self, side)
        line, surf = getattr(self, f"{side}_line"), getattr(self, f"{side}_surf")
        out = []
        for s in range(self.surf_repeat + 1):
            for n in range(self.line_repeat + 1):
                out.append(base + s * surf + n * line)
        return out


def overlaps(t: BdmaTransfer) -> bool:
    """Whether a destination byte is also a source byte of the same transfer in the same memory."""
    if t.src_ram != t.dst_ram:
        return False
    src_bytes = set()
    for a in t.line_addresses("src"):
        src_bytes.update(range(a, a + t.line_bytes))
    for a in t.line_addresses("dst"):
        for b in range(a, a + t.line_bytes):
            if b in src_bytes:
                return True
    return False


def bdma_copy(memories: dict[int, dict[int, int]], transfers: list[BdmaTransfer]) -> None:
    """Run ``transfers`` (one launched group) in order on ``memories`` in place."""
    for t in transfers:
        src_mem, dst_mem = memories[t.src_ram], memories[t.dst_ram]
        lines = []
        for a in t.line_addresses("src"):
            lines.append([src_mem.get(a + i, 0) for i in range(t.line_bytes)])
        for a, data in zip(t.line_addresses("dst"), lines):
            for i, byte in enumerate(data):
                dst_mem[a + i] = byte
