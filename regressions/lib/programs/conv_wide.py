"""Single-layer tests of 16-bit direct convolutions (int16 and fp16, nv_full), built from layer parameters.

The registers come from the compiler's 16-bit conv emitter (``compiler.codegen.conv_wide``); memory images are packed
with plain numpy from NVDLA_NOTES §3 (2-byte little-endian elements, 16 per 32-byte atom; direct-conv
weights in kernel groups of atomic K / 2, channel groups of MAC atomic C), independently of ``golden``.

Element values are int16 values or fp16 *bit patterns* (0..65535), as the layer says.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from compiler.codegen.conv import weight_fetch_bytes
from compiler.codegen.conv_wide import BPE, emit_conv_wide
from compiler.codegen.program import Cube
from golden.config import HwConfig
from golden.program import RegProgram
from regressions.lib.programs import DST_BASE, SRC_BASE, WEIGHT_BASE, LayerTest


@dataclass
class WideConvLayer:
    """A direct convolution in int16 or fp16 whose CACC output SDP writes on the fly."""

    x: np.ndarray  # (C, H, W) int16 values, or fp16 bit patterns
    w: np.ndarray  # (K, C, R, S) same precision as the processing
    precision: str = "fp16"  # PROC_PRECISION of every unit: "int16" or "fp16"
    #: CDMA IN_PRECISION; "int16" with precision "fp16" makes CDMA convert (needs ``cvt``).
    in_precision: str | None = None
    stride: tuple[int, int] = (1, 1)  # (sy, sx)
    dilation: tuple[int, int] = (1, 1)  # (dy, dx)
    pad: tuple[int, int] = (0, 0)  # (top, left)
    pad_value: int = 0  # raw D_ZERO_PADDING_VALUE (low 16 bits used)
    out_hw: tuple[int, int] | None = None  # default: symmetric padding
    clip_truncate: int = 0  # int16 only (CACC D_CLIP_CFG)
    cvt: tuple[int, int, int] | None = None  # CDMA input CVT (offset, scale, truncate)
    nan_to_zero: bool = False  # CDMA D_NAN_FLUSH_TO_ZERO (fp16 input)
    #: SDP output CVT (offset, scale, shift) of the int16 path; fp16 SDP converts FP32 -> fp16 only.
    out_cvt: tuple[int, int, int] = (0, 1, 0)

    @property
    def source_precision(self) -> str:
        return self.in_precision or self.precision

    def output_hw(self) -> tuple[int, int]:
        if self.out_hw is not None:
            return self.out_hw
        _, h, w = self.x.shape
        _, _, r, s = self.w.shape
        (sy, sx), (dy, dx), (pt, pl) = self.stride, self.dilation, self.pad
        return ((h + 2 * pt - ((r - 1) * dy + 1)) // sy + 1, (w + 2 * pl - ((s - 1) * dx + 1)) // sx + 1)


# ---- memory images ------------------------------------------------------------------------------------
def atom16(hw: HwConfig) -> int:
    """16-bit elements per memory atom."""
    return hw.memory_atomic_size // BPE


def pack16(x: np.ndarray, atom: int) -> bytes:
    """(C, H, W) 16-bit elements -> line- and surface-packed feature bytes, padding lanes zero."""
    c, h, w = x.shape
    surfaces = -(-c // atom)
    out = np.zeros((surfaces * atom, h, w), dtype=np.int64)
    out[:c] = np.asarray(x, dtype=np.int64) & 0xFFFF
    return np.ascontiguousarray(out.reshape(surfaces, atom, h, w).transpose(0, 2, 3, 1)).astype("<u2").tobytes()


def unpack16(raw: bytes, c: int, h: int, w: int, atom: int) -> np.ndarray:
    """Every lane (padding included) of a packed 16-bit cube as unsigned bit patterns (C_pad, H, W)."""
    surfaces = -(-c // atom)
    cube = np.frombuffer(raw[: surfaces * atom * h * w * BPE], dtype="<u2").reshape(surfaces, h, w, atom)
    return cube.transpose(0, 3, 1, 2).reshape(surfaces * atom, h, w).astype(np.int64)


def pack_weights16(w: np.ndarray, hw: HwConfig) -> bytes:
    """Direct-conv weight order (NOTES §3): kernel groups of atomic K / 2, channel groups of MAC atomic C,
    then r, s, kernel, channel; partial groups unpadded."""
    k_n, c_n, _, _ = w.shape
    kf, cf = hw.mac_atomic_k // 2, hw.mac_atomic_c
    parts = []
    for k0 in range(0, k_n, kf):
        for c0 in range(0, c_n, cf):
            blk = np.asarray(w, dtype=np.int64)[k0:k0 + kf, c0:c0 + cf] & 0xFFFF
            parts.append(np.ascontiguousarray(blk.transpose(2, 3, 0, 1)).astype("<u2").tobytes())
    return b"".join(parts)


# ---- the program ------------------------------------------------------------------------------------------
def program_conv_wide(hw: HwConfig, layer: WideConvLayer) -> LayerTest:
    """The register program and memory image of ``layer``; its output region is the SDP's cube."""
    atom = atom16(hw)
    c, h, w = layer.x.shape
    k, _, r, s = layer.w.shape
    oh, ow = layer.output_hw()
    wbytes = pack_weights16(layer.w, hw)
    wsize = weight_fetch_bytes(hw, k, c, r, s, BPE)
    line, surf = w * atom * BPE, h * w * atom * BPE
    oline, osurf = ow * atom * BPE, oh * ow * atom * BPE

    p = LayerTest(RegProgram(hw), intr="SDP_0")
    p.memory += [(SRC_BASE, pack16(layer.x, atom)), (WEIGHT_BASE, wbytes + bytes(wsize - len(wbytes)))]
    p.output = (DST_BASE, -(-k // atom) * osurf)
    emit_conv_wide(p.regs, Cube(SRC_BASE, c, h, w, line, surf), WEIGHT_BASE, (k, c, r, s),
                   Cube(DST_BASE, k, oh, ow, oline, osurf), layer)
    return p
