"""Hand-computed sanity cases for the reference math (each expected number is derived in a comment)."""

from __future__ import annotations

import numpy as np
import pytest

from golden.lut import LutRegisters
from regressions.lib.reference.arith import OutsideCmodDomain, rha, sat, sign_extend
from regressions.lib.reference.cdp import cdp_input_cvt, cdp_lut_lookup, lrn
from regressions.lib.reference.conv import cdma_input_cvt, direct_conv
from regressions.lib.reference.pdp import pdp_pad_value, pool
from regressions.lib.reference.sdp import (
    SdpOperandCvt,
    SdpParams,
    SdpXParams,
    SdpYParams,
    lut_lookup,
    sdp,
    sdp_x_stage,
)


def cube(values):
    """(C,) list -> (C, 1, 1) int64 cube."""
    return np.array(values, dtype=np.int64).reshape(-1, 1, 1)


# ----------------------------------------------------------------------------- arith


def test_rha_rounds_half_away_from_zero():
    assert rha(5, 1) == 3  # 2.5 -> 3
    assert rha(-5, 1) == -3  # -2.5 -> -3
    assert rha(4, 1) == 2
    assert rha(7, 2) == 2  # 1.75 -> 2
    assert rha(-6, 2) == -2  # -1.5 -> -2
    assert rha(-5, 2) == -1  # -1.25 -> -1
    assert rha(3, 0) == 3
    assert rha(3, -2) == 12  # negative shift = exact left shift


def test_sat_and_sign_extend():
    assert sat(200, 8) == 127
    assert sat(-200, 8) == -128
    assert sat(5, 8) == 5
    assert sign_extend(0xFF, 8) == -1
    assert sign_extend(0x7F, 8) == 127
    assert sign_extend(0x1FF, 8) == -1  # only the low 8 bits count
    assert sign_extend(-129, 8) == 127  # wraps


# ----------------------------------------------------------------------------- conv


def test_cdma_input_cvt():
    # (10 - 2) * 3 = 24, rha(24, 1) = 12
    assert cdma_input_cvt([[[10]]], offset=2, scale=3, truncate=1).tolist() == [[[12]]]
    # (100 + 100) * 100 = 20000 -> sat17 keeps it -> sat8 = 127
    assert cdma_input_cvt([[[100]]], offset=-100, scale=100, truncate=0).tolist() == [[[127]]]
    # -128 * 3 = -384, rha(-384, 1) = -192 -> sat8 = -128
    assert cdma_input_cvt([[[-128]]], offset=0, scale=3, truncate=1).tolist() == [[[-128]]]


def test_direct_conv_1x1():
    x = np.array([[[1, 2]], [[3, 4]]])  # (C=2, H=1, W=2)
    w = np.array([[[[2]], [[-1]]]])  # (K=1, C=2, 1, 1)
    # ox=0: 2*1 - 3 = -1 ; ox=1: 2*2 - 4 = 0
    assert direct_conv(x, w, out_hw=(1, 2)).tolist() == [[[-1, 0]]]


def test_direct_conv_pad_value_and_clip():
    x = np.array([[[5]]])
    w = np.ones((1, 1, 3, 3), dtype=np.int64)
    # centre tap 5 plus 8 padded taps of -1: acc = -3
    assert direct_conv(x, w, pad=(1, 1), pad_value=-1, out_hw=(1, 1)).tolist() == [[[-3]]]
    # raw byte 0xFF is the same pad value; rha(-3, 1) = -1.5 -> -2
    assert direct_conv(x, w, pad=(1, 1), pad_value=0xFF, out_hw=(1, 1), clip_truncate=1).tolist() == [[[-2]]]


def test_direct_conv_stride_and_dilation():
    x = np.arange(1, 10).reshape(1, 3, 3)  # [[1,2,3],[4,5,6],[7,8,9]]
    # 2x2 kernel of ones dilated by 2 touches the four corners: 1 + 3 + 7 + 9 = 20
    assert direct_conv(x, np.ones((1, 1, 2, 2)), dilation=(2, 2), out_hw=(1, 1)).tolist() == [[[20]]]
    # 1x1 identity kernel with stride 2 picks the corners
    assert direct_conv(x, np.ones((1, 1, 1, 1)), stride=(2, 2), out_hw=(2, 2)).tolist() == [[[1, 3], [7, 9]]]


# ----------------------------------------------------------------------------- pdp


def test_pool_max_min_2x2():
    x = np.array([[[1, 5], [-3, 2]]])
    common = dict(kernel=(2, 2), stride=(2, 2), out_hw=(1, 1))
    assert pool(x, method="max", **common).tolist() == [[[5]]]
    assert pool(x, method="min", **common).tolist() == [[[-3]]]


def test_pool_max_ignores_padding():
    x = np.array([[[-7]]])
    # every window holds the single valid tap -7; padding never wins a max
    out = pool(x, method="max", kernel=(2, 2), stride=(1, 1), pad=(1, 1, 1, 1), pad_values=[0x7F] * 7, out_hw=(2, 2))
    assert out.tolist() == [[[-7, -7], [-7, -7]]]


def test_pool_avg_two_stage_reciprocal():
    x = np.array([[[1, 2], [3, 5]]])
    # t = 11; rha(11 * 0x8000, 16) = rha(5.5) = 6; rha(6 * 0x8000, 16) = 3
    out = pool(x, method="avg", kernel=(2, 2), stride=(2, 2), recip_w=0x8000, recip_h=0x8000, out_hw=(1, 1))
    assert out.tolist() == [[[3]]]


def test_pool_avg_with_pad_values():
    x = np.array([[[4]]])
    # window rows {-1, 0}, cols {-1, 0}: the valid row has 1 padded column -> 4 + PAD_1X(-1) = 3;
    # one fully padded row -> + PAD_1X * kw = -2; t = 1.
    # rha(1 * 0x8000, 16) = rha(0.5) = 1; rha(1 * 0x8000, 16) = 1
    out = pool(x, method="avg", kernel=(2, 2), stride=(1, 1), pad=(1, 1, 0, 0),
               pad_values=[0xFF, 0x1FE, 0, 0, 0, 0, 0], recip_w=0x8000, recip_h=0x8000, out_hw=(1, 1))
    assert out.tolist() == [[[1]]]


def test_pool_avg_stores_low_byte():
    x = np.array([[[100]]])
    # rha(100 * 0x1FFFF, 16) = rha(199.998...) = 200; * 1.0 -> 200; low byte 0xC8 = -56
    out = pool(x, method="avg", kernel=(1, 1), stride=(1, 1), recip_w=0x1FFFF, recip_h=0x10000, out_hw=(1, 1))
    assert out.tolist() == [[[-56]]]


def test_pdp_pad_value_sign_extension():
    assert pdp_pad_value(0xFF, 1) == -1  # bit 7 set: 8-bit sign extension
    assert pdp_pad_value(0x7FF80, 1) == -128  # bit 7 set: low 8 bits 0x80
    assert pdp_pad_value(0x100, 1) == 256  # bit 7 clear: the raw field survives (cmod int_sign_extend)
    assert pdp_pad_value(0x3FF, 3) == -1  # 3X sign bit is bit 9
    assert pdp_pad_value(0x1FF, 3) == 511
    assert pdp_pad_value(-5, 2) == -5  # negative ints are taken as their 19-bit field


def test_pool_rejects_padding_only_window():
    with pytest.raises(ValueError):
        pool(np.array([[[1, 2]]]), method="max", kernel=(1, 1), stride=(1, 1), pad=(0, 1, 0, 0), out_hw=(1, 3))


# ----------------------------------------------------------------------------- sdp


def test_sdp_bs_relu_and_output_cvt():
    bs = SdpXParams(bypass=False, alu_bypass=False, alu_algo=2, alu_operand=10, alu_shift=1,
                    mul_bypass=False, mul_operand=3, mul_shift=2, relu_bypass=False)
    p = SdpParams(x1=bs, cvt_offset=-3, cvt_scale=5, cvt_shift=2)
    # op' = 10 << 1 = 20.  v=-30: -10*3=-30, rha(-30,2)=-8, relu 0, cvt (0+3)*5=15 -> rha(15,2)=4
    # v=50: 70*3=210 -> 53 -> (53+3)*5=280 -> 70
    # v=100: 120*3=360 -> 90 -> 93*5=465 -> 116
    # v=400: 420*3=1260 -> 315 -> 318*5=1590 -> 398 -> sat8 127
    assert sdp(cube([-30, 50, 100, 400]), p)[:, 0, 0].tolist() == [4, 70, 116, 127]


def test_sdp_truncation_applies_with_mul_bypassed():
    p = SdpParams(x1=SdpXParams(bypass=False, mul_shift=3))
    # rha(13,3)=1.625->2, rha(-12,3)=-1.5->-2, rha(4,3)=0.5->1
    assert sdp(cube([13, -12, 4]), p)[:, 0, 0].tolist() == [2, -2, 1]


def test_sdp_prelu_skips_truncation_for_non_negative():
    p = SdpParams(x1=SdpXParams(bypass=False, mul_bypass=False, mul_prelu=True, mul_operand=3, mul_shift=1))
    # 7 >= 0 passes untouched (not rha(7,1)=4); -7*3=-21, rha(-21,1)=-10.5 -> -11
    assert sdp(cube([7, -7]), p)[:, 0, 0].tolist() == [7, -11]


def test_sdp_prelu_passes_33_bit_sum_wrapped():
    xp = SdpXParams(bypass=False, alu_bypass=False, alu_algo=2, alu_operand=1,
                    mul_bypass=False, mul_prelu=True, mul_operand=1)
    # 2**31 - 1 + 1 = 2**31 is non-negative at 33 bits, passes, and loses bit 32 -> -2**31
    assert sdp_x_stage(2**31 - 1, xp) == -(2**31)


def test_sdp_x_max_min():
    # op' = -3 << 2 = -12
    xp_max = SdpXParams(bypass=False, alu_bypass=False, alu_algo=0, alu_operand=-3, alu_shift=2)
    xp_min = SdpXParams(bypass=False, alu_bypass=False, alu_algo=1, alu_operand=-3, alu_shift=2)
    assert sdp_x_stage(-20, xp_max) == -12
    assert sdp_x_stage(-20, xp_min) == -20


def test_sdp_x_per_element_operand():
    op = np.array([[[1, -1]]])  # (C=1, H=1, W=2)
    p = SdpParams(x1=SdpXParams(bypass=False, alu_bypass=False, alu_algo=2, alu_operand=op, alu_shift=2))
    # 10 + 4 = 14 ; 10 - 4 = 6
    assert sdp(np.array([[[10, 10]]]), p).tolist() == [[[14, 6]]]


def test_sdp_y_mul_then_alu():
    y = SdpYParams(bypass=False, mul_bypass=False, mul_operand=3, truncate=1,
                   alu_bypass=False, alu_algo=2, alu_operand=5)
    # 4*3=12 -> rha(12,1)=6 -> +5 = 11 ; -3*3=-9 -> -4.5 -> -5 -> +5 = 0
    assert sdp(cube([4, -3]), SdpParams(y=y))[:, 0, 0].tolist() == [11, 0]


def test_sdp_y_dma_operand_cvt():
    cvt = SdpOperandCvt(bypass=False, offset=1, scale=2, truncate=1)
    mem = SdpYParams(bypass=False, alu_bypass=False, alu_algo=2, alu_operand=np.array([7, -7]), alu_cvt=cvt)
    # per-channel DMA operand: rha((7-1)*2, 1) = 6 ; rha((-7-1)*2, 1) = -8
    assert sdp(cube([10, 10]), SdpParams(y=mem))[:, 0, 0].tolist() == [16, 2]
    # a REG operand skips the CVT: 10 + 7
    reg = SdpYParams(bypass=False, alu_bypass=False, alu_algo=2, alu_operand=7, alu_cvt=cvt)
    assert sdp(cube([10]), SdpParams(y=reg))[:, 0, 0].tolist() == [17]


def test_sdp_y_eql():
    y = SdpYParams(bypass=False, alu_bypass=False, alu_algo=3, alu_operand=5)
    assert sdp(cube([5, 6]), SdpParams(y=y))[:, 0, 0].tolist() == [0, 1]
    with pytest.raises(ValueError):
        sdp(cube([5]), SdpParams(y=y, cvt_scale=2))


LE_TABLE = tuple(7 + 100 * i for i in range(65))  # 7, 107, 207, ..., 6407
LO_TABLE = tuple(-3 * i for i in range(257))  # 0, -3, -6, ...


def lut_params(**overrides) -> LutRegisters:
    base = dict(le_table=LE_TABLE, lo_table=LO_TABLE, le_function="linear", le_start=0, le_end=64,
                le_index_select=2, lo_start=1000, lo_end=2000)
    base.update(overrides)
    return LutRegisters(**base)


def test_lut_linear_hit():
    # LE: u=5, sel=2 -> idx 1, fraction (5 mod 4) << 33 = 2**33 (a quarter); LO: 5 <= 1000 underflows,
    # so the only hit wins: rha(107*(2**35-2**33) + 207*2**33, 35) = (3*107 + 207) / 4 = 132
    assert lut_lookup(5, lut_params()) == 132


def test_lut_linear_underflow():
    # both tables underflow -> UFLOW_PRIORITY=LE: LE[0] + rha((-10 - 0) * 3, 1) = 7 - 15 = -8
    assert lut_lookup(-10, lut_params(le_slope_uflow_scale=3, le_slope_uflow_shift=1)) == -8


def test_lut_exponent_hit_and_underflow_bias():
    # exp mode, start 0, offset 0: x=6 -> e=2, idx 2, fraction (6-4) << 33 = half -> (207+307)/2 = 257
    assert lut_lookup(6, lut_params(le_function="exp")) == 257
    # offset 2: x=3 -> e=1 < 2 underflows; bias 2**2: LE[0] + (3 - (4 + 0)) * 8 = 7 - 8 = -1
    lut = lut_params(le_function="exp", le_index_offset=2, le_slope_uflow_scale=8)
    assert lut_lookup(3, lut) == -1


def test_lut_overflow_through_hybrid_priority():
    # LE: idx 70 >= 64 overflows (idx 64); LO underflows; mixed misses -> HYBRID_PRIORITY=LE.
    # LE[64] + rha((70 - 64) * 2, -1) = 6407 + 24 = 6431
    lut = lut_params(le_index_select=0, le_slope_oflow_scale=2, le_slope_oflow_shift=-1)
    assert lut_lookup(70, lut) == 6431


def test_lut_both_hit_uses_hybrid_priority():
    # LO: start 0, sel 1: u=5 -> idx 2, half fraction -> rha((-6 - 9) / 2) = -7.5 -> -8 ; LE hits too.
    lut = lut_params(lo_start=0, lo_index_select=1, hybrid_priority=1)
    assert lut_lookup(5, lut) == -8


def test_lut_bias_offset_past_uint32_is_refused():
    lut = lut_params(le_function="exp", le_index_offset=40)
    with pytest.raises(OutsideCmodDomain):
        lut_lookup(3, lut)


def test_sdp_with_lut_in_y():
    p = SdpParams(y=SdpYParams(bypass=False, lut_bypass=False), lut=lut_params(), cvt_shift=1)
    # LUT(5) = 132 (see test_lut_linear_hit); output CVT rha(132, 1) = 66
    assert sdp(cube([5]), p)[:, 0, 0].tolist() == [66]


# ----------------------------------------------------------------------------- cdp


CDP_LE = tuple(10 * i for i in range(65))


def cdp_lut(**overrides) -> LutRegisters:
    base = dict(le_table=CDP_LE, le_function="linear", le_start=0, le_end=64, le_index_select=0,
                lo_start=1000, lo_end=2000)
    base.update(overrides)
    return LutRegisters(**base)


def test_cdp_input_cvt():
    assert cdp_input_cvt(10, 2, 3, 1) == 12  # (10-2)*3 = 24 -> 12
    assert cdp_input_cvt(127, -128, 4, 0) == 255  # 1020 -> sat9


def test_lrn_three_channels():
    # S(c) over c-1..c+1 with zeros outside: 0+1+4=5, 1+4+9=14, 4+9+0=13.
    # LE linear start 0 sel 0 hits exactly at idx S: r = 50, 140, 130 (LO underflows).
    # r * x' = 50, 280, 390 ; rha(., 2) = 12.5->13, 70, 97.5->98
    out = lrn(cube([1, 2, 3]), lut=cdp_lut(), datout_shifter=2)
    assert out[:, 0, 0].tolist() == [13, 70, 98]


def test_lrn_padding_lanes_are_fed_the_offset():
    # channel 3 is a padding lane: x' = 0 (its 99 is ignored), so channel 2 still sees S = 13.
    # Channel 3: S = 3**2 = 9 -> r = 90 -> r * 0 = 0 ; with MUL bypassed rha(90, 2) = 22.5 -> 23
    out = lrn(cube([1, 2, 3, 99]), lut=cdp_lut(), datout_shifter=2, channel_count=3)
    assert out[:, 0, 0].tolist() == [13, 70, 98, 0]
    out = lrn(cube([1, 2, 3, 99]), lut=cdp_lut(), datout_shifter=2, channel_count=3, mul_bypass=True)
    assert out[3, 0, 0] == 23


def test_cdp_lut_exponent_hit_and_underflow():
    # exp, start 0, offset 0: S=6 -> log 2, idx 2, f16 = (6-4) << 14 = 32768 -> 20 + rha(10*32768, 16) = 25
    assert cdp_lut_lookup(6, cdp_lut(le_function="exp")) == 25
    # S=0 underflows; offset 0 gives bias 1 (unlike SDP): 0 + rha((0 - 0 - 1) * 4, 1) = -2
    assert cdp_lut_lookup(0, cdp_lut(le_function="exp", le_slope_uflow_scale=4, le_slope_uflow_shift=1)) == -2


def test_cdp_lut_result_saturates_to_16_bits():
    table = (32000,) + CDP_LE[1:]
    # 32000 + (0 - 0 - 1) * -32768 = 64768 -> sat16 32767
    lut = cdp_lut(le_table=table, le_function="exp", le_slope_uflow_scale=-32768)
    assert cdp_lut_lookup(0, lut) == 32767


def test_cdp_lut_nv_small_rtl_start_window_and_lo_select():
    # START = 2^22 + 3: the cmod sees S = 5 far below it (LE underflows: LE[0] + slope 0 = 0); nv_small's RTL
    # compares with the low 22 bits (3): LE hits at index 5 - 3 = 2 -> 20.
    lut = cdp_lut(le_start=(1 << 22) + 3, le_end=(1 << 22) + 67, uflow_priority=0)
    assert cdp_lut_lookup(5, lut) == 0
    assert cdp_lut_lookup(5, lut, start_bits=22) == 20
    # Bit 21 is the sign of the 22-bit window: START = 2^21 reads as -2^21, so S = 5 overflows LE (LE[64] = 640
    # plus the overflow slope from the whole END: scale 1 -> 640 + (5 - END)).
    lut = cdp_lut(le_start=1 << 21, le_end=10, le_slope_oflow_scale=1, lo_start=-1000)
    assert cdp_lut_lookup(5, lut, start_bits=22) == 635
    # LO select -32: the cmod shifts left by 32 (LO overflows); the RTL by 0 (LO hits at S - START).
    lo = tuple(range(257))
    lut = cdp_lut(lo_table=lo, lo_start=0, lo_end=256, lo_index_select=-32, le_start=1 << 20, le_end=(1 << 20) + 64,
                  uflow_priority=1, hybrid_priority=0)
    assert cdp_lut_lookup(7, lut) == 0  # LE underflows, LO overflows: hybrid -> LE[0]
    assert cdp_lut_lookup(7, lut, lo_select_minus32=False) == 7
