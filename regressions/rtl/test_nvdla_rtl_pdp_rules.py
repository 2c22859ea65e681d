"""PDP rules of NVDLA's nv_small RTL (``regressions/programs_pdp_rules.py``) against the hardware they were read from.

- AVERAGE with pad values outside n*int8 and reciprocals above 1/kernel: golden's ``nv_small_rtl`` datapath
  (``HwConfig.pdp_average``) gives the RTL's CRCs.
- Right/bottom padding the RTL's flush count gets wrong, and a PDP after one that left input rows unread:
  golden refuses them, and the RTL fails them against each operation computed alone (a wrong output or no
  PDP done); the legal neighbours (and the compiler's cropped versions) pass with golden's CRCs.
``make test`` plays a few; ``DLA_NVDLA_RTL=full`` all of them in one simulation.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from golden.config import get_config
from regressions.programs_pdp_rules import cases, write_case
from regressions.rtl.nvdla_rtl import CONFIG, FULL, SIM_WORKERS, SIMULATOR, nvdla_rtl_options
from regressions.rtl.nvdla_rtl import no_rtl_coverage  # noqa: F401 (a fixture, used by pytestmark)
from runtime.suite import ERROR, FAIL, PASS, run_trace
from tb.suite import run_traces

pytestmark = [pytest.mark.rtl, pytest.mark.usefixtures("no_rtl_coverage")]
SMOKE = ("avg_1", "flush_right_unused_max", "flush_right_used_3_max", "rows_unread_w4_then_pdp",
         "rows_cropped_avg_k2s3_twice")


def test_pdp_rules_on_nvdla_rtl(tmp_path: Path) -> None:
    options = nvdla_rtl_options()
    hw = get_config(CONFIG)
    written = {c.name: (c, *write_case(hw, c, tmp_path / CONFIG)) for c in cases() if FULL or c.name in SMOKE}
    golden = {o.name: o for o in (run_trace(str(cfg), CONFIG) for _, cfg, _ in written.values())}
    rtl = {o.name: o for o in run_traces([(cfg, CONFIG) for _, cfg, _ in written.values()], SIMULATOR,
                                         workers=SIM_WORKERS, options=options)}
    wrong = []
    for name, (case, _, refusal) in written.items():
        if (refusal is None) != (case.expect == "pass"):
            wrong.append(f"{name}: golden should {case.expect} it, refusal: {refusal}")
        elif refusal is None:
            if golden[name].status != PASS or rtl[name].status != PASS:
                wrong.append(f"{name}: golden {golden[name].line()}; RTL {rtl[name].line()}")
        else:
            if golden[name].status != ERROR or "ConfigError" not in golden[name].detail:
                wrong.append(f"{name}: golden should refuse it, says {golden[name].line()}")
            if rtl[name].status != FAIL:
                wrong.append(f"{name}: golden refuses ({refusal}) but the RTL computes each op as if alone: "
                             f"{rtl[name].line()}")
    assert not wrong, "\n".join(wrong)
