"""Project-wide pytest options: where NVDLA's material lives (never required by the package itself)."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent
DEFAULT_SHARED = REPO.parent / "shared" / "nvdla"
#: NVDLA traces allowed to miss data files: the trace units are strict (runtime/strict.py), so any other
#: missing or misnamed data file fails them instead of quietly becoming N/A.
KNOWN_INCOMPLETE = REPO / "regressions" / "lists" / "known-incomplete.txt"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--nvdla-hw",
        metavar="PATH",
        help="an nvdla/hw checkout: traces are read from PATH/verif/tests/trace_tests/<config>",
    )


def nvdla_traces_root(config: pytest.Config) -> Path:
    """Folder holding one sub-folder of traces per hardware config."""
    hw = config.getoption("--nvdla-hw")
    if hw:
        return Path(hw) / "verif" / "tests" / "trace_tests"
    env = os.environ.get("NVDLA_TRACES")
    return Path(env) if env else DEFAULT_SHARED / "traces"


def nvdla_spec_root() -> Path:
    """NVDLA spec folder (defs/*.spec, manual/*.rdl); NVDLA_SPEC overrides the shared copy."""
    env = os.environ.get("NVDLA_SPEC")
    return Path(env) if env else DEFAULT_SHARED / "spec"


@pytest.fixture(scope="session")
def spec_root() -> Path:
    root = nvdla_spec_root()
    if not root.is_dir():
        pytest.skip(f"NVDLA spec files not found at {root} (set NVDLA_SPEC)")
    return root
