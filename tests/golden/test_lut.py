"""golden.lut: the LUT register block shared by SDP's Y stage and CDP, as NVDLA resets and decodes it."""
from __future__ import annotations

from dataclasses import replace

from golden.config import NV_FULL
from golden.dla import Dla
from golden.lut import LE_DEPTH, LO_DEPTH, TABLE_LE, LutRegisters


def test_default_lut_registers_are_the_hardware_reset_state() -> None:
    """``LutRegisters()`` stands for an SDP whose LUT was never programmed: NVDLA resets every ``S_LUT_*``
    field to 0 (RTL ``NV_NVDLA_SDP_REG_single``: START/END, slope scales and shifts, selects, priorities
    LE) and every LE/LO entry to 0 (``NV_NVDLA_SDP_CORE_Y_lut``). Programs and tests name only the fields
    they use and rely on the rest being these reset values."""
    dla = Dla(NV_FULL)
    sdp = dla.units["SDP"]
    reset = replace(LutRegisters.from_sdp_view(sdp.view(0)),
                    le_table=tuple(int(v) for v in sdp.lut["LE"]), lo_table=tuple(int(v) for v in sdp.lut["LO"]))
    assert reset.le_function == 0  # exponent spacing, which the default spells "exp"
    assert len(reset.le_table) == LE_DEPTH and len(reset.lo_table) == LO_DEPTH
    assert replace(reset, le_function="exp") == LutRegisters()
    assert LutRegisters().uflow_priority == LutRegisters().oflow_priority == LutRegisters().hybrid_priority == TABLE_LE


def test_every_lut_register_default_is_its_reset_value() -> None:
    """The same reset rule without building an engine (a fast check): every ``S_LUT_*`` field of
    ``NV_NVDLA_SDP_REG_single`` resets to 0 (LE exponent function, LE priorities, START/END, index offset and
    selects, the eight slope scales and shifts) and every LE/LO RAM entry to 0, so a program that leaves a
    field out gets exactly what an unprogrammed SDP would use."""
    lut = LutRegisters()
    assert lut.le_table == (0,) * 65 and lut.lo_table == (0,) * 257
    assert lut.le_function == "exp"
    for name in ("le_start", "le_end", "lo_start", "lo_end", "le_index_offset", "le_index_select", "lo_index_select"):
        assert getattr(lut, name) == 0, name
    for t in ("le", "lo"):
        for flow in ("uflow", "oflow"):
            for part in ("scale", "shift"):
                assert getattr(lut, f"{t}_slope_{flow}_{part}") == 0, (t, flow, part)
    assert (lut.uflow_priority, lut.oflow_priority, lut.hybrid_priority) == (0, 0, 0)  # 0 = LE table
