"""The CBUF probe cases (regressions/lib/programs/cbuf.py) on the golden model alone: legal cases pass as traces,
refused ones are ERRORs naming the register of the rule they break (their NVDLA RTL counterpart lives in
regressions/rtl/test_nvdla_rtl_cbuf.py)."""
from __future__ import annotations

from pathlib import Path

from golden.config import get_config
from regressions.lib.programs.cbuf import cases, write_case
from runtime.suite import ERROR, PASS, run_trace

REFUSED = {"refused_weights_over_fetched": "CDMA.D_BANK.WEIGHT_BANK",
           "refused_data_over_released": "CSC.D_RELEASE.RLS_SLICES"}


def test_cbuf_cases_on_golden(tmp_path: Path) -> None:
    hw = get_config("nv_small")
    for case in cases():
        cfg, refusal = write_case(hw, case, tmp_path / "nv_small")
        outcome = run_trace(str(cfg), "nv_small")
        if case.name in REFUSED:
            assert refusal is not None and REFUSED[case.name] in refusal
            assert outcome.status == ERROR and REFUSED[case.name] in outcome.detail, outcome.line()
        else:
            assert refusal is None and outcome.status == PASS, outcome.line()
