"""The pytest plugin: a pytest run with ``DLA_COVERAGE_DIR`` leaves one worker file that merges."""
from __future__ import annotations

import os
import subprocess
import sys

from regressions.coverage import functional
from regressions.coverage.plugin import COVERAGE_ENV
from regressions.coverage.rtl import REPO
from tb.runner import RTL_COVERAGE_ENV

NODE = "tests/regressions/coverage/test_functional.py::test_pdp_max_pool_hits_the_max_bin_only"


def test_a_pytest_run_leaves_a_worker_file(tmp_path):
    unit = tmp_path / "unit0" / "coverage"
    env = {k: v for k, v in os.environ.items() if k not in (COVERAGE_ENV, RTL_COVERAGE_ENV)}
    env[COVERAGE_ENV] = str(unit)
    args = ["-p", "no:cacheprovider", "-p", "regressions.coverage.plugin", "-q", "-n", "0", NODE]
    proc = subprocess.run([sys.executable, "-m", "pytest", *args], cwd=REPO, env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    files = list(unit.glob("func-main-*.json"))
    assert len(files) == 1
    summary = functional.summarize(tmp_path)
    assert summary["functional_files"] == 1
    assert summary["functional"]["PDP"]["counts"]["method:max"] == 1
    assert "rtl" in summary and summary["rtl"]["available"] is False
