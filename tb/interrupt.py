"""Interrupt monitor: watches NVDLA's level interrupt ``dla_intr``.

The line is ``|(GLB.S_INTR_STATUS & ~S_INTR_MASK)`` and stays high until software writes the status bits
back (write-1-to-clear), so the monitor records edges and levels and lets a waiter block until the
line rises. It is edge driven (no per-cycle Python), so it costs nothing while the DUT computes.
"""
from __future__ import annotations

import cocotb
from cocotb.simtime import get_sim_time
from cocotb.triggers import Event, FallingEdge, First, RisingEdge, Timer


class InterruptMonitor:
    def __init__(self, signal) -> None:
        self.signal = signal
        self.rises = 0
        self.falls = 0
        self.last_rise_ns: float | None = None
        self.last_fall_ns: float | None = None
        self._rose = Event()
        self._tasks = [cocotb.start_soon(self._watch_rise()), cocotb.start_soon(self._watch_fall())]

    @property
    def level(self) -> bool:
        return self.signal.value == 1

    async def _watch_rise(self) -> None:
        while True:
            await RisingEdge(self.signal)
            self.rises += 1
            self.last_rise_ns = get_sim_time("ns")
            self._rose.set()

    async def _watch_fall(self) -> None:
        while True:
            await FallingEdge(self.signal)
            self.falls += 1
            self.last_fall_ns = get_sim_time("ns")

    async def wait_rise(self, timeout_ns: float | None = None) -> bool:
        """Wait for the next rising edge; False if ``timeout_ns`` passed first."""
        self._rose.clear()
        if timeout_ns is None:
            await self._rose.wait()
            return True
        await First(self._rose.wait(), Timer(max(timeout_ns, 1), "ns", round_mode="ceil"))
        return self._rose.is_set()

    async def wait_high(self, timeout_ns: float | None = None) -> bool:
        """Return at once if the line is high, else wait for it to rise (or the timeout)."""
        if self.level:
            return True
        return await self.wait_rise(timeout_ns)

    def describe(self) -> str:
        state = "high" if self.level else "low"
        text = f"dla_intr {state}, rose {self.rises} time(s)"
        if self.last_rise_ns is not None:
            text += f", last at {self.last_rise_ns:.0f} ns"
        return text
