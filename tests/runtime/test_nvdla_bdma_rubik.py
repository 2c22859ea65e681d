"""BDMA and RUBIK through the firmware model (runtime.nvdla.engines.bdma / rubik): register values derived
by hand from kmd's bdma.c / rubik.c, and loadables built with LoadableBuilder run on the golden nv_full,
their outputs checked against numpy expectations written from the data-movement rules."""
from __future__ import annotations

import numpy as np
import pytest

from golden.config import get_config
from golden.regs import register_map
from runtime.golden_target import GoldenTarget
from runtime.nvdla import descriptors as d
from runtime.nvdla import fbs
from runtime.nvdla.engines import FirmwareError, FirmwareStep, Group, programmer_of
from runtime.nvdla.engines import bdma, rubik
from runtime.nvdla.run import NvdlaNetwork, NvdlaRunError
from runtime.nvdla.writer import LoadableBuilder

HW = get_config("nv_full")
BASE = 0x8000_0000


class Recorder(GoldenTarget):
    """The golden target, logging register traffic as (r/w, UNIT.REG, value)."""

    def __init__(self, hw=HW):
        super().__init__(hw)
        self.regmap = register_map(hw.address_map)
        self.log: list[tuple[str, str, int]] = []

    async def write_reg(self, addr, value):
        reg = self.regmap.lookup(addr)
        self.log.append(("w", f"{reg.unit}.{reg.name}", value))
        await super().write_reg(addr, value)

    async def read_reg(self, addr):
        value = await super().read_reg(addr)
        reg = self.regmap.lookup(addr)
        self.log.append(("r", f"{reg.unit}.{reg.name}", value))
        return value

    def index(self, kind: str, name: str, nth: int = 0) -> int:
        return [i for i, e in enumerate(self.log) if e[:2] == (kind, name)][nth]


def make_program(hw=HW) -> FirmwareStep:
    return FirmwareStep(regmap=register_map(hw.address_map), hw=hw, address_of=lambda i, off: BASE + 0x10000 * i + off,
                   lut=lambda i: d.LutParam(), where="op 3 (test)")


def run_engine(engine, op, surface, hw=HW, group_id=0) -> FirmwareStep:
    p = make_program(hw)
    engine.program(p, Group(id=group_id, rdma_id=0, index=3, op=op, surface=surface))
    return p


def rand(n: int, seed: int) -> bytes:
    return np.random.default_rng(seed).integers(0, 256, n, dtype=np.uint8).tobytes()


def transfer(src: int, dst: int, line=64, lines=2, src_line=64, dst_line=64, surfaces=1, src_surf=128,
             dst_surf=128) -> d.BdmaTransferDesc:
    return d.BdmaTransferDesc(source_address=src, destination_address=dst, line_size=line, line_repeat=lines,
                              source_line=src_line, destination_line=dst_line, surface_repeat=surfaces,
                              source_surface=src_surf, destination_surface=dst_surf)


def bdma_surface(*transfers: d.BdmaTransferDesc, src_type=d.MEM_MC, dst_type=d.MEM_MC) -> d.BdmaSurfaceDesc:
    s = d.BdmaSurfaceDesc(source_type=src_type, destination_type=dst_type, num_transfers=len(transfers))
    s.transfers[:len(transfers)] = list(transfers)
    return s


def raw_output(b: LoadableBuilder, index: int, name: str, size: int) -> None:
    """Mark buffer ``index`` an output (a 1x1x1 int8 tensor over the whole buffer, like NVDLA's BDMA test;
    the tests compare ``Output.data``, every byte of it)."""
    b.output(index, fbs.TensorDesc(name=name, id=0, mem_id=0, size=size, c=1, h=1, w=1,
                                   strides=[1, size, size, 0, 0, 0, 0, 0]))


def run(blob: bytes, target=None):
    target = target or GoldenTarget(HW)
    return NvdlaNetwork(fbs.parse(blob)).run(target), target


# ---- BDMA programming ----------------------------------------------------------------------------------------
def test_bdma_program_writes_one_slot_per_transfer():
    s = bdma_surface(transfer(4, 5, line=96, lines=3, src_line=128, dst_line=96, surfaces=2, src_surf=0x400,
                              dst_surf=0x300), transfer(6, 7), src_type=d.MEM_MC, dst_type=d.MEM_CV)
    p = run_engine(bdma.BDMA, d.BdmaOpDesc(num_transfers=2), s)
    assert p.writes[:13] == [
        ("BDMA", "CFG_SRC_ADDR_LOW", 0x8004_0000), ("BDMA", "CFG_SRC_ADDR_HIGH", 0),
        ("BDMA", "CFG_DST_ADDR_LOW", 0x8005_0000), ("BDMA", "CFG_DST_ADDR_HIGH", 0),
        ("BDMA", "CFG_LINE", 2),  # 96 bytes = 3 atoms, minus one
        ("BDMA", "CFG_CMD", 0b01),  # SRC_RAM_TYPE MC (1), DST_RAM_TYPE CVSRAM (0)
        ("BDMA", "CFG_LINE_REPEAT", 2), ("BDMA", "CFG_SRC_LINE", 128), ("BDMA", "CFG_DST_LINE", 96),
        ("BDMA", "CFG_SURF_REPEAT", 1), ("BDMA", "CFG_SRC_SURF", 0x400), ("BDMA", "CFG_DST_SURF", 0x300),
        ("BDMA", "CFG_OP", 1),
    ]
    assert len(p.writes) == 26 and p.writes[13] == ("BDMA", "CFG_SRC_ADDR_LOW", 0x8006_0000)
    assert p.polls == {0: ("BDMA", "STATUS", "FREE_SLOT"), 13: ("BDMA", "STATUS", "FREE_SLOT")}
    for gid, launch in ((0, ("BDMA", "CFG_LAUNCH0", 1)), (1, ("BDMA", "CFG_LAUNCH1", 1))):
        q = make_program()
        bdma.enable(q, Group(id=gid, rdma_id=0, index=3, op=d.BdmaOpDesc(), surface=s))
        assert q.writes == [launch]
    q = make_program()
    bdma.set_producer(q, 1, 0)
    assert q.writes == []  # no producer pointer


@pytest.mark.parametrize("change,message", [
    (dict(line_size=48), r"transfers\[0\]\.line_size 48 is not a positive multiple of 32"),
    (dict(line_repeat=0), r"transfers\[0\]\.line_repeat 0 outside 1\.\.8192"),
    (dict(source_line=32), r"transfers\[0\]\.source_line 32 is shorter than line_size 64"),
    (dict(destination_surface=64), r"transfers\[0\]\.destination_surface 64 is shorter than 2 lines of 64 bytes"),
])
def test_bdma_descriptor_checks(change, message):
    t = transfer(4, 5).replace(**change)
    with pytest.raises(FirmwareError, match=r"op 3 \(test\): " + message):
        run_engine(bdma.BDMA, d.BdmaOpDesc(), bdma_surface(t))
    too_many = bdma_surface(*[transfer(4, 5)] * 20)
    too_many.num_transfers = 21
    with pytest.raises(FirmwareError, match="num_transfers 21 is more than 20"):
        run_engine(bdma.BDMA, d.BdmaOpDesc(), too_many)
    with pytest.raises(FirmwareError, match="BDMA is not supported by nv_small"):
        run_engine(bdma.BDMA, d.BdmaOpDesc(), bdma_surface(transfer(4, 5)), hw=get_config("nv_small"))


def test_bdma_registration():
    e = programmer_of(d.OP_BDMA)
    assert e is bdma.BDMA and e.done_bit == 6 and e.rdma_pointer_unit is None
    assert e.pointer_register == "STATUS"
    assert e.consumer_of(1 << 9) == 1 and e.consumer_of(0x114) == 0  # GRP0_BUSY -> group 1
    busy, idle = Group(0, 0, 0, None, None, active=False), Group(1, 0, 1, None, None, active=True)
    assert not bdma.is_ready(idle, busy)  # the other group is programmed, not launched
    assert bdma.is_ready(busy, idle) and bdma.is_ready(busy, None)


# ---- BDMA loadables ------------------------------------------------------------------------------------------
def test_bdma_loadable_copies_strided_lines():
    """One op, two transfers (the second into CV-SRAM and, by a second op, back): every line lands where the
    descriptor says and the gaps stay zero."""
    src = rand(0x800, 1)
    b = LoadableBuilder()
    s = b.buffer("src", 0x800, src)
    out = b.buffer("out", 0x800)
    cv = b.buffer("cv", 0x800, cvsram=True)
    back = b.buffer("back", 0x800)
    # 2 surfaces x 3 lines of 64 bytes, source lines 128 apart, destination packed
    b.op(d.OP_BDMA, d.BdmaOpDesc(num_transfers=1),
         bdma_surface(transfer(s, out, line=64, lines=3, src_line=128, dst_line=64, surfaces=2, src_surf=0x400,
                               dst_surf=0x200)))
    b.op(d.OP_BDMA, d.BdmaOpDesc(num_transfers=1),
         bdma_surface(transfer(s, cv, line=0x800, lines=1, src_line=0x800, dst_line=0x800, src_surf=0x800,
                               dst_surf=0x800), dst_type=d.MEM_CV))
    b.op(d.OP_BDMA, d.BdmaOpDesc(num_transfers=1),
         bdma_surface(transfer(cv, back, line=0x800, lines=1, src_line=0x800, dst_line=0x800, src_surf=0x800,
                               dst_surf=0x800), src_type=d.MEM_CV), after=[1])
    raw_output(b, out, "out", 0x800)
    raw_output(b, back, "back", 0x800)
    rec = Recorder()
    result, _ = run(b.build(), rec)
    want = np.zeros(0x800, np.uint8)
    x = np.frombuffer(src, np.uint8)
    for surf in range(2):
        for line in range(3):
            want[surf * 0x200 + line * 64:][:64] = x[surf * 0x400 + line * 128:][:64]
    assert result.outputs[0].data == want.tobytes()
    assert result.outputs[1].data == src
    assert result.tasks[0].stats.ops == {"BDMA": 3}
    launches = [e[1] for e in rec.log if e[1].startswith("BDMA.CFG_LAUNCH")]
    assert launches == ["BDMA.CFG_LAUNCH0", "BDMA.CFG_LAUNCH1", "BDMA.CFG_LAUNCH0"]
    # kmd waits for a free slot before each transfer: a STATUS read right before each CFG_SRC_ADDR_LOW
    for n in range(3):
        at = rec.index("w", "BDMA.CFG_SRC_ADDR_LOW", n)
        assert rec.log[at - 1][:2] == ("r", "BDMA.STATUS") and rec.log[at - 1][2] & 0xFF == 20
    assert not any(e[1] == "BDMA.S_POINTER" for e in rec.log)


def test_bdma_group_waits_until_the_other_is_launched():
    """Op 0 waits for a RUBIK op; op 1 (independent) gets group 1 but may only be programmed once group 0 is
    launched, because both would queue into the same slots."""
    b = LoadableBuilder()
    data = rand(0x100, 2)
    s = b.buffer("src", 0x100, data)
    o0, o1 = b.buffer("o0", 0x100), b.buffer("o1", 0x100)
    r_in, r_out = b.buffer("r_in", 32, rand(32, 3)), b.buffer("r_out", 32)
    rbk = d.RubikSurfaceDesc(src_data=d.DataCube(address=r_in, width=1, height=1, channel=1, line_stride=32,
                                                  surf_stride=32),
                             dst_data=d.DataCube(address=r_out, width=1, height=1, channel=1, line_stride=32,
                                                 surf_stride=32))
    first = b.op(d.OP_RUBIK, d.RubikOpDesc(mode=rubik.CONTRACT, precision=0, stride_x=1, stride_y=1), rbk)
    whole = dict(line=0x100, lines=1, src_line=0x100, dst_line=0x100, src_surf=0x100, dst_surf=0x100)
    b.op(d.OP_BDMA, d.BdmaOpDesc(num_transfers=1), bdma_surface(transfer(s, o0, **whole)), after=[first])
    b.op(d.OP_BDMA, d.BdmaOpDesc(num_transfers=1), bdma_surface(transfer(s, o1, **whole)))
    raw_output(b, o0, "o0", 0x100)
    raw_output(b, o1, "o1", 0x100)
    rec = Recorder()
    result, _ = run(b.build(), rec)
    assert [o.data for o in result.outputs] == [data, data]
    assert rec.index("w", "BDMA.CFG_OP", 0) < rec.index("w", "RBK.D_OP_ENABLE") < rec.index("w", "BDMA.CFG_LAUNCH0")
    assert rec.index("w", "BDMA.CFG_LAUNCH0") < rec.index("w", "BDMA.CFG_OP", 1) < rec.index("w", "BDMA.CFG_LAUNCH1")


def test_a_bdma_op_without_transfers_completes_by_itself():
    b = LoadableBuilder()
    data = rand(64, 4)
    s, o = b.buffer("src", 64, data), b.buffer("out", 64)
    b.op(d.OP_BDMA, d.BdmaOpDesc(num_transfers=0), bdma_surface())
    b.op(d.OP_BDMA, d.BdmaOpDesc(num_transfers=1),
         bdma_surface(transfer(s, o, line=64, lines=1, src_line=64, dst_line=64, src_surf=64, dst_surf=64)), after=[0])
    raw_output(b, o, "out", 64)
    rec = Recorder()
    result, _ = run(b.build(), rec)
    assert result.outputs[0].data == data and result.tasks[0].stats.ops == {"BDMA": 2}
    assert [e[1] for e in rec.log if "LAUNCH" in e[1]] == ["BDMA.CFG_LAUNCH1"]  # the empty op launches nothing
    assert result.tasks[0].stats.interrupts == 1


# ---- RUBIK ---------------------------------------------------------------------------------------------------
def cube(address: int, w: int, h: int, c: int, line: int, surf: int = 0, plane: int = 0, type_=d.MEM_MC,
         offset: int = 0) -> d.DataCube:
    return d.DataCube(type=type_, address=address, offset=offset, width=w, height=h, channel=c, line_stride=line,
                      surf_stride=surf, plane_stride=plane)


def value(p: FirmwareStep, name: str) -> int:
    hits = [v for u, n, v in p.writes if (u, n) == ("RBK", name)]
    assert len(hits) == 1, name
    return hits[0]


def test_rubik_contract_registers():
    """int16, 17 output channels (2 surfaces), strides 10 x 4: kmd's derived contract strides."""
    op = d.RubikOpDesc(mode=rubik.CONTRACT, precision=1, stride_x=10, stride_y=4)
    s = d.RubikSurfaceDesc(src_data=cube(4, 8, 8, 1280, 256, 2048, offset=0x40),
                           dst_data=cube(5, 80, 32, 17, 2560, 81920, type_=d.MEM_CV))
    p = run_engine(rubik.RUBIK, op, s)
    assert value(p, "D_MISC_CFG") == 0 | (1 << 8)  # CONTRACT, INT16
    assert value(p, "D_DAIN_RAM_TYPE") == 1 and value(p, "D_DAOUT_RAM_TYPE") == 0  # MCIF in, CVIF out
    assert value(p, "D_DATAIN_SIZE_0") == 7 | (7 << 16) and value(p, "D_DATAIN_SIZE_1") == 1279
    assert value(p, "D_DAIN_ADDR_LOW") == 0x8004_0040 and value(p, "D_DAOUT_ADDR_LOW") == 0x8005_0000
    assert value(p, "D_DAIN_SURF_STRIDE") == 2048 and value(p, "D_DAIN_LINE_STRIDE") == 256
    assert value(p, "D_DATAOUT_SIZE_1") == 16 and value(p, "D_DAOUT_SURF_STRIDE") == 81920
    assert value(p, "D_CONTRACT_STRIDE_0") == 2 * 2048  # ceil(17 * 2 / 32) surfaces x 2048
    assert value(p, "D_CONTRACT_STRIDE_1") == 4 * 2560
    assert value(p, "D_DECONV_STRIDE") == 9 | (3 << 16)
    assert not any(n in ("D_DAIN_PLANAR_STRIDE", "D_DAOUT_PLANAR_STRIDE") for _, n, _ in p.writes)
    q = make_program()
    rubik.set_producer(q, 1, 0)
    rubik.enable(q, None)
    assert q.writes == [("RBK", "S_POINTER", 1), ("RBK", "D_OP_ENABLE", 1)]


def test_rubik_split_and_merge_registers():
    s = d.RubikSurfaceDesc(src_data=cube(4, 5, 3, 40, 160, 480, plane=0x200), dst_data=cube(5, 5, 3, 40, 32, 96,
                                                                                           plane=0x100))
    split = run_engine(rubik.RUBIK, d.RubikOpDesc(mode=rubik.SPLIT, precision=2), s)
    assert value(split, "D_MISC_CFG") == 1 | (2 << 8)
    assert value(split, "D_DAIN_SURF_STRIDE") == 480 and value(split, "D_DAOUT_PLANAR_STRIDE") == 0x100
    assert not any(n in ("D_DAOUT_SURF_STRIDE", "D_CONTRACT_STRIDE_0", "D_DECONV_STRIDE") for _, n, _ in split.writes)
    merge = run_engine(rubik.RUBIK, d.RubikOpDesc(mode=rubik.MERGE, precision=0), s)
    assert value(merge, "D_DAIN_PLANAR_STRIDE") == 0x200 and value(merge, "D_DAOUT_SURF_STRIDE") == 96
    assert not any(n in ("D_DAIN_SURF_STRIDE", "D_CONTRACT_STRIDE_1") for _, n, _ in merge.writes)


@pytest.mark.parametrize("op,surface,message", [
    (d.RubikOpDesc(mode=2), d.RubikSurfaceDesc(src_data=cube(4, 1, 1, 1, 32, plane=16), dst_data=cube(5, 1, 1, 1, 32)),
     "merge needs src_data.plane_stride a non-zero multiple of 32, not 16"),
    (d.RubikOpDesc(mode=0, stride_x=0, stride_y=1),
     d.RubikSurfaceDesc(src_data=cube(4, 1, 1, 1, 32), dst_data=cube(5, 1, 1, 1, 32)), "stride_x 0 outside 1..32"),
    (d.RubikOpDesc(mode=3), d.RubikSurfaceDesc(src_data=cube(4, 1, 1, 1, 32), dst_data=cube(5, 1, 1, 1, 32)),
     "mode 3 out of range"),
    (d.RubikOpDesc(mode=1), d.RubikSurfaceDesc(src_data=cube(4, 1, 1, 1, 32, type_=d.MEM_HW),
                                               dst_data=cube(5, 1, 1, 1, 32)), "src_data must be in memory"),
    (d.RubikOpDesc(mode=1), d.RubikSurfaceDesc(src_data=cube(4, 0, 1, 1, 32), dst_data=cube(5, 1, 1, 1, 32)),
     "src_data.width 0 outside 1..8192"),
])
def test_rubik_descriptor_checks(op, surface, message):
    with pytest.raises(FirmwareError, match=r"op 3 \(test\): " + message):
        run_engine(rubik.RUBIK, op, surface)


def _pack(x: np.ndarray, per_atom: int) -> np.ndarray:
    """(C, H, W, e) element bytes -> (surfaces, H, W, 32) atoms, padding lanes zero."""
    c, h, w, e = x.shape
    s = -(-c // per_atom)
    lanes = np.zeros((s * per_atom, h, w, e), np.uint8)
    lanes[:c] = x
    return lanes.reshape(s, per_atom, h, w, e).transpose(0, 2, 3, 1, 4).reshape(s, h, w, 32)


@pytest.mark.parametrize("precision", [0, 1, 2])
def test_rubik_loadable_contract_then_split_then_merge(precision):
    """A deconvolution-style contract (2 x 3 strides), split into planes, merged back: the contract output
    is the input's stride groups interleaved, and split + merge return it unchanged."""
    e = 1 if precision == 0 else 2
    per_atom = 32 // e
    c, h, w, sx, sy = per_atom + 5, 2, 3, 2, 3  # 2 output surfaces
    s_out = 2
    rng = np.random.default_rng(precision)
    groups = rng.integers(0, 256, (sx * sy, s_out * per_atom, h, w, e), dtype=np.uint8)
    groups[:, c:] = 0  # padding lanes of each group are zeros in memory
    x_in = np.concatenate([_pack(g, per_atom) for g in groups])  # (sx*sy*s_out, h, w, 32)
    in_line, in_surf = w * 32, h * w * 32
    ow, oh = w * sx, h * sy
    out_line, out_surf = ow * 32, oh * ow * 32
    plane_line = -(-ow * e // 32) * 32
    b = LoadableBuilder()
    src = b.buffer("src", x_in.size, x_in.tobytes())
    mid = b.buffer("mid", s_out * out_surf)
    planes = b.buffer("planes", c * oh * plane_line)
    back = b.buffer("back", s_out * out_surf)
    b.op(d.OP_RUBIK, d.RubikOpDesc(mode=rubik.CONTRACT, precision=precision, stride_x=sx, stride_y=sy),
         d.RubikSurfaceDesc(src_data=cube(src, w, h, sx * sy * s_out * per_atom, in_line, in_surf),
                            dst_data=cube(mid, ow, oh, c, out_line, out_surf)))
    b.op(d.OP_RUBIK, d.RubikOpDesc(mode=rubik.SPLIT, precision=precision),
         d.RubikSurfaceDesc(src_data=cube(mid, ow, oh, c, out_line, out_surf),
                            dst_data=cube(planes, ow, oh, c, plane_line, plane=oh * plane_line)), after=[0])
    b.op(d.OP_RUBIK, d.RubikOpDesc(mode=rubik.MERGE, precision=precision),
         d.RubikSurfaceDesc(src_data=cube(planes, ow, oh, c, plane_line, plane=oh * plane_line),
                            dst_data=cube(back, ow, oh, c, out_line, out_surf)), after=[1])
    dtype = {0: 4, 1: 3, 2: 2}[precision]  # tensor data types INT8, INT16, HALF
    for index, name in ((mid, "mid"), (back, "back")):
        b.output(index, fbs.TensorDesc(name=name, id=0, mem_id=0, size=s_out * out_surf, data_type=dtype, c=c,
                                       h=oh, w=ow, strides=[e, out_line, out_surf, 0, 0, 0, 0, 0]))
    result, _ = run(b.build())
    assert result.tasks[0].stats.ops == {"RUBIK": 3}
    mid_atoms = np.frombuffer(result.outputs[0].data, np.uint8).reshape(s_out, oh, ow, 32)
    for j in range(sy):
        for i in range(sx):
            group = x_in.reshape(sx * sy, s_out, h, w, 32)[j * sx + i]
            assert np.array_equal(mid_atoms[:, j::sy, i::sx], group), (j, i)
    assert result.outputs[1].data == result.outputs[0].data
    assert result.outputs[0].dimg()[:4] == b"DIMG"


def test_rubik_needs_a_config_with_rubik():
    b = LoadableBuilder()
    s, o = b.buffer("s", 64), b.buffer("o", 64)
    b.op(d.OP_RUBIK, d.RubikOpDesc(mode=rubik.MERGE, precision=0),
         d.RubikSurfaceDesc(src_data=cube(s, 1, 1, 1, 32, plane=32), dst_data=cube(o, 1, 1, 1, 32, 32)))
    raw_output(b, o, "o", 64)
    with pytest.raises(NvdlaRunError, match="RBK|RUBIK"):
        run(b.build(), GoldenTarget(get_config("nv_small")))
    with pytest.raises(FirmwareError, match="RUBIK is not supported by nv_small"):
        run_engine(rubik.RUBIK, d.RubikOpDesc(mode=2), d.RubikSurfaceDesc(src_data=cube(4, 1, 1, 1, 32, plane=32),
                                                                         dst_data=cube(5, 1, 1, 1, 32)),
                   hw=get_config("nv_small"))
