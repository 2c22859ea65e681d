"""Single-layer tests of image (pixel) input convolutions and batched direct convolutions.

Like ``regressions.lib.programs``: a layer of mathematical parameters becomes a ``LayerTest`` (a register
program plus the memory image) whose output SDP writes on the fly behind CACC. The registers come from the
compiler's emitters (``compiler.codegen.conv_image``, ``compiler.codegen.conv_batch``); here live the pixel
planes, the pre-extended weights and the batch layout in memory.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from compiler.codegen.conv import weight_fetch_bytes
from compiler.codegen.conv_batch import emit_batch_conv
from compiler.codegen.conv_image import FORMATS, emit_image_conv
from compiler.codegen.pack import pack_dc_weights, pack_feature
from compiler.hwparams import SdpParams
from golden.config import HwConfig
from golden.program import RegProgram
from regressions.lib.programs import DST_BASE, SRC_BASE, WEIGHT_BASE, LayerTest, packed_cube, place_operands

#: Base of the chroma plane of semi-planar images.
UV_BASE = 0x8080_0000
def _align(v: int, unit: int) -> int:
    return -(-v // unit) * unit


@dataclass
class ImageLayer:
    """An image convolution. ``plane0`` (and ``plane1`` for semi-planar formats) hold each line's bytes from
    the line start (the first ``x_offset`` pixels are skipped; chroma from pair ``x_offset mod pairs per
    atom``); ``w`` is the kernel (K, lanes, R, S) over the image's lanes."""

    fmt: int
    plane0: np.ndarray  # (H, bytes) values 0..255
    w: np.ndarray  # (K, lanes, R, S) int8
    width: int
    plane1: np.ndarray | None = None
    x_offset: int = 0
    line_stride: int = 0  # 0: the line's bytes rounded up to the atom
    uv_line_stride: int = 0
    signed: bool = False  # PIXEL_SIGN_OVERRIDE
    cvt: tuple[int, int, int] | None = None  # (offset, scale, truncate): CVT_EN
    means: tuple[int, int, int, int] | None = None  # MEAN_RY/GU/BV/AX: MEAN_FORMAT=ENABLE
    stride: tuple[int, int] = (1, 1)  # (sy, sx)
    pad_top: int = 0  # CSC
    pad_left: int = 0  # CDMA
    pad_right: int = 0  # CDMA
    out_hw: tuple[int, int] | None = None  # default: every full window, bottom padded like the top
    cdma_pad: int = 0  # raw D_ZERO_PADDING_VALUE words
    csc_pad: int = 0
    y_extension: int = 0
    clip_truncate: int = 0
    out_cvt: tuple[int, int, int] = (0, 1, 0)

    @property
    def height(self) -> int:
        return int(np.asarray(self.plane0).shape[0])

    @property
    def lanes(self) -> int:
        return FORMATS[self.fmt][1]

    def output_hw(self) -> tuple[int, int]:
        if self.out_hw is not None:
            return self.out_hw
        _, _, r, s = self.w.shape
        sy, sx = self.stride
        padded = self.pad_left + self.width + self.pad_right
        return (self.height + 2 * self.pad_top - r) // sy + 1, (padded - s) // sx + 1

    def strides(self, hw: HwConfig) -> tuple[int, int]:
        """(line stride, chroma line stride) in bytes."""
        atom = hw.memory_atomic_size
        sizes = FORMATS[self.fmt][0]
        line = self.line_stride or _align(np.asarray(self.plane0).shape[1], atom)
        uv = 0
        if len(sizes) == 2:
            assert self.plane1 is not None
            uv = self.uv_line_stride or _align(np.asarray(self.plane1).shape[1], atom)
        return line, uv


def extend_weights(w: np.ndarray) -> np.ndarray:
    """(K, lanes, R, S) -> (K, S*lanes, R): extended channel ``s * lanes + c`` is kernel column s, lane c."""
    k, lanes, r, s = w.shape
    out = np.zeros((k, s * lanes, r), dtype=np.int64)
    for ci in range(s * lanes):
        out[:, ci, :] = w[:, ci % lanes, :, ci // lanes]
    return out


def pack_image_weights(w: np.ndarray, hw: HwConfig, y_extension: int = 0) -> bytes:
    """Extended int8 weights in the order the CSC reads them, not rounded up.

    Per kernel group of atomic K: without post extension the direct-conv order of a width-1 kernel (channel
    block of atomic C, row, kernel, channel); with P = 2**y_extension rows per atom: row block, kernel, row in
    the block, channel (the last block holds R mod P rows).
    """
    wx = extend_weights(w)
    kernels, channels, rows = wx.shape
    kg, cg, p = hw.mac_atomic_k, hw.mac_atomic_c, 1 << y_extension
    out = bytearray()
    for k0 in range(0, kernels, kg):
        group = range(k0, min(k0 + kg, kernels))
        if p == 1:
            for c0 in range(0, channels, cg):
                for r in range(rows):
                    for k in group:
                        for c in range(c0, min(c0 + cg, channels)):
                            out.append(int(wx[k, c, r]) & 0xFF)
        else:
            for r0 in range(0, rows, p):
                for k in group:
                    for r in range(r0, min(r0 + p, rows)):
                        for c in range(channels):
                            out.append(int(wx[k, c, r]) & 0xFF)
    return bytes(out)


def _plane_image(rows: np.ndarray, stride: int) -> bytes:
    rows = np.asarray(rows, dtype=np.int64)
    height, length = rows.shape
    buf = np.zeros((height - 1) * stride + length, dtype=np.uint8)
    for h in range(height):
        buf[h * stride : h * stride + length] = rows[h]
    return buf.tobytes()


def program_image_conv(hw: HwConfig, layer: ImageLayer) -> LayerTest:
    """Image convolution (int8 datapath) whose output SDP converts with ``layer.out_cvt`` and writes."""
    sizes = FORMATS[layer.fmt][0]
    atom = hw.atom_elements()
    k, _, r, s = layer.w.shape
    oh, ow = layer.output_hw()
    line, uv = layer.strides(hw)
    p = LayerTest(RegProgram(hw), intr="SDP_0")
    p.memory.append((SRC_BASE, _plane_image(layer.plane0, line)))
    if len(sizes) == 2:
        p.memory.append((UV_BASE, _plane_image(layer.plane1, uv)))  # type: ignore[arg-type]
    packed = pack_image_weights(layer.w, hw, layer.y_extension)
    wbytes = weight_fetch_bytes(hw, 1, 1, 1, len(packed))
    p.memory.append((WEIGHT_BASE, packed + bytes(wbytes - len(packed))))
    dst = packed_cube(DST_BASE, k, oh, ow, atom)
    p.output = (DST_BASE, -(-k // atom) * dst.surface_stride)
    emit_image_conv(p.regs, (SRC_BASE, UV_BASE if len(sizes) == 2 else None), (line, uv), WEIGHT_BASE, wbytes,
                    (k, r, s), dst, layer)
    return p


# ---- batched direct convolution --------------------------------------------------------------------------------
@dataclass
class BatchConvLayer:
    """A direct convolution of ``xs`` (N, C, H, W) batches with one kernel; ``src_gap``/``dst_gap`` are bytes
    left free between consecutive batches (on top of each cube rounded up to 64 bytes)."""

    xs: np.ndarray  # (N, C, H, W) int8
    w: np.ndarray  # (K, C, R, S) int8
    stride: tuple[int, int] = (1, 1)
    dilation: tuple[int, int] = (1, 1)
    pad: tuple[int, int] = (0, 0)
    pad_value: int = 0
    out_hw: tuple[int, int] | None = None
    clip_truncate: int = 0
    cvt: tuple[int, int, int] | None = None
    out_cvt: tuple[int, int, int] = (0, 1, 0)
    src_gap: int = 0
    dst_gap: int = 0
    #: SDP stages instead of ``out_cvt`` (a ``regressions.lib.reference.sdp.SdpParams``); its MEM operands, per
    #: kernel or per element of one output cube, serve every batch.
    sdp: object | None = None

    def output_hw(self) -> tuple[int, int]:
        if self.out_hw is not None:
            return self.out_hw
        _, _, h, w = self.xs.shape
        _, _, r, s = self.w.shape
        (sy, sx), (dy, dx), (pt, pl) = self.stride, self.dilation, self.pad
        return ((h + 2 * pt - ((r - 1) * dy + 1)) // sy + 1, (w + 2 * pl - ((s - 1) * dx + 1)) // sx + 1)

    def batch_strides(self, hw: HwConfig) -> tuple[int, int]:
        """(input, output) batch strides in bytes."""
        atom = hw.atom_elements()
        n, c, h, w = self.xs.shape
        k = self.w.shape[0]
        oh, ow = self.output_hw()
        src = packed_cube(SRC_BASE, c, h, w, atom).size(atom)
        dst = packed_cube(DST_BASE, k, oh, ow, atom).size(atom)
        return _align(src, 64) + self.src_gap, _align(dst, 64) + self.dst_gap


def program_batch_conv(hw: HwConfig, layer: BatchConvLayer) -> LayerTest:
    """Batched direct convolution: batch b read at ``SRC_BASE + b * input stride``, written by SDP at
    ``DST_BASE + b * output stride``."""
    atom = hw.atom_elements()
    n, c, h, w = layer.xs.shape
    k, _, r, s = layer.w.shape
    oh, ow = layer.output_hw()
    src_stride, dst_stride = layer.batch_strides(hw)
    p = LayerTest(RegProgram(hw), intr="SDP_0")
    for b in range(n):
        p.memory.append((SRC_BASE + b * src_stride, pack_feature(layer.xs[b], atom)))
    p.memory.append((WEIGHT_BASE, pack_dc_weights(layer.w, hw)))
    dst = packed_cube(DST_BASE, k, oh, ow, atom)
    p.output = (DST_BASE, (n - 1) * dst_stride + -(-k // atom) * dst.surface_stride)
    off, scale, shift = layer.out_cvt
    sdp = layer.sdp if layer.sdp is not None else SdpParams(cvt_offset=off, cvt_scale=scale, cvt_shift=shift)
    operands = place_operands(p, sdp, k, oh, ow, atom, 2) if layer.sdp is not None else None
    emit_batch_conv(p.regs, packed_cube(SRC_BASE, c, h, w, atom), WEIGHT_BASE, (k, c, r, s), dst, layer, sdp,
                    operands, batches=n, src_stride=src_stride, dst_stride=dst_stride)
    return p
