"""Mutation score of our RTL (``make mutate TARGET=rtl``, ``regressions.mutate.rtl``) as a regression.

``DLA_MUTATE`` (levels.toml) sizes it: ``sample`` (level nightly) checks the first ``SAMPLE`` mutants of the
campaign's sample, ``full`` (level full) the acceptance campaign (``FULL`` mutants, score >= 95%). Results
accumulate in ``build/mutate/rtl`` (resumable, keyed by file hash and the test pool), so a night only runs the
mutants whose file or tests changed. Unset (``make test``, ci): skipped.
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
SIZES = {"sample": (20, 0.9), "full": (160, 0.95)}


def test_rtl_mutation_score() -> None:
    if MODE not in SIZES:
        pytest.skip("mutation campaign: level nightly (DLA_MUTATE=sample) and full (DLA_MUTATE=full)")
    n, minimum = SIZES[MODE]
    proc = subprocess.run([sys.executable, "-m", "regressions.mutate", "rtl", "-n", str(n), "--min-score",
                           str(minimum), "--jobs", os.environ.get("DLA_MUTATE_JOBS", "1")], cwd=REPO,
                          capture_output=True, text=True)
    tail = "\n".join(proc.stdout.strip().splitlines()[-3:])
    assert proc.returncode == 0, f"score below {minimum:.0%} (or the campaign failed):\n{tail}\n{proc.stderr[-2000:]}"
