"""The DUT's memories: cocotbext-axi ``AxiRam`` slaves whose storage *is* a ``golden.memory`` address space.

Keeping the AXI model "in sync" with the player's ``Memory`` is done by having one store: ``AxiRam``
accepts any object with ``len`` and slice get/set as its ``mem``, so ``AddressSpaceView`` hands it the
``AddressSpace`` the target loads (``mem_load``) and checks (``check_crc``). Nothing is copied.

NVDLA's AXI ports differ from what cocotbext-axi's channel classes require:
- each channel has its own prefix (``nvdla_core2dbb_aw_awvalid``, ``nvdla_core2dbb_w_wdata`` ...), so
  the bus is assembled from five channel buses (``AxiBus.from_channels``);
- there is no AxSIZE, AxBURST, BRESP or RRESP. cocotbext-axi treats AxSIZE/AxBURST as *required*, and a
  transaction object defaults an absent field to 0, which would mean 1-byte FIXED bursts; so absent
  AxSIZE/AxBURST are tied to full-width INCR (what NVDLA issues); xRESP are optional and simply not
  driven;
- AxLEN is 4 bits where cocotbext-axi asserts 8; the port is used through a width adapter.
NVDLA's single-beat transfers and several AXI IDs in flight need nothing special: AxiRam answers every
ID, in order, which AXI allows.

Random AXI timing (``AxiTiming``, off unless a seed is given: ``DLA_AXI_RANDOM=SEED``/``--axi-random``):
every channel stalls at random through cocotbext-axi's pause generators (ready low on AR, AW and W;
valid withheld on R and B), each read burst waits a random latency and, among bursts whose latency has
passed, the next one served is picked at random from the oldest of each ARID (so responses to different
IDs come back out of order, those of one ID never), and each write response waits a random latency
(in order). Every channel draws from its own ``random.Random`` seeded by (seed, port, channel): a seed
replays the same timing for the same DUT behaviour.

A protocol violation by the DUT (a burst crossing 4 KiB, WLAST in the wrong beat) makes cocotbext-axi's
slave assert. Left alone, that exception would abort the cocotb test with a bare ``assert`` message;
``GuardedAxiRam`` records it as a ``violation`` (port, channel, sim time, message) and sets ``violated``
so the testbench can FAIL the trace with that message at once.
"""
from __future__ import annotations

import logging
import random
from collections import deque
from dataclasses import dataclass
from typing import Any, Callable, Iterator

import cocotb
from cocotb.simtime import get_sim_time
from cocotb.triggers import Event, RisingEdge, Timer
from cocotbext.axi import AxiBurstType, AxiBus, AxiResp
from cocotbext.axi.axi_ram import AxiRamRead, AxiRamWrite
from cocotbext.axi.axi_channels import AxiARBus, AxiAWBus, AxiBBus, AxiRBus, AxiWBus
from cocotbext.axi.memory import Memory as AxiMemoryMixin

from golden.memory import AddressSpace, Memory

#: cocotbext-axi logs every burst at INFO; far too much for whole traces.
AXI_LOG_LEVEL = logging.WARNING
#: Memory ports NVDLA may have, and the memory each serves.
MEMORY_PORTS = {"nvdla_core2dbb": "pri_mem", "nvdla_core2cvsram": "sec_mem"}


class DutInterfaceError(Exception):
    """The DUT lacks a port the testbench needs."""


class AddressSpaceView:
    """cocotbext-axi's memory interface (``len``, slice read and write) over a golden AddressSpace."""

    def __init__(self, space: AddressSpace, size: int) -> None:
        self.space = space
        self.size = size

    def __len__(self) -> int:
        return self.size

    def _span(self, key: slice | int) -> tuple[int, int]:
        if isinstance(key, int):
            return key, 1
        start, stop, step = key.indices(self.size)
        if step != 1:
            raise IndexError("strided access is not supported")
        return start, stop - start

    def __getitem__(self, key: slice | int) -> bytes | int:
        start, n = self._span(key)
        data = self.space.read_bytes(start, n)
        return data[0] if isinstance(key, int) else data

    def __setitem__(self, key: slice | int, value) -> None:
        start, n = self._span(key)
        data = bytes([value]) if isinstance(key, int) else bytes(value)
        if len(data) != n:
            raise IndexError("slice assignment is the wrong size")
        self.space.write(start, data)


class TiedSignal:
    """Stands in for a channel signal the DUT does not have: reads as a constant, writes are dropped."""

    def __init__(self, name: str, width: int, value: int) -> None:
        self._name, self._width, self._value = name, width, value

    def __len__(self) -> int:
        return self._width

    @property
    def value(self) -> int:
        return self._value

    @value.setter
    def value(self, _v) -> None:
        pass

    def setimmediatevalue(self, _v) -> None:
        pass


class WidthAdapter:
    """A real port reported with the width cocotbext-axi insists on (NVDLA's AxLEN is 4 bits, not 8)."""

    def __init__(self, handle, width: int) -> None:
        self._handle, self._width = handle, width

    def __len__(self) -> int:
        return self._width

    @property
    def value(self):
        return self._handle.value

    @value.setter
    def value(self, v) -> None:
        self._handle.value = v

    def setimmediatevalue(self, v) -> None:
        self._handle.value = v


def _port(dut, name: str):
    try:
        return getattr(dut, name)
    except AttributeError:
        return None


def channel_bus(bus_cls, dut, prefix: str, ties: dict[str, tuple[int, int]]):
    """A cocotbext-axi channel bus over ``{prefix}_{signal}`` ports. ``ties`` gives (width, value) for
    required signals the DUT may lack; a narrower AxLEN port is adapted to 8 bits."""
    bus = bus_cls.__new__(bus_cls)  # assembled by hand: cocotb_bus.Bus would demand every signal
    bus._entity, bus._name, bus._signals = dut, prefix, {}
    for sig in list(bus_cls._signals) + list(bus_cls._optional_signals):
        handle = _port(dut, f"{prefix}_{sig}")
        if handle is None:
            if sig in ties:
                handle = TiedSignal(f"{prefix}_{sig}", *ties[sig])
            elif sig in bus_cls._signals:
                raise DutInterfaceError(f"DUT has no port {prefix}_{sig}")
            else:
                continue
        elif sig in ("awlen", "arlen") and len(handle) != 8:
            if len(handle) > 8:
                raise DutInterfaceError(f"{prefix}_{sig} is {len(handle)} bits wide; AXI4 allows 8")
            handle = WidthAdapter(handle, 8)
        setattr(bus, sig, handle)
        bus._signals[sig] = handle
    return bus


#: (channel, bus class) of an NVDLA memory port; their required signals, less AxSIZE/AxBURST (tied when
#: absent), are what the port must have.
_CHANNELS = (("aw", AxiAWBus), ("w", AxiWBus), ("b", AxiBBus), ("ar", AxiARBus), ("r", AxiRBus))
_TIED = ("awsize", "arsize", "awburst", "arburst")


def missing_axi_signals(dut, port: str) -> list[str]:
    """The required signals of memory port ``port`` the DUT lacks. A port is decided by all of them, not
    one: an RTL without the port may still have same-named nets (nv_small's ``NV_nvdla.v`` assigns five
    ``nvdla_core2cvsram_*`` outputs it never declares, and Icarus shows those implicit wires)."""
    return [f"{port}_{ch}_{sig}" for ch, bus_cls in _CHANNELS for sig in bus_cls._signals
            if sig not in _TIED and _port(dut, f"{port}_{ch}_{sig}") is None]


def nvdla_axi_bus(dut, port: str) -> AxiBus:
    """The AXI bus of one NVDLA memory port (``nvdla_core2dbb`` or ``nvdla_core2cvsram``)."""
    wdata = _port(dut, f"{port}_w_wdata")
    if wdata is None:
        raise DutInterfaceError(f"DUT has no port {port}_w_wdata")
    size = (len(wdata) // 8 - 1).bit_length()  # log2(bytes per beat): every NVDLA beat is full width
    ties = {"awsize": (3, size), "arsize": (3, size), "awburst": (2, 1), "arburst": (2, 1)}  # 1 = INCR
    return AxiBus.from_channels(
        channel_bus(AxiAWBus, dut, f"{port}_aw", ties),
        channel_bus(AxiWBus, dut, f"{port}_w", ties),
        channel_bus(AxiBBus, dut, f"{port}_b", ties),
        channel_bus(AxiARBus, dut, f"{port}_ar", ties),
        channel_bus(AxiRBus, dut, f"{port}_r", ties),
    )


class _Guard:
    """Mixin for cocotbext-axi's RAM channel processes: a protocol assertion becomes a recorded violation."""

    owner: "GuardedAxiRam"
    channel: str

    async def _guarded(self, process) -> None:
        try:
            await process()
        except AssertionError as exc:
            self.owner.record(self.channel, str(exc) or "assertion failed")


class _GuardedWrite(_Guard, AxiRamWrite):
    async def _process_write(self) -> None:
        await self._guarded(super()._process_write)


class _GuardedRead(_Guard, AxiRamRead):
    async def _process_read(self) -> None:
        await self._guarded(super()._process_read)


# ---- random timing -------------------------------------------------------------------------------------
@dataclass(frozen=True)
class AxiTiming:
    """Random AXI timing of the testbench's memory, reproducible from ``seed``."""

    seed: int
    clock_ns: int = 10
    #: Cycles between an accepted AR and its first R beat: uniform in [0, max].
    max_read_latency: int = 48
    #: Cycles between a burst's last W beat and its B: uniform in [0, max].
    max_write_latency: int = 32
    #: Probability that a channel stalls in a cycle (ready low on AR/AW/W, valid withheld on R/B).
    stall: float = 0.25

    def rng(self, port: str, channel: str) -> random.Random:
        """The channel's own generator: one channel's draws never shift another's."""
        return random.Random(f"{self.seed}/{port}/{channel}")

    def stalls(self, port: str, channel: str) -> Iterator[bool]:
        """Pause pattern for cocotbext-axi's ``set_pause_generator``: one bool per clock cycle."""
        rng = self.rng(port, f"{channel}-stall")
        while True:
            yield rng.random() < self.stall


def _now_ns() -> int:
    """Simulation time in whole ns (float ns would make Timer durations unrepresentable in ps)."""
    return round(get_sim_time("ns"))


class _DelayedSource:
    """A source channel (B) whose ``send`` returns at once and delivers each item a random number of
    cycles later, in order; everything else is the wrapped channel's."""

    def __init__(self, channel, delay: Callable[[], int], clock_ns: int) -> None:
        self._channel, self._delay, self._clock_ns = channel, delay, clock_ns
        self._queue: deque[tuple[int, Any]] = deque()
        self._wake = Event()
        self._feeder = None

    def __getattr__(self, name: str):
        return getattr(self._channel, name)

    async def send(self, obj) -> None:
        self._queue.append((_now_ns() + self._delay() * self._clock_ns, obj))
        self._wake.set()
        if self._feeder is None:
            self._feeder = cocotb.start_soon(self._feed())

    def clear(self) -> None:
        self._queue.clear()
        self._channel.clear()

    async def _feed(self) -> None:
        while True:
            if not self._queue:
                self._wake.clear()
                await self._wake.wait()
                continue
            due, obj = self._queue[0]
            now = _now_ns()
            if due > now:
                await Timer(due - now, "ns")
            self._queue.popleft()
            await self._channel.send(obj)


@dataclass
class _Burst:
    arid: int
    due_ns: int
    ar: Any


class _OutOfOrderRead(_GuardedRead):
    """AxiRam's read side serving bursts after a random latency, out of order across ARIDs."""

    timing: AxiTiming
    rng: random.Random
    #: Bursts served before an older pending burst (of another ARID): proof the reordering happens.
    reordered: int = 0

    async def _process_read(self) -> None:
        await self._guarded(self._serve)

    async def _serve(self) -> None:
        pending: list[_Burst] = []  # in arrival order
        edge = RisingEdge(self.clock)

        def arrive(ar) -> None:
            due = _now_ns() + self.rng.randint(0, self.timing.max_read_latency) * self.timing.clock_ns
            pending.append(_Burst(int(getattr(ar, "arid", 0)), due, ar))

        while True:
            if not pending:
                arrive(await self.ar_channel.recv())
            while not self.ar_channel.empty():
                arrive(self.ar_channel.recv_nowait())
            now = _now_ns()
            heads: dict[int, _Burst] = {}
            for b in pending:
                heads.setdefault(b.arid, b)  # only the oldest burst of an ID may go: same-ID order holds
            due = [b for b in heads.values() if b.due_ns <= now]
            if not due:
                await edge
                continue
            burst = self.rng.choice(due)
            self.reordered += burst is not pending[0]
            pending.remove(burst)
            await self._send_burst(burst.arid, burst.ar)

    async def _send_burst(self, arid: int, ar) -> None:
        """The R beats of one burst (cocotbext-axi's read loop, with its checks)."""
        addr = int(ar.araddr)
        length = int(getattr(ar, "arlen", 0)) + 1
        size = int(getattr(ar, "arsize", self.max_burst_size))
        burst = AxiBurstType(int(getattr(ar, "arburst", AxiBurstType.INCR)))
        num_bytes = 2 ** size
        assert 0 < num_bytes <= self.byte_lanes
        cur = (addr // num_bytes) * num_bytes
        total = num_bytes * length
        if burst == AxiBurstType.INCR:
            assert 0x1000 - (cur & 0xFFF) >= total  # no 4 KiB crossing
        low = (addr // total) * total
        for n in range(length):
            r = self.r_channel._transaction_obj()
            r.rid, r.rlast, r.rresp = arid, n == length - 1, AxiResp.OKAY
            word = (cur // self.byte_lanes) * self.byte_lanes
            r.rdata = int.from_bytes(await self._read(word, self.byte_lanes), "little")
            await self.r_channel.send(r)
            if burst != AxiBurstType.FIXED:
                cur += num_bytes
                if burst == AxiBurstType.WRAP and cur == low + total:
                    cur = low


class GuardedAxiRam(AxiMemoryMixin):
    """cocotbext-axi's ``AxiRam`` (same parts, same storage) whose protocol assertions are recorded; with
    ``timing``, random latencies, stalls and out-of-order read responses."""

    def __init__(self, bus: AxiBus, clock, reset=None, reset_active_level=True, *, mem, port: str,
                 timing: AxiTiming | None = None) -> None:
        self.port = port
        self.violations: list[str] = []
        self.violated = Event()
        super().__init__(len(mem), mem)
        self.write_if = _GuardedWrite(bus.write, clock, reset, reset_active_level, mem=self.mem)
        read_cls = _GuardedRead if timing is None else _OutOfOrderRead
        self.read_if = read_cls(bus.read, clock, reset, reset_active_level, mem=self.mem)
        for part, channel in ((self.write_if, "write"), (self.read_if, "read")):
            part.owner, part.channel = self, channel
        if timing is not None:
            self._randomize(timing)

    def _randomize(self, timing: AxiTiming) -> None:
        """Stalls on every channel, B latency, and the read side's generator."""
        w, r = self.write_if, self.read_if
        for name, channel in (("aw", w.aw_channel), ("w", w.w_channel), ("b", w.b_channel),
                              ("ar", r.ar_channel), ("r", r.r_channel)):
            channel.set_pause_generator(timing.stalls(self.port, name))
        b_rng = timing.rng(self.port, "b-latency")
        w.b_channel = _DelayedSource(w.b_channel, lambda: b_rng.randint(0, timing.max_write_latency), timing.clock_ns)
        r.timing, r.rng = timing, timing.rng(self.port, "r-order")

    def record(self, channel: str, message: str) -> None:
        self.violations.append(f"AXI protocol violation on {self.port} ({channel}) at "
                               f"{get_sim_time('ns'):.0f} ns: {message}")
        self.violated.set()


class DutMemory:
    """Serves every NVDLA memory port the DUT has from one golden ``Memory``."""

    def __init__(self, dut, clock, reset, memory: Memory | None = None, timing: AxiTiming | None = None) -> None:
        self.memory = memory if memory is not None else Memory()
        self.timing = timing
        self.rams: dict[str, GuardedAxiRam] = {}
        for port, name in MEMORY_PORTS.items():
            missing = missing_axi_signals(dut, port)
            if missing:
                if name == "pri_mem" and _port(dut, f"{port}_aw_awvalid") is not None:
                    raise DutInterfaceError(f"DUT has no port {missing[0]}")
                continue
            bus = nvdla_axi_bus(dut, port)
            addr_bits = min(len(_port(dut, f"{port}_aw_awaddr")), 48)
            view = AddressSpaceView(self.memory.space(name), 1 << addr_bits)
            for ch in ("aw", "w", "b", "ar", "r"):
                logging.getLogger(f"cocotb.{dut._name}.{port}_{ch}").setLevel(AXI_LOG_LEVEL)
            self.rams[name] = GuardedAxiRam(bus, clock, reset, False, mem=view, port=port, timing=timing)
        if "pri_mem" not in self.rams:
            raise DutInterfaceError("DUT has no primary memory port nvdla_core2dbb_*")

    def has(self, mem: str) -> bool:
        return mem in self.rams

    @property
    def violations(self) -> list[str]:
        return [v for ram in self.rams.values() for v in ram.violations]

    @property
    def reordered(self) -> int:
        """Read bursts answered out of order so far (random timing only)."""
        return sum(getattr(ram.read_if, "reordered", 0) for ram in self.rams.values())

    def violation_events(self) -> list[Event]:
        return [ram.violated for ram in self.rams.values()]
