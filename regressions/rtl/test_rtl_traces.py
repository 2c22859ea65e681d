"""NVDLA's nv_small traces on our RTL under both simulators: nothing fails, and every trace that passes on
the golden model passes on the RTL too unless the DUT's CFGROM says it lacks an engine the trace needs
(then it is N/A naming that engine). This is issue 3's trace acceptance, measured on every `make test`."""
from __future__ import annotations

import os

import pytest

from conftest import KNOWN_INCOMPLETE, nvdla_traces_root
from runtime.strict import KnownIncomplete, strict_outcome
from runtime.suite import FAIL, ERROR, NA, PASS, run_trace
from runtime.trace import find_traces
from tb.duts import DUT_ENV, dut_from_env
from tb.suite import run_traces

pytestmark = pytest.mark.rtl
#: Simulations at once; `make regress` gives each xdist worker one core (DLA_SIM_WORKERS=1).
SIM_WORKERS = int(os.environ.get("DLA_SIM_WORKERS", "2"))
#: The DUT (``$DLA_DUT``, ``make ... DUT=``): our rtl/ by default, or e.g. nvdla-nv_small.
DUT = dut_from_env()


@pytest.mark.parametrize("simulator", ["verilator", "icarus"])
def test_nv_small_traces_on_our_rtl(simulator, pytestconfig):
    root = nvdla_traces_root(pytestconfig) / "nv_small"
    if not root.is_dir():
        pytest.skip(f"no NVDLA traces under {root}")
    cfgs = find_traces(root)
    known = KnownIncomplete.load(KNOWN_INCOMPLETE)  # strict: only listed traces may miss data files
    rtl = {o.name: strict_outcome(o, known) for o in run_traces([(c, "nv_small") for c in cfgs], simulator,
                                                                workers=SIM_WORKERS, options={"dut_name": DUT})}
    golden = {o.name: strict_outcome(o, known) for o in (run_trace(str(c), "nv_small") for c in cfgs)}
    assert rtl.keys() == golden.keys()
    broken = [o.line() for o in rtl.values() if o.status in (FAIL, ERROR)]
    assert not broken, broken
    for name, g in golden.items():
        r = rtl[name]
        if g.status == PASS:
            assert r.status == PASS or (r.status == NA and r.detail.startswith("engine ")), r.line()
        else:
            assert r.status == NA, r.line()
    passed = {n for n, o in rtl.items() if o.status == PASS}
    assert {n for n in passed if n.startswith("pdp_")} == {n for n, g in golden.items() if n.startswith("pdp_") and g.status == PASS}
    assert len([n for n in passed if n.startswith("sdp_")]) >= 19, f"{DUT_ENV}={DUT}"
