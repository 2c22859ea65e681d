"""Collects NVDLA's register-level traces as pytest cases: one id per trace, per config folder.

The traces are read from ../shared/nvdla/traces by default; ``NVDLA_TRACES=PATH`` or
``--nvdla-hw PATH`` (an nvdla/hw checkout) point elsewhere. Config folders are matched to presets by
name, so an nvdla/hw checkout's nv_small_256 or nv_large suites are picked up the same way.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from conftest import nvdla_traces_root
from golden.config import PRESETS
from runtime.trace import find_traces


def collect_cases(root: Path) -> list[tuple[str, Path]]:
    cases = []
    if root.is_dir():
        for sub in sorted(p for p in root.iterdir() if p.is_dir() and p.name in PRESETS):
            cases.extend((sub.name, cfg) for cfg in find_traces(sub, txn=True))
    return cases


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "trace_case" in metafunc.fixturenames:
        root = nvdla_traces_root(metafunc.config)
        cases = collect_cases(root)
        ids = [f"{cfg}/{path.parent.name}" for cfg, path in cases]
        if not cases:
            cases, ids = [(None, root)], ["no-traces"]
        metafunc.parametrize("trace_case", cases, ids=ids)


@pytest.fixture
def traces_root(request: pytest.FixtureRequest) -> Path:
    return nvdla_traces_root(request.config)
