"""pytest plugin collecting coverage: ``pytest -p regressions.coverage.plugin`` with ``$DLA_COVERAGE_DIR``
set (for a regression unit: ``<run_dir>/<unit>/coverage``).

Every pytest process (the controller and each xdist worker) samples the golden model's operations and
writes ``$DLA_COVERAGE_DIR/func-<worker>-<pid>.json`` when it ends. Simulations go to
``$DLA_COVERAGE_DIR/rtl`` (``$DLA_RTL_COVERAGE_DIR``, unless already set), which makes Verilator builds
coverage builds; after each test the worker folds the coverage files of its own simulations (named with
its pid by ``tb.runner``) into ``rtl/<worker>-<pid>.dat``, so the directory holds one file per worker,
not one per simulation. Without ``$DLA_COVERAGE_DIR`` the plugin does nothing.
"""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from regressions.coverage import functional, rtl
from tb.runner import RTL_COVERAGE_ENV, rtl_coverage_dir

COVERAGE_ENV = "DLA_COVERAGE_DIR"


def _coverage_dir() -> Path | None:
    value = os.environ.get(COVERAGE_ENV, "").strip()
    return Path(value).resolve() if value else None


_WORKER = ["main"]


def _worker() -> str:
    """This process's xdist worker id ("main" outside xdist). Read from the config, not from
    ``$PYTEST_XDIST_WORKER``, which a pytest started by a test inherits from its worker."""
    return _WORKER[0]


def _compact_rtl() -> None:
    directory = rtl_coverage_dir()
    if directory is not None and directory.is_dir():
        pid = os.getpid()
        rtl.compact(directory, f"*-{pid}-*.dat", directory / f"{_worker()}-{pid}.dat")


def pytest_configure(config: pytest.Config) -> None:
    directory = _coverage_dir()
    if directory is None:
        return
    _WORKER[0] = getattr(config, "workerinput", {}).get("workerid", "main")
    functional.install()
    os.environ.setdefault(RTL_COVERAGE_ENV, str(directory / "rtl"))


def pytest_runtest_logfinish(nodeid: str, location: tuple) -> None:
    if _coverage_dir() is not None:
        _compact_rtl()


def pytest_unconfigure(config: pytest.Config) -> None:
    directory = _coverage_dir()
    if directory is None:
        return
    _compact_rtl()
    functional.dump(directory / f"func-{_worker()}-{os.getpid()}.json")
