"""fp16 direct convolution (golden.engines.conv_fp16): the nvdlav1 cmod's integer CMAC and 48-bit CACC, checked
on hand-derived values, on the properties the cmod's own debug checkers state, and through a register program.

Hand values use fp16 bit patterns: 0x3C00 = 1.0, 0x4000 = 2.0, 0x3E00 = 1.5, 0x7000 = 2^13, 0x0800 = 2^-13,
0x0C01 = 2^-12 * (1 + 2^-10). A CMAC word (exponent e, mantissa m) is worth m * 2^(e - 50), an FP48 accumulator
(e, m) m * 2^(e - 101).
"""
from __future__ import annotations

import numpy as np
import pytest

from golden.config import get_config
from golden.dla import Dla
from golden.dma import CONV_UNITS
from golden.engines import OpContext
from golden.engines import conv_fp16 as F
from golden.engines.conv_datapath import ConvGeometry, cbuf_geometry, entries_per_slice
from golden.errors import ConfigError, UnsupportedError
from golden.regs import UNITS
from regressions.lib.programs.conv_wide import WideConvLayer, program_conv_wide, unpack16

NV_FULL = get_config("nv_full")


def bits16(values) -> np.ndarray:
    return np.asarray(values, dtype=np.float16).view(np.uint16).astype(np.int64)


def f32(bits) -> np.ndarray:
    return np.asarray(bits, dtype=np.uint32).view(np.float32)


def lanes(pairs: dict[int, int]) -> np.ndarray:
    out = np.zeros((1, F.SLICE), dtype=np.int64)
    for lane, value in pairs.items():
        out[0, lane] = value
    return out


def conv(x: np.ndarray, w: np.ndarray, pad: tuple[int, int] = (0, 0), pad_value: int = 0) -> np.ndarray:
    """FP32 values of a stride-1 convolution of fp16 bit patterns."""
    c, h, wd = x.shape
    k, _, r, s = w.shape
    g = ConvGeometry(channels=c, height=h, width=wd, kernels=k, kernel_height=r, kernel_width=s,
                     out_height=h + 2 * pad[0] - r + 1, out_width=wd + 2 * pad[1] - s + 1, pad_top=pad[0],
                     pad_left=pad[1], pad_value=pad_value, dtype="fp16")
    return f32(F.direct_conv_fp16(x, w, g))


# ---- CMAC -------------------------------------------------------------------------------------------------
def test_booth_product_is_exact_unshifted_and_within_one_when_aligned() -> None:
    """The cmod's own checker: an aligned product is within 1 of floor(+-w*d / 2^shift), exact at shift 0."""
    rng = np.random.default_rng(0)
    n = 50_000
    w = rng.integers(0, 0x800, n).astype(np.uint32) << rng.integers(0, 4, n).astype(np.uint32)
    d = rng.integers(0, 0x800, n).astype(np.uint32) << rng.integers(0, 4, n).astype(np.uint32)
    neg = rng.integers(0, 2, n).astype(np.uint32)
    shift = (rng.integers(0, 10, n) * 4).astype(np.uint32)
    mag, negd = F.booth_digits(w)
    got = F.booth_products(mag, (negd ^ neg) & (mag != 0), d, shift).astype(np.int64)
    exact = np.where(neg == 1, -1, 1) * w.astype(np.int64) * d.astype(np.int64)
    floor = np.where(shift >= 32, 0, exact >> np.minimum(shift, 40).astype(np.int64))
    assert np.array_equal(got[shift == 0], exact[shift == 0])
    assert np.abs(got - floor).max() == 1  # the separate truncation of sum and carry shows up
    assert np.all(got[shift >= 32] == 0)


def test_cmac_one_product_and_its_exponent_word() -> None:
    # 1.0 * 1.0: exponent 15 = 4*3 + 3, mantissa 0x400 << 3 each; block exponent 6 -> word (24, 2^26) = 1.0
    e, m = F.cmac_slice(lanes({0: 0x3C00}), lanes({0: 0x3C00}))
    assert (int(e[0, 0]), int(m[0, 0])) == (24, 1 << 26)
    # a lane with only one side non-zero does not take part
    e, m = F.cmac_slice(lanes({0: 0x3C00, 5: 0x7BFF}), lanes({0: 0xBC00}))
    assert (int(e[0, 0]), int(m[0, 0])) == (24, -(1 << 26))


def test_minus_zero_does_not_take_part_in_the_block_exponent() -> None:
    """A -0 data lane beside a huge weight is masked: it would otherwise raise the block exponent to 12
    and shift the 1.0 product out of the mantissa."""
    w, d = lanes({0: 0x3C00, 1: 0x7BFF}), lanes({0: 0x3C00, 1: 0x8000})
    e, m = F.cmac_slice(w, d)
    assert (int(e[0, 0]), int(m[0, 0])) == (24, 1 << 26)


def test_alignment_truncation_makes_the_hardware_differ_from_ieee() -> None:
    """2^13 * 2^-13 (block 7) + 1.5 * 2^-12 (1 + 2^-10) (block 3): the second product, 0x3000 * 0x2008 =
    0x6018000, is aligned right by 16 and truncated to 0x601 (exactly 1537.5), so the sum is
    1 + 1537 * 2^-22 = 0x3F800C02, while the exact sum 1 + 1537.5 * 2^-22 is the FP32 0x3F800C03."""
    w, d = lanes({0: 0x0800, 1: 0x0C01}), lanes({0: 0x7000, 1: 0x3E00})
    e, m = F.cmac_slice(w, d)
    assert (int(e[0, 0]), int(m[0, 0])) == (28, (1 << 22) + 1537)
    x = np.zeros((2, 1, 1), dtype=np.int64)
    x[:, 0, 0] = [0x7000, 0x3E00]
    wt = np.zeros((1, 2, 1, 1), dtype=np.int64)
    wt[0, :, 0, 0] = [0x0800, 0x0C01]
    got = conv(x, wt)
    assert got.view(np.uint32)[0, 0, 0] == 0x3F800C02
    exact = np.float32(np.float64(2.0 ** 13) * 2.0 ** -13 + 1.5 * 2.0 ** -12 * (1 + 2.0 ** -10))
    assert exact.view(np.uint32) == 0x3F800C03 and got[0, 0, 0] != exact


def test_nan_weight_wins_over_nan_data_and_keeps_its_payload() -> None:
    w, d = lanes({3: 0x3C00, 9: 0xFC05}), lanes({2: 0x7E00, 3: 0x3C00})
    e, m = F.cmac_slice(w, d)
    assert int(e[0, 0]) == 63 and int(m[0, 0]) == -(1 << 38) + (1 << 37) + (5 << 27)
    x = np.zeros((64, 1, 1), dtype=np.int64)
    x[[2, 3], 0, 0] = [0x7E00, 0x3C00]
    wt = np.zeros((2, 64, 1, 1), dtype=np.int64)
    wt[0, [3, 9], 0, 0] = [0x3C00, 0xFC05]
    wt[1, 3, 0, 0] = 0x3C00
    out = conv(x, wt).view(np.uint32)[:, 0, 0]
    assert out[0] == 0xFF800005  # the weight's NaN: sign and fraction kept
    assert out[1] == 0x7F800200  # kernel 1 meets only the data NaN 0x7E00


def test_infinity_is_an_ordinary_exponent() -> None:
    assert conv(bits16([[[np.inf]]]), bits16([[[[2.0]]]]))[0, 0, 0] == 131072.0


# ---- CACC -------------------------------------------------------------------------------------------------
def _add(acc: tuple[int, int], mac: tuple[int, int]) -> tuple[int, int]:
    e, m = F.cacc_add(*(np.array([v]) for v in (*acc, *mac)))
    return int(e[0]), int(m[0])


def test_cacc_rounds_positive_halves_up_and_negative_halves_down() -> None:
    """Adding 0.5 (CMAC word (48, 2)) to 2^38 at an FP48 exponent of 101 (LSB 1): the half is the guard bit.
    A positive sum rounds up; a negative one needs guard *and* sticky, so -3*2^37 + 0.5 stays."""
    assert _add((101, 1 << 38), (48, 2)) == (101, (1 << 38) + 1)
    assert _add((101, -3 << 37), (48, 2)) == (101, -3 << 37)
    assert _add((101, 1 << 38), (48, -2)) == (100, (1 << 39) - 1)  # exact: 2^38 - 0.5, renormalized
    assert _add((0, 0), (48, 2)) == (62, 1 << 38)  # the first add normalizes exactly


def test_cacc_keeps_nan_and_ignores_zero_words() -> None:
    assert _add((255, (1 << 35) | 0x1FFF), (20, 12345)) == (255, 1 << 35)  # NaN keeps mantissa bits 39..29
    assert _add((90, 5 << 36), (63, (1 << 37) | (3 << 27))) == (255, -(1 << 39) + (3 << 29))
    assert _add((90, 5 << 36), (63, 0)) == (90, 5 << 36)  # a zero mantissa leaves the accumulator alone


def test_fp32_output_rounds_ties_away_from_zero() -> None:
    half = (1 << 38) + (1 << 14)  # one and a half FP32 ulps at bit 15
    out = F.fp48_to_fp32(np.array([101, 101, 101]), np.array([half, -half, half - 1]))
    assert out.tolist() == [0x52800001, 0xD2800001, 0x52800000]  # IEEE nearest-even would give ...000 twice
    assert F.fp48_to_fp32(np.array([0]), np.array([0])).tolist() == [0]


def test_fp32_output_rounding_that_carries_into_the_exponent() -> None:
    """A 40-bit mantissa of all ones rounds up to the next power of two: the exponent goes up by one."""
    top = (1 << 39) - 1  # value top * 2^(e - 101), just below 2^(e - 62)
    out = F.fp48_to_fp32(np.array([101, 101, 90]), np.array([top, -top, top])).view(np.float32)
    assert out.tolist() == [2.0 ** 39, -(2.0 ** 39), 2.0 ** 28]


# ---- the engine -------------------------------------------------------------------------------------------
def test_two_slices_and_taps_accumulate_in_fp32() -> None:
    x = bits16(np.full((70, 2, 2), 1.5))
    w = bits16(np.full((3, 70, 2, 1), -2.25))
    assert np.all(conv(x, w) == -1.5 * 2.25 * 140)
    assert conv(x, w, pad=(1, 0), pad_value=0x3C00)[0, 0, 0] == 70 * -2.25 * (1.0 + 1.5)  # pad word 1.0


def _program(layer: WideConvLayer, **patch: int) -> Dla:
    dla = Dla(NV_FULL)
    program = program_conv_wide(NV_FULL, layer)
    for addr, data in program.memory:
        dla.mem.write(addr, data)
    for name, value in program.writes:
        unit_reg = name.removeprefix("NVDLA_").removesuffix("_0")
        dla.write_reg(dla.map.resolve(name)[0], patch.get(unit_reg, value))
    return dla


def _engine(layer: WideConvLayer) -> tuple[np.ndarray, dict]:
    """The CONV engine alone on the layer's program: its FP32 cube and the status it reports."""
    from golden.engines.conv import run

    dla = Dla(NV_FULL)
    program = program_conv_wide(NV_FULL, layer)
    for addr, data in program.memory:
        dla.mem.write(addr, data)
    views = {}
    for name, value in program.writes:
        if "OP_ENABLE" not in name:
            dla.write_reg(dla.map.resolve(name)[0], value)
    for unit in CONV_UNITS:
        views[unit] = dla.units[unit].view(0)
    ctx = OpContext(hw=NV_FULL, mem=dla.mem, regs=views)
    return run(ctx), ctx.status


def test_engine_hands_sdp_fp32_with_zero_padding_lanes() -> None:
    values = 1 + np.arange(20, dtype=np.float64).reshape(5, 2, 2) / 32  # one exponent: no alignment shifts
    out, status = _engine(WideConvLayer(x=bits16(values), w=bits16(np.ones((3, 5, 1, 1)))))
    assert out.dtype == np.float32 and out.shape == (16, 2, 2)
    np.testing.assert_array_equal(out[:3], np.broadcast_to(values.sum(0), (3, 2, 2)))
    assert np.all(out[3:] == 0) and not np.signbit(out[3:]).any()
    assert status[("CACC", "D_OUT_SATURATION")] == 0


def test_nan_flush_and_counters() -> None:
    x = bits16(np.ones((20, 1, 1)))
    x[1, 0, 0], x[2, 0, 0] = 0x7E01, 0xFC00  # a NaN and -Inf (the padding lanes 20..31 read 0)
    w = bits16(np.ones((1, 20, 1, 1)))
    out, status = _engine(WideConvLayer(x=x, w=w))
    assert np.isnan(out[0, 0, 0])
    assert status[("CDMA", "D_NAN_INPUT_DATA_NUM")] == 1 and status[("CDMA", "D_INF_INPUT_DATA_NUM")] == 1
    assert status[("CDMA", "D_NAN_INPUT_WEIGHT_NUM")] == 0
    out, _ = _engine(WideConvLayer(x=x, w=w, nan_to_zero=True))
    # NaN flushed to +0, -Inf is -65536 to the CMAC: block exponent 10, so each of the 18 products 1.0 * 1.0
    # (block 6) is aligned right by 16 and the Booth tree's separate truncation makes it 1023/1024; the sum
    # -65518.017578125 is an FP32 tie, rounded away from zero (not the exact -65518.0).
    assert out[0, 0, 0] == np.float32(-65518.01953125)


def test_int16_input_converted_to_fp16_rounds_to_nearest_even() -> None:
    ints = np.array([3, 2049, 2051, -2051, 32767])[:, None, None]
    w = np.zeros((5, 5, 1, 1), dtype=np.int64)
    w[np.arange(5), np.arange(5)] = 0x3C00  # kernel k picks channel k
    layer = WideConvLayer(x=ints, w=w, in_precision="int16", cvt=(0, 1, 0))
    out, status = _engine(layer)
    assert out[:5, 0, 0].tolist() == [3.0, 2048.0, 2052.0, -2052.0, 32768.0]
    assert status[("CDMA", "D_NAN_INPUT_DATA_NUM")] == 0
    layer = WideConvLayer(x=ints, w=w, in_precision="int16", cvt=(-2, 3, 1))  # (x + 2) * 3 / 2, then fp16
    assert _engine(layer)[0][:5, 0, 0].tolist() == [8.0, 3076.0, 3080.0, -3074.0, 49152.0]


def test_sdp_writes_fp16_of_the_fp32_results() -> None:
    x = bits16(np.full((1, 1, 3), 3.0))
    w = bits16(np.full((2, 1, 1, 1), 0.5))
    dla = _program(WideConvLayer(x=x, w=w))
    raw = dla.mem.read(0x8400_0000, 3 * 32).tobytes()
    got = unpack16(raw, 2, 1, 3, 16)
    assert got[:2].tolist() == [[[0x3E00] * 3]] * 2 and np.all(got[2:] == 0)


# ---- legality ---------------------------------------------------------------------------------------------
def test_cvt_with_fp16_input_is_a_cmod_fail() -> None:
    layer = WideConvLayer(x=bits16([[[1.0]]]), w=bits16([[[[1.0]]]]), cvt=(0, 1, 0))
    with pytest.raises(ConfigError, match=r"CDMA\.D_CVT_CFG\.CVT_EN"):
        _program(layer)


def test_precision_change_needs_cvt() -> None:
    layer = WideConvLayer(x=np.array([[[1]]]), w=bits16([[[[1.0]]]]), in_precision="int16")
    with pytest.raises(ConfigError, match=r"CDMA\.D_MISC_CFG\.IN_PRECISION"):
        _program(layer)


def test_int8_to_fp16_conversion_is_unsupported() -> None:
    layer = WideConvLayer(x=bits16([[[1.0]]]), w=bits16([[[[1.0]]]]), cvt=(0, 1, 0))
    with pytest.raises(UnsupportedError, match="int8"):
        _program(layer, **{"CDMA.D_MISC_CFG": UNITS["CDMA"].register("D_MISC_CFG").encode(IN_PRECISION="INT8",
                                                                                          PROC_PRECISION="FP16")})


def test_int16_converted_to_fp16_needs_every_later_unit_in_fp16() -> None:
    """CDMA's CVT turns int16 input into fp16, so CSC, both CMACs and CACC must process fp16; a program whose
    later units all say INT16 (only CDMA's PROC_PRECISION says FP16) mixes precisions and is refused, naming
    the first unit that disagrees with CDMA's output (CSC's IN_PRECISION)."""
    layer = WideConvLayer(x=np.array([[[1]]]), w=bits16([[[[1.0]]]]), in_precision="int16", cvt=(0, 1, 0))
    int16 = {f"{unit}.D_MISC_CFG": UNITS[unit].register("D_MISC_CFG").encode(PROC_PRECISION="INT16")
             for unit in ("CMAC_A", "CMAC_B", "CACC")}
    int16["CSC.D_MISC_CFG"] = UNITS["CSC"].register("D_MISC_CFG").encode(IN_PRECISION="INT16", PROC_PRECISION="INT16")
    with pytest.raises(UnsupportedError, match="mixed precisions") as info:
        _program(layer, **int16)
    assert info.value.unit == "CSC" and "IN_PRECISION=int16" in str(info.value)


def test_fp16_needs_an_fp16_datapath() -> None:
    program = program_conv_wide(NV_FULL, WideConvLayer(x=bits16([[[1.0]]]), w=bits16([[[[1.0]]]])))
    with pytest.raises(UnsupportedError, match="no fp16 datapath") as info:
        program.run(Dla(get_config("nv_large")))  # same register names, int8-only hardware
    assert info.value.unit == "CDMA"


# ---- CBUF geometry ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("bpe", [1, 2])
def test_nv_full_counts_128_byte_entries_for_every_precision(bpe: int) -> None:
    assert cbuf_geometry(NV_FULL, bpe) == (128, 256)
    # 100 int8 channels = 4 atoms of 32 B = one entry per pixel; 100 fp16 channels = 7 atoms
    assert entries_per_slice(NV_FULL, 100, 9, bpe) == (9 if bpe == 1 else 9 + 9)


@pytest.mark.parametrize("name, geometry", [("nv_small", (8, 512)), ("nv_small_256", (32, 128)),
                                            ("nv_large", (64, 512))])
def test_nv_small_branch_entries_are_the_bank_width(name: str, geometry: tuple[int, int]) -> None:
    assert cbuf_geometry(get_config(name)) == geometry
