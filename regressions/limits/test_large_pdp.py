"""A legal 2048x2048x64 int8 PDP cube pools in bounded memory and equals plain numpy (``large_pdp``). About
40 s, so it runs at the nightly regression level (unit ``golden.limits.large_pdp``, DLA_SLOW_TESTS=1)."""
from __future__ import annotations

import os
import sys

import pytest

from regressions.lib.childrun import run_child

#: "Well under 1.5 GB": the cube is 256 MiB, its output 64 MiB; one pass over it took 6.2 GB.
RSS_LIMIT = 1 << 30


def test_2048x2048x64_int8_pooling_in_bounded_memory():
    if os.environ.get("DLA_SLOW_TESTS") != "1":
        pytest.skip("about 40 s: level nightly, DLA_SLOW_TESTS=1")
    child = run_child([sys.executable, "-m", "regressions.limits.large_pdp"])
    print(f"\n  {child.stdout.strip()} (child {child.seconds:.1f} s, peak RSS {child.max_rss >> 20} MiB)")
    assert child.returncode == 0, child.stdout + child.stderr
    assert child.max_rss < RSS_LIMIT
