"""Mutation score of the golden model (``make mutate TARGET=golden``, ``regressions.mutate``) as a regression.

``DLA_MUTATE`` (levels.toml) sizes it: ``sample`` (level nightly) checks the first ``SAMPLE`` mutants of the
acceptance sample (a prefix of it: the sample is drawn round robin over the units), ``full`` (level full) the
whole 300-mutant acceptance campaign (score >= 95% of the non-equivalent mutants, equivalents triaged in
``regressions/mutate/triage/golden*``). Results accumulate in ``build/mutate/golden`` (resumable, keyed by the
file's hash and the coverage map), so a night only runs the mutants whose file or tests changed.
Unset (``make test``, ci): skipped, saying so.
"""
from __future__ import annotations

from regressions.mutate.unit import check_score

#: (mutants, minimum score) per DLA_MUTATE mode
SIZES = {"sample": (50, 0.9), "full": (300, 0.95)}


def test_golden_mutation_score() -> None:
    check_score("golden", SIZES)
