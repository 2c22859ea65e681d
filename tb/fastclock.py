"""Clocks toggled by our Verilator main loop (``dla_clock_start`` in ``tb/verilator_main.cpp``).

cocotb's GPI clock costs a timed VPI callback registration, a callback and an inertial put per half period:
on NVDLA's long, quiet traces that is several percent of the run. Our main toggles the clock itself at the
same point of the time step with the same kind of write (see the C++ comment), so ``RisingEdge``,
``ClockCycles`` and ``Timer`` in Python behave exactly as with ``cocotb.clock.Clock``; the clock stops
when the test that started it ends, as cocotb's does. Elsewhere (Icarus, cocotb's stock loop,
``$DLA_CLOCK=cocotb``) ``start_clock`` is cocotb's ``Clock``.
"""
from __future__ import annotations

import ctypes
import os

import cocotb
from cocotb.clock import Clock
from cocotb.utils import get_sim_steps
from cocotb.triggers import Event

#: ``$DLA_CLOCK=cocotb`` keeps cocotb's clock (comparisons).
CLOCK_ENV = "DLA_CLOCK"


def _api():
    """The main's ``dla_clock_start``/``dla_clock_stop``, or None."""
    if os.environ.get(CLOCK_ENV, "").strip().lower() == "cocotb":
        return None
    try:
        lib = ctypes.CDLL(None)
        start, stop = lib.dla_clock_start, lib.dla_clock_stop
    except (OSError, AttributeError):
        return None
    start.restype = ctypes.c_int
    start.argtypes = (ctypes.c_char_p, ctypes.c_ulonglong, ctypes.c_ulonglong, ctypes.c_int)
    stop.restype, stop.argtypes = None, (ctypes.c_int,)
    return start, stop


def start_clock(signal, period: float, unit: str = "ns") -> None:
    """Drive ``signal`` with a 50% clock of ``period`` from now on, until the current test ends:
    ``Clock(signal, period, unit).start()``, in C++ when the simulator's main can."""
    api = _api()
    path = getattr(signal, "_path", "")
    steps = get_sim_steps(period, unit)
    if api is not None and path and steps % 2 == 0:
        start, stop = api
        clock_id = start(path.encode(), steps, steps // 2, 1)
        if clock_id >= 0:
            cocotb.start_soon(_stop_at_test_end(stop, clock_id))
            return
    Clock(signal, period, unit).start()


async def _stop_at_test_end(stop, clock_id: int) -> None:
    """Held until cocotb cancels the test's tasks at its end, then stops the clock (as cocotb's Clock)."""
    try:
        await Event().wait()
    finally:
        stop(clock_id)
