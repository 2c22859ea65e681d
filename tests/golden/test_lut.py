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
