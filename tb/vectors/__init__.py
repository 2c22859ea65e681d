"""Vector files for ``tb_nvdla.v`` (our RTL under a self-checking Verilog testbench, no cocotb): CSB, memory
and interrupt steps with expected answers. ``sim`` builds and runs it."""
from __future__ import annotations

from pathlib import Path

# step opcodes (tb_nvdla.v)
END, WRITE, WRITE_NP, READ, POLL, WAIT_INTR, IDLE, MEM_WRITE, MEM_CHECK, CHECK_INTR = range(10)
MASK32 = 0xFFFF_FFFF
MASK64 = (1 << 64) - 1


class Vectors:
    """An ordered list of testbench steps; ``save`` writes the $readmemh file."""

    def __init__(self) -> None:
        self.steps: list[tuple[int, int, int, int]] = []

    def _add(self, op: int, addr: int = 0, data: int = 0, mask: int = 0) -> None:
        self.steps.append((op, addr & MASK32, data & MASK64, mask & MASK64))

    def write(self, addr: int, value: int, nposted: bool = False) -> None:
        self._add(WRITE_NP if nposted else WRITE, addr, value)

    def read(self, addr: int, expect: int, mask: int = MASK32) -> None:
        self._add(READ, addr, expect, mask)

    def poll(self, addr: int, expect: int, mask: int = MASK32) -> None:
        self._add(POLL, addr, expect, mask)

    def wait_intr(self, level: int) -> None:
        self._add(WAIT_INTR, 0, level)

    def check_intr(self, level: int) -> None:
        self._add(CHECK_INTR, 0, level)

    def idle(self, cycles: int) -> None:
        self._add(IDLE, 0, cycles)

    def mem_write(self, addr: int, value: int) -> None:
        self._add(MEM_WRITE, addr, value)

    def mem_check(self, addr: int, value: int, mask: int = MASK64) -> None:
        self._add(MEM_CHECK, addr, value, mask)

    def save(self, path: Path) -> Path:
        lines = [f"{op:02x}{addr:08x}{data:016x}{mask:016x}" for op, addr, data, mask in self.steps]
        lines.append(f"{END:02x}" + "0" * 40)
        path.write_text("\n".join(lines) + "\n")
        return path
