"""A mutation campaign as a regression test: ``DLA_MUTATE`` (levels.toml) picks the size, the campaign runs
(resuming ``build/mutate/<target>``) and the test fails below the minimum score, with the report's last lines.
One implementation for the golden, our-RTL and NVDLA-RTL units."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
MODE_ENV = "DLA_MUTATE"


def check_score(target: str, sizes: dict[str, tuple[int, float]]) -> None:
    """Run the ``target`` campaign at the size of ``$DLA_MUTATE`` (``sizes``: mode -> (mutants, minimum
    score)); skip, saying where it runs, when the mode is unset or unknown."""
    mode = os.environ.get(MODE_ENV, "").strip()
    if mode not in sizes:
        pytest.skip("mutation campaign: level nightly (DLA_MUTATE=sample) and full (DLA_MUTATE=full)")
    n, minimum = sizes[mode]
    proc = subprocess.run([sys.executable, "-m", "regressions.mutate", target, "-n", str(n), "--min-score",
                           str(minimum), "--jobs", os.environ.get("DLA_MUTATE_JOBS", "1")], cwd=REPO,
                          capture_output=True, text=True)
    tail = "\n".join(proc.stdout.strip().splitlines()[-4:])
    assert proc.returncode == 0, f"score below {minimum:.0%} (or the campaign failed):\n{tail}\n{proc.stderr[-2000:]}"
