"""Register programs for image (pixel) input convolutions and batched direct convolutions.

Like ``regressions.programs``: a layer of mathematical parameters becomes a ``LayerTest`` (NVDLA register
writes by name plus the memory image) whose output SDP writes on the fly behind CACC. The image program
writes the registers the way NVDLA's firmware does for ``DATAIN_FORMAT=PIXEL`` (``sw:kmd/firmware/conv.c``):
pixel planes at their pitch, CDMA left/right padding, the kernel pre-extended into channels (``s * lanes + c``)
and, with ``y_extension``, post-extended over rows (``WeightTranslationUnit`` IMG channel extension). The
batched program is ``compiler.codegen.conv.emit_conv``'s direct convolution plus the batch registers.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from compiler.codegen.conv import emit_conv, weight_fetch_bytes
from compiler.codegen.pack import pack_dc_weights, pack_feature
from compiler.codegen.program import pointers
from golden.program import RegProgram
from compiler.codegen.sdp import emit_sdp, sdp_enables
from golden.config import HwConfig
from golden.dma import CONV_UNITS
from golden.engines.conv_datapath import cbuf_geometry, entries_per_slice
from golden.regs import UNITS
from regressions.programs import DST_BASE, SRC_BASE, WEIGHT_BASE, LayerTest, packed_cube, place_operands

#: Base of the chroma plane of semi-planar images.
UV_BASE = 0x8080_0000
#: Bytes per pixel of each plane, lanes and lane width per PIXEL_FORMAT code (RDL enum order); fp16 formats
#: (5, 8, 11) are absent. Written from the format names, as the firmware's ``map_img_fmt`` byte counts.
FORMATS: dict[int, tuple[tuple[int, ...], int, int]] = {
    0: ((1,), 1, 8), 1: ((2,), 1, 16), 2: ((2,), 1, 16), 3: ((2,), 1, 16), 4: ((2,), 1, 16),
    6: ((8,), 4, 16), 7: ((8,), 4, 16), 9: ((8,), 4, 16), 10: ((8,), 4, 16),
    **{code: ((4,), 4, 8) for code in range(12, 20)},
    **{code: ((4,), 4, 16) for code in range(20, 26)},
    26: ((4,), 4, 8), 27: ((4,), 4, 8),
    28: ((1, 2), 3, 8), 29: ((1, 2), 3, 8),
    **{code: ((2, 4), 3, 16) for code in range(30, 36)},
}


def image_formats(hw: HwConfig) -> list[int]:
    """Formats ``hw`` can fetch: 16-bit lanes need an int16 datapath (the int8-only RTL leaves them out)."""
    return [code for code, (_, _, bits) in FORMATS.items() if bits == 8 or hw.supports("int16")]


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
    from compiler.hwparams import SdpParams

    sizes, lanes, bits = FORMATS[layer.fmt]
    atom = hw.atom_elements()
    k, _, r, s = layer.w.shape
    W, H = layer.width, layer.height
    oh, ow = layer.output_hw()
    cx = s * lanes
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

    padded = layer.pad_left + W + layer.pad_right
    entry, depth = cbuf_geometry(hw)
    eps = -(-padded * lanes // entry)
    data_banks = -(-H * eps // depth)
    weight_banks = max(hw.cbuf_bank_number - data_banks - 1, 0)
    sy, sx = layer.stride
    bottom = max(0, (oh - 1) * sy + r - layer.pad_top - H)

    regs = RegProgram(hw)
    off, scale, shift = layer.out_cvt
    rdma = emit_sdp(regs, None, dst, SdpParams(cvt_offset=off, cvt_scale=scale, cvt_shift=shift), None, 1,
                    enable=False)
    pointers(regs, *CONV_UNITS)
    for unit in CONV_UNITS:
        extra = {"IN_PRECISION": int(bits == 16) if unit == "CDMA" else 0} if unit in ("CDMA", "CSC") else {}
        regs.reg(unit, "D_MISC_CFG", CONV_MODE=0, PROC_PRECISION=0, **extra)
    regs.reg("CDMA", "D_DATAIN_FORMAT", DATAIN_FORMAT=1, PIXEL_FORMAT=layer.fmt, PIXEL_MAPPING=0,
             PIXEL_SIGN_OVERRIDE=int(layer.signed))
    regs.reg("CDMA", "D_DATAIN_SIZE_0", DATAIN_WIDTH=W - 1, DATAIN_HEIGHT=H - 1)
    regs.reg("CDMA", "D_DATAIN_SIZE_1", DATAIN_CHANNEL=lanes - 1)
    regs.reg("CDMA", "D_DATAIN_SIZE_EXT_0", DATAIN_WIDTH_EXT=W - 1, DATAIN_HEIGHT_EXT=H - 1)
    regs.reg("CDMA", "D_PIXEL_OFFSET", PIXEL_X_OFFSET=layer.x_offset, PIXEL_Y_OFFSET=0)
    regs.reg("CDMA", "D_DAIN_RAM_TYPE", DATAIN_RAM_TYPE=1)
    regs.addr("CDMA", "D_DAIN_ADDR_LOW_0", SRC_BASE)
    regs.reg("CDMA", "D_DAIN_ADDR_HIGH_0", 0)
    regs.addr("CDMA", "D_DAIN_ADDR_LOW_1", UV_BASE if len(sizes) == 2 else 0)
    regs.reg("CDMA", "D_DAIN_ADDR_HIGH_1", 0)
    regs.reg("CDMA", "D_LINE_STRIDE", line)
    regs.reg("CDMA", "D_LINE_UV_STRIDE", uv)
    regs.reg("CDMA", "D_DAIN_MAP", 0)
    regs.reg("CDMA", "D_FETCH_GRAIN", GRAINS=0)
    regs.reg("CDMA", "D_ENTRY_PER_SLICE", eps - 1)
    regs.reg("CDMA", "D_WEIGHT_SIZE_0", BYTE_PER_KERNEL=r * cx - 1)
    regs.reg("CDMA", "D_WEIGHT_SIZE_1", WEIGHT_KERNEL=k - 1)
    regs.reg("CDMA", "D_WEIGHT_RAM_TYPE", WEIGHT_RAM_TYPE=1)
    regs.addr("CDMA", "D_WEIGHT_ADDR_LOW", WEIGHT_BASE)
    regs.reg("CDMA", "D_WEIGHT_BYTES", wbytes)
    regs.reg("CDMA", "D_CONV_STRIDE", CONV_X_STRIDE=sx - 1, CONV_Y_STRIDE=sy - 1)
    regs.reg("CDMA", "D_ZERO_PADDING", PAD_LEFT=layer.pad_left, PAD_RIGHT=layer.pad_right,
             PAD_TOP=layer.pad_top, PAD_BOTTOM=min(bottom, 63))
    regs.reg("CDMA", "D_ZERO_PADDING_VALUE", layer.cdma_pad & 0xFFFF)
    regs.reg("CDMA", "D_BANK", DATA_BANK=data_banks - 1, WEIGHT_BANK=weight_banks)
    if layer.cvt is not None:
        cvt_off, cvt_scale, cvt_trunc = layer.cvt
        regs.reg("CDMA", "D_CVT_CFG", CVT_EN=1, CVT_TRUNCATE=cvt_trunc)
        regs.reg("CDMA", "D_CVT_OFFSET", cvt_off & 0xFFFF)
        regs.reg("CDMA", "D_CVT_SCALE", cvt_scale & 0xFFFF)
    else:
        regs.reg("CDMA", "D_CVT_CFG", CVT_EN=0)
    regs.reg("CDMA", "D_MEAN_FORMAT", MEAN_FORMAT=int(layer.means is not None))
    ry, gu, bv, ax = layer.means if layer.means is not None else (0, 0, 0, 0)
    regs.reg("CDMA", "D_MEAN_GLOBAL_0", MEAN_RY=ry & 0xFFFF, MEAN_GU=gu & 0xFFFF)
    regs.reg("CDMA", "D_MEAN_GLOBAL_1", MEAN_BV=bv & 0xFFFF, MEAN_AX=ax & 0xFFFF)
    regs.reg("CSC", "D_DATAIN_FORMAT", DATAIN_FORMAT=1)
    regs.reg("CSC", "D_DATAIN_SIZE_EXT_0", DATAIN_WIDTH_EXT=W - 1, DATAIN_HEIGHT_EXT=H - 1)
    regs.reg("CSC", "D_DATAIN_SIZE_EXT_1", DATAIN_CHANNEL_EXT=lanes - 1)
    regs.reg("CSC", "D_ENTRY_PER_SLICE", eps - 1)
    regs.reg("CSC", "D_POST_Y_EXTENSION", Y_EXTENSION=layer.y_extension)
    regs.reg("CSC", "D_WEIGHT_SIZE_EXT_0", WEIGHT_WIDTH_EXT=0, WEIGHT_HEIGHT_EXT=r - 1)
    regs.reg("CSC", "D_WEIGHT_SIZE_EXT_1", WEIGHT_CHANNEL_EXT=cx - 1, WEIGHT_KERNEL=k - 1)
    regs.reg("CSC", "D_WEIGHT_BYTES", wbytes)
    regs.reg("CSC", "D_DATAOUT_SIZE_0", DATAOUT_WIDTH=ow - 1, DATAOUT_HEIGHT=oh - 1)
    regs.reg("CSC", "D_DATAOUT_SIZE_1", DATAOUT_CHANNEL=k - 1)
    regs.reg("CSC", "D_ATOMICS", ow * oh - 1)
    regs.reg("CSC", "D_CONV_STRIDE_EXT", CONV_X_STRIDE_EXT=sx - 1, CONV_Y_STRIDE_EXT=sy - 1)
    regs.reg("CSC", "D_DILATION_EXT", X_DILATION_EXT=0, Y_DILATION_EXT=0)
    regs.reg("CSC", "D_ZERO_PADDING", PAD_LEFT=layer.pad_left, PAD_TOP=layer.pad_top)
    regs.reg("CSC", "D_ZERO_PADDING_VALUE", layer.csc_pad & 0xFFFF)
    regs.reg("CSC", "D_BANK", DATA_BANK=data_banks - 1, WEIGHT_BANK=weight_banks)
    regs.reg("CACC", "D_DATAOUT_SIZE_0", DATAOUT_WIDTH=ow - 1, DATAOUT_HEIGHT=oh - 1)
    regs.reg("CACC", "D_DATAOUT_SIZE_1", DATAOUT_CHANNEL=k - 1)
    regs.addr("CACC", "D_DATAOUT_ADDR", dst.loc)
    regs.reg("CACC", "D_LINE_STRIDE", dst.line_stride)
    regs.reg("CACC", "D_SURF_STRIDE", dst.surface_stride)
    regs.reg("CACC", "D_CLIP_CFG", CLIP_TRUNCATE=layer.clip_truncate)
    sdp_enables(regs, rdma)
    for unit in ("CACC", "CMAC_A", "CMAC_B", "CSC", "CDMA"):
        regs.reg(unit, "D_OP_ENABLE", 1)
    p.extend(regs)
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


def _insert_before_enables(p: LayerTest, writes: list[tuple[str, int]]) -> None:
    program = p.writes
    first = next(i for i, (name, _) in enumerate(program) if name.endswith(".D_OP_ENABLE_0"))
    p.writes = program[:first] + writes + program[first:]


def program_batch_conv(hw: HwConfig, layer: BatchConvLayer) -> LayerTest:
    """Batched direct convolution: batch b read at ``SRC_BASE + b * input stride``, written by SDP at
    ``DST_BASE + b * output stride``."""
    from compiler.hwparams import SdpParams

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
    eps = entries_per_slice(hw, c, w)
    data_banks = -(-n * h * eps // cbuf_geometry(hw)[1])
    off, scale, shift = layer.out_cvt
    sdp = layer.sdp if layer.sdp is not None else SdpParams(cvt_offset=off, cvt_scale=scale, cvt_shift=shift)
    operands = place_operands(p, sdp, k, oh, ow, atom, 2) if layer.sdp is not None else None
    regs = RegProgram(hw)
    emit_conv(regs, packed_cube(SRC_BASE, c, h, w, atom), WEIGHT_BASE, (k, c, r, s), dst, layer, sdp, operands,
              data_banks=data_banks)
    p.extend(regs)
    mode = UNITS["SDP"].register("D_FEATURE_MODE_CFG")
    batch_field = mode.field("BATCH_NUMBER")
    p.writes = [(name, (value & ~batch_field.mask) | batch_field.encode(n - 1) if name == mode.full_name else value)
                for name, value in p.writes]

    def word(unit: str, register: str, value: int = 0, **fields: int) -> tuple[str, int]:
        reg = UNITS[unit].register(register)
        return reg.full_name, reg.encode(**fields) if fields else value & 0xFFFFFFFF

    _insert_before_enables(p, [
        word("CDMA", "D_BATCH_NUMBER", BATCHES=n - 1), word("CDMA", "D_BATCH_STRIDE", src_stride),
        word("CSC", "D_BATCH_NUMBER", BATCHES=n - 1), word("CACC", "D_BATCH_NUMBER", BATCHES=n - 1),
        word("SDP", "D_DST_BATCH_STRIDE", dst_stride),
    ])
    return p
