"""Graph passes, one per module, run in order by ``PassManager`` (which can dump the graph after each)."""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Protocol

from compiler.ir import Graph
from compiler.profiles import PROFILES, DEFAULT_PROFILE, Profile
from dlaio import write_atomic
from golden.config import BYTES_PER_ELEMENT, HwConfig


@dataclass
class CompileContext:
    """What passes may consult: the hardware, the options, and a log for progress lines."""

    hw: HwConfig
    quant: str = "per-filter"  # or "per-kernel"
    #: the network's data type on the DLA: "int8" (calibrated), "int16" or "fp16" (``PRECISIONS``)
    precision: str = "int8"
    #: how calibration turns the values it sees into a range (``compiler.calib_range.METHODS``)
    calib_method: str = "minmax"
    log: Callable[[str], None] = lambda msg: None
    #: hears "pass i/n: name" before each pass (a terminal's status line; long compiles show they move)
    progress: Callable[[str], None] = lambda msg: None
    #: per-tensor absolute maxima from calibration (filled by the driver before quantization)
    amax: dict[str, float] = field(default_factory=dict)
    #: tensors whose range a calibration table gave (kept as given)
    table_ranges: set[str] = field(default_factory=set)
    #: every tensor's range as calibration (or a table, or the model) gave it, before any later pass changes
    #: one: what ``dla compile --calib-table-out`` writes, so that reading it back compiles the same loadable
    calibrated: dict[str, float] = field(default_factory=dict)
    #: tensors whose scale a pre-quantized model gave (``Graph.quant_scales``): kept exactly, no headroom
    fixed_scales: set[str] = field(default_factory=set)
    #: the network is for NVDLA's kmd firmware (``--format nvdla``): averages keep their input's scale and
    #: take the firmware's reciprocal table (it programs no other), and need one PDP pass
    firmware_pdp: bool = False
    #: the optional hardware optimisations to use (``--profile``; ``compiler.profiles``)
    profile: Profile = PROFILES[DEFAULT_PROFILE]
    #: per-channel mean of each tensor over the calibration inputs (bias correction)
    channel_mean: dict[str, object] = field(default_factory=dict)
    #: activation scale of every tensor (filled by the quantize pass)
    scales: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    #: |value| histogram of every calibrated tensor (``compiler.calib_range.AbsHistogram``; quant report)
    histograms: dict[str, object] = field(default_factory=dict)
    #: build the histograms even for ``minmax`` (which needs only the maxima): a third of a compile's time
    keep_histograms: bool = False
    #: calibration feeds: one {input name: float array} per sample
    calib_inputs: list[dict] = field(default_factory=list)
    #: ``--precision-overrides``: {model layer name: "int16" | "fp16"} (``passes.mixed``)
    overrides: dict[str, str] = field(default_factory=dict)
    #: each feature tensor's element type where a mixed network has several (``passes.mixed``)
    tensor_dtypes: dict[str, str] = field(default_factory=dict)


    def precision_of(self, layer: str) -> str:
        """A model layer's data type: its ``--precision-overrides`` entry, else the network's."""
        return self.overrides.get(layer, self.precision)

    @property
    def atom(self) -> int:
        """Channels per memory atom (surface) of the network's feature cubes."""
        return self.hw.atom_elements(self.precision)  # type: ignore[arg-type]

    @property
    def bpe(self) -> int:
        """Bytes per feature element."""
        return BYTES_PER_ELEMENT[self.precision]


#: Data types ``dla compile --precision`` builds networks in.
PRECISIONS = ("int8", "int16", "fp16")


class Pass(Protocol):
    name: str

    def __call__(self, g: Graph, ctx: CompileContext) -> Graph: ...


class PassManager:
    def __init__(self, passes: list[tuple[str, Callable[[Graph, CompileContext], Graph]]], dump_dir: Path | None = None,
                 observe: Callable[[str, Graph], None] | None = None):
        self.passes = passes
        self.dump_dir = dump_dir
        #: Called with (pass name, graph) after each pass: tests take the float graph just before lowering.
        self.observe = observe
        self.times: dict[str, float] = {}

    def run(self, g: Graph, ctx: CompileContext) -> Graph:
        self._dump("00_input.txt", g)
        for i, (name, fn) in enumerate(self.passes, 1):
            ctx.progress(f"pass {i}/{len(self.passes)}: {name}")
            t0 = time.perf_counter()
            g = fn(g, ctx)
            self.times[name] = time.perf_counter() - t0
            self._dump(f"{i:02d}_{name}.txt", g)
            if self.observe is not None:
                self.observe(name, g)
        return g

    def _dump(self, fname: str, g: Graph) -> None:
        """One file per pass, each written whole by the one output writer as soon as the pass ran (so the
        dumps up to a failing pass are there to debug it)."""
        if self.dump_dir is not None:
            write_atomic(self.dump_dir / fname, g.dump() + "\n")
