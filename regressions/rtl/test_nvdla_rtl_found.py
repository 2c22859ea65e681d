"""Replays every golden-vs-NVDLA-RTL disagreement kept under ``regressions/found/nvdla-rtl/`` (hand-reduced
traces, each with a ``failure.txt`` saying what differed and how it was resolved; docs/nvdla-rtl-vs-cmod.md).

Each is resolved one of two ways, and this test holds both for good:
- golden now computes what the RTL computes (a golden bug fixed, or an RTL rule modelled): the trace checks
  golden's CRC and passes on golden and on the RTL;
- golden refuses the program (``ConfigError``: illegal on this hardware): the trace still checks the CRC a
  model without the rule would give, and the RTL must not pass it, or the refusal would be unfounded.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from regressions.rtl.nvdla_rtl import CONFIG, SIM_WORKERS, SIMULATOR, nvdla_rtl_options
from regressions.rtl.nvdla_rtl import no_rtl_coverage  # noqa: F401 (a fixture, used by pytestmark)
from runtime.suite import ERROR, PASS, run_trace
from runtime.trace import find_traces
from tb.suite import run_traces

pytestmark = [pytest.mark.rtl, pytest.mark.usefixtures("no_rtl_coverage")]
FOUND = Path(__file__).resolve().parents[1] / "found" / "nvdla-rtl"


def test_found_disagreements_stay_resolved() -> None:
    cfgs = find_traces(FOUND)
    assert cfgs, f"no traces under {FOUND}"
    options = nvdla_rtl_options()
    golden = {o.name: o for o in (run_trace(str(c), CONFIG) for c in cfgs)}
    rtl = {o.name: o for o in run_traces([(c, CONFIG) for c in cfgs], SIMULATOR, workers=SIM_WORKERS,
                                         options=options)}
    wrong = []
    for name, g in golden.items():
        if g.status == PASS:
            if rtl[name].status != PASS:
                wrong.append(f"{name}: golden passes, RTL {rtl[name].line()}")
        elif g.status == ERROR and "ConfigError" in g.detail:
            if rtl[name].status == PASS:
                wrong.append(f"{name}: golden refuses it ({g.detail}) but the RTL passes it")
        else:
            wrong.append(f"{name}: unresolved on golden: {g.line()}")
    assert not wrong, "\n".join(wrong)
