"""Target over the in-process golden model."""
from __future__ import annotations

from golden.config import HwConfig
from golden.dla import Dla
from runtime.target import InterruptTimeout

#: GLB.S_INTR_STATUS done bits in the order one operation raises them on hardware: the conv pipeline's
#: CDMA data and weight loads, then CACC, then SDP and the PDP it feeds; group 0 before group 1.
HARDWARE_ORDER = (16, 18, 20, 0, 4, 2, 6, 8, 17, 19, 21, 1, 5, 3, 7, 9)


class GoldenTarget:
    """The golden model behind the Target protocol, with the time hardware takes made visible.

    Engines run inside the enabling register write, so all done bits of an operation exist at once, and the
    CBUF is flushed from the start. On hardware an operation, and the CBUF flush after reset, take longer
    than any one register access, and NVDLA's nvdlav1 traces check exactly that: they read
    ``S_INTR_STATUS`` right after an enable or a clear-all and expect 0, read ``S_CBUF_FLUSH_STATUS`` early
    and expect the flush still running, and wait, check one bit, clear *all* bits, and wait again.

    So time passes here only while software waits for it: in ``wait_interrupt``, or between two reads of the
    same status register in a row (a poll). Done bits are shown one at a time in hardware order: a wait
    shows bits until one it waits for is there, each re-read of ``S_INTR_STATUS`` shows the next. The
    flush reports done once software has polled it or waited for anything.
    """

    name = "golden"

    def __init__(self, hw: HwConfig, dla: Dla | None = None) -> None:
        self.hw = hw
        self.dla = dla if dla is not None else Dla(hw)
        self._status_addr = self.dla.map.address("GLB", "S_INTR_STATUS")
        self._flush_addr = self.dla.map.address("CDMA", "S_CBUF_FLUSH_STATUS")
        self._flush_done = self.dla.map.unit("CDMA").register("S_CBUF_FLUSH_STATUS").field("FLUSH_DONE").mask
        self._flushed = False
        #: Raised but not yet shown, in the order hardware raises them.
        self._queue: list[int] = []
        #: Address of the previous register access if it was a read (a second read in a row is a poll).
        self._last_read: int | None = None

    def _hidden(self) -> int:
        return sum(1 << b for b in self._queue)

    def _release(self) -> None:
        if self._queue:
            self._queue.pop(0)

    async def write_reg(self, addr: int, value: int) -> None:
        self._last_read = None
        if addr == self._status_addr:
            value &= ~self._hidden()  # write-1-to-clear reaches only bits software can see
        before = self.dla.intr_status
        self.dla.write_reg(addr, value)
        raised = self.dla.intr_status & ~before
        if raised:
            self._queue += [b for b in HARDWARE_ORDER if raised >> b & 1]
            self._queue += [b for b in range(32) if raised >> b & 1 and b not in HARDWARE_ORDER]

    async def read_reg(self, addr: int) -> int:
        polled = self._last_read == addr
        self._last_read = addr
        value = self.dla.read_reg(addr)
        if addr == self._status_addr:
            if polled:
                self._release()
            return value & ~self._hidden()
        if addr == self._flush_addr and not self._flushed:
            self._flushed = polled
            return value if polled else value & ~self._flush_done
        return value

    async def write_mem(self, addr: int, data: bytes, mem: str = "pri_mem") -> None:
        self.dla.mem.space(mem).write(addr, data)

    async def read_mem(self, addr: int, size: int, mem: str = "pri_mem") -> bytes:
        return self.dla.mem.space(mem).read_bytes(addr, size)

    async def fill_mem(self, addr: int, size: int, value: int, mem: str = "pri_mem") -> None:
        """``mem_init`` without a buffer of its size (the player's fast path; zeros allocate nothing)."""
        self.dla.mem.space(mem).fill(addr, size, value)

    async def crc_mem(self, addr: int, size: int, mem: str = "pri_mem") -> int:
        """``check_crc`` without reading unwritten memory into a buffer (the player's fast path)."""
        return self.dla.mem.space(mem).crc32(addr, size)

    async def wait_interrupt(self, bits: int, timeout_ns: int) -> int:
        self._last_read = None
        self._flushed = True
        while not (self.dla.intr_status & ~self._hidden() & bits) and self._queue:
            self._release()
        got = self.dla.intr_status & ~self._hidden() & bits
        if not got:
            pending = ", ".join(self.dla.pending()) or "nothing enabled"
            raise InterruptTimeout(f"interrupt bits {bits:#x} never raised (waiting: {pending})")
        return got
