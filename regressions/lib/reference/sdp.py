"""Reference math for the SDP int8 pipeline: X1 (BS) -> X2 (BN) -> Y (EW, incl. LUT) -> output CVT.

Rules: NVDLA_NOTES.md section 4 "SDP" (cmod ``cmod/hls/sdp/sdp_x.cpp``, ``sdp_y_core.cpp``,
``sdp_y_cvt.cpp``, ``sdp_y_idx.cpp``, ``sdp_y_inp.cpp``, ``sdp_c.cpp``, wrapper
``cmod/hls_wrapper/sdp_hls_wrapper.cpp``).

Operands.  Every ALU/MUL operand is one of

* a Python/numpy integer: the register operand (REG source), the same for every element;
* a 1-D array of length C: a per-channel operand (MEM source, PER_KERNEL);
* a (C, H, W) array: a per-element operand (MEM source, PER_ELEMENT).

In X1/X2 REG and MEM operands are both 16-bit and are treated alike.  In Y the form
selects the source: a scalar is the 32-bit REG operand and is used as is; an array is
the 16-bit DMA operand and goes through that operand's Y CVT (unless its ``bypass``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Union

import numpy as np

from golden.lut import LE_DEPTH, LO_DEPTH, TABLE_LE, TABLE_LO, LutRegisters

from .arith import (
    OutsideCmodDomain,
    check_range,
    check_signed,
    check_unsigned,
    rha,
    sat,
    sign_extend,
)

Operand = Union[int, np.ndarray]

ALU_MAX, ALU_MIN, ALU_SUM, ALU_EQL = 0, 1, 2, 3
FRACTION_BITS = 35


@dataclass(frozen=True)
class SdpXParams:
    """One X stage (X1 = BS, X2 = BN), fields of ``D_DP_BS_CFG`` / ``D_DP_BN_CFG`` and friends.

    ``alu_algo``: 0 MAX, 1 MIN, 2 SUM, 3 (treated as SUM).  ``alu_shift`` is
    ALU_SHIFT_VALUE (0..63), ``mul_shift`` is MUL_SHIFT_VALUE (the truncation, 0..63).
    Operands are 16-bit signed (see the module docstring for the accepted forms).
    """

    bypass: bool = True
    alu_bypass: bool = True
    alu_algo: int = ALU_SUM
    alu_operand: Operand = 0
    alu_shift: int = 0
    mul_bypass: bool = True
    mul_prelu: bool = False
    mul_operand: Operand = 0
    mul_shift: int = 0
    relu_bypass: bool = True


@dataclass(frozen=True)
class SdpOperandCvt:
    """Y-stage conversion of a DMA operand (``D_DP_EW_{ALU,MUL}_CVT_*``).

    ``sat32(rha((v - offset) * scale, truncate))``; offset is 32-bit signed, scale 16-bit
    signed, truncate 0..63.  Not applied to REG operands.
    """

    bypass: bool = True
    offset: int = 0
    scale: int = 1
    truncate: int = 0


@dataclass(frozen=True)
class SdpYParams:
    """The Y (EW) stage, ``D_DP_EW_CFG`` and operands.

    ``alu_algo``: 0 MAX, 1 MIN, 2 SUM, 3 EQL.  ``truncate`` is EW_TRUNCATE (0..1023),
    applied after the multiplier.  A scalar operand is the 32-bit REG value; an array is
    the 16-bit DMA operand, converted by ``alu_cvt`` / ``mul_cvt``.
    """

    bypass: bool = True
    alu_bypass: bool = True
    alu_algo: int = ALU_SUM
    alu_operand: Operand = 0
    alu_cvt: SdpOperandCvt = field(default_factory=SdpOperandCvt)
    mul_bypass: bool = True
    mul_prelu: bool = False
    mul_operand: Operand = 0
    mul_cvt: SdpOperandCvt = field(default_factory=SdpOperandCvt)
    truncate: int = 0
    lut_bypass: bool = True


@dataclass(frozen=True)
class SdpParams:
    """Everything the SDP int8 datapath needs; the defaults bypass every stage.

    ``cvt_offset`` (signed 32-bit), ``cvt_scale`` (signed 16-bit) and ``cvt_shift`` (0..63)
    are the output converter ``D_CVT_OFFSET/SCALE/SHIFT``.
    """

    x1: SdpXParams = field(default_factory=SdpXParams)
    x2: SdpXParams = field(default_factory=SdpXParams)
    y: SdpYParams = field(default_factory=SdpYParams)
    lut: LutRegisters = field(default_factory=LutRegisters)
    cvt_offset: int = 0
    cvt_scale: int = 1
    cvt_shift: int = 0


# ----------------------------------------------------------------------------- operands


def _operand_at(operand: Operand, index: tuple[int, int, int], shape: tuple[int, ...], name: str) -> int:
    """Value of a REG / per-channel / per-element operand for element ``index`` = (c, h, w)."""
    if np.ndim(operand) == 0:
        return int(operand)
    array = np.asarray(operand)
    if array.ndim == 1:
        if array.shape[0] != shape[0]:
            raise ValueError(f"{name}: per-channel operand has {array.shape[0]} entries, cube has {shape[0]}")
        return int(array[index[0]])
    if array.shape != tuple(shape):
        raise ValueError(f"{name}: per-element operand shape {array.shape} != cube shape {tuple(shape)}")
    return int(array[index])


def _is_reg(operand: Operand) -> bool:
    return np.ndim(operand) == 0


# ----------------------------------------------------------------------------- X stages


def sdp_x_stage(v: int, xp: SdpXParams, index: tuple[int, int, int] = (0, 0, 0),
                shape: tuple[int, ...] = (1, 1, 1)) -> int:
    """One X stage (BS or BN) on one 32-bit value (``sdp_x.cpp``: ALU -> MUL -> truncate -> ReLU).

    * ALU: ``op' = sat32(op << ALU_SHIFT)``; MAX/MIN compare, SUM is ``x + op'`` kept at
      33 bits without saturation.
    * MUL: ``x * op`` at 49 bits; with PReLU a non-negative (33-bit) x passes and skips
      the truncation.
    * Truncation ``sat32(rha(v, MUL_SHIFT))`` is applied even when MUL is bypassed.
      A PReLU pass-through value is narrowed to 32 bits by dropping bit 32 (the cmod
      assigns the 49-bit value to a 32-bit ac_int; the RTL takes ``[31:0]``), so a
      positive 33-bit SUM wraps there.
    * ReLU (``relu_bypass`` False): ``max(v, 0)``.
    """
    if xp.bypass:
        return v
    algo = check_range("alu_algo", xp.alu_algo, 0, 3)
    alu_shift = check_unsigned("alu_shift", xp.alu_shift, 6)
    mul_shift = check_unsigned("mul_shift", xp.mul_shift, 6)

    if xp.alu_bypass:
        alu_out = v
    else:
        operand = check_signed("X alu operand", _operand_at(xp.alu_operand, index, shape, "alu_operand"), 16)
        shifted = sat(operand << alu_shift, 32)
        if algo == ALU_MAX:
            alu_out = max(v, shifted)
        elif algo == ALU_MIN:
            alu_out = min(v, shifted)
        else:  # SUM, and 3 which the X ALU treats as SUM: 33-bit result, no saturation
            alu_out = v + shifted

    skip_truncation = False
    if xp.mul_bypass:
        mul_out = alu_out
    elif xp.mul_prelu and alu_out >= 0:
        mul_out = alu_out
        skip_truncation = True
    else:
        operand = check_signed("X mul operand", _operand_at(xp.mul_operand, index, shape, "mul_operand"), 16)
        mul_out = alu_out * operand

    if skip_truncation:
        truncated = sign_extend(mul_out, 32)
    else:
        truncated = sat(rha(mul_out, mul_shift), 32)

    if not xp.relu_bypass:
        truncated = max(truncated, 0)
    return truncated


# ----------------------------------------------------------------------------- Y stage


def _y_operand(operand: Operand, cvt: SdpOperandCvt, index, shape, name: str) -> int:
    """Y operand: REG is used as a 32-bit value; a DMA value is 16-bit and goes through the Y CVT."""
    if _is_reg(operand):
        return check_signed(f"Y {name} (REG)", int(operand), 32)
    value = check_signed(f"Y {name} (MEM)", _operand_at(operand, index, shape, name), 16)
    if cvt.bypass:
        return value
    offset = check_signed(f"{name} cvt offset", cvt.offset, 32)
    scale = check_signed(f"{name} cvt scale", cvt.scale, 16)
    truncate = check_unsigned(f"{name} cvt truncate", cvt.truncate, 6)
    return sat(rha((value - offset) * scale, truncate), 32)


def sdp_y_stage(v: int, yp: SdpYParams, lut: LutRegisters, index: tuple[int, int, int] = (0, 0, 0),
                shape: tuple[int, ...] = (1, 1, 1)) -> int:
    """The Y (EW) stage on one 32-bit value: MUL, then ALU, then the LUT (``sdp_y_core.cpp``).

    * MUL: PReLU passes ``x >= 0``; otherwise ``sat32(rha(x * op, EW_TRUNCATE))``
      (64-bit product, 10-bit truncate).
    * ALU: MAX / MIN; SUM = ``sat32(x + op)``; EQL gives 0 if equal, else 1.
    * LUT unless ``lut_bypass`` (:func:`lut_lookup`).
    Returns the 32-bit value handed to the output converter.
    """
    if yp.bypass:
        return v
    algo = check_range("Y alu_algo", yp.alu_algo, 0, 3)
    truncate = check_unsigned("Y truncate", yp.truncate, 10)

    if yp.mul_bypass:
        mul_out = v
    elif yp.mul_prelu and v >= 0:
        mul_out = v
    else:
        operand = _y_operand(yp.mul_operand, yp.mul_cvt, index, shape, "mul_operand")
        mul_out = sat(rha(v * operand, truncate), 32)

    if yp.alu_bypass:
        alu_out = mul_out
    else:
        operand = _y_operand(yp.alu_operand, yp.alu_cvt, index, shape, "alu_operand")
        if algo == ALU_MAX:
            alu_out = max(mul_out, operand)
        elif algo == ALU_MIN:
            alu_out = min(mul_out, operand)
        elif algo == ALU_SUM:
            alu_out = sat(mul_out + operand, 32)
        else:
            alu_out = 0 if mul_out == operand else 1

    if yp.lut_bypass:
        return alu_out
    return lut_lookup(alu_out, lut)


# ----------------------------------------------------------------------------- LUT


def _le_function_is_exp(lut: LutRegisters) -> bool:
    if lut.le_function in ("exp", 0):
        return True
    if lut.le_function in ("linear", 1):
        return False
    raise ValueError(f"le_function={lut.le_function!r} must be 'exp'/0 or 'linear'/1")


def _table(values, depth: int, name: str) -> list[int]:
    if len(values) != depth:
        raise ValueError(f"{name} must have {depth} entries, got {len(values)}")
    return [sign_extend(check_range(name, int(v), -(1 << 15), (1 << 16) - 1), 16) for v in values]


def _linear_fraction(u: int, select: int, table_id: int) -> int:
    """35-bit fraction of a linear-table hit (``sdp_y_idx.cpp``), for ``u = x - start > 0``.

    For 0 <= select <= 31 this is ``(u mod 2**select) * 2**(35 - select)``; a negative
    select gives 0.  For select >= 32 (where the index is always 0) the masked value is
    all of ``u``, shifted left by ``35 - select`` inside 35 bits, or right by
    ``select - 35``.  LE-only quirk: the LE path keeps the masked value in a *signed*
    32-bit ac_int before widening it to the unsigned 35-bit fraction, so for LE a
    ``u >= 2**31`` becomes ``u + 7 * 2**32`` (mod 2**35); LO keeps it unsigned.
    Both modelled literally.
    """
    if select < 0:
        return 0
    if select <= 31:
        masked = u & ((1 << select) - 1)
    elif table_id == TABLE_LE:
        masked = sign_extend(u, 32) & ((1 << FRACTION_BITS) - 1)
    else:
        masked = u
    if select <= FRACTION_BITS:
        return (masked << (FRACTION_BITS - select)) & ((1 << FRACTION_BITS) - 1)
    return masked >> (select - FRACTION_BITS)


def _linear_index(x: int, start: int, select: int, table_id: int) -> tuple[str, int, int]:
    """Linear table index: (state, index, fraction) with state 'hit', 'uflow' or 'oflow'.

    ``x <= start`` underflows; ``u = x - start``; ``idx = u >> select`` (left shift for a
    negative select), truncated and capped at 511; ``idx >= depth - 1`` overflows with
    ``idx = depth - 1``.
    """
    depth = LE_DEPTH if table_id == TABLE_LE else LO_DEPTH
    if x <= start:
        return "uflow", 0, 0
    u = x - start
    index = u >> select if select >= 0 else u << (-select)
    index = min(index, 511)
    if index >= depth - 1:
        return "oflow", depth - 1, 0
    return "hit", index, _linear_fraction(u, select, table_id)


def _le_index(x: int, lut: LutRegisters) -> tuple[str, int, int]:
    """LE table index in exponent or linear mode (``sdp_y_idx.cpp``)."""
    start = check_signed("le_start", lut.le_start, 32)
    offset = check_signed("le_index_offset", lut.le_index_offset, 8)
    select = check_signed("le_index_select", lut.le_index_select, 8)
    if not _le_function_is_exp(lut):
        return _linear_index(x, start, select, TABLE_LE)
    if x <= start:
        return "uflow", 0, 0
    distance = x - start  # 1 .. 2**32 - 1
    exponent = distance.bit_length() - 1
    if exponent < offset:
        return "uflow", 0, 0
    index = exponent - offset
    if index >= LE_DEPTH - 1:
        return "oflow", LE_DEPTH - 1, 0
    fraction = (distance - (1 << exponent)) << (FRACTION_BITS - exponent)
    return "hit", index, fraction


def lut_select(x: int, lut: LutRegisters) -> tuple[int, str, int, int]:
    """Index both tables and choose one: returns (table, state, index, fraction).

    ``table`` is TABLE_LE (0) or TABLE_LO (1).  Both underflow -> UFLOW_PRIORITY; both
    overflow -> OFLOW_PRIORITY; both hit, or both miss in different ways ->
    HYBRID_PRIORITY; otherwise the table that hits.
    """
    x = check_signed("lut input", x, 32)
    le_state, le_idx, le_frac = _le_index(x, lut)
    lo_start = check_signed("lo_start", lut.lo_start, 32)
    lo_select = check_signed("lo_index_select", lut.lo_index_select, 8)
    lo_state, lo_idx, lo_frac = _linear_index(x, lo_start, lo_select, TABLE_LO)
    uflow_pri = check_range("uflow_priority", lut.uflow_priority, 0, 1)
    oflow_pri = check_range("oflow_priority", lut.oflow_priority, 0, 1)
    hybrid_pri = check_range("hybrid_priority", lut.hybrid_priority, 0, 1)

    if le_state == "uflow" and lo_state == "uflow":
        chosen = uflow_pri
    elif le_state == "oflow" and lo_state == "oflow":
        chosen = oflow_pri
    elif (le_state == "hit") == (lo_state == "hit"):
        chosen = hybrid_pri
    else:
        chosen = TABLE_LE if le_state == "hit" else TABLE_LO
    if chosen == TABLE_LE:
        return TABLE_LE, le_state, le_idx, le_frac
    return TABLE_LO, lo_state, lo_idx, lo_frac


def lut_lookup(x: int, lut) -> int:
    """SDP LUT output for a 32-bit input (``sdp_y_inp.cpp`` int path).

    * Hit: ``sat32(rha(y0 * (2**35 - f) + y1 * f, 35))`` with y0 = T[idx], y1 = T[idx+1].
    * Underflow / overflow: ``sat32(T[idx] + sat32(rha((x - (bias + P)) * scale, shift)))``
      where P is START on underflow and END on overflow of the chosen table, scale/shift
      its UFLOW/OFLOW slope, and bias = 2**LE_INDEX_OFFSET only for LE in exponent mode
      on underflow with a positive offset (offsets >= 32 are a C shift past the width in
      the cmod: OutsideCmodDomain).

    ``lut`` is an :class:`LutRegisters` (an :class:`SdpParams` is accepted and its ``lut`` used).
    """
    if isinstance(lut, SdpParams):
        lut = lut.lut
    table_id, state, index, fraction = lut_select(x, lut)
    if table_id == TABLE_LE:
        table = _table(lut.le_table, LE_DEPTH, "le_table")
    else:
        table = _table(lut.lo_table, LO_DEPTH, "lo_table")

    if state == "hit":
        y0, y1 = table[index], table[index + 1]
        return sat(rha(y0 * ((1 << FRACTION_BITS) - fraction) + y1 * fraction, FRACTION_BITS), 32)

    prefix = "le" if table_id == TABLE_LE else "lo"
    flow = "uflow" if state == "uflow" else "oflow"
    point_name = f"{prefix}_start" if state == "uflow" else f"{prefix}_end"
    point = check_signed(point_name, getattr(lut, point_name), 32)
    scale = check_signed(f"{prefix}_slope_{flow}_scale", getattr(lut, f"{prefix}_slope_{flow}_scale"), 16)
    shift = check_signed(f"{prefix}_slope_{flow}_shift", getattr(lut, f"{prefix}_slope_{flow}_shift"), 5)
    bias = 0
    if state == "uflow" and table_id == TABLE_LE and _le_function_is_exp(lut) and lut.le_index_offset > 0:
        if lut.le_index_offset >= 32:
            raise OutsideCmodDomain("SDP LUT underflow bias 1 << LE_INDEX_OFFSET with offset >= 32 (uint32 shift)")
        bias = 1 << lut.le_index_offset
    slope = sat(rha((x - (bias + point)) * scale, shift), 32)
    return sat(table[index] + slope, 32)


# ----------------------------------------------------------------------------- output


def sdp_output_cvt(v: int, offset: int, scale: int, shift: int, out_bits: int = 8) -> int:
    """Output converter C: ``sat8(sat17(rha((x - OFFSET) * SCALE, SHIFT)))`` for int8 output,
    ``sat16(sat17(...))`` for int16 output (``out_bits=16``; cmod ``sdp_c.cpp``)."""
    offset = check_signed("cvt_offset", offset, 32)
    scale = check_signed("cvt_scale", scale, 16)
    shift = check_unsigned("cvt_shift", shift, 6)
    if out_bits not in (8, 16):
        raise ValueError(f"out_bits must be 8 or 16, not {out_bits}")
    return sat(sat(rha((v - offset) * scale, shift), 17), out_bits)


def _eql_mode(p: SdpParams) -> bool:
    return (not p.y.bypass) and (not p.y.alu_bypass) and p.y.alu_algo == ALU_EQL


def sdp(x, p: SdpParams, out_bits: int = 8) -> np.ndarray:
    """Full SDP int8 datapath on a (C, H, W) cube of int32 inputs; returns int64 (C, H, W).

    Input is the CACC int32 (or the sign-extended int8/int16 from MRDMA).  ``out_bits`` is 8 for
    int8 output, 16 for int16 (the same integer formulas, NVDLA_NOTES §4 "fp16 / int16").  Order:
    X1 (BS) -> X2 (BN) -> Y (EW: MUL, ALU, LUT) -> output CVT.

    EQL mode (Y not bypassed, Y ALU not bypassed, algo 3): the output converter is
    bypassed and the low 16 bits pass, so the int8 result here is the low byte of the Y
    value.  The cmod asserts the CVT is identity in that mode (ValueError here if not)
    and issues no write DMA at all, so there is no memory image to compare against.
    """
    data = np.asarray(x)
    if data.ndim != 3:
        raise ValueError("x must be (C, H, W)")
    eql = _eql_mode(p)
    if eql and (p.cvt_offset, p.cvt_scale, p.cvt_shift) != (0, 1, 0):
        raise ValueError("EQL mode requires an identity output CVT (offset 0, scale 1, shift 0)")
    out = np.zeros(data.shape, dtype=np.int64)
    for index in np.ndindex(data.shape):
        value = check_signed("x", int(data[index]), 32)
        value = sdp_x_stage(value, p.x1, index, data.shape)
        value = sdp_x_stage(value, p.x2, index, data.shape)
        value = sdp_y_stage(value, p.y, p.lut, index, data.shape)
        if eql:
            out[index] = sign_extend(value, 8)
        else:
            out[index] = sdp_output_cvt(value, p.cvt_offset, p.cvt_scale, p.cvt_shift, out_bits)
    return out
