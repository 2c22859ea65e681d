"""CONV: the direct-convolution pipeline CDMA -> CSC -> CMAC_A/B -> CACC (int8, int16 and fp16 feature input).

The five units run as one operation. CDMA fetches the feature cube (NVDLA_NOTES §3 feature layout) and the
weights, and applies its input conversion; CSC walks the output atoms, injecting its pad value for taps
outside the cube; CMAC forms int8 x int8 dot products over one MAC-atomic-C slice; CACC accumulates the
slices and kernel taps, truncates and saturates to 32 bits, and hands the cube to SDP on the fly.

Arithmetic (cmod ``cmod/{cdma,csc,cmac,cacc}``, NVDLA_NOTES §4):

* CDMA CVT (feature mode, ``CVT_EN``): ``sat8(sat17(rha((x - CVT_OFFSET) * CVT_SCALE, CVT_TRUNCATE)))``;
  the MEAN registers are ignored for feature input.
* CSC padding: out-of-cube taps take the **raw low byte** of ``CSC.D_ZERO_PADDING_VALUE`` as int8; it is not
  converted. Channels beyond DATAIN_CHANNEL (the lanes padding the last surface) are fed as 0.
* CMAC: int8 products summed per MAC-atomic-C slice into 22 bits. ``|slice| <= 64 * 2^14 = 2^20`` for the
  widest MAC (C=64), so the 22-bit sum never wraps.
* CACC: the slices accumulate with saturation at 48 bits, then ``sat32(rha(acc, CLIP_TRUNCATE))``.

Why plain float64 GEMM is bit exact here: every product is at most ``128 * 128 = 2^14`` in magnitude and a
sum runs over at most ``C * R * S <= 2^13 * 2^5 * 2^5 = 2^23`` products (field widths of DATAIN_CHANNEL,
WEIGHT_WIDTH_EXT, WEIGHT_HEIGHT_EXT), so every partial sum, in any order, stays below ``2^37``. That is an
exact integer in float64 (53-bit mantissa) and far below the 48-bit accumulator limit (``2^47``), so the
cmod's per-step 48-bit saturation can never fire for int8 and is not emulated. (The nv_small RTL keeps a
34-bit saturating accumulator instead; it could differ only for sums beyond ``2^33``, which need
``C * R * S > 2^19`` near-extreme products; the cmod is the reference, NVDLA_NOTES §4.)

Legality (``decode``): the cmod FAILs unless CDMA and CSC agree on the cube, the kernel and the CBUF split
(``D_ENTRY_PER_SLICE``, ``D_BANK``), LINE_PACKED matches the line stride, and the **whole input fits the CBUF
data banks** (no partial-input mode for direct conv); those raise ConfigError naming the field. Sizes, strides
and dilations are stored minus one, so no value of those fields is illegal on its own.

int16 (nv_full; cmod ``hw:nvdlav1:cmod``): every unit's IN/PROC_PRECISION must say INT16 (a precision change
needs CDMA's CVT_EN, the cmod FAILs otherwise; int8 <-> int16 changes raise UnsupportedError). Features are
2-byte little-endian, ``memory_atomic_size / 2`` channels per atom;
the CDMA CVT ends in ``sat16`` (``cdma_cvt.cpp``: ``IntSaturation<17,16>``); CSC pads with the raw low 16 bits
of D_ZERO_PADDING_VALUE (``NV_NVDLA_csc.cpp``); weights are 2 bytes each in the same order with kernel groups of
atomic K / 2 (``KERNEL_PER_GROUP_INT16`` = 16) and channel groups of MAC atomic C elements
(``ELEMENT_PER_INPUT_ATOM`` = 64); BYTE_PER_KERNEL and WEIGHT_BYTES count those bytes. CACC accumulates in
the same 48-bit saturating assembly and delivers ``sat32(rha(acc, CLIP_TRUNCATE))``. Products reach
``2^30``, so a sum of ``C*R*S`` of them is exact in float64 while ``C*R*S <= 2^23`` (always, by field
widths; an int64 path guards the bound anyway) and cannot touch the 48-bit saturation while
``sum |w*x| < 2^47``; beyond that the saturating order would matter and UnsupportedError is raised.
The nvdlav1 cmod counts CBUF entries of 128 bytes, 256 per bank (``cmod/cdma/NV_NVDLA_cdma.h``
CBUF_ENTRY_SIZE) for every precision, which is what its int16 traces program into D_ENTRY_PER_SLICE; nv_full
uses that geometry for int8, int16 and fp16 alike (see ``cbuf_geometry``).

fp16 (nv_full): ``decode`` checks it like int16 (2-byte elements, 16 per atom, the same weight order); the
arithmetic, which is the cmod's block-aligned integer CMAC and 48-bit float CACC with FP32 output, lives in
``golden.engines.conv_fp16``, and ``run`` returns its FP32 cube as ``np.float32``.

Kernels beyond WEIGHT_KERNEL in the last output surface (the padding lanes) have no weights; their MAC cells
stay disabled and CACC delivers 0 for them (checked against the nv_small dc_* trace CRCs).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from golden.arith import rha, sat, sign_extend
from golden.config import HwConfig
from golden.dma import CONV_UNITS, conv_precisions, dma_address, dma_bytes, ram_space
from golden.engines import Engine, OpContext, conv_wcomp, conv_winograd, register
from golden.errors import UnsupportedError
from golden.layout import CubeLayout, read_cube
from golden.memory import AddressSpace
from golden.regs import RegView

#: Largest im2col block (float64 elements) built at once; bigger convolutions are cut into row/tap blocks.
_IM2COL_LIMIT = 1 << 23

#: CACC assembles 48-bit sums and delivers 32 bits, so CLIP_TRUNCATE may drop at most 16 bits (cmod FAIL).
_CACC_MAX_TRUNCATE = 48 - 32
#: CACC's assembly accumulator saturates at 48 bits signed (cmod MAX_INT_48BITS).
_CACC_ASSEMBLY_LIMIT = 1 << 47

#: Precision field encodings of D_MISC_CFG (IN_PRECISION / PROC_PRECISION).
_PRECISIONS = {0: "int8", 1: "int16", 2: "fp16"}
#: Bytes per element.
_BPE = {"int8": 1, "int16": 2, "fp16": 2}


# ---- geometry -----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ConvGeometry:
    """The direct convolution as CSC sees it (all sizes are counts, not minus-one register values)."""

    channels: int  # C: input channels (= kernel channels)
    height: int  # input cube H
    width: int  # input cube W
    kernels: int  # K: output channels
    kernel_height: int  # R
    kernel_width: int  # S
    out_height: int
    out_width: int
    stride_y: int = 1
    stride_x: int = 1
    dilation_y: int = 1
    dilation_x: int = 1
    pad_top: int = 0
    pad_left: int = 0
    pad_value: int = 0  # int8 or int16, already sign-extended
    dtype: str = "int8"

    @property
    def bpe(self) -> int:
        return _BPE[self.dtype]

    @property
    def weight_bytes(self) -> int:
        """Bytes of the packed weights (no padding of partial groups)."""
        return self.kernels * self.channels * self.kernel_height * self.kernel_width * self.bpe


def cbuf_geometry(hw: HwConfig, bpe: int = 1) -> tuple[int, int]:
    """(bytes per CBUF entry, entries per bank) as CDMA/CSC count them.

    The precision does not matter (``bpe`` is kept for callers); the design does:

    * nv_full follows the nvdlav1 cmod, its reference: entries of four 32-byte atoms, 128 B, 256 per bank
      (``cmod/{cdma,csc,cbuf}`` CBUF_ENTRY_SIZE / CBUF_ENTRY_PER_BANK, fixed constants). CDMA and CSC count
      ``D_ENTRY_PER_SLICE`` as ``atoms // 4`` entries per pixel plus the packed remainder for **every**
      precision (``(C * bytes + 31) // 32`` atoms), so int8 uses 128-byte entries too, although nv_full's spec
      file lists 64 B x 512 for the same 32 KiB bank (NVDLA's compiler target table agrees: 16 x 256 x 128 B).
    * The nv_small-branch configs (nv_small, nv_small_256, nv_large, master's presets) size an entry by the
      spec's bank width (``ATOM_PER_CBUF_ENTRY_* = NVDLA_CBUF_BANK_WIDTH / ATOM_SIZE_*``).
    """
    if hw.address_map == "full":
        entry = 4 * hw.memory_atomic_size
        return entry, hw.cbuf_bank_width * hw.cbuf_bank_depth // entry
    return hw.cbuf_bank_width, hw.cbuf_bank_depth


def entries_per_slice(hw: HwConfig, channels: int, width: int, bpe: int = 1) -> int:
    """CBUF entries one input line (slice) occupies: the value CDMA/CSC ``D_ENTRY_PER_SLICE.ENTRIES + 1`` must
    hold (cmod ``DirectConvDataResponseSequencerCommon``). Whole entries carry ``bank_width / atom`` surfaces;
    a remainder of more than half an entry takes one entry per pixel, exactly half shares an entry between two
    pixels, a quarter between four."""
    atom_bytes = hw.memory_atomic_size
    atoms_per_entry = max(1, cbuf_geometry(hw, bpe)[0] // atom_bytes)
    atoms = -(-channels * bpe // atom_bytes)
    entries = (atoms // atoms_per_entry) * width
    cripple = atoms % atoms_per_entry
    if cripple:
        if 2 * cripple > atoms_per_entry:
            entries += width
        elif 2 * cripple == atoms_per_entry:
            entries += (width + 1) // 2
        elif 4 * cripple == atoms_per_entry:
            entries += (width + 3) // 4
    return entries


def data_banks_needed(hw: HwConfig, channels: int, height: int, width: int, bpe: int = 1) -> int:
    """CBUF banks the whole input cube occupies (``D_BANK.DATA_BANK + 1`` must be at least this). The conv
    pipeline holds the entire input in CBUF (the cmod FAILs otherwise); bigger layers must be split by the
    compiler, as NVDLA's own does."""
    return -(-height * entries_per_slice(hw, channels, width, bpe) // cbuf_geometry(hw, bpe)[1])


# ---- weights ------------------------------------------------------------------------------------------
def weight_byte_offsets(
    kernels: int, channels: int, kernel_height: int, kernel_width: int, kernel_group: int, channel_group: int
) -> np.ndarray:
    """Byte offset of weight ``w[k, c, r, s]`` in NVDLA's uncompressed direct-conv layout, shape (K, C, R, S).

    Outermost first: kernel group of ``kernel_group`` (atomic K) kernels, channel group of ``channel_group``
    (MAC atomic C) channels, r, s, kernel within the group, channel within the group. The last kernel group
    and the last channel group may be partial; nothing is padded (NVDLA_NOTES §3, cmod
    ``SendWeightToMacSequencerDirectConvCommon``).
    """
    k = np.arange(kernels, dtype=np.int64)[:, None, None, None]
    c = np.arange(channels, dtype=np.int64)[None, :, None, None]
    r = np.arange(kernel_height, dtype=np.int64)[None, None, :, None]
    s = np.arange(kernel_width, dtype=np.int64)[None, None, None, :]
    taps = kernel_height * kernel_width
    kgroup, k_in = k // kernel_group, k % kernel_group
    k_size = np.minimum(kernel_group, kernels - kgroup * kernel_group)  # kernels in this group
    cgroup, c_in = c // channel_group, c % channel_group
    c_size = np.minimum(channel_group, channels - cgroup * channel_group)  # channels in this group
    return (
        kgroup * (kernel_group * taps * channels)
        + cgroup * (channel_group * taps * k_size)
        + (r * kernel_width + s) * (c_size * k_size)
        + k_in * c_size
        + c_in
    )


def unpack_weights(raw: np.ndarray, geom: ConvGeometry, hw: HwConfig, dtype: str | None = None) -> np.ndarray:
    """Weight bytes (at least ``geom.weight_bytes``) -> int64 array (K, C, R, S).

    int16 weights are 2-byte little-endian elements in the int8 element order, with kernel groups of
    atomic K / 2 (the element offsets of ``weight_byte_offsets`` count elements, not bytes)."""
    dtype = dtype or geom.dtype
    offsets = weight_byte_offsets(
        geom.kernels, geom.channels, geom.kernel_height, geom.kernel_width,
        hw.mac_atomic_k_for(dtype), hw.mac_atomic_c,  # type: ignore[arg-type]
    )
    if dtype == "int8":
        return np.asarray(raw).view(np.int8)[offsets].astype(np.int64)
    n = geom.kernels * geom.channels * geom.kernel_height * geom.kernel_width
    elements = np.ascontiguousarray(np.asarray(raw, dtype=np.uint8)[: 2 * n]).view("<i2")
    return elements[offsets].astype(np.int64)


def pack_weights(weights: np.ndarray, hw: HwConfig, dtype: str = "int8") -> bytes:
    """Weights (K, C, R, S) -> packed bytes in NVDLA's direct-conv order (not rounded up)."""
    kernels, channels, kh, kw = weights.shape
    offsets = weight_byte_offsets(kernels, channels, kh, kw, hw.mac_atomic_k_for(dtype), hw.mac_atomic_c)  # type: ignore[arg-type]
    out = np.zeros(weights.size, dtype=np.int8 if dtype == "int8" else "<i2")
    out[offsets] = np.asarray(weights, dtype=np.int64).astype(out.dtype)
    return out.tobytes()


# ---- datapath -----------------------------------------------------------------------------------------
def cdma_convert(x: np.ndarray, offset: int, scale: int, truncate: int, out_bits: int = 8) -> np.ndarray:
    """CDMA input conversion of feature data: ``sat_out(sat17(rha((x - offset) * scale, truncate)))`` with
    ``out_bits`` 8 (int8) or 16 (int16; cmod ``cdma_cvt.cpp``)."""
    return sat(sat(rha((np.asarray(x, dtype=np.int64) - offset) * scale, truncate), 17), out_bits)


def direct_conv(x: np.ndarray, w: np.ndarray, geom: ConvGeometry) -> np.ndarray:
    """CSC + CMAC + CACC accumulation: exact int64 sums (K, OH, OW) of

    ``acc[k, oy, ox] = sum_{c,r,s} w[k,c,r,s] * X[c, oy*Sy + r*Dy - pad_top, ox*Sx + s*Dx - pad_left]``

    where X is ``x`` (C, H, W) inside the cube and ``geom.pad_value`` outside. Computed as im2col blocks and
    float64 GEMMs, exact because every partial sum stays below 2^37 for int8 (see the module docstring); for
    int16 while ``C*R*S*2^30 <= 2^52``, else the same blocks run as exact int64 products.
    """
    g = geom
    biggest = max(1, int(np.max(np.abs(x[: g.channels]), initial=0)), abs(g.pad_value)) * max(1, int(np.max(np.abs(w), initial=0)))
    exact_float = g.channels * g.kernel_height * g.kernel_width * biggest <= (1 << 52)
    work = np.float64 if exact_float else np.int64
    C, K, R, S, OH, OW = g.channels, g.kernels, g.kernel_height, g.kernel_width, g.out_height, g.out_width
    # Padded input covering every tap: rows -pad_top .. (OH-1)*Sy + (R-1)*Dy - pad_top, columns likewise.
    span_h = (OH - 1) * g.stride_y + (R - 1) * g.dilation_y + 1
    span_w = (OW - 1) * g.stride_x + (S - 1) * g.dilation_x + 1
    padded = np.full((C, span_h, span_w), g.pad_value, dtype=work)
    y0, y1 = max(0, -g.pad_top), min(g.height, span_h - g.pad_top)
    x0, x1 = max(0, -g.pad_left), min(g.width, span_w - g.pad_left)
    if y0 < y1 and x0 < x1:
        padded[:, y0 + g.pad_top : y1 + g.pad_top, x0 + g.pad_left : x1 + g.pad_left] = x[:C, y0:y1, x0:x1]

    taps = [(r, s) for r in range(R) for s in range(S)]
    # Weights as (K, taps*C), tap-major to match the im2col rows.
    wmat = np.ascontiguousarray(np.asarray(w, dtype=work).transpose(0, 2, 3, 1).reshape(K, R * S * C))
    rows = int(min(OH, max(1, _IM2COL_LIMIT // max(1, len(taps) * C * OW))))
    taps_per_block = int(min(len(taps), max(1, _IM2COL_LIMIT // max(1, C * rows * OW))))

    out = np.empty((K, OH, OW), dtype=np.int64)
    for oy0 in range(0, OH, rows):
        n = min(rows, OH - oy0)
        acc: np.ndarray | None = None
        for t0 in range(0, len(taps), taps_per_block):
            block = taps[t0 : t0 + taps_per_block]
            cols = np.empty((len(block), C, n, OW), dtype=work)
            for i, (r, s) in enumerate(block):
                ys = oy0 * g.stride_y + r * g.dilation_y
                xs = s * g.dilation_x
                rows_sel = slice(ys, ys + (n - 1) * g.stride_y + 1, g.stride_y)
                cols_sel = slice(xs, xs + (OW - 1) * g.stride_x + 1, g.stride_x)
                cols[i] = padded[:, rows_sel, cols_sel]
            part = wmat[:, t0 * C : (t0 + len(block)) * C] @ cols.reshape(len(block) * C, n * OW)
            acc = part if acc is None else acc + part
        assert acc is not None
        out[:, oy0 : oy0 + n, :] = acc.reshape(K, n, OW).astype(np.int64)
    return out


def cacc_deliver(acc: np.ndarray, clip_truncate: int) -> tuple[np.ndarray, int]:
    """CACC output stage: ``sat32(rha(acc, CLIP_TRUNCATE))`` and the number of saturated values."""
    v = rha(acc, clip_truncate)
    out = sat(v, 32)
    return out, int(np.count_nonzero(out != v))


# ---- register decoding ----------------------------------------------------------------------------------
def _check_supported(regs: dict[str, RegView], hw: HwConfig) -> str:
    """Features of the conv pipeline this model does not implement (yet) raise UnsupportedError; returns the
    processing precision ("int8", "int16" or "fp16") every unit's IN/PROC_PRECISION agrees on. The one mix
    the cmod's direct conv supports is CDMA IN_PRECISION=INT16 converted by CVT_EN into fp16 (conv_fp16)."""
    cdma, csc = regs["CDMA"], regs["CSC"]
    precisions: list[tuple[str, str, str]] = []
    if cdma.D_DATAIN_FORMAT.DATAIN_FORMAT != 0 or csc.D_DATAIN_FORMAT.DATAIN_FORMAT != 0:
        raise UnsupportedError("CDMA", "conv.decode describes feature input; image input is golden.engines.cdma_image")
    for unit in CONV_UNITS:
        if regs[unit].D_MISC_CFG.CONV_MODE != 0:
            raise UnsupportedError(unit, "conv.decode describes direct convolution; Winograd is golden.engines.conv_winograd")
    precisions += [(dtype, misc.where(name), unit) for dtype, misc, name, unit in conv_precisions(regs)]
    for dtype, where, unit in precisions:
        if not hw.supports(dtype):  # type: ignore[arg-type]
            raise UnsupportedError(unit, f"{where}={dtype.upper()} but {hw.name} has no {dtype} datapath")
    # cmod DirectConvDataResponseSequencerCommon: CVT only converts integers; without it nothing changes type.
    cdma_in, cdma_proc = (_PRECISIONS[getattr(cdma.D_MISC_CFG, f)] for f in ("IN_PRECISION", "PROC_PRECISION"))
    if cdma.D_CVT_CFG.CVT_EN and cdma_in == "fp16":
        raise cdma.D_CVT_CFG.fail("CVT_EN", "the CDMA converter takes integer input only; IN_PRECISION=FP16 with "
                                  "CVT_EN is a cmod FAIL")
    if not cdma.D_CVT_CFG.CVT_EN and cdma_in != cdma_proc:
        raise cdma.D_MISC_CFG.fail("IN_PRECISION", f"{cdma_in.upper()} input with PROC_PRECISION="
                                   f"{cdma_proc.upper()} needs CVT_EN (a cmod FAIL without it)")
    if (cdma_in, cdma_proc) == ("int16", "fp16"):
        precisions = precisions[1:]  # int16 converted to fp16 by CDMA (conv_fp16.run_fp16)
    elif cdma_in != cdma_proc:
        raise UnsupportedError("CDMA", f"CDMA converting {cdma_in} input to {cdma_proc}: the cmod's direct conv "
                               "stores the converted elements at the input's width; not modelled")
    conv_wcomp.is_compressed(regs, hw)  # UnsupportedError without the feature, ConfigError if CDMA/CSC disagree
    for unit in ("CDMA", "CSC", "CACC"):
        if regs[unit].D_BATCH_NUMBER.BATCHES != 0:
            raise UnsupportedError(unit, "conv.decode describes one batch; batched programs run in conv_batch")
    dtype, where, _ = precisions[0]
    for other, other_where, other_unit in precisions[1:]:
        if other != dtype:
            raise UnsupportedError(
                other_unit, f"{other_where}={other} with {where}={dtype}: mixed precisions are not modelled"
            )
    return dtype


def decode(regs: dict[str, RegView], hw: HwConfig) -> ConvGeometry:
    """The convolution the registers program, after every legality check the cmod asserts.

    Register values are stored minus one, so sizes, strides and dilations of 0 are legal (they mean 1); what
    can be illegal is units disagreeing with each other or with the memory layout and CBUF.
    """
    dtype = _check_supported(regs, hw)
    bpe = _BPE[dtype]
    cdma, csc, cacc = regs["CDMA"], regs["CSC"], regs["CACC"]
    size0, size1 = cdma.D_DATAIN_SIZE_0, cdma.D_DATAIN_SIZE_1
    W, H, C = size0.DATAIN_WIDTH + 1, size0.DATAIN_HEIGHT + 1, size1.DATAIN_CHANNEL + 1
    ext0, ext1 = csc.D_DATAIN_SIZE_EXT_0, csc.D_DATAIN_SIZE_EXT_1
    if (ext0.DATAIN_WIDTH_EXT + 1, ext0.DATAIN_HEIGHT_EXT + 1) != (W, H):
        raise ext0.fail("DATAIN_WIDTH_EXT", f"CSC input {ext0.DATAIN_WIDTH_EXT + 1}x{ext0.DATAIN_HEIGHT_EXT + 1} "
                        f"differs from the {W}x{H} cube CDMA loads (feature input)")
    if ext1.DATAIN_CHANNEL_EXT + 1 != C:
        raise ext1.fail("DATAIN_CHANNEL_EXT", f"CSC sees {ext1.DATAIN_CHANNEL_EXT + 1} channels, CDMA loads {C}")

    # Kernel size and count: CSC drives the MACs; CDMA's copies size the weight fetch.
    wext0, wext1 = csc.D_WEIGHT_SIZE_EXT_0, csc.D_WEIGHT_SIZE_EXT_1
    R, S = wext0.WEIGHT_HEIGHT_EXT + 1, wext0.WEIGHT_WIDTH_EXT + 1
    K = wext1.WEIGHT_KERNEL + 1
    if wext1.WEIGHT_CHANNEL_EXT + 1 != C:
        raise wext1.fail("WEIGHT_CHANNEL_EXT", f"kernel channels {wext1.WEIGHT_CHANNEL_EXT + 1} != input channels {C}")
    if cdma.D_WEIGHT_SIZE_1.WEIGHT_KERNEL + 1 != K:
        raise cdma.D_WEIGHT_SIZE_1.fail(
            "WEIGHT_KERNEL", f"CDMA fetches {cdma.D_WEIGHT_SIZE_1.WEIGHT_KERNEL + 1} kernels, CSC uses {K}"
        )
    if cdma.D_WEIGHT_SIZE_0.BYTE_PER_KERNEL + 1 != R * S * C * bpe:
        raise cdma.D_WEIGHT_SIZE_0.fail(
            "BYTE_PER_KERNEL", f"must be R*S*C*{bpe} - 1 = {R * S * C * bpe - 1} for a {R}x{S}x{C} {dtype} kernel"
        )
    for unit, reg in (("CSC", csc.D_DATAOUT_SIZE_1), ("CACC", cacc.D_DATAOUT_SIZE_1)):
        if reg.DATAOUT_CHANNEL + 1 != K:
            raise reg.fail("DATAOUT_CHANNEL", f"{unit} output channels {reg.DATAOUT_CHANNEL + 1} != {K} kernels")
    out0 = csc.D_DATAOUT_SIZE_0
    OW, OH = out0.DATAOUT_WIDTH + 1, out0.DATAOUT_HEIGHT + 1
    cacc_out = cacc.D_DATAOUT_SIZE_0
    if (cacc_out.DATAOUT_WIDTH + 1, cacc_out.DATAOUT_HEIGHT + 1) != (OW, OH):
        raise cacc_out.fail("DATAOUT_WIDTH", f"CACC output {cacc_out.DATAOUT_WIDTH + 1}x{cacc_out.DATAOUT_HEIGHT + 1} "
                            f"differs from CSC's {OW}x{OH}")
    if csc.D_ATOMICS.ATOMICS + 1 != OH * OW:
        raise csc.D_ATOMICS.fail("ATOMICS", f"must be OW*OH - 1 = {OH * OW - 1} output atoms")
    if csc.D_POST_Y_EXTENSION.Y_EXTENSION != 0:
        raise csc.D_POST_Y_EXTENSION.fail("Y_EXTENSION", "post-Y extension applies to image input only")
    clip = cacc.D_CLIP_CFG.CLIP_TRUNCATE
    if clip > _CACC_MAX_TRUNCATE and dtype != "fp16":  # fp16 CACC delivers FP32 and ignores the clip
        raise cacc.D_CLIP_CFG.fail("CLIP_TRUNCATE", f"{clip} exceeds {_CACC_MAX_TRUNCATE} (48-bit sums, 32-bit output)")

    # Feature layout in memory (cmod DirectConvDataRequest/ResponseSequencerCommon).
    atom = hw.atom_elements(dtype)  # type: ignore[arg-type]
    atom_bytes = atom * bpe
    line_stride = dma_bytes(hw, cdma.D_LINE_STRIDE.LINE_STRIDE)
    surf_stride = dma_bytes(hw, cdma.D_SURF_STRIDE.SURF_STRIDE)
    surfaces = -(-C // atom)
    if H > 1 and line_stride < W * atom_bytes:
        raise cdma.D_LINE_STRIDE.fail(
            "LINE_STRIDE", f"{line_stride} is shorter than a line of {W} atoms ({W * atom_bytes} B)"
        )
    if surfaces > 1 and surf_stride < (H - 1) * line_stride + W * atom_bytes:
        raise cdma.D_SURF_STRIDE.fail("SURF_STRIDE", f"{surf_stride} is shorter than a surface of {H} lines "
                                      f"({(H - 1) * line_stride + W * atom_bytes} B)")
    dain_map = cdma.D_DAIN_MAP
    line_packed = line_stride == W * atom_bytes
    if bool(dain_map.LINE_PACKED) != line_packed:
        raise dain_map.fail("LINE_PACKED", f"is {dain_map.LINE_PACKED} but LINE_STRIDE {'==' if line_packed else '!='} "
                            f"width * atom ({W * atom_bytes})")
    grains = cdma.D_FETCH_GRAIN.GRAINS + 1
    if not line_packed and grains != 1:
        raise cdma.D_FETCH_GRAIN.fail("GRAINS", "must be 0 (one line per fetch) when lines are not packed")
    if grains > H and not (W == 1 and H == 1 and dain_map.SURF_PACKED):
        raise cdma.D_FETCH_GRAIN.fail("GRAINS", f"fetch grain of {grains} lines exceeds the cube height {H}")

    # CBUF: the whole input must fit the data banks (full-input mode), slices as the cmod counts them.
    eps = entries_per_slice(hw, C, W, bpe)
    entry_bytes, bank_depth = cbuf_geometry(hw, bpe)
    for unit in ("CDMA", "CSC"):
        reg = regs[unit].D_ENTRY_PER_SLICE
        if reg.ENTRIES + 1 != eps:
            raise reg.fail("ENTRIES", f"must be {eps - 1} ({eps} CBUF entries per {W}-pixel, {C}-channel line)")
    bank = cdma.D_BANK
    if bank.DATA_BANK + bank.WEIGHT_BANK + 2 > hw.cbuf_bank_number:
        raise bank.fail("WEIGHT_BANK", f"data + weight banks exceed the {hw.cbuf_bank_number} CBUF banks")
    if bank.DATA_BANK + 1 < data_banks_needed(hw, C, H, W, bpe):
        raise bank.fail("DATA_BANK", f"the {W}x{H}x{C} input needs {H * eps} CBUF entries, {bank.DATA_BANK + 1} "
                        f"banks hold {(bank.DATA_BANK + 1) * bank_depth} (split the layer)")
    if int(csc.D_BANK) != int(bank):
        raise csc.D_BANK.fail("DATA_BANK", "CSC bank split differs from CDMA's")

    # Weight fetch.
    wbytes = cdma.D_WEIGHT_BYTES.WEIGHT_BYTES
    needed = K * R * S * C * bpe
    if wbytes < needed and not cdma.D_WEIGHT_FORMAT.WEIGHT_FORMAT:  # compressed: checked by conv_wcomp
        raise cdma.D_WEIGHT_BYTES.fail(
            "WEIGHT_BYTES", f"{wbytes} is less than the {needed} bytes of {K} {R}x{S}x{C} {dtype} kernels"
        )
    if wbytes % hw.cbuf_bank_width:
        raise cdma.D_WEIGHT_BYTES.fail(
            "WEIGHT_BYTES", f"{wbytes} is not a multiple of the CBUF width ({hw.cbuf_bank_width} B)"
        )
    if csc.D_WEIGHT_BYTES.WEIGHT_BYTES != wbytes:
        raise csc.D_WEIGHT_BYTES.fail(
            "WEIGHT_BYTES", f"CSC says {csc.D_WEIGHT_BYTES.WEIGHT_BYTES}, CDMA fetches {wbytes}"
        )
    if cdma.D_MISC_CFG.SKIP_WEIGHT_RLS and wbytes > (bank.WEIGHT_BANK + 1) * hw.cbuf_bank_depth * hw.cbuf_bank_width:
        raise cdma.D_MISC_CFG.fail("SKIP_WEIGHT_RLS", "weights kept for reuse must fit the weight banks")

    stride, dil, pad = csc.D_CONV_STRIDE_EXT, csc.D_DILATION_EXT, csc.D_ZERO_PADDING
    return ConvGeometry(
        channels=C, height=H, width=W, kernels=K, kernel_height=R, kernel_width=S, out_height=OH, out_width=OW,
        stride_y=stride.CONV_Y_STRIDE_EXT + 1, stride_x=stride.CONV_X_STRIDE_EXT + 1,
        dilation_y=dil.Y_DILATION_EXT + 1, dilation_x=dil.X_DILATION_EXT + 1,
        pad_top=pad.PAD_TOP, pad_left=pad.PAD_LEFT,
        pad_value=int(sign_extend(csc.D_ZERO_PADDING_VALUE.PAD_VALUE, 8 * bpe)),
        dtype=dtype,
    )


# ---- memory -----------------------------------------------------------------------------------------------
def _read_feature(space: AddressSpace, base: int, layout: CubeLayout, channels: int) -> np.ndarray:
    """The first ``channels`` channels of an int8/int16 cube as int64 (C, H, W), by one contiguous read and a
    strided view (surface, line, pixel, lane) of it; sparse cubes (strides far larger than the data) go
    through ``read_cube``'s gather instead."""
    span = layout.span()
    if span > 4 * layout.padded_channels * layout.height * layout.width * layout.bpe + (1 << 20) or layout.bpe != 1:
        return read_cube(space, base, layout)[:channels]
    raw = space.read(base, span)
    view = np.lib.stride_tricks.as_strided(
        raw,
        shape=(layout.surfaces, layout.atom, layout.height, layout.width),
        strides=(layout.surf_stride, 1, layout.line_stride, layout.atom),
        writeable=False,
    )
    return view.reshape(layout.padded_channels, layout.height, layout.width)[:channels].view(np.int8).astype(np.int64)


def _check_assembly_bound(x: np.ndarray, w: np.ndarray, geom: ConvGeometry) -> None:
    """CACC's 48-bit assembly saturates step by step, so the order of partial sums would matter once any of
    them can reach 2^47. int8 never gets there (module docstring); int16 can in principle. When the static
    bound ``C*R*S*max|w|*max|x|`` allows it, the exact bound ``sum |w|*|X|`` is computed and, if it still
    reaches 2^47, the operation is refused rather than modelled in an unverified order."""
    taps = geom.channels * geom.kernel_height * geom.kernel_width
    xmax = max(int(np.max(np.abs(x), initial=0)), abs(geom.pad_value))
    if taps * xmax * int(np.max(np.abs(w), initial=0)) < _CACC_ASSEMBLY_LIMIT:
        return
    bound = direct_conv(np.abs(x), np.abs(w), ConvGeometry(**{**geom.__dict__, "pad_value": abs(geom.pad_value)}))
    if int(np.max(bound, initial=0)) >= _CACC_ASSEMBLY_LIMIT:
        raise UnsupportedError(
            "CACC", "partial sums may reach the 48-bit saturation of the CACC assembly; its order is not modelled"
        )


# ---- the engine -----------------------------------------------------------------------------------------------
def run(ctx: OpContext) -> np.ndarray:
    """One direct convolution; returns the CACC cube (C_pad, OH, OW) int64 handed to SDP on the fly, C_pad being
    the output channels rounded up to the memory atom (padding lanes are 0); FP32 as np.float32 for fp16."""
    hw, regs = ctx.hw, dict(ctx.regs)
    plan = ctx.cbuf
    if plan is not None and (plan.data is not None or plan.weights is not None) and plan.mode != "direct":
        raise UnsupportedError("CSC", f"reuse of resident CBUF data or weights is not modelled in {plan.mode} mode")
    if conv_winograd.conv_mode(regs, hw) == conv_winograd.CONV_MODE_WINOGRAD:
        return conv_winograd.run(ctx)
    if regs["CDMA"].D_DATAIN_FORMAT.DATAIN_FORMAT or regs["CSC"].D_DATAIN_FORMAT.DATAIN_FORMAT:
        from golden.engines import cdma_image  # pixel input: own fetch, CDMA padding and channel extension

        return cdma_image.run(ctx)
    if any(regs[u].D_BATCH_NUMBER.BATCHES for u in ("CDMA", "CSC", "CACC")):
        from golden.engines import conv_batch  # one run of this function per batch

        return conv_batch.run(ctx, run)
    geom = decode(regs, hw)
    if geom.dtype == "fp16":
        if plan is not None and (plan.data is not None or plan.weights is not None):
            raise UnsupportedError("CSC", "reuse of resident CBUF data or weights is not modelled for fp16")
        if conv_wcomp.is_compressed(regs, hw):  # conv_fp16 fetches its weights itself, uncompressed
            raise UnsupportedError("CDMA", "compressed fp16 weights are not modelled (conv_fp16 reads them plain)")
        from golden.engines import conv_fp16  # FP32 out (np.float32), the cmod's fp16 CMAC/CACC

        return conv_fp16.run_fp16(ctx, geom)
    cdma, cacc = regs["CDMA"], regs["CACC"]

    atom = hw.atom_elements(geom.dtype)  # type: ignore[arg-type]
    layout = CubeLayout(
        channels=geom.channels, height=geom.height, width=geom.width,
        line_stride=dma_bytes(hw, cdma.D_LINE_STRIDE.LINE_STRIDE),
        surf_stride=dma_bytes(hw, cdma.D_SURF_STRIDE.SURF_STRIDE),
        atom=atom, bpe=geom.bpe,
    )
    fspace = ram_space(hw, ctx.mem, cdma.D_DAIN_RAM_TYPE, "DATAIN_RAM_TYPE")
    fbase = dma_address(hw, cdma, "D_DAIN_ADDR", "_0")
    if plan is not None and plan.data is not None:  # DATA_REUSE: CSC reads the resident, converted cube
        x = plan.data
    else:
        x = _read_feature(fspace, fbase, layout, geom.channels)
        cvt = cdma.D_CVT_CFG
        if cvt.CVT_EN:
            offset, scale = cdma.D_CVT_OFFSET.signed("CVT_OFFSET"), cdma.D_CVT_SCALE.signed("CVT_SCALE")
            x = cdma_convert(x, offset, scale, cvt.CVT_TRUNCATE, 8 * geom.bpe)
        if plan is not None:
            plan.cube = x

    if plan is not None and plan.weights is not None:  # WEIGHT_REUSE: the weights an earlier operation kept
        raw = np.frombuffer(plan.weights, dtype=np.uint8)
    else:
        raw = conv_wcomp.read_weights(hw, ctx.mem, regs, geom.kernels, geom.weight_bytes // geom.kernels, geom.dtype)
    w = unpack_weights(raw, geom, hw)

    _check_assembly_bound(x, w, geom)
    acc = direct_conv(x, w, geom)
    out = np.zeros((-(-geom.kernels // atom) * atom, geom.out_height, geom.out_width), dtype=np.int64)
    out[: geom.kernels], saturated = cacc_deliver(acc, cacc.D_CLIP_CFG.CLIP_TRUNCATE)
    ctx.report("CACC", "D_OUT_SATURATION", saturated)
    return out


ENGINE = register(
    Engine(
        name="CONV",
        units=("CDMA", "CSC", "CMAC_A", "CMAC_B", "CACC"),
        rdma=None,
        done_bits=(("CDMA", 16), ("CDMA", 18), ("CACC", 20)),
        run=run,
        sink=lambda regs: "SDP",
    )
)
