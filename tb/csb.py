"""CSB master: drives NVDLA's register port (``csb2nvdla_*``) and collects its responses (``nvdla2csb_*``).

Protocol (NVDLA nv_small ``NV_nvdla``; facts from its RTL and its Verilator testbench):
- a request is taken on a rising ``dla_csb_clk`` edge with ``csb2nvdla_valid & csb2nvdla_ready``;
  ``csb2nvdla_addr[15:0]`` is the *word* address (byte address >> 2);
- posted writes (``nposted=0``, what NVDLA's own flows send) get no response at all, so they are
  pipelined back to back; non-posted writes are answered by a ``nvdla2csb_wr_complete`` pulse;
- a read is answered some cycles later (about 18 on NVDLA) by ``nvdla2csb_valid`` with the data; reads
  are in order, so one read at a time is outstanding.

No timeout lives here: a DUT that never answers leaves the transaction pending in ``last``, and the
per-trace watchdog reports it.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from cocotb.triggers import Lock, RisingEdge
from cocotb.simtime import get_sim_time


@dataclass
class CsbTransaction:
    """One CSB request as it happened; the times say how far it got."""

    write: bool
    addr: int  # byte address
    data: int | None  # write data, or the read response once it arrived
    nposted: bool = False
    issued_ns: float | None = None
    accepted_ns: float | None = None
    completed_ns: float | None = None

    def describe(self, name: Callable[[int], str] | None = None) -> str:
        reg = f"{name(self.addr)} ({self.addr:#x})" if name else f"{self.addr:#x}"
        if self.write:
            text = f"write {reg} = {self.data:#x}"
            if self.accepted_ns is None:
                return f"{text}, not accepted (csb2nvdla_ready low since {self.issued_ns:.0f} ns)"
            if self.nposted and self.completed_ns is None:
                return f"{text} (non-posted), accepted at {self.accepted_ns:.0f} ns, no wr_complete yet"
            return f"{text}, accepted at {self.accepted_ns:.0f} ns"
        text = f"read {reg}"
        if self.accepted_ns is None:
            return f"{text}, not accepted (csb2nvdla_ready low since {self.issued_ns:.0f} ns)"
        if self.completed_ns is None:
            return f"{text}, accepted at {self.accepted_ns:.0f} ns, no response yet"
        return f"{text} = {self.data:#x} at {self.completed_ns:.0f} ns"


def _bit(handle) -> bool:
    """A 1-bit signal as bool; X/Z read as 0 (Icarus before reset)."""
    return handle.value == 1


class CsbMaster:
    """Issues CSB reads and writes, one at a time, in order."""

    #: CSB addresses are 16-bit word addresses.
    ADDRESS_LIMIT = 1 << 18

    def __init__(self, dut, clock, nposted_writes: bool = False) -> None:
        self.valid = dut.csb2nvdla_valid
        self.ready = dut.csb2nvdla_ready
        self.addr = dut.csb2nvdla_addr
        self.wdat = dut.csb2nvdla_wdat
        self.write_ = dut.csb2nvdla_write
        self.nposted = dut.csb2nvdla_nposted
        self.rsp_valid = dut.nvdla2csb_valid
        self.rsp_data = dut.nvdla2csb_data
        self.wr_complete = dut.nvdla2csb_wr_complete
        self.clock = clock
        self.nposted_writes = nposted_writes
        self._edge = RisingEdge(clock)
        self._lock = Lock()
        self.last: CsbTransaction | None = None
        self.reads = 0
        self.writes = 0

    def idle(self) -> None:
        """Drive an idle request port (before and during reset)."""
        self.valid.value = 0
        self.addr.value = 0
        self.wdat.value = 0
        self.write_.value = 0
        self.nposted.value = 0

    async def write(self, addr: int, value: int, nposted: bool | None = None) -> None:
        nposted = self.nposted_writes if nposted is None else nposted
        async with self._lock:
            txn = CsbTransaction(True, addr, value & 0xFFFFFFFF, nposted)
            await self._request(txn)
            self.writes += 1
            if nposted:
                while True:
                    await self._edge
                    if _bit(self.wr_complete):
                        break
            txn.completed_ns = get_sim_time("ns")

    async def read(self, addr: int) -> int:
        async with self._lock:
            txn = CsbTransaction(False, addr, None)
            await self._request(txn)
            while True:
                # The response comes ~18 cycles later: sleep until nvdla2csb_valid rises instead of waking
                # on every edge; the edge after the rise samples it exactly as a per-edge loop would.
                if not _bit(self.rsp_valid):
                    await RisingEdge(self.rsp_valid)
                await self._edge
                if _bit(self.rsp_valid) and not _bit(self.wr_complete):
                    break
            value = self.rsp_data.value
            # X/Z bits in read data read as 0 (only Icarus can produce them)
            txn.data = (value if value.is_resolvable else value.resolve("zeros")).to_unsigned()
            txn.completed_ns = get_sim_time("ns")
            self.reads += 1
            return txn.data

    async def _request(self, txn: CsbTransaction) -> None:
        if txn.addr % 4 or not 0 <= txn.addr < self.ADDRESS_LIMIT:
            raise ValueError(f"CSB address {txn.addr:#x} is not a word address below {self.ADDRESS_LIMIT:#x}")
        self.last = txn
        txn.issued_ns = get_sim_time("ns")
        self.addr.value = txn.addr >> 2
        self.wdat.value = txn.data if txn.write else 0
        self.write_.value = int(txn.write)
        self.nposted.value = int(txn.write and txn.nposted)
        self.valid.value = 1
        while True:
            await self._edge
            if _bit(self.ready):
                break
        txn.accepted_ns = get_sim_time("ns")
        self.valid.value = 0
