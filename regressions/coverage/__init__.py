"""Regression coverage (issue 6 item 4): functional bins over each engine's configuration space, sampled
from the golden model's completed operations (``functional``), and Verilator line/toggle coverage of
``rtl/`` (``rtl``). Both merge over pytest-xdist workers and regression units; ``functional.summarize``
gives the report's ``{"functional": ..., "rtl": ...}`` with the uncovered bins and lines.

Turn it on for a pytest run with ``-p regressions.coverage.plugin`` and ``DLA_COVERAGE_DIR=<unit>/coverage``.
"""
