"""Register programs for hardware operations, in the form NVDLA's trace tests program them.

Each ``emit_*`` takes the operation's integer parameters (``compiler.hwparams``) and where its cubes and
operands live (absolute addresses or ``(region, offset)`` relocations) and appends register writes to a
``golden.program.RegProgram``. The compiler uses relocations; ``regressions.programs`` uses fixed addresses.
"""
from compiler.codegen.program import Cube, OperandPlacement
from golden.program import Loc, RegProgram

__all__ = ["Cube", "Loc", "OperandPlacement", "RegProgram"]
