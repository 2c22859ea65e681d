"""LUT upload and ``S_LUT_*`` settings (SDP and CDP share the access protocol): the one writer of a
``golden.lut.LutRegisters``, used by the compiler and by the regression programs (int8, int16, fp16)."""
from __future__ import annotations

from typing import Sequence

from compiler.codegen.program import u32
from golden.program import RegProgram
from golden.lut import LutRegisters


def _lut_writes(p: RegProgram, unit: str, le: Sequence[int], lo: Sequence[int]) -> None:
    for table_id, table in ((0, le), (1, lo)):
        p.reg(unit, "S_LUT_ACCESS_CFG", LUT_ADDR=0, LUT_TABLE_ID=table_id, LUT_ACCESS_TYPE=1)
        for v in table:
            p.reg(unit, "S_LUT_ACCESS_DATA", int(v) & 0xFFFF)


def _le_function(f) -> int:
    return 0 if f in ("exp", "exponent", 0) else 1


def emit_lut(p: RegProgram, unit: str, lut: LutRegisters) -> None:
    """Tables and S_LUT_* settings of an SDP or CDP LUT. CDP's START/END are 38-bit (LOW + HIGH[5:0]
    registers), SDP's are single 32-bit registers. fp16 bit patterns go out as they are; fp16 has no slope
    shifts, so they stay at 0."""
    _lut_writes(p, unit, lut.le_table, lut.lo_table)
    p.reg(unit, "S_LUT_CFG", LUT_LE_FUNCTION=_le_function(lut.le_function), LUT_UFLOW_PRIORITY=lut.uflow_priority,
          LUT_OFLOW_PRIORITY=lut.oflow_priority, LUT_HYBRID_PRIORITY=lut.hybrid_priority)
    p.reg(unit, "S_LUT_INFO", (lut.le_index_offset & 0xFF) | ((lut.le_index_select & 0xFF) << 8)
          | ((lut.lo_index_select & 0xFF) << 16))
    wide = unit == "CDP"
    for tab in ("le", "lo"):
        for end in ("start", "end"):
            v = getattr(lut, f"{tab}_{end}")
            name = f"S_LUT_{tab.upper()}_{end.upper()}"
            if wide:
                p.reg(unit, f"{name}_LOW", u32(v))
                p.reg(unit, f"{name}_HIGH", (v >> 32) & 0x3F)
            else:
                p.reg(unit, name, u32(v))
        p.reg(unit, f"S_LUT_{tab.upper()}_SLOPE_SCALE", (getattr(lut, f"{tab}_slope_uflow_scale") & 0xFFFF)
              | ((getattr(lut, f"{tab}_slope_oflow_scale") & 0xFFFF) << 16))
        p.reg(unit, f"S_LUT_{tab.upper()}_SLOPE_SHIFT", (getattr(lut, f"{tab}_slope_uflow_shift") & 0x1F)
              | ((getattr(lut, f"{tab}_slope_oflow_shift") & 0x1F) << 5))
