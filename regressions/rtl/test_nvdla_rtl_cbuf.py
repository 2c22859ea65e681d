"""CBUF state across convolutions on NVDLA's nv_small RTL (``regressions/lib/programs/cbuf.py``): the golden model's
rules (``golden/cbuf.py``) against the hardware they were read from.

- Every sequence golden computes (weight and data reuse after SKIP_*_RLS with the reused buffers zeroed in
  memory, kept buffers released by a successor that does not reuse them, partial data release) passes on the
  RTL with golden's CRCs: the RTL really computes on what is resident, as golden does.
- Every sequence golden refuses fails on the RTL when checked against each operation computed alone: the RTL
  really computes something else there, so refusing is right and a CBUF-less model would have been wrong.
``make test`` plays one legal and one refused case; ``DLA_NVDLA_RTL=full`` all of them.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from golden.config import get_config
from regressions.lib.programs.cbuf import cases, write_case
from regressions.rtl.nvdla_rtl import CONFIG, FULL, nvdla_rtl_options, rule_disagreements
from regressions.rtl.nvdla_rtl import no_rtl_coverage  # noqa: F401 (a fixture, used by pytestmark)

pytestmark = [pytest.mark.rtl, pytest.mark.usefixtures("no_rtl_coverage")]
SMOKE = ("reuse_data_and_weights", "refused_weights_over_fetched")


def test_cbuf_sequences_on_nvdla_rtl(tmp_path: Path) -> None:
    options = nvdla_rtl_options()
    hw = get_config(CONFIG)
    written = {c.name: write_case(hw, c, tmp_path / CONFIG) for c in cases() if FULL or c.name in SMOKE}
    assert any(refusal for _, refusal in written.values()) and any(not r for _, r in written.values())
    assert not (wrong := rule_disagreements(written, options)), "\n".join(wrong)
