"""Golden's verdict in each RTL harness's language: the one home of the golden-vs-RTL comparison.

A register program runs on the golden model first; what it answered becomes what the RTL must answer.
For the cocotb testbench (any DUT, both simulators) that is an NVDLA trace checking golden's output CRC,
run by ``runtime.suite.run_batch``; for ``tb/vectors/tb_nvdla.v`` (our RTL under Icarus, with its
random-latency AXI memory that checks the AXI rules) it is a vector file whose memory and register checks
hold golden's bytes. Every golden-vs-RTL check (the suites of ``regressions/rtl``, the fuzz driver's RTL
mode) goes through one of the two.
"""
from __future__ import annotations

import zlib
from collections.abc import Callable, Iterable
from pathlib import Path

from golden import Dla
from golden.config import HwConfig
from regressions.lib.programs import LayerTest
from runtime.suite import PASS, run_batch
from tb.vectors import MASK32, Vectors


def golden_trace(hw: HwConfig, program: LayerTest, directory: Path, name: str) -> Path:
    """``program`` as the trace ``directory/name/name.cfg`` checking the CRC of golden's output."""
    return crc_trace(program, directory, name, program.run(Dla(hw)))


def crc_trace(program: LayerTest, directory: Path, name: str, output: bytes) -> Path:
    """``program`` as the trace ``directory/name/name.cfg`` checking the CRC of ``output``: golden's answer
    the caller already has (to compare it with the reference first), or the answer under another rule set
    (the cmod's, as a control the RTL must fail)."""
    return program.write_trace(directory / name, name, zlib.crc32(output))


def rtl_disagreements(simulator: str, jobs: list[tuple[str, str, str]], options: dict) -> list[str]:
    """Run the traces of ``jobs`` in one simulation; one line per trace whose RTL run did not pass."""
    outcomes = list(run_batch(simulator, jobs, workers=1, options=options))
    assert len(outcomes) == len(jobs), f"{len(outcomes)} outcomes for {len(jobs)} traces"
    return [f"{o.name}: {o.status} {o.detail}" for o in outcomes if o.status != PASS]


class GoldenVectors:
    """One ``golden.Dla`` and one ``tb_nvdla.v`` vector file fed the same steps, so every check in the
    vectors holds the value golden produced. ``tb_address`` maps a DLA address to the testbench memory's
    (the testbench decodes only the low address bits)."""

    def __init__(self, hw: HwConfig, tb_address: Callable[[int], int] = lambda addr: addr) -> None:
        self.dla = Dla(hw)
        self.vec = Vectors()
        self.tb_address = tb_address

    def load(self, addr: int, data: bytes) -> None:
        """Memory both sides start from (8-byte words)."""
        self.dla.mem.write(addr, data)
        for off in range(0, len(data), 8):
            self.vec.mem_write(self.tb_address(addr + off), int.from_bytes(data[off : off + 8], "little"))

    def write(self, reg: str | int, value: int, nposted: bool = False) -> int:
        """A register write (by name or address) on both sides; returns its address."""
        addr = self.dla.map.resolve(reg)[0] if isinstance(reg, str) else reg
        self.dla.write_reg(addr, value)
        self.vec.write(addr, value, nposted=nposted)
        return addr

    def play(self, writes: Iterable[tuple[str, int]], nposted: Callable[[str], bool] = lambda name: False) -> None:
        for name, value in writes:
            self.write(name, value, nposted(name))

    def expect_reg(self, addr: int, mask: int = MASK32) -> int:
        """The RTL must read what golden reads at ``addr`` (under ``mask``); returns golden's value."""
        value = self.dla.read_reg(addr)
        self.vec.read(addr, value & mask, mask)
        return value

    def expect_memory(self, addr: int, size: int) -> None:
        """The RTL's memory must hold golden's bytes in ``[addr, addr + size)`` (8-byte words)."""
        golden_bytes = self.dla.mem.dram.read_bytes(addr, size)
        for off in range(0, size, 8):
            self.vec.mem_check(self.tb_address(addr + off), int.from_bytes(golden_bytes[off : off + 8], "little"))
