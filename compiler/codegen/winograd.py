"""Winograd convolutions: CDMA/CSC/CMAC/CACC in Winograd mode, SDP on the fly in its Winograd mode.

Programmed the way NVDLA's firmware ``conv.c`` does: CDMA strides and pads the input, CSC sees the
extended cube with stride/pad 0 and 4x4 kernels (pre-transformed weights), PRA truncates; SDP bypasses
every stage and writes int8 (int16 for int16 convolutions) with its output converter.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from compiler.codegen.program import Cube, pointers
from compiler.codegen.sdp import emit_sdp, sdp_enables
from golden.dma import CONV_UNITS
from golden.program import Loc, RegProgram

PRECISION = {"int8": 0, "int16": 1}
BPE = {"int8": 1, "int16": 2}
#: Winograd CBUF entries: 4x4 pixels x 8 bytes.
ENTRY = 128


def winograd_weight_bytes(stream_bytes: int) -> int:
    """D_WEIGHT_BYTES of a Winograd weight stream: whole CBUF entries."""
    return -(-stream_bytes // ENTRY) * ENTRY


def pack_winograd_weights(u: np.ndarray, hw, precision: str) -> bytes:
    """Pre-transformed weights U (K, Ce, 4, 4) in the CSC's Winograd read order: kernel group (atomic K, halved
    for int16), block of 4 channels, kernel, position 4*i + j, channel in the block; little-endian elements,
    padded to whole CBUF entries."""
    k, ce = u.shape[:2]
    group = hw.mac_atomic_k_for(precision)
    elem = np.int8 if precision == "int8" else "<i2"
    parts = []
    for k0 in range(0, k, group):
        blk = np.asarray(u[k0:k0 + group]).reshape(-1, ce // 4, 4, 4, 4)  # (k, block, c, i, j)
        parts.append(np.ascontiguousarray(blk.transpose(1, 0, 3, 4, 2)).astype(elem).tobytes())
    raw = b"".join(parts)
    return raw + bytes(-len(raw) % ENTRY)


@dataclass(frozen=True)
class WinogradGeometry:
    """A stride-1 3x3 Winograd convolution's layout: channels ``ce`` filling whole atoms; the padded input
    ``ext`` = output + 4 per axis (a multiple of 4 that covers the last tiles' rows up to OH + 1), so the
    bottom/right padding is whatever makes up that size; the CBUF ``data_banks`` that hold it whole."""

    ce: int
    ext: tuple[int, int]
    pad: tuple[int, int, int, int]  # top, left, bottom, right
    entries_per_slice: int
    data_banks: int


def data_banks(hw, ext_height: int, entries_per_slice: int) -> int:
    """CBUF data banks holding a Winograd input of ``ext_height`` lines of ``entries_per_slice`` entries."""
    bank_entries = hw.cbuf_bank_width * hw.cbuf_bank_depth // ENTRY
    return max(1, -(-ext_height * entries_per_slice // bank_entries))


def winograd_geometry(hw, precision: str, in_chw: tuple[int, int, int], out_hw: tuple[int, int],
                      pad: tuple[int, int]) -> WinogradGeometry:
    c, h, w = in_chw
    atom = hw.atom_elements(precision)
    ce = -(-c // atom) * atom
    (oh, ow), (pt, pl) = out_hw, pad
    he, we = oh + 4, ow + 4
    eps = we * ce * BPE[precision] // ENTRY
    return WinogradGeometry(ce, (he, we), (pt, pl, he - pt - h, we - pl - w), eps, data_banks(hw, he, eps))


def emit_winograd(r: RegProgram, src: Cube, weights: Loc, weight_bytes: int, kernel: tuple[int, int], dst: Cube,
                  conv, sdp=None, operands=None) -> None:
    """A Winograd convolution of ``src`` into ``dst`` (OH, OW multiples of 4) with ``kernel`` (K, Ce)
    pre-transformed 4x4 kernels over the extended channels, ``weight_bytes`` (whole entries) at ``weights``.
    ``conv`` has precision, stride (the CDMA channel extension), pad (top, left, bottom, right), pad_value,
    pra_truncate, clip_truncate, out_cvt and ``ext_hw()`` (the padded, stride-extended input CSC sees).
    ``sdp`` (with its memory ``operands``): the SDP stages on the fly instead of the bare output converter."""
    hw = r.hw
    prec, bpe = conv.precision, BPE[conv.precision]
    c, h, w = src.channels, src.height, src.width
    k, ce = kernel
    oh, ow = dst.height, dst.width
    (sy, sx), (pt, pl, pb, pr) = conv.stride, conv.pad
    he, we = conv.ext_hw()
    eps = we * ce * bpe // ENTRY
    banks = data_banks(hw, he, eps)
    wbytes = weight_bytes
    if sdp is None:
        _bypass_sdp(r, dst, conv.out_cvt, prec, k)
        rdma = False
    else:  # the network's SDP stages (bias, scale, activation) on the 2x2-tile stream
        rdma = emit_sdp(r, None, dst, sdp, operands, enable=False, winograd=True)
    pointers(r, *CONV_UNITS)
    # CACC, CMAC
    for unit in ("CACC", "CMAC_A", "CMAC_B"):
        r.reg(unit, "D_MISC_CFG", CONV_MODE=1, PROC_PRECISION=PRECISION[prec])
    r.reg("CACC", "D_DATAOUT_SIZE_0", DATAOUT_WIDTH=ow - 1, DATAOUT_HEIGHT=oh - 1)
    r.reg("CACC", "D_DATAOUT_SIZE_1", DATAOUT_CHANNEL=k - 1)
    r.addr("CACC", "D_DATAOUT_ADDR", dst.loc)
    r.reg("CACC", "D_LINE_STRIDE", dst.line_stride)
    r.reg("CACC", "D_SURF_STRIDE", dst.surface_stride)
    r.reg("CACC", "D_CLIP_CFG", CLIP_TRUNCATE=conv.clip_truncate)
    # CSC: the extended, unpadded, stride-1 problem with 4x4 kernels.
    misc = dict(CONV_MODE=1, IN_PRECISION=PRECISION[prec], PROC_PRECISION=PRECISION[prec])
    r.reg("CSC", "D_MISC_CFG", **misc)
    r.reg("CSC", "D_DATAIN_FORMAT", 0)
    r.reg("CSC", "D_DATAIN_SIZE_EXT_0", DATAIN_WIDTH_EXT=we - 1, DATAIN_HEIGHT_EXT=he - 1)
    r.reg("CSC", "D_DATAIN_SIZE_EXT_1", DATAIN_CHANNEL_EXT=ce - 1)
    r.reg("CSC", "D_ENTRY_PER_SLICE", eps - 1)
    r.reg("CSC", "D_WEIGHT_FORMAT", 0)
    r.reg("CSC", "D_WEIGHT_SIZE_EXT_0", WEIGHT_WIDTH_EXT=3, WEIGHT_HEIGHT_EXT=3)
    r.reg("CSC", "D_WEIGHT_SIZE_EXT_1", WEIGHT_CHANNEL_EXT=ce - 1, WEIGHT_KERNEL=k - 1)
    r.reg("CSC", "D_WEIGHT_BYTES", wbytes)
    r.reg("CSC", "D_DATAOUT_SIZE_0", DATAOUT_WIDTH=ow - 1, DATAOUT_HEIGHT=oh - 1)
    r.reg("CSC", "D_DATAOUT_SIZE_1", DATAOUT_CHANNEL=k - 1)
    r.reg("CSC", "D_ATOMICS", ow * oh - 1)
    r.reg("CSC", "D_RELEASE", he - 1)
    r.reg("CSC", "D_ZERO_PADDING_VALUE", conv.pad_value & 0xFFFF)
    r.reg("CSC", "D_BANK", DATA_BANK=banks - 1, WEIGHT_BANK=hw.cbuf_bank_number - banks - 1)
    r.reg("CSC", "D_PRA_CFG", PRA_TRUNCATE=conv.pra_truncate)
    # CDMA: the cube in memory, its padding and stride.
    r.reg("CDMA", "D_MISC_CFG", **misc)
    r.reg("CDMA", "D_DATAIN_FORMAT", 0)
    r.reg("CDMA", "D_DATAIN_SIZE_0", DATAIN_WIDTH=w - 1, DATAIN_HEIGHT=h - 1)
    r.reg("CDMA", "D_DATAIN_SIZE_1", DATAIN_CHANNEL=c - 1)
    r.reg("CDMA", "D_DATAIN_SIZE_EXT_0", DATAIN_WIDTH_EXT=we - 1, DATAIN_HEIGHT_EXT=he - 1)
    r.reg("CDMA", "D_DAIN_RAM_TYPE", DATAIN_RAM_TYPE=1)
    r.addr("CDMA", "D_DAIN_ADDR_LOW_0", src.loc)
    r.reg("CDMA", "D_LINE_STRIDE", src.line_stride)
    r.reg("CDMA", "D_SURF_STRIDE", src.surface_stride)
    atom = hw.atom_elements(prec)
    r.reg("CDMA", "D_DAIN_MAP", LINE_PACKED=int(src.line_stride == w * atom * bpe),
          SURF_PACKED=int(src.surface_stride == h * src.line_stride))
    r.reg("CDMA", "D_ENTRY_PER_SLICE", eps - 1)
    r.reg("CDMA", "D_WEIGHT_FORMAT", 0)
    r.reg("CDMA", "D_WEIGHT_SIZE_0", BYTE_PER_KERNEL=16 * ce * bpe - 1)
    r.reg("CDMA", "D_WEIGHT_SIZE_1", WEIGHT_KERNEL=k - 1)
    r.reg("CDMA", "D_WEIGHT_RAM_TYPE", WEIGHT_RAM_TYPE=1)
    r.addr("CDMA", "D_WEIGHT_ADDR_LOW", weights)
    r.reg("CDMA", "D_WEIGHT_BYTES", wbytes)
    r.reg("CDMA", "D_CVT_CFG", CVT_EN=0)
    r.reg("CDMA", "D_CONV_STRIDE", CONV_X_STRIDE=sx - 1, CONV_Y_STRIDE=sy - 1)
    r.reg("CDMA", "D_ZERO_PADDING", PAD_LEFT=pl, PAD_RIGHT=pr, PAD_TOP=pt, PAD_BOTTOM=pb)
    r.reg("CDMA", "D_ZERO_PADDING_VALUE", conv.pad_value & 0xFFFF)
    r.reg("CDMA", "D_BANK", DATA_BANK=banks - 1, WEIGHT_BANK=hw.cbuf_bank_number - banks - 1)
    # Enables in the firmware's order: SDP, then CACC, CMAC_A, CMAC_B, CSC, CDMA.
    # Direct-mode registers a previous convolution may have left: CSC sees stride 1, no dilation, no padding.
    r.reg("CSC", "D_CONV_STRIDE_EXT", CONV_X_STRIDE_EXT=0, CONV_Y_STRIDE_EXT=0)
    r.reg("CSC", "D_DILATION_EXT", X_DILATION_EXT=0, Y_DILATION_EXT=0)
    r.reg("CSC", "D_ZERO_PADDING", PAD_LEFT=0, PAD_TOP=0)
    r.reg("CDMA", "D_FETCH_GRAIN", GRAINS=0)
    if sdp is None:
        r.reg("SDP", "D_OP_ENABLE", 1)
    else:
        sdp_enables(r, rdma)
    for unit in ("CACC", "CMAC_A", "CMAC_B", "CSC", "CDMA"):
        r.reg(unit, "D_OP_ENABLE", 1)


def _bypass_sdp(r: RegProgram, dst: Cube, out_cvt: tuple[int, int, int], prec: str, k: int) -> None:
    """SDP with every stage bypassed, the output converter only, on the fly from CACC in Winograd mode."""
    pointers(r, "SDP")
    oh, ow = dst.height, dst.width
    r.reg("SDP", "D_DATA_CUBE_WIDTH", ow - 1)
    r.reg("SDP", "D_DATA_CUBE_HEIGHT", oh - 1)
    r.reg("SDP", "D_DATA_CUBE_CHANNEL", k - 1)
    r.reg("SDP", "D_FEATURE_MODE_CFG", FLYING_MODE=1, WINOGRAD=1)
    r.reg("SDP", "D_DATA_FORMAT", PROC_PRECISION=PRECISION[prec], OUT_PRECISION=PRECISION[prec])
    r.reg("SDP", "D_DP_BS_CFG", BS_BYPASS=1)
    r.reg("SDP", "D_DP_BN_CFG", BN_BYPASS=1)
    r.reg("SDP", "D_DP_EW_CFG", EW_BYPASS=1)
    r.addr("SDP", "D_DST_BASE_ADDR_LOW", dst.loc)
    r.reg("SDP", "D_DST_LINE_STRIDE", dst.line_stride)
    r.reg("SDP", "D_DST_SURFACE_STRIDE", dst.surface_stride)
    r.reg("SDP", "D_DST_DMA_CFG", DST_RAM_TYPE=1)
    off, scale, shift = out_cvt
    r.reg("SDP", "D_CVT_OFFSET", off & 0xFFFFFFFF)
    r.reg("SDP", "D_CVT_SCALE", scale & 0xFFFF)
    r.reg("SDP", "D_CVT_SHIFT", shift)
