"""``RtlTarget``: the ``runtime.target.Target`` protocol over a DUT under cocotb.

Registers go over the CSB master (byte address -> CSB word address), memory is the golden ``Memory``
the DUT's AXI ports are served from (backdoor access, as NVDLA's own testbench loads and dumps its
memory model), and interrupts are GLB.S_INTR_STATUS bits: the line (``dla_intr``) wakes the waiter at
once, and the status register is read every ``poll_cycles`` as well, because traces mask most done
bits (MASK = 0x3F03FC leaves only SDP on the line) yet still wait for them.

``activity`` and ``csb.last`` say what the target was doing, for reports on a DUT that hangs.
``traffic`` (None unless ``count_traffic`` is called) counts the bytes the DUT moves on its AXI ports,
labelled by the runtime with the engines of the operation it is running (``runtime.profile``).
"""
from __future__ import annotations

from cocotb.simtime import get_sim_time

from golden.config import HwConfig
from golden.dma import CountedSpace, Traffic
from golden.memory import Memory
from golden.regs import register_map
from runtime.target import InterruptTimeout
from tb.csb import CsbMaster
from tb.interrupt import InterruptMonitor


class RtlTarget:
    name = "rtl"

    def __init__(self, hw: HwConfig, csb: CsbMaster, memory: Memory, interrupt: InterruptMonitor,
                 clock_ns: float, poll_cycles: int = 256) -> None:
        self.hw = hw
        self.csb = csb
        self.memory = memory
        self.interrupt = interrupt
        self.clock_ns = clock_ns
        self.poll_cycles = poll_cycles
        self.regmap = register_map(hw.address_map)
        self.intr_status_addr = self.regmap.address("GLB", "S_INTR_STATUS")
        self.activity = "idle"
        self.traffic: Traffic | None = None

    def count_traffic(self, rams) -> Traffic:
        """Count what the DUT reads and writes through ``rams`` (``tb.memory.DutMemory.rams``): their
        storage views get a counting address space; the runtime's own backdoor accesses stay uncounted."""
        self.traffic = Traffic()
        for ram in rams.values():
            view = ram.mem  # tb.memory.AddressSpaceView, the store AxiRam reads and writes
            view.space = CountedSpace(view.space, self.traffic)
        return self.traffic

    def register_name(self, addr: int) -> str:
        reg = self.regmap.lookup(addr)
        return reg.full_name if reg is not None else f"unmapped {addr:#x}"

    async def write_reg(self, addr: int, value: int) -> None:
        self.activity = f"writing {self.register_name(addr)}"
        await self.csb.write(addr, value)
        self.activity = "idle"

    async def read_reg(self, addr: int) -> int:
        self.activity = f"reading {self.register_name(addr)}"
        value = await self.csb.read(addr)
        self.activity = "idle"
        return value

    async def write_mem(self, addr: int, data: bytes, mem: str = "pri_mem") -> None:
        self.memory.space(mem).write(addr, data)

    async def read_mem(self, addr: int, size: int, mem: str = "pri_mem") -> bytes:
        return self.memory.space(mem).read_bytes(addr, size)

    async def wait_interrupt(self, bits: int, timeout_ns: int) -> int:
        start = get_sim_time("ns")
        deadline = start + timeout_ns
        poll_ns = self.poll_cycles * self.clock_ns
        status = 0
        while True:
            rises = self.interrupt.rises
            status = await self.read_reg(self.intr_status_addr)
            if status & bits:
                self.activity = "idle"
                return status & bits
            now = get_sim_time("ns")
            if now >= deadline:
                break
            self.activity = (f"waiting since {start:.0f} ns for GLB.S_INTR_STATUS bits {bits:#x} "
                             f"(last read {status:#x}; {self.interrupt.describe()})")
            if self.interrupt.rises == rises:  # the line did not rise while the status was being read
                await self.interrupt.wait_rise(min(poll_ns, deadline - now))
        self.activity = "idle"
        raise InterruptTimeout(f"GLB.S_INTR_STATUS bits {bits:#x} not set within {timeout_ns} ns "
                               f"(status {status:#x}, {self.interrupt.describe()})")
