"""Options for the testbench tests: simulator availability and the `slow` marker.

Tests marked ``slow`` (whole NVDLA suites on rtl/, waveform builds) are skipped unless
``DLA_SLOW_TESTS=1`` or ``-m slow`` is given, so ``make test`` stays fast.
"""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from runtime.processes import descendants
from tb.runner import SimulatorUnavailable, simulator_version


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "slow: long simulations (run with DLA_SLOW_TESTS=1 or -m slow)")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if os.environ.get("DLA_SLOW_TESTS") == "1" or "slow" in (config.getoption("-m") or ""):
        return
    skip = pytest.mark.skip(reason="slow: set DLA_SLOW_TESTS=1 or pass -m slow")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)


def available(simulator: str) -> bool:
    try:
        simulator_version(simulator)
        return True
    except SimulatorUnavailable:
        return False


@pytest.fixture(params=["icarus", "verilator"])
def simulator(request) -> str:
    if not available(request.param):
        pytest.skip(f"{request.param} is not installed")
    return request.param


@pytest.fixture
def make_build_root(tmp_path):
    """A private build root (for tests about building itself)."""
    return tmp_path / "sim"



def simulators(pid: int) -> set[int]:
    """The Icarus ``vvp`` processes below ``pid`` (the signal tests check none outlives its driver)."""
    found = set()
    for kid in descendants(pid):
        try:
            if Path(f"/proc/{kid}/comm").read_text().strip() == "vvp":
                found.add(kid)
        except OSError:  # gone meanwhile
            pass
    return found
