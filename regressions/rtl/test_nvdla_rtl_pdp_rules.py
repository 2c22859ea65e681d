"""PDP rules of NVDLA's nv_small RTL (``regressions/lib/programs/pdp_rules.py``) against the hardware they were
read from.

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
from regressions.lib.programs.pdp_rules import cases, write_case
from regressions.rtl.nvdla_rtl import CONFIG, FULL, nvdla_rtl_options, rule_disagreements
from regressions.rtl.nvdla_rtl import no_rtl_coverage  # noqa: F401 (a fixture, used by pytestmark)

pytestmark = [pytest.mark.rtl, pytest.mark.usefixtures("no_rtl_coverage")]
SMOKE = ("avg_1", "flush_right_unused_max", "flush_right_used_3_max", "rows_unread_w4_then_pdp",
         "rows_cropped_avg_k2s3_twice")


def test_pdp_rules_on_nvdla_rtl(tmp_path: Path) -> None:
    options = nvdla_rtl_options()
    hw = get_config(CONFIG)
    written = {c.name: (c, *write_case(hw, c, tmp_path / CONFIG)) for c in cases() if FULL or c.name in SMOKE}
    wrong = [f"{name}: golden should {case.expect} it, refusal: {refusal}"
             for name, (case, _, refusal) in written.items() if (refusal is None) != (case.expect == "pass")]
    wrong += rule_disagreements({name: (cfg, refusal) for name, (_, cfg, refusal) in written.items()}, options)
    assert not wrong, "\n".join(wrong)
