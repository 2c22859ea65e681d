"""CDP engine (LRN): channel window at the edges, LUT hit/underflow/overflow and priorities, CVTs.

Expected values are computed by hand or by plain loops in this file.
"""
from __future__ import annotations

import numpy as np
import pytest

from golden.config import NV_SMALL, HwConfig
from golden.dla import Dla
from golden.engines.cdp import (
    HIT, LE, LO, OFLOW, UFLOW, Lrn, Lut, Table, cmod_convert, input_cvt, lookup_exponent, lookup_fp16,
    lookup_linear, lut_select, output_cvt,
)
from golden.errors import ConfigError, UnsupportedError
from golden.layout import CubeLayout, read_cube, write_cube

SRC, DST = 0x80000000, 0x80200000
ATOM = NV_SMALL.atom_elements()
IDENTITY_OUT = {"D_DATOUT_SCALE": 1, "D_DATOUT_SHIFTER": 0, "D_DATOUT_OFFSET": 0}


def lrn_params(**kw) -> Lrn:
    base = dict(normalz_len=0, sqsum_bypass=False, mul_bypass=False, datin_offset=0, datin_scale=1,
                datin_shift=0, datout_offset=0, datout_scale=1, datout_shift=0)
    base.update(kw)
    return Lrn(**base)


def run_cdp(x: np.ndarray, channels: int, regs: dict[str, int | dict[str, int]],
            le: list[int] | None = None, lo: list[int] | None = None, hw: HwConfig = NV_SMALL) -> tuple[np.ndarray, Dla]:
    """Program CDP/CDP_RDMA through CSB writes (LUTs through S_LUT_ACCESS_*), run, return the output."""
    cpad, height, width = x.shape
    dla = Dla(hw)
    layout = CubeLayout(channels, height, width, width * ATOM, height * width * ATOM, ATOM)
    write_cube(dla.mem.dram, SRC, layout, x)
    for table_id, values in ((0, le), (1, lo)):
        if values is None:
            continue
        dla.write("CDP.S_LUT_ACCESS_CFG", LUT_ADDR=0, LUT_TABLE_ID=table_id, LUT_ACCESS_TYPE=1)
        for v in values:
            dla.write("CDP.S_LUT_ACCESS_DATA", v & 0xFFFF)
    dla.write("CDP_RDMA.D_DATA_CUBE_WIDTH", width - 1)
    dla.write("CDP_RDMA.D_DATA_CUBE_HEIGHT", height - 1)
    dla.write("CDP_RDMA.D_DATA_CUBE_CHANNEL", channels - 1)
    dla.write("CDP_RDMA.D_SRC_BASE_ADDR_LOW", SRC)
    dla.write("CDP_RDMA.D_SRC_LINE_STRIDE", layout.line_stride)
    dla.write("CDP_RDMA.D_SRC_SURFACE_STRIDE", layout.surf_stride)
    dla.write("CDP_RDMA.D_SRC_DMA_CFG", SRC_RAM_TYPE=1)
    dla.write("CDP.D_DST_BASE_ADDR_LOW", DST)
    dla.write("CDP.D_DST_LINE_STRIDE", layout.line_stride)
    dla.write("CDP.D_DST_SURFACE_STRIDE", layout.surf_stride)
    dla.write("CDP.D_DST_DMA_CFG", DST_RAM_TYPE=1)
    dla.write("CDP.D_DATA_FORMAT", INPUT_DATA_TYPE=0)  # resets to INT16 in the RDL
    dla.write("CDP_RDMA.D_DATA_FORMAT", INPUT_DATA=0)
    for name, value in regs.items():
        name = name if "." in name else f"CDP.{name}"
        if isinstance(value, dict):
            dla.write(name, **value)
        else:
            dla.write(name, value & 0xFFFFFFFF)
    dla.write("CDP_RDMA.D_OP_ENABLE", 1)
    dla.write("CDP.D_OP_ENABLE", 1)
    assert dla.intr_status & (1 << 2), "CDP did not complete"
    return read_cube(dla.mem.dram, DST, layout), dla


def sum_of_squares_lut(normalz_len: int, datin_offset: int = 0) -> dict[str, int | dict[str, int]]:
    """Registers under which the CDP writes sat8(S): LE always underflows (START far above any S, slope 0),
    LO is linear from START=-1 with LO[i] = i - 1, so LO hits with value S; MUL is bypassed."""
    return {
        "S_LUT_CFG": dict(LUT_LE_FUNCTION=1, LUT_UFLOW_PRIORITY=0, LUT_OFLOW_PRIORITY=0, LUT_HYBRID_PRIORITY=0),
        "S_LUT_INFO": 0,
        "S_LUT_LE_START_LOW": 1 << 20,  # above any S (< 2^20), inside the RTL's 22-bit compare
        "S_LUT_LE_END_LOW": (1 << 20) + 64,
        "S_LUT_LO_START_LOW": 0xFFFFFFFF,
        "S_LUT_LO_START_HIGH": 0x3F,  # -1 as 38 bits
        "S_LUT_LO_END_LOW": 255,
        "S_LUT_LE_SLOPE_SCALE": 0,
        "S_LUT_LO_SLOPE_SCALE": 0,
        "D_LRN_CFG": normalz_len,
        "D_FUNC_BYPASS": dict(SQSUM_BYPASS=0, MUL_BYPASS=1),
        "D_DATIN_OFFSET": datin_offset & 0xFFFF,
        "D_DATIN_SCALE": 1,
        "D_DATIN_SHIFTER": 0,
        **IDENTITY_OUT,
    }


IDENTITY_LO = [i - 1 for i in range(257)]


def loop_square_sum(xc: np.ndarray, channels: int, half: int) -> np.ndarray:
    """S[c] = sum of x'[c+d]^2 for |d| <= half, with x' = 0 outside [0, channels)."""
    out = np.zeros_like(xc)
    for c in range(xc.shape[0]):
        for h in range(xc.shape[1]):
            for w in range(xc.shape[2]):
                out[c, h, w] = sum(int(xc[c + d, h, w]) ** 2 for d in range(-half, half + 1)
                                   if 0 <= c + d < channels)
    return out


# ---- channel window -------------------------------------------------------------------------------
def test_window_at_channel_edges_and_padding_lanes():
    x = np.full((ATOM, 1, 2), 100, dtype=np.int64)  # lanes 3..7: junk the CDP must not use
    x[:3, 0, 0] = [5, 3, 4]
    x[:3, 0, 1] = [2, 0, -1]
    out, dla = run_cdp(x, 3, sum_of_squares_lut(0, datin_offset=2), lo=IDENTITY_LO)
    # x' = x - 2: [3, 1, 2] and [0, -2, -3]; padding lanes are fed DATIN_OFFSET -> x' = 0.
    assert out[:, 0, 0].tolist() == [9 + 1, 9 + 1 + 4, 1 + 4, 4, 0, 0, 0, 0]
    assert out[:, 0, 1].tolist() == [0 + 4, 4 + 9, 4 + 9, 9, 0, 0, 0, 0]
    assert dla.read("CDP.D_PERF_LUT_LO_HIT") == ATOM * 2
    assert dla.read("CDP.D_PERF_LUT_LE_HIT") == dla.read("CDP.D_PERF_LUT_HYBRID") == 0


@pytest.mark.parametrize("normalz_len", [0, 1, 2, 3])
def test_window_lengths_across_surfaces(normalz_len):
    rng = np.random.default_rng(normalz_len)
    channels = 19  # three surfaces, the last one partial
    x = rng.integers(-4, 5, size=(3 * ATOM, 2, 3), dtype=np.int64)
    out, _ = run_cdp(x, channels, sum_of_squares_lut(normalz_len), lo=IDENTITY_LO)
    xc = x.copy()
    xc[channels:] = 0
    assert np.array_equal(out, loop_square_sum(xc, channels, normalz_len + 1))


def test_square_sum_bypass_and_multiply():
    x = np.zeros((ATOM, 1, 1), dtype=np.int64)
    x[:4, 0, 0] = [3, -2, 5, 1]
    regs = sum_of_squares_lut(0)
    regs["D_FUNC_BYPASS"] = dict(SQSUM_BYPASS=1, MUL_BYPASS=0)
    # S = x'_c; LO hits only for S >= 0 (raw = S + 1 > 0); x' = -2 underflows both tables -> UFLOW
    # priority 0 picks LE: LE[0] + 0 = 0. Result r * x'_c.
    out, _ = run_cdp(x, 4, regs, le=[0] * 65, lo=IDENTITY_LO)
    assert out[:4, 0, 0].tolist() == [9, 0, 25, 1]


# ---- LUT lookups ----------------------------------------------------------------------------------
LINEAR_LE = Table(start=10, end=266, index_select=2, uflow_scale=3, uflow_shift=1, oflow_scale=5, oflow_shift=-1)
LE_RAMP = np.array([100 * i for i in range(65)], dtype=np.int64)


def test_linear_lookup_hit_underflow_overflow():
    s = np.array([9, 10, 11, 15, 265, 266, 270])
    value, kind = lookup_linear(s, LE_RAMP, LINEAR_LE)
    assert kind.tolist() == [UFLOW, UFLOW, HIT, HIT, HIT, OFLOW, OFLOW]
    # 9: LE[0] + rha(-1*3, 1) = -2;  10: raw 0 is an underflow;  11: idx 0, 1/4 of the way: 25
    # 15: idx 1 + 1/4: 125;  265: idx 63 + 3/4: 6375;  266: LE[64];  270: LE[64] + (4*5 << 1)
    assert value.tolist() == [-2, 0, 25, 125, 6375, 6400, 6440]


def test_linear_lookup_negative_select_shifts_left_without_interpolation():
    t = Table(start=0, end=32, index_select=-1, uflow_scale=0, uflow_shift=0, oflow_scale=0, oflow_shift=0)
    value, kind = lookup_linear(np.array([1, 3, 31, 32]), LE_RAMP, t)
    assert kind.tolist() == [HIT, HIT, HIT, OFLOW]  # idx = raw << 1: 2, 6, 62, 64
    assert value.tolist() == [200, 600, 6200, 6400]


def test_linear_lookup_saturates_to_16_bits():
    tbl = np.full(257, 32767, dtype=np.int64)
    t = Table(start=0, end=256, index_select=0, uflow_scale=-7, uflow_shift=0, oflow_scale=7, oflow_shift=0)
    value, kind = lookup_linear(np.array([300, -10]), tbl, t)
    assert kind.tolist() == [OFLOW, UFLOW]
    assert value.tolist() == [32767, 32767]  # 32767 + 308, 32767 + 70 saturate
    tbl[:] = -32768
    value, _ = lookup_linear(np.array([300, -10]), tbl, Table(0, 256, 0, 7, 0, -7, 0))
    assert value.tolist() == [-32768, -32768]


EXP_LE = Table(start=0, end=1000, index_select=0, uflow_scale=1, uflow_shift=0, oflow_scale=2, oflow_shift=0)
LE_EXP = np.array([1000 + 10 * i for i in range(65)], dtype=np.int64)


def test_exponent_lookup():
    s = np.array([5, 7, 3, 0, 1 << 20, (1 << 20) + (1 << 19)])
    value, kind = lookup_exponent(s, LE_EXP, EXP_LE, index_offset=2)
    assert kind.tolist() == [HIT, HIT, UFLOW, UFLOW, HIT, HIT]
    # 5 = 2^2 + 1: idx 0, fraction 1/4 -> 1000 + 2.5 -> 1003;  7: 3/4 -> 1007.5 -> 1008
    # 3: log2 1 < offset 2 -> LE[0] + (3 - 0 - 2^2) = 999;  0: 1000 + (0 - 4) = 996
    # 2^20: idx 18, fraction 0 -> 1180;  2^20 + 2^19: fraction 1/2 -> 1185
    assert value.tolist() == [1003, 1008, 999, 996, 1180, 1185]


def test_exponent_lookup_overflow_and_negative_offset():
    value, kind = lookup_exponent(np.array([4, 3]), LE_EXP, EXP_LE, index_offset=-62)
    assert kind.tolist() == [OFLOW, HIT]  # log2 4 = 2 -> idx 64; log2 3 = 1 -> idx 63
    assert value[0] == 1640 + (4 - 1000) * 2
    value, kind = lookup_exponent(np.array([0]), LE_EXP, EXP_LE, index_offset=-1)
    assert kind.tolist() == [UFLOW] and value.tolist() == [1000]  # no 2^offset bias for offset < 0



def test_exponent_underflow_bias_is_two_to_an_odd_offset():
    """The exponent-mode underflow measures from START + 2^LE_INDEX_OFFSET for every offset >= 0, odd ones
    included (the cmod's int64 ``1 << offset``): offset 3 puts the underflow point at 8."""
    value, kind = lookup_exponent(np.array([5, 7, 8]), LE_EXP, EXP_LE, index_offset=3)
    assert kind.tolist() == [UFLOW, UFLOW, HIT]  # log2 5 = log2 7 = 2 < 3; log2 8 = 3 -> idx 0
    assert value.tolist() == [1000 + (5 - 8), 1000 + (7 - 8), 1000]


@pytest.mark.parametrize("priorities", [(0, 0, 0), (1, 1, 1), (1, 0, 1), (0, 1, 0)])
def test_lut_priorities(priorities):
    u, o, h = priorities
    lut = Lut(le_function=1, uflow_priority=u, oflow_priority=o, hybrid_priority=h, le_index_offset=0,
              le=LINEAR_LE, lo=LINEAR_LE)
    kinds = (UFLOW, OFLOW, HIT)
    le_kind = np.array([a for a in kinds for _ in kinds])
    lo_kind = np.array([b for _ in kinds for b in kinds])
    le_val, lo_val = np.full(9, 1), np.full(9, 2)
    got, counts = lut_select(lut, le_val, le_kind, lo_val, lo_kind)
    pick = {LE: 1, LO: 2}
    want = {
        (UFLOW, UFLOW): pick[u], (OFLOW, OFLOW): pick[o], (HIT, HIT): pick[h],
        (HIT, UFLOW): 1, (HIT, OFLOW): 1, (UFLOW, HIT): 2, (OFLOW, HIT): 2,
        (UFLOW, OFLOW): pick[h], (OFLOW, UFLOW): pick[h],
    }
    assert got.tolist() == [want[(a, b)] for a, b in zip(le_kind.tolist(), lo_kind.tolist())]
    assert counts == {"uflow": 1, "oflow": 1, "le_hit": 2, "lo_hit": 2, "hybrid": 3}


#: nv_small with the cmod's LUT controller (all 38 START bits, LO select -32 shifts by 32).
CMOD_LUT = NV_SMALL.derive(cdp_lut_start_bits=38, cdp_lo_select_minus32=True)


def test_lut_through_registers_with_38_bit_start():
    # LE linear with a negative START (-2^33 as 38 bits). The cmod: every S overflows LE; LO hits. Only one
    # table hits, so LO is used whatever HYBRID_PRIORITY says.
    x = np.zeros((ATOM, 1, 1), dtype=np.int64)
    x[0, 0, 0] = 3
    regs = sum_of_squares_lut(0)
    regs.update({"S_LUT_LE_START_LOW": 0, "S_LUT_LE_START_HIGH": 0x3E, "S_LUT_LE_END_LOW": 0,
                 "S_LUT_LE_END_HIGH": 0x3E, "S_LUT_CFG": dict(LUT_LE_FUNCTION=1, LUT_HYBRID_PRIORITY=0)})
    out, dla = run_cdp(x, 1, regs, lo=IDENTITY_LO, hw=CMOD_LUT)
    assert out[:2, 0, 0].tolist() == [9, 9]
    assert dla.read("CDP.D_PERF_LUT_LO_HIT") == ATOM and dla.read("CDP.D_PERF_LUT_OFLOW") == 0
    # nv_small's RTL compares S with START's low 22 bits (signed): 0 here, so LE hits at S = 9 too (both hit:
    # HYBRID_PRIORITY LE picks LE[9] = 0); S = 0 underflows LE and LO alone hits (LO[1] = 0).
    out, dla = run_cdp(x, 1, regs, lo=IDENTITY_LO)
    assert out[:2, 0, 0].tolist() == [0, 0]
    assert dla.read("CDP.D_PERF_LUT_HYBRID") == 2 and dla.read("CDP.D_PERF_LUT_LO_HIT") == ATOM - 2


def test_nv_small_lut_start_window_is_22_bit_signed():
    """START = 2^21 + 5: the cmod sees S <= START (LE underflows, slope 0: LE[0]); nv_small's RTL sees the
    low 22 bits as -2^21 + 5, so every S is above it and LE overflows (index >= 64). The slopes measure from
    the whole START/END: an LE overflow slope of 1 gives LE[64] + (S - END)."""
    x = np.zeros((ATOM, 1, 1), dtype=np.int64)
    x[0, 0, 0] = 3
    regs = sum_of_squares_lut(0)
    regs.update({"S_LUT_LE_START_LOW": (1 << 21) + 5, "S_LUT_LE_END_LOW": 8,
                 "S_LUT_LE_SLOPE_SCALE": dict(LUT_LE_SLOPE_OFLOW_SCALE=1),
                 "S_LUT_LO_START_LOW": 1 << 20, "S_LUT_LO_START_HIGH": 0,  # LO underflows: slope 0, LO[0]
                 "S_LUT_CFG": dict(LUT_LE_FUNCTION=1, LUT_UFLOW_PRIORITY=0, LUT_HYBRID_PRIORITY=0)})
    le = [100] * 64 + [50]
    lo = [-7] * 257
    out, _ = run_cdp(x, 1, regs, le=le, lo=lo, hw=CMOD_LUT)
    assert out[:2, 0, 0].tolist() == [100, 100]  # both underflow -> LE: LE[0]
    out, dla = run_cdp(x, 1, regs, le=le, lo=lo)
    # LE overflows, LO underflows: hybrid -> LE: 50 + (S - 8) for S = 9, 9, 0 (channel 2 is beyond C)
    assert out[:3, 0, 0].tolist() == [51, 51, 42]
    assert dla.read("CDP.D_PERF_LUT_HYBRID") == ATOM


def test_nv_small_lo_index_select_minus_32_is_no_shift():
    """LUT_LO_INDEX_SELECT = 0x20 (-32): the cmod shifts S - START left by 32 (LO always overflows); nv_small's
    RTL computes the shift amount in 5 bits and shifts by 0, like select 0 (index S - START, no fraction)."""
    x = np.zeros((ATOM, 1, 1), dtype=np.int64)
    x[0, 0, 0] = 3
    regs = sum_of_squares_lut(0)
    regs["S_LUT_INFO"] = dict(LUT_LO_INDEX_SELECT=0x20)
    out, dla = run_cdp(x, 1, regs, lo=IDENTITY_LO)
    assert out[:2, 0, 0].tolist() == [9, 9]  # LO hits at S - (-1) = 10: LO[10] = 9, as with select 0
    assert dla.read("CDP.D_PERF_LUT_LO_HIT") == ATOM
    out, dla = run_cdp(x, 1, regs, lo=IDENTITY_LO, hw=CMOD_LUT)
    assert dla.read("CDP.D_PERF_LUT_LO_HIT") == 0  # LO overflows everywhere
    assert out[:2, 0, 0].tolist() == [0, 0]  # LE underflows, LO overflows: hybrid -> LE: LE[0] = 0


# ---- CVTs -----------------------------------------------------------------------------------------
def test_input_cvt():
    p = lrn_params(datin_offset=-128, datin_scale=2)
    assert input_cvt(np.array([127, -128]), p).tolist() == [255, 0]  # 255*2 = 510 saturates to 9 bits
    p = lrn_params(datin_offset=127, datin_scale=2)
    assert input_cvt(np.array([-128]), p).tolist() == [-256]
    p = lrn_params(datin_shift=1)
    assert input_cvt(np.array([3, -3, 1, -1]), p).tolist() == [2, -2, 1, -1]  # ties away from zero


def test_datin_offset_uses_its_low_byte_and_datout_offset_25_bits():
    dla = Dla(NV_SMALL)
    dla.write("CDP.D_DATIN_OFFSET", 0x0180)
    dla.write("CDP.D_DATOUT_OFFSET", 0xFF000001)
    p = Lrn.from_view(dla.units["CDP"].view(0))
    assert p.datin_offset == -128
    assert p.datout_offset == 0x1000001 - (1 << 25)


def test_output_cvt_saturation_and_its_flag():
    out, flag = output_cvt(np.array([127, 128, 129, -128, -129, -130]), lrn_params())
    assert out.tolist() == [127, 127, 127, -128, -128, -128]
    # The HLS flag compares the floor-shifted value with the saturated one and tolerates 1.
    assert flag.tolist() == [False, False, True, False, False, True]
    out, flag = output_cvt(np.array([255, 257, 258, -3]), lrn_params(datout_shift=1))
    assert out.tolist() == [127, 127, 127, -2]
    assert flag.tolist() == [False, False, True, False]
    out, _ = output_cvt(np.array([10]), lrn_params(datout_offset=-20, datout_scale=-3))
    assert out.tolist() == [-90]


def test_out_saturation_counter_through_registers():
    x = np.zeros((ATOM, 1, 1), dtype=np.int64)
    x[:3, 0, 0] = [8, 8, 8]  # S = 128, 192, 128 in lanes 0..2, 64 in lane 3
    out, dla = run_cdp(x, 3, sum_of_squares_lut(0), lo=IDENTITY_LO)
    assert out[:4, 0, 0].tolist() == [127, 127, 127, 64]
    assert dla.read("CDP.D_OUT_SATURATION") == 1  # only 192 is more than 1 away from 127


def test_cmod_convert_equals_rounded_shift_in_range():
    """Below 2^53 the cmod's double-precision convert is an exact rounded shift with 56-bit saturation."""
    rng = np.random.default_rng(7)
    values = [0, 1, -1, 3, -3, (1 << 52) - 1, -(1 << 52)] + rng.integers(-(1 << 52), 1 << 52, 300).tolist()
    lim = 1 << 55
    for shift in (-16, -3, 0, 1, 5, 15):
        want = []
        for v in values:
            if shift <= 0:
                r = v << -shift
            else:
                r = (abs(v) + (1 << (shift - 1))) >> shift
                r = -r if v < 0 else r
            want.append(max(min(r, lim - 1), -lim))
        assert cmod_convert(np.array(values, dtype=np.int64), shift).tolist() == want, shift


# ---- illegal configurations ----------------------------------------------------------------------
def test_int16_is_unsupported():
    x = np.zeros((ATOM, 1, 1), dtype=np.int64)
    with pytest.raises(UnsupportedError, match="int16"):
        run_cdp(x, 1, {"D_DATA_FORMAT": 1, "CDP_RDMA.D_DATA_FORMAT": 1})


def test_index_select_must_be_6_bit():
    x = np.zeros((ATOM, 1, 1), dtype=np.int64)
    with pytest.raises(ConfigError, match=r"CDP\.S_LUT_INFO\.LUT_LO_INDEX_SELECT"):
        run_cdp(x, 1, {"S_LUT_INFO": dict(LUT_LO_INDEX_SELECT=0x40)})


def test_destination_stride_too_small():
    x = np.zeros((2 * ATOM, 2, 2), dtype=np.int64)
    with pytest.raises(ConfigError, match=r"CDP\.D_DST_SURFACE_STRIDE\.DST_SURFACE_STRIDE"):
        run_cdp(x, 16, {"D_DST_SURFACE_STRIDE": ATOM})


def test_fp16_exponent_underflow_bias_at_offset_minus_126_is_the_smallest_normal() -> None:
    """fp16 LE exponent-mode underflow extrapolates from START + 2^LE_INDEX_OFFSET (an fp32 add). At offset
    −126 that bias is 2^−126, fp32's smallest normal, and still counts: with START 0 a zero square sum lies
    2^−126 *below* the point, a negative distance that FP17 flushes to −0, so (−0)·1.0 + LE[0] (−0) is −0
    (FP17 0x10000). Without the bias the distance would be +0 and the sum +0."""
    t = Table(start=0, end=0x3F800000, index_select=0, uflow_scale=0x3C00, uflow_shift=0, oflow_scale=0,
              oflow_shift=0)
    tbl = np.zeros(65, dtype=np.int64)
    tbl[0] = 0x8000  # fp16 −0
    value, kind = lookup_fp16(np.array([0], dtype=np.int64), tbl, t, True, -126, True)
    assert int(kind[0]) == UFLOW
    assert int(value[0]) == 0x10000  # FP17 −0
