"""PDP engine: pooling rules on tiny cubes, split width, and the illegal configurations it rejects.

Expected values come from hand calculation or from plain per-pixel loops written here, independent of
the engine's vectorized code.
"""
from __future__ import annotations

import numpy as np
import pytest

from golden.config import NV_SMALL, HwConfig
from golden.dla import Dla
from golden.engines import load_engines
from golden.engines.pdp import AVERAGE, MAX, MIN, Pooling, pool
from golden.errors import ConfigError, UnsupportedError
from golden.layout import CubeLayout, read_cube, write_cube

SRC, DST = 0x80000000, 0x80100000
ATOM = NV_SMALL.atom_elements()
#: nv_small with the cmod's AVERAGE datapath (HwConfig.pdp_average): the rules NVDLA's CRCs were made with.
CMOD = NV_SMALL.derive(pdp_average="cmod")


def rha(v: int, s: int) -> int:
    """Round half away from zero, written independently of golden.arith."""
    mag = (abs(v) + (1 << (s - 1))) >> s
    return -mag if v < 0 else mag


def run_pdp(
    x: np.ndarray,
    *,
    channels: int | None = None,
    kernel: tuple[int, int] = (2, 2),
    stride: tuple[int, int] = (1, 1),
    pads: tuple[int, int, int, int] = (0, 0, 0, 0),  # left, top, right, bottom
    method: int = MAX,
    pad_values: tuple[int, ...] = (0,) * 7,
    recip: tuple[int, int] | None = None,
    out_size: tuple[int, int] | None = None,  # (height, width); default: the natural size
    split: tuple[int, tuple[int, int, int], tuple[int, int, int]] | None = None,  # n, in (f, m, l), out (f, m, l)
    dst_strides: tuple[int, int] | None = None,  # (line, surface); default: packed
    hw: HwConfig = NV_SMALL,
    extra: dict[str, int] | None = None,
) -> np.ndarray:
    """Program PDP/PDP_RDMA through CSB writes, run, and return the (padded C, H, W) output."""
    cpad, height, width = x.shape
    channels = channels if channels is not None else cpad
    kw, kh = kernel
    sw, sh = stride
    pl, pt, pr, pb = pads
    if out_size is None:
        out_size = ((pt + height + pb - kh) // sh + 1, (pl + width + pr - kw) // sw + 1)
    oh, ow = out_size
    if recip is None:
        recip = (0x10000 // kw, 0x10000 // kh)
    dla = Dla(hw)
    atom = hw.atom_elements()
    in_layout = CubeLayout(channels, height, width, width * atom, height * width * atom, atom)
    write_cube(dla.mem.dram, SRC, in_layout, x)
    line, surf = dst_strides if dst_strides else (ow * atom, oh * ow * atom)
    out_layout = CubeLayout(channels, oh, ow, line, surf, atom)

    regs: dict[str, int] = {}
    for unit in ("PDP", "PDP_RDMA"):
        regs[f"{unit}.D_DATA_CUBE_IN_WIDTH"] = width - 1
        regs[f"{unit}.D_DATA_CUBE_IN_HEIGHT"] = height - 1
        regs[f"{unit}.D_DATA_CUBE_IN_CHANNEL"] = channels - 1
    n_split = split[0] if split else 1
    dla.write("PDP_RDMA.D_SRC_BASE_ADDR_LOW", SRC)
    dla.write("PDP_RDMA.D_SRC_LINE_STRIDE", in_layout.line_stride)
    dla.write("PDP_RDMA.D_SRC_SURFACE_STRIDE", in_layout.surf_stride)
    dla.write("PDP_RDMA.D_SRC_RAM_CFG", SRC_RAM_TYPE=1)
    dla.write("PDP_RDMA.D_FLYING_MODE", FLYING_MODE=1)
    dla.write("PDP_RDMA.D_OPERATION_MODE_CFG", SPLIT_NUM=n_split - 1)
    dla.write("PDP_RDMA.D_POOLING_KERNEL_CFG", KERNEL_WIDTH=kw - 1, KERNEL_STRIDE_WIDTH=sw - 1)
    dla.write("PDP.D_DATA_CUBE_OUT_WIDTH", ow - 1)
    dla.write("PDP.D_DATA_CUBE_OUT_HEIGHT", oh - 1)
    dla.write("PDP.D_DATA_CUBE_OUT_CHANNEL", channels - 1)
    dla.write("PDP.D_OPERATION_MODE_CFG", POOLING_METHOD=method, FLYING_MODE=1, SPLIT_NUM=n_split - 1)
    dla.write(
        "PDP.D_POOLING_KERNEL_CFG",
        KERNEL_WIDTH=(kw - 1) & 0xF, KERNEL_HEIGHT=(kh - 1) & 0xF,
        KERNEL_STRIDE_WIDTH=sw - 1, KERNEL_STRIDE_HEIGHT=sh - 1,
    )
    dla.write("PDP.D_POOLING_PADDING_CFG", PAD_LEFT=pl, PAD_TOP=pt, PAD_RIGHT=pr, PAD_BOTTOM=pb)
    dla.write("PDP.D_RECIP_KERNEL_WIDTH", recip[0])
    dla.write("PDP.D_RECIP_KERNEL_HEIGHT", recip[1])
    for n, v in enumerate(pad_values, start=1):
        dla.write(f"PDP.D_POOLING_PADDING_VALUE_{n}_CFG", v)
    if split:
        _, (fi, mi, li), (fo, mo, lo) = split
        word_in = (fi - 1) | ((li - 1) << 10) | ((mi - 1) << 20)
        dla.write("PDP.D_PARTIAL_WIDTH_IN", word_in)
        dla.write("PDP_RDMA.D_PARTIAL_WIDTH_IN", word_in)
        dla.write("PDP.D_PARTIAL_WIDTH_OUT", (fo - 1) | ((lo - 1) << 10) | ((mo - 1) << 20))
    dla.write("PDP.D_DST_BASE_ADDR_LOW", DST)
    dla.write("PDP.D_DST_LINE_STRIDE", out_layout.line_stride)
    dla.write("PDP.D_DST_SURFACE_STRIDE", out_layout.surf_stride)
    dla.write("PDP.D_DST_RAM_CFG", DST_RAM_TYPE=1)
    regs.update(extra or {})
    for name, value in regs.items():
        dla.write(name, value)
    dla.write("PDP_RDMA.D_OP_ENABLE", 1)
    dla.write("PDP.D_OP_ENABLE", 1)
    assert dla.intr_status & (1 << 4), "PDP did not complete"
    return read_cube(dla.mem.dram, DST, out_layout)


def loop_pool(x, kernel, stride, pads, method, pad_per_tap=0, recip=None):
    """Per-pixel reference: max/min over real taps; average of real taps plus pad_per_tap for every
    padded tap (the kmd's consistent PAD_VALUE_nX = n * v programming), with the two-stage reciprocal."""
    kw, kh = kernel
    sw, sh = stride
    pl, pt, pr, pb = pads
    c, h, w = x.shape
    oh, ow = (pt + h + pb - kh) // sh + 1, (pl + w + pr - kw) // sw + 1
    rw, rh = recip if recip else (0x10000 // kw, 0x10000 // kh)
    out = np.zeros((c, oh, ow), dtype=np.int64)
    for ci in range(c):
        for oy in range(oh):
            for ox in range(ow):
                vals, npad = [], 0
                for ky in range(kh):
                    for kx in range(kw):
                        yy, xx = oy * sh - pt + ky, ox * sw - pl + kx
                        if 0 <= yy < h and 0 <= xx < w:
                            vals.append(int(x[ci, yy, xx]))
                        else:
                            npad += 1
                if method == MAX:
                    out[ci, oy, ox] = max(vals)
                elif method == MIN:
                    out[ci, oy, ox] = min(vals)
                else:
                    t = sum(vals) + npad * pad_per_tap
                    t = (t + 0x8000) % 0x10000 - 0x8000
                    v = rha(rha(t * rw, 16) * rh, 16)
                    out[ci, oy, ox] = (v + 128) % 256 - 128
    return out


def random_cube(rng, channels, height, width, lo=-128, hi=128):
    return rng.integers(lo, hi, size=(-(-channels // ATOM) * ATOM, height, width), dtype=np.int64)


# ---- pooling rules -----------------------------------------------------------------------------
def test_max_min_ignore_padding():
    # All data negative: a padding value of 0 taking part would win every max.
    x = -np.arange(1, 1 + ATOM * 9, dtype=np.int64).reshape(ATOM, 3, 3)
    for method in (MAX, MIN):
        got = run_pdp(x, kernel=(3, 3), pads=(1, 1, 1, 1), method=method, pad_values=(0x7F,) * 7)
        assert np.array_equal(got, loop_pool(x, (3, 3), (1, 1), (1, 1, 1, 1), method))
    got = run_pdp(x, kernel=(3, 3), pads=(1, 1, 1, 1), method=MAX)
    assert got[0, 0, 0] == -1  # corner window: x[0, 0:2, 0:2] = -1, -2, -4, -5


def test_average_by_hand():
    # One channel of interest: 2x2 input, 2x2 kernel, pad right/bottom 1 -> 2x2 output.
    x = np.zeros((ATOM, 2, 2), dtype=np.int64)
    x[0] = [[10, 20], [30, 41]]
    pv = 3  # PAD_VALUE_nX = n * 3
    got = run_pdp(x, pads=(0, 0, 1, 1), method=AVERAGE, pad_values=tuple(n * pv for n in range(1, 8)))
    # Two rounding stages of 1/2 each, ties away from zero:
    # (0,0): 10+20+30+41 = 101 -> 50.5 -> 51 -> 25.5 -> 26
    # (0,1): 20+41 + 2 rows * 1X(3) = 67 -> 33.5 -> 34 -> 17
    # (1,0): 30+41 + 1 padded row * 1X * kw(2) = 77 -> 38.5 -> 39 -> 19.5 -> 20
    # (1,1): 41 + 1X (row 1) + 1X * 2 (row 2) = 50 -> 25 -> 12.5 -> 13
    assert got[0].tolist() == [[26, 17], [20, 13]]
    # All-zero lanes see only the padding: 0, 6 -> 3 -> 1.5 -> 2, 6 -> 2, 9 -> 4.5 -> 5 -> 2.5 -> 3.
    assert all(lane.tolist() == [[0, 2], [2, 3]] for lane in got[1:])


def test_average_matches_loop_with_consistent_pad_values():
    rng = np.random.default_rng(1)
    x = random_cube(rng, 11, 7, 9)
    for kernel, stride, pads, pv in [
        ((3, 3), (1, 1), (1, 1, 1, 1), -5),
        ((8, 3), (2, 2), (6, 2, 3, 0), 0x55),  # right pad 3: all used (an unused one is refused)
        ((2, 5), (3, 1), (1, 4, 1, 3), 17),
        ((8, 8), (1, 1), (7, 7, 7, 7), -128),  # every window mixes real and padded taps
    ]:
        want = loop_pool(x, kernel, stride, pads, AVERAGE, pad_per_tap=pv)
        got = run_pdp(x, channels=11, kernel=kernel, stride=stride, pads=pads, method=AVERAGE,
                      pad_values=tuple((n * pv) & 0x7FFFF for n in range(1, 8)))
        assert np.array_equal(got, want), (kernel, stride, pads)


def test_average_cmod_pad_rule_for_inconsistent_pad_values():
    """Padded columns add PAD_VALUE_{n}X once per real row; m padded rows add PAD_VALUE_{m}X * kw."""
    x = np.zeros((ATOM, 1, 1), dtype=np.int64)
    x[0, 0, 0] = 8
    pads = (1, 1, 1, 1)  # 3x3 window around one pixel: 2 padded columns in 1 real row, 2 padded rows
    p1, p2 = 1, 100
    got = run_pdp(x, kernel=(3, 3), pads=pads, method=AVERAGE, pad_values=(p1, p2, 0, 0, 0, 0, 0),
                  recip=(0x10000, 0x10000), hw=CMOD)  # no scaling: the raw sum is stored
    assert got[0, 0, 0] == ((8 + p2 + 3 * p2) + 128) % 256 - 128  # 8 + 2X (one row) + 2X * kw


def test_average_accumulator_wraps_at_16_bits():
    # 1X = 0x7F00 has bit 7 clear, so the cmod keeps all of it: 32512. Two real rows, each with one
    # padded column: t = 2*127 + 2*32512 = 65278, which the int16 line buffer holds as -258.
    x = np.zeros((ATOM, 2, 1), dtype=np.int64)
    x[0] = 127
    got = run_pdp(x, kernel=(2, 2), pads=(1, 0, 0, 0), method=AVERAGE, pad_values=(0x7F00,) + (0,) * 6,
                  recip=(0x4000, 0x10000), hw=CMOD)
    # -258 / 4 = -64.5 -> -65 (a 32-bit accumulator would give 16319.5 -> 16320, low byte -64)
    assert got[0, 0, 0] == -65


def test_average_stores_the_low_byte():
    x = np.zeros((ATOM, 1, 1), dtype=np.int64)
    x[0] = 100
    got = run_pdp(x, kernel=(1, 1), method=AVERAGE, recip=(0x18000, 0x10000), hw=CMOD)  # 100 * 1.5 = 150
    assert got[0, 0, 0] == 150 - 256


@pytest.mark.parametrize("field_value,want", [
    ((1, 0x80), -128), ((1, 0x7F), 127), ((2, 0x100), -256), ((3, 0x200), -512), ((7, 0x400), -1024),
    ((1, 0x100), 256),  # the cmod ORs the whole field after extending bit 7 (here 0): bit 8 survives
    ((1, 0x4000), 16384),  # ... up to the int16 line buffer: bit 14 is a magnitude bit, not its sign
])
def test_pad_value_sign_extension(field_value, want):
    n, raw = field_value
    dla = Dla(NV_SMALL)
    dla.write(f"PDP.D_POOLING_PADDING_VALUE_{n}_CFG", raw)
    dla.write("PDP.D_POOLING_KERNEL_CFG", KERNEL_WIDTH=7, KERNEL_HEIGHT=7)
    cfg = Pooling.from_view(dla.units["PDP"].view(0))
    assert cfg.pad_values[n - 1] == want


def test_padding_lanes_are_pooled_like_other_lanes():
    rng = np.random.default_rng(2)
    x = random_cube(rng, 3, 4, 4)  # lanes 3..7 hold data too; the RDMA reads whole atoms
    got = run_pdp(x, channels=3, kernel=(2, 2), stride=(2, 2), method=MAX)
    assert np.array_equal(got, loop_pool(x, (2, 2), (2, 2), (0, 0, 0, 0), MAX))
    assert got[3:].any()


def test_stride_larger_than_kernel():
    rng = np.random.default_rng(3)
    x = random_cube(rng, 8, 9, 9)
    got = run_pdp(x, kernel=(2, 2), stride=(4, 4), pads=(1, 1, 1, 1), method=MIN)
    assert np.array_equal(got, loop_pool(x, (2, 2), (4, 4), (1, 1, 1, 1), MIN))


# ---- split width ---------------------------------------------------------------------------------
@pytest.mark.parametrize("method", [MAX, AVERAGE])
def test_split_width_equals_unsplit(method):
    rng = np.random.default_rng(4)
    x = random_cube(rng, 13, 5, 16)
    common = dict(channels=13, kernel=(3, 2), stride=(2, 1), pads=(1, 0, 1, 1), method=method,
                  pad_values=tuple(n * 7 for n in range(1, 8)))
    whole = run_pdp(x, **common)
    assert whole.shape[2] == 8
    # first: 4 in -> (1+4-3)//2+1 = 2 out; mid: 6 in (+1 overlap) -> 3; last: 6 in (+1) with pad 1 -> 3.
    parts = run_pdp(x, split=(3, (4, 6, 6), (2, 3, 3)), **common)
    assert np.array_equal(parts, whole)
    two = run_pdp(x, split=(2, (8, 1, 8), (4, 1, 4)), **common)
    assert np.array_equal(two, whole)


def test_split_partial_widths_must_add_up():
    x = np.zeros((ATOM, 2, 16), dtype=np.int64)
    with pytest.raises(ConfigError, match="PDP.D_PARTIAL_WIDTH_IN.PARTIAL_WIDTH_IN_FIRST"):
        run_pdp(x, kernel=(3, 2), stride=(2, 1), pads=(1, 0, 1, 0), split=(3, (4, 6, 5), (2, 3, 3)))


def test_split_out_width_must_match_its_input():
    x = np.zeros((ATOM, 2, 16), dtype=np.int64)
    with pytest.raises(ConfigError, match="PDP.D_PARTIAL_WIDTH_OUT.PARTIAL_WIDTH_OUT_MID"):
        run_pdp(x, kernel=(3, 2), stride=(2, 1), pads=(1, 0, 1, 0), split=(3, (4, 6, 6), (2, 2, 4)))


def test_split_misaligned_start_is_rejected():
    x = np.zeros((ATOM, 2, 16), dtype=np.int64)
    # A first split of 5 columns pools to (1+5-3)//2+1 = 2 outputs; the second split then re-reads from
    # column 5-(3-2) = 4, but output 2's window starts at column 2*2-1 = 3.
    with pytest.raises(ConfigError, match="PDP.D_PARTIAL_WIDTH_IN.PARTIAL_WIDTH_IN_"):
        run_pdp(x, kernel=(3, 2), stride=(2, 1), pads=(1, 0, 1, 0), split=(2, (5, 1, 11), (2, 1, 6)))


# ---- illegal configurations ----------------------------------------------------------------------
def test_kernel_larger_than_8_is_rejected():
    x = np.zeros((ATOM, 12, 12), dtype=np.int64)
    with pytest.raises(ConfigError, match=r"PDP\.D_POOLING_KERNEL_CFG\.KERNEL_WIDTH"):
        run_pdp(x, kernel=(9, 2), out_size=(11, 4))
    with pytest.raises(ConfigError, match=r"PDP\.D_POOLING_KERNEL_CFG\.KERNEL_HEIGHT"):
        run_pdp(x, kernel=(2, 16), out_size=(1, 11))


def test_pad_not_smaller_than_kernel_is_rejected():
    x = np.zeros((ATOM, 4, 4), dtype=np.int64)
    with pytest.raises(ConfigError, match=r"PDP\.D_POOLING_PADDING_CFG\.PAD_LEFT"):
        run_pdp(x, kernel=(2, 2), pads=(2, 0, 0, 0))


def test_output_size_must_match():
    x = np.zeros((ATOM, 4, 4), dtype=np.int64)
    with pytest.raises(ConfigError, match=r"PDP\.D_DATA_CUBE_OUT_WIDTH\.CUBE_OUT_WIDTH"):
        run_pdp(x, kernel=(2, 2), out_size=(3, 2))
    with pytest.raises(ConfigError, match=r"PDP\.D_DATA_CUBE_OUT_HEIGHT\.CUBE_OUT_HEIGHT"):
        run_pdp(x, kernel=(2, 2), out_size=(4, 3))
    with pytest.raises(ConfigError, match=r"PDP\.D_DATA_CUBE_OUT_CHANNEL"):
        run_pdp(x, extra={"PDP.D_DATA_CUBE_OUT_CHANNEL": 3})


def test_strides_too_small_for_the_cube():
    x = np.zeros((2 * ATOM, 4, 4), dtype=np.int64)
    with pytest.raises(ConfigError, match=r"PDP_RDMA\.D_SRC_LINE_STRIDE\.SRC_LINE_STRIDE"):
        run_pdp(x, extra={"PDP_RDMA.D_SRC_LINE_STRIDE": 3 * ATOM})
    with pytest.raises(ConfigError, match=r"PDP\.D_DST_SURFACE_STRIDE\.DST_SURFACE_STRIDE"):
        run_pdp(x, extra={"PDP.D_DST_SURFACE_STRIDE": 0})
    with pytest.raises(ConfigError, match=r"PDP\.D_DST_LINE_STRIDE\.DST_LINE_STRIDE"):
        run_pdp(x, extra={"PDP.D_DST_LINE_STRIDE": 0})
    # one line apart: the second surface lands on the first one's second line (no quick bound accepts it)
    with pytest.raises(ConfigError, match=r"PDP\.D_DST_SURFACE_STRIDE\.DST_SURFACE_STRIDE"):
        run_pdp(x, extra={"PDP.D_DST_SURFACE_STRIDE": 4 * ATOM})


def test_surfaces_interleaved_between_lines_are_legal():
    rng = np.random.default_rng(5)
    x = random_cube(rng, 16, 3, 2)
    # Output 2x1: line stride 2 atoms, surface stride 1 atom -> surfaces interleave without overlap.
    got = run_pdp(x, kernel=(2, 2), dst_strides=(2 * ATOM, ATOM))
    assert np.array_equal(got, loop_pool(x, (2, 2), (1, 1), (0, 0, 0, 0), MAX))


def test_rdma_must_match_the_core():
    x = np.zeros((ATOM, 4, 4), dtype=np.int64)
    with pytest.raises(ConfigError, match=r"PDP_RDMA\.D_DATA_CUBE_IN_HEIGHT\.CUBE_IN_HEIGHT"):
        run_pdp(x, extra={"PDP_RDMA.D_DATA_CUBE_IN_HEIGHT": 2})


def test_int16_and_fp16_are_unsupported():
    x = np.zeros((ATOM, 4, 4), dtype=np.int64)
    for fmt, name in ((1, "int16"), (2, "fp16")):
        with pytest.raises(UnsupportedError, match=name):
            run_pdp(x, extra={"PDP.D_DATA_FORMAT": fmt, "PDP_RDMA.D_DATA_FORMAT": fmt})


def test_cv_sram_needs_a_secondary_memory_interface():
    x = np.zeros((ATOM, 4, 4), dtype=np.int64)
    with pytest.raises(UnsupportedError, match="SRC_RAM_TYPE"):
        run_pdp(x, extra={"PDP_RDMA.D_SRC_RAM_CFG": 0})


# ---- on the fly ----------------------------------------------------------------------------------
def test_on_flying_takes_sdp_and_needs_no_rdma():
    eng = load_engines()["PDP"]
    dla = Dla(NV_SMALL)
    views = {"PDP": dla.units["PDP"].view(0), "PDP_RDMA": dla.units["PDP_RDMA"].view(0)}
    assert eng.source(views) == "SDP" and not eng.rdma_needed(views)  # FLYING_MODE resets to ON_FLYING
    dla.write("PDP.D_OPERATION_MODE_CFG", FLYING_MODE=1)
    views = {"PDP": dla.units["PDP"].view(0), "PDP_RDMA": dla.units["PDP_RDMA"].view(0)}
    assert eng.source(views) is None and eng.rdma_needed(views)


def test_pool_kernel_on_32_lane_atoms():
    # nv_large-style atoms (32 lanes) change nothing in the arithmetic.
    rng = np.random.default_rng(6)
    x = rng.integers(-128, 128, size=(32, 6, 7), dtype=np.int64)
    dla = Dla(NV_SMALL)
    dla.write("PDP.D_POOLING_KERNEL_CFG", KERNEL_WIDTH=2, KERNEL_HEIGHT=1, KERNEL_STRIDE_WIDTH=1)
    dla.write("PDP.D_POOLING_PADDING_CFG", PAD_LEFT=1, PAD_TOP=1)
    dla.write("PDP.D_OPERATION_MODE_CFG", POOLING_METHOD=MIN)
    cfg = Pooling.from_view(dla.units["PDP"].view(0))
    got = pool(x, cfg, (1 + 6 - 2) // 1 + 1, (1 + 7 - 3) // 2 + 1)
    assert np.array_equal(got, loop_pool(x, (3, 2), (2, 1), (1, 1, 0, 0), MIN))
