"""Hang budgets: how many clock cycles a DUT gets for an operation (or a whole trace) before the
testbench calls it hung.

The budget scales with the work the registers describe, decoded with ``golden.regs``: the bytes an
operation moves over the primary memory port (input/output cubes padded to memory atoms, weights, SDP
operand streams, BDMA lines) and, for convolutions, its MACs over the config's MACs per cycle
(``mac_atomic_c * mac_atomic_k``). Expected cycles are then multiplied by a generous MARGIN, given a
FLOOR (programming, fixed latencies) and capped (CAP), so a hang on a small operation is reported in
seconds of simulation rather than the half hour a flat per-byte budget gave a LeNet trace. Measured
on nv_small (our rtl/ and NVDLA's RTL): PDP/SDP/CDP take 4-7 cycles per 8-byte bus beat, convolutions
well under their MAC bound plus data; the budget sits 10x-100x above that.

``--timeout-cycles N`` (``BenchSettings.timeout_cycles``) replaces the computed budget.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterable, Iterator

from golden.config import HwConfig
from golden.regs import RegisterMap, RegView, register_map
from runtime.trace import MemLoad, RegWrite, Trace

#: Cycles per primary-memory bus beat expected of a DMA-bound engine (measured 4-7 on nv_small).
CYCLES_PER_BEAT = 8
#: Expected cycles times this is the budget: random AXI timing, slow DUTs and estimate errors fit in it.
MARGIN = 8
#: Budget of the smallest operation or trace (programming, pipeline latencies, CSB round trips).
FLOOR_CYCLES = 100_000
#: No budget above this (about 8 minutes of Verilator on NVDLA nv_small); --timeout-cycles goes higher.
CAP_CYCLES = 50_000_000
#: CSB cycles per trace command (register writes ~a few cycles, reads ~18 on NVDLA, polls more).
CYCLES_PER_COMMAND = 64
#: .dat files spend about 12 characters per payload byte; file size / 8 over-estimates the bytes.
_DAT_CHARS_PER_BYTE = 8
#: Registers whose OP_EN/launch bit starts an operation, besides every unit's D_OP_ENABLE.
_LAUNCH_REGISTERS = {("BDMA", "CFG_LAUNCH0"), ("BDMA", "CFG_LAUNCH1")}


@dataclass(frozen=True)
class OpWork:
    """What one operation moves over the memory port and computes."""

    unit: str
    data_bytes: int = 0
    weight_bytes: int = 0
    macs: int = 0

    def expected_cycles(self, hw: HwConfig) -> float:
        """Cycles a DMA- and MAC-bound engine of ``hw`` should need, without margin."""
        beat = max(1, hw.primary_memif_width // 8)
        beats = math.ceil((self.data_bytes + self.weight_bytes) / beat)
        macs_per_cycle = max(1, hw.mac_atomic_c * hw.mac_atomic_k)
        return CYCLES_PER_BEAT * beats + self.macs / macs_per_cycle


def budget_from_expected(expected: float, scale: float = 1.0) -> int:
    """FLOOR + MARGIN x expected cycles, times ``scale`` (e.g. random AXI timing), at most CAP."""
    return int(min(CAP_CYCLES, (FLOOR_CYCLES + MARGIN * expected) * scale))


def op_budget(work: OpWork, hw: HwConfig, scale: float = 1.0) -> int:
    """Budget of one operation."""
    return budget_from_expected(work.expected_cycles(hw), scale)


# ---- decoding operations from register writes ----------------------------------------------------------
def _cube_bytes(hw: HwConfig, width: int, height: int, channels: int, precision: int) -> int:
    """Bytes of a feature cube in memory: channels padded to whole memory atoms (nv_small: 8 bytes)."""
    bpe = 1 if precision == 0 else 2
    atom = max(1, hw.memory_atomic_size)
    return width * height * math.ceil(channels * bpe / atom) * atom


def _work(unit: str, v: RegView, rdma: RegView | None, hw: HwConfig) -> OpWork | None:
    """The work of the operation ``unit``'s enable starts, from its (and its RDMA's) registers."""
    if unit == "PDP":
        prec = v.D_DATA_FORMAT.INPUT_DATA
        cin = _cube_bytes(hw, v.D_DATA_CUBE_IN_WIDTH.CUBE_IN_WIDTH + 1, v.D_DATA_CUBE_IN_HEIGHT.CUBE_IN_HEIGHT + 1,
                          v.D_DATA_CUBE_IN_CHANNEL.CUBE_IN_CHANNEL + 1, prec)
        cout = _cube_bytes(hw, v.D_DATA_CUBE_OUT_WIDTH.CUBE_OUT_WIDTH + 1,
                           v.D_DATA_CUBE_OUT_HEIGHT.CUBE_OUT_HEIGHT + 1, v.D_DATA_CUBE_OUT_CHANNEL.CUBE_OUT_CHANNEL + 1,
                           prec)
        return OpWork(unit, cin + cout)
    if unit == "SDP":  # input, output and up to two per-element operand streams (X1/X2/Y): count 4 cubes
        cube = _cube_bytes(hw, v.D_DATA_CUBE_WIDTH.WIDTH + 1, v.D_DATA_CUBE_HEIGHT.HEIGHT + 1,
                           v.D_DATA_CUBE_CHANNEL.CHANNEL + 1, v.D_DATA_FORMAT.PROC_PRECISION)
        return OpWork(unit, 4 * cube)
    if unit == "CDP" and rdma is not None:  # LRN: the output cube is the input cube
        cube = _cube_bytes(hw, rdma.D_DATA_CUBE_WIDTH.WIDTH + 1, rdma.D_DATA_CUBE_HEIGHT.HEIGHT + 1,
                           rdma.D_DATA_CUBE_CHANNEL.CHANNEL + 1, rdma.D_DATA_FORMAT.INPUT_DATA)
        return OpWork(unit, 2 * cube)
    if unit == "CSC":  # the convolution: CSC sees the (extended) input, the kernels and the output
        prec = v.D_MISC_CFG.IN_PRECISION
        cin = v.D_DATAIN_SIZE_EXT_1.DATAIN_CHANNEL_EXT + 1
        data = _cube_bytes(hw, v.D_DATAIN_SIZE_EXT_0.DATAIN_WIDTH_EXT + 1,
                           v.D_DATAIN_SIZE_EXT_0.DATAIN_HEIGHT_EXT + 1, cin, prec)
        ow, oh = v.D_DATAOUT_SIZE_0.DATAOUT_WIDTH + 1, v.D_DATAOUT_SIZE_0.DATAOUT_HEIGHT + 1
        kernels = v.D_WEIGHT_SIZE_EXT_1.WEIGHT_KERNEL + 1
        kw, kh = v.D_WEIGHT_SIZE_EXT_0.WEIGHT_WIDTH_EXT + 1, v.D_WEIGHT_SIZE_EXT_0.WEIGHT_HEIGHT_EXT + 1
        weights = v.D_WEIGHT_BYTES.WEIGHT_BYTES or kw * kh * cin * kernels
        return OpWork(unit, data, weights, ow * oh * kernels * kw * kh * cin)
    if unit == "BDMA":  # CFG_LINE.SIZE in 32-byte units; read and written
        line = (v.CFG_LINE.SIZE + 1) * 32
        return OpWork(unit, 2 * line * (v.CFG_LINE_REPEAT.NUMBER + 1) * (v.CFG_SURF_REPEAT.NUMBER + 1))
    return None


def ops_work(writes: Iterable[tuple[int, int]], regmap: RegisterMap, hw: HwConfig) -> list[OpWork]:
    """Operations started by a sequence of (CSB address, value) register writes, each with its work judged
    from the values last written before its enable (both ping-pong groups share addresses)."""
    last: dict[int, int] = {}

    def view(unit: str) -> RegView:
        base = regmap.base(unit)
        u = regmap.unit(unit)
        return RegView(u, {r.offset: last[base + r.offset] for r in u.registers if base + r.offset in last})

    out: list[OpWork] = []
    for addr, value in writes:
        last[addr] = value
        reg = regmap.lookup(addr)
        if reg is None or not value & 1:
            continue
        if reg.name != "D_OP_ENABLE" and (reg.unit, reg.name) not in _LAUNCH_REGISTERS:
            continue
        rdma = f"{reg.unit}_RDMA"
        work = _work(reg.unit, view(reg.unit), view(rdma) if rdma in regmap.bases else None, hw)
        if work is not None:
            out.append(work)
    return out


def program_writes(writes: Iterable[tuple[str, str, int]], regmap: RegisterMap) -> Iterator[tuple[int, int]]:
    """(unit, register, word) writes, as a firmware step records them, as (address, word)."""
    for unit, name, word in writes:
        yield regmap.address(unit, name), word


# ---- traces --------------------------------------------------------------------------------------------
def loaded_bytes(trace: Trace) -> int:
    """Bytes a trace loads (``mem_load``/``load_mem``): the floor of its work when its operations cannot be
    decoded. ``mem_init`` and check regions are not counted: traces clear and check megabytes around small
    cubes."""
    from runtime.txn import LoadMem

    total = 0
    for cmd in trace.commands:
        if isinstance(cmd, LoadMem):  # input.txn: the bytes are already parsed
            total += cmd.size
        elif isinstance(cmd, MemLoad):
            try:
                total += cmd.file.stat().st_size // _DAT_CHARS_PER_BYTE
            except OSError:
                pass
    return total


def trace_budget(trace: Trace, hw: HwConfig, scale: float = 1.0) -> int:
    """Budget of a whole trace: the sum of its operations' expected cycles (decoded from its register
    writes), at least the expected cycles of moving what it loads, plus its CSB commands."""
    regmap = register_map(hw.address_map)
    writes = ((c.addr, c.value) for c in trace.commands if isinstance(c, RegWrite))
    expected = sum(w.expected_cycles(hw) for w in ops_work(writes, regmap, hw))
    expected = max(expected, OpWork("trace", loaded_bytes(trace)).expected_cycles(hw))
    return budget_from_expected(expected + CYCLES_PER_COMMAND * len(trace.commands) / MARGIN, scale)
