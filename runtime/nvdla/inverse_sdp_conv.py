"""SDP and CONV inverses for ``runtime.nvdla.inverse``: an op's final SDP/SDP_RDMA (and CDMA, CSC,
CMAC, CACC) registers mapped back onto ``dla_sdp_op_desc``/``dla_conv_op_desc`` and their surfaces.

A convolution trace is one op of the firmware's view only in pairs: CACC hands its output to SDP on the fly,
so a conv trace becomes a CONV op and an SDP op fused to it (``fused_to``); an SDP trace whose output goes to
PDP on the fly becomes an SDP op and a PDP op fused to it.

Every descriptor field is read from the register that the firmware (``sdp.c``, ``conv.c``) programs from it;
where several registers come from one field (one ``mode`` for an X stage's ALU and MUL sources, one ``act``
for ReLU/PReLU/LUT, CSC's and CDMA's copies of the kernel size...), the field is read from one of them and the
forward check in ``inverse`` decides whether the others agree. Fields of registers that cannot change the
result (a bypassed stage, a disabled operand DMA, the pixel format of a feature cube...) are declared below
with ``Irrelevant`` rules, each with its reason; for those the value is taken from the trace where the
descriptor can hold it, and is otherwise arbitrary.
"""
from __future__ import annotations

from runtime.nvdla.inverse import (Inverse, Irrelevant, NotExpressible, Regs, _pdp, _sign,
                                   lut_from_registers, register_inverse, register_irrelevant)
from golden.regs import register_map
from runtime.nvdla import descriptors as d

SDP_OP_NONE, SDP_OP_MUL, SDP_OP_ADD, SDP_OP_BOTH = 0, 1, 2, 3
SDP_OP_PER_LAYER, SDP_OP_PER_KERNEL, SDP_OP_PER_POINT = 0, 1, 2
ACTIVATION_NONE, ACTIVATION_RELU, ACTIVATION_LUT, ACTIVATION_PRELU = 0, 1, 2, 3
FORMAT_FEATURE = 36
#: SDP_RDMA's D_ registers but its enable
_SDP_RDMA_D_REGS = tuple(n for n in register_map("small").unit("SDP_RDMA").by_name
                         if n.startswith("D_") and n != "D_OP_ENABLE")
#: SDP stage (X1 = BS, X2 = BN, Y = EW; also the name in its SDP_RDMA address registers) -> its SDP_RDMA
#: config register prefix (D_BRDMA_CFG, ...)
_STAGES = {"BS": "B", "BN": "N", "EW": "E"}


def _mem(r: Regs, unit: str, reg: str, fld: str) -> int:
    """Cube type from a RAM_TYPE field: MC (1 in SDP's encoding) or CV."""
    return d.MEM_MC if r.f(unit, reg, fld) == 1 else d.MEM_CV


def _size(r: Regs, cube: d.Struct) -> int:
    """Bytes of a feature cube in memory (the descriptor's informational ``size``)."""
    atom = r.hw.memory_atomic_size if r.hw else 8
    return cube.surf_stride * -(-cube.channel // atom)


# ---- SDP -------------------------------------------------------------------------------------------------
def _on(r: Regs, stage: str) -> bool:
    return r.f("SDP", f"D_DP_{stage}_CFG", f"{stage}_BYPASS") == 0


def _alu_on(r: Regs, stage: str) -> bool:
    return _on(r, stage) and r.f("SDP", f"D_DP_{stage}_CFG", f"{stage}_ALU_BYPASS") == 0


def _mul_on(r: Regs, stage: str) -> bool:
    return _on(r, stage) and r.f("SDP", f"D_DP_{stage}_CFG", f"{stage}_MUL_BYPASS") == 0


def _alu_mem(r: Regs, stage: str) -> bool:
    return r.f("SDP", f"D_DP_{stage}_ALU_CFG", f"{stage}_ALU_SRC") == 1


def _mul_mem(r: Regs, stage: str) -> bool:
    return r.f("SDP", f"D_DP_{stage}_MUL_CFG", f"{stage}_MUL_SRC") == 1


def _ew_mem_operand(r: Regs, kind: str) -> bool:
    """EW's ALU or MUL is in use and takes its operand from memory."""
    if kind == "ALU":
        return _alu_on(r, "EW") and _alu_mem(r, "EW")
    return _mul_on(r, "EW") and _mul_mem(r, "EW")


def _dma_off(r: Regs, stage: str) -> bool:
    p = _STAGES[stage]
    return r.f("SDP_RDMA", f"D_{p}RDMA_CFG", f"{p}RDMA_DISABLE") == 1


def _rdma_off(r: Regs) -> bool:
    return r.word("SDP_RDMA", "D_OP_ENABLE") & 1 == 0


def _int8(r: Regs) -> bool:
    return r.f("SDP", "D_DATA_FORMAT", "PROC_PRECISION") != 2


def _sdp_op(r: Regs, stage: str) -> tuple[d.Struct, d.Struct, int | None]:
    """One X (BS, BN) or Y (EW) stage as a ``dla_sdp_op``, its operand cube, and that cube's address (None
    when the firmware reads no operand from memory: the cube then has address -1)."""
    p = _STAGES[stage]
    cfg = f"D_DP_{stage}_CFG"
    enable = _on(r, stage)
    alu, mul = _alu_on(r, stage), _mul_on(r, stage)
    op_type = (SDP_OP_ADD if alu else SDP_OP_NONE) | (SDP_OP_MUL if mul else SDP_OP_NONE)  # BOTH = ADD | MUL
    # one mode for both sources: the ALU's when it is used, else the MUL's (the forward check compares both)
    mem = _alu_mem(r, stage) if alu else _mul_mem(r, stage) if mul else False
    if not mem:
        mode = SDP_OP_PER_LAYER
    elif r.f("SDP_RDMA", f"D_{p}RDMA_CFG", f"{p}RDMA_DATA_MODE") == 0:
        mode = SDP_OP_PER_KERNEL
    else:
        mode = SDP_OP_PER_POINT
    prelu = mul and r.f("SDP", cfg, f"{stage}_MUL_PRELU") == 1
    if stage == "EW":
        act = ACTIVATION_LUT if enable and r.f("SDP", cfg, "EW_LUT_BYPASS") == 0 else \
            ACTIVATION_PRELU if prelu else ACTIVATION_NONE
    else:
        act = ACTIVATION_RELU if enable and r.f("SDP", cfg, f"{stage}_RELU_BYPASS") == 0 else \
            ACTIVATION_PRELU if prelu else ACTIVATION_NONE
    algo = r.f("SDP", cfg, f"{stage}_ALU_ALGO")
    precision = r.f("SDP_RDMA", f"D_{p}RDMA_CFG", f"{p}RDMA_DATA_SIZE")  # ONE_BYTE -> int8, TWO_BYTE -> int16
    fields = dict(enable=int(enable), alu_type=algo, type=op_type, mode=mode, act=act, precision=precision,
                  alu_operand=_sign(r.word("SDP", f"D_DP_{stage}_ALU_SRC_VALUE"), 32),
                  mul_operand=_sign(r.word("SDP", f"D_DP_{stage}_MUL_SRC_VALUE"), 32))
    if stage == "EW":
        def cvt(kind: str) -> d.Struct:
            return d.CvtParam(scale=_sign(r.word("SDP", f"D_DP_EW_{kind}_CVT_SCALE_VALUE"), 16),
                              truncate=r.f("SDP", f"D_DP_EW_{kind}_CVT_TRUNCATE_VALUE", f"EW_{kind}_CVT_TRUNCATE"),
                              enable=1 - r.f("SDP", f"D_DP_EW_{kind}_CFG", f"EW_{kind}_CVT_BYPASS"),
                              offset=_sign(r.word("SDP", f"D_DP_EW_{kind}_CVT_OFFSET_VALUE"), 32))
        truncate = r.f("SDP", "D_DP_EW_TRUNCATE_VALUE", "EW_TRUNCATE")
        if truncate > 0xFF:
            if mul:
                raise NotExpressible(f"SDP.D_DP_EW_TRUNCATE_VALUE = {truncate}: dla_sdp_op.truncate has 8 bits")
            truncate = 0  # unused (the rules below): any value the descriptor holds
        fields.update(truncate=truncate, alu_cvt=cvt("ALU"), mul_cvt=cvt("MUL"))
    else:
        fields.update(shift_value=r.f("SDP", f"D_DP_{stage}_ALU_CFG", f"{stage}_ALU_SHIFT_VALUE"),
                      truncate=r.f("SDP", f"D_DP_{stage}_MUL_CFG", f"{stage}_MUL_SHIFT_VALUE"))
    op = d.SdpOp(**fields)
    if enable and op_type != SDP_OP_NONE and mode != SDP_OP_PER_LAYER:
        # the operand cube has the source's shape; PER_KERNEL reads one vector and ignores the strides
        cube = d.DataCube(type=_mem(r, "SDP_RDMA", f"D_{p}RDMA_CFG", f"{p}RDMA_RAM_TYPE"),
                          width=r.word("SDP", "D_DATA_CUBE_WIDTH") + 1, height=r.word("SDP", "D_DATA_CUBE_HEIGHT") + 1,
                          channel=r.word("SDP", "D_DATA_CUBE_CHANNEL") + 1,
                          line_stride=r.word("SDP_RDMA", f"D_{stage}_LINE_STRIDE"),
                          surf_stride=r.word("SDP_RDMA", f"D_{stage}_SURFACE_STRIDE"))
        cube.size = _size(r, cube)
        return op, cube, r.addr("SDP_RDMA", f"D_{stage}_BASE_ADDR_LOW", f"D_{stage}_BASE_ADDR_HIGH")
    return op, d.DataCube(type=_mem(r, "SDP_RDMA", f"D_{p}RDMA_CFG", f"{p}RDMA_RAM_TYPE"), address=-1), None


def sdp_inverse(r: Regs, writes: list[tuple[str, str, int]]) -> list[Inverse]:
    """The SDP op (source in memory, or on the fly from CACC) and, when its output goes to PDP on the fly,
    the PDP op fused to it."""
    fly = r.f("SDP", "D_FEATURE_MODE_CFG", "FLYING_MODE") == 1
    to_pdp = r.f("SDP", "D_FEATURE_MODE_CFG", "OUTPUT_DST") == 1
    width, height = r.word("SDP", "D_DATA_CUBE_WIDTH") + 1, r.word("SDP", "D_DATA_CUBE_HEIGHT") + 1
    channel = r.word("SDP", "D_DATA_CUBE_CHANNEL") + 1
    src = d.DataCube(type=d.MEM_HW, address=-1, width=width, height=height, channel=channel)
    if not fly:
        src.type = _mem(r, "SDP_RDMA", "D_SRC_DMA_CFG", "SRC_RAM_TYPE")
        src.line_stride = r.word("SDP_RDMA", "D_SRC_LINE_STRIDE")
        src.surf_stride = r.word("SDP_RDMA", "D_SRC_SURFACE_STRIDE")
        src.size = _size(r, src)
    dst = d.DataCube(type=d.MEM_HW, address=-1, width=width, height=height, channel=channel)
    if not to_pdp:
        dst.type = _mem(r, "SDP", "D_DST_DMA_CFG", "DST_RAM_TYPE")
        dst.line_stride = r.word("SDP", "D_DST_LINE_STRIDE")
        dst.surf_stride = r.word("SDP", "D_DST_SURFACE_STRIDE")
        dst.size = _size(r, dst)
    cubes: dict[str, int] = {}
    if not fly:
        cubes["src_data"] = r.addr("SDP_RDMA", "D_SRC_BASE_ADDR_LOW", "D_SRC_BASE_ADDR_HIGH")
    stages = {}
    operand_cubes = {}
    for stage, name, cube_name in (("BS", "x1_op", "x1_data"), ("BN", "x2_op", "x2_data"), ("EW", "y_op", "y_data")):
        stages[name], operand_cubes[cube_name], addr = _sdp_op(r, stage)
        if addr is not None:
            cubes[cube_name] = addr
    if not to_pdp:
        cubes["dst_data"] = r.addr("SDP", "D_DST_BASE_ADDR_LOW", "D_DST_BASE_ADDR_HIGH")
    # the source precision is SDP_RDMA's; on the fly (no RDMA) the core's processing precision is CACC's output
    src_precision = r.f("SDP", "D_DATA_FORMAT", "PROC_PRECISION") if _rdma_off(r) else \
        r.f("SDP_RDMA", "D_FEATURE_MODE_CFG", "IN_PRECISION")
    lut = None
    if stages["y_op"].act == ACTIVATION_LUT:
        lut = lut_from_registers(r, "SDP", writes)
    op = d.SdpOpDesc(
        src_precision=src_precision, dst_precision=r.f("SDP", "D_DATA_FORMAT", "OUT_PRECISION"),
        lut_index=0 if lut is not None else -1,
        out_cvt=d.CvtParam(scale=_sign(r.word("SDP", "D_CVT_SCALE"), 16), truncate=r.f("SDP", "D_CVT_SHIFT", "CVT_SHIFT"),
                           enable=1, offset=_sign(r.word("SDP", "D_CVT_OFFSET"), 32)),
        conv_mode=r.f("SDP", "D_FEATURE_MODE_CFG", "WINOGRAD"),
        batch_num=r.f("SDP", "D_FEATURE_MODE_CFG", "BATCH_NUMBER") + 1,
        batch_stride=r.word("SDP", "D_DST_BATCH_STRIDE"), **stages)
    surface = d.SdpSurfaceDesc(src_data=src, dst_data=dst, **operand_cubes)
    ops = [Inverse(d.OP_SDP, op, surface, cubes, lut)]
    if to_pdp:
        pdp = _pdp(r)
        pdp.fused_to = 0
        ops.append(pdp)
    return ops


# ---- CONV ------------------------------------------------------------------------------------------------
def conv_inverse(r: Regs, writes: list[tuple[str, str, int]]) -> list[Inverse]:
    """The CONV op (CDMA, CSC, CMAC_A/B, CACC) and the SDP op (and PDP op) fused to it on the fly."""
    def cdma(name: str, fld: str | None = None) -> int:
        return r.f("CDMA", name, fld) if fld else r.word("CDMA", name)

    def csc(name: str, fld: str | None = None) -> int:
        return r.f("CSC", name, fld) if fld else r.word("CSC", name)

    feature = cdma("D_DATAIN_FORMAT", "DATAIN_FORMAT") == 0
    src = d.DataCube(type=d.MEM_MC if cdma("D_DAIN_RAM_TYPE", "DATAIN_RAM_TYPE") == 1 else d.MEM_CV,
                     width=cdma("D_DATAIN_SIZE_0", "DATAIN_WIDTH") + 1,
                     height=cdma("D_DATAIN_SIZE_0", "DATAIN_HEIGHT") + 1,
                     channel=cdma("D_DATAIN_SIZE_1", "DATAIN_CHANNEL") + 1,
                     line_stride=cdma("D_LINE_STRIDE"), surf_stride=cdma("D_SURF_STRIDE"))
    src.size = _size(r, src)
    kw, kh = csc("D_WEIGHT_SIZE_EXT_0", "WEIGHT_WIDTH_EXT") + 1, csc("D_WEIGHT_SIZE_EXT_0", "WEIGHT_HEIGHT_EXT") + 1
    kc = csc("D_WEIGHT_SIZE_EXT_1", "WEIGHT_CHANNEL_EXT") + 1
    weight = d.DataCube(type=d.MEM_MC if cdma("D_WEIGHT_RAM_TYPE", "WEIGHT_RAM_TYPE") == 1 else d.MEM_CV,
                        size=cdma("D_WEIGHT_BYTES"), width=kw, height=kh, channel=kc)
    compressed = cdma("D_WEIGHT_FORMAT", "WEIGHT_FORMAT") == 1
    wmb = d.DataCube(type=d.MEM_MC, address=-1, size=csc("D_WMB_BYTES", "WMB_BYTES"))
    wgs = d.DataCube(type=d.MEM_MC, address=-1)
    # CACC delivers to SDP on the fly: no output address (the firmware programs 0). Its strides describe no
    # memory (IGNORED); a 1x1 output gets the packed line stride the firmware insists on
    out_w = r.f("CACC", "D_DATAOUT_SIZE_0", "DATAOUT_WIDTH") + 1
    out_h = r.f("CACC", "D_DATAOUT_SIZE_0", "DATAOUT_HEIGHT") + 1
    dst = d.DataCube(type=d.MEM_HW, address=-1, width=out_w, height=out_h,
                     channel=r.f("CACC", "D_DATAOUT_SIZE_1", "DATAOUT_CHANNEL") + 1,
                     line_stride=r.f("CACC", "D_LINE_STRIDE", "LINE_STRIDE"),
                     surf_stride=r.f("CACC", "D_SURF_STRIDE", "SURF_STRIDE"))
    if out_w == 1 and out_h == 1:
        dst.line_stride = out_w * (r.hw.memory_atomic_size if r.hw else 8)  # config_data->atom_size
    in_addr = r.addr("CDMA", "D_DAIN_ADDR_LOW_0", "D_DAIN_ADDR_HIGH_0")
    uv_addr = r.addr("CDMA", "D_DAIN_ADDR_LOW_1", "D_DAIN_ADDR_HIGH_1")
    surface = d.ConvSurfaceDesc(weight_data=weight, wmb_data=wmb, wgs_data=wgs, src_data=src, dst_data=dst,
                                offset_u=_sign(uv_addr - in_addr, 64), in_line_uv_stride=cdma("D_LINE_UV_STRIDE"))
    cubes = {"weight_data": r.addr("CDMA", "D_WEIGHT_ADDR_LOW", "D_WEIGHT_ADDR_HIGH"), "src_data": in_addr}
    if compressed:
        wmb.size = cdma("D_WMB_BYTES", "WMB_BYTES")
        cubes["wmb_data"] = r.addr("CDMA", "D_WMB_ADDR_LOW", "D_WMB_ADDR_HIGH")
        cubes["wgs_data"] = r.addr("CDMA", "D_WGS_ADDR_LOW", "D_WGS_ADDR_HIGH")
    misc = "D_MISC_CFG"
    cvt_on = cdma("D_CVT_CFG", "CVT_EN")
    op = d.ConvOpDesc(
        conv_mode=cdma(misc, "CONV_MODE"), data_reuse=cdma(misc, "DATA_REUSE"), weight_reuse=cdma(misc, "WEIGHT_REUSE"),
        skip_data_rls=cdma(misc, "SKIP_DATA_RLS"), skip_weight_rls=cdma(misc, "SKIP_WEIGHT_RLS"),
        entry_per_slice=cdma("D_ENTRY_PER_SLICE", "ENTRIES") + 1,
        data_format=FORMAT_FEATURE if feature else cdma("D_DATAIN_FORMAT", "PIXEL_FORMAT"),
        pixel_mapping=0,  # the firmware's only mapping (PITCH_LINEAR)
        fetch_grain=cdma("D_FETCH_GRAIN", "GRAINS") + 1, batch=cdma("D_BATCH_NUMBER", "BATCHES") + 1,
        weight_format=int(compressed), data_bank=cdma("D_BANK", "DATA_BANK") + 1,
        weight_bank=cdma("D_BANK", "WEIGHT_BANK") + 1, batch_stride=cdma("D_BATCH_STRIDE"),
        post_extension=csc("D_POST_Y_EXTENSION", "Y_EXTENSION"),
        pixel_override=cdma("D_DATAIN_FORMAT", "PIXEL_SIGN_OVERRIDE"), release=csc("D_RELEASE", "RLS_SLICES") + 1,
        input_width_csc=csc("D_DATAIN_SIZE_EXT_0", "DATAIN_WIDTH_EXT") + 1,
        input_height_csc=csc("D_DATAIN_SIZE_EXT_0", "DATAIN_HEIGHT_EXT") + 1,
        input_channel_csc=csc("D_DATAIN_SIZE_EXT_1", "DATAIN_CHANNEL_EXT") + 1,
        kernel_width_csc=kw, kernel_height_csc=kh, kernel_channel_csc=kc,
        input_width_cmac=csc("D_DATAOUT_SIZE_0", "DATAOUT_WIDTH") + 1,
        input_height_cmac=csc("D_DATAOUT_SIZE_0", "DATAOUT_HEIGHT") + 1,
        bytes_per_kernel=cdma("D_WEIGHT_SIZE_0", "BYTE_PER_KERNEL") + 1,
        mean_ry=_sign(cdma("D_MEAN_GLOBAL_0", "MEAN_RY"), 16), mean_gu=_sign(cdma("D_MEAN_GLOBAL_0", "MEAN_GU"), 16),
        mean_bv=_sign(cdma("D_MEAN_GLOBAL_1", "MEAN_BV"), 16), mean_ax=_sign(cdma("D_MEAN_GLOBAL_1", "MEAN_AX"), 16),
        mean_format=cdma("D_MEAN_FORMAT", "MEAN_FORMAT"),
        conv_stride_x=cdma("D_CONV_STRIDE", "CONV_X_STRIDE") + 1, conv_stride_y=cdma("D_CONV_STRIDE", "CONV_Y_STRIDE") + 1,
        pad_x_left=cdma("D_ZERO_PADDING", "PAD_LEFT"), pad_x_right=cdma("D_ZERO_PADDING", "PAD_RIGHT"),
        pad_y_top=cdma("D_ZERO_PADDING", "PAD_TOP"), pad_y_bottom=cdma("D_ZERO_PADDING", "PAD_BOTTOM"),
        dilation_x=csc("D_DILATION_EXT", "X_DILATION_EXT") + 1, dilation_y=csc("D_DILATION_EXT", "Y_DILATION_EXT") + 1,
        pra_truncate=csc("D_PRA_CFG", "PRA_TRUNCATE"), in_precision=cdma(misc, "IN_PRECISION"),
        out_precision=cdma(misc, "PROC_PRECISION"), pad_val=_sign(cdma("D_ZERO_PADDING_VALUE", "PAD_VALUE"), 16),
        in_cvt=d.CvtParam(scale=_sign(cdma("D_CVT_SCALE"), 16) if cvt_on else 0,
                          truncate=cdma("D_CVT_CFG", "CVT_TRUNCATE") if cvt_on else 0, enable=cvt_on,
                          offset=_sign(cdma("D_CVT_OFFSET"), 32) if cvt_on else 0),
        out_cvt=d.CvtParam(scale=1, truncate=r.f("CACC", "D_CLIP_CFG", "CLIP_TRUNCATE"), enable=1, offset=0))
    ops = [Inverse(d.OP_CONV, op, surface, cubes)]
    for sdp_or_pdp in sdp_inverse(r, writes):
        sdp_or_pdp.fused_to = 0 if sdp_or_pdp.fused_to is None else sdp_or_pdp.fused_to + 1
        ops.append(sdp_or_pdp)
    return ops


# ---- registers that cannot change the result --------------------------------------------------------------
def _rules() -> list[Irrelevant]:
    R = Irrelevant
    rules = [
        R("SDP_RDMA", _SDP_RDMA_D_REGS, None, _rdma_off,
          "SDP_RDMA is not enabled: SDP reads nothing from memory"),
        R("SDP_RDMA", ("D_SRC_BASE_ADDR_LOW", "D_SRC_BASE_ADDR_HIGH", "D_SRC_LINE_STRIDE", "D_SRC_SURFACE_STRIDE",
                       "D_SRC_DMA_CFG"), None, lambda r: r.f("SDP", "D_FEATURE_MODE_CFG", "FLYING_MODE") == 1,
          "the input comes from CACC on the fly, not from memory"),
        R("SDP", ("D_DST_BASE_ADDR_LOW", "D_DST_BASE_ADDR_HIGH", "D_DST_LINE_STRIDE", "D_DST_SURFACE_STRIDE",
                  "D_DST_DMA_CFG"), None, lambda r: r.f("SDP", "D_FEATURE_MODE_CFG", "OUTPUT_DST") == 1,
          "the output goes to PDP on the fly, not to memory"),
        R("SDP", ("D_DST_BATCH_STRIDE",), None, lambda r: r.f("SDP", "D_FEATURE_MODE_CFG", "BATCH_NUMBER") == 0,
          "one batch: there is no second batch to place"),
        R("SDP_RDMA", ("D_BS_BATCH_STRIDE", "D_BN_BATCH_STRIDE", "D_EW_BATCH_STRIDE"), None,
          lambda r: r.f("SDP_RDMA", "D_FEATURE_MODE_CFG", "BATCH_NUMBER") == 0,
          "one batch: there is no second batch of operands to fetch"),
        R("SDP", ("D_FEATURE_MODE_CFG",), ("NAN_TO_ZERO",), _int8, "NaN flushing applies to fp16 data only"),
        R("PDP", ("D_SRC_LINE_STRIDE", "D_SRC_SURFACE_STRIDE"), None,
          lambda r: r.f("PDP", "D_OPERATION_MODE_CFG", "FLYING_MODE") == 0,
          "PDP pools SDP's output on the fly: the strides of an input in memory are never used"),
    ]
    for stage, p in _STAGES.items():
        rules += [
            R("SDP_RDMA", (f"D_{stage}_BASE_ADDR_LOW", f"D_{stage}_BASE_ADDR_HIGH", f"D_{stage}_LINE_STRIDE",
                           f"D_{stage}_SURFACE_STRIDE", f"D_{stage}_BATCH_STRIDE"), None,
              lambda r, s=stage: _dma_off(r, s), f"{p}RDMA is disabled: no {stage} operand is fetched"),
            R("SDP_RDMA", (f"D_{p}RDMA_CFG",), tuple(f"{p}RDMA_{f}" for f in ("DATA_USE", "DATA_SIZE", "DATA_MODE",
                                                                             "RAM_TYPE")),
              lambda r, s=stage: _dma_off(r, s), f"{p}RDMA is disabled: how it would fetch does not matter"),
            R("SDP", (f"D_DP_{stage}_CFG",), tuple(f"{stage}_{f}" for f in (
                "ALU_BYPASS", "ALU_ALGO", "MUL_BYPASS", "MUL_PRELU", "LUT_BYPASS" if stage == "EW" else "RELU_BYPASS")),
              lambda r, s=stage: not _on(r, s), f"the {stage} stage is bypassed"),
            R("SDP", (f"D_DP_{stage}_CFG",), (f"{stage}_ALU_ALGO",), lambda r, s=stage: not _alu_on(r, s),
              f"the {stage} ALU is bypassed"),
            R("SDP", (f"D_DP_{stage}_CFG",), (f"{stage}_MUL_PRELU",), lambda r, s=stage: not _mul_on(r, s),
              f"the {stage} multiplier is bypassed (PReLU only chooses between its input and product)"),
            R("SDP", (f"D_DP_{stage}_ALU_CFG", f"D_DP_{stage}_ALU_SRC_VALUE"), None,
              lambda r, s=stage: not _alu_on(r, s), f"the {stage} ALU is bypassed"),
            R("SDP", (f"D_DP_{stage}_ALU_SRC_VALUE",), None, lambda r, s=stage: _alu_mem(r, s),
              f"the {stage} ALU operand comes from memory, not from the register"),
            R("SDP", (f"D_DP_{stage}_MUL_SRC_VALUE",), None, lambda r, s=stage: not _mul_on(r, s) or _mul_mem(r, s),
              f"the {stage} multiplier is bypassed or takes its operand from memory"),
        ]
        if stage == "EW":
            rules += [
                R("SDP", ("D_DP_EW_MUL_CFG",), None, lambda r: not _mul_on(r, "EW"), "the EW multiplier is bypassed"),
                R("SDP", ("D_DP_EW_TRUNCATE_VALUE",), None, lambda r: not _mul_on(r, "EW"),
                  "the EW truncation applies to the multiplier's product only"),
            ]
            for kind in ("ALU", "MUL"):
                rules += [
                    R("SDP", (f"D_DP_EW_{kind}_CVT_OFFSET_VALUE", f"D_DP_EW_{kind}_CVT_SCALE_VALUE",
                              f"D_DP_EW_{kind}_CVT_TRUNCATE_VALUE"), None,
                      lambda r, k=kind: not _ew_mem_operand(r, k) or r.f("SDP", f"D_DP_EW_{k}_CFG", f"EW_{k}_CVT_BYPASS"),
                      f"the EW {kind} operand converter is bypassed or has no memory operand to convert"),
                    R("SDP", (f"D_DP_EW_{kind}_CFG",), (f"EW_{kind}_CVT_BYPASS",),
                      lambda r, k=kind: not _ew_mem_operand(r, k),
                      f"the EW {kind} operand converter converts memory operands only, and there is none"),
                ]
        else:
            rules += [
                R("SDP", (f"D_DP_{stage}_MUL_CFG",), None, lambda r, s=stage: not _on(r, s),
                  f"the {stage} stage is bypassed"),
                R("SDP", (f"D_DP_{stage}_MUL_CFG",), (f"{stage}_MUL_SRC",), lambda r, s=stage: not _mul_on(r, s),
                  f"the {stage} multiplier is bypassed (its truncation still applies)"),
            ]
    feature = lambda r: r.f("CDMA", "D_DATAIN_FORMAT", "DATAIN_FORMAT") == 0  # noqa: E731
    rules += [
        R("CDMA", ("D_DATAIN_FORMAT",), ("PIXEL_FORMAT", "PIXEL_MAPPING"), feature,
          "the input is a feature cube: pixel format and mapping apply to images only"),
        R("CDMA", ("D_PIXEL_OFFSET",), None, feature, "the input is a feature cube: pixel offsets apply to images only"),
        R("CDMA", ("D_RESERVED_X_CFG", "D_RESERVED_Y_CFG"), None, feature,
          "the input is a feature cube: reserved pixels per line and lines apply to images only"),
        R("CDMA", ("D_CVT_CFG",), ("CVT_TRUNCATE",), lambda r: r.f("CDMA", "D_CVT_CFG", "CVT_EN") == 0,
          "the input converter is disabled"),
        R("CDMA", ("D_CVT_OFFSET", "D_CVT_SCALE"), None, lambda r: r.f("CDMA", "D_CVT_CFG", "CVT_EN") == 0,
          "the input converter is disabled"),
        R("CDMA", ("D_MEAN_GLOBAL_0", "D_MEAN_GLOBAL_1"), None,
          lambda r: r.f("CDMA", "D_MEAN_FORMAT", "MEAN_FORMAT") == 0, "mean subtraction is disabled"),
        R("CDMA", ("D_WGS_ADDR_LOW", "D_WGS_ADDR_HIGH", "D_WMB_ADDR_LOW", "D_WMB_ADDR_HIGH", "D_WMB_BYTES"), None,
          lambda r: r.f("CDMA", "D_WEIGHT_FORMAT", "WEIGHT_FORMAT") == 0,
          "the weights are uncompressed: no mask bits or group sizes are fetched"),
    ]
    return rules


def _register() -> None:
    register_irrelevant(*_rules())
    register_inverse("SDP", sdp_inverse, fuses=("PDP",))
    register_inverse("CACC", conv_inverse, fuses=("SDP", "PDP"))


_register()
