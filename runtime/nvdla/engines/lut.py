"""LUT upload shared by SDP and CDP (the firmware's ``common.c update_lut``): both tables through the
S_LUT_ACCESS port, then the S_LUT_* configuration. These registers are single (not ping-pong), which
is why the engines' ``is_ready`` keeps two groups with different LUTs from overlapping."""
from __future__ import annotations

from runtime.nvdla.descriptors import LutParam
from runtime.nvdla.engines import FirmwareStep, hi32, lo32

PRECISION_FP16 = 2
_PRIORITY = ("LE", "LO")
_METHOD = ("EXPONENT", "LINEAR")


def upload_lut(p: FirmwareStep, unit: str, lut: LutParam, precision: int) -> None:
    """``unit`` is "CDP" or "SDP". CDP has 64-bit start/end registers (LOW/HIGH), SDP 32-bit ones."""
    if lut.method > 1 or max(lut.hybrid_priority, lut.underflow_priority, lut.overflow_priority) > 1:
        raise p.fail(f"LUT method {lut.method} / priorities out of range")
    p.reg(unit, "S_LUT_ACCESS_CFG", LUT_TABLE_ID="LE", LUT_ACCESS_TYPE="WRITE")
    for v in lut.linear_exp_table:
        p.reg(unit, "S_LUT_ACCESS_DATA", v & 0xFFFF)
    p.reg(unit, "S_LUT_ACCESS_CFG", LUT_TABLE_ID="LO", LUT_ACCESS_TYPE="WRITE")
    for v in lut.linear_only_table:
        p.reg(unit, "S_LUT_ACCESS_DATA", v & 0xFFFF)
    p.reg(unit, "S_LUT_CFG", LUT_LE_FUNCTION=_METHOD[lut.method],
          LUT_HYBRID_PRIORITY=_PRIORITY[lut.hybrid_priority], LUT_UFLOW_PRIORITY=_PRIORITY[lut.underflow_priority],
          LUT_OFLOW_PRIORITY=_PRIORITY[lut.overflow_priority])
    if lut.method == 0:  # exponent: the LE offset is an index offset, the LO one an index select
        p.reg(unit, "S_LUT_INFO", LUT_LE_INDEX_OFFSET=lut.linear_exp_offset.value & 0xFF,
              LUT_LO_INDEX_SELECT=lut.linear_only_offset.value & 0xFF)
    else:
        p.reg(unit, "S_LUT_INFO", LUT_LE_INDEX_SELECT=lut.linear_exp_offset.value & 0xFF,
              LUT_LO_INDEX_SELECT=lut.linear_only_offset.value & 0xFF)
    wide = unit == "CDP"
    for name, value in (("LE_START", lut.linear_exp_start), ("LE_END", lut.linear_exp_end),
                        ("LO_START", lut.linear_only_start), ("LO_END", lut.linear_only_end)):
        if wide:
            p.reg(unit, f"S_LUT_{name}_LOW", lo32(value))
            p.reg(unit, f"S_LUT_{name}_HIGH", hi32(value))
        else:
            p.reg(unit, f"S_LUT_{name}", lo32(value))
    le_u, le_o = lut.linear_exp_underflow_slope, lut.linear_exp_overflow_slope
    lo_u, lo_o = lut.linear_only_underflow_slope, lut.linear_only_overflow_slope
    if precision == PRECISION_FP16:  # fp16 slopes are the raw 16-bit words, no shifters
        p.reg(unit, "S_LUT_LE_SLOPE_SCALE", ((le_o.scale & 0xFFFF) << 16) | (le_u.scale & 0xFFFF))
        p.reg(unit, "S_LUT_LO_SLOPE_SCALE", ((lo_o.scale & 0xFFFF) << 16) | (lo_u.scale & 0xFFFF))
        return
    p.reg(unit, "S_LUT_LE_SLOPE_SCALE", LUT_LE_SLOPE_UFLOW_SCALE=le_u.scale & 0xFFFF,
          LUT_LE_SLOPE_OFLOW_SCALE=le_o.scale & 0xFFFF)
    p.reg(unit, "S_LUT_LE_SLOPE_SHIFT", LUT_LE_SLOPE_UFLOW_SHIFT=le_u.shifter & 0x1F,
          LUT_LE_SLOPE_OFLOW_SHIFT=le_o.shifter & 0x1F)
    p.reg(unit, "S_LUT_LO_SLOPE_SCALE", LUT_LO_SLOPE_UFLOW_SCALE=lo_u.scale & 0xFFFF,
          LUT_LO_SLOPE_OFLOW_SCALE=lo_o.scale & 0xFFFF)
    p.reg(unit, "S_LUT_LO_SLOPE_SHIFT", LUT_LO_SLOPE_UFLOW_SHIFT=lo_u.shifter & 0x1F,
          LUT_LO_SLOPE_OFLOW_SHIFT=lo_o.shifter & 0x1F)


def lut_is_ready(lut_index: int, other) -> bool:
    """SDP/CDP ``is_ready``: a group may load its LUT unless the other group holds a different one
    that is still in use."""
    if lut_index == -1 or other is None:
        return True
    if other.lut_index == lut_index:
        return True
    if other.lut_index != -1:
        return False
    return not other.active
