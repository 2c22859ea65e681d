"""Register programs for hardware operations, in the form NVDLA's trace tests program them.

Each ``emit_*`` takes the operation's integer parameters (``compiler.hwparams``) and where its cubes and
operands live (absolute addresses or ``(region, offset)`` relocations) and appends register writes to a
``golden.program.RegProgram``. The compiler uses relocations; ``regressions.lib.programs`` uses fixed addresses.

One module per engine or variant: int8 ``conv``, ``sdp``, ``pdp``, ``cdp`` (and the shared ``lut`` writer);
16-bit ``conv_wide``, ``sdp_fp16`` and ``wide`` (PDP/CDP); ``winograd``, ``conv_image`` (pixel input) and
``conv_batch``.
"""
from compiler.codegen.program import Cube, OperandPlacement
from golden.program import Loc, RegProgram

__all__ = ["Cube", "Loc", "OperandPlacement", "RegProgram"]
