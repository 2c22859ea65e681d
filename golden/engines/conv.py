"""CONV: the direct-convolution pipeline CDMA -> CSC -> CMAC_A/B -> CACC (int8, int16 and fp16 feature input).

The five units run as one operation. CDMA fetches the feature cube (NVDLA_NOTES §3 feature layout) and the
weights, and applies its input conversion; CSC walks the output atoms, injecting its pad value for taps
outside the cube; CMAC forms int8 x int8 dot products over one MAC-atomic-C slice; CACC accumulates the
slices and kernel taps, truncates and saturates to 32 bits, and hands the cube to SDP on the fly.

The arithmetic of those steps (CDMA CVT, CSC padding, CMAC slices, CACC assembly and why a float64 GEMM
is bit exact) is described with the code in ``golden.engines.conv_datapath``, shared by every conv variant;
``run`` picks the variant (Winograd, pixel input, batch, fp16, direct) from the registers.

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

from typing import Callable

import numpy as np

from golden.arith import sign_extend
from golden.config import HwConfig
from golden.decode_memo import memo_views
from golden.dma import CONV_UNITS, conv_precisions, dma_address, dma_bytes, ram_space
from golden.engines import Engine, OpContext, cdma_image, conv_batch, conv_fp16, conv_wcomp, conv_winograd, register
from golden.engines.conv_datapath import (
    BPE,
    ConvGeometry,
    cacc_cube,
    cbuf_geometry,
    cdma_convert,
    check_clip_truncate,
    data_banks_needed,
    entries_per_slice,
    unpack_weights,
)
from golden.errors import UnsupportedError
from golden.intr import unit_done_bits
from golden.layout import CubeLayout, read_cube
from golden.memory import AddressSpace
from golden.regs import RegView

#: Precision field encodings of D_MISC_CFG (IN_PRECISION / PROC_PRECISION).
_PRECISIONS = {0: "int8", 1: "int16", 2: "fp16"}


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


@memo_views
def decode(regs: dict[str, RegView], hw: HwConfig) -> ConvGeometry:
    """The convolution the registers program, after every legality check the cmod asserts (decoded once per
    distinct program: ``golden.decode_memo``).

    Register values are stored minus one, so sizes, strides and dilations of 0 are legal (they mean 1); what
    can be illegal is units disagreeing with each other or with the memory layout and CBUF.
    """
    dtype = _check_supported(regs, hw)
    bpe = BPE[dtype]
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
    if dtype != "fp16":  # fp16 CACC delivers FP32 and ignores the clip
        check_clip_truncate(cacc)

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


# ---- the engine -----------------------------------------------------------------------------------------------
def _direct(ctx: OpContext, geom: ConvGeometry) -> np.ndarray:
    """The int8/int16 direct convolution: CDMA fetch (or the CBUF-resident cube and weights), CVT, and the shared
    CSC/CMAC/CACC datapath."""
    hw, regs, plan = ctx.hw, dict(ctx.regs), ctx.cbuf
    cdma = regs["CDMA"]
    layout = CubeLayout(
        channels=geom.channels, height=geom.height, width=geom.width,
        line_stride=dma_bytes(hw, cdma.D_LINE_STRIDE.LINE_STRIDE),
        surf_stride=dma_bytes(hw, cdma.D_SURF_STRIDE.SURF_STRIDE),
        atom=hw.atom_elements(geom.dtype), bpe=geom.bpe,  # type: ignore[arg-type]
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
    out, saturated = cacc_cube(hw, x, unpack_weights(raw, geom, hw, compact=True), geom,
                             regs["CACC"].D_CLIP_CFG.CLIP_TRUNCATE)
    ctx.report("CACC", "D_OUT_SATURATION", saturated)
    return out


def _fp16(ctx: OpContext, geom: ConvGeometry) -> np.ndarray:
    """fp16 direct convolution (FP32 out as np.float32, the cmod's fp16 CMAC/CACC), from memory or from the
    CBUF-resident cube and weights an earlier operation kept."""
    if conv_wcomp.is_compressed(ctx.regs, ctx.hw):  # conv_fp16 fetches its weights itself, uncompressed
        raise UnsupportedError("CDMA", "compressed fp16 weights are not modelled (conv_fp16 reads them plain)")
    return conv_fp16.run_fp16(ctx, geom)


def _winograd(ctx: OpContext) -> bool:
    return conv_winograd.conv_mode(ctx.regs, ctx.hw) == conv_winograd.CONV_MODE_WINOGRAD


def _pixel_input(ctx: OpContext) -> bool:
    return bool(ctx.regs["CDMA"].D_DATAIN_FORMAT.DATAIN_FORMAT or ctx.regs["CSC"].D_DATAIN_FORMAT.DATAIN_FORMAT)


def _batched(ctx: OpContext) -> bool:
    return any(ctx.regs[u].D_BATCH_NUMBER.BATCHES for u in conv_batch.BATCH_UNITS)


#: Variants with their own fetch or schedule, tried in this order; the first whose registers match runs the
#: operation. Runners look the module's ``run`` up when called (a test may wrap it); a batch runs ``run`` once
#: per batch. Winograd is asked first because ``conv_mode`` also checks every unit agrees on CONV_MODE.
_VARIANTS: tuple[tuple[Callable[[OpContext], bool], Callable[[OpContext], np.ndarray]], ...] = (
    (_winograd, lambda ctx: conv_winograd.run(ctx)),
    (_pixel_input, lambda ctx: cdma_image.run(ctx)),
    (_batched, lambda ctx: conv_batch.run(ctx, run)),
)
#: Feature-input convolution by the precision ``decode`` settles on.
_BY_PRECISION: dict[str, Callable[[OpContext, ConvGeometry], np.ndarray]] = {
    "int8": _direct, "int16": _direct, "fp16": _fp16,
}


def run(ctx: OpContext) -> np.ndarray:
    """One convolution; returns the CACC cube (C_pad, OH, OW) int64 handed to SDP on the fly, C_pad being the
    output channels rounded up to the memory atom (padding lanes are 0); FP32 as np.float32 for fp16."""
    plan = ctx.cbuf
    if plan is not None and (plan.data is not None or plan.weights is not None) and plan.mode != "direct":
        raise UnsupportedError("CSC", f"reuse of resident CBUF data or weights is not modelled in {plan.mode} mode")
    variant = next((runner for matches, runner in _VARIANTS if matches(ctx)), None)
    if variant is not None:
        return variant(ctx)
    geom = decode(dict(ctx.regs), ctx.hw)
    return _BY_PRECISION[geom.dtype](ctx, geom)


ENGINE = register(
    Engine(
        name="CONV",
        units=CONV_UNITS,
        rdma=None,
        done_bits=unit_done_bits(*CONV_UNITS),  # CDMA's data and weight dones, CACC's
        run=run,
        sink=lambda regs: "SDP",
    )
)
