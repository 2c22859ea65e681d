"""Environment of a simulation process, chosen for start-up time.

cocotb installs pytest's assertion rewriting for every module imported after it starts
(``COCOTB_REWRITE_ASSERTION_FILES`` defaults to ``*.py``): every module of ``golden``, ``runtime``, ``tb``,
numpy and cocotbext is parsed and rewritten at every simulation start, and with ``PYTHONDONTWRITEBYTECODE``
(set on our machines) nothing is cached, which costs about a second per simulator process. Only
cocotbext-axi's bare ``assert`` statements need rewriting: ``tb.memory.GuardedAxiRam`` turns them into
the AXI protocol violation a trace FAILs with, and the rewritten message (``assert last == (n == length-1)``
with its values) is that report's text. Our own code raises its own exceptions with messages.
"""
from __future__ import annotations

import os

#: Files whose asserts cocotb rewrites (pytest ``python_files`` patterns; a pattern with ``/`` matches
#: the whole path). ``$COCOTB_REWRITE_ASSERTION_FILES`` set by the user wins.
REWRITE_ASSERTION_FILES = "*/cocotbext/axi/*.py"


def cocotb_env() -> dict[str, str]:
    """Variables for the simulator process, on top of the caller's environment."""
    return {"COCOTB_REWRITE_ASSERTION_FILES": os.environ.get("COCOTB_REWRITE_ASSERTION_FILES",
                                                             REWRITE_ASSERTION_FILES)}
