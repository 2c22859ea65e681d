"""The simulator targets: the testbench's Verilator and Icarus runs, registered with the runtime by name.

The runtime sits below the testbench and never imports it; the application registers the simulators here
instead, so ``dla trace --target verilator`` and ``Network.run(target="icarus")`` find them. The testbench
(cocotb, the simulators' Python side) is imported only when a simulation runs.
"""
from __future__ import annotations

from typing import Any, Iterator

import numpy as np

from runtime.executor import Network, register_network_target
from runtime.suite import Outcome, register_batch_target

__all__ = ["SIMULATORS", "register_simulators"]

#: Simulators the testbench drives (``tb.simenv``).
SIMULATORS = ("icarus", "verilator")


def _run_suite(jobs: list[tuple[str, str, str]], workers: int, options: dict) -> Iterator[Outcome]:
    from tb.suite import run_suite

    return run_suite(jobs, workers, options)


def _run_network(network: Network, inputs: Any, **kwargs: Any) -> dict[str, np.ndarray]:
    from tb.network import run_network

    return run_network(network, inputs, **kwargs)


def register_simulators() -> None:
    """Make every simulator a batch target (trace suites) and a network target (loadables); idempotent."""
    for name in SIMULATORS:
        register_batch_target(name, _run_suite)
        register_network_target(name, _run_network)
