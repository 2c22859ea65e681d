"""Target over the in-process golden model."""
from __future__ import annotations

from golden.config import HwConfig
from golden.dla import Dla
from runtime.target import InterruptTimeout


class GoldenTarget:
    """The golden model behind the Target protocol. Engines run inside the enabling register write, so
    an interrupt is either already raised when awaited or will never be."""

    name = "golden"

    def __init__(self, hw: HwConfig, dla: Dla | None = None) -> None:
        self.hw = hw
        self.dla = dla if dla is not None else Dla(hw)

    async def write_reg(self, addr: int, value: int) -> None:
        self.dla.write_reg(addr, value)

    async def read_reg(self, addr: int) -> int:
        return self.dla.read_reg(addr)

    async def write_mem(self, addr: int, data: bytes, mem: str = "pri_mem") -> None:
        self.dla.mem.space(mem).write(addr, data)

    async def read_mem(self, addr: int, size: int, mem: str = "pri_mem") -> bytes:
        return self.dla.mem.space(mem).read_bytes(addr, size)

    async def wait_interrupt(self, bits: int, timeout_ns: int) -> int:
        got = self.dla.intr_status & bits
        if not got:
            pending = ", ".join(self.dla.pending()) or "nothing enabled"
            raise InterruptTimeout(f"interrupt bits {bits:#x} never raised (waiting: {pending})")
        return got
