"""Environment of a simulation process, chosen for start-up time.

cocotb installs pytest's assertion rewriting for every module imported after it starts
(``COCOTB_REWRITE_ASSERTION_FILES`` defaults to ``*.py``): every module of ``golden``, ``runtime``, ``tb``,
numpy and cocotbext is parsed and rewritten at every simulation start, and with ``PYTHONDONTWRITEBYTECODE``
(set on our machines) nothing is cached: about a second per simulator process. Our code raises its own
exceptions with messages; only bare ``assert`` statements whose text becomes a report need rewriting:
cocotbext-axi's slave (``axi_slave.py``) and ``tb/memory.py``'s random-timing reads, whose AXI protocol
assertions ``tb.memory.GuardedAxiRam`` turns into the violation a trace FAILs with. When memory is
served by ``tb.fastmem`` (no random timing), which words its violations itself, nothing is rewritten.
"""
from __future__ import annotations

import os

from tb.fastmem_choice import fast_memory_wanted

#: Files whose asserts cocotb rewrites when cocotbext-axi serves memory (pytest ``python_files``
#: patterns; a pattern with ``/`` matches the whole path).
REWRITE_ASSERTION_FILES = "*/cocotbext/axi/axi_slave.py */tb/memory.py"
REWRITE_ENV = "COCOTB_REWRITE_ASSERTION_FILES"


def cocotb_env(jobs: object = None) -> dict[str, str]:
    """Variables for the simulator process playing ``jobs`` (a ``tb.results.JobFile`` or anything with
    ``settings``), on top of the caller's environment; ``$COCOTB_REWRITE_ASSERTION_FILES`` set by the
    user wins."""
    if REWRITE_ENV in os.environ:
        return {REWRITE_ENV: os.environ[REWRITE_ENV]}
    random_timing = getattr(getattr(jobs, "settings", None), "axi_random", None)
    return {REWRITE_ENV: "" if fast_memory_wanted(random_timing) else REWRITE_ASSERTION_FILES}
