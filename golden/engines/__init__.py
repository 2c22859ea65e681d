"""Engine registry: one module per engine, each adding itself with one ``register`` call.

An engine is a pure function of register views and memory. The register-level model (``golden.dla``)
decides *when* it fires: when the engine's core units, its read DMA (if the config needs it) and every
engine chained on the fly with it (conv -> SDP -> PDP) are enabled in their consumer groups. Data passed
on the fly (CACC -> SDP int32, SDP -> PDP int8/int16) travels as numpy cubes through ``OpContext.flying_input``;
SDP -> PDP fp16 cubes are ``np.float16`` arrays whose bit patterns are the cmod's fp16 results (int cubes are int64).

A unit without ping-pong groups (BDMA) takes operations through a ``CommandQueue`` instead: a register
write queues a snapshot of its registers, another launches everything queued as group 0 or 1.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Mapping

import numpy as np

from golden.config import HwConfig
from golden.memory import Memory
from golden.regs import RegView
from golden.registry import Registry

if TYPE_CHECKING:
    from golden.cbuf import ConvCbuf


@dataclass
class OpContext:
    """Everything one engine operation sees."""

    hw: HwConfig
    mem: Memory
    #: Consumer-group register views of every unit taking part in the chain, keyed by unit name.
    regs: Mapping[str, RegView]
    #: Data handed over on the fly by the upstream engine (C, H, W int64), or None.
    flying_input: np.ndarray | None = None
    #: LUT tables of the unit (e.g. ``lut["SDP"]["LE"]``), int64 arrays of raw int16 entries.
    lut: Mapping[str, Mapping[str, np.ndarray]] = field(default_factory=dict)
    #: Read-only status registers an engine reports back, {(unit, register): value}.
    status: dict[tuple[str, str], int] = field(default_factory=dict)
    #: CBUF state a convolution starts from (``golden.cbuf``), given by ``Dla``; None when run alone (from reset).
    cbuf: ConvCbuf | None = None

    def report(self, unit: str, register: str, value: int) -> None:
        self.status[(unit, register)] = value & 0xFFFFFFFF


Views = Mapping[str, RegView]


def _none(_: Views) -> str | None:
    return None


def _always(_: Views) -> bool:
    return True


@dataclass(frozen=True)
class CommandQueue:
    """How a unit without ping-pong groups (BDMA) takes operations (NVDLA_NOTES §2, BDMA).

    Writing bit 0 = 1 to ``enqueue`` queues a snapshot of the unit's registers as one operation; writing
    bit 0 = 1 to ``launches[g]`` runs every queued operation in order as group g, after which the engine's
    done bits of group g are raised.
    """

    enqueue: str
    launches: tuple[str, ...]
    #: Slots of the queue; queueing into a full queue is an error (the hardware drops the operation).
    depth: int
    #: Hardware-owned register words from the number of operations queued, e.g. ``{"STATUS": ...}``.
    status: Callable[[int], Mapping[str, int]]


@dataclass(frozen=True)
class Engine:
    """How ``Dla`` finds, chains and completes one engine."""

    name: str
    #: Core units: all must have OP_EN set in their consumer group (the conv pipeline has five).
    units: tuple[str, ...]
    #: Companion read-DMA unit, if any.
    rdma: str | None
    #: GLB S_INTR_STATUS group-0 bits raised on completion, per unit (group 1 is bit + 1).
    done_bits: tuple[tuple[str, int], ...]
    #: Runs the operation; returns the cube handed on the fly to the sink engine, if any.
    run: Callable[[OpContext], np.ndarray | None]
    #: Engine feeding this one on the fly (e.g. SDP in flying mode -> "CONV"), from the core views.
    source: Callable[[Views], str | None] = _none
    #: Engine this one feeds on the fly (e.g. SDP with OUTPUT_DST=PDP -> "PDP").
    sink: Callable[[Views], str | None] = _none
    #: Whether the operation needs its read DMA enabled too.
    rdma_needed: Callable[[Views], bool] = _always
    #: Units whose LUT tables the engine reads.
    lut_units: tuple[str, ...] = ()
    #: Set for an engine fired by a launch register instead of D_OP_ENABLE (BDMA).
    queue: CommandQueue | None = None

    @property
    def all_units(self) -> tuple[str, ...]:
        return self.units + ((self.rdma,) if self.rdma else ())


ENGINES: Registry[Engine] = Registry("engine")

#: Modules that register engines; importing them fills ``ENGINES``.
ENGINE_MODULES = ("conv", "sdp", "pdp", "cdp", "bdma", "rubik")


def register(engine: Engine) -> Engine:
    return ENGINES.add(engine.name, engine)


def load_engines() -> dict[str, Engine]:
    """Import every engine module once (modules not written yet are skipped)."""
    for mod in ENGINE_MODULES:
        try:
            importlib.import_module(f"golden.engines.{mod}")
        except ModuleNotFoundError as exc:
            if exc.name != f"golden.engines.{mod}":
                raise
    return ENGINES


def engine_of_unit(unit: str) -> Engine | None:
    for eng in load_engines().values():
        if unit in eng.all_units:
            return eng
    return None
