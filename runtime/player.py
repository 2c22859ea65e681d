"""Plays a parsed trace on any Target and collects the results of its checks.

The player is async and speaks only the Target protocol, so the same code drives the golden model
in-process and a DUT under cocotb. ``intr_notify`` waits for its GLB done bit, clears it (as NVDLA's
ISR does) and fires its sync point; checks read memory back and compare after their sync point fired.
"""
from __future__ import annotations

import time
import zlib
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from golden.budget import MemoryBudgetError
from golden.regs import register_map
from runtime.target import InterruptTimeout, Target
from runtime.trace import (
    CheckCrc,
    CheckFile,
    CheckNothing,
    IntrNotify,
    MemInit,
    MemLoad,
    PollRegEqual,
    RegRead,
    RegWrite,
    SyncNotify,
    SyncWait,
    Trace,
    TraceError,
    parse_dat,
)
from runtime.txn import MAX_POLL_READS, DumpMem, LoadMem, PollReg, Wait

#: Reads of a register before ``poll_reg_equal`` gives up.
POLL_LIMIT = 100_000
#: How many reads pass between looks at the wall clock in a poll loop.
_CLOCK_EVERY = 1024
DEFAULT_TIMEOUT_NS = 10**10
#: Bytes one ``mem_init``/``check_crc`` block moves on targets without ``fill_mem``/``crc_mem``.
MEM_BLOCK = 16 << 20


class BudgetExceeded(Exception):
    """A trace ran out of its wall-clock budget or a poll out of its reads; names the trace line."""


@dataclass
class CheckResult:
    """Outcome of one check command."""

    kind: str  # check_crc, check_file, check_nothing, reg_read_check, read_reg (polled), dump_mem
    line: int
    ok: bool
    message: str = ""
    expected: int | None = None
    got: int | None = None
    first_diff: int | None = None

    def describe(self) -> str:
        return f"{self.kind} at line {self.line}: {self.message}"


@dataclass
class PlayResult:
    trace: str
    checks: list[CheckResult] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return bool(self.checks) and all(c.ok for c in self.checks)

    def failures(self) -> list[CheckResult]:
        return [c for c in self.checks if not c.ok]

    def to_dict(self) -> dict:
        return {"trace": self.trace, "checks": [asdict(c) for c in self.checks]}


def contiguous_runs(offsets: np.ndarray, values: np.ndarray) -> list[tuple[int, bytes]]:
    """Split sparse (offset, byte) pairs into contiguous writes; later entries win on overlap."""
    if offsets.size == 0:
        return []
    order = np.argsort(offsets, kind="stable")
    offs, vals = offsets[order], values[order]
    # keep the last of duplicate offsets
    keep = np.ones(offs.size, dtype=bool)
    keep[:-1] = offs[1:] != offs[:-1]
    offs, vals = offs[keep], vals[keep]
    breaks = np.flatnonzero(np.diff(offs) != 1) + 1
    starts = np.concatenate(([0], breaks))
    ends = np.concatenate((breaks, [offs.size]))
    return [(int(offs[s]), vals[s:e].tobytes()) for s, e in zip(starts, ends)]


async def load_dat(target: Target, mem: str, base: int, path: Path) -> None:
    offsets, values = parse_dat(path)
    for off, data in contiguous_runs(offsets, values):
        await target.write_mem(base + off, data, mem)


async def fill_mem(target: Target, mem: str, base: int, size: int, value: int) -> None:
    """``mem_init``: the target's own ``fill_mem`` when it has one (golden: zeros allocate nothing), else
    ``write_mem`` in blocks, never a buffer of the whole size."""
    fill = getattr(target, "fill_mem", None)
    if fill is not None:
        await fill(base, size, value, mem)
        return
    block = bytes([value]) * min(size, MEM_BLOCK)
    for off in range(0, size, MEM_BLOCK):
        await target.write_mem(base + off, block[: min(MEM_BLOCK, size - off)], mem)


async def crc_mem(target: Target, mem: str, base: int, size: int) -> int:
    """``check_crc``'s CRC-32: the target's own ``crc_mem`` when it has one (golden: unwritten memory costs
    nothing), else ``read_mem`` in blocks folded into one CRC."""
    crc = getattr(target, "crc_mem", None)
    if crc is not None:
        return await crc(base, size, mem)
    value = 0
    for off in range(0, size, MEM_BLOCK):
        value = zlib.crc32(await target.read_mem(base + off, min(MEM_BLOCK, size - off), mem), value)
    return value


async def play(trace: Trace, target: Target, timeout_ns: int = DEFAULT_TIMEOUT_NS,
               deadline: float | None = None) -> PlayResult:
    """Execute every command of ``trace`` on ``target``. Engine errors (ConfigError, UnsupportedError)
    propagate to the caller, which decides how to report them. ``deadline`` (``time.monotonic()``) bounds
    the wall time: it is looked at before every command and during polls (``BudgetExceeded``). A command
    whose memory would exceed the memory budget is a ``TraceError`` naming its line (bad input)."""
    at = _Line()
    try:
        return await _play(trace, target, timeout_ns, deadline, at)
    except MemoryBudgetError as exc:
        raise TraceError(trace.path, at.line, str(exc)) from None


class _Line:
    """The line of the command being played, for errors raised below the player."""

    line = 0


async def _play(trace: Trace, target: Target, timeout_ns: int, deadline: float | None, at: _Line) -> PlayResult:
    regmap = register_map(target.hw.address_map)
    intr_status_addr = regmap.address("GLB", "S_INTR_STATUS")
    fired: set[str] = set()
    events: set[tuple[str, str]] = set()
    result = PlayResult(trace.name)

    async def synced(sync: str, kind: str, line: int) -> bool:
        if sync in fired or sync in ("0", "NONE", "none"):
            return True
        result.checks.append(CheckResult(kind, line, False, f"sync point {sync} was never notified"))
        return False

    def in_time(line: int) -> None:
        if deadline is not None and time.monotonic() > deadline:
            raise BudgetExceeded(f"{trace.path}:{line}: wall-clock budget of the trace exceeded")

    for cmd in trace.commands:
        at.line = cmd.line
        in_time(cmd.line)
        if trace.stop_on_fail and result.checks and not result.checks[-1].ok:
            last = result.checks[-1]
            last.message += f"; trace stopped at line {last.line} (no +continue_on_fail)"
            break
        if isinstance(cmd, RegWrite):
            await target.write_reg(cmd.addr, cmd.value)
        elif isinstance(cmd, RegRead):
            got = await target.read_reg(cmd.addr)
            if cmd.expected is not None:
                ok = (got & cmd.mask) == (cmd.expected & cmd.mask)
                result.checks.append(
                    CheckResult("reg_read_check", cmd.line, ok,
                                f"{cmd.name}: expected {cmd.expected:#x} (mask {cmd.mask:#x}), got {got:#x}",
                                cmd.expected, got)
                )
        elif isinstance(cmd, PollRegEqual):
            for reads in range(1, POLL_LIMIT + 1):
                if await target.read_reg(cmd.addr) == cmd.value:
                    break
                if reads % _CLOCK_EVERY == 0:
                    in_time(cmd.line)
            else:
                raise InterruptTimeout(f"line {cmd.line}: {cmd.name} never became {cmd.value:#x} "
                                       f"in {POLL_LIMIT} reads")
        elif isinstance(cmd, MemInit):
            await fill_mem(target, cmd.mem, cmd.base, cmd.size, cmd.fill)
        elif isinstance(cmd, MemLoad):
            await load_dat(target, cmd.mem, cmd.base, cmd.file)
        elif isinstance(cmd, IntrNotify):
            try:
                await target.wait_interrupt(1 << cmd.bit, timeout_ns)
            except InterruptTimeout as exc:
                raise InterruptTimeout(f"line {cmd.line}: intr_notify({cmd.source}): {exc}") from None
            await target.write_reg(intr_status_addr, 1 << cmd.bit)
            fired.add(cmd.sync)
        elif isinstance(cmd, CheckCrc):
            if await synced(cmd.sync, "check_crc", cmd.line):
                got = await crc_mem(target, cmd.mem, cmd.base, cmd.size)
                ok = got == cmd.crc
                result.checks.append(
                    CheckResult("check_crc", cmd.line, ok,
                                f"{cmd.mem} {cmd.base:#x}+{cmd.size:#x}: expected crc {cmd.crc:#010x}, got {got:#010x}",
                                cmd.crc, got)
                )
        elif isinstance(cmd, CheckFile):
            if await synced(cmd.sync, "check_file", cmd.line):
                data = np.frombuffer(await target.read_mem(cmd.base, cmd.size, cmd.mem), dtype=np.uint8)
                ref = np.zeros(cmd.size, dtype=np.uint8)
                offs, vals = parse_dat(cmd.file)
                inside = offs < cmd.size
                ref[offs[inside]] = vals[inside]
                diff = np.flatnonzero(data != ref)
                ok = diff.size == 0
                first = None if ok else cmd.base + int(diff[0])
                msg = f"{cmd.mem} {cmd.base:#x}+{cmd.size:#x} matches {cmd.file.name}" if ok else (
                    f"{cmd.mem} {cmd.base:#x}+{cmd.size:#x} differs from {cmd.file.name} in {diff.size} bytes, "
                    f"first at {first:#x} (expected {int(ref[diff[0]]):#04x}, got {int(data[diff[0]]):#04x})"
                )
                result.checks.append(
                    CheckResult("check_file", cmd.line, ok, msg,
                                zlib.crc32(ref.tobytes()), zlib.crc32(data.tobytes()), first)
                )
        elif isinstance(cmd, CheckNothing):
            if await synced(cmd.sync, "check_nothing", cmd.line):
                result.checks.append(CheckResult("check_nothing", cmd.line, True, "operation completed"))
        elif isinstance(cmd, SyncNotify):
            events.add((cmd.unit, cmd.event))
        elif isinstance(cmd, SyncWait):
            # Commands run in order, so a notify that precedes its wait has already happened.
            if (cmd.unit, cmd.event) not in events and not any(e == cmd.event for _, e in events):
                raise TraceError(trace.path, cmd.line, f"sync_wait({cmd.unit}, {cmd.event}) before any sync_notify")
        elif isinstance(cmd, LoadMem):
            await target.write_mem(cmd.base, cmd.data, cmd.mem)
        elif isinstance(cmd, PollReg):
            limit = min(max(cmd.retries, 1), MAX_POLL_READS)
            for reads in range(1, limit + 1):
                got = await target.read_reg(cmd.addr)
                if cmd.matches(got):
                    break
                if reads % _CLOCK_EVERY == 0:
                    in_time(cmd.line)
            ok = cmd.matches(got)
            if not ok and cmd.retries > limit:
                raise BudgetExceeded(
                    f"{trace.path}:{cmd.line}: read_reg {cmd.name} polled {limit} times without reading "
                    f"{cmd.expected:#x} (mask {cmd.mask:#x}; last {got:#x}); +read_reg_poll_retries={cmd.retries} "
                    f"is above the maximum of {MAX_POLL_READS}")
            result.checks.append(
                CheckResult("read_reg", cmd.line, ok,
                            f"{cmd.name}: expected {cmd.expected:#x} (mask {cmd.mask:#x}), got {got:#x}"
                            f"{'' if ok or reads == 1 else f' after {reads} reads'}", cmd.expected, got)
            )
        elif isinstance(cmd, Wait):
            try:
                await target.wait_interrupt(cmd.bits, timeout_ns)
            except InterruptTimeout as exc:
                raise InterruptTimeout(f"line {cmd.line}: wait: {exc}") from None
        elif isinstance(cmd, DumpMem):
            data = np.frombuffer(await target.read_mem(cmd.base, cmd.size, cmd.mem), dtype=np.uint8)
            ref = np.frombuffer(cmd.expected, dtype=np.uint8)
            diff = np.flatnonzero(data != ref)
            ok = diff.size == 0
            first = None if ok else int(diff[0])
            msg = f"{cmd.mem} {cmd.base:#x}+{cmd.size:#x} matches {cmd.file.name}" if ok else (
                f"{cmd.mem} {cmd.base:#x}+{cmd.size:#x} differs from {cmd.file.name} in {diff.size} bytes, "
                f"first at offset {first:#x} (address {cmd.base + first:#x}: expected {int(ref[first]):#04x}, "
                f"got {int(data[first]):#04x})"
            )
            result.checks.append(
                CheckResult("dump_mem", cmd.line, ok, msg, zlib.crc32(cmd.expected), zlib.crc32(data.tobytes()),
                            None if ok else cmd.base + first)
            )
        else:  # pragma: no cover - parse_cfg/parse_txn produce only the types above
            raise TypeError(f"unknown command {cmd!r}")
    return result
