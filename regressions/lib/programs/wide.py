"""Single-layer tests of int16 and fp16 PDP / CDP operations (nv_full), from the references' parameters.

The 16-bit counterparts of ``regressions.lib.programs.program_pdp`` / ``program_cdp``: the registers come from
the compiler's 16-bit emitters (``compiler.codegen.wide``), the cubes hold int16 values or fp16 bit
patterns with the strides of 2-byte elements and 16-channel atoms.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from compiler.codegen.pack import pack_feature, strides
from compiler.codegen.program import Cube
from compiler.codegen.wide import RECIP_FP17, RECIP_INT, emit_cdp_wide, emit_pdp_wide
from compiler.hwparams import PdpParams
from golden.config import HwConfig
from golden.lut import LutRegisters
from golden.program import RegProgram
from regressions.lib.programs import DST_BASE, SRC_BASE, LayerTest


@dataclass
class WidePoolLayer:
    """An int16/fp16 pooling layer: ``x`` is (C, H, W) int16 values or fp16 bit patterns."""

    x: np.ndarray
    dtype: str  # "int16" or "fp16"
    method: str  # "max", "min", "avg"
    kernel: tuple[int, int]  # (kh, kw)
    stride: tuple[int, int]  # (sh, sw)
    pad: tuple[int, int, int, int] = (0, 0, 0, 0)  # top, left, bottom, right
    pad_values: Sequence[int] = (0,) * 7  # raw PAD_VALUE_1X..7X (fp16: FP17 patterns in the low 17 bits)
    recip_w: int | None = None  # None: the firmware's value for the kernel width
    recip_h: int | None = None
    nan_to_zero: bool = False

    def out_hw(self) -> tuple[int, int]:
        _, h, w = self.x.shape
        (kh, kw), (sh, sw), (pt, pl, pb, pr) = self.kernel, self.stride, self.pad
        return (h + pt + pb - kh) // sh + 1, (w + pl + pr - kw) // sw + 1

    def recips(self) -> tuple[int, int]:
        table = RECIP_FP17 if self.dtype == "fp16" else RECIP_INT
        kh, kw = self.kernel
        return (table[kw - 1] if self.recip_w is None else self.recip_w,
                table[kh - 1] if self.recip_h is None else self.recip_h)


@dataclass
class WideLrnLayer:
    """An int16/fp16 LRN layer: ``x`` as in ``WidePoolLayer``; ``lut`` integer values (int16) or fp16/fp32
    bit patterns with the slope shifts left at 0 (fp16, where the cmod ignores them). The CVT fields are
    unused by fp16."""

    x: np.ndarray
    dtype: str
    lut: LutRegisters
    normalz_len: int = 0
    sqsum_bypass: bool = False
    mul_bypass: bool = False
    nan_to_zero: bool = False
    datin_offset: int = 0
    datin_scale: int = 1
    datin_shifter: int = 0
    datout_offset: int = 0
    datout_scale: int = 1
    datout_shifter: int = 0


def atom_of(hw: HwConfig, dtype: str) -> int:
    return hw.atom_elements(dtype)  # type: ignore[arg-type]


def _cube(base: int, hw: HwConfig, dtype: str, c: int, h: int, w: int) -> Cube:
    line, surf = strides(c, h, w, atom_of(hw, dtype), 2)
    return Cube(base, c, h, w, line, surf)


def program_pdp_wide(hw: HwConfig, layer: WidePoolLayer) -> LayerTest:
    """Registers and memory of a PDP operation from memory (one split; see the fuzz module for splits)."""
    c, h, w = layer.x.shape
    oh, ow = layer.out_hw()
    atom = atom_of(hw, layer.dtype)
    src, dst = _cube(SRC_BASE, hw, layer.dtype, c, h, w), _cube(DST_BASE, hw, layer.dtype, c, oh, ow)
    p = LayerTest(RegProgram(hw), intr="PDP_0")
    p.memory.append((SRC_BASE, pack_feature(np.asarray(layer.x, dtype=np.int64), atom, 2)))
    p.output = (DST_BASE, -(-c // atom) * dst.surface_stride)
    recip_w, recip_h = layer.recips()
    prm = PdpParams(layer.method, layer.kernel, layer.stride, layer.pad, tuple(layer.pad_values), recip_w, recip_h)
    emit_pdp_wide(p.regs, src, dst, prm, layer.dtype, layer.nan_to_zero)
    return p


def program_cdp_wide(hw: HwConfig, layer: WideLrnLayer) -> LayerTest:
    """Registers and memory of a CDP operation (LUT uploaded through S_LUT_ACCESS_*)."""
    c, h, w = layer.x.shape
    atom = atom_of(hw, layer.dtype)
    src, dst = _cube(SRC_BASE, hw, layer.dtype, c, h, w), _cube(DST_BASE, hw, layer.dtype, c, h, w)
    p = LayerTest(RegProgram(hw), intr="CDP_0")
    p.memory.append((SRC_BASE, pack_feature(np.asarray(layer.x, dtype=np.int64), atom, 2)))
    p.output = (DST_BASE, -(-c // atom) * dst.surface_stride)
    emit_cdp_wide(p.regs, src, dst, layer, layer.dtype, layer.nan_to_zero)
    return p


def expected_bytes(out: np.ndarray, hw: HwConfig, dtype: str) -> bytes:
    """Output bytes of a (padded C, H, W) result of int16 values or fp16 bits, in the feature layout."""
    return pack_feature(np.asarray(out, dtype=np.int64), atom_of(hw, dtype), 2)


__all__ = ["WideLrnLayer", "WidePoolLayer", "expected_bytes", "program_cdp_wide", "program_pdp_wide",
           "RECIP_FP17", "RECIP_INT"]
