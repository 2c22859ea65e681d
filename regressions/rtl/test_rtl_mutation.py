"""Mutation score of our RTL (``make mutate TARGET=rtl``, ``regressions.mutate.rtl``) as a regression.

``DLA_MUTATE`` (levels.toml) sizes it: ``sample`` (level nightly) checks the first ``SAMPLE`` mutants of the
campaign's sample, ``full`` (level full) the acceptance campaign (``FULL`` mutants, score >= 95%). Results
accumulate in ``build/mutate/rtl`` (resumable, keyed by file hash and the test pool), so a night only runs the
mutants whose file or tests changed. Unset (``make test``, ci): skipped.
"""
from __future__ import annotations

from regressions.mutate.unit import check_score

#: (mutants, minimum score) per DLA_MUTATE mode
SIZES = {"sample": (20, 0.9), "full": (160, 0.95)}


def test_rtl_mutation_score() -> None:
    check_score("rtl", SIZES)
