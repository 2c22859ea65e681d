"""Fuzz properties: one registration per property, found by the fuzz driver, the pytest tests and the
regression report alike (STYLE: a new engine or op is added by one registration)."""
from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any, Callable

from hypothesis.strategies import SearchStrategy

from golden.config import HwConfig
from golden.registry import Registry

#: Modules that register properties; importing them fills ``PROPERTIES``.
MODULES = ("regressions.fuzz.engines", "regressions.fuzz.networks", "regressions.fuzz.rubik_bdma",
           "regressions.fuzz.image_batch", "regressions.fuzz.winograd_wcomp", "regressions.fuzz.fp16_conv",
           "regressions.fuzz.wide_pool_lrn", "regressions.fuzz.fp16_sdp")


@dataclass(frozen=True)
class Property:
    """One differential property over drawn examples."""

    #: Short name used on the command line and in ``regressions/found/<name>/`` ("sdp", "network", ...).
    name: str
    #: Engine or area the property exercises (report grouping).
    engine: str
    #: Presets the property is fuzzed on.
    configs: tuple[str, ...]
    #: Legal examples for one hardware config.
    strategy: Callable[[HwConfig], SearchStrategy]
    #: Golden against the independent reference; raises AssertionError naming the difference.
    check: Callable[[HwConfig, Any], None]
    #: Example <-> JSON, so shrunk failures are saved and replayed as ``@example``s.
    to_json: Callable[[Any], dict]
    from_json: Callable[[dict], Any]
    #: Register program of an example plus the reference's expected output bytes: makes replayable
    #: traces and drives RTL targets. None for properties that are not one register program.
    program: Callable[[HwConfig, Any], tuple[Any, bytes]] | None = None
    #: Named DUTs (``tb.duts.NAMED_DUTS``) whose RTL has this engine, so golden == RTL applies on them:
    #: ``rtl`` (ours: PDP, SDP), ``nvdla-nv_small`` (NVDLA's: CONV, SDP, PDP, CDP).
    duts: tuple[str, ...] = ()

    @property
    def rtl(self) -> bool:
        """Whether the property runs on some simulated DUT."""
        return bool(self.duts)


PROPERTIES: Registry[Property] = Registry("fuzz property")


def register(prop: Property) -> Property:
    return PROPERTIES.add(prop.name, prop)


def load() -> Registry[Property]:
    for module in MODULES:
        importlib.import_module(module)
    return PROPERTIES
