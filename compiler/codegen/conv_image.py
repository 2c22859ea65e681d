"""Image (pixel) input convolutions, programmed the way NVDLA's firmware does for ``DATAIN_FORMAT=PIXEL``
(``sw:kmd/firmware/conv.c``): pixel planes at their pitch, CDMA left/right padding, the kernel pre-extended
into channels (``s * lanes + c``) and, with ``y_extension``, post-extended over rows (``WeightTranslationUnit``
IMG channel extension); SDP converts the int8 datapath's output on the fly and writes it.
"""
from __future__ import annotations

from compiler.codegen.program import Cube, pointers
from compiler.codegen.sdp import emit_sdp, sdp_enables
from compiler.hwparams import SdpParams
from golden.config import HwConfig
from golden.dma import CONV_UNITS
from golden.engines.conv_datapath import cbuf_geometry
from golden.program import Loc, RegProgram

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


def emit_image_conv(regs: RegProgram, planes: tuple[Loc, Loc | None], strides: tuple[int, int], weights: Loc,
                    wbytes: int, kernel: tuple[int, int, int], dst: Cube, conv) -> None:
    """An image convolution: pixel ``planes`` (luma/packed, chroma or None) with line ``strides`` (luma,
    chroma), ``wbytes`` of pre-extended weights at ``weights`` for ``kernel`` (K, R, S), into ``dst``.
    ``conv`` has fmt, width, height, lanes, x_offset, signed, cvt, means, stride, pad_top/left/right,
    cdma_pad, csc_pad, y_extension, clip_truncate and out_cvt."""
    hw = regs.hw
    sizes, lanes, bits = FORMATS[conv.fmt]
    k, r, s = kernel
    W, H = conv.width, conv.height
    oh, ow = dst.height, dst.width
    cx = s * lanes
    line, uv = strides
    padded = conv.pad_left + W + conv.pad_right
    entry, depth = cbuf_geometry(hw)
    eps = -(-padded * lanes // entry)
    data_banks = -(-H * eps // depth)
    weight_banks = max(hw.cbuf_bank_number - data_banks - 1, 0)
    sy, sx = conv.stride
    bottom = max(0, (oh - 1) * sy + r - conv.pad_top - H)

    off, scale, shift = conv.out_cvt
    rdma = emit_sdp(regs, None, dst, SdpParams(cvt_offset=off, cvt_scale=scale, cvt_shift=shift), None, 1,
                    enable=False)
    pointers(regs, *CONV_UNITS)
    for unit in CONV_UNITS:
        extra = {"IN_PRECISION": int(bits == 16) if unit == "CDMA" else 0} if unit in ("CDMA", "CSC") else {}
        regs.reg(unit, "D_MISC_CFG", CONV_MODE=0, PROC_PRECISION=0, **extra)
    regs.reg("CDMA", "D_DATAIN_FORMAT", DATAIN_FORMAT=1, PIXEL_FORMAT=conv.fmt, PIXEL_MAPPING=0,
             PIXEL_SIGN_OVERRIDE=int(conv.signed))
    regs.reg("CDMA", "D_DATAIN_SIZE_0", DATAIN_WIDTH=W - 1, DATAIN_HEIGHT=H - 1)
    regs.reg("CDMA", "D_DATAIN_SIZE_1", DATAIN_CHANNEL=lanes - 1)
    regs.reg("CDMA", "D_DATAIN_SIZE_EXT_0", DATAIN_WIDTH_EXT=W - 1, DATAIN_HEIGHT_EXT=H - 1)
    regs.reg("CDMA", "D_PIXEL_OFFSET", PIXEL_X_OFFSET=conv.x_offset, PIXEL_Y_OFFSET=0)
    regs.reg("CDMA", "D_DAIN_RAM_TYPE", DATAIN_RAM_TYPE=1)
    regs.addr("CDMA", "D_DAIN_ADDR_LOW_0", planes[0])
    regs.reg("CDMA", "D_DAIN_ADDR_HIGH_0", 0)
    regs.addr("CDMA", "D_DAIN_ADDR_LOW_1", planes[1] if len(sizes) == 2 else 0)
    regs.reg("CDMA", "D_DAIN_ADDR_HIGH_1", 0)
    regs.reg("CDMA", "D_LINE_STRIDE", line)
    regs.reg("CDMA", "D_LINE_UV_STRIDE", uv)
    regs.reg("CDMA", "D_DAIN_MAP", 0)
    regs.reg("CDMA", "D_FETCH_GRAIN", GRAINS=0)
    regs.reg("CDMA", "D_ENTRY_PER_SLICE", eps - 1)
    regs.reg("CDMA", "D_WEIGHT_SIZE_0", BYTE_PER_KERNEL=r * cx - 1)
    regs.reg("CDMA", "D_WEIGHT_SIZE_1", WEIGHT_KERNEL=k - 1)
    regs.reg("CDMA", "D_WEIGHT_RAM_TYPE", WEIGHT_RAM_TYPE=1)
    regs.addr("CDMA", "D_WEIGHT_ADDR_LOW", weights)
    regs.reg("CDMA", "D_WEIGHT_BYTES", wbytes)
    regs.reg("CDMA", "D_CONV_STRIDE", CONV_X_STRIDE=sx - 1, CONV_Y_STRIDE=sy - 1)
    regs.reg("CDMA", "D_ZERO_PADDING", PAD_LEFT=conv.pad_left, PAD_RIGHT=conv.pad_right,
             PAD_TOP=conv.pad_top, PAD_BOTTOM=min(bottom, 63))
    regs.reg("CDMA", "D_ZERO_PADDING_VALUE", conv.cdma_pad & 0xFFFF)
    regs.reg("CDMA", "D_BANK", DATA_BANK=data_banks - 1, WEIGHT_BANK=weight_banks)
    if conv.cvt is not None:
        cvt_off, cvt_scale, cvt_trunc = conv.cvt
        regs.reg("CDMA", "D_CVT_CFG", CVT_EN=1, CVT_TRUNCATE=cvt_trunc)
        regs.reg("CDMA", "D_CVT_OFFSET", cvt_off & 0xFFFF)
        regs.reg("CDMA", "D_CVT_SCALE", cvt_scale & 0xFFFF)
    else:
        regs.reg("CDMA", "D_CVT_CFG", CVT_EN=0)
    regs.reg("CDMA", "D_MEAN_FORMAT", MEAN_FORMAT=int(conv.means is not None))
    ry, gu, bv, ax = conv.means if conv.means is not None else (0, 0, 0, 0)
    regs.reg("CDMA", "D_MEAN_GLOBAL_0", MEAN_RY=ry & 0xFFFF, MEAN_GU=gu & 0xFFFF)
    regs.reg("CDMA", "D_MEAN_GLOBAL_1", MEAN_BV=bv & 0xFFFF, MEAN_AX=ax & 0xFFFF)
    regs.reg("CSC", "D_DATAIN_FORMAT", DATAIN_FORMAT=1)
    regs.reg("CSC", "D_DATAIN_SIZE_EXT_0", DATAIN_WIDTH_EXT=W - 1, DATAIN_HEIGHT_EXT=H - 1)
    regs.reg("CSC", "D_DATAIN_SIZE_EXT_1", DATAIN_CHANNEL_EXT=lanes - 1)
    regs.reg("CSC", "D_ENTRY_PER_SLICE", eps - 1)
    regs.reg("CSC", "D_POST_Y_EXTENSION", Y_EXTENSION=conv.y_extension)
    regs.reg("CSC", "D_WEIGHT_SIZE_EXT_0", WEIGHT_WIDTH_EXT=0, WEIGHT_HEIGHT_EXT=r - 1)
    regs.reg("CSC", "D_WEIGHT_SIZE_EXT_1", WEIGHT_CHANNEL_EXT=cx - 1, WEIGHT_KERNEL=k - 1)
    regs.reg("CSC", "D_WEIGHT_BYTES", wbytes)
    regs.reg("CSC", "D_DATAOUT_SIZE_0", DATAOUT_WIDTH=ow - 1, DATAOUT_HEIGHT=oh - 1)
    regs.reg("CSC", "D_DATAOUT_SIZE_1", DATAOUT_CHANNEL=k - 1)
    regs.reg("CSC", "D_ATOMICS", ow * oh - 1)
    regs.reg("CSC", "D_CONV_STRIDE_EXT", CONV_X_STRIDE_EXT=sx - 1, CONV_Y_STRIDE_EXT=sy - 1)
    regs.reg("CSC", "D_DILATION_EXT", X_DILATION_EXT=0, Y_DILATION_EXT=0)
    regs.reg("CSC", "D_ZERO_PADDING", PAD_LEFT=conv.pad_left, PAD_TOP=conv.pad_top)
    regs.reg("CSC", "D_ZERO_PADDING_VALUE", conv.csc_pad & 0xFFFF)
    regs.reg("CSC", "D_BANK", DATA_BANK=data_banks - 1, WEIGHT_BANK=weight_banks)
    regs.reg("CACC", "D_DATAOUT_SIZE_0", DATAOUT_WIDTH=ow - 1, DATAOUT_HEIGHT=oh - 1)
    regs.reg("CACC", "D_DATAOUT_SIZE_1", DATAOUT_CHANNEL=k - 1)
    regs.addr("CACC", "D_DATAOUT_ADDR", dst.loc)
    regs.reg("CACC", "D_LINE_STRIDE", dst.line_stride)
    regs.reg("CACC", "D_SURF_STRIDE", dst.surface_stride)
    regs.reg("CACC", "D_CLIP_CFG", CLIP_TRUNCATE=conv.clip_truncate)
    sdp_enables(regs, rdma)
    for unit in ("CACC", "CMAC_A", "CMAC_B", "CSC", "CDMA"):
        regs.reg(unit, "D_OP_ENABLE", 1)
