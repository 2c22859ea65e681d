"""Our RTL (rtl/) under the testbench with NVDLA's nv_small traces: the testbench must give every trace a
verdict (PASS, FAIL or N/A with its reason), never an ERROR of its own. Whether the RTL passes is the
RTL's acceptance (regressions/), not this test's."""
from __future__ import annotations

import pytest

from conftest import nvdla_traces_root
from runtime.trace import find_traces
from tb.runner import REPO
from tb.suite import run_traces


@pytest.mark.slow
def test_nv_small_pdp_and_sdp_traces_get_verdicts(simulator, pytestconfig):
    root = nvdla_traces_root(pytestconfig) / "nv_small"
    if not root.is_dir() or not (REPO / "rtl" / "NV_nvdla.v").is_file():
        pytest.skip("needs NVDLA's traces and rtl/")
    cfgs = [(c, "nv_small") for c in find_traces(root) if c.parent.name.startswith(("pdp_", "sdp_", "cdp_8x8x32"))]
    outs = run_traces(cfgs, simulator, workers=2, options={"timeout_cycles": 300_000})
    assert len(outs) == len(cfgs)
    errors = [o.line() for o in outs if o.status == "ERROR"]
    assert not errors, errors
    na = {o.detail for o in outs if o.status == "N/A"}
    assert all(d.startswith(("engine ", "missing data file", "DUT is not")) for d in na), na
    assert any(o.detail == "engine CDP not in DUT (nor CDP_RDMA)" for o in outs)
