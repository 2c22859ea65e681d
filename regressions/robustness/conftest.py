"""Prints the parser-fuzzing throughput (examples/s per format) at the end of the session."""
from __future__ import annotations

import pytest

from regressions.robustness import throughput


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    lines = throughput.summary()
    if lines:
        terminalreporter.section("parser fuzzing throughput")
        for line in lines:
            terminalreporter.write_line(line)
