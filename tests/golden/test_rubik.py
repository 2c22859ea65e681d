"""RUBIK in the golden model: contract, split and merge in each precision, with expectations written out
by hand from the byte-address rules (NVDLA_NOTES §4 RUBIK, ``cmod/rubik/NV_NVDLA_rbk.cpp``), the
request order where writes overlap, RAM types, groups and done bits, and every legality error."""
from __future__ import annotations

import numpy as np
import pytest

from golden import ConfigError, Dla, UnsupportedError, get_config
from golden.engines import load_engines, rubik
from golden.regs import UNITS

SRC, DST = 0x8000_0000, 0x8100_0000
PRECISION = {"int8": 0, "int16": 1, "fp16": 2}
MODE = {"contract": 0, "split": 1, "merge": 2}


@pytest.fixture
def dla():
    return Dla(get_config("nv_full"))


def program(dla, mode, precision="int8", *, w=1, h=1, c_in=1, c_out=1, src=SRC, dst=DST, src_line=0, src_surf=0,
            src_planar=0, dst_line=0, dst_surf=0, dst_planar=0, cs0=None, cs1=0, sx=1, sy=1, src_ram=1, dst_ram=1,
            enable=True):
    """Write one operation into the producer group (sizes are counts; addresses and strides bytes). The
    contract stride 0 defaults to what kmd programs: output surfaces x input surface stride."""
    per_atom = 32 if precision == "int8" else 16
    if cs0 is None:
        cs0 = -(-c_out // per_atom) * src_surf
    wr = dla.write
    wr("NVDLA_RBK.D_MISC_CFG_0", RUBIK_MODE=MODE[mode], IN_PRECISION=PRECISION[precision])
    wr("NVDLA_RBK.D_DAIN_RAM_TYPE_0", DATAIN_RAM_TYPE=src_ram)
    wr("NVDLA_RBK.D_DAOUT_RAM_TYPE_0", DATAOUT_RAM_TYPE=dst_ram)
    wr("NVDLA_RBK.D_DATAIN_SIZE_0_0", DATAIN_WIDTH=w - 1, DATAIN_HEIGHT=h - 1)
    wr("NVDLA_RBK.D_DATAIN_SIZE_1_0", DATAIN_CHANNEL=c_in - 1)
    wr("NVDLA_RBK.D_DATAOUT_SIZE_1_0", DATAOUT_CHANNEL=c_out - 1)
    for name, addr in (("DAIN", src), ("DAOUT", dst)):
        wr(f"NVDLA_RBK.D_{name}_ADDR_LOW_0", addr & 0xFFFF_FFFF)
        wr(f"NVDLA_RBK.D_{name}_ADDR_HIGH_0", addr >> 32)
    for reg, v in (("DAIN_LINE_STRIDE", src_line), ("DAIN_SURF_STRIDE", src_surf), ("DAIN_PLANAR_STRIDE", src_planar),
                   ("DAOUT_LINE_STRIDE", dst_line), ("DAOUT_SURF_STRIDE", dst_surf),
                   ("DAOUT_PLANAR_STRIDE", dst_planar), ("CONTRACT_STRIDE_0", cs0), ("CONTRACT_STRIDE_1", cs1)):
        wr(f"NVDLA_RBK.D_{reg}_0", v)
    wr("NVDLA_RBK.D_DECONV_STRIDE_0", DECONV_X_STRIDE=sx - 1, DECONV_Y_STRIDE=sy - 1)
    if enable:
        wr("NVDLA_RBK.D_OP_ENABLE_0", OP_EN=1)


def tagged_atoms(n: int) -> np.ndarray:
    """n atoms, atom k holding bytes (k, 0, 1, ..., 30): each atom identifies itself by its first byte."""
    atoms = np.tile(np.arange(-1, 31, dtype=np.int64), (n, 1))
    atoms[:, 0] = np.arange(n)
    return (atoms & 0xFF).astype(np.uint8)


def atom_tags(data: np.ndarray) -> np.ndarray:
    atoms = data.reshape(-1, 32)
    assert (atoms[:, 1:] == np.arange(31, dtype=np.uint8)).all() or not atoms.any(), "atoms copied whole"
    return atoms[:, 0].astype(np.int64)


def random_bytes(n: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(1, 256, n, dtype=np.uint8)  # never 0: zero fill shows


# ---- registration ----------------------------------------------------------------------------------------
def test_registration_comes_from_the_register_table():
    eng = load_engines()["RUBIK"]
    glb = UNITS["GLB"].register("S_INTR_STATUS")
    assert eng.units == ("RBK",) and eng.rdma is None and eng.queue is None
    assert eng.done_bits == (("RBK", glb.field("RUBIK_DONE_STATUS0").lsb),)
    assert glb.field("RUBIK_DONE_STATUS1").lsb == eng.done_bits[0][1] + 1


# ---- contract ----------------------------------------------------------------------------------------------
def test_contract_int8_interleaves_stride_groups(dla):
    """sx=2, sy=2, one output surface, 3x2 input: input surface (j*2 + i) at (w, h) lands at output
    column w*2 + i of line h*2 + j."""
    w, h = 3, 2
    src_line, src_surf = w * 32, h * w * 32
    dla.mem.dram.write(SRC, tagged_atoms(4 * h * w))  # 4 surfaces x 2 lines x 3 atoms, tags 0..23
    dst_line = 2 * w * 32
    program(dla, "contract", w=w, h=h, c_in=128, c_out=32, src_line=src_line, src_surf=src_surf, dst_line=dst_line,
            cs1=2 * dst_line, dst_surf=0x1000, sx=2, sy=2)
    got = atom_tags(dla.mem.dram.read(DST, 2 * h * 2 * w * 32)).reshape(2 * h, 2 * w)
    want = np.empty((2 * h, 2 * w), dtype=np.int64)
    for hh in range(h):
        for j in range(2):
            for ww in range(w):
                for i in range(2):
                    want[hh * 2 + j, ww * 2 + i] = (j * 2 + i) * h * w + hh * w + ww
    assert np.array_equal(got, want)
    assert dla.read("NVDLA_GLB.S_INTR_STATUS_0") == 1 << 8


@pytest.mark.parametrize("precision", ["int16", "fp16"])
def test_contract_16bit_two_surfaces_wide_stride_and_super_lines(dla, precision):
    """17 int16/fp16 channels are 2 output surfaces of 16; sx=10 (the cmod's >8 request path), sy=1;
    CONTRACT_STRIDE_1 leaves a gap between the output lines of consecutive input rows."""
    w, h, sx = 2, 2, 10
    s_out = 2
    src_line, src_surf = 64, 128
    n_in = sx * s_out  # input surfaces
    dla.mem.dram.write(SRC, tagged_atoms(n_in * h * w))
    dst_line, cs1, dst_surf = 0x400, 0x800, 0x2000
    program(dla, "contract", precision, w=w, h=h, c_out=17, src_line=src_line, src_surf=src_surf,
            dst_line=dst_line, cs1=cs1, dst_surf=dst_surf, sx=sx)
    for s in range(s_out):
        for hh in range(h):
            line = atom_tags(dla.mem.dram.read(DST + s * dst_surf + hh * cs1, w * sx * 32))
            want = [((i * s_out + s) * h + hh) * w + ww for ww in range(w) for i in range(sx)]
            assert line.tolist() == want
        assert not dla.mem.dram.read(DST + s * dst_surf + cs1 - 32, 32).any(), "the gap is not written"


def test_contract_ignores_datain_channel_and_low_address_bits(dla):
    dla.mem.dram.write(SRC, tagged_atoms(2))
    program(dla, "contract", w=1, c_in=8000, c_out=1, src=SRC | 0x1F, dst=DST | 0x10, src_surf=32 | 7, dst_line=64,
            sx=2, cs0=32)
    assert atom_tags(dla.mem.dram.read(DST, 64)).tolist() == [0, 1]


# ---- split --------------------------------------------------------------------------------------------------
def test_split_int8_pads_plane_lines_with_zeros(dla):
    """3 channels of a 2x5 cube to 3 planes: each plane line is its 5 bytes then 27 zeros; lanes past the
    output channels are not written (the destination keeps its bytes there)."""
    c, h, w = 3, 2, 5
    cube = random_bytes(h * w * 32, 1).reshape(h, w, 32)
    dla.mem.dram.write(SRC, cube)
    garbage = random_bytes(0x400, 2)
    dla.mem.dram.write(DST, garbage)
    program(dla, "split", w=w, h=h, c_in=c, c_out=c, src_line=w * 32, src_surf=h * w * 32, dst_line=32,
            dst_planar=64)
    out = dla.mem.dram.read(DST, 0x400)
    for ch in range(c):
        for y in range(h):
            line = out[ch * 64 + y * 32:][:32]
            assert np.array_equal(line[:w], cube[y, :, ch]) and not line[w:].any()
    assert np.array_equal(out[c * 64:], garbage[c * 64:])


def test_split_int16_two_chunks_and_second_surface(dla):
    """70 int16 elements per line are two requests (64 + 6): 128 + 32 bytes, the last 20 of them zero;
    18 channels are 2 surfaces of 16."""
    c, w = 18, 70
    cube = random_bytes(2 * w * 32, 3).reshape(2, w, 16, 2)  # (surface, x, lane, byte)
    dla.mem.dram.write(SRC, cube)
    planar = 0x100
    program(dla, "split", "int16", w=w, c_in=c, c_out=c, src_line=w * 32, src_surf=w * 32, dst_planar=planar)
    for ch in range(c):
        line = dla.mem.dram.read(DST + ch * planar, 160)
        assert np.array_equal(line[:140], cube[ch // 16, :, ch % 16, :].reshape(-1))
        assert not line[140:].any()
    assert not dla.mem.dram.read(DST + c * planar, planar).any()


def test_split_overlapping_planes_keep_the_last_request(dla):
    """Planar stride 0: every plane writes the same line, and the last channel's request wins."""
    dla.mem.dram.write(SRC, random_bytes(4 * 32, 4))
    program(dla, "split", w=4, c_in=3, c_out=3, src_line=128, dst_planar=0)
    cube = dla.mem.dram.read(SRC, 128).reshape(4, 32)
    line = dla.mem.dram.read(DST, 32)
    assert np.array_equal(line[:4], cube[:, 2]) and not line[4:].any()


# ---- merge --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("precision", ["int8", "fp16"])
def test_merge_builds_atoms_and_zeroes_missing_lanes(dla, precision):
    e = 1 if precision == "int8" else 2
    per_atom = 32 // e
    c, h, w = per_atom + 3, 2, 6  # a full surface and 3 channels of a second one
    planar, line = 0x200, 0x40
    planes = random_bytes(c * planar, 5)
    dla.mem.dram.write(SRC, planes)
    dla.mem.dram.write(DST, random_bytes(0x1000, 6))
    dst_line, dst_surf = w * 32, 0x400
    program(dla, "merge", precision, w=w, h=h, c_in=c, c_out=1, src_line=line, src_planar=planar,
            dst_line=dst_line, dst_surf=dst_surf)
    p = planes.reshape(c, planar)
    for s in range(2):
        for y in range(h):
            atoms = dla.mem.dram.read(DST + s * dst_surf + y * dst_line, w * 32).reshape(w, per_atom, e)
            for lane in range(per_atom):
                ch = s * per_atom + lane
                want = p[ch, y * line:][: w * e].reshape(w, e) if ch < c else np.zeros((w, e), np.uint8)
                assert np.array_equal(atoms[:, lane, :], want), (s, y, lane)


def test_merge_then_split_is_the_identity_on_planes(dla):
    c, h, w = 40, 3, 9
    planar, line = 0x100, 32
    planes = random_bytes(c * h * w, 7).reshape(c, h, w)
    for ch in range(c):
        for y in range(h):
            dla.mem.dram.write(SRC + ch * planar + y * line, planes[ch, y])
    mid = 0x9000_0000
    program(dla, "merge", w=w, h=h, c_in=c, src_line=line, src_planar=planar, dst=mid, dst_line=w * 32,
            dst_surf=h * w * 32)
    dla.write("NVDLA_RBK.S_POINTER_0", PRODUCER=1)  # the consumer moved on to group 1
    program(dla, "split", w=w, h=h, c_in=c, c_out=c, src=mid, src_line=w * 32, src_surf=h * w * 32, dst_line=line,
            dst_planar=planar)
    assert dla.read("NVDLA_GLB.S_INTR_STATUS_0") == (1 << 8) | (1 << 9)
    for ch in range(c):
        for y in range(h):
            assert np.array_equal(dla.mem.dram.read(DST + ch * planar + y * line, w), planes[ch, y])
    assert dla.history == [(("RUBIK",), {"RBK": 0}), (("RUBIK",), {"RBK": 1})]


def test_groups_follow_the_producer_pointer(dla):
    dla.mem.dram.write(SRC, tagged_atoms(1))
    dla.write("NVDLA_RBK.S_POINTER_0", PRODUCER=1)
    program(dla, "contract", c_out=1, dst_line=32)
    assert dla.read("NVDLA_GLB.S_INTR_STATUS_0") == 0, "group 1 waits for the consumer (group 0)"
    dla.write("NVDLA_RBK.S_POINTER_0", PRODUCER=0)
    program(dla, "contract", c_out=1, dst=DST + 0x100, dst_line=32)
    assert dla.read("NVDLA_GLB.S_INTR_STATUS_0") == (1 << 8) | (1 << 9)
    assert [g for _, g in dla.history] == [{"RBK": 0}, {"RBK": 1}]
    assert atom_tags(dla.mem.dram.read(DST, 32)).tolist() == [0]


def test_cvsram_and_high_addresses(dla):
    data = random_bytes(2 * 32, 8)
    dla.mem.cvsram.write(0x5000_0000, data)
    program(dla, "merge", w=2, c_in=1, src=0x5000_0000, src_ram=0, dst=0x1_2000_0000, dst_ram=1, dst_line=64)
    out = dla.mem.dram.read(0x1_2000_0000, 64).reshape(2, 32)
    assert np.array_equal(out[:, 0], data[:2]) and not out[:, 1:].any()
    assert not dla.mem.dram.read(0x5000_0000, 64).any(), "the source is CV-SRAM, not DRAM"


# ---- errors --------------------------------------------------------------------------------------------------
def test_illegal_fields_name_their_register(dla):
    with pytest.raises(ConfigError, match=r"RBK\.D_MISC_CFG\.RUBIK_MODE: 3 is not a mode"):
        dla.write("NVDLA_RBK.D_MISC_CFG_0", RUBIK_MODE=3)
        dla.write("NVDLA_RBK.D_OP_ENABLE_0", OP_EN=1)
    fresh = Dla(get_config("nv_full"))
    with pytest.raises(ConfigError, match=r"RBK\.D_MISC_CFG\.IN_PRECISION: 3"):
        fresh.write("NVDLA_RBK.D_MISC_CFG_0", IN_PRECISION=3)
        fresh.write("NVDLA_RBK.D_OP_ENABLE_0", OP_EN=1)


def test_contract_stride_0_must_step_whole_stride_groups(dla):
    with pytest.raises(ConfigError, match=r"RBK\.D_CONTRACT_STRIDE_0\.CONTRACT_STRIDE_0: 32 bytes, but 2 output"):
        program(dla, "contract", c_out=33, src_surf=64, cs0=32, sx=2, dst_line=0x100, dst_surf=0x1000)


def test_split_channel_counts_must_fill_the_same_surfaces(dla):
    with pytest.raises(ConfigError, match=r"RBK\.D_DATAOUT_SIZE_1\.DATAOUT_CHANNEL: 33 planes fill 2 surface"):
        program(dla, "split", w=2, c_in=32, c_out=33, src_line=64, dst_planar=32)
    fine = Dla(get_config("nv_full"))
    program(fine, "split", w=2, c_in=20, c_out=32, src_line=64, dst_planar=32)  # same surface: padding lanes


def test_writes_onto_the_source_are_refused_but_other_memories_are_fine(dla):
    with pytest.raises(ConfigError, match=r"RBK\.D_DAOUT_ADDR_LOW\.DAOUT_ADDR_LOW: the output atom at 0x80000020"):
        program(dla, "split", w=2, c_in=1, c_out=1, src_line=64, dst=SRC + 32, dst_planar=32)
    other = Dla(get_config("nv_full"))
    program(other, "split", w=2, c_in=1, c_out=1, src_line=64, dst=SRC + 32, dst_ram=0, dst_planar=32)


def test_configs_without_rubik():
    """No RUBIK: its registers do not exist (the RBK unit); no contract or reshape half: the modes that
    need it are refused when they run."""
    for hw in (get_config("nv_small"), get_config("nv_full").derive(rubik=False)):
        with pytest.raises(UnsupportedError, match=f"{hw.name} has no RBK") as err:
            Dla(hw).write("NVDLA_RBK.D_MISC_CFG_0", 0)
        assert err.value.unit == "RBK"
    for changes, mode, match in (({"rubik_contract": False}, "contract", "RUBIK contract mode needs RUBIK_CONTRACT"),
                                 ({"rubik_reshape": False}, "split", "RUBIK split mode needs RUBIK_RESHAPE")):
        dla = Dla(get_config("nv_full").derive(**changes))
        with pytest.raises(UnsupportedError, match=match) as err:
            program(dla, mode, dst_line=32, dst_planar=32)
        assert err.value.unit == "RUBIK"
    no_cv = Dla(get_config("nv_full").derive(secondary_memif=False))
    with pytest.raises(UnsupportedError, match=r"RBK\.D_DAOUT_RAM_TYPE\.DATAOUT_RAM_TYPE selects CV-SRAM"):
        program(no_cv, "merge", dst_ram=0)
    int8_only = Dla(get_config("nv_full").derive(feature_types=("int8",)))
    with pytest.raises(UnsupportedError, match="RUBIK int16"):
        program(int8_only, "merge", "int16")


def test_one_atom_is_the_32_byte_granule_of_the_address_registers(dla):
    """RUBIK moves whole atoms of ``RUBIK_ATOM_CUBE_SIZE`` = 32 bytes, the granule of its address registers
    (DAIN/DAOUT_ADDR_LOW hold bits 31..5): a 1x1x1 int8 contract copies exactly the 32 bytes at the source
    address to the destination address and nothing past them."""
    for reg in ("D_DAIN_ADDR_LOW", "D_DAOUT_ADDR_LOW"):
        assert 1 << UNITS["RBK"].register(reg).field(reg[2:]).lsb == rubik.ATOM == 32
    data = random_bytes(64, seed=3)
    dla.mem.dram.write(SRC, data)
    program(dla, "contract", src_surf=32, dst_line=32, dst_surf=32, cs1=32)
    out = dla.mem.dram.read(DST, 64)
    np.testing.assert_array_equal(out[:32], data[:32])
    assert not out[32:].any()
