"""CONV in Winograd mode (``D_MISC_CFG.CONV_MODE=WINOGRAD`` in CDMA, CSC, CMAC_A/B and CACC): F(2x2, 3x3) on
4x4 tiles, as hw:nvdlav1's cmod computes it (the only config with Winograd is nv_full).

What each unit does (cmod sources):

* **CDMA** (``cmod/cdma/NV_NVDLA_cdma.cpp`` ``WinoConv{DataRequest,DataResponse}SequencerCommon``) pads the
  input with ``CDMA.D_ZERO_PADDING`` (PAD_LEFT/RIGHT/TOP/BOTTOM) and **CDMA's** ``D_ZERO_PADDING_VALUE`` (int8:
  its low byte; int16: its 16 bits), then *channel-extends* for the stride: padded pixel
  ``(Y*Sy + py, X*Sx + px)`` of channel c becomes pixel (Y, X) of extended channel
  ``((py*Sx + px) * surfaces + c // atom) * atom + c % atom``, where surfaces*atom covers whole 32-byte atoms
  **including the padding lanes**, which are copied from memory as they are. The padded size must be a
  multiple of 4*S per axis (FAIL otherwise). The cmod applies **no input CVT** in this mode, while the RTL routes
  Winograd data through its CVT cell, so ``CVT_EN=1`` is refused as unverified.
* **CSC** (``cmod/csc/NV_NVDLA_csc.cpp`` ``SendDataToMacSequencerWinoConvCommon``) sees the extended cube
  (its ``D_DATAIN_SIZE_EXT_*``, stride/pad/dilation 0) and, for output tile (ty, tx), reads the 4x4 input tile
  at rows ``2*ty .. 2*ty+3`` and columns ``2*tx .. 2*tx+3``, 4 channels at a time. The **PRA**
  (``cmod/hls/csc_libs/csc_cvt.cpp NV_NVDLA_CSC_pra_cell``) computes ``V = B^T d B`` exactly (18 bits),
  ``B^T = [[1,0,-1,0],[0,1,1,0],[0,-1,1,0],[0,1,0,-1]]``, then ``IntShiftRight``: ``sat_n(rha(V, PRA_TRUNCATE))``
  with n = 8 (int8, the low byte goes to the MAC) or 16 (int16).
* **Weights** are taken as they are in memory: per kernel and extended channel a 4x4 matrix U the compiler
  pre-transformed (``G g G^T``); the hardware never transforms weights. Layout (``SendWeightToMacSequencer
  WinoConvCommon``), outermost first: kernel group (32 kernels int8 / 16 int16), block of 4 channels, kernel in
  the group, position ``4*i + j`` of U, channel in the block. The kernel size registers say 4x4.
* **CMAC** (``cmod/cmac/NV_NVDLA_cmac.h`` ``calculation_int8/int16``, ``winograd_op_``) multiplies V and U per
  position and sums the 4 channels (22/44-bit), then applies ``A^T M A`` with
  ``A^T = [[1,1,1,0],[0,1,-1,-1]]``: the 2x2 outputs of the tile for this channel block.
* **CACC** (``cmod/cacc/NV_NVDLA_cacc.cpp``) accumulates the channel blocks (48-bit saturating) and delivers
  ``sat32(rha(acc, CLIP_TRUNCATE))``, 4 output atoms per tile, which SDP (in its Winograd mode) writes to the
  plain feature layout: output (2*ty + a, 2*tx + b) is ``Y[a][b]`` of tile (ty, tx).

Exactness: a PRA output is at most 2^15 in magnitude and a weight too, so one channel block's tile output is at
most ``9 * 4 * 2^30 < 2^36`` (inside the CMAC's 44 bits and CACC's 38-bit int16 MAC word; int8 stays under
2^20 < 2^21). At most ``8192 / 4`` blocks (13-bit DATAIN_CHANNEL_EXT) add up to ``< 2^47``: CACC's 48-bit
saturation can never fire, so the blocks are summed exactly in any order (float64 GEMMs, all sums < 2^53)
and the transform is applied once to the sum (it is linear).

Legality (``decode``; cmod FAILs and what the CSC's addressing assumes, ConfigError naming the field): every
conv unit agrees on CONV_MODE and SDP takes the output in its Winograd mode; feature input; padded sizes
multiples of 4*S; ``ENTRY_PER_SLICE`` as CDMA and CSC count it; CSC's extended cube equals CDMA's padded,
channel-extended one; 4x4 kernels over all extended channels; output width and height multiples of 4 that the
extended input covers; ``PRA_TRUNCATE`` 0..2 (RDL); the whole input in the data banks.
fp16 Winograd (FP17 PRA, fp16 CMAC/CACC) and batches raise UnsupportedError.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

import numpy as np

from golden.arith import rha, sat, sign_extend
from golden.config import HwConfig
from golden.dma import CONV_UNITS, conv_precisions, dma_address, dma_bytes, ram_space
from golden.engines import OpContext
from golden.engines.conv_datapath import cacc_deliver, check_clip_truncate
from golden.engines.conv_wcomp import read_weights
from golden.errors import UnsupportedError
from golden.layout import CubeLayout, read_cube
from golden.regs import RegView

#: D_MISC_CFG.CONV_MODE's Winograd encoding (each conv unit has its own field; 0 is direct convolution).
CONV_MODE_WINOGRAD = 1
#: Bytes per element of the Winograd precisions.
BPE = {"int8": 1, "int16": 2}
#: A Winograd CBUF entry: 4x4 pixels of 8 bytes (4 int16 / 8 int8 channels).
ENTRY_BYTES = 128
#: Channels per PRA call and MAC channel block (cmod ELEMENT_PER_INPUT_ATOM_WG).
CHANNEL_BLOCK = 4
#: D_PRA_CFG.PRA_TRUNCATE "range: 0~2" (NVDLA_CSC.rdl).
MAX_PRA_TRUNCATE = 2


# ---- mode ------------------------------------------------------------------------------------------------
def conv_mode(regs: Mapping[str, RegView], hw: HwConfig) -> int:
    """The CONV_MODE every conv unit agrees on (0 direct, 1 Winograd).

    A config without Winograd refuses a unit set to it (UnsupportedError naming that unit); units that
    disagree are a ConfigError, and so is an SDP on the fly from CACC whose ``D_FEATURE_MODE_CFG.WINOGRAD``
    does not match (CACC delivers 2x2 tiles in Winograd mode, raster order otherwise)."""
    misc = [(unit, regs[unit].D_MISC_CFG) for unit in CONV_UNITS if unit in regs]
    for unit, cfg in misc:
        if cfg.CONV_MODE == CONV_MODE_WINOGRAD and not hw.winograd:
            raise UnsupportedError(unit, f"{cfg.where('CONV_MODE')}=WINOGRAD but {hw.name} has no Winograd convolution")
    (_, first), *others = misc
    mode = first.CONV_MODE
    for _, cfg in others:
        if cfg.CONV_MODE != mode:
            raise cfg.fail("CONV_MODE", f"is {cfg.CONV_MODE}, {first.where('CONV_MODE')} is {mode}")
    if "SDP" in regs:
        fm = regs["SDP"].D_FEATURE_MODE_CFG
        if fm.FLYING_MODE and fm.WINOGRAD != mode:
            what = "Winograd 2x2 tiles" if mode else "raster order"
            raise fm.fail("WINOGRAD", f"is {fm.WINOGRAD} but CACC delivers {what} (CONV_MODE={mode})")
    return mode


# ---- geometry ----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class WinogradGeometry:
    """The Winograd operation as the registers program it (counts, not minus-one values)."""

    channels: int  # C of the cube in memory (CDMA DATAIN_CHANNEL)
    height: int
    width: int
    kernels: int  # K
    out_height: int  # OH, a multiple of 4
    out_width: int
    stride_y: int = 1  # CDMA conv stride: done by channel extension
    stride_x: int = 1
    pad_top: int = 0
    pad_left: int = 0
    pad_bottom: int = 0
    pad_right: int = 0
    pad_value: int = 0  # CDMA's, sign-extended to the element width
    pra_truncate: int = 0
    dtype: str = "int8"
    atom: int = 32  # channels per memory atom

    @property
    def bpe(self) -> int:
        return BPE[self.dtype]

    @property
    def surfaces(self) -> int:
        return -(-self.channels // self.atom)

    @property
    def ext_channels(self) -> int:
        """Channels the CSC sees: whole atoms of every stride phase."""
        return self.surfaces * self.atom * self.stride_x * self.stride_y

    @property
    def ext_height(self) -> int:
        return (self.pad_top + self.height + self.pad_bottom) // self.stride_y

    @property
    def ext_width(self) -> int:
        return (self.pad_left + self.width + self.pad_right) // self.stride_x

    @property
    def bytes_per_kernel(self) -> int:
        return 16 * self.ext_channels * self.bpe

    @property
    def entries_per_slice(self) -> int:
        """CBUF entries of one extended input line: the value ``D_ENTRY_PER_SLICE.ENTRIES + 1`` must hold."""
        return self.ext_width * self.ext_channels * self.bpe // ENTRY_BYTES


def _precision(regs: Mapping[str, RegView], hw: HwConfig) -> str:
    """The one precision all units' IN/PROC_PRECISION fields agree on (int8 or int16)."""
    seen = [(dtype, misc.where(name), unit) for dtype, misc, name, unit in conv_precisions(regs)]
    dtype, where, unit = seen[0]
    for other, other_where, other_unit in seen[1:]:
        if other != dtype:
            raise UnsupportedError(other_unit,
                                   f"{other_where}={other} with {where}={dtype}: mixed precisions are not modelled")
    if dtype == "fp16":
        raise UnsupportedError(unit, "fp16 Winograd convolution (FP17 PRA, fp16 CMAC/CACC) is not modelled")
    if not hw.supports(dtype):  # type: ignore[arg-type]
        raise UnsupportedError(dtype.upper(), f"{where}={dtype.upper()} but {hw.name} has no {dtype} datapath")
    return dtype


def decode(regs: Mapping[str, RegView], hw: HwConfig) -> WinogradGeometry:
    """The Winograd convolution the registers program, after the legality checks of the module docstring."""
    cdma, csc, cacc = regs["CDMA"], regs["CSC"], regs["CACC"]
    if cdma.D_DATAIN_FORMAT.DATAIN_FORMAT != 0 or csc.D_DATAIN_FORMAT.DATAIN_FORMAT != 0:
        bad = cdma.D_DATAIN_FORMAT if cdma.D_DATAIN_FORMAT.DATAIN_FORMAT else csc.D_DATAIN_FORMAT
        raise bad.fail("DATAIN_FORMAT", "Winograd convolution takes feature data only")
    dtype = _precision(regs, hw)
    bpe = BPE[dtype]
    for unit in ("CDMA", "CSC", "CACC"):
        if regs[unit].D_BATCH_NUMBER.BATCHES != 0:
            raise UnsupportedError(unit, "batched Winograd convolution (BATCHES > 0) is not modelled")
    if cdma.D_CVT_CFG.CVT_EN:
        raise UnsupportedError("CDMA", "CDMA.D_CVT_CFG.CVT_EN=1 in Winograd mode: the cmod skips the input CVT, the "
                               "RTL converts; unverified, not modelled")

    atom = hw.atom_elements(dtype)  # type: ignore[arg-type]
    size0, size1 = cdma.D_DATAIN_SIZE_0, cdma.D_DATAIN_SIZE_1
    W, H, C = size0.DATAIN_WIDTH + 1, size0.DATAIN_HEIGHT + 1, size1.DATAIN_CHANNEL + 1
    stride, pad = cdma.D_CONV_STRIDE, cdma.D_ZERO_PADDING
    sx, sy = stride.CONV_X_STRIDE + 1, stride.CONV_Y_STRIDE + 1
    pl, pr, pt, pb = pad.PAD_LEFT, pad.PAD_RIGHT, pad.PAD_TOP, pad.PAD_BOTTOM
    if (pl + W + pr) % (4 * sx):
        raise pad.fail("PAD_RIGHT", f"padded width {pl}+{W}+{pr} is not a multiple of 4*CONV_X_STRIDE = {4 * sx}")
    if (pt + H + pb) % (4 * sy):
        raise pad.fail("PAD_BOTTOM", f"padded height {pt}+{H}+{pb} is not a multiple of 4*CONV_Y_STRIDE = {4 * sy}")

    ext0, ext1 = csc.D_DATAIN_SIZE_EXT_0, csc.D_DATAIN_SIZE_EXT_1
    We, He = (pl + W + pr) // sx, (pt + H + pb) // sy
    Ce = -(-C // atom) * atom * sx * sy
    if (ext0.DATAIN_WIDTH_EXT + 1, ext0.DATAIN_HEIGHT_EXT + 1) != (We, He):
        raise ext0.fail("DATAIN_WIDTH_EXT", f"CSC sees {ext0.DATAIN_WIDTH_EXT + 1}x{ext0.DATAIN_HEIGHT_EXT + 1}, CDMA "
                        f"delivers the padded, stride-extended {We}x{He}")
    if ext1.DATAIN_CHANNEL_EXT + 1 != Ce:
        raise ext1.fail("DATAIN_CHANNEL_EXT", f"must be {Ce - 1}: {-(-C // atom)} atoms of {atom} channels times "
                        f"{sx}x{sy} stride phases")
    cext = cdma.D_DATAIN_SIZE_EXT_0
    for name in ("DATAIN_WIDTH_EXT", "DATAIN_HEIGHT_EXT"):
        if getattr(cext, name) != getattr(ext0, name):
            raise cext.fail(name, f"CDMA's extended size {cext.DATAIN_WIDTH_EXT + 1}x{cext.DATAIN_HEIGHT_EXT + 1} "
                            f"differs from CSC's {We}x{He}")
    for reg, names in ((csc.D_CONV_STRIDE_EXT, ("CONV_X_STRIDE_EXT", "CONV_Y_STRIDE_EXT")),
                       (csc.D_DILATION_EXT, ("X_DILATION_EXT", "Y_DILATION_EXT")),
                       (csc.D_ZERO_PADDING, ("PAD_LEFT", "PAD_TOP"))):
        for name in names:
            if getattr(reg, name):
                raise reg.fail(name, "must be 0 in Winograd mode (the CDMA pads, and strides by channel extension)")
    if csc.D_POST_Y_EXTENSION.Y_EXTENSION:
        raise csc.D_POST_Y_EXTENSION.fail("Y_EXTENSION", "post-Y extension applies to image input only")

    # Kernels: 4x4 pre-transformed over every extended channel.
    wext0, wext1 = csc.D_WEIGHT_SIZE_EXT_0, csc.D_WEIGHT_SIZE_EXT_1
    if (wext0.WEIGHT_WIDTH_EXT, wext0.WEIGHT_HEIGHT_EXT) != (3, 3):
        raise wext0.fail("WEIGHT_WIDTH_EXT", f"Winograd kernels are the 4x4 transformed ones (3, 3), not "
                         f"({wext0.WEIGHT_WIDTH_EXT}, {wext0.WEIGHT_HEIGHT_EXT})")
    if wext1.WEIGHT_CHANNEL_EXT + 1 != Ce:
        raise wext1.fail("WEIGHT_CHANNEL_EXT",
                         f"kernel channels {wext1.WEIGHT_CHANNEL_EXT + 1} != the {Ce} extended channels")
    K = wext1.WEIGHT_KERNEL + 1
    if cdma.D_WEIGHT_SIZE_1.WEIGHT_KERNEL + 1 != K:
        raise cdma.D_WEIGHT_SIZE_1.fail("WEIGHT_KERNEL", f"CDMA fetches {cdma.D_WEIGHT_SIZE_1.WEIGHT_KERNEL + 1} "
                                        f"kernels, CSC uses {K}")
    bpk = 16 * Ce * bpe
    if cdma.D_WEIGHT_SIZE_0.BYTE_PER_KERNEL + 1 != bpk:
        raise cdma.D_WEIGHT_SIZE_0.fail("BYTE_PER_KERNEL", f"must be 4*4*{Ce}*{bpe} - 1 = {bpk - 1}")
    for unit, reg in (("CSC", csc.D_DATAOUT_SIZE_1), ("CACC", cacc.D_DATAOUT_SIZE_1)):
        if reg.DATAOUT_CHANNEL + 1 != K:
            raise reg.fail("DATAOUT_CHANNEL", f"{unit} output channels {reg.DATAOUT_CHANNEL + 1} != {K} kernels")

    # Output: whole 4x4 blocks of 2x2 tiles, inside the extended input.
    out0 = csc.D_DATAOUT_SIZE_0
    OW, OH = out0.DATAOUT_WIDTH + 1, out0.DATAOUT_HEIGHT + 1
    for name, n in (("DATAOUT_WIDTH", OW), ("DATAOUT_HEIGHT", OH)):
        if n % 4:
            raise out0.fail(name, f"{n} is not a multiple of 4 (the CSC walks 4x4 blocks of 2x2 output tiles)")
    if OW + 2 > We:
        raise out0.fail("DATAOUT_WIDTH", f"{OW} outputs need {OW + 2} extended input columns, CSC has {We}")
    if OH + 2 > He:
        raise out0.fail("DATAOUT_HEIGHT", f"{OH} outputs need {OH + 2} extended input rows, CSC has {He}")
    cacc_out = cacc.D_DATAOUT_SIZE_0
    if (cacc_out.DATAOUT_WIDTH + 1, cacc_out.DATAOUT_HEIGHT + 1) != (OW, OH):
        raise cacc_out.fail("DATAOUT_WIDTH", f"CACC output {cacc_out.DATAOUT_WIDTH + 1}x{cacc_out.DATAOUT_HEIGHT + 1} "
                            f"differs from CSC's {OW}x{OH}")
    if csc.D_ATOMICS.ATOMICS + 1 != OH * OW:
        raise csc.D_ATOMICS.fail("ATOMICS", f"must be OW*OH - 1 = {OH * OW - 1} output atoms")
    pra = csc.D_PRA_CFG.PRA_TRUNCATE
    if pra > MAX_PRA_TRUNCATE:
        raise csc.D_PRA_CFG.fail("PRA_TRUNCATE", f"{pra} is outside the documented range 0..{MAX_PRA_TRUNCATE}")
    check_clip_truncate(cacc)

    # Memory layout of the input.
    atom_bytes = atom * bpe
    line_stride = dma_bytes(hw, cdma.D_LINE_STRIDE.LINE_STRIDE)
    surf_stride = dma_bytes(hw, cdma.D_SURF_STRIDE.SURF_STRIDE)
    surfaces = -(-C // atom)
    if H > 1 and line_stride < W * atom_bytes:
        raise cdma.D_LINE_STRIDE.fail("LINE_STRIDE",
                                      f"{line_stride} is shorter than a line of {W} atoms ({W * atom_bytes} B)")
    if surfaces > 1 and surf_stride < (H - 1) * line_stride + W * atom_bytes:
        raise cdma.D_SURF_STRIDE.fail("SURF_STRIDE", f"{surf_stride} is shorter than a surface of {H} lines")
    dain_map = cdma.D_DAIN_MAP
    line_packed = line_stride == W * atom_bytes
    if bool(dain_map.LINE_PACKED) != line_packed:
        raise dain_map.fail("LINE_PACKED", f"is {dain_map.LINE_PACKED} but LINE_STRIDE {'==' if line_packed else '!='} "
                            f"width * atom ({W * atom_bytes})")

    # CBUF: lines of 128-byte entries, the whole extended input in the data banks.
    geom = WinogradGeometry(
        channels=C, height=H, width=W, kernels=K, out_height=OH, out_width=OW, stride_y=sy, stride_x=sx,
        pad_top=pt, pad_left=pl, pad_bottom=pb, pad_right=pr,
        pad_value=int(sign_extend(cdma.D_ZERO_PADDING_VALUE.PAD_VALUE, 8 * bpe)), pra_truncate=pra,
        dtype=dtype, atom=atom,
    )
    eps = geom.entries_per_slice
    for unit in ("CDMA", "CSC"):
        reg = regs[unit].D_ENTRY_PER_SLICE
        if reg.ENTRIES + 1 != eps:
            raise reg.fail("ENTRIES", f"must be {eps - 1}: a {We}-pixel, {Ce}-channel extended line is {eps} "
                           f"{ENTRY_BYTES}-byte entries")
    bank = cdma.D_BANK
    if int(csc.D_BANK) != int(bank):
        raise csc.D_BANK.fail("DATA_BANK", "CSC bank split differs from CDMA's")
    if bank.DATA_BANK + bank.WEIGHT_BANK + 2 > hw.cbuf_bank_number:
        raise bank.fail("WEIGHT_BANK", f"data + weight banks exceed the {hw.cbuf_bank_number} CBUF banks")
    bank_entries = hw.cbuf_bank_width * hw.cbuf_bank_depth // ENTRY_BYTES
    if He * eps > (bank.DATA_BANK + 1) * bank_entries:
        raise bank.fail("DATA_BANK", f"the extended input needs {He * eps} CBUF entries, {bank.DATA_BANK + 1} banks "
                        f"hold {(bank.DATA_BANK + 1) * bank_entries} (the CSC waits for the whole input)")

    # Weight fetch (compressed sizes are checked by conv_wcomp when the stream is read).
    wbytes = cdma.D_WEIGHT_BYTES.WEIGHT_BYTES
    if csc.D_WEIGHT_BYTES.WEIGHT_BYTES != wbytes:
        raise csc.D_WEIGHT_BYTES.fail("WEIGHT_BYTES",
                                      f"CSC says {csc.D_WEIGHT_BYTES.WEIGHT_BYTES}, CDMA fetches {wbytes}")
    if wbytes % ENTRY_BYTES:
        raise cdma.D_WEIGHT_BYTES.fail("WEIGHT_BYTES",
                                       f"{wbytes} is not a multiple of the {ENTRY_BYTES}-byte CBUF entry")
    if not cdma.D_WEIGHT_FORMAT.WEIGHT_FORMAT and wbytes < K * bpk:
        raise cdma.D_WEIGHT_BYTES.fail("WEIGHT_BYTES",
                                       f"{wbytes} is less than the {K * bpk} bytes of {K} 4x4x{Ce} kernels")
    if cdma.D_MISC_CFG.SKIP_WEIGHT_RLS and wbytes > (bank.WEIGHT_BANK + 1) * bank_entries * ENTRY_BYTES:
        raise cdma.D_MISC_CFG.fail("SKIP_WEIGHT_RLS", "weights kept for reuse must fit the weight banks")
    return geom


# ---- datapath ----------------------------------------------------------------------------------------------
def extend_channels(padded: np.ndarray, stride_y: int, stride_x: int) -> np.ndarray:
    """CDMA channel extension: (Cp, Hp, Wp) padded input -> (Cp*Sy*Sx, Hp/Sy, Wp/Sx), extended channel
    ``(py*Sx + px) * Cp + c`` holding pixel ``(Y*Sy + py, X*Sx + px)`` of channel c."""
    cp, hp, wp = padded.shape
    v = padded.reshape(cp, hp // stride_y, stride_y, wp // stride_x, stride_x)  # c, Y, py, X, px
    ext = np.ascontiguousarray(v.transpose(2, 4, 0, 1, 3))  # py, px, c, Y, X
    return ext.reshape(cp * stride_y * stride_x, hp // stride_y, wp // stride_x)


def input_tiles(x_ext: np.ndarray, out_height: int, out_width: int) -> np.ndarray:
    """The overlapping 4x4 tiles the CSC reads: (C, OH/2, OW/2, 4, 4), tile (ty, tx) at (2*ty, 2*tx)."""
    c = x_ext.shape[0]
    th, tw = out_height // 2, out_width // 2
    s = x_ext.strides
    view = np.lib.stride_tricks.as_strided(
        x_ext, shape=(c, th, tw, 4, 4), strides=(s[0], 2 * s[1], 2 * s[2], s[1], s[2]), writeable=False
    )
    return np.ascontiguousarray(view)


def pra(tiles: np.ndarray, truncate: int, bits: int) -> np.ndarray:
    """CSC PRA on (..., 4, 4) tiles: exact ``B^T d B`` (18 bits), then ``sat_bits(rha(., truncate))``."""
    d = np.asarray(tiles, dtype=np.int64)
    m = np.stack([d[..., 0, :] - d[..., 2, :], d[..., 1, :] + d[..., 2, :],
                  d[..., 2, :] - d[..., 1, :], d[..., 1, :] - d[..., 3, :]], axis=-2)
    t = np.stack([m[..., 0] - m[..., 2], m[..., 1] + m[..., 2], m[..., 2] - m[..., 1], m[..., 1] - m[..., 3]], axis=-1)
    return sat(rha(t, truncate), bits)


def output_transform(m: np.ndarray) -> np.ndarray:
    """CMAC ``A^T M A`` on (..., 4, 4) -> (..., 2, 2)."""
    p = np.stack([m[..., 0, :] + m[..., 1, :] + m[..., 2, :], m[..., 1, :] - m[..., 2, :] - m[..., 3, :]], axis=-2)
    return np.stack([p[..., 0] + p[..., 1] + p[..., 2], p[..., 1] - p[..., 2] - p[..., 3]], axis=-1)


def winograd_sums(v: np.ndarray, u: np.ndarray) -> np.ndarray:
    """CMAC + CACC accumulation: (K, OH, OW) int64 of ``A^T (sum_c U[k,c] * V[c, tile]) A`` per tile.

    ``v`` is the PRA output (C, TH, TW, 4, 4), ``u`` the weights (K, C, 4, 4); exact (module docstring)."""
    c, th, tw = v.shape[:3]
    k = u.shape[0]
    vp = np.asarray(v, dtype=np.float64).reshape(c, th * tw, 16).transpose(2, 0, 1)  # (16, C, T)
    up = np.asarray(u, dtype=np.float64).reshape(k, c, 16).transpose(2, 0, 1)  # (16, K, C)
    m = np.matmul(up, vp).astype(np.int64)  # (16, K, T)
    m = m.transpose(1, 2, 0).reshape(k, th, tw, 4, 4)
    y = output_transform(m)  # (K, TH, TW, 2, 2)
    return y.transpose(0, 1, 3, 2, 4).reshape(k, 2 * th, 2 * tw)


# ---- weights -------------------------------------------------------------------------------------------------
def weight_element_offsets(kernels: int, channels: int, kernel_group: int) -> np.ndarray:
    """Element offset of ``U[k, c, i, j]`` in the Winograd weight stream, shape (K, C, 4, 4): kernel group,
    block of 4 channels, kernel in the group, position ``4*i + j``, channel in the block."""
    k = np.arange(kernels, dtype=np.int64)[:, None, None, None]
    c = np.arange(channels, dtype=np.int64)[None, :, None, None]
    pos = np.arange(16, dtype=np.int64).reshape(1, 1, 4, 4)
    group, k_in = k // kernel_group, k % kernel_group
    k_size = np.minimum(kernel_group, kernels - group * kernel_group)
    return (group * (kernel_group * 16 * channels) + (c // CHANNEL_BLOCK) * (16 * CHANNEL_BLOCK * k_size)
            + k_in * (16 * CHANNEL_BLOCK) + pos * CHANNEL_BLOCK + c % CHANNEL_BLOCK)


def unpack_weights(raw: np.ndarray, kernels: int, channels: int, kernel_group: int, dtype: str) -> np.ndarray:
    """Weight stream bytes -> int64 U (K, C, 4, 4)."""
    elems = np.asarray(raw, dtype=np.uint8)[: kernels * channels * 16 * BPE[dtype]]
    vals = elems.view(np.int8) if dtype == "int8" else elems.view("<i2")
    return vals[weight_element_offsets(kernels, channels, kernel_group)].astype(np.int64)


def pack_weights(u: np.ndarray, kernel_group: int, dtype: str) -> bytes:
    """U (K, C, 4, 4) -> the Winograd weight stream (not rounded up)."""
    k, c = u.shape[:2]
    out = np.zeros(u.size, dtype=np.int8 if dtype == "int8" else "<i2")
    out[weight_element_offsets(k, c, kernel_group)] = np.asarray(u, dtype=np.int64).astype(out.dtype)
    return out.tobytes()


# ---- the engine ----------------------------------------------------------------------------------------------
def run(ctx: OpContext) -> np.ndarray:
    """One Winograd convolution; returns the CACC cube (K rounded up to the atom, OH, OW) int64 for SDP."""
    hw, regs = ctx.hw, dict(ctx.regs)
    g = decode(regs, hw)
    cdma, cacc = regs["CDMA"], regs["CACC"]
    bits = 8 * g.bpe

    # CDMA: the cube with its padding lanes, padded, channel-extended.
    layout = CubeLayout(
        channels=g.channels, height=g.height, width=g.width,
        line_stride=dma_bytes(hw, cdma.D_LINE_STRIDE.LINE_STRIDE),
        surf_stride=dma_bytes(hw, cdma.D_SURF_STRIDE.SURF_STRIDE), atom=g.atom, bpe=g.bpe,
    )
    space = ram_space(hw, ctx.mem, cdma.D_DAIN_RAM_TYPE, "DATAIN_RAM_TYPE")
    x = read_cube(space, dma_address(hw, cdma, "D_DAIN_ADDR", "_0"), layout)
    padded = np.full((x.shape[0], g.pad_top + g.height + g.pad_bottom, g.pad_left + g.width + g.pad_right),
                     g.pad_value, dtype=np.int64)
    padded[:, g.pad_top: g.pad_top + g.height, g.pad_left: g.pad_left + g.width] = x
    x_ext = extend_channels(padded, g.stride_y, g.stride_x)

    # CSC: tiles and PRA; weights as stored (or decompressed).
    v = pra(input_tiles(x_ext, g.out_height, g.out_width), g.pra_truncate, bits)
    group = hw.mac_atomic_k_for(g.dtype)  # type: ignore[arg-type]
    raw = read_weights(hw, ctx.mem, regs, g.kernels, g.bytes_per_kernel, g.dtype)
    u = unpack_weights(raw, g.kernels, g.ext_channels, group, g.dtype)

    # CMAC + CACC.
    acc = winograd_sums(v, u)
    out = np.zeros((-(-g.kernels // g.atom) * g.atom, g.out_height, g.out_width), dtype=np.int64)
    out[: g.kernels], saturated = cacc_deliver(acc, cacc.D_CLIP_CFG.CLIP_TRUNCATE)
    ctx.report("CACC", "D_OUT_SATURATION", saturated)
    return out


__all__ = [
    "CONV_MODE_WINOGRAD", "WinogradGeometry", "conv_mode", "decode", "extend_channels",
    "input_tiles", "output_transform", "pack_weights", "pra", "run", "unpack_weights", "weight_element_offsets",
    "winograd_sums",
]
