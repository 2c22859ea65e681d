"""Mutation score of NVDLA's nv_small datapath (``make mutate TARGET=nvdla-rtl``, ``regressions.mutate.nvdla``)
as a regression: mutant schemata in one Verilator build, NVDLA's own traces then our suites per mutant.

``DLA_MUTATE`` (levels.toml) sizes it: ``sample`` (level nightly) the first ``SAMPLE`` mutants of the campaign's
300, ``full`` (level full) all 300 (acceptance: score >= 90%). The schemata build always holds the 300, so both
share one build; results accumulate in ``build/mutate/nvdla-rtl`` (resumable). Unset: skipped.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
MODE = os.environ.get("DLA_MUTATE", "").strip()
#: (mutants, minimum score) per mode
SIZES = {"sample": (20, 0.8), "full": (300, 0.9)}


def test_nvdla_rtl_mutation_score() -> None:
    if MODE not in SIZES:
        pytest.skip("mutation campaign: level nightly (DLA_MUTATE=sample) and full (DLA_MUTATE=full)")
    from regressions.rtl.nvdla_rtl import nvdla_rtl_options

    nvdla_rtl_options()  # skips when NVDLA's RTL or Verilator is missing
    n, minimum = SIZES[MODE]
    proc = subprocess.run([sys.executable, "-m", "regressions.mutate", "nvdla-rtl", "-n", str(n), "--min-score",
                           str(minimum), "--jobs", os.environ.get("DLA_MUTATE_JOBS", "1")], cwd=REPO,
                          capture_output=True, text=True)
    tail = "\n".join(proc.stdout.strip().splitlines()[-4:])
    assert proc.returncode == 0, f"score below {minimum:.0%} (or the campaign failed):\n{tail}\n{proc.stderr[-2000:]}"
