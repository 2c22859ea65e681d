"""Image (pixel) input of the conv pipeline: CDMA ``DATAIN_FORMAT=PIXEL`` and the CSC's channel extension.

What the hardware does (cmod ``cmod/cdma/NV_NVDLA_cdma.cpp`` ``ImageConvData{Request,Response}SequencerCommon``,
``process_one_element_{8,16}``, ``hls_convertor``; ``cmod/csc/NV_NVDLA_csc.cpp``
``SendImageDataToMacSequencerConvCommon`` / ``csc_read_one_image_entry``; both branches, nv_small and nvdlav1):

* **Fetch.** Line h of plane 0 starts at ``DAIN_ADDR_0 + h * LINE_STRIDE`` (pitch linear; PIXEL_MAPPING 1 is
  reserved). Pixel j of the cube is pixel ``PIXEL_X_OFFSET + j`` of that line. A semi-planar format has a second
  plane of interleaved chroma at ``DAIN_ADDR_1 + h * LINE_UV_STRIDE``; its base points at the atom holding the
  first needed chroma pair, so pixel j's pair is pair ``(PIXEL_X_OFFSET mod pairs_per_atom) + j`` there.
  ``PIXEL_Y_OFFSET`` must be 0 (an RTL assertion; the cmod ignores it).
* **Lanes.** Each pixel becomes ``element_num`` lanes in R, G, B, A (Y, U, V, A) order, whatever the memory
  order: ``PIXEL_FORMATS`` below lists, per format, which memory element (or which bit field of a packed
  32-bit word) feeds each lane. 10-bit packed fields are left-aligned to 16 bits, 2-bit alpha likewise.
* **Conversion.** With ``CVT_EN``: ``sat_out(sat17(rha((p - m) * CVT_SCALE, CVT_TRUNCATE)))`` where p is the
  lane zero-extended, or sign-extended when ``PIXEL_SIGN_OVERRIDE=SIGNED_INT``, and m is ``MEAN_RY/GU/BV/AX`` of
  the lane when ``MEAN_FORMAT=ENABLE``, else ``CVT_OFFSET`` (both signed 16 bits). Without CVT the raw lane
  bits pass unchanged (the mean is ignored), reinterpreted as signed by the MACs.
* **Left/right padding** is inserted by the CDMA: ``PAD_LEFT``/``PAD_RIGHT`` pixels of the raw low byte (int8;
  low 16 bits for int16) of ``CDMA.D_ZERO_PADDING_VALUE``, never converted. Each line then is a flat run of
  ``(PAD_LEFT + W + PAD_RIGHT) * element_num`` elements in the CBUF, ``D_ENTRY_PER_SLICE`` entries long.
* **Channel extension.** The CSC sees each line as a cube of width 1: output column ``ox`` multiplies the
  ``WEIGHT_CHANNEL_EXT + 1`` consecutive elements starting at element ``ox * CONV_X_STRIDE * C`` (C =
  ``DATAIN_CHANNEL_EXT + 1``) with a kernel of width 1 (``WEIGHT_WIDTH_EXT`` must be 0), so a kernel column s,
  channel c is extended channel ``s * C + c`` (the compiler's "pre channel extension",
  ``WeightTranslationUnit::preChnlExtWtsForIMG``). Rows are ``oy * CONV_Y_STRIDE + r - PAD_TOP`` of the CSC;
  rows outside the cube read the raw CSC pad value in every lane. Dilation does not exist here.
* **Post Y extension** (``CSC.D_POST_Y_EXTENSION``, P = 2^Y_EXTENSION of 1, 2, 4) packs P kernel rows into one
  MAC atom: lane block i of an atom holds row ``P*j + i``. It needs the extended channels in one block
  (``C' <= atomic C / P``) and changes only the weight order (below), not the arithmetic.
* **Weights** are the direct-conv layout of a (K, C', R, 1) kernel. With P > 1 a kernel group's bytes are,
  outermost first, row block j, kernel, row in block, channel (``SendWeightToMacSequencerDirectConvCommon``
  post-extension strides; the compiler's ``prepWtTrnsOpsForIMGPostCE`` writes the same order).

Precisions: PROC_PRECISION (CDMA, CSC, CMAC_A/B, CACC) is the datapath, int8 everywhere or int16 on nv_full.
IN_PRECISION of the CDMA is the lane width of the pixel format (INT8 for 8-bit lanes, INT16 for 16-bit and
packed 10-bit lanes); a lane width different from the datapath needs ``CVT_EN`` (the cmod writes the CBUF in
the wrong element size otherwise). 16-bit pixel formats exist only where the config has an int16 datapath (the
nv_small RTL compiles them out); fp16 pixels raise UnsupportedError.

The arithmetic after the CSC is the direct convolution of ``golden.engines.conv_datapath`` on the extended
cube, so it inherits its exactness argument and its CACC output stage.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from golden.arith import sign_extend
from golden.config import HwConfig
from golden.dma import DATA_FORMATS, conv_precisions, dma_address, dma_bytes, ram_space
from golden.engines import OpContext
from golden.engines.conv_datapath import (
    BPE,
    ConvGeometry,
    cacc_cube,
    cbuf_geometry,
    cdma_convert,
    check_clip_truncate,
    weight_byte_offsets,
)
from golden.errors import UnsupportedError
from golden.memory import AddressSpace
from golden.regs import RegValue, RegView

#: D_MISC_CFG precision encodings.
_PRECISIONS = DATA_FORMATS


# ---- pixel formats ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class PixelFormat:
    """How one PIXEL_FORMAT is laid out in memory and unpacked into lanes."""

    name: str
    #: Bytes per pixel in plane 0 and in the chroma plane (0: no second plane).
    bpp0: int
    bpp1: int = 0
    #: Width of the raw memory elements: 8 or 16 bits (packed 10-bit formats are read as 32-bit words).
    bits: int = 8
    #: Memory element (plane 0 elements first, then plane 1's) feeding each lane, R/Y first.
    order: tuple[int, ...] = (0,)
    #: Packed 32-bit formats: (lsb, width) of each lane's field; the field is left-aligned to 16 bits.
    fields: tuple[tuple[int, int], ...] = ()
    fp16: bool = False

    @property
    def lanes(self) -> int:
        """``element_num``: lanes each pixel occupies in the CBUF."""
        return len(self.fields) if self.fields else len(self.order)

    @property
    def lane_bits(self) -> int:
        """Width of a lane before conversion (IN_PRECISION must say this)."""
        return 16 if self.fields else self.bits


def _fmt(name: str, **kw: object) -> PixelFormat:
    return PixelFormat(name, **kw)  # type: ignore[arg-type]


_RGBA, _ARGB, _BGRA, _RGBA_REV = (0, 1, 2, 3), (2, 1, 0, 3), (1, 2, 3, 0), (3, 2, 1, 0)
_F_ABGR = ((0, 10), (10, 10), (20, 10), (30, 2))  # A2B10G10R10: R in bits 9:0
_F_ARGB = ((20, 10), (10, 10), (0, 10), (30, 2))  # A2R10G10B10, A2Y10U10V10
_F_BGRA = ((2, 10), (12, 10), (22, 10), (0, 2))   # B10G10R10A2, V10U10Y10A2
_F_RGBA = ((22, 10), (12, 10), (2, 10), (0, 2))   # R10G10B10A2

#: PIXEL_FORMAT code -> format (RDL enum of CDMA.D_DATAIN_FORMAT.PIXEL_FORMAT; orders from the cmod's
#: ``rgba_idx`` per format, NVDLA_NOTES §3 table).
PIXEL_FORMATS: dict[int, PixelFormat] = {
    0: _fmt("T_R8", bpp0=1),
    1: _fmt("T_R10", bpp0=2, bits=16),
    2: _fmt("T_R12", bpp0=2, bits=16),
    3: _fmt("T_R16", bpp0=2, bits=16),
    4: _fmt("T_R16_I", bpp0=2, bits=16),
    5: _fmt("T_R16_F", bpp0=2, bits=16, fp16=True),
    6: _fmt("T_A16B16G16R16", bpp0=8, bits=16, order=_RGBA),
    7: _fmt("T_X16B16G16R16", bpp0=8, bits=16, order=_RGBA),
    8: _fmt("T_A16B16G16R16_F", bpp0=8, bits=16, order=_RGBA, fp16=True),
    9: _fmt("T_A16Y16U16V16", bpp0=8, bits=16, order=_ARGB),
    10: _fmt("T_V16U16Y16A16", bpp0=8, bits=16, order=_BGRA),
    11: _fmt("T_A16Y16U16V16_F", bpp0=8, bits=16, order=_ARGB, fp16=True),
    12: _fmt("T_A8B8G8R8", bpp0=4, order=_RGBA),
    13: _fmt("T_A8R8G8B8", bpp0=4, order=_ARGB),
    14: _fmt("T_B8G8R8A8", bpp0=4, order=_BGRA),
    15: _fmt("T_R8G8B8A8", bpp0=4, order=_RGBA_REV),
    16: _fmt("T_X8B8G8R8", bpp0=4, order=_RGBA),
    17: _fmt("T_X8R8G8B8", bpp0=4, order=_ARGB),
    18: _fmt("T_B8G8R8X8", bpp0=4, order=_BGRA),
    19: _fmt("T_R8G8B8X8", bpp0=4, order=_RGBA_REV),
    20: _fmt("T_A2B10G10R10", bpp0=4, fields=_F_ABGR),
    21: _fmt("T_A2R10G10B10", bpp0=4, fields=_F_ARGB),
    22: _fmt("T_B10G10R10A2", bpp0=4, fields=_F_BGRA),
    23: _fmt("T_R10G10B10A2", bpp0=4, fields=_F_RGBA),
    24: _fmt("T_A2Y10U10V10", bpp0=4, fields=_F_ARGB),
    25: _fmt("T_V10U10Y10A2", bpp0=4, fields=_F_BGRA),
    26: _fmt("T_A8Y8U8V8", bpp0=4, order=_ARGB),
    27: _fmt("T_V8U8Y8A8", bpp0=4, order=_BGRA),
    28: _fmt("T_Y8___U8V8_N444", bpp0=1, bpp1=2, order=(0, 2, 1)),
    29: _fmt("T_Y8___V8U8_N444", bpp0=1, bpp1=2, order=(0, 1, 2)),
    30: _fmt("T_Y10___U10V10_N444", bpp0=2, bpp1=4, bits=16, order=(0, 2, 1)),
    31: _fmt("T_Y10___V10U10_N444", bpp0=2, bpp1=4, bits=16, order=(0, 1, 2)),
    32: _fmt("T_Y12___U12V12_N444", bpp0=2, bpp1=4, bits=16, order=(0, 2, 1)),
    33: _fmt("T_Y12___V12U12_N444", bpp0=2, bpp1=4, bits=16, order=(0, 1, 2)),
    34: _fmt("T_Y16___U16V16_N444", bpp0=2, bpp1=4, bits=16, order=(0, 2, 1)),
    35: _fmt("T_Y16___V16U16_N444", bpp0=2, bpp1=4, bits=16, order=(0, 1, 2)),
}


def supported_formats(hw: HwConfig) -> list[int]:
    """PIXEL_FORMAT codes ``hw`` fetches: 8-bit lanes everywhere, 16-bit lanes with an int16 datapath; no fp16."""
    return [code for code, f in PIXEL_FORMATS.items()
            if not f.fp16 and (f.lane_bits == 8 or hw.supports("int16"))]


# ---- the decoded operation ----------------------------------------------------------------------------
@dataclass(frozen=True)
class ImageConv:
    """One image-input convolution, everything the registers say after the legality checks."""

    fmt: PixelFormat
    width: int  # W: pixels per line (cube width)
    height: int  # H
    x_offset: int
    line_stride: int
    uv_line_stride: int
    pad_left: int  # CDMA padding, pixels
    pad_right: int
    cdma_pad: int  # raw CDMA pad value, sign-extended to the datapath width
    signed: bool  # PIXEL_SIGN_OVERRIDE
    cvt: tuple[int, int, int] | None  # (CVT_OFFSET, CVT_SCALE, CVT_TRUNCATE) when CVT_EN
    means: tuple[int, int, int, int] | None  # MEAN_RY/GU/BV/AX when MEAN_FORMAT=ENABLE
    post_y: int  # P = 2 ** Y_EXTENSION
    x_stride: int  # CSC CONV_X_STRIDE_EXT + 1, in pixels
    #: The convolution the CSC performs on the extended cube (channels = C', width = output width).
    geometry: ConvGeometry

    @property
    def padded_width(self) -> int:
        return self.pad_left + self.width + self.pad_right


def _precisions(regs: dict[str, RegView]) -> tuple[str, str]:
    """(datapath, CDMA input) precision names; every unit's PROC_PRECISION (and CSC's IN_PRECISION) must agree."""
    cdma = regs["CDMA"].D_MISC_CFG
    found: list[tuple[str, RegValue, str]] = []
    found += [(dtype, misc, name) for dtype, misc, name, _ in conv_precisions(regs, with_input=("CSC",))]
    if cdma.IN_PRECISION not in _PRECISIONS:
        raise cdma.fail("IN_PRECISION", f"reserved precision encoding {cdma.IN_PRECISION}")
    proc, first, first_name = found[0]
    for other, misc, name in found[1:]:
        if other != proc:
            raise misc.fail(name, f"{other} differs from {first.where(first_name)}={proc} (image input)")
    if proc == "fp16":
        raise UnsupportedError("FP16", "fp16 image convolution is not modelled (int8/int16 only)")
    return proc, _PRECISIONS[cdma.IN_PRECISION]


def decode(regs: dict[str, RegView], hw: HwConfig) -> ImageConv:
    """The image convolution the registers program, after the checks the cmod (and RTL assertions) make."""
    cdma, csc, cacc = regs["CDMA"], regs["CSC"], regs["CACC"]
    fmt_reg = cdma.D_DATAIN_FORMAT
    if csc.D_DATAIN_FORMAT.DATAIN_FORMAT != fmt_reg.DATAIN_FORMAT:
        raise csc.D_DATAIN_FORMAT.fail("DATAIN_FORMAT", f"CSC says {csc.D_DATAIN_FORMAT.DATAIN_FORMAT}, CDMA "
                                       f"{fmt_reg.DATAIN_FORMAT} (both must be PIXEL for image input)")
    for unit in ("CDMA", "CSC", "CMAC_A", "CMAC_B", "CACC"):
        misc = regs[unit].D_MISC_CFG
        if misc.CONV_MODE != 0:
            raise misc.fail("CONV_MODE", "image input is direct convolution only (the cmod FAILs on Winograd)")
    for unit in ("CDMA", "CSC", "CACC"):
        batches = regs[unit].D_BATCH_NUMBER
        if batches.BATCHES:
            raise batches.fail("BATCHES", f"{batches.BATCHES}: image input has no batch mode (cmod FAIL)")
    if cdma.D_WEIGHT_FORMAT.WEIGHT_FORMAT or csc.D_WEIGHT_FORMAT.WEIGHT_FORMAT:
        raise UnsupportedError("CDMA", "compressed weights with image input are not modelled")

    code = fmt_reg.PIXEL_FORMAT
    if code not in PIXEL_FORMATS:
        raise fmt_reg.fail("PIXEL_FORMAT", f"reserved pixel format {code}")
    fmt = PIXEL_FORMATS[code]
    if fmt.fp16:
        raise UnsupportedError("FP16", f"PIXEL_FORMAT={fmt.name}: fp16 pixels are not modelled")
    if fmt.lane_bits == 16 and not hw.supports("int16"):
        raise UnsupportedError("INT16", f"PIXEL_FORMAT={fmt.name} has 16-bit lanes; {hw.name} fetches 8-bit "
                               "pixels only")
    if fmt_reg.PIXEL_MAPPING != 0:
        raise fmt_reg.fail("PIXEL_MAPPING", "only PITCH_LINEAR (0) is defined")
    proc, inp = _precisions(regs)
    if not hw.supports(proc):  # type: ignore[arg-type]
        raise UnsupportedError(proc.upper(), f"PROC_PRECISION={proc.upper()} but {hw.name} has no {proc} datapath")
    lane_prec = "int16" if fmt.lane_bits == 16 else "int8"
    if inp != lane_prec:
        raise cdma.D_MISC_CFG.fail("IN_PRECISION", f"{inp.upper()}, but {fmt.name} has {fmt.lane_bits}-bit lanes "
                                   f"({lane_prec.upper()})")
    cvt_cfg = cdma.D_CVT_CFG
    if lane_prec != proc and not cvt_cfg.CVT_EN:
        raise cvt_cfg.fail("CVT_EN", f"{fmt.lane_bits}-bit pixels reach the {proc} datapath only through the CDMA "
                           "converter")
    bpe = BPE[proc]  # int8 or int16: _precisions refuses fp16

    # Cube and fetch.
    W = cdma.D_DATAIN_SIZE_0.DATAIN_WIDTH + 1
    H = cdma.D_DATAIN_SIZE_0.DATAIN_HEIGHT + 1
    E = fmt.lanes
    if cdma.D_DATAIN_SIZE_1.DATAIN_CHANNEL + 1 != E:
        raise cdma.D_DATAIN_SIZE_1.fail("DATAIN_CHANNEL", f"must be {E - 1}: {fmt.name} stores {E} lanes per pixel")
    ext0, ext1 = csc.D_DATAIN_SIZE_EXT_0, csc.D_DATAIN_SIZE_EXT_1
    if ext1.DATAIN_CHANNEL_EXT + 1 != E:
        raise ext1.fail("DATAIN_CHANNEL_EXT", f"must be {E - 1}: the CSC steps {E} lanes per pixel of {fmt.name}")
    if (ext0.DATAIN_WIDTH_EXT + 1, ext0.DATAIN_HEIGHT_EXT + 1) != (W, H):
        raise ext0.fail("DATAIN_WIDTH_EXT", f"CSC input {ext0.DATAIN_WIDTH_EXT + 1}x{ext0.DATAIN_HEIGHT_EXT + 1} "
                        f"differs from the {W}x{H} image CDMA loads")
    offset = cdma.D_PIXEL_OFFSET
    if offset.PIXEL_Y_OFFSET:
        raise offset.fail("PIXEL_Y_OFFSET", "must be 0 (RTL assertion; pitch-linear lines start at the line stride)")
    atom_bytes = hw.memory_atomic_size
    x_off = offset.PIXEL_X_OFFSET
    if x_off >= atom_bytes // fmt.bpp0:
        raise offset.fail("PIXEL_X_OFFSET", f"{x_off} is not inside the first {atom_bytes}-byte atom "
                          f"({atom_bytes // fmt.bpp0} pixels of {fmt.name})")
    line_stride = dma_bytes(hw, cdma.D_LINE_STRIDE.LINE_STRIDE)
    if line_stride % atom_bytes:
        raise cdma.D_LINE_STRIDE.fail("LINE_STRIDE", f"{line_stride} is not a multiple of the {atom_bytes}-byte atom")
    if (x_off + W) * fmt.bpp0 > line_stride:
        raise cdma.D_LINE_STRIDE.fail("LINE_STRIDE", f"{line_stride} is shorter than the {(x_off + W) * fmt.bpp0} "
                                      "bytes fetched per line (cmod FAIL)")
    uv_stride = 0
    if fmt.bpp1:
        uv_stride = dma_bytes(hw, cdma.D_LINE_UV_STRIDE.UV_LINE_STRIDE)
        pairs = atom_bytes // fmt.bpp1
        if uv_stride % atom_bytes:
            raise cdma.D_LINE_UV_STRIDE.fail("UV_LINE_STRIDE", f"{uv_stride} is not a multiple of the atom")
        if (x_off % pairs + W) * fmt.bpp1 > uv_stride:
            raise cdma.D_LINE_UV_STRIDE.fail("UV_LINE_STRIDE", f"{uv_stride} is shorter than the "
                                             f"{(x_off % pairs + W) * fmt.bpp1} chroma bytes fetched per line")
    for suffix in ("_0", "_1") if fmt.bpp1 else ("_0",):
        addr = dma_address(hw, cdma, "D_DAIN_ADDR", suffix)
        if addr % atom_bytes:
            raise getattr(cdma, f"D_DAIN_ADDR_LOW{suffix}").fail(
                f"DATAIN_ADDR_LOW{suffix}", f"{addr:#x} is not aligned to the {atom_bytes}-byte atom")
    pad = cdma.D_ZERO_PADDING
    Wp = pad.PAD_LEFT + W + pad.PAD_RIGHT

    # CBUF: each padded line is a flat run of entries; the whole image must fit the data banks.
    entry_bytes, bank_depth = cbuf_geometry(hw, bpe)
    eps = -(-Wp * E * bpe // entry_bytes)
    for unit in ("CDMA", "CSC"):
        reg = regs[unit].D_ENTRY_PER_SLICE
        if reg.ENTRIES + 1 != eps:
            raise reg.fail("ENTRIES", f"must be {eps - 1} ({eps} CBUF entries per {Wp}-pixel padded line of {E} lanes)")
    bank = cdma.D_BANK
    if bank.DATA_BANK + bank.WEIGHT_BANK + 2 > hw.cbuf_bank_number:
        raise bank.fail("WEIGHT_BANK", f"data + weight banks exceed the {hw.cbuf_bank_number} CBUF banks")
    if H * eps > (bank.DATA_BANK + 1) * bank_depth:
        raise bank.fail("DATA_BANK", f"the {W}x{H} image needs {H * eps} CBUF entries, {bank.DATA_BANK + 1} banks "
                        f"hold {(bank.DATA_BANK + 1) * bank_depth}")
    if int(csc.D_BANK) != int(bank):
        raise csc.D_BANK.fail("DATA_BANK", "CSC bank split differs from CDMA's")

    # Kernel after channel extension.
    wext0, wext1 = csc.D_WEIGHT_SIZE_EXT_0, csc.D_WEIGHT_SIZE_EXT_1
    if wext0.WEIGHT_WIDTH_EXT != 0:
        raise wext0.fail("WEIGHT_WIDTH_EXT", "must be 0: image kernels are extended into channels (cmod FAIL)")
    R, Cx, K = wext0.WEIGHT_HEIGHT_EXT + 1, wext1.WEIGHT_CHANNEL_EXT + 1, wext1.WEIGHT_KERNEL + 1
    if cdma.D_WEIGHT_SIZE_1.WEIGHT_KERNEL + 1 != K:
        raise cdma.D_WEIGHT_SIZE_1.fail("WEIGHT_KERNEL", f"CDMA fetches {cdma.D_WEIGHT_SIZE_1.WEIGHT_KERNEL + 1} "
                                        f"kernels, CSC uses {K}")
    if cdma.D_WEIGHT_SIZE_0.BYTE_PER_KERNEL + 1 != R * Cx * bpe:
        raise cdma.D_WEIGHT_SIZE_0.fail("BYTE_PER_KERNEL", f"must be R*C'*{bpe} - 1 = {R * Cx * bpe - 1} for {R} rows "
                                        f"of {Cx} extended channels")
    y_ext = csc.D_POST_Y_EXTENSION.Y_EXTENSION
    if y_ext > 2:
        raise csc.D_POST_Y_EXTENSION.fail("Y_EXTENSION", f"{y_ext}: the extension is 2**Y_EXTENSION with 0..2")
    post_y = 1 << y_ext
    if post_y > 1 and Cx > hw.mac_atomic_c // post_y:
        raise csc.D_POST_Y_EXTENSION.fail("Y_EXTENSION", f"{post_y} rows per atom need C' <= "
                                          f"{hw.mac_atomic_c // post_y}, not {Cx} (cmod FAIL)")
    dil = csc.D_DILATION_EXT
    if dil.X_DILATION_EXT or dil.Y_DILATION_EXT:
        raise UnsupportedError("CSC", "dilation with image input: the cmod ignores D_DILATION_EXT there, the RTL is "
                               "unverified")

    # Output.
    for unit, reg in (("CSC", csc.D_DATAOUT_SIZE_1), ("CACC", cacc.D_DATAOUT_SIZE_1)):
        if reg.DATAOUT_CHANNEL + 1 != K:
            raise reg.fail("DATAOUT_CHANNEL", f"{unit} output channels {reg.DATAOUT_CHANNEL + 1} != {K} kernels")
    out0, cacc_out = csc.D_DATAOUT_SIZE_0, cacc.D_DATAOUT_SIZE_0
    OW, OH = out0.DATAOUT_WIDTH + 1, out0.DATAOUT_HEIGHT + 1
    if (cacc_out.DATAOUT_WIDTH + 1, cacc_out.DATAOUT_HEIGHT + 1) != (OW, OH):
        raise cacc_out.fail("DATAOUT_WIDTH", f"CACC output {cacc_out.DATAOUT_WIDTH + 1}x{cacc_out.DATAOUT_HEIGHT + 1} "
                            f"differs from CSC's {OW}x{OH}")
    if csc.D_ATOMICS.ATOMICS + 1 != OH * OW:
        raise csc.D_ATOMICS.fail("ATOMICS", f"must be OW*OH - 1 = {OH * OW - 1} output atoms")
    sx = csc.D_CONV_STRIDE_EXT.CONV_X_STRIDE_EXT + 1
    if (OW - 1) * sx * E + Cx > Wp * E:
        raise UnsupportedError("CSC", f"output column {OW - 1} reads past the {Wp}-pixel padded line ({Cx} extended "
                               f"channels at stride {sx}); the cmod reads fetch leftovers there")
    check_clip_truncate(cacc)

    # Weight fetch (as direct conv).
    wbytes = cdma.D_WEIGHT_BYTES.WEIGHT_BYTES
    if wbytes < K * R * Cx * bpe:
        raise cdma.D_WEIGHT_BYTES.fail("WEIGHT_BYTES", f"{wbytes} is less than the {K * R * Cx * bpe} bytes of {K} "
                                       f"kernels of {R}x{Cx}")
    if wbytes % hw.cbuf_bank_width:
        raise cdma.D_WEIGHT_BYTES.fail("WEIGHT_BYTES", f"{wbytes} is not a multiple of the CBUF width "
                                       f"({hw.cbuf_bank_width} B)")
    if csc.D_WEIGHT_BYTES.WEIGHT_BYTES != wbytes:
        raise csc.D_WEIGHT_BYTES.fail("WEIGHT_BYTES", f"CSC says {csc.D_WEIGHT_BYTES.WEIGHT_BYTES}, CDMA fetches "
                                      f"{wbytes}")
    if cdma.D_MISC_CFG.SKIP_WEIGHT_RLS and wbytes > (bank.WEIGHT_BANK + 1) * hw.cbuf_bank_depth * hw.cbuf_bank_width:
        raise cdma.D_MISC_CFG.fail("SKIP_WEIGHT_RLS", "weights kept for reuse must fit the weight banks")

    bits = 8 * bpe
    cvt = None
    if cvt_cfg.CVT_EN:
        cvt = (cdma.D_CVT_OFFSET.signed("CVT_OFFSET"), cdma.D_CVT_SCALE.signed("CVT_SCALE"), cvt_cfg.CVT_TRUNCATE)
    means = None
    if cdma.D_MEAN_FORMAT.MEAN_FORMAT:
        g0, g1 = cdma.D_MEAN_GLOBAL_0, cdma.D_MEAN_GLOBAL_1
        means = (g0.signed("MEAN_RY"), g0.signed("MEAN_GU"), g1.signed("MEAN_BV"), g1.signed("MEAN_AX"))
    geometry = ConvGeometry(
        channels=Cx, height=H, width=OW, kernels=K, kernel_height=R, kernel_width=1, out_height=OH, out_width=OW,
        stride_y=csc.D_CONV_STRIDE_EXT.CONV_Y_STRIDE_EXT + 1, stride_x=1,
        pad_top=csc.D_ZERO_PADDING.PAD_TOP, pad_left=0,
        pad_value=int(sign_extend(csc.D_ZERO_PADDING_VALUE.PAD_VALUE, bits)), dtype=proc,
    )
    return ImageConv(
        fmt=fmt, width=W, height=H, x_offset=x_off, line_stride=line_stride, uv_line_stride=uv_stride,
        pad_left=pad.PAD_LEFT, pad_right=pad.PAD_RIGHT,
        cdma_pad=int(sign_extend(cdma.D_ZERO_PADDING_VALUE.PAD_VALUE, bits)),
        signed=bool(fmt_reg.PIXEL_SIGN_OVERRIDE), cvt=cvt, means=means, post_y=post_y, x_stride=sx,
        geometry=geometry,
    )


# ---- fetch and conversion -------------------------------------------------------------------------------
def _plane(space: AddressSpace, base: int, lines: int, stride: int, first: int, pixels: int, bpp: int) -> np.ndarray:
    """Bytes (lines, pixels, bpp) of pixels ``first .. first + pixels - 1`` of every line."""
    off = (np.arange(lines, dtype=np.int64)[:, None, None] * stride
           + (first + np.arange(pixels, dtype=np.int64))[None, :, None] * bpp
           + np.arange(bpp, dtype=np.int64)[None, None, :])
    return space.gather(base, off)


def _elements(raw: np.ndarray, bits: int) -> np.ndarray:
    """Little-endian ``bits``-bit unsigned elements of the last axis of a byte array."""
    v = raw.astype(np.int64)
    if bits == 8:
        return v
    return v[..., 0::2] | (v[..., 1::2] << 8)


def pixel_lanes(fmt: PixelFormat, plane0: np.ndarray, plane1: np.ndarray | None) -> np.ndarray:
    """Raw unsigned lanes (lanes, H, W) from plane bytes (H, W, bpp0) and (H, W, bpp1)."""
    if fmt.fields:
        v = plane0.astype(np.int64)
        word = v[..., 0] | (v[..., 1] << 8) | (v[..., 2] << 16) | (v[..., 3] << 24)
        lanes = [((word >> lsb) & ((1 << width) - 1)) << (16 - width) for lsb, width in fmt.fields]
        return np.stack(lanes)
    elems = _elements(plane0, fmt.bits)
    if plane1 is not None:
        elems = np.concatenate([elems, _elements(plane1, fmt.bits)], axis=-1)
    return np.moveaxis(elems[..., list(fmt.order)], -1, 0)


def convert(lanes: np.ndarray, op: ImageConv, bits: int) -> np.ndarray:
    """The CDMA pixel conversion of raw lanes (lanes, H, W) to the ``bits``-wide datapath."""
    lane_bits = op.fmt.lane_bits
    if op.cvt is None:
        return np.asarray(sign_extend(lanes, bits), dtype=np.int64)  # raw bits, same width (checked)
    x = sign_extend(lanes, lane_bits) if op.signed else lanes
    offset, scale, truncate = op.cvt
    if op.means is None:
        mean: np.ndarray | int = offset
    else:
        mean = np.asarray(op.means[: lanes.shape[0]], dtype=np.int64)[:, None, None]
    return cdma_convert(np.asarray(x, dtype=np.int64) - mean, 0, scale, truncate, bits)


def fetch(ctx: OpContext, op: ImageConv) -> np.ndarray:
    """The converted, CDMA-padded image (lanes, H, pad_left + W + pad_right) the CBUF holds."""
    cdma, hw = ctx.regs["CDMA"], ctx.hw
    fmt = op.fmt
    space = ram_space(hw, ctx.mem, cdma.D_DAIN_RAM_TYPE, "DATAIN_RAM_TYPE")
    p0 = _plane(space, dma_address(hw, cdma, "D_DAIN_ADDR", "_0"), op.height, op.line_stride, op.x_offset,
                op.width, fmt.bpp0)
    p1 = None
    if fmt.bpp1:
        first = op.x_offset % (hw.memory_atomic_size // fmt.bpp1)
        p1 = _plane(space, dma_address(hw, cdma, "D_DAIN_ADDR", "_1"), op.height, op.uv_line_stride, first,
                    op.width, fmt.bpp1)
    bits = 8 * op.geometry.bpe
    x = convert(pixel_lanes(fmt, p0, p1), op, bits)
    out = np.full((fmt.lanes, op.height, op.padded_width), op.cdma_pad, dtype=np.int64)
    out[:, :, op.pad_left : op.pad_left + op.width] = x
    return out


def extend(image: np.ndarray, op: ImageConv) -> np.ndarray:
    """The cube the CSC convolves: (C', H, OW) with ``X[c', h, ox]`` = element ``ox*Sx*E + c'`` of padded line h."""
    lanes, height, padded = image.shape
    line = image.transpose(1, 2, 0).reshape(height, padded * lanes)  # pixel-major, lanes inside
    g = op.geometry
    idx = np.arange(g.out_width, dtype=np.int64)[:, None] * (op.x_stride * lanes) + np.arange(g.channels)[None, :]
    return np.ascontiguousarray(line[:, idx].transpose(2, 0, 1))


# ---- weights ------------------------------------------------------------------------------------------
def image_weight_offsets(kernels: int, channels: int, rows: int, kernel_group: int, channel_group: int,
                         post_y: int) -> np.ndarray:
    """Element offset of extended weight ``w[k, c', r]``, shape (K, C', R).

    P = 1 is the direct-conv order of a (K, C', R, 1) kernel. P > 1 (one channel block, C' <= atomic C / P):
    per kernel group, row block j = r // P, then kernel, then row in the block, then channel; the last block
    holds only R mod P rows (cmod post-extension weight strides).
    """
    if post_y == 1:
        return weight_byte_offsets(kernels, channels, rows, 1, kernel_group, channel_group)[..., 0]
    k = np.arange(kernels, dtype=np.int64)[:, None, None]
    c = np.arange(channels, dtype=np.int64)[None, :, None]
    r = np.arange(rows, dtype=np.int64)[None, None, :]
    group, k_in = k // kernel_group, k % kernel_group
    k_size = np.minimum(kernel_group, kernels - group * kernel_group)
    block, r_in = r // post_y, r % post_y
    block_rows = np.minimum(post_y, rows - block * post_y)
    return (group * (kernel_group * rows * channels) + block * (post_y * channels * k_size)
            + k_in * (block_rows * channels) + r_in * channels + c)


def read_weights(ctx: OpContext, op: ImageConv) -> np.ndarray:
    """Extended weights as (K, C', R, 1) int64."""
    cdma, hw, g = ctx.regs["CDMA"], ctx.hw, op.geometry
    group = hw.mac_atomic_k_for(g.dtype)  # type: ignore[arg-type]
    offsets = image_weight_offsets(g.kernels, g.channels, g.kernel_height, group, hw.mac_atomic_c, op.post_y)
    n = g.kernels * g.channels * g.kernel_height
    space = ram_space(hw, ctx.mem, cdma.D_WEIGHT_RAM_TYPE, "WEIGHT_RAM_TYPE")
    raw = space.read(dma_address(hw, cdma, "D_WEIGHT_ADDR"), n * g.bpe)
    elements = raw.view(np.int8) if g.bpe == 1 else np.ascontiguousarray(raw).view("<i2")
    return elements[offsets].astype(np.int64)[..., None]


def run(ctx: OpContext) -> np.ndarray:
    """One image convolution; returns the CACC cube (K padded to the atom, OH, OW) int64 for SDP."""
    op = decode(dict(ctx.regs), ctx.hw)
    clip = ctx.regs["CACC"].D_CLIP_CFG.CLIP_TRUNCATE
    out, saturated = cacc_cube(ctx.hw, extend(fetch(ctx, op), op), read_weights(ctx, op), op.geometry, clip)
    ctx.report("CACC", "D_OUT_SATURATION", saturated)
    return out
