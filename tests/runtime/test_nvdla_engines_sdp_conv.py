"""SDP and convolution programming (runtime.nvdla.engines.sdp / conv) against register values derived by
hand from the firmware's sdp.c / conv.c."""
from __future__ import annotations

import pytest

from golden.config import get_config
from golden.regs import register_map
from runtime.nvdla.descriptors import (
    MEM_CV, MEM_HW, MEM_MC, OP_CONV, OP_SDP, ConvOpDesc, ConvSurfaceDesc, CvtParam, DataCube, LutParam, SdpOp,
    SdpOpDesc, SdpSurfaceDesc,
)
from runtime.nvdla.engines import FirmwareError, FirmwareStep, Group, programmer_of
from runtime.nvdla.engines import conv, sdp

BASE = 0x8000_0000


def make_program(config: str = "nv_small", hw=None) -> FirmwareStep:
    hw = hw or get_config(config)
    return FirmwareStep(regmap=register_map(hw.address_map), hw=hw,
                   address_of=lambda i, off: BASE + 0x10000 * i + off,
                   lut=lambda i: LutParam(), where="op 7 (test)")


def run(engine, op, surface, config: str = "nv_small", hw=None, group_id: int = 0) -> tuple[FirmwareStep, Group]:
    p = make_program(config, hw)
    g = Group(id=group_id, rdma_id=group_id, index=7, op=op, surface=surface)
    g.rdma_needed = engine.rdma_needed(op, surface)
    engine.program(p, g)
    return p, g


def value(p: FirmwareStep, unit: str, name: str) -> int:
    """The last value written to UNIT.NAME (the register must have been written)."""
    hits = [v for u, n, v in p.writes if (u, n) == (unit, name)]
    assert hits, f"{unit}.{name} not written"
    return hits[-1]


def written(p: FirmwareStep, unit: str, name: str) -> bool:
    return any((u, n) == (unit, name) for u, n, _ in p.writes)


def assert_registers_exist(p: FirmwareStep) -> None:
    for unit, name, v in p.writes:
        assert name in {r.name for r in p.regmap.unit(unit).registers}, (unit, name)
        assert 0 <= v <= 0xFFFFFFFF


def cube(type_=MEM_MC, address=-1, offset=0, w=0, h=0, c=0, line=0, surf=0, size=0) -> DataCube:
    return DataCube(type=type_, address=address, offset=offset, size=size, width=w, height=h, channel=c,
                    line_stride=line, surf_stride=surf)


# ---- SDP --------------------------------------------------------------------------------------------------
def sdp_bias_relu() -> tuple[SdpOpDesc, SdpSurfaceDesc]:
    """conv -> SDP on-the-fly, x1 = per-kernel int16 bias from memory (ADD) + ReLU, output to memory."""
    op = SdpOpDesc(src_precision=0, dst_precision=0, lut_index=-1, out_cvt=CvtParam(scale=1), batch_num=1,
                   x1_op=SdpOp(enable=1, alu_type=2, type=2, mode=1, act=1, precision=1))
    s = SdpSurfaceDesc(src_data=cube(MEM_HW, w=4, h=4, c=16),
                       x1_data=cube(MEM_MC, address=2, offset=0x100, w=1, h=1, c=16, line=32, surf=32),
                       dst_data=cube(MEM_MC, address=3, offset=0x40, w=4, h=4, c=16, line=32, surf=128))
    return op, s


def test_sdp_bias_relu_full_write_sequence():
    op, s = sdp_bias_relu()
    assert sdp.rdma_needed(op, s)  # on-the-fly source, but x1 is read from memory
    p, g = run(sdp.SDP, op, s)
    assert_registers_exist(p)
    assert p.writes == [
        ("SDP_RDMA", "D_FEATURE_MODE_CFG", 0),
        ("SDP_RDMA", "D_BRDMA_CFG", 0), ("SDP_RDMA", "D_NRDMA_CFG", 0), ("SDP_RDMA", "D_ERDMA_CFG", 0),
        ("SDP_RDMA", "D_FEATURE_MODE_CFG", 0x1),  # FLYING_MODE ON
        ("SDP_RDMA", "D_DATA_CUBE_WIDTH", 3), ("SDP_RDMA", "D_DATA_CUBE_HEIGHT", 3),
        ("SDP_RDMA", "D_DATA_CUBE_CHANNEL", 15),
        # enabled(0) | DATA_USE ALU(1<<1) | TWO_BYTE(1<<3) | PER_KERNEL(0) | RAM MC(1<<5)
        ("SDP_RDMA", "D_BRDMA_CFG", 0x2A),
        ("SDP_RDMA", "D_BS_BASE_ADDR_LOW", 0x8002_0100), ("SDP_RDMA", "D_BS_BASE_ADDR_HIGH", 0),
        ("SDP_RDMA", "D_BS_LINE_STRIDE", 32), ("SDP_RDMA", "D_BS_SURFACE_STRIDE", 32),
        # disabled x2/y: DISABLE YES | DATA_USE MUL | ONE_BYTE | per-layer -> PER_ELEMENT(1<<4) | MC(1<<5)
        ("SDP_RDMA", "D_NRDMA_CFG", 0x31), ("SDP_RDMA", "D_ERDMA_CFG", 0x31),
        ("SDP", "D_DATA_CUBE_WIDTH", 3), ("SDP", "D_DATA_CUBE_HEIGHT", 3), ("SDP", "D_DATA_CUBE_CHANNEL", 15),
        ("SDP", "D_DST_BASE_ADDR_HIGH", 0), ("SDP", "D_DST_BASE_ADDR_LOW", 0x8003_0040),
        ("SDP", "D_DST_LINE_STRIDE", 32), ("SDP", "D_DST_SURFACE_STRIDE", 128),
        # BS not bypassed, ALU used, ALGO SUM(2<<2), MUL bypassed(1<<4), ReLU not bypassed
        ("SDP", "D_DP_BS_CFG", 0x18),
        ("SDP", "D_DP_BS_ALU_CFG", 0x1),  # BS_ALU_SRC MEM, shift 0
        ("SDP", "D_DP_BS_MUL_CFG", 0x1),  # BS_MUL_SRC MEM, truncate 0
        ("SDP", "D_DP_BN_CFG", 0x53),  # everything bypassed
        ("SDP", "D_DP_EW_CFG", 0x53),
        ("SDP", "D_FEATURE_MODE_CFG", 0x1),  # FLYING_MODE ON, OUTPUT_DST MEM
        ("SDP", "D_DST_DMA_CFG", 0x1),  # MC
        ("SDP", "D_DATA_FORMAT", 0),
        ("SDP", "D_CVT_OFFSET", 0), ("SDP", "D_CVT_SCALE", 1), ("SDP", "D_CVT_SHIFT", 0),
    ]
    assert g.lut_index == -1
    e = make_program()
    sdp.SDP.enable(e, g)
    assert e.writes == [("SDP_RDMA", "D_OP_ENABLE", 1), ("SDP", "D_OP_ENABLE", 1)]


def test_sdp_x2_per_layer_mul_from_memory_to_pdp():
    op = SdpOpDesc(src_precision=0, dst_precision=0, lut_index=-1, out_cvt=CvtParam(scale=1, offset=-3, truncate=4),
                   batch_num=1, x2_op=SdpOp(enable=1, type=1, mode=0, mul_operand=3, truncate=2))
    s = SdpSurfaceDesc(src_data=cube(MEM_MC, address=1, w=8, h=8, c=8, line=64, surf=512),
                       dst_data=cube(MEM_HW, w=8, h=8, c=8))
    assert sdp.rdma_needed(op, s)  # source in memory
    p, g = run(sdp.SDP, op, s)
    assert_registers_exist(p)
    assert value(p, "SDP_RDMA", "D_SRC_BASE_ADDR_LOW") == 0x8001_0000
    assert value(p, "SDP_RDMA", "D_SRC_BASE_ADDR_HIGH") == 0
    assert value(p, "SDP_RDMA", "D_SRC_DMA_CFG") == 1  # MC
    assert value(p, "SDP_RDMA", "D_FEATURE_MODE_CFG") == 0  # flying off, int8, batch 1
    assert value(p, "SDP_RDMA", "D_NRDMA_CFG") == 0x31  # per-layer: the NRDMA stays disabled
    assert not written(p, "SDP_RDMA", "D_BN_BASE_ADDR_LOW")
    # BN used, ALU bypassed (MUL only), multiplier used, ReLU bypassed
    assert value(p, "SDP", "D_DP_BN_CFG") == 0x42
    assert not written(p, "SDP", "D_DP_BN_ALU_CFG")
    assert value(p, "SDP", "D_DP_BN_ALU_SRC_VALUE") == 0  # both per-layer operands, whatever the type
    assert value(p, "SDP", "D_DP_BN_MUL_SRC_VALUE") == 3
    assert value(p, "SDP", "D_DP_BN_MUL_CFG") == 0x200  # BN_MUL_SRC REG, shift 2
    assert value(p, "SDP", "D_DP_BS_CFG") == 0x53
    assert value(p, "SDP", "D_FEATURE_MODE_CFG") == 0x2  # OUTPUT_DST PDP
    assert not written(p, "SDP", "D_DST_BASE_ADDR_LOW")
    assert value(p, "SDP", "D_CVT_OFFSET") == 0xFFFF_FFFD
    assert value(p, "SDP", "D_CVT_SHIFT") == 4
    names = [n for u, n, _ in p.writes if u == "SDP"]
    assert names.index("D_DP_BS_CFG") < names.index("D_DP_BN_CFG") < names.index("D_DP_EW_CFG")


def test_sdp_no_rdma_when_on_the_fly_and_per_layer():
    op = SdpOpDesc(batch_num=1, lut_index=-1, out_cvt=CvtParam(scale=1),
                   x1_op=SdpOp(enable=1, type=3, mode=0, alu_operand=-2, mul_operand=5, shift_value=3, truncate=1))
    s = SdpSurfaceDesc(src_data=cube(MEM_HW, w=2, h=2, c=8), dst_data=cube(MEM_MC, address=0, w=2, h=2, c=8,
                                                                          line=16, surf=32))
    assert not sdp.rdma_needed(op, s)
    p, g = run(sdp.SDP, op, s)
    assert_registers_exist(p)
    rdma = [(n, v) for u, n, v in p.writes if u == "SDP_RDMA"]
    assert rdma == [("D_FEATURE_MODE_CFG", 0), ("D_BRDMA_CFG", 0), ("D_NRDMA_CFG", 0), ("D_ERDMA_CFG", 0),
                    ("D_FEATURE_MODE_CFG", 1)]
    assert value(p, "SDP", "D_DP_BS_CFG") == 0x40  # ALU and MUL used, ReLU bypassed, ALGO MAX
    assert value(p, "SDP", "D_DP_BS_ALU_CFG") == 0x300  # REG, shift 3
    assert value(p, "SDP", "D_DP_BS_ALU_SRC_VALUE") == 0xFFFF_FFFE
    assert value(p, "SDP", "D_DP_BS_MUL_SRC_VALUE") == 5
    assert value(p, "SDP", "D_DP_BS_MUL_CFG") == 0x100
    e = make_program()
    sdp.SDP.enable(e, g)
    assert e.writes == [("SDP", "D_OP_ENABLE", 1)]


def test_sdp_rdma_check_ignores_op_type():
    # dla_sdp_rdma_check counts an enabled per-kernel op even of type NONE; the program step does not
    op = SdpOpDesc(batch_num=1, lut_index=-1, x1_op=SdpOp(enable=1, type=0, mode=1))
    s = SdpSurfaceDesc(src_data=cube(MEM_HW, w=1, h=1, c=8), dst_data=cube(MEM_MC, address=0, w=1, h=1, c=8))
    assert sdp.rdma_needed(op, s)
    p, _ = run(sdp.SDP, op, s)
    assert value(p, "SDP_RDMA", "D_BRDMA_CFG") & 1 == 1  # BRDMA_DISABLE YES
    assert not written(p, "SDP_RDMA", "D_BS_BASE_ADDR_LOW")


def test_sdp_lut_and_y_per_point_on_nv_full():
    op = SdpOpDesc(src_precision=0, dst_precision=0, lut_index=2, batch_num=2, batch_stride=0x400,
                   out_cvt=CvtParam(scale=1),
                   y_op=SdpOp(enable=1, type=3, mode=2, act=2, precision=0, truncate=7,
                              alu_cvt=CvtParam(scale=2, truncate=1, enable=1, offset=-1),
                              mul_cvt=CvtParam(scale=3, truncate=2, enable=0, offset=9)))
    s = SdpSurfaceDesc(src_data=cube(MEM_HW, w=4, h=4, c=32),
                       y_data=cube(MEM_CV, address=4, w=4, h=4, c=32, line=128, surf=512),
                       dst_data=cube(MEM_MC, address=5, w=4, h=4, c=32, line=128, surf=512))
    p, g = run(sdp.SDP, op, s, config="nv_full")
    assert_registers_exist(p)
    assert g.lut_index == 2
    # y from CV: enabled | BOTH(2<<1) | ONE_BYTE | PER_ELEMENT(1<<4) | RAM CV(0)
    assert value(p, "SDP_RDMA", "D_ERDMA_CFG") == 0x14
    assert value(p, "SDP_RDMA", "D_EW_BASE_ADDR_LOW") == 0x8004_0000
    assert value(p, "SDP_RDMA", "D_FEATURE_MODE_CFG") == 0x101  # flying, batch 2
    order = [(u, n) for u, n, _ in p.writes]
    first_lut = order.index(("SDP", "S_LUT_ACCESS_CFG"))
    assert order.index(("SDP_RDMA", "D_EW_SURFACE_STRIDE")) < first_lut < order.index(("SDP", "D_DATA_CUBE_WIDTH"))
    assert sum(1 for x in order if x == ("SDP", "S_LUT_ACCESS_DATA")) == 65 + 257
    assert value(p, "SDP", "D_DP_EW_CFG") == 0x0  # nothing bypassed, LUT used
    assert value(p, "SDP", "D_DP_EW_ALU_CFG") == 0x1  # MEM, converter used
    assert value(p, "SDP", "D_DP_EW_ALU_CVT_OFFSET_VALUE") == 0xFFFF_FFFF
    assert value(p, "SDP", "D_DP_EW_ALU_CVT_SCALE_VALUE") == 2
    assert value(p, "SDP", "D_DP_EW_MUL_CFG") == 0x3  # MEM, converter bypassed
    assert value(p, "SDP", "D_DP_EW_MUL_CVT_OFFSET_VALUE") == 9
    assert not written(p, "SDP", "D_DP_EW_ALU_SRC_VALUE")
    assert value(p, "SDP", "D_DP_EW_TRUNCATE_VALUE") == 7
    assert value(p, "SDP", "D_FEATURE_MODE_CFG") == 0x101
    assert value(p, "SDP", "D_DST_BATCH_STRIDE") == 0x400


def test_sdp_precision_mapping():
    op = SdpOpDesc(src_precision=1, dst_precision=0, lut_index=-1, batch_num=1)  # int16 in, int8 out
    s = SdpSurfaceDesc(src_data=cube(MEM_MC, address=0, w=1, h=1, c=8, line=16, surf=16),
                       dst_data=cube(MEM_MC, address=1, w=1, h=1, c=8, line=8, surf=8))
    p, _ = run(sdp.SDP, op, s, config="nv_full")
    # IN INT16(1<<2), PROC INT8 (an int8 result of int16 input is processed as int8), OUT INT8
    assert value(p, "SDP_RDMA", "D_FEATURE_MODE_CFG") == 0x4
    assert value(p, "SDP", "D_DATA_FORMAT") == 0


def test_sdp_is_ready_shares_the_lut():
    op = SdpOpDesc(lut_index=1)
    g = Group(id=0, rdma_id=0, index=0, op=op, surface=SdpSurfaceDesc())
    other = Group(id=1, rdma_id=1, index=1, op=SdpOpDesc(lut_index=0), surface=SdpSurfaceDesc(), lut_index=0)
    assert not sdp.SDP.is_ready(g, other)
    other.lut_index = 1
    assert sdp.SDP.is_ready(g, other)
    other.lut_index, other.active = -1, True
    assert not sdp.SDP.is_ready(g, other)
    assert sdp.SDP.is_ready(g.__class__(id=0, rdma_id=0, index=0, op=SdpOpDesc(lut_index=-1),
                                        surface=SdpSurfaceDesc()), other)


@pytest.mark.parametrize("change, config, field", [
    (lambda op, s: setattr(s, "dst_data", cube(MEM_HW, w=1, h=1, c=8)), "nopdp", "dst_data"),
    (lambda op, s: setattr(op, "src_precision", 3), "nv_small", "src_precision"),
    (lambda op, s: setattr(op, "batch_num", 0), "nv_small", "batch_num"),
    (lambda op, s: setattr(op, "y_op", SdpOp(enable=1, type=1)), "nv_small", "y_op"),
    (lambda op, s: setattr(op, "lut_index", 0), "nv_small", "lut_index"),
    (lambda op, s: setattr(op.x1_op, "mode", 3), "nv_small", "x1_op.mode"),
    (lambda op, s: setattr(op.x1_op, "shift_value", 64), "nv_small", "BS_ALU_SHIFT_VALUE"),
    (lambda op, s: setattr(s.x1_data, "type", MEM_HW), "nv_small", "x1_data.type"),
    (lambda op, s: setattr(s, "src_data", cube(MEM_MC, address=-1, w=4, h=4, c=16)), "nv_small", "src_data"),
])
def test_sdp_illegal_descriptors(change, config, field):
    op, s = sdp_bias_relu()
    change(op, s)
    hw = get_config("nv_small").derive(pdp=False) if config == "nopdp" else get_config(config)
    with pytest.raises(FirmwareError, match=field) as exc:
        run(sdp.SDP, op, s, hw=hw)
    assert str(exc.value).startswith("op 7 (test): ")


def test_sdp_set_producer_and_registration():
    p = make_program()
    sdp.SDP.set_producer(p, 1, 0)
    assert p.writes == [("SDP", "S_POINTER", 1), ("SDP_RDMA", "S_POINTER", 0)]
    assert programmer_of(OP_SDP) is sdp.SDP
    assert sdp.SDP.done_bit == 0 and sdp.SDP.pointer_unit == "SDP" and sdp.SDP.rdma_pointer_unit == "SDP_RDMA"


# ---- convolution -------------------------------------------------------------------------------------------
def conv_3x3() -> tuple[ConvOpDesc, ConvSurfaceDesc]:
    """Direct int8 conv: 8x8x8 feature input, 16 3x3 kernels, stride 2, pad 1 -> 4x4x16 on-the-fly to SDP."""
    op = ConvOpDesc(conv_mode=0, entry_per_slice=8, data_format=36, fetch_grain=1, batch=1, weight_format=0,
                    data_bank=1, weight_bank=2, release=8, input_width_csc=8, input_height_csc=8,
                    input_channel_csc=8, kernel_width_csc=3, kernel_height_csc=3, kernel_channel_csc=8,
                    input_width_cmac=4, input_height_cmac=4, bytes_per_kernel=72, conv_stride_x=2,
                    conv_stride_y=2, pad_x_left=1, pad_x_right=1, pad_y_top=1, pad_y_bottom=1, dilation_x=1,
                    dilation_y=1, in_precision=0, out_precision=0, out_cvt=CvtParam(scale=1, truncate=5))
    s = ConvSurfaceDesc(weight_data=cube(MEM_MC, address=1, offset=0x80, size=1152),
                        src_data=cube(MEM_MC, address=0, w=8, h=8, c=8, line=64, surf=512),
                        dst_data=cube(MEM_HW, address=-1, w=4, h=4, c=16, line=32, surf=128))
    return op, s


def test_conv_direct_3x3_registers():
    op, s = conv_3x3()
    assert not conv.CONV.rdma_needed(op, s)
    p, _ = run(conv.CONV, op, s)
    assert_registers_exist(p)
    expected = {
        ("CACC", "D_MISC_CFG"): 0, ("CACC", "D_DATAOUT_SIZE_0"): 0x3_0003, ("CACC", "D_DATAOUT_SIZE_1"): 15,
        ("CACC", "D_DATAOUT_ADDR"): 0, ("CACC", "D_BATCH_NUMBER"): 0, ("CACC", "D_LINE_STRIDE"): 32,
        ("CACC", "D_SURF_STRIDE"): 128, ("CACC", "D_DATAOUT_MAP"): 0, ("CACC", "D_CLIP_CFG"): 5,
        ("CMAC_A", "D_MISC_CFG"): 0, ("CMAC_B", "D_MISC_CFG"): 0,
        ("CSC", "D_MISC_CFG"): 0, ("CSC", "D_DATAIN_FORMAT"): 0, ("CSC", "D_DATAIN_SIZE_EXT_0"): 0x7_0007,
        ("CSC", "D_DATAIN_SIZE_EXT_1"): 7, ("CSC", "D_BATCH_NUMBER"): 0, ("CSC", "D_POST_Y_EXTENSION"): 0,
        ("CSC", "D_ENTRY_PER_SLICE"): 7, ("CSC", "D_WEIGHT_FORMAT"): 0, ("CSC", "D_WEIGHT_SIZE_EXT_0"): 0x2_0002,
        ("CSC", "D_WEIGHT_SIZE_EXT_1"): 0xF_0007, ("CSC", "D_WEIGHT_BYTES"): 1152, ("CSC", "D_WMB_BYTES"): 0,
        ("CSC", "D_DATAOUT_SIZE_0"): 0x3_0003, ("CSC", "D_DATAOUT_SIZE_1"): 15, ("CSC", "D_ATOMICS"): 15,
        ("CSC", "D_RELEASE"): 7, ("CSC", "D_CONV_STRIDE_EXT"): 0x1_0001, ("CSC", "D_DILATION_EXT"): 0,
        ("CSC", "D_ZERO_PADDING"): 0x1_0001, ("CSC", "D_ZERO_PADDING_VALUE"): 0, ("CSC", "D_BANK"): 0x1_0000,
        ("CSC", "D_PRA_CFG"): 0,
        ("CDMA", "D_MISC_CFG"): 0, ("CDMA", "D_DATAIN_FORMAT"): 0, ("CDMA", "D_DATAIN_SIZE_0"): 0x7_0007,
        ("CDMA", "D_DATAIN_SIZE_1"): 7, ("CDMA", "D_DATAIN_SIZE_EXT_0"): 0x7_0007, ("CDMA", "D_DAIN_RAM_TYPE"): 1,
        ("CDMA", "D_DAIN_ADDR_HIGH_0"): 0, ("CDMA", "D_DAIN_ADDR_LOW_0"): 0x8000_0000,
        ("CDMA", "D_DAIN_ADDR_HIGH_1"): 0, ("CDMA", "D_DAIN_ADDR_LOW_1"): 0x8000_0000,
        ("CDMA", "D_LINE_STRIDE"): 64, ("CDMA", "D_SURF_STRIDE"): 512, ("CDMA", "D_LINE_UV_STRIDE"): 0,
        ("CDMA", "D_DAIN_MAP"): 0x1_0001,  # 64 == 8 * atom 8, 512 == 8 * 8 * 8: line and surface packed
        ("CDMA", "D_BATCH_NUMBER"): 0, ("CDMA", "D_BATCH_STRIDE"): 0, ("CDMA", "D_ENTRY_PER_SLICE"): 7,
        ("CDMA", "D_FETCH_GRAIN"): 0, ("CDMA", "D_WEIGHT_FORMAT"): 0, ("CDMA", "D_WEIGHT_SIZE_0"): 71,
        ("CDMA", "D_WEIGHT_SIZE_1"): 15, ("CDMA", "D_WEIGHT_RAM_TYPE"): 1, ("CDMA", "D_WEIGHT_ADDR_HIGH"): 0,
        ("CDMA", "D_WEIGHT_ADDR_LOW"): 0x8001_0080, ("CDMA", "D_WEIGHT_BYTES"): 1152, ("CDMA", "D_MEAN_FORMAT"): 0,
        ("CDMA", "D_CVT_CFG"): 0, ("CDMA", "D_CONV_STRIDE"): 0x1_0001, ("CDMA", "D_ZERO_PADDING"): 0x0101_0101,
        ("CDMA", "D_ZERO_PADDING_VALUE"): 0, ("CDMA", "D_BANK"): 0x1_0000,
    }
    assert [(u, n) for u, n, _ in p.writes] == list(expected)  # every write, once, in the firmware's order
    assert {(u, n): v for u, n, v in p.writes} == expected


def test_conv_enable_and_set_producer_order():
    op, s = conv_3x3()
    p = make_program()
    g = Group(id=1, rdma_id=0, index=7, op=op, surface=s)
    conv.CONV.enable(p, g)
    assert p.writes == [(u, "D_OP_ENABLE", 1) for u in ("CACC", "CMAC_A", "CMAC_B", "CSC", "CDMA")]
    p = make_program()
    conv.CONV.set_producer(p, 1, 0)
    assert p.writes == [(u, "S_POINTER", 1) for u in ("CACC", "CMAC_A", "CMAC_B", "CSC", "CDMA")]


def test_conv_registration():
    c = programmer_of(OP_CONV)
    assert c is conv.CONV and c.done_bit == 20 and c.pointer_unit == "CACC" and c.rdma_pointer_unit is None
    assert c.extra_events == ((16, 5), (18, 4))
    assert c.is_ready(None, None)
    glb = {f.name: f.lsb for f in register_map("small").unit("GLB").register("S_INTR_MASK").fields}
    assert glb["CACC_DONE_MASK0"] == c.done_bit
    for e in (conv.CONV, sdp.SDP):
        assert set(e.intr_mask_fields) <= set(glb)
    assert glb["SDP_DONE_MASK0"] == sdp.SDP.done_bit


def test_conv_memory_output_pixel_mean_cvt():
    op, s = conv_3x3()
    op.data_format = 12  # T_A8B8G8R8
    op.pixel_override = 1
    op.mean_format, op.mean_ry, op.mean_gu, op.mean_bv, op.mean_ax = 1, -1, 2, 3, 4
    op.in_cvt = CvtParam(scale=5, truncate=3, enable=1, offset=-2)
    op.pad_val = -1
    s.offset_u = 0x1000
    s.in_line_uv_stride = 64
    s.dst_data = cube(MEM_MC, address=6, offset=0x20, w=4, h=4, c=16, line=32, surf=128)
    p, _ = run(conv.CONV, op, s)
    assert_registers_exist(p)
    assert value(p, "CACC", "D_DATAOUT_ADDR") == 0x8006_0020
    assert value(p, "CSC", "D_DATAIN_FORMAT") == 1  # PIXEL
    assert value(p, "CDMA", "D_DATAIN_FORMAT") == 1 | (12 << 8) | (1 << 20)
    assert value(p, "CDMA", "D_DAIN_ADDR_LOW_1") == 0x8000_1000
    assert value(p, "CDMA", "D_LINE_UV_STRIDE") == 64
    assert value(p, "CDMA", "D_MEAN_GLOBAL_0") == 0x0002_FFFF
    assert value(p, "CDMA", "D_MEAN_GLOBAL_1") == 0x0004_0003
    assert value(p, "CDMA", "D_CVT_CFG") == 0x31
    assert value(p, "CDMA", "D_CVT_OFFSET") == 0xFFFF_FFFE
    assert value(p, "CDMA", "D_CVT_SCALE") == 5
    assert value(p, "CSC", "D_ZERO_PADDING_VALUE") == 0xFFFF
    assert value(p, "CDMA", "D_ZERO_PADDING_VALUE") == 0xFFFF


def test_conv_winograd_precision_and_compression_on_nv_full():
    op, s = conv_3x3()
    op.conv_mode, op.in_precision, op.out_precision, op.weight_format = 1, 1, 2, 1
    s.wmb_data = cube(MEM_MC, address=8, size=256)
    s.wgs_data = cube(MEM_MC, address=9, size=64)
    p, _ = run(conv.CONV, op, s, config="nv_full")
    assert_registers_exist(p)
    assert value(p, "CSC", "D_CONV_STRIDE_EXT") == 0 and value(p, "CSC", "D_ZERO_PADDING") == 0
    assert value(p, "CDMA", "D_CONV_STRIDE") == 0x1_0001
    # CSC's IN_PRECISION follows out_precision (FP16), CDMA's in_precision (INT16)
    assert value(p, "CSC", "D_MISC_CFG") == 1 | (2 << 8) | (2 << 12)
    assert value(p, "CDMA", "D_MISC_CFG") == 1 | (1 << 8) | (2 << 12)
    assert value(p, "CACC", "D_MISC_CFG") == 1 | (2 << 12)
    assert value(p, "CDMA", "D_WGS_ADDR_LOW") == 0x8009_0000
    assert value(p, "CDMA", "D_WMB_ADDR_LOW") == 0x8008_0000
    assert value(p, "CDMA", "D_WMB_BYTES") == 256
    assert value(p, "CSC", "D_WMB_BYTES") == 256


def test_conv_1x1_output_is_packed():
    op, s = conv_3x3()
    s.dst_data = cube(MEM_HW, w=1, h=1, c=16, line=8, surf=8)
    p, _ = run(conv.CONV, op, s)
    assert value(p, "CACC", "D_DATAOUT_MAP") == 0x1_0001
    s.dst_data.line_stride = 16
    with pytest.raises(FirmwareError, match="line_stride"):
        run(conv.CONV, op, s)


@pytest.mark.parametrize("change, field", [
    (lambda op, s: setattr(op, "conv_stride_x", 0), "conv_stride_x"),
    (lambda op, s: setattr(op, "in_precision", 3), "in_precision"),
    (lambda op, s: setattr(op, "out_precision", 3), "out_precision"),
    (lambda op, s: setattr(op, "conv_mode", 1), "conv_mode"),  # nv_small has no Winograd
    (lambda op, s: setattr(op, "weight_format", 1), "weight_format"),  # nor compression
    (lambda op, s: setattr(op.out_cvt, "scale", 2), "out_cvt.scale"),
    (lambda op, s: setattr(op.out_cvt, "offset", 1), "out_cvt.offset"),
    (lambda op, s: setattr(op, "batch", 0), "batch"),
    (lambda op, s: setattr(op, "data_bank", 0), "data_bank"),
    (lambda op, s: setattr(op, "dilation_y", 0), "dilation_y"),
    (lambda op, s: setattr(op, "data_format", 37), "data_format"),
    (lambda op, s: setattr(op, "pixel_mapping", 1), "pixel_mapping"),
    (lambda op, s: setattr(op, "pad_x_left", 32), "PAD_LEFT"),
    (lambda op, s: setattr(op.out_cvt, "truncate", 32), "CLIP_TRUNCATE"),
    (lambda op, s: setattr(s.src_data, "address", -1), "src_data"),
    (lambda op, s: setattr(s.src_data, "type", MEM_HW), "src_data.type"),
])
def test_conv_illegal_descriptors(change, field):
    op, s = conv_3x3()
    change(op, s)
    with pytest.raises(FirmwareError, match=field.replace(".", r"\.")) as exc:
        run(conv.CONV, op, s)
    assert str(exc.value).startswith("op 7 (test): ")
