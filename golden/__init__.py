"""Bit-accurate numpy golden model of NVDLA-style DLA engines, driven by register writes and memory."""
from __future__ import annotations

from golden.config import PRESETS, HwConfig, get_config
from golden.errors import ConfigError, DlaError, RegisterError, UnsupportedError
from golden.memory import Memory

__all__ = [
    "PRESETS",
    "ConfigError",
    "Dla",
    "DlaError",
    "HwConfig",
    "Memory",
    "RegisterError",
    "UnsupportedError",
    "get_config",
]


def __getattr__(name: str):  # lazy: Dla pulls in every engine
    if name == "Dla":
        from golden.dla import Dla

        return Dla
    raise AttributeError(name)
