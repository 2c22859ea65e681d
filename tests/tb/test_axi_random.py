"""Random AXI timing (``tb.memory.AxiTiming``): seeded, reproducible, off by default; on our rtl/ it changes
the simulated cycles and keeps every result."""
from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from runtime.suite import PASS, TargetSetupError
from tb.memory import AxiTiming
from tb.suite import AXI_RANDOM_ENV, RtlOptions, run_traces, settings_for
from tests.tb.conftest import available

TRACES = Path(__file__).resolve().parents[3] / "shared" / "nvdla" / "traces" / "nv_small"
NAMES = ("pdp_8x8x64_2x2_ave_int8_0", "sdp_23x13x42_bs_int8_mem_0")


def test_stall_patterns_are_seeded_per_channel():
    def first(timing: AxiTiming, channel: str) -> list[bool]:
        return list(itertools.islice(timing.stalls("nvdla_core2dbb", channel), 200))

    a, b = AxiTiming(1), AxiTiming(2)
    assert first(a, "ar") == first(AxiTiming(1), "ar")  # reproducible
    assert first(a, "ar") != first(b, "ar") and first(a, "ar") != first(a, "r")
    assert 0 < sum(first(a, "w")) < 200  # stalls some cycles, not all


def test_off_by_default_env_and_option(monkeypatch):
    monkeypatch.delenv(AXI_RANDOM_ENV, raising=False)
    assert settings_for(RtlOptions()).axi_random is None
    monkeypatch.setenv(AXI_RANDOM_ENV, "7")
    s = settings_for(RtlOptions())
    assert s.axi_random == 7 and s.timeout_scale > 1  # random stalls get a bigger budget
    assert settings_for(RtlOptions(axi_random=3)).axi_random == 3  # the option wins
    monkeypatch.setenv(AXI_RANDOM_ENV, "soon")
    with pytest.raises(TargetSetupError, match="DLA_AXI_RANDOM='soon': expected an integer seed"):
        settings_for(RtlOptions())


@pytest.mark.skipif(not available("icarus"), reason="iverilog not installed")
@pytest.mark.skipif(not TRACES.is_dir(), reason="no NVDLA nv_small traces")
def test_random_timing_changes_cycles_and_keeps_results(monkeypatch):
    monkeypatch.delenv(AXI_RANDOM_ENV, raising=False)
    jobs = [(TRACES / n / f"{n}.cfg", "nv_small") for n in NAMES]

    def run(seed: int | None) -> dict[str, tuple[str, int]]:
        outs = run_traces(jobs, "icarus", options=RtlOptions(axi_random=seed))
        assert all(o.metrics.get("axi_random") == seed for o in outs)
        return {o.name: (o.status, o.metrics["play_cycles"]) for o in outs}

    plain, one, two, again = run(None), run(1), run(2), run(1)
    for runs in (plain, one, two):
        assert all(status == PASS for status, _ in runs.values()), runs
    for name in NAMES:
        assert one[name][1] != plain[name][1] and two[name][1] != plain[name][1], (name, plain, one, two)
    assert again == one  # a seed replays the same timing
