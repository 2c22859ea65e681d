"""The Target protocol: the only way the player and executor talk to a DLA (golden model or RTL).

Register addresses are CSB *byte* addresses of the config's address map; an RTL target converts them
to CSB word addresses. ``mem`` names the memory: ``pri_mem`` (DRAM) or ``sec_mem`` (CV-SRAM).
"""
from __future__ import annotations

from typing import Protocol, runtime_checkable

from golden.config import HwConfig


class InterruptTimeout(Exception):
    """No awaited interrupt bit was raised within the timeout."""


@runtime_checkable
class Target(Protocol):
    hw: HwConfig

    async def write_reg(self, addr: int, value: int) -> None: ...

    async def read_reg(self, addr: int) -> int: ...

    async def write_mem(self, addr: int, data: bytes, mem: str = "pri_mem") -> None: ...

    async def read_mem(self, addr: int, size: int, mem: str = "pri_mem") -> bytes: ...

    async def wait_interrupt(self, bits: int, timeout_ns: int) -> int:
        """Wait until any of ``bits`` is set in GLB.S_INTR_STATUS; return the set bits among them.
        Raises InterruptTimeout."""
        ...
