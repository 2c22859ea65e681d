"""16-bit direct convolutions (int16 and fp16, nv_full): CDMA/CSC/CMAC_A/CMAC_B/CACC feeding SDP on the fly,
SDP writing the result to memory, enabled in the firmware's order.

``compiler.codegen.conv.emit_conv`` programs int8; the 16-bit datapath differs in the precisions of every
unit, its CBUF geometry (nvdlav1: four 32-byte atoms per 128-byte entry) and SDP's output (the int16 CVT,
or fp32 -> fp16). Cubes hold 2-byte elements in 16-channel atoms (their strides say so).
"""
from __future__ import annotations

from compiler.codegen.conv import emit_csc_window, weight_fetch_bytes
from compiler.codegen.program import Cube
from golden.config import HwConfig
from golden.dma import CONV_UNITS
from golden.program import Loc, RegProgram

#: Bytes per element of both 16-bit precisions.
BPE = 2
_PRECISION = {"int16": "INT16", "fp16": "FP16"}
#: nvdlav1 CBUF entries are 128 bytes (four 32-byte atoms); nv_full's 32 KiB banks hold 256 of them.
CBUF_ENTRY_BYTES = 128


def entries_per_slice(c: int, w: int) -> int:
    """CBUF entries of one input line on nv_full (nvdlav1 cmod): 32-byte atoms, four per 128-byte entry."""
    atoms = -(-c * BPE // 32)
    return (atoms // 4) * w + {0: 0, 1: (w + 3) // 4, 2: (w + 1) // 2, 3: w}[atoms % 4]


def data_banks(c: int, h: int, w: int, hw: HwConfig | None = None) -> int:
    """Banks the input occupies; ``hw`` sizes the bank (a derived config may have deeper banks)."""
    per_bank = (hw.cbuf_bank_width * hw.cbuf_bank_depth if hw else 32 * 1024) // CBUF_ENTRY_BYTES
    return -(-h * entries_per_slice(c, w) // per_bank)


def emit_conv_wide(p: RegProgram, src: Cube, weights: Loc, kernel: tuple[int, int, int, int], dst: Cube,
                   conv) -> None:
    """A 16-bit direct convolution of ``src`` with the ``kernel`` (K, C, R, S) weights at ``weights`` into
    ``dst``. ``conv`` has the precisions (``precision``, ``source_precision``), stride, dilation, pad,
    pad_value, clip_truncate, cvt (CDMA input conversion or None), nan_to_zero and out_cvt."""
    hw = p.hw
    if hw.address_map != "full":
        raise ValueError(f"16-bit convolution programs target nv_full's register map, not {hw.name}")
    k, c, r, s = kernel
    h, w = src.height, src.width
    oh, ow = dst.height, dst.width
    (sy, sx), (pt, pl) = conv.stride, conv.pad
    proc, src_precision = _PRECISION[conv.precision], _PRECISION[conv.source_precision]
    eps, banks = entries_per_slice(c, w), data_banks(c, h, w, hw)
    wsize = weight_fetch_bytes(hw, k, c, r, s, BPE)
    for unit in CONV_UNITS:
        p.reg(unit, "S_POINTER", 0)
    for unit in ("CMAC_A", "CMAC_B", "CACC"):
        p.reg(unit, "D_MISC_CFG", CONV_MODE=0, PROC_PRECISION=proc)
    p.reg("CDMA", "D_MISC_CFG", CONV_MODE=0, IN_PRECISION=src_precision, PROC_PRECISION=proc)
    p.reg("CSC", "D_MISC_CFG", CONV_MODE=0, IN_PRECISION=proc, PROC_PRECISION=proc)
    # CDMA
    p.reg("CDMA", "D_DATAIN_FORMAT", 0)
    p.reg("CDMA", "D_DATAIN_SIZE_0", DATAIN_WIDTH=w - 1, DATAIN_HEIGHT=h - 1)
    p.reg("CDMA", "D_DATAIN_SIZE_1", DATAIN_CHANNEL=c - 1)
    p.reg("CDMA", "D_DATAIN_SIZE_EXT_0", DATAIN_WIDTH_EXT=w - 1, DATAIN_HEIGHT_EXT=h - 1)
    p.reg("CDMA", "D_DAIN_RAM_TYPE", DATAIN_RAM_TYPE=1)
    p.addr("CDMA", "D_DAIN_ADDR_LOW_0", src.loc)
    p.reg("CDMA", "D_LINE_STRIDE", src.line_stride)
    p.reg("CDMA", "D_SURF_STRIDE", src.surface_stride)
    p.reg("CDMA", "D_DAIN_MAP", LINE_PACKED=1, SURF_PACKED=1)
    p.reg("CDMA", "D_FETCH_GRAIN", GRAINS=0)
    p.reg("CDMA", "D_ENTRY_PER_SLICE", eps - 1)
    p.reg("CDMA", "D_WEIGHT_FORMAT", 0)
    p.reg("CDMA", "D_WEIGHT_SIZE_0", BYTE_PER_KERNEL=r * s * c * BPE - 1)
    p.reg("CDMA", "D_WEIGHT_SIZE_1", WEIGHT_KERNEL=k - 1)
    p.reg("CDMA", "D_WEIGHT_RAM_TYPE", WEIGHT_RAM_TYPE=1)
    p.addr("CDMA", "D_WEIGHT_ADDR_LOW", weights)
    p.reg("CDMA", "D_WEIGHT_BYTES", wsize)
    if conv.cvt is not None:
        off, scale, trunc = conv.cvt
        p.reg("CDMA", "D_CVT_CFG", CVT_EN=1, CVT_TRUNCATE=trunc)
        p.reg("CDMA", "D_CVT_OFFSET", off & 0xFFFF)
        p.reg("CDMA", "D_CVT_SCALE", scale & 0xFFFF)
    else:
        p.reg("CDMA", "D_CVT_CFG", CVT_EN=0)
    p.reg("CDMA", "D_NAN_FLUSH_TO_ZERO", NAN_TO_ZERO=int(conv.nan_to_zero))
    p.reg("CDMA", "D_CONV_STRIDE", CONV_X_STRIDE=sx - 1, CONV_Y_STRIDE=sy - 1)
    p.reg("CDMA", "D_ZERO_PADDING", PAD_LEFT=pl, PAD_TOP=pt)
    p.reg("CDMA", "D_ZERO_PADDING_VALUE", conv.pad_value & 0xFFFF)
    weight_banks = hw.cbuf_bank_number - banks - 1
    p.reg("CDMA", "D_BANK", DATA_BANK=banks - 1, WEIGHT_BANK=weight_banks)
    # CSC
    p.reg("CSC", "D_DATAIN_FORMAT", 0)
    p.reg("CSC", "D_DATAIN_SIZE_EXT_0", DATAIN_WIDTH_EXT=w - 1, DATAIN_HEIGHT_EXT=h - 1)
    p.reg("CSC", "D_DATAIN_SIZE_EXT_1", DATAIN_CHANNEL_EXT=c - 1)
    p.reg("CSC", "D_ENTRY_PER_SLICE", eps - 1)
    p.reg("CSC", "D_WEIGHT_FORMAT", 0)
    emit_csc_window(p, (k, c, r, s), wsize, (oh, ow), conv.stride, conv.dilation, (pt, pl))
    p.reg("CSC", "D_ZERO_PADDING_VALUE", conv.pad_value & 0xFFFF)
    p.reg("CSC", "D_BANK", DATA_BANK=banks - 1, WEIGHT_BANK=weight_banks)
    # CACC (its own output address is unused: SDP writes on the fly)
    p.reg("CACC", "D_DATAOUT_SIZE_0", DATAOUT_WIDTH=ow - 1, DATAOUT_HEIGHT=oh - 1)
    p.reg("CACC", "D_DATAOUT_SIZE_1", DATAOUT_CHANNEL=k - 1)
    p.reg("CACC", "D_CLIP_CFG", CLIP_TRUNCATE=conv.clip_truncate)
    # SDP on the fly: every stage bypassed; the output CVT (int16) or Fp32ToFp16 (fp16) writes the cube.
    p.reg("SDP", "S_POINTER", 0)
    p.reg("SDP", "D_DATA_CUBE_WIDTH", ow - 1)
    p.reg("SDP", "D_DATA_CUBE_HEIGHT", oh - 1)
    p.reg("SDP", "D_DATA_CUBE_CHANNEL", k - 1)
    p.addr("SDP", "D_DST_BASE_ADDR_LOW", dst.loc)
    p.reg("SDP", "D_DST_LINE_STRIDE", dst.line_stride)
    p.reg("SDP", "D_DST_SURFACE_STRIDE", dst.surface_stride)
    p.reg("SDP", "D_DST_DMA_CFG", 1)
    for stage in ("BS", "BN", "EW"):
        p.reg("SDP", f"D_DP_{stage}_CFG", 1)
    p.reg("SDP", "D_FEATURE_MODE_CFG", FLYING_MODE=1)
    p.reg("SDP", "D_DATA_FORMAT", PROC_PRECISION=proc, OUT_PRECISION=proc)
    off, scale, shift = conv.out_cvt
    p.reg("SDP", "D_CVT_OFFSET", off & 0xFFFFFFFF)
    p.reg("SDP", "D_CVT_SCALE", scale & 0xFFFF)
    p.reg("SDP", "D_CVT_SHIFT", shift)
    # Enable order of NVDLA's firmware: SDP, then CACC, CMAC_A, CMAC_B, CSC, CDMA.
    for unit in ("SDP", "CACC", "CMAC_A", "CMAC_B", "CSC", "CDMA"):
        p.reg(unit, "D_OP_ENABLE", 1)
