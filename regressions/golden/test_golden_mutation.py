"""Mutation score of the golden model (``make mutate TARGET=golden``, ``regressions.mutate``) as a regression.

``DLA_MUTATE`` (levels.toml) sizes it: ``sample`` (level nightly) checks the first ``SAMPLE`` mutants of the
acceptance sample (a prefix of it: the sample is drawn round robin over the units), ``full`` (level full) the
whole 300-mutant acceptance campaign (score >= 95% of the non-equivalent mutants, equivalents triaged in
``regressions/mutate/triage/golden*``). Results accumulate in ``build/mutate/golden`` (resumable, keyed by the
file's hash and the coverage map), so a night only runs the mutants whose file or tests changed.
Unset (``make test``, ci): skipped, saying so.
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
SIZES = {"sample": (50, 0.9), "full": (300, 0.95)}


def test_golden_mutation_score() -> None:
    if MODE not in SIZES:
        pytest.skip("mutation campaign: level nightly (DLA_MUTATE=sample) and full (DLA_MUTATE=full)")
    n, minimum = SIZES[MODE]
    proc = subprocess.run([sys.executable, "-m", "regressions.mutate", "golden", "-n", str(n), "--min-score",
                           str(minimum), "--jobs", os.environ.get("DLA_MUTATE_JOBS", "1")], cwd=REPO,
                          capture_output=True, text=True)
    tail = "\n".join(proc.stdout.strip().splitlines()[-3:])
    assert proc.returncode == 0, f"score below {minimum:.0%} (or the campaign failed):\n{tail}\n{proc.stderr[-2000:]}"
