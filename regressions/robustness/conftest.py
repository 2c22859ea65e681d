"""Prints the parser-fuzzing throughput (examples/s per format) at the end of the session; under xdist the
workers hand their figures to the controller, which prints the sum (when it loaded this conftest, i.e. when
the robustness tests were named on the command line; the per-format figures are also in each test's JUnit
properties)."""
from __future__ import annotations

import pytest

from regressions.robustness import throughput


def pytest_sessionfinish(session: pytest.Session) -> None:
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:  # an xdist worker
        workeroutput["robustness_rates"] = throughput.dump()


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error) -> None:
    throughput.merge(getattr(node, "workeroutput", {}).get("robustness_rates"))


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    lines = throughput.summary()
    if lines:
        terminalreporter.section("parser fuzzing throughput")
        for line in lines:
            terminalreporter.write_line(line)
