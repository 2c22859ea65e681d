"""A leaner AXI RAM: cocotbext-axi's ``AxiRam`` timing, one coroutine per port instead of eight.

cocotbext-axi serves a port with five channel coroutines (AR/AW/W sinks, R/B sources) and two processes
linked by queues and events, and allocates a transaction object per beat; on AXI-heavy traces that
per-beat Python is most of the testbench's time. ``FastAxiRam`` computes the same signal values on the
same clock edges with one coroutine that wakes on every rising clock edge while anything is in flight and
sleeps on the rising edge of a ``valid`` otherwise.

Why the timing is the same: every cocotbext-axi coroutine samples handshakes at a rising clock edge (the
values before the edge) and drives its outputs right after it; the processes that turn an accepted AR
into R beats, and W beats into memory writes and a B response, are woken by queue events, so they run
after every clock-edge coroutine of that edge. A source that ran dry sleeps and restarts at the next edge.
So at each rising edge ``FastAxiRam._step`` does, in this order:
1. the R and B sources: when their ``valid`` is low or the DUT's ``ready`` was high, drive the next
   queued beat (``valid`` high) or drop ``valid``;
2. the AR, AW and W sinks: accept where ``valid`` and our ``ready`` were high, then raise ``ready``
   (low from construction to the first edge, as cocotbext's sinks);
3. the processes: accepted ARs become queued R beats (the memory is read now), W beats are written
   under their AW in order, a completed burst queues its B.
The memory is the same ``AddressSpaceView`` (``mem``) cocotbext-axi would use, read and written in the
same order per burst (a whole burst is read at once: cocotbext reads its beats without yielding either).
A protocol violation (burst over 4 KiB, WLAST in the wrong beat, AxSIZE wider than the bus) is recorded
like ``tb.memory.GuardedAxiRam`` does and stops that direction, as the assertion stops cocotbext's process.

Not modelled: cocotbext's reaction to a reset asserted again after construction (the testbench builds a
new memory per trace, after reset), pause generators and random timing (``tb.memory`` uses cocotbext-axi
when those are asked for).

``CxxAxiRam`` is the same model run by our Verilator main (``tb/verilator_main.cpp``, ``dla_axi_open``) in
C++ at each rising clock edge, before cocotb's callbacks of that edge: Python only reads or writes ``mem``
once per burst. Its outputs are applied with the next falling edge, in that edge's evaluation (the DUT's
rising-edge logic sees them at the same edge, and nothing samples the DUT in between; it saves the model an
evaluation per busy edge), or, in a run with a waveform or ``+dla_axi_exact``, right after the rising edge
as inertial puts like cocotb's writes. ``FastDutMemory`` uses it
when the simulator has it (Verilator with our main), else ``FastAxiRam``; ``$DLA_AXI_MODEL=python`` keeps
the Python model, ``=cocotbext`` cocotbext-axi's (comparisons; results are the same).
"""
from __future__ import annotations

import ctypes
import os
from collections import deque
from typing import Callable

import cocotb
from cocotb.simtime import get_sim_time
from cocotb.triggers import Event, First, RisingEdge
from cocotb.types import LogicArray

from golden.memory import Memory
from tb.fastmem_choice import fast_memory_wanted
from tb.memory import MEMORY_PORTS, AddressSpaceView, DutInterfaceError, DutMemory, missing_axi_signals, nvdla_axi_bus


def _x(handle) -> None:
    """Drive a channel's payload to X at construction, as cocotbext-axi's sources do."""
    try:
        width = len(handle)
        handle.setimmediatevalue(LogicArray("x" * width))
    except (TypeError, ValueError, AttributeError):
        pass


_XZ_AS_ZERO = str.maketrans("xXzZuUwWlLhH-", "0" * 13)


def reader(handle) -> Callable[[], int]:
    """A fast ``int`` getter for a handle: reads the simulator's bit string directly, without the
    ``LogicArray`` a ``handle.value`` builds (most of the per-edge cost); X/Z bits read as 0 (only Icarus
    shows them). ``TiedSignal``/``WidthAdapter`` (``tb.memory``) and unknown objects use ``.value``."""
    if handle is None:
        return lambda: 0
    inner = getattr(handle, "_handle", None)
    if type(handle).__name__ == "WidthAdapter":
        return reader(inner)
    get = getattr(inner, "get_signal_val_binstr", None)
    if get is None:
        return lambda: int(handle.value)

    def read() -> int:
        bits = get()
        try:
            return int(bits, 2)
        except ValueError:
            return int(bits.translate(_XZ_AS_ZERO), 2)

    return read


def bit_reader(handle) -> Callable[[], bool]:
    """A fast getter of a 1-bit DUT output as bool (X/Z read as low, as ``tb.csb`` reads them)."""
    get = getattr(getattr(handle, "_handle", None), "get_signal_val_binstr", None)
    if get is None:
        return lambda: handle.value == 1
    return lambda: get() == "1"


class FastAxiRam:
    """Serves one NVDLA memory port (an ``AxiBus`` from ``tb.memory.nvdla_axi_bus``) from ``mem``.

    Same interface as ``tb.memory.GuardedAxiRam`` for the testbench: ``port``, ``mem``, ``violations``,
    ``violated``, ``record``."""

    #: cocotbext-axi's halves, which this model has not (``DutMemory.reordered`` looks for them).
    read_if = write_if = None

    def __init__(self, bus, clock, *, mem, port: str) -> None:
        self.port = port
        self.mem = mem
        self.size = len(mem)
        self.violations: list[str] = []
        self.violated = Event()
        self.clock = clock
        ar, r = bus.read.ar, bus.read.r
        aw, w, b = bus.write.aw, bus.write.w, bus.write.b
        self.lanes = len(r.rdata) // 8
        self.strb_mask = (1 << self.lanes) - 1
        # handles (TiedSignal for AxSIZE/AxBURST the DUT lacks)
        self.arvalid, self.arready, self.araddr, self.arlen = ar.arvalid, ar.arready, ar.araddr, ar.arlen
        self.arid = getattr(ar, "arid", None)
        self.arsize, self.arburst = getattr(ar, "arsize", None), getattr(ar, "arburst", None)
        self.rvalid, self.rready, self.rdata, self.rlast = r.rvalid, r.rready, r.rdata, r.rlast
        self.rid = getattr(r, "rid", None)
        self.r_extra = [getattr(r, s) for s in ("rresp", "ruser") if hasattr(r, s)]
        self.awvalid, self.awready, self.awaddr, self.awlen = aw.awvalid, aw.awready, aw.awaddr, aw.awlen
        self.awid = getattr(aw, "awid", None)
        self.awsize, self.awburst = getattr(aw, "awsize", None), getattr(aw, "awburst", None)
        self.wvalid, self.wready, self.wdata, self.wlast = w.wvalid, w.wready, w.wdata, w.wlast
        self.wstrb = getattr(w, "wstrb", None)
        self.bvalid, self.bready = b.bvalid, b.bready
        self.bid = getattr(b, "bid", None)
        self.b_extra = [getattr(b, s) for s in ("bresp", "buser") if hasattr(b, s)]
        default_size = (self.lanes - 1).bit_length()
        self._rready_hi, self._bready_hi = bit_reader(self.rready), bit_reader(self.bready)
        self._arvalid_hi, self._awvalid_hi = bit_reader(self.arvalid), bit_reader(self.awvalid)
        self._wvalid_hi, self._wlast_hi = bit_reader(self.wvalid), bit_reader(self.wlast)
        self._ar_fields = [reader(self.arid), reader(self.araddr), reader(self.arlen),
                           reader(self.arsize) if self.arsize is not None else (lambda: default_size),
                           reader(self.arburst) if self.arburst is not None else (lambda: 1)]
        self._aw_fields = [reader(self.awid), reader(self.awaddr), reader(self.awlen),
                           reader(self.awsize) if self.awsize is not None else (lambda: default_size),
                           reader(self.awburst) if self.awburst is not None else (lambda: 1)]
        self._wdata = reader(self.wdata)
        self._wstrb = reader(self.wstrb) if self.wstrb is not None else (lambda: self.strb_mask)
        # construction values, as cocotbext-axi's channel classes set them
        for h in (r.rdata, r.rlast, self.rid, *self.r_extra, self.bid, *self.b_extra):
            if h is not None:
                _x(h)
        self.rvalid.setimmediatevalue(0)
        self.bvalid.setimmediatevalue(0)
        for h in (self.arready, self.awready, self.wready):
            h.setimmediatevalue(0)
        # state: values we drive (as the DUT sees them), queues of the processes
        self._rvalid = self._bvalid = False
        self._ready = False  # arready, awready, wready: all low until the first edge, then high
        self._rq: deque[tuple[int, int, bool]] = deque()  # (rid, rdata, rlast)
        self._bq: deque[int] = deque()  # bid
        self._ars: deque[tuple[int, int, int, int, int]] = deque()  # (id, addr, len, size, burst)
        self._aws: deque[tuple[int, int, int, int, int]] = deque()
        self._ws: deque[tuple[int, int, bool]] = deque()  # (data, strb, last)
        self._write_burst: list | None = None  # [id, cur_addr, beats left, beat index, length, num_bytes]
        self._read_dead = self._write_dead = False
        self._task = cocotb.start_soon(self._run())

    # ---- the testbench's interface -------------------------------------------------------------------
    def record(self, channel: str, message: str) -> None:
        self.violations.append(f"AXI protocol violation on {self.port} ({channel}) at "
                               f"{get_sim_time('ns'):.0f} ns: {message}")
        self.violated.set()

    # ---- the model -----------------------------------------------------------------------------------
    async def _run(self) -> None:
        edge = RisingEdge(self.clock)
        while True:
            await edge
            if self._step():
                await First(RisingEdge(self.arvalid), RisingEdge(self.awvalid), RisingEdge(self.wvalid))

    def _idle(self) -> bool:
        return not (self._rvalid or self._bvalid or self._rq or self._bq or self._ars or self._aws)

    def _step(self) -> bool:
        """One rising clock edge; returns True when nothing can happen before a ``valid`` rises."""
        # 1. sources (R, B): pre-edge rready/bready against what we drove
        if not self._rvalid or self._rready_hi():
            if self._rq:
                rid, data, last = self._rq.popleft()
                if self.rid is not None:
                    self.rid.value = rid
                self.rdata.value = data
                self.rlast.value = int(last)
                for h in self.r_extra:
                    h.value = 0
                if not self._rvalid:
                    self.rvalid.value = 1
                    self._rvalid = True
            elif self._rvalid:
                self.rvalid.value = 0
                self._rvalid = False
        if not self._bvalid or self._bready_hi():
            if self._bq:
                bid = self._bq.popleft()
                if self.bid is not None:
                    self.bid.value = bid
                for h in self.b_extra:
                    h.value = 0
                if not self._bvalid:
                    self.bvalid.value = 1
                    self._bvalid = True
            elif self._bvalid:
                self.bvalid.value = 0
                self._bvalid = False
        # 2. sinks (AR, AW, W): accept on valid & ready, then ready goes (stays) high
        arv, awv, wv = self._arvalid_hi(), self._awvalid_hi(), self._wvalid_hi()
        if self._ready:
            if arv:
                self._ars.append(tuple(f() for f in self._ar_fields))
            if awv:
                self._aws.append(tuple(f() for f in self._aw_fields))
            if wv:
                self._ws.append((self._wdata(), self._wstrb(), self._wlast_hi()))
        else:
            for h in (self.arready, self.awready, self.wready):
                h.value = 1
            self._ready = True
        # 3. processes: writes, then reads
        if (self._aws or self._write_burst is not None) and not self._write_dead:
            self._process_writes()
        if self._ars and not self._read_dead:
            self._process_reads()
        return self._ready and not (arv or awv or wv) and self._idle() and self._write_burst is None

    def _check_burst(self, kind: str, addr: int, length: int, size: int, burst: int) -> tuple[int, int] | None:
        """(aligned address, bytes per beat) of a burst, or None after recording its violation."""
        num_bytes = 1 << size
        if not 0 < num_bytes <= self.lanes:
            self.record(kind, f"{kind} burst size {num_bytes} bytes is wider than the {self.lanes}-byte bus")
            return None
        aligned = (addr // num_bytes) * num_bytes
        if burst == 1 and 0x1000 - (aligned & 0xFFF) < num_bytes * length:
            self.record(kind, f"{kind} burst at {addr:#x} of {length} x {num_bytes} bytes crosses a 4 KiB boundary")
            return None
        if burst not in (0, 1):
            self.record(kind, f"{kind} burst type {burst} (only FIXED and INCR are served)")
            return None
        return aligned, num_bytes

    def _process_reads(self) -> None:
        while self._ars:
            arid, addr, arlen, size, burst = self._ars.popleft()
            length = arlen + 1
            checked = self._check_burst("read", addr, length, size, burst)
            if checked is None:
                self._read_dead = True
                self._ars.clear()
                return
            cur, num_bytes = checked
            lanes = self.lanes
            if burst == 1 and num_bytes == lanes and cur % lanes == 0 and cur + length * lanes <= self.size:
                data = self.mem[cur:cur + length * lanes]
                for n in range(length):
                    self._rq.append((arid, int.from_bytes(data[n * lanes:(n + 1) * lanes], "little"),
                                     n == length - 1))
                continue
            for n in range(length):
                word = (cur // lanes) * lanes
                self._rq.append((arid, int.from_bytes(self.mem[word % self.size:word % self.size + lanes], "little"),
                                 n == length - 1))
                if burst == 1:
                    cur += num_bytes

    def _process_writes(self) -> None:
        lanes = self.lanes
        while True:
            if self._write_burst is None:
                if not self._aws:
                    return
                awid, addr, awlen, size, burst = self._aws.popleft()
                length = awlen + 1
                checked = self._check_burst("write", addr, length, size, burst)
                if checked is None:
                    self._write_dead = True
                    return
                cur, num_bytes = checked
                self._write_burst = [awid, cur, length, 0, burst, num_bytes]
            wb = self._write_burst
            while wb[3] < wb[2]:
                if not self._ws:
                    return
                data, strb, last = self._ws.popleft()
                word = (wb[1] // lanes) * lanes
                raw = data.to_bytes(lanes, "little")
                if strb == self.strb_mask:
                    self._write(word, raw)
                else:
                    start = None
                    for i in range(lanes + 1):
                        on = i < lanes and bool(strb >> i & 1)
                        if on and start is None:
                            start = i
                        elif not on and start is not None:
                            self._write(word + start, raw[start:i])
                            start = None
                if last != (wb[3] == wb[2] - 1):
                    self.record("write", f"WLAST {'set' if last else 'clear'} in beat {wb[3] + 1} of a "
                                         f"{wb[2]}-beat burst")
                    self._write_dead = True
                    self._write_burst = None
                    return
                wb[3] += 1
                if wb[4] == 1:
                    wb[1] += wb[5]
            self._bq.append(wb[0])
            self._write_burst = None

    def _write(self, addr: int, data: bytes) -> None:
        addr %= self.size
        self.mem[addr:addr + len(data)] = data


# ---- the same model in C++ (tb/verilator_main.cpp) ---------------------------------------------------------
_READ_FN = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int, ctypes.c_ulonglong, ctypes.c_uint, ctypes.c_void_p)
_WRITE_FN = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int, ctypes.c_ulonglong, ctypes.c_uint, ctypes.c_void_p)
_VIOLATION_FN = ctypes.CFUNCTYPE(None, ctypes.c_int, ctypes.c_char_p, ctypes.c_char_p)
#: Port signals in the order ``dla_axi_open`` takes them (after the clock).
_CXX_SIGNALS = (
    ("ar", ("arvalid", "arready", "araddr", "arlen", "arid", "arsize", "arburst")),
    ("r", ("rvalid", "rready", "rdata", "rlast", "rid", "rresp", "ruser")),
    ("aw", ("awvalid", "awready", "awaddr", "awlen", "awid", "awsize", "awburst")),
    ("w", ("wvalid", "wready", "wdata", "wstrb", "wlast")),
    ("b", ("bvalid", "bready", "bid", "bresp", "buser")),
)


def _cxx_main():
    """The simulator's ``dla_axi_open``/``dla_axi_close`` (our Verilator main), or None (Icarus, a build
    without them, cocotb's stock loop)."""
    try:
        lib = ctypes.CDLL(None)
        open_, close = lib.dla_axi_open, lib.dla_axi_close
    except (OSError, AttributeError):
        return None
    open_.restype = ctypes.c_int
    open_.argtypes = (ctypes.c_char_p, ctypes.c_uint, ctypes.c_ulonglong, _READ_FN, _WRITE_FN, _VIOLATION_FN)
    close.restype, close.argtypes = None, (ctypes.c_int,)
    return open_, close


def _path(handle) -> str:
    """Full hierarchical name of a real port handle; '' for a ``TiedSignal`` (the DUT lacks the port)."""
    inner = handle._handle if type(handle).__name__ == "WidthAdapter" else handle
    return getattr(inner, "_path", "") or ""


class CxxAxiRam:
    """``FastAxiRam`` run by the Verilator main in C++ at every rising clock edge (no Python per edge);
    Python is called once per burst to read or write ``mem``. Same interface as ``FastAxiRam``. Built by
    ``try_open``, which returns None when the simulator has no C++ ports."""

    read_if = write_if = None

    def __init__(self, port: str, mem, port_id: int, close, callbacks: tuple) -> None:
        self.port, self.mem, self.size = port, mem, len(mem)
        self.violations: list[str] = []
        self.violated = Event()
        self._id, self._close, self._callbacks = port_id, close, callbacks
        # detached when the test ends: cocotb cancels the test's tasks, running this one's `finally`
        self._task = cocotb.start_soon(self._attached())

    @classmethod
    def try_open(cls, bus, clock, *, mem, port: str) -> CxxAxiRam | None:
        api = _cxx_main()
        if api is None:
            return None
        open_, close = api
        clock_path = _path(clock)
        names = [clock_path]
        for ch, sigs in _CXX_SIGNALS:
            chan = getattr(bus.read if ch in ("ar", "r") else bus.write, ch)
            names += [_path(getattr(chan, s)) if hasattr(chan, s) else "" for s in sigs]
        if not clock_path:
            return None
        lanes = len(bus.read.r.rdata) // 8
        holder: list[CxxAxiRam] = []

        def read(_port: int, addr: int, n: int, out: int) -> int:
            data = mem[addr:addr + n]
            ctypes.memmove(out, bytes(data), n)
            return 0

        def write(_port: int, addr: int, n: int, data: int) -> int:
            mem[addr:addr + n] = ctypes.string_at(data, n)
            return 0

        def violation(_port: int, channel: bytes, message: bytes) -> None:
            if holder:
                holder[0].record(channel.decode(), message.decode())

        callbacks = (_READ_FN(read), _WRITE_FN(write), _VIOLATION_FN(violation))
        port_id = open_("\n".join(names).encode(), lanes, len(mem), *callbacks)
        if port_id < 0:
            return None
        ram = cls(port, mem, port_id, close, callbacks)
        holder.append(ram)
        return ram

    def record(self, channel: str, message: str) -> None:
        self.violations.append(f"AXI protocol violation on {self.port} ({channel}) at "
                               f"{get_sim_time('ns'):.0f} ns: {message}")
        self.violated.set()

    async def _attached(self) -> None:
        try:
            await Event().wait()  # until the test's end cancels this task
        finally:
            self._close(self._id)


# ---- choosing the model ------------------------------------------------------------------------------------
class FastDutMemory(DutMemory):
    """``tb.memory.DutMemory`` (same port discovery, same storage) served by ``FastAxiRam``."""

    def __init__(self, dut, clock, reset, memory: Memory | None = None) -> None:  # noqa: ARG002 - as DutMemory
        self.memory = memory if memory is not None else Memory()
        self.timing = None
        self.rams = {}
        for port, name in MEMORY_PORTS.items():
            missing = missing_axi_signals(dut, port)
            if missing:
                if name == "pri_mem" and getattr(dut, f"{port}_aw_awvalid", None) is not None:
                    raise DutInterfaceError(f"DUT has no port {missing[0]}")
                continue
            bus = nvdla_axi_bus(dut, port)
            addr_bits = min(len(getattr(dut, f"{port}_aw_awaddr")), 48)
            view = AddressSpaceView(self.memory.space(name), 1 << addr_bits)
            ram = CxxAxiRam.try_open(bus, clock, mem=view, port=port) if cxx_wanted() else None
            self.rams[name] = ram if ram is not None else FastAxiRam(bus, clock, mem=view, port=port)
        if "pri_mem" not in self.rams:
            raise DutInterfaceError("DUT has no primary memory port nvdla_core2dbb_*")


#: ``$DLA_AXI_MODEL=python`` keeps ``FastAxiRam`` in Python even when the simulator serves ports in C++.
def cxx_wanted() -> bool:
    """C++ ports unless ``$DLA_AXI_MODEL=python``."""
    return os.environ.get("DLA_AXI_MODEL", "").strip().lower() != "python"


def make_dut_memory(dut, clock, reset, memory: Memory | None = None, timing=None) -> DutMemory:
    """The DUT's memory: ``FastDutMemory`` unless random AXI timing (``timing``) is asked for, which only
    cocotbext-axi's model (``tb.memory``) provides, or ``$DLA_AXI_MODEL=cocotbext``."""
    if fast_memory_wanted(timing):
        return FastDutMemory(dut, clock, reset, memory)
    if timing is None:
        return DutMemory(dut, clock, reset, memory)
    return DutMemory(dut, clock, reset, memory, timing=timing)
