"""SDP layers from memory: X1 (BS) / X2 (BN) stages, the Y (EW) stage with its LUT, the output converter.

Operands are REG (``D_DP_*_SRC_VALUE``), per-channel or per-element MEM (``D_*RDMA_CFG.DATA_MODE``);
the ALU and MUL operands of one stage share that stage's DMA, so when both come from memory they share a
mode. X operands are 16-bit registers or 1-/2-byte memory (``DATA_SIZE``); Y's are 32-bit registers or
16-bit memory converted by the EW operand CVT. Stages exist only where the config has the unit
(``sdp_bs``/``sdp_bn``/``sdp_ew``/``sdp_lut``). EQL (Y ALU algo 3) writes no output, so it is left to
``regressions/golden`` (it checks D_STATUS instead of memory).
"""
from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

from golden.config import HwConfig
from golden.lut import LutRegisters
from regressions.lib import programs
from regressions.lib.strategies import (
    lut_index_and_slopes,
    atom_elements,
    bypassed,
    channels,
    field_ints,
    field_range,
    int8_cube,
    ints,
    magnitude_bits,
    reg_field,
    rescale_shift,
    signed_bits,
    signed_range,
    values,
)
from regressions.lib.reference import sdp as ref_sdp

#: Elements (padded channels x H x W) the plain-loop reference visits at most: X stages ~2 µs each,
#: the LUT ~20 µs.
WORK_X = 4_000
WORK_Y = 1_500
MAX_SIDE = 6
#: The X MUL_SHIFT_VALUE field has 8 bits, the cmod uses the low 6 (golden.engines.sdp.XConfig).
X_SHIFT_BITS = 6
#: LUT depths (NVDLA: LE 65 entries, LO 257).
LE_DEPTH, LO_DEPTH = ref_sdp.LE_DEPTH, ref_sdp.LO_DEPTH
ALU_SUM = ref_sdp.ALU_SUM


def _cube(draw, hw: HwConfig | None, work: int) -> np.ndarray:
    h = draw(st.integers(1, MAX_SIDE))
    w = draw(st.integers(1, MAX_SIDE))
    atom = atom_elements(hw)
    c = draw(channels(hw, max_atoms=max(1, min(3, work // (atom * h * w)))))
    return int8_cube(draw, c, h, w)


def _operands(draw, mem_range: tuple[int, int], reg_range: tuple[int, int], shape, alu: bool, mul: bool):
    """(alu operand, mul operand): each an int (REG) or, from memory, a (C,) or (C, H, W) array; both
    memory operands of a stage share one DMA and so one mode."""
    mode = draw(st.sampled_from(["kernel", "element"]))
    mem_shape = shape[:1] if mode == "kernel" else shape
    out = []
    for used in (alu, mul):
        if used and draw(st.booleans()):
            out.append(values(draw, mem_shape, mem_range))
        else:
            out.append(draw(ints(reg_range, typical=(-256, 256))))
    return tuple(out)


def _x_stage(draw, hw: HwConfig | None, stage: str, shape, mem_bytes: int,
             bits: int) -> tuple[ref_sdp.SdpXParams, int]:
    """One X stage (``D_DP_BS_*`` / ``D_DP_BN_*``), bypassed when the config lacks the unit, and the
    magnitude bits of its output for ``bits``-bit input (to choose shifts that keep data alive)."""
    present = hw is None or (hw.sdp_bs if stage == "BS" else hw.sdp_bn)
    if not present or bypassed(draw):
        return ref_sdp.SdpXParams(bypass=True), bits
    alu_bypass, mul_bypass = bypassed(draw), bypassed(draw)
    reg = signed_range(reg_field(hw, "SDP", f"D_DP_{stage}_ALU_SRC_VALUE", f"{stage}_ALU_OPERAND"))
    alu_op, mul_op = _operands(draw, signed_bits(8 * mem_bytes), reg, shape, not alu_bypass, not mul_bypass)
    alu_algo = draw(field_ints(hw, "SDP", f"D_DP_{stage}_CFG", f"{stage}_ALU_ALGO"))
    alu_shift = draw(field_ints(hw, "SDP", f"D_DP_{stage}_ALU_CFG", f"{stage}_ALU_SHIFT_VALUE", typical=(0, 8)))
    if not alu_bypass:
        bits = max(bits, min(32, magnitude_bits(alu_op) + alu_shift)) + (alu_algo >= ALU_SUM)
    if not mul_bypass:
        bits += magnitude_bits(mul_op)
    shift_rng = field_range(hw, "SDP", f"D_DP_{stage}_MUL_CFG", f"{stage}_MUL_SHIFT_VALUE", hi=(1 << X_SHIFT_BITS) - 1)
    mul_shift = rescale_shift(draw, shift_rng, bits, 1, out_bits=12)
    params = ref_sdp.SdpXParams(
        bypass=False, alu_bypass=alu_bypass, alu_algo=alu_algo, alu_operand=alu_op, alu_shift=alu_shift,
        mul_bypass=mul_bypass, mul_prelu=draw(st.booleans()), mul_operand=mul_op, mul_shift=mul_shift,
        relu_bypass=bypassed(draw),
    )
    return params, max(1, min(32, bits - mul_shift))


def _output_cvt(draw, hw: HwConfig | None, bits: int) -> dict[str, int]:
    """``D_CVT_OFFSET`` / ``D_CVT_SCALE`` / ``D_CVT_SHIFT`` for ``bits``-bit input."""
    near = 1 << max(0, bits - 2)
    scale = draw(field_ints(hw, "SDP", "D_CVT_SCALE", "CVT_SCALE", signed=True, typical=(-1024, 1024)))
    return dict(
        cvt_offset=draw(field_ints(hw, "SDP", "D_CVT_OFFSET", "CVT_OFFSET", signed=True, typical=(-near, near))),
        cvt_scale=scale,
        cvt_shift=rescale_shift(draw, field_range(hw, "SDP", "D_CVT_SHIFT", "CVT_SHIFT"), bits + 1, scale),
    )


@st.composite
def sdp_layers(draw, hw: HwConfig | None = None) -> programs.SdpLayer:
    """X1/X2 with REG/MEM operands and the output converter, Y bypassed (what every config and our
    RTL have)."""
    x = _cube(draw, hw, WORK_X)
    size = draw(st.sampled_from([1, 2]))  # BRDMA/NRDMA_DATA_SIZE
    x1, bits = _x_stage(draw, hw, "BS", x.shape, size, magnitude_bits(x))
    x2, bits = _x_stage(draw, hw, "BN", x.shape, size, bits)
    params = ref_sdp.SdpParams(x1=x1, x2=x2, **_output_cvt(draw, hw, bits))
    return programs.SdpLayer(x, params, operand_bytes=size)


def _operand_cvt(draw, hw: HwConfig | None, kind: str) -> tuple[ref_sdp.SdpOperandCvt, int]:
    """``D_DP_EW_{ALU,MUL}_CVT_*`` (applies to MEM operands only) and the magnitude bits it leaves of a
    16-bit operand."""
    reg = f"D_DP_EW_{kind}_CVT"
    scale = draw(field_ints(hw, "SDP", f"{reg}_SCALE_VALUE", f"EW_{kind}_CVT_SCALE", signed=True,
                            typical=(-1024, 1024)))
    truncate = rescale_shift(draw, field_range(hw, "SDP", f"{reg}_TRUNCATE_VALUE", f"EW_{kind}_CVT_TRUNCATE"), 17,
                             scale, out_bits=16)
    cvt = ref_sdp.SdpOperandCvt(
        bypass=bypassed(draw),
        offset=draw(field_ints(hw, "SDP", f"{reg}_OFFSET_VALUE", f"EW_{kind}_CVT_OFFSET", signed=True,
                               typical=(-512, 512))),
        scale=scale,
        truncate=truncate,
    )
    return cvt, 16 if cvt.bypass else max(1, min(32, 17 + abs(scale).bit_length() - truncate))


def _lut(draw, hw: HwConfig | None, bits: int) -> LutRegisters:
    """Tables (``LUT_DATA`` entries) and ``S_LUT_*`` settings of the SDP LUT, usually spanning the
    ``bits``-bit range of its input (so lookups hit, underflow and overflow alike)."""
    entry = signed_range(reg_field(hw, "SDP", "S_LUT_ACCESS_DATA", "LUT_DATA"))
    tables = values(draw, (LE_DEPTH + LO_DEPTH,), entry)
    le_exp = draw(st.booleans())
    span = 1 << min(bits, 31)

    def f(reg: str, name: str, typical=None, signed=True):
        return draw(field_ints(hw, "SDP", reg, name, signed=signed, typical=typical))

    def select(table: str, depth_bits: int) -> int:
        centre = bits + 1 - depth_bits
        return f("S_LUT_INFO", f"LUT_{table}_INDEX_SELECT", (centre - 2, centre + 2))

    return LutRegisters(
        le_table=tuple(int(v) for v in tables[:LE_DEPTH]),
        lo_table=tuple(int(v) for v in tables[LE_DEPTH:]),
        le_function="exp" if le_exp else "linear",
        le_start=f("S_LUT_LE_START", "LUT_LE_START", (-span, span // 4)),
        le_end=f("S_LUT_LE_END", "LUT_LE_END", (-span, span)),
        lo_start=f("S_LUT_LO_START", "LUT_LO_START", (-span, span // 4)),
        lo_end=f("S_LUT_LO_END", "LUT_LO_END", (-span, span)),
        **lut_index_and_slopes(f, select, (-8, 8)),
    )


@st.composite
def sdp_y_layers(draw, hw: HwConfig | None = None, with_x2: bool = False) -> programs.SdpLayer:
    """The Y (EW) stage active (MUL, ALU MAX/MIN/SUM, LUT where the config has one) behind X1 (and X2
    when ``with_x2``: ``regressions/golden`` relies on X1 being the only X stage). ``hw=None``
    assumes EW and LUT (use it only with such presets)."""
    if hw is not None and not hw.sdp_ew:
        raise ValueError(f"{hw.name} has no SDP EW (Y) unit")
    has_lut = hw is None or hw.sdp_lut
    x = _cube(draw, hw, WORK_Y)
    size = draw(st.sampled_from([1, 2]))
    x1, bits = _x_stage(draw, hw, "BS", x.shape, size, magnitude_bits(x))
    x2 = ref_sdp.SdpXParams()
    if with_x2:
        x2, bits = _x_stage(draw, hw, "BN", x.shape, size, bits)

    alu_bypass, mul_bypass = bypassed(draw), bypassed(draw)
    reg = signed_range(reg_field(hw, "SDP", "D_DP_EW_ALU_SRC_VALUE", "EW_ALU_OPERAND"))
    alu_op, mul_op = _operands(draw, signed_bits(16), reg, x.shape, not alu_bypass, not mul_bypass)
    alu_cvt, alu_bits = _operand_cvt(draw, hw, "ALU")
    mul_cvt, mul_bits = _operand_cvt(draw, hw, "MUL")
    if not mul_bypass:
        bits += mul_bits if np.ndim(mul_op) else magnitude_bits(mul_op)
    truncate = rescale_shift(draw, field_range(hw, "SDP", "D_DP_EW_TRUNCATE_VALUE", "EW_TRUNCATE"), bits, 1,
                             out_bits=16)
    bits = max(1, min(32, bits - truncate)) if not mul_bypass else bits
    if not alu_bypass:
        bits = max(bits, alu_bits if np.ndim(alu_op) else magnitude_bits(alu_op)) + 1
    y = ref_sdp.SdpYParams(
        bypass=False,
        alu_bypass=alu_bypass,
        alu_algo=draw(field_ints(hw, "SDP", "D_DP_EW_CFG", "EW_ALU_ALGO", hi=ALU_SUM)),  # EQL: see module doc
        alu_operand=alu_op,
        alu_cvt=alu_cvt,
        mul_bypass=mul_bypass,
        mul_prelu=draw(st.booleans()),
        mul_operand=mul_op,
        mul_cvt=mul_cvt,
        truncate=truncate,
        lut_bypass=not has_lut or bypassed(draw),
    )
    lut = LutRegisters()
    if not y.lut_bypass:
        lut = _lut(draw, hw, min(bits, 32))
        bits = 16  # table entries, interpolated
    params = ref_sdp.SdpParams(x1=x1, x2=x2, y=y, lut=lut, **_output_cvt(draw, hw, bits))
    return programs.SdpLayer(x, params, operand_bytes=size)
