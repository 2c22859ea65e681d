"""SDP programming (the firmware's ``sdp.c``).

The three operand stages map onto the hardware as x1 -> BS (read by BRDMA), x2 -> BN (NRDMA) and
y -> EW (ERDMA). An operand is read from memory only when it is enabled, does something (type not
NONE) and is not per-layer; a per-layer operand is a register value. The source is either memory (via
the RDMA) or on-the-fly from CACC (``src_data.type == MEM_HW``); the destination is memory or
on-the-fly into PDP (``dst_data.type == MEM_HW``).

Order matters and is the firmware's: the RDMA's feature mode and the three operand-DMA configs are
first written with "reset" values (which, because of how the firmware's lookup table is indexed, are
all-zero words, i.e. DISABLE=NO), then the RDMA is fully programmed only when the group needs it, the
LUT is uploaded, then the SDP core.

Not emitted: the D_PERF_ENABLE write of ``dla_sdp_enable`` (statistics are disabled in our runs).

The firmware itself rejects only a source without an address; it indexes lookup tables with descriptor
fields without checking them. Where such an index would run off the table (undefined behaviour in C),
or the descriptor asks for hardware the configuration lacks, we refuse the descriptor instead; those
checks are marked "ours".
"""
from __future__ import annotations

from golden.errors import RegisterError
from golden.intr import done_bit
from runtime.nvdla.descriptors import MEM_CV, MEM_HW, OP_SDP, DataCube, SdpOp, SdpOpDesc, SdpSurfaceDesc
from runtime.nvdla.engines import PRECISION, RAM, Programmer, Group, FirmwareStep, hi32, lo32, register
from runtime.nvdla.engines.lut import lut_is_ready, upload_lut

SDP_OP_NONE, SDP_OP_MUL, SDP_OP_ADD, SDP_OP_BOTH = 0, 1, 2, 3
SDP_OP_PER_LAYER, SDP_OP_PER_KERNEL, SDP_OP_PER_POINT = 0, 1, 2
ACTIVATION_NONE, ACTIVATION_RELU, ACTIVATION_LUT, ACTIVATION_PRELU = 0, 1, 2, 3
CONV_MODE_WINOGRAD = 1

#: processing precision, indexed [dst_precision][src_precision]: int8 out of int16 is processed as int8
_PROC_PRECISION = (("INT8", "INT8", "FP16"), ("INT8", "INT16", "FP16"), ("INT8", "INT16", "FP16"))
#: RDMA DATA_USE per op type (NONE, MUL, ADD, BOTH): NONE is encoded as MUL
_DATA_USE = ("MUL", "MUL", "ALU", "BOTH")
#: RDMA DATA_SIZE per operand precision
_DATA_SIZE = ("ONE_BYTE", "TWO_BYTE", "TWO_BYTE")
#: RDMA DATA_MODE per op mode (PER_LAYER, PER_KERNEL, PER_POINT): per-layer is encoded as PER_ELEMENT
_DATA_MODE = ("PER_ELEMENT", "PER_KERNEL", "PER_ELEMENT")
#: (descriptor op, surface cube, RDMA config register, its field prefix, stage name of the RDMA address
#: registers and of the SDP core registers)
_STAGES = (("x1_op", "x1_data", "D_BRDMA_CFG", "BRDMA", "BS"),
           ("x2_op", "x2_data", "D_NRDMA_CFG", "NRDMA", "BN"),
           ("y_op", "y_data", "D_ERDMA_CFG", "ERDMA", "EW"))
#: configuration flag of each stage's hardware unit
_STAGE_UNIT = {"x1_op": "sdp_bs", "x2_op": "sdp_bn", "y_op": "sdp_ew"}


def _yes_no(flag: bool) -> str:
    return "YES" if flag else "NO"


def _bypass(used: bool) -> str:
    """The firmware's bypass table: a stage/feature in use is not bypassed."""
    return "NO" if used else "YES"


def _src(per_layer: bool) -> str:
    """Operand source: a per-layer operand comes from a register, the others from memory."""
    return "REG" if per_layer else "MEM"


def _reads_memory(op: SdpOp) -> bool:
    """The program step's test for an operand DMA: enabled, doing something, not per-layer."""
    return bool(op.enable) and op.type != SDP_OP_NONE and op.mode != SDP_OP_PER_LAYER


def rdma_needed(op: SdpOpDesc, surface: SdpSurfaceDesc) -> bool:
    """``dla_sdp_rdma_check``: the RDMA runs for a source in memory or any non-per-layer operand. Unlike
    the program step, it does not look at the op type (an enabled per-kernel NONE op still counts)."""
    fly = surface.src_data.type == MEM_HW
    operands = any(getattr(op, name).enable and getattr(op, name).mode != SDP_OP_PER_LAYER
                   for name, *_ in _STAGES)
    return (not fly) or operands


def _validate(p: FirmwareStep, op: SdpOpDesc, s: SdpSurfaceDesc) -> None:
    """Ours: every descriptor value the firmware uses as a table index, plus configuration limits."""
    for name in ("src_precision", "dst_precision"):
        if getattr(op, name) >= len(PRECISION):
            raise p.fail(f"{name} {getattr(op, name)} out of range (0..2)")
    if op.batch_num < 1:
        raise p.fail(f"batch_num {op.batch_num} must be >= 1 (the firmware programs batch_num - 1)")
    if op.conv_mode == CONV_MODE_WINOGRAD and not p.hw.winograd:
        raise p.fail(f"conv_mode winograd but {p.hw.name} has no Winograd")
    for what in ("src_data", "dst_data"):
        cube = getattr(s, what)
        if cube.type > MEM_HW:
            raise p.fail(f"{what}.type {cube.type} out of range (0..2)")
    if s.dst_data.type == MEM_HW and not p.hw.pdp:
        raise p.fail(f"dst_data on-the-fly (to PDP) but {p.hw.name} has no PDP")
    for name, cube_name, *_ in _STAGES:
        x: SdpOp = getattr(op, name)
        if x.enable > 1:
            raise p.fail(f"{name}.enable {x.enable} is not 0 or 1")
        if x.type > SDP_OP_BOTH:
            raise p.fail(f"{name}.type {x.type} out of range (0..3)")
        if x.mode > SDP_OP_PER_POINT:
            raise p.fail(f"{name}.mode {x.mode} out of range (0..2)")
        if x.alu_type > 3:
            raise p.fail(f"{name}.alu_type {x.alu_type} out of range (0..3)")
        if x.precision >= len(PRECISION):
            raise p.fail(f"{name}.precision {x.precision} out of range (0..2)")
        if x.enable and not getattr(p.hw, _STAGE_UNIT[name]):
            raise p.fail(f"{name} enabled but {p.hw.name} has no SDP {name[:-3].upper()} stage")
        if _reads_memory(x) and getattr(s, cube_name).type > MEM_CV:
            raise p.fail(f"{cube_name}.type {getattr(s, cube_name).type}: {name} reads memory (MC or CV)")
    for what in ("alu_cvt", "mul_cvt"):
        if op.y_op.enable and getattr(op.y_op, what).enable > 1:
            raise p.fail(f"y_op.{what}.enable {getattr(op.y_op, what).enable} is not 0 or 1")
    if op.lut_index >= 0 and not p.hw.sdp_lut:
        raise p.fail(f"lut_index {op.lut_index} but {p.hw.name} has no SDP LUT")


def _ram(cube: DataCube) -> str | int:
    """RAM_TYPE of a cube. The firmware indexes a 2-entry table with the cube type; for an unused
    operand cube of type HW that reads past the table, and we write 0 (the field is don't-care)."""
    return RAM[cube.type] if cube.type <= MEM_CV else 0


def program(p: FirmwareStep, g: Group) -> None:
    try:
        _program(p, g)
    except RegisterError as exc:  # a descriptor value wider than its register field (e.g. shift_value)
        if "does not fit" not in str(exc):
            raise
        raise p.fail(f"descriptor value out of range: {exc}") from None


def _program(p: FirmwareStep, g: Group) -> None:
    op: SdpOpDesc = g.op
    s: SdpSurfaceDesc = g.surface
    _validate(p, op, s)
    src, dst = s.src_data, s.dst_data
    fly = src.type == MEM_HW
    out_dma = dst.type != MEM_HW
    # addresses (the firmware also asserts atom alignment here, but only in DEBUG builds where its
    # assert is compiled out, so no alignment check is made)
    src_addr = p.cube_address(src, "src_data") if not fly else 0
    dst_addr = p.cube_address(dst, "dst_data") if out_dma else 0
    lut = None
    if op.lut_index >= 0:
        g.lut_index = op.lut_index
        lut = p.lut(op.lut_index)
    reads = {name: _reads_memory(getattr(op, name)) for name, *_ in _STAGES}
    addrs = {name: p.cube_address(getattr(s, cube), cube) if reads[name] else 0 for name, cube, *_ in _STAGES}

    # RDMA "reset" writes (BRDMA/NRDMA/ERDMA get DISABLE=NO, i.e. 0, not YES)
    p.reg("SDP_RDMA", "D_FEATURE_MODE_CFG", FLYING_MODE="OFF")
    for _name, _cube, cfg, prefix, _addr in _STAGES:
        p.reg("SDP_RDMA", cfg, **{f"{prefix}_DISABLE": "NO"})
    precision = dict(IN_PRECISION=PRECISION[op.src_precision], OUT_PRECISION=PRECISION[op.dst_precision],
                     PROC_PRECISION=_PROC_PRECISION[op.dst_precision][op.src_precision])
    winograd = "ON" if op.conv_mode == CONV_MODE_WINOGRAD else "OFF"
    p.reg("SDP_RDMA", "D_FEATURE_MODE_CFG", FLYING_MODE="ON" if fly else "OFF", WINOGRAD=winograd,
          BATCH_NUMBER=op.batch_num - 1, **precision)

    if g.rdma_needed:
        p.reg("SDP_RDMA", "D_DATA_CUBE_WIDTH", src.width - 1)
        p.reg("SDP_RDMA", "D_DATA_CUBE_HEIGHT", src.height - 1)
        p.reg("SDP_RDMA", "D_DATA_CUBE_CHANNEL", src.channel - 1)
        if not fly:
            p.reg("SDP_RDMA", "D_SRC_BASE_ADDR_LOW", lo32(src_addr))
            p.reg("SDP_RDMA", "D_SRC_BASE_ADDR_HIGH", hi32(src_addr))
            p.reg("SDP_RDMA", "D_SRC_LINE_STRIDE", src.line_stride)
            p.reg("SDP_RDMA", "D_SRC_SURFACE_STRIDE", src.surf_stride)
            p.reg("SDP_RDMA", "D_SRC_DMA_CFG", SRC_RAM_TYPE=RAM[src.type])
        for name, cube_name, cfg, prefix, stage in _STAGES:
            x: SdpOp = getattr(op, name)
            cube: DataCube = getattr(s, cube_name)
            ram = _ram(cube)
            ram_field = {f"{prefix}_RAM_TYPE": ram} if isinstance(ram, str) else {}
            p.reg("SDP_RDMA", cfg, **{f"{prefix}_DISABLE": _yes_no(not reads[name]),
                                     f"{prefix}_DATA_USE": _DATA_USE[x.type],
                                     f"{prefix}_DATA_SIZE": _DATA_SIZE[x.precision],
                                     f"{prefix}_DATA_MODE": _DATA_MODE[x.mode]}, **ram_field)
            if reads[name]:
                p.reg("SDP_RDMA", f"D_{stage}_BASE_ADDR_LOW", lo32(addrs[name]))
                p.reg("SDP_RDMA", f"D_{stage}_BASE_ADDR_HIGH", hi32(addrs[name]))
                p.reg("SDP_RDMA", f"D_{stage}_LINE_STRIDE", cube.line_stride)
                p.reg("SDP_RDMA", f"D_{stage}_SURFACE_STRIDE", cube.surf_stride)

    if lut is not None:
        upload_lut(p, "SDP", lut, op.src_precision)

    p.reg("SDP", "D_DATA_CUBE_WIDTH", src.width - 1)
    p.reg("SDP", "D_DATA_CUBE_HEIGHT", src.height - 1)
    p.reg("SDP", "D_DATA_CUBE_CHANNEL", src.channel - 1)
    if out_dma:  # note: HIGH before LOW here, the reverse of every other address pair
        p.reg("SDP", "D_DST_BASE_ADDR_HIGH", hi32(dst_addr))
        p.reg("SDP", "D_DST_BASE_ADDR_LOW", lo32(dst_addr))
        p.reg("SDP", "D_DST_LINE_STRIDE", dst.line_stride)
        p.reg("SDP", "D_DST_SURFACE_STRIDE", dst.surf_stride)

    _program_bs_bn(p, op.x1_op, "BS")
    _program_bs_bn(p, op.x2_op, "BN")
    _program_ew(p, op.y_op)

    p.reg("SDP", "D_FEATURE_MODE_CFG", FLYING_MODE="ON" if fly else "OFF", OUTPUT_DST="MEM" if out_dma else "PDP",
          WINOGRAD=winograd, BATCH_NUMBER=op.batch_num - 1)
    p.reg("SDP", "D_DST_DMA_CFG", **({"DST_RAM_TYPE": RAM[dst.type]} if out_dma else {}))
    if op.batch_num > 1:
        p.reg("SDP", "D_DST_BATCH_STRIDE", op.batch_stride)
    p.reg("SDP", "D_DATA_FORMAT", PROC_PRECISION=precision["PROC_PRECISION"], OUT_PRECISION=precision["OUT_PRECISION"])
    p.reg("SDP", "D_CVT_OFFSET", op.out_cvt.offset)
    p.reg("SDP", "D_CVT_SCALE", op.out_cvt.scale)
    p.reg("SDP", "D_CVT_SHIFT", op.out_cvt.truncate)


def _stage_cfg(x: SdpOp, stage: str, last: str, last_used: bool) -> dict[str, str | int]:
    """D_DP_{BS,BN,EW}_CFG: the ALU is used for ADD/BOTH, the multiplier for MUL/BOTH. ``last`` is the
    stage's final field (RELU_BYPASS for BS/BN, LUT_BYPASS for EW)."""
    alu_used = x.type in (SDP_OP_ADD, SDP_OP_BOTH)
    mul_used = x.type in (SDP_OP_MUL, SDP_OP_BOTH)
    return {f"{stage}_BYPASS": _bypass(bool(x.enable)), f"{stage}_ALU_BYPASS": _bypass(alu_used),
            # EW's ALGO encoding (MAX, MIN, SUM, EQL) is used for all three stages
            f"{stage}_ALU_ALGO": x.alu_type, f"{stage}_MUL_BYPASS": _bypass(mul_used),
            f"{stage}_MUL_PRELU": _yes_no(x.act == ACTIVATION_PRELU), f"{stage}_{last}": _bypass(last_used)}


def _program_bs_bn(p: FirmwareStep, x: SdpOp, stage: str) -> None:
    p.reg("SDP", f"D_DP_{stage}_CFG", **_stage_cfg(x, stage, "RELU_BYPASS", x.act == ACTIVATION_RELU))
    if not x.enable:
        return
    per_layer = x.mode == SDP_OP_PER_LAYER
    if x.type in (SDP_OP_ADD, SDP_OP_BOTH):
        p.reg("SDP", f"D_DP_{stage}_ALU_CFG", **{f"{stage}_ALU_SRC": _src(per_layer),
                                                 f"{stage}_ALU_SHIFT_VALUE": x.shift_value})
    if per_layer:  # both operand registers, whatever the op type
        p.reg("SDP", f"D_DP_{stage}_ALU_SRC_VALUE", x.alu_operand)
        p.reg("SDP", f"D_DP_{stage}_MUL_SRC_VALUE", x.mul_operand)
    # written for every enabled op: the multiplier's truncate applies even when it is bypassed
    p.reg("SDP", f"D_DP_{stage}_MUL_CFG", **{f"{stage}_MUL_SRC": _src(per_layer),
                                             f"{stage}_MUL_SHIFT_VALUE": x.truncate})


def _program_ew(p: FirmwareStep, y: SdpOp) -> None:
    p.reg("SDP", "D_DP_EW_CFG", **_stage_cfg(y, "EW", "LUT_BYPASS", y.act == ACTIVATION_LUT))
    if not y.enable:
        return
    per_layer = y.mode == SDP_OP_PER_LAYER
    for kind, types, cvt in (("ALU", (SDP_OP_ADD, SDP_OP_BOTH), y.alu_cvt),
                             ("MUL", (SDP_OP_MUL, SDP_OP_BOTH), y.mul_cvt)):
        if y.type not in types:
            continue
        p.reg("SDP", f"D_DP_EW_{kind}_CFG", **{f"EW_{kind}_SRC": _src(per_layer),
                                               f"EW_{kind}_CVT_BYPASS": _bypass(bool(cvt.enable))})
        if per_layer:
            p.reg("SDP", f"D_DP_EW_{kind}_SRC_VALUE", y.alu_operand if kind == "ALU" else y.mul_operand)
        else:
            p.reg("SDP", f"D_DP_EW_{kind}_CVT_OFFSET_VALUE", cvt.offset)
            p.reg("SDP", f"D_DP_EW_{kind}_CVT_SCALE_VALUE", cvt.scale)
            p.reg("SDP", f"D_DP_EW_{kind}_CVT_TRUNCATE_VALUE", cvt.truncate)
    p.reg("SDP", "D_DP_EW_TRUNCATE_VALUE", y.truncate)


def enable(p: FirmwareStep, g: Group) -> None:
    if g.rdma_needed:
        p.reg("SDP_RDMA", "D_OP_ENABLE", OP_EN="ENABLE")
    p.reg("SDP", "D_OP_ENABLE", OP_EN="ENABLE")


def set_producer(p: FirmwareStep, group: int, rdma_group: int) -> None:
    p.reg("SDP", "S_POINTER", PRODUCER=group)
    p.reg("SDP_RDMA", "S_POINTER", PRODUCER=rdma_group)


SDP = register(Programmer(
    op_type=OP_SDP, name="SDP", pointer_unit="SDP", rdma_pointer_unit="SDP_RDMA", done_bit=done_bit("SDP"),
    set_producer=set_producer, program=program, enable=enable, rdma_needed=rdma_needed,
    is_ready=lambda group, other: lut_is_ready(group.op.lut_index, other),
    intr_mask_fields=("SDP_DONE_MASK0", "SDP_DONE_MASK1")))
