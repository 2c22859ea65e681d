"""What crosses the process boundary between the CLI/pytest process and a simulation: a job file in,
one result file per trace out (plain JSON, written atomically).

A simulation reads ``jobs.json`` (named by ``$DLA_TB_JOBS``), runs one cocotb test per trace and writes
``<n>.json`` for each trace as soon as it is done, so the caller can report traces while the simulation
is still running and knows exactly which traces never ran if the simulator dies.
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

from dlaio import write_atomic

#: Environment variable naming the job file of a simulation.
JOBS_ENV = "DLA_TB_JOBS"
SCHEMA = 1
#: The detail a result keeps if the cocotb test is torn down under it (a testbench error); the caller
#: then reports the test's error from results.xml.
ABORTED = "aborted (see the simulation log)"


@dataclass(frozen=True)
class BenchSettings:
    """How the testbench drives a DUT: clocking, reset, polling and time budgets."""

    #: Period of dla_core_clk and dla_csb_clk.
    clock_ns: int = 10
    #: Cycles dla_reset_rstn/direct_reset_ are held low.
    reset_cycles: int = 20
    #: Idle cycles after reset before the first CSB request (NVDLA's own testbench waits 4096; its
    #: nv_small needs several thousand cycles before it accepts work).
    reset_idle_cycles: int = 64
    #: Cycles between GLB.S_INTR_STATUS reads while waiting for an interrupt (the line itself wakes the
    #: waiter at once when the awaited bit is unmasked).
    poll_cycles: int = 256
    #: Per-trace budget: absolute cycles, or None to scale with the trace's data volume.
    timeout_cycles: int | None = None
    #: Multiplier of the volume-scaled default budget.
    timeout_scale: float = 1.0
    #: Budget for reading the CFGROM after the first reset (NVDLA answers a read in about 18 cycles).
    probe_cycles: int = 100_000
    #: Send CSB writes non-posted (wait for nvdla2csb_wr_complete). NVDLA's own flows post them.
    nposted_writes: bool = False
    #: The DUT is our RTL (``rtl/``): on an address map without a CFGROM (nvdlav1's) the testbench takes the
    #: CFGROM words our RTL would have (``tb.rtl_headers.rtl_cfgrom_values``) instead of assuming everything.
    builtin_rtl: bool = False
    #: Random AXI timing of the memory (``tb.memory.AxiTiming``) from this seed; None: the plain AxiRam.
    axi_random: int | None = None


@dataclass(frozen=True)
class TraceJob:
    """One trace for a simulation to play."""

    index: int
    cfg: str
    config: str
    name: str
    result: str


@dataclass
class JobFile:
    target: str
    settings: BenchSettings
    traces: list[TraceJob] = field(default_factory=list)

    def write(self, path: Path) -> None:
        doc = {"schema": SCHEMA, "target": self.target, "settings": asdict(self.settings),
               "traces": [asdict(t) for t in self.traces]}
        write_json(path, doc)

    @classmethod
    def read(cls, path: Path | str) -> JobFile:
        doc = json.loads(Path(path).read_text())
        if doc.get("schema") != SCHEMA:
            raise ValueError(f"{path}: job file schema {doc.get('schema')!r}, expected {SCHEMA}")
        return cls(doc["target"], BenchSettings(**doc["settings"]), [TraceJob(**t) for t in doc["traces"]])


def write_json(path: Path | str, doc: dict) -> None:
    """Write ``doc`` so that a reader never sees a partial file."""
    write_atomic(path, json.dumps(doc, indent=1, default=str))


def read_result(path: Path | str) -> dict | None:
    try:
        return json.loads(Path(path).read_text())
    except FileNotFoundError:
        return None
