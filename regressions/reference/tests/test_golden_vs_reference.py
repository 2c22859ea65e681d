"""Golden engines, driven through registers, against the independent reference math on random configs.

hypothesis draws small layer configs for every preset's atom size; each runs on ``golden.Dla`` through a
register program (``regressions.programs``) and must equal the plain-loop reference bit for bit,
padding lanes included (the reference computes them from the zero-filled lanes, as the hardware does).
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from golden import Dla, get_config
from regressions import programs
from regressions.strategies import conv_layers, lrn_layers, pool_layers, sdp_layers, sdp_y_layers
from regressions.reference import cdp as ref_cdp
from regressions.reference import pdp as ref_pdp
from regressions.reference import sdp as ref_sdp

pytestmark = pytest.mark.reference

CONFIGS = ["nv_small", "nv_small_256", "nv_medium_512", "nv_large"]
SETTINGS = settings(max_examples=25, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def padded(x: np.ndarray, atom: int) -> np.ndarray:
    c = x.shape[0]
    out = np.zeros((-(-c // atom) * atom,) + x.shape[1:], dtype=np.int64)
    out[:c] = x
    return out


def run_golden(hw, program, c, h, w) -> np.ndarray:
    dla = Dla(hw)
    raw = program.run(dla)
    return programs.unpack_feature(raw, c, h, w, hw.atom_elements(), lanes=True)


# ---- PDP ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("config", CONFIGS)
@SETTINGS
@given(layer=pool_layers())
def test_pdp_matches_reference(config, layer):
    hw = get_config(config)
    c, _, _ = layer.x.shape
    oh, ow = layer.out_hw()
    got = run_golden(hw, programs.program_pdp(hw, layer), c, oh, ow)
    (kh, kw) = layer.kernel
    want = ref_pdp.pool(padded(layer.x, hw.atom_elements()), method=layer.method, kernel=layer.kernel,
                        stride=layer.stride, pad=layer.pad, pad_values=layer.pad_values,
                        recip_w=0x10000 // kw, recip_h=0x10000 // kh, out_hw=(oh, ow))
    np.testing.assert_array_equal(got, want)


# ---- CDP ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("config", CONFIGS)
@SETTINGS
@given(layer=lrn_layers())
def test_cdp_matches_reference(config, layer):
    hw = get_config(config)
    c, h, w = layer.x.shape
    got = run_golden(hw, programs.program_cdp(hw, layer), c, h, w)
    want = ref_cdp.lrn(padded(layer.x, hw.atom_elements()), datin_offset=layer.datin_offset,
                       datin_scale=layer.datin_scale, datin_shifter=layer.datin_shifter,
                       normalz_len=layer.normalz_len, sqsum_bypass=layer.sqsum_bypass,
                       mul_bypass=layer.mul_bypass, lut=layer.lut, datout_offset=layer.datout_offset,
                       datout_scale=layer.datout_scale, datout_shifter=layer.datout_shifter,
                       channel_count=c)
    np.testing.assert_array_equal(got, want)


# ---- SDP ---------------------------------------------------------------------------------------------


def padded_operands(params, atom):
    """Operands padded to the atom like the data: padding lanes read zeros from memory."""
    def pad_stage(stage):
        fields = {}
        for name in ("alu_operand", "mul_operand"):
            op = getattr(stage, name)
            if np.ndim(op) == 1:
                fields[name] = np.concatenate([op, np.zeros(-len(op) % atom, dtype=np.int64)])
            elif np.ndim(op) == 3:
                fields[name] = padded(op, atom)
        return type(stage)(**{**stage.__dict__, **fields})

    return type(params)(**{**params.__dict__, "x1": pad_stage(params.x1), "x2": pad_stage(params.x2)})


@pytest.mark.parametrize("config", CONFIGS)
@SETTINGS
@given(layer=sdp_layers())
def test_sdp_matches_reference(config, layer):
    hw = get_config(config)
    c, h, w = layer.x.shape
    got = run_golden(hw, programs.program_sdp(hw, layer), c, h, w)
    atom = hw.atom_elements()
    want = ref_sdp.sdp(padded(layer.x, atom), padded_operands(layer.params, atom))
    np.testing.assert_array_equal(got, want)


# ---- direct convolution ----------------------------------------------------------------------------------


@pytest.mark.parametrize("config", CONFIGS)
@SETTINGS
@given(layer=conv_layers())
def test_conv_matches_reference(config, layer):
    from regressions.reference import conv as ref_conv

    hw = get_config(config)
    k = layer.w.shape[0]
    oh, ow = layer.output_hw()
    raw = programs.program_conv(Dla(hw), layer)
    got = programs.unpack_feature(raw, k, oh, ow, hw.atom_elements(), lanes=True)
    x = layer.x if layer.cvt is None else ref_conv.cdma_input_cvt(layer.x, *layer.cvt)
    acc = ref_conv.direct_conv(x, layer.w, stride=layer.stride, dilation=layer.dilation, pad=layer.pad,
                               pad_value=layer.pad_value, out_hw=(oh, ow), clip_truncate=layer.clip_truncate)
    cacc = np.zeros((got.shape[0], oh, ow), dtype=np.int64)  # lanes past K hold 0 from the CACC
    cacc[:k] = acc
    off, scale, shift = layer.out_cvt
    want = ref_sdp.sdp(cacc, ref_sdp.SdpParams(cvt_offset=off, cvt_scale=scale, cvt_shift=shift))
    np.testing.assert_array_equal(got, want)


# ---- SDP Y (EW) and LUT, on presets that have them -------------------------------------------------------------
EW_CONFIGS = ["nv_small_256_full", "nv_large"]


def padded_y(params, atom):
    p = padded_operands(params, atom)
    fields = {}
    for name in ("alu_operand", "mul_operand"):
        op = getattr(p.y, name)
        if np.ndim(op) == 1:
            fields[name] = np.concatenate([op, np.zeros(-len(op) % atom, dtype=np.int64)])
        elif np.ndim(op) == 3:
            fields[name] = padded(op, atom)
    return type(p)(**{**p.__dict__, "y": type(p.y)(**{**p.y.__dict__, **fields})})


@pytest.mark.parametrize("config", EW_CONFIGS)
@SETTINGS
@given(layer=sdp_y_layers())
def test_sdp_ew_and_lut_match_reference(config, layer):
    hw = get_config(config)
    c, h, w = layer.x.shape
    atom = hw.atom_elements()
    try:
        want = ref_sdp.sdp(padded(layer.x, atom), padded_y(layer.params, atom))
    except ref_sdp.OutsideCmodDomain:
        from hypothesis import assume

        assume(False)  # the cmod's own result is undefined C there
    got = run_golden(hw, programs.program_sdp(hw, layer), c, h, w)
    np.testing.assert_array_equal(got, want)


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
    compared = ref_sdp.sdp(padded(layer.x, atom), padded_y(params, atom))  # 0 where equal, else 1
    unequal = dla.read("NVDLA_SDP.D_STATUS_0") & 1
    assert unequal == int(compared.any())
    if equal:
        assert unequal == 0
