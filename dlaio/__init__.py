"""Input/output rules shared by every layer (compiler, runtime, tb, regressions); imports nothing of ours.

``dlaio.outputs`` is the one writer of every file or folder the tools produce: it refuses devices, FIFOs,
an output that is one of the command's inputs, and writes whole or not at all."""
from __future__ import annotations

from dlaio.outputs import OutputError, check_output, input_files, publish_dir, write_atomic

__all__ = ["OutputError", "check_output", "input_files", "publish_dir", "write_atomic"]
