"""Whether ``tb.fastmem`` serves the DUT's memory: a module of its own, importable without cocotb (the
CLI process decides the simulation's environment from it, ``tb.simenv``)."""
from __future__ import annotations

import os

#: ``$DLA_AXI_MODEL=cocotbext`` serves memory with cocotbext-axi even when ``tb.fastmem`` could (comparisons).
AXI_MODEL_ENV = "DLA_AXI_MODEL"


def fast_memory_wanted(random_timing: object = None) -> bool:
    """True unless random AXI timing is asked for (only cocotbext-axi's model has it, ``tb.memory``) or
    ``$DLA_AXI_MODEL=cocotbext``."""
    return random_timing is None and os.environ.get(AXI_MODEL_ENV, "").strip().lower() != "cocotbext"
