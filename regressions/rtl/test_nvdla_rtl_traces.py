"""NVDLA's nv_small conformance traces on NVDLA's own nv_small RTL (Verilator): every trace's verdict equals the
golden model's. A trace golden passes must pass on the RTL (its CRCs are NVDLA's); a trace golden calls N/A
(a missing data file, or SDP EW/LUT that nv_small lacks) must be N/A on the RTL too, for the same kind of
reason: the testbench reads the DUT's CFGROM, so the RTL reports the missing engine itself.

All traces run in ``SIM_WORKERS`` simulations of one cached build (the way ``test_rtl_traces.py`` runs them on
our ``rtl/``). ``make test`` plays one trace of each kind (``SMOKE``); ``DLA_NVDLA_RTL=full`` (``make regress``
at level ci and up) plays all 85.
"""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from conftest import KNOWN_INCOMPLETE, nvdla_traces_root
from regressions.rtl.nvdla_rtl import CONFIG, FULL, SIM_WORKERS, SIMULATOR, nvdla_rtl_options
from regressions.rtl.nvdla_rtl import no_rtl_coverage  # noqa: F401 (a fixture, used by pytestmark)
from runtime.strict import KnownIncomplete, strict_outcome
from runtime.suite import NA, PASS, Outcome, run_trace
from runtime.trace import find_traces
from tb.runner import SimulatorUnavailable, simulator_version
from tb.suite import run_traces

pytestmark = [pytest.mark.rtl, pytest.mark.usefixtures("no_rtl_coverage")]
#: ``make test``'s share: a conv, an image conv, PDP with split width, CDP, SDP with MEM operands, SDP->PDP on
#: the fly, and two N/A traces (SDP EW on nv_small; a trace whose weight file NVDLA did not ship).
SMOKE = (
    "dc_8x8x36_4x4x36x16_dilation_int8_0",
    "img_51x96x4_1x10x4x32_A8B8G8R8_int8_0",
    "pdp_16x6x16_4x2_split_max_int8_0",
    "cdp_8x8x32_lrn3_int8_0",
    "sdp_3x3x33_bs_bn_int8_0",
    "sdp_pdp_32x16x32_pass_through_int8_0",
    "sdp_3x3x33_ew_int8_reg_0",
    "dc_32x26x76_6x3x76x270_int8_0",
)
#: What the full nv_small suite is known to hold (README: 70 pass, 15 N/A on golden).
TRACES, GOLDEN_PASS = 85, 70


def trace_root(config: pytest.Config) -> Path:
    root = nvdla_traces_root(config) / CONFIG
    if not root.is_dir():
        pytest.skip(f"no NVDLA traces under {root}")
    return root


def same_verdict(golden: Outcome, rtl: Outcome) -> str | None:
    """Why ``rtl``'s verdict differs from ``golden``'s, or None when they agree."""
    if golden.status == PASS:
        return None if rtl.status == PASS else f"golden PASS, RTL {rtl.line()}"
    if golden.status == NA:
        if rtl.status != NA:
            return f"golden {golden.line()}, RTL {rtl.line()}"
        if golden.detail.startswith("missing data file") != rtl.detail.startswith("missing data file"):
            return f"N/A for different reasons: golden {golden.detail!r}, RTL {rtl.detail!r}"
        return None
    return f"golden itself says {golden.line()}"


def test_nv_small_traces_on_nvdla_rtl(pytestconfig: pytest.Config) -> None:
    root = trace_root(pytestconfig)
    options = nvdla_rtl_options()
    cfgs = find_traces(root)
    if not FULL:
        cfgs = [c for c in cfgs if c.parent.name in SMOKE]
        assert len(cfgs) == len(SMOKE), "a smoke trace is missing from the NVDLA folder"
    else:
        assert len(cfgs) == TRACES
    known = KnownIncomplete.load(KNOWN_INCOMPLETE)  # strict: only listed traces may miss data files
    golden = {o.name: strict_outcome(o, known) for o in (run_trace(str(c), CONFIG) for c in cfgs)}
    rtl = {o.name: strict_outcome(o, known) for o in run_traces([(c, CONFIG) for c in cfgs], SIMULATOR,
                                                                workers=SIM_WORKERS, options=options)}
    assert rtl.keys() == golden.keys()
    differ = [f"{name}: {why}" for name in golden if (why := same_verdict(golden[name], rtl[name]))]
    assert not differ, f"{len(differ)} of {len(golden)} verdicts differ from golden:\n" + "\n".join(differ)
    passed = sum(o.status == PASS for o in rtl.values())
    if FULL:
        assert passed == GOLDEN_PASS, f"{passed} traces passed on NVDLA's RTL, golden passes {GOLDEN_PASS}"
    for o in rtl.values():  # an EW/LUT trace is N/A because the DUT's CFGROM lacks the sub-unit
        if o.status == NA and not o.detail.startswith("missing data file"):
            assert "not in DUT" in o.detail or "engine" in o.detail, o.line()


#: Icarus plays NVDLA's RTL at about 200 simulated cycles/s, so it gets the 15 PDP traces and the smallest
#: convolution, at level nightly (DLA_SLOW_TESTS=1).
ICARUS_DC_TRACE = "dc_1x1x8_1x1x8x1_int8_0"


def test_pdp_and_dc_traces_on_nvdla_rtl_under_icarus(pytestconfig: pytest.Config) -> None:
    if os.environ.get("DLA_SLOW_TESTS") != "1":
        pytest.skip("slow (about 200 simulated cycles/s): level nightly, DLA_SLOW_TESTS=1")
    root = trace_root(pytestconfig)
    options = nvdla_rtl_options()
    try:
        simulator_version("icarus")
    except SimulatorUnavailable as exc:
        pytest.skip(f"icarus is not installed ({exc})")
    cfgs = [c for c in find_traces(root) if c.parent.name.startswith("pdp_") or c.parent.name == ICARUS_DC_TRACE]
    assert len(cfgs) == 16, [c.parent.name for c in cfgs]
    rtl = list(run_traces([(c, CONFIG) for c in cfgs], "icarus", workers=SIM_WORKERS, options=options))
    failed = [o.line() for o in rtl if o.status != PASS]
    assert not failed, f"{len(failed)} of {len(rtl)} traces did not pass under Icarus:\n" + "\n".join(failed)
