"""Target over the in-process golden model."""
from __future__ import annotations

from golden.config import HwConfig
from golden.dla import Dla
from runtime.target import InterruptTimeout

#: GLB.S_INTR_STATUS done bits in the order one operation raises them on hardware: the conv pipeline's
#: CDMA data and weight loads, then CACC, then SDP and the PDP it feeds; group 0 before group 1.
HARDWARE_ORDER = (16, 18, 20, 0, 4, 2, 6, 8, 17, 19, 21, 1, 5, 3, 7, 9)


class GoldenTarget:
    """The golden model behind the Target protocol.

    Engines run inside the enabling register write, so all done bits of an operation exist at once.
    Hardware raises them one after another, and software may clear each before the next arrives (NVDLA's
    nvdlav1 traces wait, check one bit, clear *all* bits, and wait again). So the bits a write raises
    are shown in hardware order: the first at once, the next when every bit shown so far has been
    cleared, or when software waits for a bit not shown yet (time passes while it waits).
    """

    name = "golden"

    def __init__(self, hw: HwConfig, dla: Dla | None = None) -> None:
        self.hw = hw
        self.dla = dla if dla is not None else Dla(hw)
        self._status_addr = self.dla.map.address("GLB", "S_INTR_STATUS")
        #: Raised but not yet shown, in the order hardware raises them.
        self._queue: list[int] = []
        #: Bits taken from the queue and shown.
        self._shown = 0

    def _hidden(self) -> int:
        return sum(1 << b for b in self._queue)

    def _release(self) -> None:
        if self._queue:
            self._shown |= 1 << self._queue.pop(0)

    def _settle(self) -> None:
        """Show the next queued bit once software has cleared everything shown."""
        self._shown &= self.dla.intr_status
        if not self._shown:
            self._release()

    async def write_reg(self, addr: int, value: int) -> None:
        if addr == self._status_addr:
            value &= ~self._hidden()  # write-1-to-clear reaches only bits software can see
        before = self.dla.intr_status
        self.dla.write_reg(addr, value)
        raised = self.dla.intr_status & ~before
        self._queue += [b for b in HARDWARE_ORDER if raised >> b & 1]
        self._queue += [b for b in range(32) if raised >> b & 1 and b not in HARDWARE_ORDER]
        self._settle()

    async def read_reg(self, addr: int) -> int:
        value = self.dla.read_reg(addr)
        return value & ~self._hidden() if addr == self._status_addr else value

    async def write_mem(self, addr: int, data: bytes, mem: str = "pri_mem") -> None:
        self.dla.mem.space(mem).write(addr, data)

    async def read_mem(self, addr: int, size: int, mem: str = "pri_mem") -> bytes:
        return self.dla.mem.space(mem).read_bytes(addr, size)

    async def wait_interrupt(self, bits: int, timeout_ns: int) -> int:
        while not (self.dla.intr_status & ~self._hidden() & bits) and self._queue:
            self._release()
        got = self.dla.intr_status & ~self._hidden() & bits
        if not got:
            pending = ", ".join(self.dla.pending()) or "nothing enabled"
            raise InterruptTimeout(f"interrupt bits {bits:#x} never raised (waiting: {pending})")
        return got
