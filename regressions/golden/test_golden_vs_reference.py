"""Golden against the reference math where the output is not a cube: SDP's EQL compare mode.

Every engine's output cubes are compared with the reference by the fuzz properties
(``regressions/fuzz/engines.py``, run by ``regressions/fuzz/test_engines.py`` and ``make fuzz``).
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from golden import Dla, get_config
from regressions.fuzz.engines import padded, padded_operands
from regressions.lib import programs
from regressions.lib.reference import sdp as ref_sdp
from regressions.lib.strategies import sdp_y_layers

pytestmark = pytest.mark.reference

SETTINGS = settings(max_examples=25, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


# ---- SDP Y (EW) and LUT, on presets that have them -------------------------------------------------------------
EW_CONFIGS = ["nv_small_256_full", "nv_large"]


@pytest.mark.parametrize("config", EW_CONFIGS)
@SETTINGS
@given(layer=sdp_y_layers(), equal=st.booleans())
def test_sdp_eql_writes_nothing_and_reports_inequality(config, layer, equal):
    """EQL compares X's result with the Y operand: the hardware writes no output and only sets
    D_STATUS.STATUS_UNEQUAL when any lane differs (NOTES §4; the cmod)."""
    hw = get_config(config)
    atom = hw.atom_elements()
    p = layer.params
    y = type(p.y)(**{**p.y.__dict__, "alu_bypass": False, "alu_algo": 3, "mul_bypass": True, "lut_bypass": True})
    x1 = type(p.x1)(**{**p.x1.__dict__, "bypass": True})
    if equal:  # compare the input with itself: a per-element operand equal to x, no CVT
        y = type(y)(**{**y.__dict__, "alu_operand": layer.x.copy(),
                       "alu_cvt": ref_sdp.SdpOperandCvt(bypass=True)})
    params = type(p)(**{**p.__dict__, "x1": x1, "y": y, "cvt_offset": 0, "cvt_scale": 1, "cvt_shift": 0})
    program = programs.program_sdp(hw, programs.SdpLayer(layer.x, params, operand_bytes=2))
    dla = Dla(hw)
    dla.mem.write(program.output[0], b"\xA5" * program.output[1])
    assert program.run(dla) == b"\xA5" * program.output[1]
    assert dla.read_reg(dla.map.address("GLB", "S_INTR_STATUS")) & 1, "EQL operation did not complete"
    compared = ref_sdp.sdp(padded(layer.x, atom), padded_operands(params, atom))  # 0 where equal, else 1
    unequal = dla.read("NVDLA_SDP.D_STATUS_0") & 1
    assert unequal == int(compared.any())
    if equal:
        assert unequal == 0
