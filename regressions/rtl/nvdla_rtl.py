"""NVDLA's own nv_small RTL as the DUT of the ``nvdla`` regressions (``test_nvdla_rtl_*.py``).

The DUT is the named DUT ``nvdla-nv_small`` (``tb.duts``): NVDLA's file list, built by the testbench exactly as
``--rtl-filelist`` would (so with the user-RTL defaults, e.g. 8192 idle cycles after reset) and cached under
``build/sim`` by content hash, one build shared by every xdist worker. Tests skip, naming why, only when that
RTL or Verilator is not there.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Iterator

import pytest

from runtime.suite import ERROR, FAIL, PASS, TargetSetupError, run_trace
from tb.runner import RTL_COVERAGE_ENV, SimulatorUnavailable, simulator_version

#: The named DUT (``tb.duts.NAMED_DUTS``) these suites verify.
DUT_NAME = "nvdla-nv_small"
CONFIG = "nv_small"
SIMULATOR = "verilator"
#: Simulations at once; `make regress` gives each xdist worker one core (DLA_SIM_WORKERS=1).
SIM_WORKERS = int(os.environ.get("DLA_SIM_WORKERS", "2"))
#: ``DLA_NVDLA_RTL=full`` (levels ci and up, ``levels.toml``): every trace, zoo network and loadable;
#: unset (``make test``): a handful of each, so `make test` stays well inside its budget.
FULL = os.environ.get("DLA_NVDLA_RTL", "") == "full"


def axi_random() -> int | None:
    """Random AXI timing (latency, out-of-order reads across IDs, back-pressure on every channel) for the
    NVDLA suites at ``DLA_NVDLA_RTL=full`` (levels ci and up), seeded by the run's ``FUZZ_SEED`` so a run
    replays; ``$DLA_AXI_RANDOM`` (tb.suite) still decides when set, and ``make test`` keeps fixed timing."""
    if not FULL or os.environ.get("DLA_AXI_RANDOM", "").strip():
        return None
    return int(os.environ.get("FUZZ_SEED") or 1) % (1 << 31)


def nvdla_rtl_options(**extra: object) -> dict:
    """``tb.suite.RtlOptions`` fields selecting NVDLA's nv_small RTL; skips the test when its file list or
    Verilator is missing."""
    from tb.duts import named_dut

    try:
        filelist = named_dut(DUT_NAME)
    except TargetSetupError as exc:
        pytest.skip(str(exc))
    try:
        simulator_version(SIMULATOR)
    except SimulatorUnavailable as exc:
        pytest.skip(f"{SIMULATOR} is not installed ({exc})")
    seed = axi_random()
    return {"filelist": str(filelist), **({"axi_random": seed} if seed is not None else {}), **extra}


@pytest.fixture
def no_rtl_coverage(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Builds and simulations of NVDLA's RTL without Verilator line/toggle coverage, even at coverage levels:
    the report covers our ``rtl/``, and instrumenting NVDLA's RTL would be a second, far slower build of it
    (more than 15 minutes on 2 busy cores) and slow every simulation."""
    monkeypatch.delenv(RTL_COVERAGE_ENV, raising=False)
    yield



def rule_disagreements(cases: dict[str, tuple[Path, str | None]], options: dict) -> list[str]:
    """Play rule cases (name -> (.cfg, golden's refusal or None)) on golden and on the RTL; one line per case
    where they do not tell the same story.

    A case golden computes must pass on both with golden's CRCs. A case golden refuses (a ``ConfigError``)
    must FAIL on the RTL against each operation computed alone: the hardware really computes something else
    there, so refusing is right and a model without the rule would have been wrong."""
    from tb.suite import run_traces

    golden = {o.name: o for o in (run_trace(str(cfg), CONFIG) for cfg, _ in cases.values())}
    rtl = {o.name: o for o in run_traces([(cfg, CONFIG) for cfg, _ in cases.values()], SIMULATOR,
                                         workers=SIM_WORKERS, options=options)}
    wrong = []
    for name, (_, refusal) in cases.items():
        if refusal is None:
            if golden[name].status != PASS or rtl[name].status != PASS:
                wrong.append(f"{name}: golden {golden[name].line()}; RTL {rtl[name].line()}")
            continue
        if golden[name].status != ERROR or "ConfigError" not in golden[name].detail:
            wrong.append(f"{name}: golden should refuse it, says {golden[name].line()}")
        if rtl[name].status != FAIL:
            wrong.append(f"{name}: golden refuses ({refusal}) but the RTL computes each op as if alone: "
                         f"{rtl[name].line()}")
    return wrong
