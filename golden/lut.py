"""The LUT parameter block of SDP's Y stage and CDP (LRN), as one type.

NVDLA gives SDP and CDP the same LUT: two tables written through ``S_LUT_ACCESS_CFG``/``S_LUT_ACCESS_DATA``
(LE 65 entries, LO 257 entries) and the same ``S_LUT_*`` settings registers. The block has one shape in
both units; the units differ only in how wide START/END are (SDP one 32-bit register, CDP ``_LOW`` plus a
6-bit ``_HIGH``) and the precisions only in how a field's bits are read (int8/int16: signed integers; fp16:
the same registers hold fp16 table entries and slope scales, fp32 START/END patterns, and the slope shifts
are unused). So one container holds every case; the arithmetic that reads it stays with each model.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Union

from golden.regs import RegView

LE_DEPTH, LO_DEPTH = 65, 257
#: ``S_LUT_CFG`` priorities (and ``S_LUT_ACCESS_CFG.LUT_TABLE_ID``): 0 selects LE, 1 LO.
TABLE_LE, TABLE_LO = 0, 1


@dataclass(frozen=True)
class LutRegisters:
    """The LUT tables and ``S_LUT_*`` settings of SDP or CDP, one field per register field.

    Mirrors ``S_LUT_CFG`` (``le_function``, the three priorities), ``S_LUT_INFO`` (index offset and
    selects), ``S_LUT_{LE,LO}_{START,END}`` (CDP: ``_LOW``/``_HIGH``), ``S_LUT_{LE,LO}_SLOPE_SCALE`` and
    ``_SLOPE_SHIFT`` (underflow and overflow halves), and the table contents written through
    ``S_LUT_ACCESS_DATA``. Integer paths hold signed values (START/END 32-bit in SDP, 38-bit in CDP; index
    fields 8-bit; slope scales 16-bit, shifts 5-bit, negative = left shift); fp16 paths hold the bit
    patterns of the same registers. ``le_function`` is 0/``"exp"`` or 1/``"linear"``.

    It is only a container: the golden model, the compiler and the independent reference math
    (``regressions.lib.reference``) all read it, but each does its own lookup arithmetic, so sharing it
    cannot hide a bug in the arithmetic the reference is there to check.
    """

    le_table: tuple[int, ...] = (0,) * LE_DEPTH
    lo_table: tuple[int, ...] = (0,) * LO_DEPTH
    le_function: Union[str, int] = "exp"
    le_start: int = 0
    le_end: int = 0
    lo_start: int = 0
    lo_end: int = 0
    le_index_offset: int = 0
    le_index_select: int = 0
    lo_index_select: int = 0
    uflow_priority: int = TABLE_LE
    oflow_priority: int = TABLE_LE
    hybrid_priority: int = TABLE_LE
    le_slope_uflow_scale: int = 0
    le_slope_uflow_shift: int = 0
    le_slope_oflow_scale: int = 0
    le_slope_oflow_shift: int = 0
    lo_slope_uflow_scale: int = 0
    lo_slope_uflow_shift: int = 0
    lo_slope_oflow_scale: int = 0
    lo_slope_oflow_shift: int = 0

    @classmethod
    def from_sdp_view(cls, sdp: RegView) -> "LutRegisters":
        """SDP's ``S_LUT_*`` settings, each field sign-extended; the tables (held by the LUT RAM, not these
        registers) are left at their defaults."""
        info = sdp.S_LUT_INFO
        fields = {f"{t}_{e}": getattr(sdp, f"S_LUT_{t.upper()}_{e.upper()}").signed(f"LUT_{t.upper()}_{e.upper()}")
                  for t in ("le", "lo") for e in ("start", "end")}
        for t in ("le", "lo"):
            for part in ("scale", "shift"):
                reg = getattr(sdp, f"S_LUT_{t.upper()}_SLOPE_{part.upper()}")
                for flow in ("uflow", "oflow"):
                    fields[f"{t}_slope_{flow}_{part}"] = reg.signed(f"LUT_{t.upper()}_SLOPE_{flow.upper()}_{part.upper()}")
        return cls(
            **lut_mode(sdp),
            le_index_select=info.signed("LUT_LE_INDEX_SELECT"),
            lo_index_select=info.signed("LUT_LO_INDEX_SELECT"),
            **fields,
        )


def lut_mode(view: RegView) -> dict[str, int]:
    """``S_LUT_CFG`` and the LE index offset, read the same way by SDP and CDP in every precision (the
    index selects and START/END are not: their widths depend on the unit and the precision)."""
    cfg = view.S_LUT_CFG
    return dict(
        le_function=cfg.LUT_LE_FUNCTION,
        uflow_priority=cfg.LUT_UFLOW_PRIORITY,
        oflow_priority=cfg.LUT_OFLOW_PRIORITY,
        hybrid_priority=cfg.LUT_HYBRID_PRIORITY,
        le_index_offset=view.S_LUT_INFO.signed("LUT_LE_INDEX_OFFSET"),
    )
