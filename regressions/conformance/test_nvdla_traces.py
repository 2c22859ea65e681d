"""NVDLA's own conformance traces on the golden model, checked by their CRCs."""
from __future__ import annotations

import pytest

from conftest import KNOWN_INCOMPLETE
from runtime.strict import KnownIncomplete, strict_outcome
from runtime.suite import NA, PASS, run_trace

pytestmark = pytest.mark.conformance


def test_trace(trace_case):
    config, path = trace_case
    if config is None:
        pytest.skip(f"no NVDLA traces under {path} (set NVDLA_TRACES or --nvdla-hw)")
    out = strict_outcome(run_trace(str(path), config), KnownIncomplete.load(KNOWN_INCOMPLETE))
    if out.status == NA:
        pytest.skip(out.detail)  # a unit the config lacks, or a data file NVDLA did not ship (known-incomplete)
    assert out.status == PASS, out.detail


def test_traces_needing_absent_sdp_units_pass_where_the_units_exist(traces_root):
    """nv_small lacks SDP EW/LUT, but NVDLA's nv_small EW/LUT traces carry EW-enabled CRCs
    (NOTES §4): on nv_small_256_full, which has those units, each must pass."""
    from runtime.trace import find_traces

    suite = traces_root / "nv_small"
    if not suite.is_dir():
        pytest.skip(f"no nv_small traces under {traces_root}")
    needing = []
    for cfg in find_traces(suite):
        out = run_trace(str(cfg), "nv_small")
        if out.status == NA and out.detail.startswith("needs SDP"):
            needing.append(cfg)
    assert needing, "expected nv_small traces that need SDP EW/LUT"
    for cfg in needing:
        out = run_trace(str(cfg), "nv_small_256_full")
        assert out.status == PASS, f"{cfg.parent.name} on nv_small_256_full: {out.status} {out.detail}"
