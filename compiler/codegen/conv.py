"""Direct convolution (CDMA/CSC/CMAC/CACC) whose int32 output SDP converts on the fly and writes."""
from __future__ import annotations

from dataclasses import dataclass

from compiler.codegen.program import PRECISION_CODES, Cube, OperandPlacement, pointers
from golden.program import Loc, RegProgram
from compiler.codegen.sdp import emit_sdp, sdp_enables
from golden.config import BYTES_PER_ELEMENT, HwConfig
from golden.dma import CONV_UNITS
from golden.engines.conv_datapath import cbuf_geometry, entries_per_slice



@dataclass(frozen=True)
class CbufReuse:
    """What a convolution keeps in the CBUF for the next one and takes from the previous one
    (``D_MISC_CFG``; rules in ``golden.cbuf``). Both operations must have the same ``D_BANK`` split, and a
    reused cube must have the same width, channels and lines."""

    keep_data: bool = False  # SKIP_DATA_RLS
    reuse_data: bool = False  # DATA_REUSE: CDMA fetches nothing, CSC reads the kept cube
    keep_weights: bool = False  # SKIP_WEIGHT_RLS
    reuse_weights: bool = False  # WEIGHT_REUSE

    def fields(self) -> dict[str, int]:
        return {"SKIP_DATA_RLS": int(self.keep_data), "DATA_REUSE": int(self.reuse_data),
                "SKIP_WEIGHT_RLS": int(self.keep_weights), "WEIGHT_REUSE": int(self.reuse_weights)}


@dataclass(frozen=True)
class CompressedPlacement:
    """Where a convolution's compressed weights live: the WMB (``wmb_bytes``) and WGS blocks; the stream itself
    is at the weight address, ``stream_bytes`` long (whole CBUF entries)."""

    wmb: Loc
    wmb_bytes: int
    wgs: Loc
    stream_bytes: int


def weight_fetch_bytes(hw: HwConfig, k: int, c: int, r: int, s: int, bpe: int = 1) -> int:
    """D_WEIGHT_BYTES: the kernels' bytes rounded up to whole CBUF entries, exactly the entries CSC consumes
    and releases. Fetching more leaves entries in the weight banks that the next convolution with the same
    bank split would read as its first weights (``golden.cbuf``)."""
    entry = cbuf_geometry(hw)[0]
    return -(-k * c * r * s * bpe // entry) * entry


def emit_csc_window(p: RegProgram, kernel: tuple[int, int, int, int], weight_bytes: int, out_hw: tuple[int, int],
                    stride: tuple[int, int], dilation: tuple[int, int], pad: tuple[int, int]) -> None:
    """CSC's kernel, output and sliding-window registers of a direct convolution (any precision): the
    ``kernel`` (K, C, R, S) and its ``weight_bytes``, the (OH, OW) output, stride, dilation, (top, left) pad."""
    k, c, r, s = kernel
    oh, ow = out_hw
    (sy, sx), (dy, dx), (pt, pl) = stride, dilation, pad
    p.reg("CSC", "D_WEIGHT_SIZE_EXT_0", WEIGHT_WIDTH_EXT=s - 1, WEIGHT_HEIGHT_EXT=r - 1)
    p.reg("CSC", "D_WEIGHT_SIZE_EXT_1", WEIGHT_CHANNEL_EXT=c - 1, WEIGHT_KERNEL=k - 1)
    p.reg("CSC", "D_WEIGHT_BYTES", weight_bytes)
    p.reg("CSC", "D_DATAOUT_SIZE_0", DATAOUT_WIDTH=ow - 1, DATAOUT_HEIGHT=oh - 1)
    p.reg("CSC", "D_DATAOUT_SIZE_1", DATAOUT_CHANNEL=k - 1)
    p.reg("CSC", "D_ATOMICS", ow * oh - 1)
    p.reg("CSC", "D_CONV_STRIDE_EXT", CONV_X_STRIDE_EXT=sx - 1, CONV_Y_STRIDE_EXT=sy - 1)
    p.reg("CSC", "D_DILATION_EXT", X_DILATION_EXT=dx - 1, Y_DILATION_EXT=dy - 1)
    p.reg("CSC", "D_ZERO_PADDING", PAD_LEFT=pl, PAD_TOP=pt)


def emit_conv(p: RegProgram, src: Cube, weights: Loc, kernel: tuple[int, int, int, int], dst: Cube, conv,
              sdp, operands: dict[str, OperandPlacement] | None = None, ram_type: int = 1,
              data_banks: int | None = None, reuse: CbufReuse | None = None,
              compressed: CompressedPlacement | None = None, to_pdp: bool = False) -> None:
    """``kernel`` = (K, C, R, S); ``conv`` a ``compiler.hwparams.ConvParams``-like object (stride, dilation,
    pad, pad_value, clip_truncate; optional ``cvt`` (offset, scale, truncate) for the CDMA input CVT);
    ``sdp`` the SDP parameters applied on the fly. Output size is ``dst``'s. ``reuse`` keeps this
    operation's input or weights in the CBUF for the next one, or takes the previous one's. ``compressed``:
    the weights at ``weights`` are a compressed stream (``compiler.codegen.wcomp``) with its WMB and WGS; the
    last CBUF bank is left to the WMB. ``to_pdp``: SDP hands its result to PDP on the fly."""
    hw = p.hw
    k, c, r, s = kernel
    h, w = src.height, src.width
    oh, ow = dst.height, dst.width
    dtype = getattr(conv, "precision", "int8")
    bpe = BYTES_PER_ELEMENT[dtype]
    atom = hw.atom_elements(dtype)
    eps = entries_per_slice(hw, c, w, bpe)  # CBUF entries per input line, as the CBUF rule demands
    if data_banks is None:
        data_banks = -(-h * eps // cbuf_geometry(hw)[1])
    wbytes = weight_fetch_bytes(hw, k, c, r, s, bpe) if compressed is None else compressed.stream_bytes
    pad_raw = conv.pad_value & (0xFF if bpe == 1 else 0xFFFF)
    proc = PRECISION_CODES[dtype]
    (sy, sx), (pt, pl) = conv.stride, conv.pad
    rdma = emit_sdp(p, None, dst, sdp, operands, ram_type, enable=False, to_pdp=to_pdp)
    pointers(p, *CONV_UNITS)
    flags = (reuse or CbufReuse()).fields()
    cdma_in = PRECISION_CODES[getattr(conv, "in_precision", None) or dtype]  # CDMA's CVT converts int16 to fp16
    for unit in CONV_UNITS:
        p.reg(unit, "D_MISC_CFG", CONV_MODE=0, PROC_PRECISION=proc,
              **({"IN_PRECISION": cdma_in if unit == "CDMA" else proc, **flags} if unit in ("CDMA", "CSC") else {}))
    line_packed = src.line_stride == w * atom * bpe
    surf_packed = src.surface_stride == h * src.line_stride
    p.reg("CDMA", "D_DATAIN_FORMAT", 0)
    p.reg("CDMA", "D_DATAIN_SIZE_0", DATAIN_WIDTH=w - 1, DATAIN_HEIGHT=h - 1)
    p.reg("CDMA", "D_DATAIN_SIZE_1", DATAIN_CHANNEL=c - 1)
    p.reg("CDMA", "D_DATAIN_SIZE_EXT_0", DATAIN_WIDTH_EXT=w - 1, DATAIN_HEIGHT_EXT=h - 1)
    p.reg("CDMA", "D_DAIN_RAM_TYPE", DATAIN_RAM_TYPE=ram_type)
    p.addr("CDMA", "D_DAIN_ADDR_LOW_0", src.loc)
    p.reg("CDMA", "D_LINE_STRIDE", src.line_stride)
    p.reg("CDMA", "D_SURF_STRIDE", src.surface_stride)
    p.reg("CDMA", "D_DAIN_MAP", LINE_PACKED=int(line_packed), SURF_PACKED=int(surf_packed))
    p.reg("CDMA", "D_FETCH_GRAIN", GRAINS=0)
    p.reg("CDMA", "D_ENTRY_PER_SLICE", eps - 1)
    p.reg("CDMA", "D_WEIGHT_SIZE_0", BYTE_PER_KERNEL=r * s * c * bpe - 1)
    p.reg("CDMA", "D_WEIGHT_SIZE_1", WEIGHT_KERNEL=k - 1)
    p.reg("CDMA", "D_WEIGHT_RAM_TYPE", WEIGHT_RAM_TYPE=ram_type)
    p.addr("CDMA", "D_WEIGHT_ADDR_LOW", weights)
    p.reg("CDMA", "D_WEIGHT_BYTES", wbytes)
    p.reg("CDMA", "D_CONV_STRIDE", CONV_X_STRIDE=sx - 1, CONV_Y_STRIDE=sy - 1)
    p.reg("CDMA", "D_ZERO_PADDING", PAD_LEFT=pl, PAD_TOP=pt)
    p.reg("CDMA", "D_ZERO_PADDING_VALUE", pad_raw)
    weight_banks = max(hw.cbuf_bank_number - data_banks - (1 if compressed is None else 2), 0)
    if hw.weight_compression:  # (registers keep their values: a plain conv after a compressed one says so)
        for unit in ("CDMA", "CSC"):
            p.reg(unit, "D_WEIGHT_FORMAT", WEIGHT_FORMAT=int(compressed is not None))
    if compressed is not None:
        for unit in ("CDMA", "CSC"):
            p.reg(unit, "D_WMB_BYTES", WMB_BYTES=compressed.wmb_bytes)
        p.addr("CDMA", "D_WMB_ADDR_LOW", compressed.wmb)
        p.addr("CDMA", "D_WGS_ADDR_LOW", compressed.wgs)
    p.reg("CDMA", "D_BANK", DATA_BANK=data_banks - 1, WEIGHT_BANK=weight_banks)
    cvt = getattr(conv, "cvt", None)
    if cvt is not None:
        cvt_off, cvt_scale, cvt_trunc = cvt
        p.reg("CDMA", "D_CVT_CFG", CVT_EN=1, CVT_TRUNCATE=cvt_trunc)
        p.reg("CDMA", "D_CVT_OFFSET", cvt_off & 0xFFFF)
        p.reg("CDMA", "D_CVT_SCALE", cvt_scale & 0xFFFF)
    else:
        p.reg("CDMA", "D_CVT_CFG", CVT_EN=0)
    p.reg("CSC", "D_DATAIN_FORMAT", 0)
    p.reg("CSC", "D_DATAIN_SIZE_EXT_0", DATAIN_WIDTH_EXT=w - 1, DATAIN_HEIGHT_EXT=h - 1)
    p.reg("CSC", "D_DATAIN_SIZE_EXT_1", DATAIN_CHANNEL_EXT=c - 1)
    p.reg("CSC", "D_ENTRY_PER_SLICE", eps - 1)
    emit_csc_window(p, (k, c, r, s), wbytes, (oh, ow), conv.stride, conv.dilation, (pt, pl))
    p.reg("CSC", "D_ZERO_PADDING_VALUE", pad_raw)
    p.reg("CSC", "D_BANK", DATA_BANK=data_banks - 1, WEIGHT_BANK=weight_banks)
    # Release every input slice at the end (the reset value releases 2, more than a 1-line input holds, which
    # leaves CSC's data pointer ahead of CDMA's for the next convolution with the same bank split).
    p.reg("CSC", "D_RELEASE", RLS_SLICES=h - 1)
    p.reg("CACC", "D_DATAOUT_SIZE_0", DATAOUT_WIDTH=ow - 1, DATAOUT_HEIGHT=oh - 1)
    p.reg("CACC", "D_DATAOUT_SIZE_1", DATAOUT_CHANNEL=k - 1)
    p.addr("CACC", "D_DATAOUT_ADDR", dst.loc)
    p.reg("CACC", "D_LINE_STRIDE", dst.line_stride)
    p.reg("CACC", "D_SURF_STRIDE", dst.surface_stride)
    p.reg("CACC", "D_CLIP_CFG", CLIP_TRUNCATE=conv.clip_truncate)
    # Enable order of NVDLA's firmware: SDP (RDMA first) then CACC, CMAC_A, CMAC_B, CSC, CDMA.
    sdp_enables(p, rdma)
    for unit in ("CACC", "CMAC_A", "CMAC_B", "CSC", "CDMA"):
        p.reg(unit, "D_OP_ENABLE", 1)
