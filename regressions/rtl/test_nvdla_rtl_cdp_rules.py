"""CDP LUT-controller rules of NVDLA's nv_small RTL that NVDLA's cmod does not have (``HwConfig``
``cdp_lut_start_bits`` = 22, ``cdp_lo_select_minus32`` = False; ``docs/golden-semantics.md``, CDP):

- ``NV_NVDLA_CDP_DP_LUT_CTRL_unit.v`` compares the square sum (or, with SQSUM_BYPASS, the 9-bit converted
  input sign-extended) with ``reg2dp_X_offset[pPP_BW:0]`` / ``reg2dp_Y_offset[pPP_BW:0]`` -- START's low 22 bits
  read as signed -- and subtracts the same 22 bits for the index and fraction; the slopes outside the table
  (``NV_NVDLA_CDP_DP_intp.v``) measure from all 38 bits of START/END. A START outside -2^21..2^21-1 (the cmod
  compares all 38 bits) classifies differently. This is also why the input converter seemed to matter in the
  found case (``regressions/found/nvdla-rtl/cdp-datin-scale-2``): DATIN_SCALE 2 moved S across the truncated
  LO START, scale 1 did not.
- ``Y_shift_bits_int8_abs`` (the LO shift amount) is 5 bits wide, so LO_INDEX_SELECT = -32 shifts by 0.

Every case is played twice on the RTL: with golden's CRC (nv_small: the RTL rules), which must pass, and,
where the cmod's rules give another output, with that CRC, which must fail.
"""
from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from golden.config import get_config
from golden.dla import Dla
from golden.lut import LutRegisters
from regressions.lib.golden_verdict import crc_trace
from regressions.lib.programs import LrnLayer, program_cdp
from regressions.lib.reference import cdp as ref_cdp
from regressions.rtl.nvdla_rtl import CONFIG, SIM_WORKERS, SIMULATOR, nvdla_rtl_options
from regressions.rtl.nvdla_rtl import no_rtl_coverage  # noqa: F401 (a fixture, used by pytestmark)
from runtime.suite import FAIL, PASS
from tb.suite import run_traces

pytestmark = [pytest.mark.rtl, pytest.mark.usefixtures("no_rtl_coverage")]
HW = get_config(CONFIG)
CMOD = HW.derive(cdp_lut_start_bits=38, cdp_lo_select_minus32=True)


def _cases() -> dict[str, LrnLayer]:
    rng = np.random.default_rng(7)
    tables = dict(le_table=tuple(int(v) for v in rng.integers(-3000, 3000, ref_cdp.LE_DEPTH)),
                  lo_table=tuple(int(v) for v in rng.integers(-3000, 3000, ref_cdp.LO_DEPTH)))
    ramp = np.arange(-128, 128, dtype=np.int64).reshape(8, 32, 1)
    # The found case's shape: SQSUM and MUL bypassed; LE linear from -435; LO START 0x4_072d8f77, whose low 22
    # bits are negative: the RTL sees every S above it (LO overflows), the cmod below it (LO underflows).
    lut = LutRegisters(**tables, le_function="linear", le_start=-435, le_end=169, lo_start=0x4072D8F77, lo_end=216,
                         le_index_select=3, lo_index_select=1, uflow_priority=1, hybrid_priority=1,
                         le_slope_oflow_scale=-381, le_slope_oflow_shift=19, lo_slope_oflow_scale=317,
                         lo_slope_oflow_shift=5, lo_slope_uflow_scale=-4795, lo_slope_uflow_shift=9)
    bypass = LrnLayer(ramp, lut, datin_scale=2, sqsum_bypass=True, mul_bypass=True, datout_shifter=5)
    # Square sums with an LE START of 0xf04dcf (low 22 bits negative) in linear and exponent mode.
    x = rng.integers(-128, 128, (8, 3, 3))
    lut2 = LutRegisters(**tables, le_function="linear", le_start=0xF04DCF, le_end=0xF04DCF + 4096, lo_start=62,
                          lo_end=1125, le_index_select=6, lo_index_select=2, oflow_priority=1,
                          le_slope_uflow_scale=-710, le_slope_uflow_shift=10, lo_slope_uflow_scale=3)
    squares = LrnLayer(x, lut2, datin_offset=-49, datin_scale=-283, datin_shifter=12, normalz_len=1,
                       datout_shifter=12)
    return {
        "bypass_lo_start_above_22_bits": bypass,
        "bypass_lo_start_scale_1": dataclasses.replace(bypass, datin_scale=1),  # agrees: S stays in range
        "bypass_lo_start_2p21": dataclasses.replace(bypass, lut=dataclasses.replace(lut, lo_start=1 << 21)),
        "squares_le_start_above_22_bits": squares,
        "squares_le_exp_start_above_22_bits": dataclasses.replace(
            squares, lut=dataclasses.replace(lut2, le_function="exp", le_index_offset=2)),
        "lo_select_minus_32": dataclasses.replace(
            bypass, datin_scale=1, datout_shifter=4,
            lut=dataclasses.replace(lut, lo_start=-130, lo_index_select=-32, oflow_priority=1)),
    }


def test_cdp_lut_controller_rules_on_nvdla_rtl(tmp_path: Path) -> None:
    options = nvdla_rtl_options()
    expect: dict[str, str] = {}
    cfgs = []
    for name, layer in _cases().items():
        program = program_cdp(HW, layer)
        rtl_rule, cmod_rule = (program.run(Dla(hw)) for hw in (HW, CMOD))
        cfgs.append(crc_trace(program, tmp_path / CONFIG, name, rtl_rule))
        expect[name] = PASS
        if cmod_rule != rtl_rule:
            cfgs.append(crc_trace(program, tmp_path / CONFIG, f"{name}_cmod", cmod_rule))
            expect[f"{name}_cmod"] = FAIL
    assert sum(v == FAIL for v in expect.values()) >= 4, "the cases no longer tell the RTL's rules from the cmod's"
    outcomes = {o.name: o for o in run_traces([(c, CONFIG) for c in cfgs], SIMULATOR, workers=SIM_WORKERS,
                                              options=options)}
    wrong = [f"{n}: expected {want}, RTL {outcomes[n].line()}" for n, want in expect.items()
             if outcomes[n].status != want]
    assert not wrong, "\n".join(wrong)
