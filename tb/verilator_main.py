"""Our Verilator simulation main (``tb/verilator_main.cpp``) in place of cocotb's ``verilator.cpp``.

cocotb's main evaluates the model twice per clock half period: the clock write is an inertial VPI put,
applied only after a first ``eval_step`` that has nothing to do. Ours applies queued puts (and settles the
callbacks they trigger) before evaluating, so each half period of a quiet design costs one evaluation, as
in NVDLA's own C++ harness; callbacks see the same values in the same order, so results are identical.
It also serves AXI memory ports in C++ (``dla_axi_open``, used by ``tb.fastmem.CxxAxiRam``): the
timing of cocotbext-axi's AxiRam without Python on every clock edge.
``$DLA_VERILATOR_STOCK_LOOP=1`` makes a simulation run cocotb's loop unchanged (the plusarg
``+dla_stock_loop``), for before/after measurements on the same build.

``tb.runner`` builds every Verilator DUT with ``main_loop_verilator()`` and hashes ``main_digest()`` into
the build's content hash.
"""
from __future__ import annotations

import functools
import hashlib
import os
from pathlib import Path

#: The C++ main compiled into every Verilator build.
MAIN_CPP = Path(__file__).resolve().with_name("verilator_main.cpp")
#: Set to 1 to run cocotb's stock loop (same build): before/after measurements.
STOCK_LOOP_ENV = "DLA_VERILATOR_STOCK_LOOP"


@functools.lru_cache(maxsize=None)
def main_digest() -> str:
    """Content hash of the main, part of the build manifest (an edit rebuilds)."""
    return hashlib.sha256(MAIN_CPP.read_bytes()).hexdigest()


#: Set to 1 to apply the C++ AXI ports' outputs right after the rising edge, as cocotbext-axi does, instead of
#: with the next falling edge (waveform runs always do).
AXI_EXACT_ENV = "DLA_AXI_EXACT"


def _on(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in ("1", "yes", "true", "on", "y")


def plusargs() -> list[str]:
    """Simulation plusargs for our main: ``+dla_stock_loop`` when ``$DLA_VERILATOR_STOCK_LOOP`` is set,
    ``+dla_axi_exact`` when ``$DLA_AXI_EXACT`` is."""
    return [arg for env, arg in ((STOCK_LOOP_ENV, "+dla_stock_loop"), (AXI_EXACT_ENV, "+dla_axi_exact"))
            if _on(env)]


class _MainLoop:
    """Mixin for cocotb's Verilator runner, compiling ``tb/verilator_main.cpp`` instead of cocotb's main."""

    def _build_command(self):
        cmds = super()._build_command()
        first = [str(MAIN_CPP) if Path(str(a)).name == "verilator.cpp" and "cocotb" in str(a) else a
                 for a in cmds[0]]
        if str(MAIN_CPP) not in first:
            raise RuntimeError("cocotb's Verilator build command has no verilator.cpp to replace")
        # export the main's dla_axi_* functions to ctypes (tb.fastmem.CxxAxiRam)
        cmds[0] = first + ["-LDFLAGS", "-rdynamic"]
        return cmds


@functools.lru_cache(maxsize=None)
def main_loop_verilator() -> type:
    """cocotb's Verilator runner class with our main. ``cocotb_tools.runner`` is imported here, not at
    module import: it imports cocotb and pytest, half a second of every ``dla`` start otherwise."""
    from cocotb_tools.runner import Verilator

    return type("MainLoopVerilator", (_MainLoop, Verilator), {})
