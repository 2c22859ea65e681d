"""PDP int16 and fp16 (nv_full): pooling rules, the widths of the int16 path, the fp16 path's FP17 quirks,
NaN/Inf handling and counters, and SDP -> PDP on the fly in both precisions.

Expected values are hand-computed (fp16 cases use values FP17 holds exactly, or derive the cmod's rule
step by step) or come from plain loops written here; one fp16 sign corner is also checked against the
independent element-stream reference (``regressions.lib.reference.pdp_fp16``).
"""
from __future__ import annotations

import numpy as np
import pytest

from golden.config import NV_FULL, NV_SMALL, HwConfig
from golden.dla import Dla
from golden.engines.pdp import AVERAGE, MAX, MIN, Pooling, pool
from golden.errors import ConfigError, UnsupportedError
from golden.layout import CubeLayout, read_cube, write_cube
from regressions.lib.reference.pdp_fp16 import pool_fp16

SRC, DST = 0x80000000, 0x80100000
ATOM = NV_FULL.atom_elements("int16")  # 16 channels of 2 bytes per 32-byte atom
FORMAT = {"int16": 1, "fp16": 2}
ONE, HALF, QUARTER = 0x7C00, 0x7800, 0x7400  # FP17 1.0, 0.5, 0.25 (the firmware's reciprocals)


def f16(values) -> np.ndarray:
    """fp16 bit patterns (int64) of exactly representable values."""
    return np.asarray(values, dtype=np.float16).view(np.uint16).astype(np.int64)


def as_f16(bits) -> np.ndarray:
    return (np.asarray(bits, dtype=np.int64) & 0xFFFF).astype(np.uint16).view(np.float16)


def cube(plane: np.ndarray, lanes: int = ATOM) -> np.ndarray:
    """(H, W) values in channel 0 of a one-surface cube; the other lanes zero."""
    out = np.zeros((lanes,) + plane.shape, dtype=np.int64)
    out[0] = plane
    return out


def layout(channels: int, h: int, w: int) -> CubeLayout:
    return CubeLayout(channels, h, w, w * ATOM * 2, h * w * ATOM * 2, ATOM, 2)


def program_pdp(
    dla: Dla,
    dtype: str,
    *,
    channels: int,
    size: tuple[int, int],  # input (h, w)
    kernel: tuple[int, int] = (2, 2),  # (kw, kh)
    stride: tuple[int, int] = (1, 1),  # (sw, sh)
    pads: tuple[int, int, int, int] = (0, 0, 0, 0),  # left, top, right, bottom
    method: int = MAX,
    pad_values: tuple[int, ...] = (0,) * 7,
    recip: tuple[int, int] | None = None,
    flying: bool = False,
    nan_to_zero: bool = False,
    split: tuple[int, tuple[int, int, int], tuple[int, int, int]] | None = None,
    extra: dict[str, int] | None = None,
) -> CubeLayout:
    """PDP (and PDP_RDMA unless ``flying``) register writes by name, without the enables."""
    h, w = size
    kw, kh = kernel
    sw, sh = stride
    pl, pt, pr, pb = pads
    oh, ow = (pt + h + pb - kh) // sh + 1, (pl + w + pr - kw) // sw + 1
    if recip is None:
        recip = (ONE, ONE) if dtype == "fp16" else (0x10000 // kw, 0x10000 // kh)
    n = split[0] if split else 1
    regs = {"PDP.D_DATA_FORMAT": FORMAT[dtype], "PDP.D_NAN_FLUSH_TO_ZERO": int(nan_to_zero)}
    src = layout(channels, h, w)
    units = ("PDP",) if flying else ("PDP", "PDP_RDMA")
    for unit in units:
        regs.update({f"{unit}.D_DATA_CUBE_IN_WIDTH": w - 1, f"{unit}.D_DATA_CUBE_IN_HEIGHT": h - 1,
                     f"{unit}.D_DATA_CUBE_IN_CHANNEL": channels - 1})
    if not flying:
        regs.update({
            "PDP_RDMA.D_DATA_FORMAT": FORMAT[dtype], "PDP_RDMA.D_SRC_BASE_ADDR_LOW": SRC,
            "PDP_RDMA.D_SRC_LINE_STRIDE": src.line_stride, "PDP_RDMA.D_SRC_SURFACE_STRIDE": src.surf_stride,
            "PDP_RDMA.D_SRC_RAM_CFG": 1, "PDP_RDMA.D_FLYING_MODE": 1, "PDP_RDMA.D_OPERATION_MODE_CFG": n - 1,
            "PDP_RDMA.D_POOLING_KERNEL_CFG": (kw - 1) | ((sw - 1) << 4),
        })
    out = layout(channels, oh, ow)
    regs.update({
        "PDP.D_DATA_CUBE_OUT_WIDTH": ow - 1, "PDP.D_DATA_CUBE_OUT_HEIGHT": oh - 1,
        "PDP.D_DATA_CUBE_OUT_CHANNEL": channels - 1,
        "PDP.D_OPERATION_MODE_CFG": method | ((0 if flying else 1) << 4) | ((n - 1) << 8),
        "PDP.D_POOLING_KERNEL_CFG": (kw - 1) | ((kh - 1) << 8) | ((sw - 1) << 16) | ((sh - 1) << 20),
        "PDP.D_POOLING_PADDING_CFG": pl | (pt << 4) | (pr << 8) | (pb << 12),
        "PDP.D_RECIP_KERNEL_WIDTH": recip[0], "PDP.D_RECIP_KERNEL_HEIGHT": recip[1],
        "PDP.D_DST_BASE_ADDR_LOW": DST, "PDP.D_DST_LINE_STRIDE": out.line_stride,
        "PDP.D_DST_SURFACE_STRIDE": out.surf_stride, "PDP.D_DST_RAM_CFG": 1,
    })
    for i, v in enumerate(pad_values, start=1):
        regs[f"PDP.D_POOLING_PADDING_VALUE_{i}_CFG"] = v
    if split:
        (fi, mi, li), (fo, mo, lo) = split[1], split[2]
        part_in = (fi - 1) | ((li - 1) << 10) | ((mi - 1) << 20)
        regs["PDP.D_PARTIAL_WIDTH_IN"] = regs["PDP_RDMA.D_PARTIAL_WIDTH_IN"] = part_in
        regs["PDP.D_PARTIAL_WIDTH_OUT"] = (fo - 1) | ((lo - 1) << 10) | ((mo - 1) << 20)
    regs.update(extra or {})
    for name, value in regs.items():
        dla.write(name, value)
    return out


def run_pdp(
    x: np.ndarray, dtype: str, *, channels: int | None = None, hw: HwConfig = NV_FULL, **kw
) -> tuple[np.ndarray, Dla]:
    """Pool (padded C, H, W) ``x`` (int16 values or fp16 patterns) from memory; (padded output, Dla)."""
    dla = Dla(hw)
    channels = channels or x.shape[0]
    write_cube(dla.mem.dram, SRC, layout(channels, *x.shape[1:]), x)
    out = program_pdp(dla, dtype, channels=channels, size=x.shape[1:], **kw)
    dla.write("PDP_RDMA.D_OP_ENABLE", 1)
    dla.write("PDP.D_OP_ENABLE", 1)
    assert dla.intr_status & (1 << 4), "PDP did not complete"
    return read_cube(dla.mem.dram, DST, out, signed=dtype != "fp16"), dla


def loop_pool(x: np.ndarray, kernel, stride, pads, method: int) -> np.ndarray:
    """Max/min/plain-sum pooling of int values by per-pixel loops (padding excluded)."""
    (kw, kh), (sw, sh), (pl, pt, pr, pb) = kernel, stride, pads
    c, h, w = x.shape
    oh, ow = (pt + h + pb - kh) // sh + 1, (pl + w + pr - kw) // sw + 1
    out = np.zeros((c, oh, ow), dtype=np.int64)
    for ch in range(c):
        for oy in range(oh):
            for ox in range(ow):
                taps = [int(x[ch, y, xx]) for y in range(oy * sh - pt, oy * sh - pt + kh) if 0 <= y < h
                        for xx in range(ox * sw - pl, ox * sw - pl + kw) if 0 <= xx < w]
                out[ch, oy, ox] = max(taps) if method == MAX else min(taps) if method == MIN else sum(taps)
    return out


# ---- int16 -------------------------------------------------------------------------------------------
@pytest.mark.parametrize("method", [MAX, MIN])
def test_int16_max_min_over_the_full_range_with_padding_ignored(method: int) -> None:
    rng = np.random.default_rng(method)
    x = rng.integers(-32768, 32768, size=(2 * ATOM, 5, 6))
    x[3, 0, 0], x[4, 1, 1] = -32768, 32767
    got, _ = run_pdp(x, "int16", kernel=(3, 2), stride=(2, 1), pads=(1, 1, 1, 0), method=method,
                     pad_values=(0x7FFFF,) * 7)
    assert np.array_equal(got, loop_pool(x, (3, 2), (2, 1), (1, 1, 1, 0), method))


def test_int16_average_uses_a_32_bit_sum_and_the_16_16_reciprocals() -> None:
    # Sums of 4 values near 32767 need 17 bits: an int16 line buffer would wrap, the cmod's int32 does not.
    x = cube(np.array([[32767, 32767], [32767, 32765]]))
    got, _ = run_pdp(x, "int16", kernel=(2, 2), method=AVERAGE)
    # t = 131066; rha(131066 * 0x8000, 16) = 65533; rha(65533 * 0x8000, 16) = 32766.5 -> 32767 (away from 0)
    assert got[0, 0, 0] == 32767
    x = cube(np.array([[-32768, -32768], [-32768, -32767]]))
    got, _ = run_pdp(x, "int16", kernel=(2, 2), method=AVERAGE)
    assert got[0, 0, 0] == -32768  # -131071/4 = -32767.75 -> -32767.5 -> -32768


def test_int16_average_keeps_the_low_16_bits_of_the_result() -> None:
    """No saturation: a reciprocal near 2 takes 30000 to rha(30000 * 0x1FFFF, 16) = 60000 (59999.54),
    stored as 60000 - 65536."""
    x = cube(np.array([[30000]]))
    got, _ = run_pdp(x, "int16", kernel=(1, 1), method=AVERAGE, recip=(0x1FFFF, 0x10000))
    assert got[0, 0, 0] == 60000 - 65536


def test_int16_pad_values_sign_extend_from_16_to_19_bits() -> None:
    """PAD_VALUE_1X 0x00FF is +255 for int16 (sign bit 15), where int8 reads it as -1 (sign bit 7);
    PAD_VALUE_2X 0x1FFFE is -2 (sign bit 16); 7X uses all 19 bits."""
    x = cube(np.full((1, 2), 100))
    pads = (0x00FF, 0x1FFFE, 0, 0, 0, 0, 0x7FFF0)
    # Kernel 3x1, pad left 1: window 0 = [pad, 100, 100] -> 200 + PAD_1X; kernel 4, pads 1/1 -> PAD_2X.
    got, _ = run_pdp(x, "int16", kernel=(3, 1), pads=(1, 0, 0, 0), method=AVERAGE, pad_values=pads,
                     recip=(0x10000, 0x10000))
    assert got[0, 0, 0] == 200 + 255
    got, _ = run_pdp(x, "int16", kernel=(4, 1), pads=(1, 0, 1, 0), method=AVERAGE, pad_values=pads,
                     recip=(0x10000, 0x10000))
    assert got[0, 0, 0] == 200 - 2
    x = cube(np.full((1, 1), 100))
    got, _ = run_pdp(x, "int16", kernel=(8, 1), pads=(7, 0, 0, 0), method=AVERAGE, pad_values=pads,
                     recip=(0x10000, 0x10000))
    assert got[0, 0, 0] == 100 - 16  # 0x7FFF0 as 19-bit signed



@pytest.mark.parametrize("n, bits", [(1, 16), (2, 17), (3, 18), (4, 18), (5, 19), (6, 19), (7, 19)])
def test_int16_pad_value_nx_sign_bit_sits_at_its_width(n: int, bits: int) -> None:
    """For int16, PAD_VALUE_nX is signed from bit 15, 16, 17, 17, 18, 18, 18 for n = 1..7 (cmod
    ``int_sign_extend``): a field holding only that bit is -2^(bits-1). A window of n left pads and one
    zero sums to exactly that; RECIP_KERNEL_WIDTH 1/32 brings it into the 16 bits stored."""
    pads = tuple((1 << (bits - 1)) if i == n else 0 for i in range(1, 8))
    got, _ = run_pdp(cube(np.zeros((1, 1), dtype=np.int64)), "int16", kernel=(n + 1, 1), pads=(n, 0, 0, 0),
                     method=AVERAGE, pad_values=pads, recip=(0x10000 // 32, 0x10000))
    assert got[0, 0, 0] == -(1 << (bits - 1)) // 32


def test_int16_padded_rows_add_the_pad_value_times_the_kernel_width() -> None:
    x = cube(np.array([[1000, 2000]]))
    pads = (-7 & 0x7FFFF,) + (0,) * 6
    got, _ = run_pdp(x, "int16", kernel=(2, 2), pads=(0, 1, 0, 0), method=AVERAGE, pad_values=pads,
                     recip=(0x10000, 0x10000))
    assert got[0, 0, 0] == 3000 + 2 * -7


def test_int16_split_width_equals_unsplit() -> None:
    rng = np.random.default_rng(5)
    x = rng.integers(-32768, 32768, size=(ATOM, 3, 10))
    whole, _ = run_pdp(x, "int16", kernel=(3, 2), stride=(2, 1), pads=(1, 0, 1, 0), method=AVERAGE)
    parts, _ = run_pdp(x, "int16", kernel=(3, 2), stride=(2, 1), pads=(1, 0, 1, 0), method=AVERAGE,
                       split=(3, (4, 2, 4), (2, 1, 2)))
    assert np.array_equal(whole, parts)


# ---- fp16 -------------------------------------------------------------------------------------------
def test_fp16_average_of_exact_values() -> None:
    x = cube(f16([[1.0, 2.0, 3.5], [3.0, 4.0, -8.0]]))
    got, _ = run_pdp(x, "fp16", kernel=(2, 2), method=AVERAGE, recip=(HALF, HALF))
    assert as_f16(got[0]).tolist() == [[2.5, 0.375]]  # (1+2+3+4)/4, (2+3.5+4-8)/4
    assert np.all(got[1:] == 0)  # padding lanes of zeros pool to +0


@pytest.mark.parametrize("method,want", [(MAX, 4.0), (MIN, -8.0)])
def test_fp16_max_min(method: int, want: float) -> None:
    x = cube(f16([[1.0, -0.0, 4.0], [-8.0, 2.0, 0.0]]))
    got, _ = run_pdp(x, "fp16", kernel=(3, 2), method=method)
    assert float(as_f16(got[0, 0, 0])) == want


def test_fp16_max_keeps_inf_and_min_prefers_negative_zero() -> None:
    x = cube(f16([[np.inf, 1.0, 0.0, -0.0]]))
    got, _ = run_pdp(x, "fp16", kernel=(2, 1), method=MAX)
    assert got[0, 0].tolist() == [0x7C00, 0x3C00, 0x0000]  # max(+0, -0) = +0
    got, _ = run_pdp(x, "fp16", kernel=(2, 1), method=MIN)
    assert got[0, 0].tolist() == [0x3C00, 0x0000, 0x8000]  # min(+0, -0) = -0


def test_fp16_nan_wins_max_and_propagates_through_average() -> None:
    nan = 0x7E05
    x = cube(np.array([[f16(1.0), nan, f16(3.0)]]))
    got, dla = run_pdp(x, "fp16", kernel=(2, 1), method=MAX)
    assert got[0, 0].tolist() == [nan, nan]
    got, dla = run_pdp(x, "fp16", kernel=(2, 1), method=AVERAGE, recip=(HALF, ONE))
    assert got[0, 0].tolist() == [nan, nan]  # the payload survives FP17 and back
    assert dla.read("PDP.D_NAN_INPUT_NUM") == 1
    assert dla.read("PDP.D_NAN_OUTPUT_NUM") == 2


def test_fp16_nan_flush_to_zero_and_the_input_counters() -> None:
    x = cube(np.array([[0x7E00, f16(2.0), 0x7C00, 0xFC00]]))
    x[5, 0, 1] = 0xFE01  # a NaN in another lane
    got, dla = run_pdp(x, "fp16", kernel=(2, 1), method=AVERAGE, recip=(HALF, ONE), nan_to_zero=True)
    assert as_f16(got[0, 0, 0]) == 1.0  # (+0 + 2) / 2: the NaN read as +0
    assert got[5, 0].tolist() == [0, 0, 0]
    assert (dla.read("PDP.D_NAN_INPUT_NUM"), dla.read("PDP.D_INF_INPUT_NUM")) == (2, 2)  # counted before the flush
    assert dla.read("PDP.D_NAN_OUTPUT_NUM") == 0
    # Inf becomes the largest finite FP17 on the way in: (Inf + -Inf) / 2 is 0, not NaN.
    assert got[0, 0, 2] in (0x0000, 0x8000)


def test_fp16_average_saturates_to_65504_instead_of_inf() -> None:
    x = cube(f16([[65504.0, 65504.0]]))
    got, _ = run_pdp(x, "fp16", kernel=(2, 1), method=AVERAGE, recip=(ONE, ONE))
    assert got[0, 0, 0] == 0x7BFF  # 131008 in FP17 is finite; narrowing to fp16 saturates


def test_fp16_opposite_values_sum_to_the_sign_of_the_first() -> None:
    """FP17 adds give an exact zero the sign of the larger operand, the accumulator on ties: 1 + (-1) is
    +0 but (-1) + 1 is -0 (IEEE would give +0 both times)."""
    x = cube(f16([[-1.0, 1.0, -1.0]]))
    got, _ = run_pdp(x, "fp16", kernel=(2, 1), method=AVERAGE, recip=(HALF, ONE))
    assert got[0, 0].tolist() == [0x8000, 0x0000]


def test_fp16_pad_values_are_fp17_patterns_added_once_per_row() -> None:
    # PAD_VALUE_1X = FP17 1.0 (0x7C00): a left-padded 2x1 window over [3] is 3 + 1.
    x = cube(f16([[3.0, 5.0]]))
    got, _ = run_pdp(x, "fp16", kernel=(2, 1), pads=(1, 0, 0, 0), method=AVERAGE, pad_values=(ONE,) + (0,) * 6)
    assert as_f16(got[0, 0]).tolist() == [4.0, 8.0]
    # Vertical padding: PAD_VALUE_1X * kw (FP17 2.0) added once: rows [3+5] + pad row 1.0*2 = 10.
    got, _ = run_pdp(x, "fp16", kernel=(2, 2), pads=(0, 1, 0, 0), method=AVERAGE, pad_values=(ONE,) + (0,) * 6)
    assert as_f16(got[0, 0, 0]) == 10.0
    # An 8-wide kernel scales a vertical pad by 8.0 (past the cmod's 1.0..7.0 table).
    x8 = cube(f16([[1.0] * 8]))
    got, _ = run_pdp(x8, "fp16", kernel=(8, 2), pads=(0, 1, 0, 0), method=AVERAGE, pad_values=(ONE,) + (0,) * 6)
    assert as_f16(got[0, 0, 0]) == 16.0



@pytest.mark.parametrize("kw", range(1, 9))
def test_fp16_vertical_pad_is_scaled_by_exactly_the_kernel_width(kw: int) -> None:
    """A padded row adds PAD_VALUE_mX * kw in FP17, kw from the cmod's ``kernel_width_map`` (1.0 .. 7.0,
    8.0 past it): with PAD_VALUE_1X = 1.0 over a row of zeros, the average (recips 1.0) is exactly kw."""
    x = cube(f16(np.zeros((1, kw))))
    got, _ = run_pdp(x, "fp16", kernel=(kw, 2), pads=(0, 1, 0, 0), method=AVERAGE, pad_values=(ONE,) + (0,) * 6)
    assert got[0, 0, 0] == f16(float(kw))


@pytest.mark.parametrize("kw", range(1, 9))
def test_fp16_padded_row_weight_is_the_kernel_width_in_the_pooling_core(kw: int) -> None:
    """The same ``kernel_width_map`` rule on the pooling core alone (no register program, so it is quick):
    a kernel kw wide and 2 high whose top row is padding adds PAD_VALUE_1X (FP17 1.0) times kw; over a row
    of +0 data with both reciprocals 1.0 the fp16 average is exactly kw."""
    cfg = Pooling(method=AVERAGE, kernel_width=kw, kernel_height=2, stride_width=1, stride_height=1, pad_left=0,
                  pad_top=1, pad_right=0, pad_bottom=0, recip_width=ONE, recip_height=ONE,
                  pad_values=(ONE,) + (0,) * 6, dtype="fp16")
    got = pool(np.zeros((1, 1, kw), dtype=np.int64), cfg, 1, 1)
    assert int(got[0, 0, 0]) == int(f16(float(kw)))


def test_fp16_average_of_negative_zeros_is_negative_zero() -> None:
    """The +0 pad operands the cmod adds after every tap leave a -0 sum alone (an FP17 tie takes the
    accumulator's sign), so a window of -0 averages to -0 in both the line and the row stage; the
    independent element-stream reference agrees."""
    x = cube(f16([[-0.0, -0.0, -0.0], [-0.0, -0.0, -0.0]]))
    got, _ = run_pdp(x, "fp16", kernel=(2, 2), method=AVERAGE, recip=(HALF, HALF))
    want = pool_fp16(x[:1], method="avg", kernel=(2, 2), stride=(1, 1), recip_w=HALF, recip_h=HALF, out_hw=(1, 2))
    assert got[0].tolist() == want[0].tolist() == [[0x8000, 0x8000]]


def test_fp16_recips_are_fp17_patterns() -> None:
    x = cube(f16([[1.0, 2.0, 3.0]]))
    # FP17 0x7555 (the firmware's 1/3: 0.333...) then 0x7400 (0.25): 6 * 0.33325 * 0.25 = 0.49988 -> fp16
    got, _ = run_pdp(x, "fp16", kernel=(3, 1), method=AVERAGE, recip=(0x7555, QUARTER))
    third = (1024 + 0x155) / 1024 / 4
    assert abs(float(as_f16(got[0, 0, 0])) - 6 * third * 0.25) < 2 ** -11


def test_fp16_split_width_equals_unsplit_and_overlap_is_counted_again() -> None:
    rng = np.random.default_rng(9)
    x = (rng.standard_normal((ATOM, 2, 10)) * 8).astype(np.float16).view(np.uint16).astype(np.int64)
    x[0, 0, 3] = 0x7C00  # Inf in column 3, which the second split re-reads
    kw = dict(kernel=(3, 2), stride=(2, 1), pads=(1, 0, 1, 0), method=AVERAGE, recip=(0x7555, HALF))
    whole, d1 = run_pdp(x, "fp16", **kw)
    parts, d2 = run_pdp(x, "fp16", split=(3, (4, 2, 4), (2, 1, 2)), **kw)
    assert np.array_equal(whole, parts)
    assert d1.read("PDP.D_INF_INPUT_NUM") == 1 and d2.read("PDP.D_INF_INPUT_NUM") == 2


# ---- illegal and unsupported ------------------------------------------------------------------------
def test_int16_and_fp16_need_nv_full() -> None:
    for dtype in ("int16", "fp16"):
        with pytest.raises(UnsupportedError, match=f"no {dtype} datapath"):
            dla = Dla(NV_SMALL)
            program_pdp(dla, dtype, channels=8, size=(2, 2))
            dla.write("PDP_RDMA.D_OP_ENABLE", 1)
            dla.write("PDP.D_OP_ENABLE", 1)


def test_data_format_3_and_rdma_mismatch_are_config_errors() -> None:
    x = cube(np.zeros((2, 2), dtype=np.int64))
    with pytest.raises(ConfigError, match=r"PDP\.D_DATA_FORMAT\.INPUT_DATA"):
        run_pdp(x, "int16", extra={"PDP.D_DATA_FORMAT": 3})
    with pytest.raises(ConfigError, match=r"PDP_RDMA\.D_DATA_FORMAT\.INPUT_DATA"):
        run_pdp(x, "int16", extra={"PDP_RDMA.D_DATA_FORMAT": 2})


# ---- SDP -> PDP on the fly -------------------------------------------------------------------------
def sdp_to_pdp(x: np.ndarray, dtype: str, sdp_out: str | None = None, **pool) -> tuple[np.ndarray, Dla]:
    """SDP pass-through (X1/X2/Y bypassed, identity CVT) from memory, on the fly into PDP."""
    dla = Dla(NV_FULL)
    c, h, w = x.shape
    src = layout(c, h, w)
    write_cube(dla.mem.dram, SRC, src, x)
    prec, out = FORMAT[dtype], FORMAT[sdp_out or dtype]
    for name, value in {
        "SDP_RDMA.D_DATA_CUBE_WIDTH": w - 1, "SDP_RDMA.D_DATA_CUBE_HEIGHT": h - 1,
        "SDP_RDMA.D_DATA_CUBE_CHANNEL": c - 1, "SDP_RDMA.D_SRC_BASE_ADDR_LOW": SRC,
        "SDP_RDMA.D_SRC_LINE_STRIDE": src.line_stride, "SDP_RDMA.D_SRC_SURFACE_STRIDE": src.surf_stride,
        "SDP_RDMA.D_BRDMA_CFG": 1, "SDP_RDMA.D_NRDMA_CFG": 1, "SDP_RDMA.D_ERDMA_CFG": 1,
        "SDP_RDMA.D_FEATURE_MODE_CFG": (prec << 2) | (prec << 4) | (out << 6), "SDP_RDMA.D_SRC_DMA_CFG": 1,
        "SDP.D_DATA_CUBE_WIDTH": w - 1, "SDP.D_DATA_CUBE_HEIGHT": h - 1, "SDP.D_DATA_CUBE_CHANNEL": c - 1,
        "SDP.D_FEATURE_MODE_CFG": 1 << 1,  # OUTPUT_DST = PDP, input from memory
        "SDP.D_DP_BS_CFG": 1, "SDP.D_DP_BN_CFG": 1, "SDP.D_DP_EW_CFG": 1,
        "SDP.D_DATA_FORMAT": prec | (out << 2), "SDP.D_CVT_SCALE": 1,
    }.items():
        dla.write(name, value)
    out_layout = program_pdp(dla, dtype, channels=c, size=(h, w), flying=True, **pool)
    dla.write("SDP_RDMA.D_OP_ENABLE", 1)
    dla.write("SDP.D_OP_ENABLE", 1)
    dla.write("PDP.D_OP_ENABLE", 1)
    assert dla.intr_status & (1 << 4), "PDP did not complete"
    return read_cube(dla.mem.dram, DST, out_layout, signed=dtype != "fp16"), dla


@pytest.mark.parametrize("dtype", ["int16", "fp16"])
@pytest.mark.parametrize("method", [AVERAGE, MAX])
def test_sdp_to_pdp_on_the_fly_equals_pooling_from_memory(dtype: str, method: int) -> None:
    rng = np.random.default_rng(method + 3)
    if dtype == "int16":
        x = rng.integers(-32768, 32768, size=(2 * ATOM, 4, 5))
    else:  # finite values (an SDP pass-through turns Inf into the largest finite value)
        x = (rng.standard_normal((2 * ATOM, 4, 5)) * 100).astype(np.float16).view(np.uint16).astype(np.int64)
        x[1, 1, 1] = 0x7E01  # NaN payloads survive the hand-over
    pool = dict(kernel=(3, 2), stride=(2, 1), pads=(1, 0, 1, 1), method=method, recip=(0x7555, HALF)
                if dtype == "fp16" else None)
    fly, dla = sdp_to_pdp(x, dtype, **pool)
    mem, _ = run_pdp(x, dtype, **pool)
    assert np.array_equal(fly, mem)
    assert dla.read("PDP.D_NAN_INPUT_NUM") == 0  # PDP_RDMA fetched nothing


def test_sdp_to_pdp_precisions_must_agree() -> None:
    x = np.zeros((ATOM, 2, 2), dtype=np.int64)
    with pytest.raises(ConfigError, match=r"PDP\.D_DATA_FORMAT\.INPUT_DATA.*OUT_PRECISION=1"):
        sdp_to_pdp(x, "fp16", sdp_out="int16")
