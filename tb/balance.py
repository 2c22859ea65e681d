"""Splitting a suite's traces between parallel simulations so they finish together.

Round robin (trace k to simulation k mod n) leaves one simulation running long after the other when the
work is lopsided, as in NVDLA's nv_small suite where one convolution is a third of all the cycles. Each
trace's cost is estimated by its hang budget (``tb.budget.trace_budget``: expected cycles from its
register program), and traces go, most expensive first, to the simulation with the least work so far
(longest-processing-time first). Each simulation still plays its traces in job order.
"""
from __future__ import annotations

from pathlib import Path
from typing import Sequence


def trace_cost(cfg: str, config: str) -> float:
    """Estimated cycles of a trace (its hang budget), or 0 when it cannot be estimated."""
    try:
        from golden.config import get_config
        from golden.regs import register_map
        from runtime.txn import parse_trace
        from tb.budget import trace_budget

        hw = get_config(config)
        return float(trace_budget(parse_trace(Path(cfg), register_map(hw.address_map)), hw))
    except Exception:  # noqa: BLE001 - an estimate only; the trace's own run reports its problems
        return 0.0


def balanced_parts(members: Sequence[int], costs: Sequence[float], n: int) -> list[list[int]]:
    """``members`` split into ``n`` lists of about equal total ``costs`` (``costs[i]`` for member i's
    position), each list in the original order."""
    loads = [0.0] * n
    parts: list[list[int]] = [[] for _ in range(n)]
    order = sorted(range(len(members)), key=lambda k: (-costs[k], k))
    for k in order:
        best = min(range(n), key=lambda s: (loads[s], len(parts[s]), s))
        loads[best] += costs[k]
        parts[best].append(k)
    return [[members[k] for k in sorted(p)] for p in parts]
