"""Verification: the library tests and suites share (``lib``), the suites (conformance, golden against the
reference math, end-to-end, RTL, fuzz, limits, robustness), the regression runner and the benchmarks."""
