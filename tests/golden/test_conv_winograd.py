"""Winograd convolution (CONV_MODE=WINOGRAD) in the golden conv pipeline: the transforms against hand values,
the engine against a tile-by-tile loop written here, the identity with direct convolution when nothing rounds,
and the legality rules (ConfigError naming the field, UnsupportedError naming the feature)."""
from __future__ import annotations

import numpy as np
import pytest

from golden import ConfigError, Dla, UnsupportedError, get_config
from golden.dma import CONV_UNITS
from golden.engines import conv_winograd as cw
from golden.regs import UNITS
from regressions.lib.programs import winograd as pw

NV_FULL = get_config("nv_full")
BT = np.array([[1, 0, -1, 0], [0, 1, 1, 0], [0, -1, 1, 0], [0, 1, 0, -1]])
AT = np.array([[1, 1, 1, 0], [0, 1, -1, -1]])
G2 = np.array([[2, 0, 0], [1, 1, 1], [1, -1, 1], [0, 0, 2]])  # 2G: integral weight transform


# ---- loops written here ----------------------------------------------------------------------------------------
def rha_int(v: int, s: int) -> int:
    if s == 0:
        return v
    m = (abs(v) + (1 << (s - 1))) >> s
    return -m if v < 0 else m


def clamp(v: int, bits: int) -> int:
    return max(-(1 << (bits - 1)), min((1 << (bits - 1)) - 1, v))


def loop_winograd(x, u, *, stride, pad, pad_value, pra, clip, out_hw, bits, deliver=True):
    """CACC output (K, OH, OW) by one loop per tile: pad, extend channels, B^T d B, products, A^T M A, then
    ``sat32(rha(., clip))`` (just ``rha`` without ``deliver``)."""
    cp, h, w = x.shape
    sy, sx = stride
    top, left, bottom, right = pad
    hp, wp = top + h + bottom, left + w + right
    xp = np.full((cp, hp, wp), pad_value, dtype=np.int64)
    xp[:, top:top + h, left:left + w] = x
    k_n, ce = u.shape[:2]
    oh, ow = out_hw
    out = np.zeros((k_n, oh, ow), dtype=np.int64)
    for ty in range(oh // 2):
        for tx in range(ow // 2):
            v = []
            for e in range(ce):
                py, rest = divmod(e, cp * sx)
                px, c = divmod(rest, cp)
                d = np.array([[xp[c, (2 * ty + i) * sy + py, (2 * tx + j) * sx + px] for j in range(4)]
                              for i in range(4)])
                v.append([[clamp(rha_int(int(t), pra), bits) for t in row] for row in BT @ d @ BT.T])
            v = np.array(v)
            for k in range(k_n):
                m = np.einsum("cij,cij->ij", u[k], v)
                y = AT @ m @ AT.T
                for a in range(2):
                    for b in range(2):
                        value = rha_int(int(y[a, b]), clip)
                        out[k, 2 * ty + a, 2 * tx + b] = clamp(value, 32) if deliver else value
    return out


def run_program(hw, lay: pw.WinogradLayer, **overrides) -> bytes:
    """Run the layer's program (with some register fields replaced) on a fresh Dla; the output bytes."""
    program = pw.program_winograd(NV_FULL, lay)
    program.writes = patched(program.writes, overrides)
    return program.run(Dla(hw))


def cacc_cube(monkeypatch, lay: pw.WinogradLayer, feature: bytes | None = None) -> tuple[np.ndarray, dict]:
    """The int32 cube CACC hands to SDP (and the status it reports) for the layer's program on nv_full;
    ``feature`` replaces the input bytes in memory."""
    program = pw.program_winograd(NV_FULL, lay)
    if feature is not None:
        program.memory[0] = (program.memory[0][0], feature)
    captured: dict = {}
    original = cw.run

    def spy(ctx):
        out = original(ctx)
        captured["out"], captured["status"] = out, dict(ctx.status)
        return out

    monkeypatch.setattr(cw, "run", spy)
    program.run(Dla(NV_FULL))
    return captured["out"], captured["status"]


def patched(writes, overrides: dict[str, dict[str, int]]):
    """The program's writes with fields of some registers replaced ({"UNIT__REG": {field: value}}); registers
    the program does not write are written before the first D_OP_ENABLE."""
    out, todo = [], dict(overrides)
    for name, value in writes:
        unit, reg = name[len("NVDLA_"):].split(".")
        key = f"{unit}__{reg[:-2]}"
        if name.endswith(".D_OP_ENABLE_0"):
            for extra in list(todo):
                register = UNITS[extra.split("__")[0]].register(extra.split("__")[1])
                out.append((register.full_name, register.encode(**todo.pop(extra))))
        if key in todo:
            register = UNITS[unit].register(reg)
            fields = register.decode(value)
            fields.update(todo.pop(key))
            value = sum(register.field(f).encode(v) for f, v in fields.items())
        out.append((name, value))
    return out


def layer(precision="int8", *, c=5, h=6, w=7, k=3, stride=(1, 1), pad=(1, 1, 1, 0), out_hw=(4, 4), pra=2,
          clip=0, pad_value=-7, seed=0, lim=None) -> pw.WinogradLayer:
    rng = np.random.default_rng(seed)
    bits = 8 if precision == "int8" else 16
    lim = lim or (1 << (bits - 1))
    atom = NV_FULL.atom_elements(precision)
    ce = -(-c // atom) * atom * stride[0] * stride[1]
    return pw.WinogradLayer(
        x=rng.integers(-lim, lim, (c, h, w)), u=rng.integers(-lim, lim, (k, ce, 4, 4)), out_hw=out_hw,
        stride=stride, pad=pad, pad_value=pad_value, pra_truncate=pra, clip_truncate=clip, precision=precision,
    )


# ---- transforms ------------------------------------------------------------------------------------------------
def test_pra_is_bt_d_b_with_round_half_away_and_saturation():
    d = np.zeros((4, 4), dtype=np.int64)
    d[1, 1] = 3  # B^T d B spreads it over rows/cols 1..3 with signs
    exact = BT @ d @ BT.T
    np.testing.assert_array_equal(cw.pra(d, 0, 8), exact)
    # 3/2 = 1.5 -> 2, -3/2 -> -2 (ties away from zero)
    np.testing.assert_array_equal(cw.pra(d, 1, 8), np.where(exact > 0, 2, np.where(exact < 0, -2, 0)))
    # 3/4 -> 1
    np.testing.assert_array_equal(cw.pra(d, 2, 8), np.sign(exact))
    big = np.array([[127, -128, -128, 127]] * 2 + [[-128, 127, 127, -128]] * 2)
    v = BT @ big @ BT.T
    assert np.abs(v).max() == 510
    np.testing.assert_array_equal(cw.pra(big, 0, 8), np.clip(v, -128, 127))
    np.testing.assert_array_equal(cw.pra(big, 2, 8), np.clip([[rha_int(int(t), 2) for t in r] for r in v], -128, 127))
    rng = np.random.default_rng(3)
    tiles = rng.integers(-32768, 32768, (50, 4, 4))
    full = cw.pra(tiles, 0, 30)
    np.testing.assert_array_equal(full, np.einsum("ai,nij,bj->nab", BT, tiles, BT))
    assert np.abs(full).max() < 1 << 17  # the PRA's 18-bit adders never wrap


def test_output_transform_is_at_m_a():
    m = np.random.default_rng(4).integers(-(1 << 30), 1 << 30, (7, 4, 4))
    np.testing.assert_array_equal(cw.output_transform(m), np.einsum("ai,nij,bj->nab", AT, m, AT))


def test_weight_stream_order_and_round_trip():
    k, c = 33, 8  # two kernel groups (32 + 1), two channel blocks
    offsets = cw.weight_element_offsets(k, c, 32)
    assert offsets[0, 0, 0, 0] == 0 and offsets[0, 3, 0, 0] == 3  # channel within the block is innermost
    assert offsets[0, 0, 0, 1] == 4 and offsets[0, 0, 3, 3] == 60  # then position 4*i + j
    assert offsets[1, 0, 0, 0] == 64  # then kernel within the group
    assert offsets[0, 4, 0, 0] == 32 * 64  # then the next block of 4 channels
    assert offsets[32, 0, 0, 0] == 32 * 16 * c and offsets[32, 4, 0, 0] == 32 * 16 * c + 64  # partial group of 1
    assert sorted(offsets.ravel().tolist()) == list(range(k * c * 16))
    rng = np.random.default_rng(5)
    for precision, bits in (("int8", 8), ("int16", 16)):
        u = rng.integers(-(1 << (bits - 1)), 1 << (bits - 1), (k, c, 4, 4))
        raw = np.frombuffer(cw.pack_weights(u, 32, precision), np.uint8)
        np.testing.assert_array_equal(cw.unpack_weights(raw, k, c, 32, precision), u)
        assert raw.size == u.size * bits // 8


def test_channel_extension_puts_stride_phases_in_channels():
    xp = np.arange(2 * 8 * 12).reshape(2, 8, 12)
    ext = cw.extend_channels(xp, 2, 3)
    assert ext.shape == (12, 4, 4)
    for e in range(12):
        py, rest = divmod(e, 2 * 3)
        px, c = divmod(rest, 2)
        np.testing.assert_array_equal(ext[e], xp[c, py::2, px::3])


# ---- the engine --------------------------------------------------------------------------------------------------
CASES = [
    dict(precision="int8"),
    dict(precision="int16", clip=8),
    dict(precision="int8", c=40, k=33, stride=(2, 2), h=9, w=13, pad=(2, 1, 5, 2), pra=0, clip=6),
    dict(precision="int16", c=17, k=17, stride=(1, 3), h=5, w=20, pad=(0, 2, 3, 2), out_hw=(4, 4), pra=1, clip=12),
    dict(precision="int8", c=32, k=2, h=10, w=14, pad=(2, 1, 0, 1), out_hw=(8, 12), pra=1, clip=4),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: "-".join(f"{k}{v}" for k, v in c.items()))
def test_engine_matches_tile_loop(case, monkeypatch):
    """Every lane of CACC's output (the kernels, then zeros up to the atom) equals the loop above; the padding
    lanes of the input (garbage in memory here) go through the PRA like real channels."""
    from compiler.codegen.pack import pack_feature

    lay = layer(**case)
    bits = 8 if lay.precision == "int8" else 16
    a = NV_FULL.atom_elements(lay.precision)
    rng = np.random.default_rng(9)
    full = rng.integers(-(1 << (bits - 1)), 1 << (bits - 1), (-(-lay.x.shape[0] // a) * a,) + lay.x.shape[1:])
    full[: lay.x.shape[0]] = lay.x
    out, status = cacc_cube(monkeypatch, lay, pack_feature(full, a, bits // 8))
    want = loop_winograd(full, lay.u, stride=lay.stride, pad=lay.pad, pad_value=lay.pad_value, pra=lay.pra_truncate,
                         clip=lay.clip_truncate, out_hw=lay.out_hw, bits=bits)
    k = lay.u.shape[0]
    assert out.shape == (-(-k // a) * a,) + tuple(lay.out_hw)
    np.testing.assert_array_equal(out[:k], want)
    assert not out[k:].any()
    assert status[("CACC", "D_OUT_SATURATION")] == 0


def test_saturation_is_counted(monkeypatch):
    """D_OUT_SATURATION counts the values CACC clips to 32 bits."""
    lay = layer("int16", c=16, k=2, pra=0, clip=0, seed=11)
    lay.u[:] = 32767
    lay.x[:] = 32767
    out, status = cacc_cube(monkeypatch, lay)
    raw = loop_winograd(pw.padded_input(lay, NV_FULL), lay.u, stride=(1, 1), pad=lay.pad, pad_value=lay.pad_value,
                        pra=0, clip=0, out_hw=(4, 4), bits=16, deliver=False)
    np.testing.assert_array_equal(out[:2], np.clip(raw, -(1 << 31), (1 << 31) - 1))
    clipped = int(np.count_nonzero((raw > (1 << 31) - 1) | (raw < -(1 << 31))))
    assert clipped > 0 and status[("CACC", "D_OUT_SATURATION")] == clipped


@pytest.mark.parametrize("stride", [(1, 1), (2, 2), (2, 3)])
@pytest.mark.parametrize("precision", ["int8", "int16"])
def test_exact_winograd_is_direct_convolution(stride, precision, monkeypatch):
    """With weights 4 G g G^T (integral), no PRA truncation or saturation and CLIP_TRUNCATE=2, the pipeline
    computes exactly the strided convolution of the (up to 3*S) kernels g with CDMA's padding."""
    sy, sx = stride
    rng = np.random.default_rng(sy * 10 + sx)
    bits = 8 if precision == "int8" else 16
    atom = NV_FULL.atom_elements(precision)
    c, k, r, s = 3, 4, 3 * sy, 3 * sx
    oh, ow = 4, 8
    he, we = oh + 4, ow + 4
    top, left = 1, 2
    h, w = he * sy - top - 1, we * sx - left - 2
    x = rng.integers(-5, 6, (c, h, w))  # |B^T d B| <= 16 * 5: no saturation at 8 bits
    g = rng.integers(-3, 4, (k, c, r, s))
    cp = -(-c // atom) * atom
    # extended kernels (K, Cp*Sy*Sx, 3, 3), then U = (2G) g (2G)^T
    ge = np.zeros((k, cp * sy * sx, 3, 3), dtype=np.int64)
    for e in range(cp * sy * sx):
        py, rest = divmod(e, cp * sx)
        px, ch = divmod(rest, cp)
        if ch < c:
            ge[:, e] = g[:, ch, py::sy, px::sx]
    u = np.einsum("ai,kcij,bj->kcab", G2, ge, G2)
    assert np.abs(u).max() < (1 << (bits - 1))
    lay = pw.WinogradLayer(x=x, u=u, out_hw=(oh, ow), stride=stride, pad=(top, left, 1, 2), pad_value=2,
                           pra_truncate=0, clip_truncate=2, precision=precision)
    out, _ = cacc_cube(monkeypatch, lay)
    xp = np.full((c, he * sy, we * sx), 2)
    xp[:, top:top + h, left:left + w] = x
    direct = np.zeros((k, oh, ow), dtype=np.int64)
    for oy in range(oh):
        for ox in range(ow):
            direct[:, oy, ox] = np.einsum("kcrs,crs->k", g, xp[:, oy * sy: oy * sy + r, ox * sx: ox * sx + s])
    np.testing.assert_array_equal(out[:k], direct)
    assert np.abs(direct).max() > 16  # a real test: the sums are not trivially small


# ---- legality ------------------------------------------------------------------------------------------------------
BAD = [
    ({"CDMA__D_ZERO_PADDING": dict(PAD_RIGHT=1)}, "CDMA.D_ZERO_PADDING.PAD_RIGHT"),
    ({"CDMA__D_ZERO_PADDING": dict(PAD_BOTTOM=2)}, "CDMA.D_ZERO_PADDING.PAD_BOTTOM"),
    ({"CSC__D_DATAIN_SIZE_EXT_0": dict(DATAIN_WIDTH_EXT=11)}, "CSC.D_DATAIN_SIZE_EXT_0.DATAIN_WIDTH_EXT"),
    ({"CDMA__D_DATAIN_SIZE_EXT_0": dict(DATAIN_HEIGHT_EXT=3)}, "CDMA.D_DATAIN_SIZE_EXT_0.DATAIN_HEIGHT_EXT"),
    ({"CSC__D_DATAIN_SIZE_EXT_1": dict(DATAIN_CHANNEL_EXT=7)}, "CSC.D_DATAIN_SIZE_EXT_1.DATAIN_CHANNEL_EXT"),
    ({"CSC__D_WEIGHT_SIZE_EXT_1": dict(WEIGHT_CHANNEL_EXT=63)}, "CSC.D_WEIGHT_SIZE_EXT_1.WEIGHT_CHANNEL_EXT"),
    ({"CSC__D_WEIGHT_SIZE_EXT_0": dict(WEIGHT_WIDTH_EXT=2, WEIGHT_HEIGHT_EXT=2)}, "WEIGHT_WIDTH_EXT"),
    ({"CDMA__D_WEIGHT_SIZE_0": dict(BYTE_PER_KERNEL=16 * 32 - 2)}, "CDMA.D_WEIGHT_SIZE_0.BYTE_PER_KERNEL"),
    ({"CDMA__D_ENTRY_PER_SLICE": dict(ENTRIES=3)}, "CDMA.D_ENTRY_PER_SLICE.ENTRIES"),
    ({"CSC__D_ENTRY_PER_SLICE": dict(ENTRIES=0)}, "CSC.D_ENTRY_PER_SLICE.ENTRIES"),
    ({"CSC__D_DATAOUT_SIZE_0": dict(DATAOUT_WIDTH=5), "CACC__D_DATAOUT_SIZE_0": dict(DATAOUT_WIDTH=5)},
     "CSC.D_DATAOUT_SIZE_0.DATAOUT_WIDTH"),
    ({"CSC__D_DATAOUT_SIZE_0": dict(DATAOUT_HEIGHT=7), "CACC__D_DATAOUT_SIZE_0": dict(DATAOUT_HEIGHT=7),
      "CSC__D_ATOMICS": dict(ATOMICS=31)}, "CSC.D_DATAOUT_SIZE_0.DATAOUT_HEIGHT"),
    ({"CACC__D_DATAOUT_SIZE_0": dict(DATAOUT_WIDTH=7)}, "CACC.D_DATAOUT_SIZE_0.DATAOUT_WIDTH"),
    ({"CSC__D_ATOMICS": dict(ATOMICS=3)}, "CSC.D_ATOMICS.ATOMICS"),
    ({"CSC__D_PRA_CFG": dict(PRA_TRUNCATE=3)}, "CSC.D_PRA_CFG.PRA_TRUNCATE"),
    ({"CSC__D_CONV_STRIDE_EXT": dict(CONV_Y_STRIDE_EXT=1)}, "CSC.D_CONV_STRIDE_EXT.CONV_Y_STRIDE_EXT"),
    ({"CSC__D_ZERO_PADDING": dict(PAD_LEFT=1)}, "CSC.D_ZERO_PADDING.PAD_LEFT"),
    ({"CSC__D_DILATION_EXT": dict(X_DILATION_EXT=1)}, "CSC.D_DILATION_EXT.X_DILATION_EXT"),
    ({"CMAC_B__D_MISC_CFG": dict(CONV_MODE=0)}, "CMAC_B.D_MISC_CFG.CONV_MODE"),
    ({"SDP__D_FEATURE_MODE_CFG": dict(WINOGRAD=0)}, "SDP.D_FEATURE_MODE_CFG.WINOGRAD"),
    ({"CSC__D_BANK": dict(WEIGHT_BANK=0)}, "CSC.D_BANK.DATA_BANK"),
    ({"CDMA__D_WEIGHT_BYTES": dict(WEIGHT_BYTES=128), "CSC__D_WEIGHT_BYTES": dict(WEIGHT_BYTES=128)},
     "CDMA.D_WEIGHT_BYTES.WEIGHT_BYTES"),
    ({"CDMA__D_DATAIN_FORMAT": dict(DATAIN_FORMAT=1)}, "CDMA.D_DATAIN_FORMAT.DATAIN_FORMAT"),
    ({"CDMA__D_DAIN_MAP": dict(LINE_PACKED=0)}, "CDMA.D_DAIN_MAP.LINE_PACKED"),
    ({"CACC__D_CLIP_CFG": dict(CLIP_TRUNCATE=17)}, "CACC.D_CLIP_CFG.CLIP_TRUNCATE"),
]


@pytest.mark.parametrize("overrides, where", BAD, ids=[w for _, w in BAD])
def test_illegal_programs_name_the_field(overrides, where):
    lay = layer("int8", c=5, h=6, w=7, k=3, pad=(1, 1, 1, 0))  # 8x8 extended input, 4x4 output, 24 data entries
    with pytest.raises(ConfigError) as info:
        run_program(NV_FULL, lay, **overrides)
    assert where in info.value.where


def test_strided_padded_height_is_whole_tiles_of_every_stride_phase():
    """With CONV_Y_STRIDE 2 the CDMA splits the padded rows into two stride phases, each whole 4-row tiles: a
    padded height of 16 is legal, 12 (a multiple of 4 but not of 4 * 2) is refused naming PAD_BOTTOM, even when
    every other register agrees with the 6 extended rows it would give."""
    legal = layer("int8", c=8, h=9, w=13, k=3, stride=(2, 2), pad=(2, 1, 5, 2))
    assert pw.program_winograd(NV_FULL, legal).run(Dla(NV_FULL))
    short = layer("int8", c=8, h=9, w=13, k=3, stride=(2, 2), pad=(2, 1, 1, 2))
    assert short.ext_hw() == (6, 8)
    with pytest.raises(ConfigError) as info:
        pw.program_winograd(NV_FULL, short).run(Dla(NV_FULL))
    assert info.value.where == "CDMA.D_ZERO_PADDING.PAD_BOTTOM"


def test_big_input_needs_data_banks():
    """A legal layer whose extended input does not fit one data bank is refused with D_BANK.DATA_BANK."""
    lay = layer("int16", c=64, h=28, w=28, k=1, pad=(2, 2, 2, 2), out_hw=(28, 28), lim=4)
    program = pw.program_winograd(NV_FULL, lay)
    assert program.run(Dla(NV_FULL))  # 32 lines of 32 x 64 int16 = 1024 entries: four banks, programmed so
    with pytest.raises(ConfigError, match="DATA_BANK"):
        run_program(NV_FULL, lay, CDMA__D_BANK=dict(DATA_BANK=0), CSC__D_BANK=dict(DATA_BANK=0))


@pytest.mark.parametrize("config", ["nv_small", "nv_large"])
def test_configs_without_winograd_refuse_it(config):
    hw = get_config(config)
    assert not hw.winograd
    program = pw.program_winograd(NV_FULL, layer("int8"))
    dla = Dla(hw)
    with pytest.raises(UnsupportedError, match="Winograd") as info:
        for name, value in program.writes:
            dla.write_reg(dla.map.resolve(name)[0], value)
    assert info.value.unit in CONV_UNITS


@pytest.mark.parametrize("overrides, unit, text", [
    ({f"{u}__D_MISC_CFG": dict(PROC_PRECISION=2) for u in CONV_UNITS}
     | {f"{u}__D_MISC_CFG": dict(IN_PRECISION=2, PROC_PRECISION=2) for u in ("CDMA", "CSC")},
     "CDMA", "fp16"),
    ({"CDMA__D_CVT_CFG": dict(CVT_EN=1)}, "CDMA", "CVT"),
    ({"CACC__D_MISC_CFG": dict(PROC_PRECISION=1)}, "CACC", "mixed"),
])
def test_unmodelled_corners_are_unsupported(overrides, unit, text):
    with pytest.raises(UnsupportedError, match=text) as info:
        run_program(NV_FULL, layer("int8"), **overrides)
    assert info.value.unit == unit


def test_sdp_winograd_needs_a_winograd_conv():
    """A direct conv must not feed an SDP in Winograd mode (CACC sends raster order)."""
    lay = layer("int8")
    overrides = {f"{u}__D_MISC_CFG": dict(CONV_MODE=0) for u in CONV_UNITS}
    with pytest.raises(ConfigError, match="SDP.D_FEATURE_MODE_CFG.WINOGRAD"):
        run_program(NV_FULL, lay, **overrides)
