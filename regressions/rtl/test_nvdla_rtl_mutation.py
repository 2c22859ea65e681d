"""Mutation score of NVDLA's nv_small datapath (``make mutate TARGET=nvdla-rtl``, ``regressions.mutate.nvdla``)
as a regression: mutant schemata in one Verilator build, NVDLA's own traces then our suites per mutant.

``DLA_MUTATE`` (levels.toml) sizes it: ``sample`` (level nightly) the first ``SAMPLE`` mutants of the campaign's
300, ``full`` (level full) all 300 (acceptance: score >= 90%). The schemata build always holds the 300, so both
share one build; results accumulate in ``build/mutate/nvdla-rtl`` (resumable). Unset: skipped.
"""
from __future__ import annotations

from regressions.mutate.unit import check_score

#: (mutants, minimum score) per DLA_MUTATE mode
SIZES = {"sample": (20, 0.8), "full": (300, 0.9)}


def test_nvdla_rtl_mutation_score() -> None:
    from regressions.rtl.nvdla_rtl import nvdla_rtl_options

    nvdla_rtl_options()  # skips when NVDLA's RTL or Verilator is missing
    check_score("nvdla-rtl", SIZES)
