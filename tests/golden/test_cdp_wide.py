"""CDP int16 and fp16 (nv_full): the int16 path's widths (x' 17 bits, 16-bit DATIN_OFFSET, 32-bit
DATOUT_OFFSET, 7-bit index selects, 16-bit output), the fp16 path's float LUT (fp32 START/END patterns,
exponent and linear indexing, FP17 interpolation), NaN handling and counters.

Expected values are hand-computed: the fp16 cases use values that every float format on the way holds
exactly, so Python's own arithmetic gives the answer.
"""
from __future__ import annotations

import numpy as np
import pytest

from golden.config import NV_FULL, NV_SMALL
from golden.dla import Dla
from golden.errors import ConfigError, UnsupportedError
from golden.layout import CubeLayout, read_cube, write_cube

SRC, DST = 0x80000000, 0x80200000
ATOM = NV_FULL.atom_elements("int16")
FORMAT = {"int16": 1, "fp16": 2}


def f16(values) -> np.ndarray:
    return np.asarray(values, dtype=np.float16).view(np.uint16).astype(np.int64)


def as_f16(bits) -> np.ndarray:
    return (np.asarray(bits, dtype=np.int64) & 0xFFFF).astype(np.uint16).view(np.float16)


def f32(value: float) -> int:
    return int(np.float32(value).view(np.uint32))


def run_cdp(x: np.ndarray, channels: int, dtype: str, regs: dict[str, int | dict[str, int]],
            le: list[int] | None = None, lo: list[int] | None = None, hw=NV_FULL) -> tuple[np.ndarray, Dla]:
    """Program CDP/CDP_RDMA by name on nv_full (LUTs through S_LUT_ACCESS_*), run, return the padded output."""
    _, height, width = x.shape
    dla = Dla(hw)
    atom = hw.atom_elements(dtype)  # type: ignore[arg-type]
    layout = CubeLayout(channels, height, width, width * atom * 2, height * width * atom * 2, atom, 2)
    write_cube(dla.mem.dram, SRC, layout, x)
    for table_id, values in ((0, le), (1, lo)):
        if values is not None:
            dla.write("CDP.S_LUT_ACCESS_CFG", LUT_ADDR=0, LUT_TABLE_ID=table_id, LUT_ACCESS_TYPE=1)
            for v in values:
                dla.write("CDP.S_LUT_ACCESS_DATA", int(v) & 0xFFFF)
    base = {
        "CDP_RDMA.D_DATA_CUBE_WIDTH": width - 1, "CDP_RDMA.D_DATA_CUBE_HEIGHT": height - 1,
        "CDP_RDMA.D_DATA_CUBE_CHANNEL": channels - 1, "CDP_RDMA.D_SRC_BASE_ADDR_LOW": SRC,
        "CDP_RDMA.D_SRC_LINE_STRIDE": layout.line_stride, "CDP_RDMA.D_SRC_SURFACE_STRIDE": layout.surf_stride,
        "CDP_RDMA.D_SRC_DMA_CFG": 1, "CDP_RDMA.D_DATA_FORMAT": FORMAT[dtype],
        "CDP.D_DATA_FORMAT": FORMAT[dtype], "CDP.D_DST_BASE_ADDR_LOW": DST,
        "CDP.D_DST_LINE_STRIDE": layout.line_stride, "CDP.D_DST_SURFACE_STRIDE": layout.surf_stride,
        "CDP.D_DST_DMA_CFG": 1, "CDP.D_DATIN_SCALE": 1, "CDP.D_DATOUT_SCALE": 1,
    }
    for name, value in {**base, **{(k if "." in k else f"CDP.{k}"): v for k, v in regs.items()}}.items():
        if isinstance(value, dict):
            dla.write(name, **value)
        else:
            dla.write(name, value & 0xFFFFFFFF)
    dla.write("CDP_RDMA.D_OP_ENABLE", 1)
    dla.write("CDP.D_OP_ENABLE", 1)
    assert dla.intr_status & (1 << 2), "CDP did not complete"
    return read_cube(dla.mem.dram, DST, layout, signed=dtype != "fp16"), dla


def int16_sum_lut(select: int) -> tuple[dict[str, int | dict[str, int]], list[int], list[int]]:
    """Registers and tables under which the int16 CDP writes sat16(S >> select): LE underflows always
    (START far above), LO is linear from START=0 with LO[i] = i, and MUL is bypassed."""
    regs: dict[str, int | dict[str, int]] = {
        "S_LUT_CFG": dict(LUT_LE_FUNCTION=1, LUT_UFLOW_PRIORITY=1),
        "S_LUT_INFO": dict(LUT_LE_INDEX_SELECT=0, LUT_LO_INDEX_SELECT=select & 0xFF),
        "S_LUT_LE_START_HIGH": 0x1F, "S_LUT_LE_END_HIGH": 0x1F,
        "S_LUT_LO_END_LOW": 0xFFFFFFFF, "S_LUT_LO_END_HIGH": 0x1F,
        "D_FUNC_BYPASS": dict(MUL_BYPASS=1),
    }
    return regs, [0] * 65, list(range(257))


# ---- int16 -------------------------------------------------------------------------------------------
def test_int16_input_cvt_is_17_bits_with_the_whole_16_bit_offset() -> None:
    """x' = sat17((x - 0x1234) * 3 >> 0); with SQSUM and MUL bypassed and the LO table mapping S to
    itself (select 0, entries clipped to int16) the output is that x' clipped by the table/sat16."""
    regs, le, lo = int16_sum_lut(0)
    regs.update({"D_FUNC_BYPASS": dict(SQSUM_BYPASS=1, MUL_BYPASS=1), "D_DATIN_OFFSET": 0x1234,
                 "D_DATIN_SCALE": 3, "S_LUT_LO_START_LOW": 0xFFFFFFFF, "S_LUT_LO_START_HIGH": 0x3F})
    x = np.zeros((ATOM, 1, 3), dtype=np.int64)
    x[0, 0] = [0x1234 + 10, 0x1234 + 50, 0x1234 + 60]  # x' = 30, 150, 180
    got, _ = run_cdp(x, 1, "int16", regs, le, lo)
    # LO from START=-1: index = x' + 1, LO[x'+1] = x' + 1; padding lanes are fed DATIN_OFFSET -> x' = 0 -> 1.
    assert got[0, 0].tolist() == [31, 151, 181]
    assert got[1:, 0].tolist() == [[1, 1, 1]] * (ATOM - 1)


def test_int16_square_sums_reach_36_bits() -> None:
    """Three channels of x' = -65536 (x = -32768 scaled by 2 saturates at 17 bits): S = 3 * 2^32 per
    channel, which LO linear with select 28 maps to index 48 (S / 2^28)."""
    regs, le, lo = int16_sum_lut(28)
    regs["D_DATIN_SCALE"] = 4
    x = np.zeros((ATOM, 1, 1), dtype=np.int64)
    x[:3, 0, 0] = -32768
    got, _ = run_cdp(x, 3, "int16", regs, le, lo)
    assert got[:4, 0, 0].tolist() == [32, 48, 32, 16]  # S = 2, 3, 2, 1 x 2^32 (the window ends at channel 2)


def test_int16_output_cvt_saturates_to_16_bits_with_a_32_bit_offset() -> None:
    regs, le, lo = int16_sum_lut(0)
    lo = [0] + [30000] * 256
    regs.update({"D_DATOUT_OFFSET": -0x10000, "D_DATOUT_SCALE": 1})
    x = np.zeros((ATOM, 1, 1), dtype=np.int64)
    x[0, 0, 0] = 1
    got, dla = run_cdp(x, 1, "int16", regs, le, lo)
    assert got[0, 0, 0] == 32767  # 30000 + 65536 saturates
    assert dla.read("CDP.D_OUT_SATURATION") == ATOM  # every lane: LO[0] = 0 or 30000, plus 65536
    regs["D_DATOUT_OFFSET"] = 0x4000
    got, _ = run_cdp(x, 1, "int16", regs, le, lo)
    assert got[0, 0, 0] == 30000 - 0x4000


def test_int16_index_selects_are_7_bit_signed_within_the_defined_range() -> None:
    regs, le, lo = int16_sum_lut(0)
    x = np.zeros((ATOM, 1, 1), dtype=np.int64)
    regs["S_LUT_INFO"] = dict(LUT_LO_INDEX_SELECT=0x41)  # -63: a left shift, defined
    run_cdp(x, 1, "int16", regs, le, lo)
    for bad in (0x40, 0x20, 0x80):  # -64 (shift by 64), 32 (a 32-bit C shift), 128
        regs["S_LUT_INFO"] = dict(LUT_LO_INDEX_SELECT=bad)
        with pytest.raises(ConfigError, match=r"CDP\.S_LUT_INFO\.LUT_LO_INDEX_SELECT"):
            run_cdp(x, 1, "int16", regs, le, lo)
    # LE's select is unused in exponent mode, so any value is accepted there.
    regs["S_LUT_INFO"] = dict(LUT_LE_INDEX_SELECT=0x80)
    regs["S_LUT_CFG"] = dict(LUT_LE_FUNCTION=0, LUT_UFLOW_PRIORITY=1)
    run_cdp(x, 1, "int16", regs, le, lo)


def test_int16_needs_nv_full_and_matching_rdma_format() -> None:
    x = np.zeros((ATOM, 1, 1), dtype=np.int64)
    with pytest.raises(ConfigError, match=r"CDP_RDMA\.D_DATA_FORMAT\.INPUT_DATA"):
        run_cdp(x, 1, "int16", {"CDP_RDMA.D_DATA_FORMAT": 0})
    with pytest.raises(UnsupportedError, match="no int16 datapath"):
        run_cdp(np.zeros((NV_SMALL.atom_elements("int16"), 1, 1), dtype=np.int64), 1, "int16", {}, hw=NV_SMALL)


# ---- fp16 ---------------------------------------------------------------------------------------------
def fp16_lo_identity(select: int = 0) -> tuple[dict[str, int | dict[str, int]], list[int], list[int]]:
    """fp16 registers under which the CDP writes S (or x with SQSUM_BYPASS) for 0 < S < 256: LE in
    exponent mode with START = 2^30 underflows with slope 0 to LE[0] = 0, LO is linear from START = 0.0
    with LO[i] = i, and MUL is bypassed. Both underflow at S <= 0, where UFLOW_PRIORITY picks LO: 0."""
    regs: dict[str, int | dict[str, int]] = {
        "S_LUT_CFG": dict(LUT_LE_FUNCTION=0, LUT_UFLOW_PRIORITY=1),
        "S_LUT_INFO": dict(LUT_LO_INDEX_SELECT=select & 0xFF),
        "S_LUT_LE_START_LOW": f32(2.0 ** 30), "S_LUT_LE_END_LOW": f32(2.0 ** 31),
        "S_LUT_LO_START_LOW": 0, "S_LUT_LO_END_LOW": f32(256.0 * 2 ** select),
        "D_FUNC_BYPASS": dict(MUL_BYPASS=1),
    }
    return regs, [0] * 65, [int(v) for v in f16(np.arange(257))]


def test_fp16_square_sum_through_a_linear_table() -> None:
    regs, le, lo = fp16_lo_identity()
    x = np.zeros((ATOM, 1, 2), dtype=np.int64)
    x[:3, 0, 0] = f16([1.0, 2.0, 3.0])
    x[:3, 0, 1] = f16([0.5, -1.5, 2.0])
    got, dla = run_cdp(x, 3, "fp16", regs, le, lo)
    assert as_f16(got[:4, 0, 0]).tolist() == [5.0, 14.0, 13.0, 9.0]  # channel 3 is padding: 0 + 9 + 0
    assert as_f16(got[:3, 0, 1]).tolist() == [2.5, 6.5, 6.25]  # fractions interpolate between entries
    assert got[5, 0, 0] == 0  # S = 0 underflows both tables: LO[0] + 0 * slope
    assert dla.read("CDP.D_PERF_LUT_LO_HIT") == 8 and dla.read("CDP.D_PERF_LUT_UFLOW") == 2 * ATOM - 8


def test_fp16_exponent_table_indexes_by_the_exponent_and_interpolates_the_mantissa() -> None:
    """LE exponent mode, START 0, INDEX_OFFSET -2: S = 6 = 1.5 * 2^2 -> index 4, fraction 0.5, with
    LE[i] = i -> 4.5. SQSUM bypassed, so S is x itself."""
    regs = {
        "S_LUT_CFG": dict(LUT_LE_FUNCTION=0),
        "S_LUT_INFO": dict(LUT_LE_INDEX_OFFSET=-2 & 0xFF),
        "S_LUT_LE_START_LOW": 0, "S_LUT_LE_END_LOW": f32(2.0 ** 62),
        "S_LUT_LO_START_LOW": f32(1e9), "D_FUNC_BYPASS": dict(SQSUM_BYPASS=1, MUL_BYPASS=1),
    }
    x = np.zeros((ATOM, 1, 1), dtype=np.int64)
    x[:2, 0, 0] = f16([6.0, 0.375])  # 0.375 = 1.5 * 2^-2 -> index 0
    got, _ = run_cdp(x, 2, "fp16", regs, [int(v) for v in f16(np.arange(65))], [0] * 257)
    assert as_f16(got[:2, 0, 0]).tolist() == [4.5, 0.5]



def test_fp16_underflow_slope_scale_is_all_16_bits_of_its_fp16() -> None:
    """An fp16 underflow is ``LUT[0] + FP17(S − START) * scale`` with the slope scale the whole fp16 pattern
    of LUT_LO_SLOPE_UFLOW_SCALE: 0x3C01 is 1 + 2^-10, its last mantissa bit counts (exact in FP17 and fp16)."""
    regs, le, lo = fp16_lo_identity()
    regs["D_FUNC_BYPASS"] = dict(SQSUM_BYPASS=1, MUL_BYPASS=1)
    regs["S_LUT_LO_SLOPE_SCALE"] = dict(LUT_LO_SLOPE_UFLOW_SCALE=0x3C01)
    x = np.zeros((ATOM, 1, 1), dtype=np.int64)
    x[:2, 0, 0] = f16([-1.0, -2.0])  # both tables underflow, UFLOW_PRIORITY picks LO: LO[0] = 0
    got, dla = run_cdp(x, 2, "fp16", regs, le, lo)
    assert got[:2, 0, 0].tolist() == [0xBC01, 0xC001]  # -(1 + 2^-10), -2(1 + 2^-10)


def test_fp16_multiplies_by_x_and_ignores_the_cvt_registers() -> None:
    regs, le, lo = fp16_lo_identity()
    regs.update({"D_FUNC_BYPASS": dict(SQSUM_BYPASS=1), "D_DATIN_SCALE": 0, "D_DATIN_OFFSET": 0x3C00,
                 "D_DATOUT_SCALE": 0, "D_DATOUT_SHIFTER": 9})
    x = np.zeros((ATOM, 1, 1), dtype=np.int64)
    x[:2, 0, 0] = f16([3.0, 0.5])
    got, dla = run_cdp(x, 2, "fp16", regs, le, lo)
    assert as_f16(got[:2, 0, 0]).tolist() == [9.0, 0.25]
    assert dla.read("CDP.D_OUT_SATURATION") == 0


def test_fp16_nan_inputs_counters_and_flush() -> None:
    regs, le, lo = fp16_lo_identity()
    x = np.zeros((ATOM, 1, 1), dtype=np.int64)
    x[:4, 0, 0] = [0x7E01, f16(1.0), 0x7C00, 0xFC00]
    got, dla = run_cdp(x, 4, "fp16", regs, le, lo)
    assert (dla.read("CDP.D_NAN_INPUT_NUM"), dla.read("CDP.D_INF_INPUT_NUM")) == (1, 2)
    # Channels 0 and 1 see the NaN in their window: the sum is NaN, which underflows both tables; the
    # LO underflow value is LO[0] + NaN * slope = the NaN (payload kept through FP17).
    assert got[0, 0, 0] == got[1, 0, 0] == 0x7E01
    assert dla.read("CDP.D_NAN_OUTPUT_NUM") == 2
    regs["D_NAN_FLUSH_TO_ZERO"] = 1
    got, dla = run_cdp(x, 4, "fp16", regs, le, lo)
    assert dla.read("CDP.D_NAN_INPUT_NUM") == 1  # counted as read, then flushed
    assert as_f16(got[0, 0, 0]) == 1.0  # 0 + 0 + 1
    assert dla.read("CDP.D_NAN_OUTPUT_NUM") == 0


def test_fp16_mul_bypass_passes_a_nan_x() -> None:
    """MUL_BYPASS outputs the LUT result, except that a NaN x is passed through (cmod)."""
    regs, le, lo = fp16_lo_identity()
    regs["D_FUNC_BYPASS"] = dict(SQSUM_BYPASS=1, MUL_BYPASS=1)
    x = np.zeros((ATOM, 1, 1), dtype=np.int64)
    x[:2, 0, 0] = [0xFE07, f16(2.0)]
    got, _ = run_cdp(x, 2, "fp16", regs, le, lo)
    assert got[0, 0, 0] == 0xFE07 and as_f16(got[1, 0, 0]) == 2.0


def test_fp16_index_select_is_8_bit_signed() -> None:
    """LO_INDEX_SELECT 0x80 = -128 scales S by 2^128: past float's range, so every positive S overflows
    LO (OFLOW: LO[256] + (S - END) * slope, slope 0 -> 256). LE underflows, so HYBRID_PRIORITY picks:
    LO gives 256, LE gives LE[0] + (S - START) * (+0) = -0 (a negative difference times +0)."""
    regs, le, lo = fp16_lo_identity()
    regs["S_LUT_INFO"] = dict(LUT_LO_INDEX_SELECT=0x80)
    regs["S_LUT_CFG"] = dict(LUT_LE_FUNCTION=0, LUT_UFLOW_PRIORITY=1, LUT_HYBRID_PRIORITY=1)
    x = np.zeros((ATOM, 1, 1), dtype=np.int64)
    x[0, 0, 0] = f16(1.0)
    got, dla = run_cdp(x, 1, "fp16", regs, le, lo)
    assert as_f16(got[0, 0, 0]) == 256.0
    assert dla.read("CDP.D_PERF_LUT_HYBRID") == 2  # channels 0 and 1 (S = 1); the rest underflow both
    regs["S_LUT_CFG"] = dict(LUT_LE_FUNCTION=0, LUT_UFLOW_PRIORITY=1, LUT_HYBRID_PRIORITY=0)
    got, _ = run_cdp(x, 1, "fp16", regs, le, lo)
    assert got[0, 0, 0] == 0x8000
    # select 1 halves S: S = 5 -> 2.5 (index 2, fraction 0.5)
    regs["S_LUT_INFO"] = dict(LUT_LO_INDEX_SELECT=1)
    x[:2, 0, 0] = f16([1.0, 2.0])
    got, _ = run_cdp(x, 2, "fp16", regs, le, lo)
    assert as_f16(got[0, 0, 0]) == 2.5


def test_fp16_window_of_five_sums_both_neighbours_two_away() -> None:
    """NORMALZ_LEN=1 is the 5-channel window c−2 .. c+2: the outer taps x[c−2]² + x[c+2]² are added to the
    3-channel sum (cmod order ``((x[c−1]+x[c+1])+x[c]) + (x[c−2]+x[c+2])``; all values exact here)."""
    regs, le, lo = fp16_lo_identity()
    regs["D_LRN_CFG"] = dict(NORMALZ_LEN=1)
    x = np.zeros((ATOM, 1, 1), dtype=np.int64)
    x[:5, 0, 0] = f16([1.0, 2.0, 3.0, 4.0, 5.0])
    got, _ = run_cdp(x, 5, "fp16", regs, le, lo)
    # S[c] = sum of x[k]² for |k − c| <= 2, channels outside 0..4 contributing 0
    want = [1 + 4 + 9, 1 + 4 + 9 + 16, 1 + 4 + 9 + 16 + 25, 4 + 9 + 16 + 25, 9 + 16 + 25, 16 + 25, 25, 0]
    assert as_f16(got[:8, 0, 0]).tolist() == want
