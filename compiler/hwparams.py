"""Integer parameters of the hardware operations the compiler emits, one field per register field.

Field names match ``regressions.lib.reference`` (SdpXParams, SdpYParams, SdpOperandCvt, the
lrn/pool/direct_conv arguments) so a compiled layer can be replayed through the independent reference
math field by field. Operands: an ``int`` is a register (REG) operand, a (C,) array a per-channel
memory operand, a (C, H, W) array -- or a ``TensorOperand`` naming a tensor -- a per-element one.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Union

import numpy as np

from golden.lut import LutRegisters

ALU_MAX, ALU_MIN, ALU_SUM = 0, 1, 2


@dataclass(frozen=True)
class TensorOperand:
    """A per-element SDP operand read from another feature tensor (eltwise): its int8 bytes, as laid out."""

    tensor: str


Operand = Union[int, np.ndarray, TensorOperand]


@dataclass
class XStage:
    """SDP X1 (BS) or X2 (BN): ALU (operand << alu_shift), MUL (x * operand >> mul_shift), ReLU."""

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


@dataclass
class OperandCvt:
    bypass: bool = True
    offset: int = 0
    scale: int = 1
    truncate: int = 0


@dataclass
class YStage:
    """SDP Y (EW): ALU and MUL with operand converters, then the LUT."""

    bypass: bool = True
    alu_bypass: bool = True
    alu_algo: int = ALU_SUM
    alu_operand: Operand = 0
    alu_cvt: OperandCvt = field(default_factory=OperandCvt)
    mul_bypass: bool = True
    mul_prelu: bool = False
    mul_operand: Operand = 0
    mul_cvt: OperandCvt = field(default_factory=OperandCvt)
    truncate: int = 0
    lut_bypass: bool = True


@dataclass
class SdpParams:
    """The whole SDP datapath: X1 -> X2 -> Y (+LUT) -> output CVT ((x - offset) * scale >> shift, int8)."""

    x1: XStage = field(default_factory=XStage)
    x2: XStage = field(default_factory=XStage)
    y: YStage = field(default_factory=YStage)
    lut: LutRegisters | None = None
    cvt_offset: int = 0
    cvt_scale: int = 1
    cvt_shift: int = 0
    #: data type of the input, the processing and the output: "int8"; "fp16" (X operands fp16 bit patterns,
    #: shifts 0, the output converter unused: SDP narrows FP32 to fp16)
    precision: str = "int8"
    #: the output's type when it differs (fp16 processing written as "int16": ``passes.mixed``)
    out_precision: str | None = None


@dataclass
class CdpParams:
    """CDP (LRN): input CVT, square-sum window, LUT, multiply, output CVT (``reference.cdp.lrn`` args)."""

    lut: LutRegisters
    datin_offset: int = 0
    datin_scale: int = 1
    datin_shifter: int = 0
    normalz_len: int = 0  # 0..3 = window of 3, 5, 7, 9 channels
    sqsum_bypass: bool = False
    mul_bypass: bool = False
    datout_offset: int = 0
    datout_scale: int = 1
    datout_shifter: int = 0
    precision: str = "int8"  # "fp16": the CVT fields are unused (CDP's fp16 path has no converters)


@dataclass
class PdpParams:
    """PDP pooling (``reference.pdp.pool`` args)."""

    method: str  # "max", "min", "avg"
    kernel: tuple[int, int]  # (kh, kw)
    stride: tuple[int, int]  # (sy, sx)
    pad: tuple[int, int, int, int] = (0, 0, 0, 0)  # top, left, bottom, right
    pad_values: tuple[int, ...] = (0,) * 7  # raw PAD_VALUE_1X..7X
    recip_w: int = 0x10000
    recip_h: int = 0x10000
    #: "int8", "int16" or "fp16" (fp16: reciprocals and pad values are FP17 bit patterns)
    precision: str = "int8"


@dataclass
class ConvParams:
    """Direct convolution (``reference.conv.direct_conv`` args), int8 weights (K, C, R, S)."""

    weights: np.ndarray
    stride: tuple[int, int] = (1, 1)
    dilation: tuple[int, int] = (1, 1)
    pad: tuple[int, int] = (0, 0)  # top, left; bottom/right follow from the output size
    pad_value: int = 0
    clip_truncate: int = 0
    #: "int8"; "int16" or "fp16" (weights then hold int16 values or fp16 bit patterns)
    precision: str = "int8"
    #: Winograd mode (``compiler.passes.winograd``): the geometry, and weights are then U (K, Ce, 4, 4)
    winograd: object = None
    pra_truncate: int = 0
    #: the input's type when CDMA converts it (int16 input of an fp16 conv: ``passes.mixed``), and the CDMA
    #: converter's (offset, scale, truncate)
    in_precision: str | None = None
    cvt: tuple[int, int, int] | None = None
