from __future__ import annotations

import sys
from pathlib import Path

import pytest

from golden.errors import RegisterError
from golden.regs import UNITS, RegView, register_map

REPO = Path(__file__).resolve().parents[2]


def test_generated_table_is_up_to_date(spec_root):
    sys.path.insert(0, str(REPO / "tools"))
    try:
        import gen_regs
    finally:
        sys.path.pop(0)
    fresh = gen_regs.generate(spec_root / "manual")
    assert fresh == (REPO / "golden" / "regs" / "_table.py").read_text(), "run `make regen-regs`"


@pytest.mark.parametrize(
    "kind,name,addr",
    [
        ("small", "NVDLA_PDP.D_DATA_CUBE_OUT_WIDTH_0", 0xB018),
        ("full", "NVDLA_PDP.D_DATA_CUBE_OUT_WIDTH_0", 0xD018),
        ("small", "NVDLA_GLB.S_INTR_STATUS_0", 0x100C),
        ("full", "NVDLA_BDMA.CFG_DST_SURF_0", 0x402C),
        ("small", "NVDLA_CDMA.S_CBUF_FLUSH_STATUS_0", 0x300C),
    ],
)
def test_nvdla_names_resolve_to_addresses(kind, name, addr):
    got, reg = register_map(kind).resolve(name)
    assert got == addr
    assert reg.full_name == name
    assert register_map(kind).lookup(addr) is reg


def test_every_unit_of_both_maps_has_registers_and_no_overlap():
    for kind in ("small", "full"):
        m = register_map(kind)
        addrs = [a for a, _ in m.registers()]
        assert len(addrs) == len(set(addrs))
        for unit in m.bases:
            assert UNITS[unit].registers, unit


def test_field_encode_decode_and_enums():
    reg = UNITS["PDP"].register("D_POOLING_KERNEL_CFG")
    word = reg.encode(KERNEL_WIDTH="KERNEL_WIDTH_3", KERNEL_HEIGHT=1, KERNEL_STRIDE_WIDTH=1)
    assert word == 0x10102
    assert reg.decode(word) == {"KERNEL_WIDTH": 2, "KERNEL_HEIGHT": 1, "KERNEL_STRIDE_WIDTH": 1, "KERNEL_STRIDE_HEIGHT": 0}
    with pytest.raises(RegisterError):
        reg.encode(KERNEL_WIDTH=16)
    f = UNITS["SDP"].register("D_DP_BS_ALU_SRC_VALUE").field("BS_ALU_OPERAND")
    assert f.decode_signed(0xFFFF) == -1 and f.decode(0xFFFF) == 0xFFFF


def test_ping_pong_boundary_is_d_op_enable():
    assert UNITS["SDP"].op_enable_offset == 0x38
    assert UNITS["CDP"].op_enable_offset == 0x48
    assert UNITS["CDMA"].op_enable_offset == 0x10
    assert UNITS["PDP"].op_enable_offset == 0x8
    assert UNITS["GLB"].op_enable_offset is None and UNITS["BDMA"].op_enable_offset is None


def test_unknown_names_raise_register_error():
    m = register_map("small")
    with pytest.raises(RegisterError, match="NOPE"):
        m.resolve("NVDLA_PDP.D_NOPE_0")
    with pytest.raises(RegisterError, match="unit"):
        m.resolve("NVDLA_XYZ.D_OP_ENABLE_0")


def test_view_reads_fields_and_names_them_in_errors():
    reg = UNITS["PDP"].register("D_POOLING_KERNEL_CFG")
    view = RegView(UNITS["PDP"], {reg.offset: 0x0000_0B07})
    assert view.D_POOLING_KERNEL_CFG.KERNEL_WIDTH == 7
    assert view.D_POOLING_KERNEL_CFG.KERNEL_HEIGHT == 0xB
    err = view.D_POOLING_KERNEL_CFG.fail("KERNEL_HEIGHT", "kernel height 12 > 8")
    assert str(err).startswith("PDP.D_POOLING_KERNEL_CFG.KERNEL_HEIGHT:")
    assert view.D_DATA_CUBE_IN_WIDTH.CUBE_IN_WIDTH == 0  # reset value when never written
