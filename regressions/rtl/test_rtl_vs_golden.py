"""Golden vs RTL on hypothesis-drawn PDP and SDP layers: byte-identical outputs.

hypothesis draws the layers in the pytest process; each becomes a register program, the golden model gives
its output CRC, and the program is saved as an NVDLA trace checking that CRC (``regressions.lib.golden_verdict``).
All traces then run in one simulation of one DUT build (STYLE: configs go to the simulator as data).
``DLA_RTL_DIFF_EXAMPLES`` sets how many layers (20 in ``make test``, 200 at ``make regress`` level ci); both
simulators run them (``DLA_RTL_DIFF_SIM`` picks one).
"""
from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.targets import register_simulators
from golden import get_config
from regressions.lib import programs
from regressions.lib.golden_verdict import golden_trace, rtl_disagreements
from regressions.lib.strategies import pool_layers, sdp_layers
from tb.duts import dut_config, dut_from_env

register_simulators()  # run_batch and Network.run find the simulators by name

EXAMPLES = int(os.environ.get("DLA_RTL_DIFF_EXAMPLES", "20"))
SIMULATORS = [s for s in ("verilator", "icarus") if os.environ.get("DLA_RTL_DIFF_SIM", s) == s]
CONFIG = "nv_small"
#: The DUT (``$DLA_DUT``): our rtl/ by default.
DUT = dut_from_env()

pytestmark = pytest.mark.rtl


def save_traces(layers, directory: Path, simulator: str) -> list[tuple[str, str, str]]:
    hw = dut_config(DUT, get_config(CONFIG))  # e.g. our rtl/ implements the cmod's PDP AVERAGE datapath
    jobs = []
    for i, layer in enumerate(layers):
        kind = "pdp" if isinstance(layer, programs.PoolLayer) else "sdp"
        program = (programs.program_pdp if kind == "pdp" else programs.program_sdp)(hw, layer)
        cfg = golden_trace(hw, program, directory, f"{i:03d}_{kind}")
        jobs.append((str(cfg), CONFIG, simulator))
    return jobs


def draw_layers(count: int) -> list:
    """``count`` layers from hypothesis, one per example (a single example holding a list would be the
    minimal one under ``derandomize``: all 1x1x1 cubes)."""
    layers: list = []

    @settings(max_examples=count, deadline=None, derandomize=True, database=None,
              suppress_health_check=list(HealthCheck))
    @given(layer=st.one_of(pool_layers(), sdp_layers()))
    def collect(layer) -> None:
        layers.append(layer)

    collect()
    return layers


@pytest.mark.parametrize("simulator", SIMULATORS)
def test_pdp_and_sdp_layers_are_byte_identical_on_rtl(simulator):
    layers = draw_layers(EXAMPLES)
    assert len(layers) >= EXAMPLES
    with tempfile.TemporaryDirectory(prefix="rtl_diff_") as tmp:
        jobs = save_traces(layers, Path(tmp), simulator)
        bad = rtl_disagreements(simulator, jobs, {"dut_name": DUT})
    assert not bad, f"{len(bad)} of {len(jobs)} layers differ from golden:\n" + "\n".join(bad)
