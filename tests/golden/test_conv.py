"""CONV engine (CDMA/CSC/CMAC/CACC direct convolution) against plain-loop references written here."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from golden.config import HwConfig, get_config
from golden.dma import CONV_UNITS
from golden.engines import OpContext
from golden.engines.conv import run
from golden.engines.conv_datapath import (
    ConvGeometry,
    cacc_deliver,
    cbuf_geometry,
    cdma_convert,
    direct_conv,
    entries_per_slice,
    pack_weights,
    unpack_weights,
)
from golden.errors import ConfigError, UnsupportedError
from golden.layout import CubeLayout, write_cube
from golden.memory import Memory
from golden.regs import UNITS, RegView, register_map

FEATURE_ADDR = 0x8000_0000
WEIGHT_ADDR = 0x8010_0000


# ---- independent references ----------------------------------------------------------------------------
def pack_loop(w: np.ndarray, kernel_group: int, channel_group: int) -> bytes:
    """NVDLA direct-conv weight order, written as the nested loops of NVDLA_NOTES §3."""
    K, C, R, S = w.shape
    out = bytearray()
    for kg in range(0, K, kernel_group):
        for cg in range(0, C, channel_group):
            for r in range(R):
                for s in range(S):
                    for k in range(kg, min(kg + kernel_group, K)):
                        for c in range(cg, min(cg + channel_group, C)):
                            out.append(int(w[k, c, r, s]) & 0xFF)
    return bytes(out)


def rha_int(v: int, shift: int) -> int:
    """v / 2**shift rounded half away from zero, on Python ints."""
    if shift == 0:
        return v
    mag = (abs(v) + (1 << (shift - 1))) >> shift
    return -mag if v < 0 else mag


def clamp(v: int, bits: int) -> int:
    lim = 1 << (bits - 1)
    return max(-lim, min(lim - 1, v))


def conv_loop(x: np.ndarray, w: np.ndarray, g: ConvGeometry) -> np.ndarray:
    """acc[k, oy, ox] by one Python loop per product (out-of-cube taps read the pad value)."""
    out = np.zeros((g.kernels, g.out_height, g.out_width), dtype=np.int64)
    for k in range(g.kernels):
        for oy in range(g.out_height):
            for ox in range(g.out_width):
                acc = 0
                for r in range(g.kernel_height):
                    for s in range(g.kernel_width):
                        y = oy * g.stride_y + r * g.dilation_y - g.pad_top
                        xx = ox * g.stride_x + s * g.dilation_x - g.pad_left
                        inside = 0 <= y < g.height and 0 <= xx < g.width
                        for c in range(g.channels):
                            v = int(x[c, y, xx]) if inside else g.pad_value
                            acc += v * int(w[k, c, r, s])
                out[k, oy, ox] = acc
    return out


# ---- register programming --------------------------------------------------------------------------------
def program(
    hw: HwConfig,
    g: ConvGeometry,
    *,
    line_stride: int | None = None,
    surf_stride: int | None = None,
    cvt: tuple[int, int, int] | None = None,
    clip: int = 0,
    pad_value_raw: int | None = None,
    ram_type: int = 1,
    **overrides: dict[str, int | str],
) -> dict[str, dict[int, int]]:
    """Register words {unit: {offset: word}} of a consistent direct convolution; ``overrides`` maps
    "UNIT.REGISTER" to field values that replace the computed ones."""
    rmap = register_map(hw.address_map)
    atom = hw.atom_elements()
    ls = line_stride if line_stride is not None else g.width * atom
    ss = surf_stride if surf_stride is not None else g.height * ls
    eps = entries_per_slice(hw, g.channels, g.width)
    data_banks = -(-g.height * eps // cbuf_geometry(hw)[1])
    wbytes = -(-g.weight_bytes // 128) * 128
    pad_raw = pad_value_raw if pad_value_raw is not None else g.pad_value & 0xFF
    size0 = dict(DATAIN_WIDTH=g.width - 1, DATAIN_HEIGHT=g.height - 1)
    fields: dict[str, dict[str, int | str]] = {
        # D_MISC_CFG resets to int16 precision: every unit is programmed for int8 direct conv.
        **{f"{unit}.D_MISC_CFG": dict(CONV_MODE="DIRECT", PROC_PRECISION="INT8") for unit in CONV_UNITS},
        "CDMA.D_MISC_CFG": dict(CONV_MODE="DIRECT", IN_PRECISION="INT8", PROC_PRECISION="INT8"),
        "CSC.D_MISC_CFG": dict(CONV_MODE="DIRECT", IN_PRECISION="INT8", PROC_PRECISION="INT8"),
        "CDMA.D_DATAIN_SIZE_0": size0,
        "CDMA.D_DATAIN_SIZE_EXT_0": dict(DATAIN_WIDTH_EXT=g.width - 1, DATAIN_HEIGHT_EXT=g.height - 1),
        "CDMA.D_DATAIN_SIZE_1": dict(DATAIN_CHANNEL=g.channels - 1),
        "CDMA.D_DAIN_RAM_TYPE": dict(DATAIN_RAM_TYPE=ram_type),
        "CDMA.D_DAIN_ADDR_LOW_0": dict(DATAIN_ADDR_LOW_0=FEATURE_ADDR),
        "CDMA.D_LINE_STRIDE": dict(LINE_STRIDE=ls),
        "CDMA.D_SURF_STRIDE": dict(SURF_STRIDE=ss),
        "CDMA.D_DAIN_MAP": dict(LINE_PACKED=int(ls == g.width * atom), SURF_PACKED=int(ss == g.height * ls)),
        "CDMA.D_ENTRY_PER_SLICE": dict(ENTRIES=eps - 1),
        "CDMA.D_WEIGHT_SIZE_0": dict(BYTE_PER_KERNEL=g.kernel_height * g.kernel_width * g.channels - 1),
        "CDMA.D_WEIGHT_SIZE_1": dict(WEIGHT_KERNEL=g.kernels - 1),
        "CDMA.D_WEIGHT_RAM_TYPE": dict(WEIGHT_RAM_TYPE=ram_type),
        "CDMA.D_WEIGHT_ADDR_LOW": dict(WEIGHT_ADDR_LOW=WEIGHT_ADDR),
        "CDMA.D_WEIGHT_BYTES": dict(WEIGHT_BYTES=wbytes),
        "CDMA.D_CONV_STRIDE": dict(CONV_X_STRIDE=g.stride_x - 1, CONV_Y_STRIDE=g.stride_y - 1),
        "CDMA.D_ZERO_PADDING": dict(PAD_LEFT=g.pad_left, PAD_TOP=g.pad_top),
        "CDMA.D_ZERO_PADDING_VALUE": dict(PAD_VALUE=pad_raw),
        "CDMA.D_BANK": dict(DATA_BANK=data_banks - 1, WEIGHT_BANK=hw.cbuf_bank_number - data_banks - 1),
        "CSC.D_DATAIN_SIZE_EXT_0": dict(DATAIN_WIDTH_EXT=g.width - 1, DATAIN_HEIGHT_EXT=g.height - 1),
        "CSC.D_DATAIN_SIZE_EXT_1": dict(DATAIN_CHANNEL_EXT=g.channels - 1),
        "CSC.D_ENTRY_PER_SLICE": dict(ENTRIES=eps - 1),
        "CSC.D_WEIGHT_SIZE_EXT_0": dict(WEIGHT_WIDTH_EXT=g.kernel_width - 1, WEIGHT_HEIGHT_EXT=g.kernel_height - 1),
        "CSC.D_WEIGHT_SIZE_EXT_1": dict(WEIGHT_CHANNEL_EXT=g.channels - 1, WEIGHT_KERNEL=g.kernels - 1),
        "CSC.D_WEIGHT_BYTES": dict(WEIGHT_BYTES=wbytes),
        "CSC.D_DATAOUT_SIZE_0": dict(DATAOUT_WIDTH=g.out_width - 1, DATAOUT_HEIGHT=g.out_height - 1),
        "CSC.D_DATAOUT_SIZE_1": dict(DATAOUT_CHANNEL=g.kernels - 1),
        "CSC.D_ATOMICS": dict(ATOMICS=g.out_width * g.out_height - 1),
        "CSC.D_CONV_STRIDE_EXT": dict(CONV_X_STRIDE_EXT=g.stride_x - 1, CONV_Y_STRIDE_EXT=g.stride_y - 1),
        "CSC.D_DILATION_EXT": dict(X_DILATION_EXT=g.dilation_x - 1, Y_DILATION_EXT=g.dilation_y - 1),
        "CSC.D_ZERO_PADDING": dict(PAD_LEFT=g.pad_left, PAD_TOP=g.pad_top),
        "CSC.D_ZERO_PADDING_VALUE": dict(PAD_VALUE=pad_raw),
        "CSC.D_BANK": dict(DATA_BANK=data_banks - 1, WEIGHT_BANK=hw.cbuf_bank_number - data_banks - 1),
        "CACC.D_DATAOUT_SIZE_0": dict(DATAOUT_WIDTH=g.out_width - 1, DATAOUT_HEIGHT=g.out_height - 1),
        "CACC.D_DATAOUT_SIZE_1": dict(DATAOUT_CHANNEL=g.kernels - 1),
        "CACC.D_CLIP_CFG": dict(CLIP_TRUNCATE=clip),
    }
    if cvt is not None:
        offset, scale, truncate = cvt
        fields["CDMA.D_CVT_CFG"] = dict(CVT_EN=1, CVT_TRUNCATE=truncate)
        fields["CDMA.D_CVT_OFFSET"] = dict(CVT_OFFSET=offset)
        fields["CDMA.D_CVT_SCALE"] = dict(CVT_SCALE=scale)
    for name, values in overrides.items():
        fields[name.replace("__", ".")] = {**fields.get(name.replace("__", "."), {}), **values}
    words: dict[str, dict[int, int]] = {u: {} for u in CONV_UNITS}
    for name, values in fields.items():
        unit, reg_name = name.split(".")
        reg = rmap.unit(unit).register(reg_name)
        words[unit][reg.offset] = reg.encode(**values)
    return words


def views(words: dict[str, dict[int, int]]) -> dict[str, RegView]:
    return {u: RegView(UNITS[u], w) for u, w in words.items()}


def load(hw: HwConfig, g: ConvGeometry, x: np.ndarray, w: np.ndarray, mem: Memory, words, space: int = 1) -> None:
    """Feature cube (padded C, H, W) at FEATURE_ADDR per the programmed strides, packed weights at WEIGHT_ADDR."""
    v = views(words)
    layout = CubeLayout(
        g.channels, g.height, g.width, v["CDMA"].D_LINE_STRIDE.LINE_STRIDE, v["CDMA"].D_SURF_STRIDE.SURF_STRIDE,
        hw.atom_elements(),
    )
    write_cube(mem.space(space), FEATURE_ADDR, layout, x)
    mem.space(space).write(WEIGHT_ADDR, pack_loop(w, hw.mac_atomic_k, hw.mac_atomic_c))


def random_case(rng: np.random.Generator, hw: HwConfig, g: ConvGeometry) -> tuple[np.ndarray, np.ndarray]:
    """Random int8 cube with garbage in the padding lanes of the last surface, and random int8 weights."""
    c_pad = -(-g.channels // hw.atom_elements()) * hw.atom_elements()
    x = rng.integers(-128, 128, (c_pad, g.height, g.width))
    w = rng.integers(-128, 128, (g.kernels, g.channels, g.kernel_height, g.kernel_width))
    return x, w


def geometry(C, H, W, K, R, S, *, sy=1, sx=1, dy=1, dx=1, pt=0, pl=0, pb=0, pr=0, pad_value=0, oh=None, ow=None):
    """A ConvGeometry whose output size follows from explicit right/bottom padding, as a compiler would set it."""
    oh = oh if oh is not None else (H + pt + pb - ((R - 1) * dy + 1)) // sy + 1
    ow = ow if ow is not None else (W + pl + pr - ((S - 1) * dx + 1)) // sx + 1
    return ConvGeometry(C, H, W, K, R, S, oh, ow, sy, sx, dy, dx, pt, pl, pad_value)


def run_engine(hw: HwConfig, words, mem: Memory) -> tuple[np.ndarray, OpContext]:
    ctx = OpContext(hw=hw, mem=mem, regs=views(words))
    return run(ctx), ctx


# ---- weights -------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("preset", ["nv_small", "nv_small_256", "nv_medium_512", "nv_large"])
@pytest.mark.parametrize("shape", [(1, 1, 1, 1), (41, 70, 3, 2), (8, 8, 1, 1), (33, 64, 2, 3), (5, 129, 1, 2)])
def test_weight_unpacking_round_trip(preset, shape):
    hw = get_config(preset)
    rng = np.random.default_rng(sum(map(ord, preset)) + sum(shape))
    w = rng.integers(-128, 128, shape)
    K, C, R, S = shape
    raw = pack_loop(w, hw.mac_atomic_k, hw.mac_atomic_c)
    assert len(raw) == w.size  # no padding of partial groups
    g = ConvGeometry(C, 1, 1, K, R, S, 1, 1)
    got = unpack_weights(np.frombuffer(raw + b"\x55" * 64, dtype=np.uint8), g, hw)  # trailing bytes ignored
    np.testing.assert_array_equal(got, w)
    assert pack_weights(w, hw) == raw


def test_weight_grouping_uses_mac_atomic_c():
    """nv_small (C8) and nv_small_256 (C32) share atomic K and memory atom but order weights differently."""
    w = np.arange(2 * 16).reshape(2, 16, 1, 1) % 128
    small = pack_loop(w, 8, 8)
    assert pack_weights(w, get_config("nv_small")) == small
    assert pack_weights(w, get_config("nv_small_256")) == pack_loop(w, 8, 32)
    assert pack_weights(w, get_config("nv_small_256")) != small


# ---- arithmetic ------------------------------------------------------------------------------------------------------
def test_cdma_convert_matches_formula():
    x = np.arange(-128, 128)
    cases = [(0, 1, 0), (5, 2, 1), (-17, 300, 6), (100, -1234, 9), (-32768, 32767, 63), (3, 7, 2)]
    for offset, scale, truncate in cases:
        got = cdma_convert(x, offset, scale, truncate)
        want = [clamp(clamp(rha_int((int(v) - offset) * scale, truncate), 17), 8) for v in x]
        np.testing.assert_array_equal(got, want)


def test_cacc_truncation_rounds_half_away_and_saturates():
    acc = np.array([3, -3, 5, -5, 6, -6, 2**40, -(2**40), 2**31 - 1, 2**31, -(2**31), -(2**31) - 1])
    out, saturated = cacc_deliver(acc, 1)
    want = [clamp(rha_int(int(v), 1), 32) for v in acc]
    np.testing.assert_array_equal(out, want)
    assert out[:4].tolist() == [2, -2, 3, -3]
    out0, saturated0 = cacc_deliver(acc, 0)
    assert saturated0 == 4 and out0[8] == 2**31 - 1 and out0[9] == 2**31 - 1 and out0[11] == -(2**31)
    assert saturated == 2


def test_cacc_truncation_may_drop_all_16_bits_between_its_48_bit_sums_and_32_bit_output():
    """CLIP_TRUNCATE 16 is the largest legal value (48-bit sums, 32-bit output; 17 is a cmod FAIL, see
    test_illegal_config_names_the_field): it delivers ``sat32(rha(acc, 16))`` of the whole convolution."""
    hw = get_config("nv_small")
    g = geometry(64, 4, 4, 3, 3, 3)
    rng = np.random.default_rng(16)
    x, w = random_case(rng, hw, g)
    words = program(hw, g, clip=16)
    mem = Memory()
    load(hw, g, x, w, mem, words)
    out, _ = run_engine(hw, words, mem)
    acc = conv_loop(x[: g.channels], w, g)
    assert np.abs(acc).max() > 1 << 18  # the truncation keeps a few bits only
    np.testing.assert_array_equal(out[: g.kernels], np.vectorize(lambda v: clamp(rha_int(int(v), 16), 32))(acc))


def test_int16_weights_are_told_apart_by_every_byte():
    """Weights are unpacked once per distinct weight bytes (a network's layers repeat): two int16 layers whose
    packed weights differ only in their last element must each convolve with their own weights."""
    from regressions.lib.programs.conv_wide import pack_weights16

    hw = get_config("nv_full")
    rng = np.random.default_rng(206)
    w1 = rng.integers(-32768, 32768, (5, 20, 2, 3))
    w2 = w1.copy()
    w2[-1, -1, -1, -1] ^= 0x5A5
    raw1, raw2 = pack_weights16(w1, hw), pack_weights16(w2, hw)
    half = len(raw1) // 2
    assert raw1[:half] == raw2[:half] and raw1 != raw2
    g = ConvGeometry(20, 1, 1, 5, 2, 3, 1, 1, dtype="int16")
    for w, raw in ((w1, raw1), (w2, raw2), (w1, raw1)):
        np.testing.assert_array_equal(unpack_weights(np.frombuffer(raw, dtype=np.uint8), g, hw), w)


def test_int16_sums_that_can_reach_the_48_bit_assembly_limit_are_refused():
    """CACC assembles int16 partial sums in 48 bits and saturates step by step, in an order not modelled: a
    convolution whose exact bound sum |w| * |x| over all C * R * S taps reaches 2^47 is refused, one just below
    it is computed exactly. 128 channels of a 32x32 kernel at -2^15 * -2^15 = 2^30 are exactly 2^47."""
    from golden.engines.conv_datapath import cacc_cube

    hw = get_config("nv_full")
    g = ConvGeometry(128, 32, 32, 1, 32, 32, 1, 1, dtype="int16")
    x = np.full((128, 32, 32), -32768, dtype=np.int64)
    w = np.full((1, 128, 32, 32), -32768, dtype=np.int64)
    with pytest.raises(UnsupportedError) as info:
        cacc_cube(hw, x, w, g, 16)
    assert info.value.unit == "CACC"
    x[5, 7, 9] = 0  # one product less: 2^47 - 2^30
    out, saturated = cacc_cube(hw, x, w, g, 16)
    assert out[0, 0, 0] == rha_int((1 << 47) - (1 << 30), 16) and saturated == 0
    assert not out[1:].any()


# ---- the convolution --------------------------------------------------------------------------------
CASES = {
    "plain": geometry(5, 4, 6, 3, 3, 3),
    "pad": geometry(7, 5, 4, 4, 3, 2, pt=1, pl=2, pb=2, pr=1, pad_value=-77),
    "stride": geometry(9, 7, 8, 5, 3, 3, sy=2, sx=3, pt=1, pl=1, pb=1, pr=1, pad_value=33),
    "dilation": geometry(6, 8, 7, 2, 2, 3, dy=3, dx=2, pl=1, pr=2, pad_value=-1),
    "all": geometry(11, 6, 9, 10, 3, 2, sy=2, sx=1, dy=2, dx=3, pt=2, pl=3, pb=1, pr=0, pad_value=127),
    "out_past_input": geometry(4, 3, 3, 2, 2, 2, pad_value=-128, oh=5, ow=4),  # implicit right/bottom padding
    "pad_beyond_kernel": geometry(3, 2, 2, 1, 1, 1, pt=3, pl=4, pad_value=9, oh=7, ow=8),
    "one_by_one": geometry(17, 1, 1, 9, 1, 1),
}


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("preset", ["nv_small", "nv_small_256", "nv_large"])
def test_conv_against_plain_loop(preset, case):
    hw = get_config(preset)
    g = CASES[case]
    rng = np.random.default_rng(sum(map(ord, preset + case)))
    x, w = random_case(rng, hw, g)
    words = program(hw, g, clip=0)
    mem = Memory()
    load(hw, g, x, w, mem, words)
    out, ctx = run_engine(hw, words, mem)
    atom = hw.atom_elements()
    assert out.dtype == np.int64
    assert out.shape == (-(-g.kernels // atom) * atom, g.out_height, g.out_width)
    np.testing.assert_array_equal(out[: g.kernels], conv_loop(x[: g.channels], w, g))
    assert not out[g.kernels :].any()  # lanes of kernels that do not exist
    assert ctx.status[("CACC", "D_OUT_SATURATION")] == 0


def test_conv_with_cvt_strides_and_truncation():
    """CDMA CVT before padding (the pad value is not converted), non-packed strides, CACC truncation."""
    hw = get_config("nv_small_256")
    g = geometry(13, 5, 6, 9, 3, 3, sx=2, pt=1, pl=1, pb=1, pr=1, pad_value=-50)
    rng = np.random.default_rng(7)
    x, w = random_case(rng, hw, g)
    cvt = (-20, 3, 1)
    words = program(hw, g, line_stride=6 * 8 + 24, surf_stride=5 * 72 + 40, cvt=cvt, clip=5)
    mem = Memory()
    load(hw, g, x, w, mem, words)
    out, _ = run_engine(hw, words, mem)
    xc = np.vectorize(lambda v: clamp(rha_int((int(v) + 20) * 3, 1), 8))(x[: g.channels])
    acc = conv_loop(xc, w, g)
    np.testing.assert_array_equal(out[: g.kernels], np.vectorize(lambda v: clamp(rha_int(int(v), 5), 32))(acc))


def test_pad_value_is_raw_low_byte_signed():
    hw = get_config("nv_small")
    g = geometry(3, 2, 2, 2, 3, 3, pt=1, pl=1, pb=1, pr=1, pad_value=-55)  # 0xC9
    rng = np.random.default_rng(3)
    x, w = random_case(rng, hw, g)
    words = program(hw, g, pad_value_raw=0x12C9)  # only the low byte counts
    mem = Memory()
    load(hw, g, x, w, mem, words)
    out, _ = run_engine(hw, words, mem)
    np.testing.assert_array_equal(out[:2], conv_loop(x[:3], w, g))


def test_feature_from_cv_sram():
    hw = get_config("nv_large")
    g = geometry(40, 3, 4, 3, 2, 2)
    rng = np.random.default_rng(11)
    x, w = random_case(rng, hw, g)
    words = program(hw, g, ram_type=0)
    mem = Memory()
    load(hw, g, x, w, mem, words, space=0)
    out, _ = run_engine(hw, words, mem)
    np.testing.assert_array_equal(out[:3], conv_loop(x[:40], w, g))


def test_direct_conv_blocks_large_im2col(monkeypatch):
    """Row and tap blocking (used for big layers) gives the same sums as one block."""
    import golden.engines.conv_datapath as datapath

    g = geometry(6, 9, 7, 4, 3, 3, pt=1, pl=1, pb=1, pr=1, pad_value=5)
    rng = np.random.default_rng(5)
    x = rng.integers(-128, 128, (6, 9, 7))
    w = rng.integers(-128, 128, (4, 6, 3, 3))
    whole = direct_conv(x, w, g)
    monkeypatch.setattr(datapath, "_IM2COL_LIMIT", 100)
    np.testing.assert_array_equal(direct_conv(x, w, g), whole)
    np.testing.assert_array_equal(whole, conv_loop(x, w, g))


def test_row_blocks_of_a_vertically_strided_conv(monkeypatch: pytest.MonkeyPatch) -> None:
    """Big layers are cut into blocks of output rows; block b starts at input row b*rows*Sy (stride and dilation
    both vertical), so every block must give the plain sums of its rows."""
    import golden.engines.conv_datapath as datapath

    g = geometry(5, 13, 6, 3, 3, 2, sy=2, dy=2, pt=1, pb=2, pl=1, pad_value=-7)
    assert g.out_height >= 4
    rng = np.random.default_rng(12)
    x = rng.integers(-128, 128, (5, 13, 6))
    w = rng.integers(-128, 128, (3, 5, 3, 2))
    monkeypatch.setattr(datapath, "_IM2COL_LIMIT", 100)  # one output row per block
    np.testing.assert_array_equal(direct_conv(x, w, g), conv_loop(x, w, g))


def test_int8_sums_beyond_float32_precision_are_exact() -> None:
    """CACC sums are exact integers: 2048 channels of products near 127 * 127 reach 2^25, where float32 only
    holds even numbers; the result must still equal the integer sum (odd sums included)."""
    g = geometry(2048, 2, 2, 3, 1, 1)
    rng = np.random.default_rng(2048)
    x = rng.integers(100, 128, (2048, 2, 2))
    w = rng.integers(100, 128, (3, 2048, 1, 1))
    w[1] = -w[1]
    want = w[:, :, 0, 0].astype(np.int64) @ x.reshape(2048, 4).astype(np.int64)
    assert np.abs(want).min() > 1 << 24 and (want % 2).any()
    np.testing.assert_array_equal(direct_conv(x, w, g).reshape(3, 4), want)


def test_weight_unpack_cache_evicts_and_keeps_every_layer_its_own_weights(monkeypatch: pytest.MonkeyPatch) -> None:
    """A network's distinct layers may hold more weight bytes than the unpack cache keeps (256 MiB): old layers
    are evicted and unpacked again when they come back, each still convolving with its own weights."""
    import golden.engines.conv_datapath as datapath

    hw = get_config("nv_small")
    g = ConvGeometry(16, 1, 1, 9, 3, 3, 1, 1)
    monkeypatch.setattr(datapath, "UNPACK_CACHE_BYTES", 3 * g.weight_bytes)  # room for one layer (two copies)
    rng = np.random.default_rng(256)
    layers = [rng.integers(-128, 128, (9, 16, 3, 3)) for _ in range(4)]
    for w in layers + layers[::-1]:
        raw = np.frombuffer(pack_loop(w, hw.mac_atomic_k, hw.mac_atomic_c), dtype=np.uint8)
        np.testing.assert_array_equal(unpack_weights(raw, g, hw), w)
    assert datapath._UNPACKED_BYTES[0] <= 3 * g.weight_bytes


def test_extreme_sums_are_exact():
    """The largest int8 products over many taps stay exact in the float64 GEMM."""
    g = geometry(512, 4, 4, 2, 4, 4, pt=2, pl=2, pb=1, pr=1, pad_value=-128)
    x = np.full((512, 4, 4), -128)
    w = np.full((2, 512, 4, 4), -128)
    w[1] = 127
    out = direct_conv(x, w, g)
    assert out[0].max() == 512 * 16 * 128 * 128
    assert out[1].min() == -512 * 16 * 128 * 127


# ---- legality ---------------------------------------------------------------------------------------
GOOD = geometry(12, 4, 5, 6, 3, 3, pt=1, pl=1, pb=1, pr=1)


def config_error(hw: HwConfig, words) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        run_engine(hw, words, Memory())
    return info.value


@pytest.mark.parametrize(
    "override, where",
    [
        ({"CDMA.D_LINE_STRIDE": dict(LINE_STRIDE=5 * 8 - 8)}, "CDMA.D_LINE_STRIDE.LINE_STRIDE"),
        ({"CDMA.D_SURF_STRIDE": dict(SURF_STRIDE=3 * 40)}, "CDMA.D_SURF_STRIDE.SURF_STRIDE"),
        ({"CDMA.D_DAIN_MAP": dict(LINE_PACKED=0)}, "CDMA.D_DAIN_MAP.LINE_PACKED"),
        ({"CDMA.D_ENTRY_PER_SLICE": dict(ENTRIES=3)}, "CDMA.D_ENTRY_PER_SLICE.ENTRIES"),
        ({"CSC.D_ENTRY_PER_SLICE": dict(ENTRIES=3)}, "CSC.D_ENTRY_PER_SLICE.ENTRIES"),
        ({"CDMA.D_WEIGHT_BYTES": dict(WEIGHT_BYTES=0)}, "CDMA.D_WEIGHT_BYTES.WEIGHT_BYTES"),
        ({"CDMA.D_WEIGHT_BYTES": dict(WEIGHT_BYTES=6 * 9 * 12 + 1)}, "CDMA.D_WEIGHT_BYTES.WEIGHT_BYTES"),
        ({"CDMA.D_WEIGHT_SIZE_0": dict(BYTE_PER_KERNEL=106)}, "CDMA.D_WEIGHT_SIZE_0.BYTE_PER_KERNEL"),
        ({"CSC.D_WEIGHT_SIZE_EXT_1": dict(WEIGHT_CHANNEL_EXT=10)}, "CSC.D_WEIGHT_SIZE_EXT_1.WEIGHT_CHANNEL_EXT"),
        ({"CACC.D_DATAOUT_SIZE_1": dict(DATAOUT_CHANNEL=6)}, "CACC.D_DATAOUT_SIZE_1.DATAOUT_CHANNEL"),
        ({"CACC.D_DATAOUT_SIZE_0": dict(DATAOUT_WIDTH=5)}, "CACC.D_DATAOUT_SIZE_0.DATAOUT_WIDTH"),
        ({"CSC.D_ATOMICS": dict(ATOMICS=0)}, "CSC.D_ATOMICS.ATOMICS"),
        ({"CSC.D_DATAIN_SIZE_EXT_0": dict(DATAIN_WIDTH_EXT=5)}, "CSC.D_DATAIN_SIZE_EXT_0.DATAIN_WIDTH_EXT"),
        ({"CACC.D_CLIP_CFG": dict(CLIP_TRUNCATE=17)}, "CACC.D_CLIP_CFG.CLIP_TRUNCATE"),
        ({"CDMA.D_BANK": dict(DATA_BANK=0, WEIGHT_BANK=31)}, "CDMA.D_BANK.WEIGHT_BANK"),
        (
            {
                "CDMA.D_FETCH_GRAIN": dict(GRAINS=1),
                "CDMA.D_LINE_STRIDE": dict(LINE_STRIDE=48),
                "CDMA.D_SURF_STRIDE": dict(SURF_STRIDE=4 * 48),
                "CDMA.D_DAIN_MAP": dict(LINE_PACKED=0),
            },
            "CDMA.D_FETCH_GRAIN.GRAINS",
        ),
        ({"CSC.D_BANK": dict(DATA_BANK=1)}, "CSC.D_BANK.DATA_BANK"),
        ({"CSC.D_POST_Y_EXTENSION": dict(Y_EXTENSION=1)}, "CSC.D_POST_Y_EXTENSION.Y_EXTENSION"),
        # one 8-byte CBUF word short of the six 3x3x12 int8 kernels (CSC agreeing): the fetch misses weights
        (
            {"CDMA.D_WEIGHT_BYTES": dict(WEIGHT_BYTES=6 * 3 * 3 * 12 - 8),
             "CSC.D_WEIGHT_BYTES": dict(WEIGHT_BYTES=6 * 3 * 3 * 12 - 8)},
            "CDMA.D_WEIGHT_BYTES.WEIGHT_BYTES",
        ),
    ],
)
def test_illegal_config_names_the_field(override, where):
    hw = get_config("nv_small")
    words = program(hw, GOOD, **{k.replace(".", "__"): v for k, v in override.items()})
    assert config_error(hw, words).where == where


def test_input_larger_than_cbuf_is_illegal():
    hw = get_config("nv_small")
    g = geometry(256, 64, 64, 8, 1, 1)  # 64 lines x 2048 entries > 32 banks x 512
    bank = dict(DATA_BANK=30, WEIGHT_BANK=0)
    words = program(hw, g, CDMA__D_BANK=bank, CSC__D_BANK=bank)
    assert config_error(hw, words).where == "CDMA.D_BANK.DATA_BANK"


def test_input_may_fill_its_data_banks_exactly() -> None:
    """The whole input must fit DATA_BANK + 1 banks (cmod FAIL: "insufficient cbuf space"). nv_small banks hold
    512 entries; 8 channels x 64 pixels are 64 entries a line: 8 lines fill one bank, 9 need two."""
    hw = get_config("nv_small")
    for lines, banks in ((8, 1), (9, 2)):
        g = geometry(8, lines, 64, 2, 1, 1)
        rng = np.random.default_rng(lines)
        x, w = random_case(rng, hw, g)
        bank = dict(DATA_BANK=banks - 1, WEIGHT_BANK=1)
        words = program(hw, g, CDMA__D_BANK=bank, CSC__D_BANK=bank)
        mem = Memory()
        load(hw, g, x, w, mem, words)
        out, _ = run_engine(hw, words, mem)
        np.testing.assert_array_equal(out[:2], conv_loop(x[:8], w, g))
        if banks > 1:
            short = dict(DATA_BANK=banks - 2, WEIGHT_BANK=1)
            words = program(hw, g, CDMA__D_BANK=short, CSC__D_BANK=short)
            assert config_error(hw, words).where == "CDMA.D_BANK.DATA_BANK"


def test_fetch_grain_beyond_the_cube_height_only_for_a_packed_1x1_cube() -> None:
    """CDMA fetches GRAINS + 1 lines at a time and FAILs when that exceeds the cube height (cmod
    DirectConvDataRequestSequencerCommon), except for a line- and surface-packed 1x1 cube, which it fetches as
    one block of atoms whatever the grain."""
    hw = get_config("nv_small")
    g = geometry(17, 1, 1, 3, 1, 1)
    rng = np.random.default_rng(17)
    x, w = random_case(rng, hw, g)
    words = program(hw, g, CDMA__D_FETCH_GRAIN=dict(GRAINS=3))
    assert views(words)["CDMA"].D_DAIN_MAP.SURF_PACKED
    mem = Memory()
    load(hw, g, x, w, mem, words)
    out, _ = run_engine(hw, words, mem)
    np.testing.assert_array_equal(out[:3], conv_loop(x[:17], w, g))
    unpacked = program(hw, g, surf_stride=16, CDMA__D_FETCH_GRAIN=dict(GRAINS=3))
    assert config_error(hw, unpacked).where == "CDMA.D_FETCH_GRAIN.GRAINS"
    tall = geometry(4, 2, 3, 2, 1, 1)
    x, w = random_case(rng, hw, tall)
    words = program(hw, tall, CDMA__D_FETCH_GRAIN=dict(GRAINS=1))  # two lines per fetch = the whole cube
    mem = Memory()
    load(hw, tall, x, w, mem, words)
    np.testing.assert_array_equal(run_engine(hw, words, mem)[0][:2], conv_loop(x[:4], w, tall))
    assert config_error(hw, program(hw, tall, CDMA__D_FETCH_GRAIN=dict(GRAINS=2))).where == "CDMA.D_FETCH_GRAIN.GRAINS"


def test_entries_per_slice_shares_an_entry_among_four_pixels_for_a_quarter_entry() -> None:
    """The cmod's rule for the atoms left over after whole entries (``cripple_atom_num``): more than half an
    entry takes one entry per pixel, half an entry one per two pixels, a quarter one per four. Wide entries
    show the quarter case: a 64-byte bank of 8-byte atoms (CBUF_BANK_WIDTH_64 with MEMORY_ATOMIC_SIZE_8, both
    options of NVDLA's projects.spec) holds 8 atoms, so 16 channels (2 atoms) of 5 pixels take 2 entries."""
    hw = get_config("nv_small").derive(name="bank64_atom8", cbuf_bank_width=64)
    assert cbuf_geometry(hw) == (64, 512)
    assert [entries_per_slice(hw, c, 5) for c in (16, 32, 40, 64, 80)] == [2, 3, 5, 5, 5 + 2]


def test_cv_sram_without_secondary_memif_needs_cvif():
    """CV-SRAM on a config without a secondary memory interface needs a unit it lacks: N/A, naming CVIF."""
    hw = get_config("nv_small")
    mem = Memory()
    words = program(hw, GOOD, ram_type=0)
    with pytest.raises(UnsupportedError, match="CDMA.D_DAIN_RAM_TYPE.DATAIN_RAM_TYPE") as ei:
        run_engine(hw, words, mem)
    assert ei.value.unit == "CVIF"


def test_minus_one_fields_have_no_illegal_zero():
    """Strides, dilations and sizes are stored minus one: all-zero fields are a legal 1x1 conv of a 1x1x1 cube."""
    hw = get_config("nv_small")
    g = geometry(1, 1, 1, 1, 1, 1)
    words = program(hw, g)
    mem = Memory()
    load(hw, g, np.array([[[-3]], *[[[0]]] * 7]), np.array([[[[5]]]]), mem, words)
    out, _ = run_engine(hw, words, mem)
    assert out[:, 0, 0].tolist() == [-15, 0, 0, 0, 0, 0, 0, 0]


@pytest.mark.parametrize(
    "override, unit, feature",
    [
        ({"CSC.D_MISC_CFG": dict(CONV_MODE="WINOGRAD")}, "CSC", "Winograd"),
        ({"CMAC_B.D_MISC_CFG": dict(PROC_PRECISION="INT16")}, "CMAC_B", "int16"),
        ({"CDMA.D_MISC_CFG": dict(IN_PRECISION="FP16")}, "CDMA", "fp16"),
        ({"CDMA.D_WEIGHT_FORMAT": dict(WEIGHT_FORMAT="COMPRESSED")}, "CDMA", "compressed"),
        ({"CACC.D_BATCH_NUMBER": dict(BATCHES=1)}, "CACC", "batch"),
    ],
)
def test_unsupported_features(override, unit, feature):
    hw = get_config("nv_large")
    words = program(hw, GOOD, **{k.replace(".", "__"): v for k, v in override.items()})
    with pytest.raises(UnsupportedError) as info:
        run_engine(hw, words, Memory())
    assert info.value.unit == unit
    assert feature.lower() in str(info.value).lower()


def test_engine_is_registered():
    from golden.engines import ENGINES, load_engines

    load_engines()
    eng = ENGINES["CONV"]
    assert eng.units == CONV_UNITS == ("CDMA", "CSC", "CMAC_A", "CMAC_B", "CACC") and eng.rdma is None
    assert eng.done_bits == (("CDMA", 16), ("CDMA", 18), ("CACC", 20))
    assert eng.sink({}) == "SDP"


def test_geometry_is_a_value():
    g = CASES["all"]
    assert dataclasses.replace(g) == g and g.weight_bytes == 10 * 11 * 3 * 2
