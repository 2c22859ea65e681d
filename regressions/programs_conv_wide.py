"""Register programs for 16-bit direct convolutions (int16 and fp16, nv_full), built from layer parameters.

The compiler's codegen (``compiler.codegen.conv``) emits int8 only, so these programs are written here by
register name, like ``regressions.programs.program_conv`` otherwise: CDMA/CSC/CMAC_A/CMAC_B/CACC feeding
SDP on the fly, SDP writing the result to memory, enabled in the firmware's order. Memory images are packed
with plain numpy from NVDLA_NOTES §3 (2-byte little-endian elements, 16 per 32-byte atom; direct-conv
weights in kernel groups of atomic K / 2, channel groups of MAC atomic C), independently of ``golden``.

Element values are int16 values or fp16 *bit patterns* (0..65535), as the layer says.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from compiler.codegen.conv import weight_fetch_bytes
from golden.program import RegProgram
from golden.config import HwConfig
from golden.dma import CONV_UNITS
from regressions.programs import DST_BASE, SRC_BASE, WEIGHT_BASE, LayerTest

#: Bytes per element of both 16-bit precisions.
BPE = 2
_PRECISION = {"int16": "INT16", "fp16": "FP16"}


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


def entries_per_slice(c: int, w: int) -> int:
    """CBUF entries of one input line on nv_full (nvdlav1 cmod): 32-byte atoms, four per 128-byte entry."""
    atoms = -(-c * BPE // 32)
    return (atoms // 4) * w + {0: 0, 1: (w + 3) // 4, 2: (w + 1) // 2, 3: w}[atoms % 4]


#: nvdlav1 CBUF entries are 128 bytes (four 32-byte atoms); nv_full's 32 KiB banks hold 256 of them.
CBUF_ENTRY_BYTES = 128


def data_banks(c: int, h: int, w: int, hw: HwConfig | None = None) -> int:
    """Banks the input occupies; ``hw`` sizes the bank (a derived config may have deeper banks)."""
    per_bank = (hw.cbuf_bank_width * hw.cbuf_bank_depth if hw else 32 * 1024) // CBUF_ENTRY_BYTES
    return -(-h * entries_per_slice(c, w) // per_bank)


# ---- the program ------------------------------------------------------------------------------------------
def program_conv_wide(hw: HwConfig, layer: WideConvLayer) -> LayerTest:
    """The register program and memory image of ``layer``; its output region is the SDP's cube."""
    if hw.address_map != "full":
        raise ValueError(f"16-bit convolution programs target nv_full's register map, not {hw.name}")
    atom = atom16(hw)
    c, h, w = layer.x.shape
    k, _, r, s = layer.w.shape
    oh, ow = layer.output_hw()
    (sy, sx), (dy, dx), (pt, pl) = layer.stride, layer.dilation, layer.pad
    proc, src = _PRECISION[layer.precision], _PRECISION[layer.source_precision]
    eps, banks = entries_per_slice(c, w), data_banks(c, h, w, hw)
    wbytes = pack_weights16(layer.w, hw)
    wsize = weight_fetch_bytes(hw, k, c, r, s, BPE)
    line, surf = w * atom * BPE, h * w * atom * BPE
    oline, osurf = ow * atom * BPE, oh * ow * atom * BPE

    p = LayerTest(RegProgram(hw), intr="SDP_0")
    p.memory += [(SRC_BASE, pack16(layer.x, atom)), (WEIGHT_BASE, wbytes + bytes(wsize - len(wbytes)))]
    p.output = (DST_BASE, -(-k // atom) * osurf)
    regs = RegProgram(hw)
    for unit in CONV_UNITS:
        regs.reg(unit, "S_POINTER", 0)
    for unit in ("CMAC_A", "CMAC_B", "CACC"):
        regs.reg(unit, "D_MISC_CFG", CONV_MODE=0, PROC_PRECISION=proc)
    regs.reg("CDMA", "D_MISC_CFG", CONV_MODE=0, IN_PRECISION=src, PROC_PRECISION=proc)
    regs.reg("CSC", "D_MISC_CFG", CONV_MODE=0, IN_PRECISION=proc, PROC_PRECISION=proc)
    # CDMA
    regs.reg("CDMA", "D_DATAIN_FORMAT", 0)
    regs.reg("CDMA", "D_DATAIN_SIZE_0", DATAIN_WIDTH=w - 1, DATAIN_HEIGHT=h - 1)
    regs.reg("CDMA", "D_DATAIN_SIZE_1", DATAIN_CHANNEL=c - 1)
    regs.reg("CDMA", "D_DATAIN_SIZE_EXT_0", DATAIN_WIDTH_EXT=w - 1, DATAIN_HEIGHT_EXT=h - 1)
    regs.reg("CDMA", "D_DAIN_RAM_TYPE", DATAIN_RAM_TYPE=1)
    regs.reg("CDMA", "D_DAIN_ADDR_LOW_0", SRC_BASE)
    regs.reg("CDMA", "D_LINE_STRIDE", line)
    regs.reg("CDMA", "D_SURF_STRIDE", surf)
    regs.reg("CDMA", "D_DAIN_MAP", LINE_PACKED=1, SURF_PACKED=1)
    regs.reg("CDMA", "D_FETCH_GRAIN", GRAINS=0)
    regs.reg("CDMA", "D_ENTRY_PER_SLICE", eps - 1)
    regs.reg("CDMA", "D_WEIGHT_FORMAT", 0)
    regs.reg("CDMA", "D_WEIGHT_SIZE_0", BYTE_PER_KERNEL=r * s * c * BPE - 1)
    regs.reg("CDMA", "D_WEIGHT_SIZE_1", WEIGHT_KERNEL=k - 1)
    regs.reg("CDMA", "D_WEIGHT_RAM_TYPE", WEIGHT_RAM_TYPE=1)
    regs.reg("CDMA", "D_WEIGHT_ADDR_LOW", WEIGHT_BASE)
    regs.reg("CDMA", "D_WEIGHT_BYTES", wsize)
    if layer.cvt is not None:
        off, scale, trunc = layer.cvt
        regs.reg("CDMA", "D_CVT_CFG", CVT_EN=1, CVT_TRUNCATE=trunc)
        regs.reg("CDMA", "D_CVT_OFFSET", off & 0xFFFF)
        regs.reg("CDMA", "D_CVT_SCALE", scale & 0xFFFF)
    else:
        regs.reg("CDMA", "D_CVT_CFG", CVT_EN=0)
    regs.reg("CDMA", "D_NAN_FLUSH_TO_ZERO", NAN_TO_ZERO=int(layer.nan_to_zero))
    regs.reg("CDMA", "D_CONV_STRIDE", CONV_X_STRIDE=sx - 1, CONV_Y_STRIDE=sy - 1)
    regs.reg("CDMA", "D_ZERO_PADDING", PAD_LEFT=pl, PAD_TOP=pt)
    regs.reg("CDMA", "D_ZERO_PADDING_VALUE", layer.pad_value & 0xFFFF)
    weight_banks = hw.cbuf_bank_number - banks - 1
    regs.reg("CDMA", "D_BANK", DATA_BANK=banks - 1, WEIGHT_BANK=weight_banks)
    # CSC
    regs.reg("CSC", "D_DATAIN_FORMAT", 0)
    regs.reg("CSC", "D_DATAIN_SIZE_EXT_0", DATAIN_WIDTH_EXT=w - 1, DATAIN_HEIGHT_EXT=h - 1)
    regs.reg("CSC", "D_DATAIN_SIZE_EXT_1", DATAIN_CHANNEL_EXT=c - 1)
    regs.reg("CSC", "D_ENTRY_PER_SLICE", eps - 1)
    regs.reg("CSC", "D_WEIGHT_FORMAT", 0)
    regs.reg("CSC", "D_WEIGHT_SIZE_EXT_0", WEIGHT_WIDTH_EXT=s - 1, WEIGHT_HEIGHT_EXT=r - 1)
    regs.reg("CSC", "D_WEIGHT_SIZE_EXT_1", WEIGHT_CHANNEL_EXT=c - 1, WEIGHT_KERNEL=k - 1)
    regs.reg("CSC", "D_WEIGHT_BYTES", wsize)
    regs.reg("CSC", "D_DATAOUT_SIZE_0", DATAOUT_WIDTH=ow - 1, DATAOUT_HEIGHT=oh - 1)
    regs.reg("CSC", "D_DATAOUT_SIZE_1", DATAOUT_CHANNEL=k - 1)
    regs.reg("CSC", "D_ATOMICS", ow * oh - 1)
    regs.reg("CSC", "D_CONV_STRIDE_EXT", CONV_X_STRIDE_EXT=sx - 1, CONV_Y_STRIDE_EXT=sy - 1)
    regs.reg("CSC", "D_DILATION_EXT", X_DILATION_EXT=dx - 1, Y_DILATION_EXT=dy - 1)
    regs.reg("CSC", "D_ZERO_PADDING", PAD_LEFT=pl, PAD_TOP=pt)
    regs.reg("CSC", "D_ZERO_PADDING_VALUE", layer.pad_value & 0xFFFF)
    regs.reg("CSC", "D_BANK", DATA_BANK=banks - 1, WEIGHT_BANK=weight_banks)
    # CACC (its own output address is unused: SDP writes on the fly)
    regs.reg("CACC", "D_DATAOUT_SIZE_0", DATAOUT_WIDTH=ow - 1, DATAOUT_HEIGHT=oh - 1)
    regs.reg("CACC", "D_DATAOUT_SIZE_1", DATAOUT_CHANNEL=k - 1)
    regs.reg("CACC", "D_CLIP_CFG", CLIP_TRUNCATE=layer.clip_truncate)
    # SDP on the fly: every stage bypassed; the output CVT (int16) or Fp32ToFp16 (fp16) writes the cube.
    regs.reg("SDP", "S_POINTER", 0)
    regs.reg("SDP", "D_DATA_CUBE_WIDTH", ow - 1)
    regs.reg("SDP", "D_DATA_CUBE_HEIGHT", oh - 1)
    regs.reg("SDP", "D_DATA_CUBE_CHANNEL", k - 1)
    regs.reg("SDP", "D_DST_BASE_ADDR_LOW", DST_BASE)
    regs.reg("SDP", "D_DST_LINE_STRIDE", oline)
    regs.reg("SDP", "D_DST_SURFACE_STRIDE", osurf)
    regs.reg("SDP", "D_DST_DMA_CFG", 1)
    for stage in ("BS", "BN", "EW"):
        regs.reg("SDP", f"D_DP_{stage}_CFG", 1)
    regs.reg("SDP", "D_FEATURE_MODE_CFG", FLYING_MODE=1)
    regs.reg("SDP", "D_DATA_FORMAT", PROC_PRECISION=proc, OUT_PRECISION=proc)
    off, scale, shift = layer.out_cvt
    regs.reg("SDP", "D_CVT_OFFSET", off & 0xFFFFFFFF)
    regs.reg("SDP", "D_CVT_SCALE", scale & 0xFFFF)
    regs.reg("SDP", "D_CVT_SHIFT", shift)
    # Enable order of NVDLA's firmware: SDP, then CACC, CMAC_A, CMAC_B, CSC, CDMA.
    for unit in ("SDP", "CACC", "CMAC_A", "CMAC_B", "CSC", "CDMA"):
        regs.reg(unit, "D_OP_ENABLE", 1)
    p.extend(regs)
    return p
