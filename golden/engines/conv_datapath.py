"""The datapath steps every CONV variant shares: CDMA weight order and input conversion, CBUF geometry, the
CSC/CMAC sums and the CACC output stage.

Direct (``conv``), pixel input (``cdma_image``), batch (``conv_batch``), fp16 (``conv_fp16``), Winograd
(``conv_winograd``) and weight compression (``conv_wcomp``) differ in how CDMA fetches and what CSC feeds
the MACs; the pieces below are the same hardware in each, so they live once here, below all of them (this
module imports none of them).

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

A block of taps whose every partial sum provably stays below ``2^24`` (``max|x| * max_k sum |w_k|`` over the
block) runs as a float32 GEMM instead, exact for the same reason and twice as fast; the blocks add up in
float64.
"""
from __future__ import annotations

import collections
import functools
import math
import weakref

from dataclasses import dataclass

import numpy as np

from golden.arith import rha, sat
from golden.config import HwConfig
from golden.errors import UnsupportedError
from golden.regs import RegView

#: Largest im2col block (float64 elements) built at once; bigger convolutions are cut into row/tap blocks.
_IM2COL_LIMIT = 1 << 23
#: Partial sums below this are exact in float32 (24-bit significand).
_F32_EXACT = float(1 << 24)

#: CACC assembles 48-bit sums and delivers 32 bits, so CLIP_TRUNCATE may drop at most 16 bits (cmod FAIL).
CACC_MAX_TRUNCATE = 48 - 32
#: CACC's assembly accumulator saturates at 48 bits signed (cmod MAX_INT_48BITS).
CACC_ASSEMBLY_LIMIT = 1 << 47

#: Bytes per element.
BPE = {"int8": 1, "int16": 2, "fp16": 2}


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
        return BPE[self.dtype]

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
@functools.lru_cache(maxsize=64)
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
    offsets = (
        kgroup * (kernel_group * taps * channels)
        + cgroup * (channel_group * taps * k_size)
        + (r * kernel_width + s) * (c_size * k_size)
        + k_in * c_size
        + c_in
    )
    offsets.flags.writeable = False  # shared by the cache
    return offsets


def unpack_weights(raw: np.ndarray, geom: ConvGeometry, hw: HwConfig, dtype: str | None = None,
                   compact: bool = False) -> np.ndarray:
    """Weight bytes (at least ``geom.weight_bytes``) -> int64 array (K, C, R, S).

    int16 weights are 2-byte little-endian elements in the int8 element order, with kernel groups of
    atomic K / 2 (the element offsets of ``weight_byte_offsets`` count elements, not bytes). ``compact``
    returns the cache's own read-only int8/int16 array instead of an int64 copy: the same object for the
    same weights, so ``direct_conv`` can keep what it derives from them (``_weight_stats``)."""
    dtype = dtype or geom.dtype
    shape = (geom.kernels, geom.channels, geom.kernel_height, geom.kernel_width)
    key = (hw.name, dtype, shape, hw.mac_atomic_k_for(dtype), hw.mac_atomic_c,  # type: ignore[arg-type]
           np.asarray(raw, dtype=np.uint8)[: _weight_bytes(shape, dtype)].tobytes())
    hit = _UNPACKED.get(key)
    if hit is not None:
        _UNPACKED.move_to_end(key)
        return hit if compact else hit.astype(np.int64)
    w = _unpack(raw, geom, hw, dtype)
    small = w.astype(np.int8 if dtype == "int8" else np.int16)
    small.flags.writeable = False  # shared by every later hit
    _UNPACKED[key] = small
    _UNPACKED_BYTES[0] += small.nbytes + len(key[-1])
    while _UNPACKED_BYTES[0] > UNPACK_CACHE_BYTES and _UNPACKED:
        old_key, old = _UNPACKED.popitem(last=False)
        _UNPACKED_BYTES[0] -= old.nbytes + len(old_key[-1])
    return small if compact else w


#: Unpacked weights of recent convs, keyed by their bytes: a network runs the same layers for every sample,
#: and gathering a layer's weights out of NVDLA's order costs more than its GEMM. Stored compact (int8/int16).
UNPACK_CACHE_BYTES = 256 << 20
_UNPACKED: "collections.OrderedDict[tuple, np.ndarray]" = collections.OrderedDict()
_UNPACKED_BYTES = [0]


def _weight_bytes(shape: tuple[int, int, int, int], dtype: str) -> int:
    return math.prod(shape) * (1 if dtype == "int8" else 2)


def _unpack(raw: np.ndarray, geom: ConvGeometry, hw: HwConfig, dtype: str) -> np.ndarray:
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


@dataclass(frozen=True)
class _WeightStats:
    """What ``direct_conv`` derives from a weight array, independent of the data."""

    wmax: int  # max |w|
    wmat32: np.ndarray  # (K, R*S*C) float32, tap-major like the im2col rows (exact: |w| < 2^24)
    tap_sums: np.ndarray  # (K, R*S) float64: sum over channels of |w| per kernel and tap


#: Stats of recent read-only weight arrays (the unpack cache's), by id with a weak reference to check the
#: id still names the same array; at most ``STATS_BYTES`` of float32 matrices.
STATS_BYTES = 256 << 20
_STATS: "collections.OrderedDict[int, tuple[weakref.ref, _WeightStats]]" = collections.OrderedDict()


def _weight_stats(w: np.ndarray) -> _WeightStats:
    key = id(w)
    hit = _STATS.get(key)
    if hit is not None and hit[0]() is w:
        _STATS.move_to_end(key)
        return hit[1]
    K, C, R, S = w.shape
    wmat32 = np.ascontiguousarray(np.asarray(w, dtype=np.float32).transpose(0, 2, 3, 1).reshape(K, R * S * C))
    stats = _WeightStats(_abs_max(w), wmat32,
                         np.abs(wmat32).reshape(K, R * S, C).sum(axis=2, dtype=np.float64))
    if not w.flags.writeable:  # only arrays that cannot change under the same id (the unpack cache's)
        _STATS[key] = (weakref.ref(w), stats)
        total = sum(v[1].wmat32.nbytes for v in _STATS.values())
        while total > STATS_BYTES and len(_STATS) > 1:
            _, (_, old) = _STATS.popitem(last=False)
            total -= old.wmat32.nbytes
    return stats


def direct_conv(x: np.ndarray, w: np.ndarray, geom: ConvGeometry, xmax: int | None = None) -> np.ndarray:
    """CSC + CMAC + CACC accumulation: exact int64 sums (K, OH, OW) of

    ``acc[k, oy, ox] = sum_{c,r,s} w[k,c,r,s] * X[c, oy*Sy + r*Dy - pad_top, ox*Sx + s*Dx - pad_left]``

    where X is ``x`` (C, H, W) inside the cube and ``geom.pad_value`` outside. Computed as im2col blocks and
    float64 GEMMs, exact because every partial sum stays below 2^37 for int8 (see the module docstring); for
    int16 while ``C*R*S*2^30 <= 2^52``, else the same blocks run as exact int64 products.
    """
    g = geom
    C, K, R, S, OH, OW = g.channels, g.kernels, g.kernel_height, g.kernel_width, g.out_height, g.out_width
    if xmax is None:
        xmax = _abs_max(x[:C])
    xmax = max(1, xmax, abs(g.pad_value))
    ws = _weight_stats(w)
    exact_float = C * R * S * xmax * max(1, ws.wmax) <= (1 << 52)
    work = np.float64 if exact_float else np.int64
    # Padded input covering every tap: rows -pad_top .. (OH-1)*Sy + (R-1)*Dy - pad_top, columns likewise.
    span_h = (OH - 1) * g.stride_y + (R - 1) * g.dilation_y + 1
    span_w = (OW - 1) * g.stride_x + (S - 1) * g.dilation_x + 1
    taps = [(r, s) for r in range(R) for s in range(S)]
    # Weights as (K, taps*C), tap-major to match the im2col rows.
    if exact_float:
        wmat = ws.wmat32  # blocks beyond float32's exact range widen it to float64 (exactly)
    else:
        wmat = np.ascontiguousarray(np.asarray(w, dtype=work).transpose(0, 2, 3, 1).reshape(K, R * S * C))
    rows = int(min(OH, max(1, _IM2COL_LIMIT // max(1, len(taps) * C * OW))))
    taps_per_block = int(min(len(taps), max(1, _IM2COL_LIMIT // max(1, C * rows * OW))))
    tap_sums = None
    if exact_float:
        # Taps per block small enough for float32 (module docstring); each block is checked exactly below.
        tap_sums = ws.tap_sums
        per_tap = tap_sums.max(axis=0) * xmax  # bound per tap
        if per_tap.max(initial=0) < _F32_EXACT:
            fit = max(1, int(_F32_EXACT // max(1.0, float(per_tap.mean()) * 1.25)))
            taps_per_block = min(taps_per_block, fit)
        else:
            tap_sums = None

    padded = np.full((C, span_h, span_w), g.pad_value, dtype=np.float32 if tap_sums is not None else work)
    y0, y1 = max(0, -g.pad_top), min(g.height, span_h - g.pad_top)
    x0, x1 = max(0, -g.pad_left), min(g.width, span_w - g.pad_left)
    if y0 < y1 and x0 < x1:
        padded[:, y0 + g.pad_top : y1 + g.pad_top, x0 + g.pad_left : x1 + g.pad_left] = x[:C, y0:y1, x0:x1]

    out = np.empty((K, OH, OW), dtype=np.int64)
    for oy0 in range(0, OH, rows):
        n = min(rows, OH - oy0)
        acc: np.ndarray | None = None
        for t0 in range(0, len(taps), taps_per_block):
            block = taps[t0 : t0 + taps_per_block]
            cols = np.empty((len(block), C, n, OW), dtype=padded.dtype)
            for i, (r, s) in enumerate(block):
                ys = oy0 * g.stride_y + r * g.dilation_y
                xs = s * g.dilation_x
                rows_sel = slice(ys, ys + (n - 1) * g.stride_y + 1, g.stride_y)
                cols_sel = slice(xs, xs + (OW - 1) * g.stride_x + 1, g.stride_x)
                cols[i] = padded[:, rows_sel, cols_sel]
            wblock = wmat[:, t0 * C : (t0 + len(block)) * C]
            if tap_sums is not None and float(tap_sums[:, t0:t0 + len(block)].sum(axis=1).max()) * xmax < _F32_EXACT:
                part = (wblock @ cols.reshape(len(block) * C, n * OW)).astype(np.float64)
            else:
                part = wblock.astype(work, copy=False) @ cols.reshape(len(block) * C, n * OW).astype(work, copy=False)
            acc = part if acc is None else acc + part
        assert acc is not None
        out[:, oy0 : oy0 + n, :] = acc.reshape(K, n, OW).astype(np.int64)
    return out


def _abs_max(a: np.ndarray) -> int:
    """max |a| of an integer array without abs's copy (and without int8's -128 overflowing in it)."""
    if not a.size:
        return 0
    return max(int(a.max()), -int(a.min()))


def cacc_deliver(acc: np.ndarray, clip_truncate: int) -> tuple[np.ndarray, int]:
    """CACC output stage: ``sat32(rha(acc, CLIP_TRUNCATE))`` and the number of saturated values."""
    v = rha(acc, clip_truncate)
    out = sat(v, 32)
    return out, int(np.count_nonzero(out != v))


def check_assembly_bound(x: np.ndarray, w: np.ndarray, geom: ConvGeometry, xmax: int | None = None) -> None:
    """CACC's 48-bit assembly saturates step by step, so the order of partial sums would matter once any of
    them can reach 2^47. int8 never gets there (module docstring); int16 can in principle. When the static
    bound ``C*R*S*max|w|*max|x|`` allows it, the exact bound ``sum |w|*|X|`` is computed and, if it still
    reaches 2^47, the operation is refused rather than modelled in an unverified order."""
    taps = geom.channels * geom.kernel_height * geom.kernel_width
    xmax = max(_abs_max(x) if xmax is None else xmax, abs(geom.pad_value))
    if taps * xmax * _weight_stats(w).wmax < CACC_ASSEMBLY_LIMIT:
        return
    w = np.asarray(w, dtype=np.int64)
    bound = direct_conv(np.abs(x), np.abs(w), ConvGeometry(**{**geom.__dict__, "pad_value": abs(geom.pad_value)}))
    if int(np.max(bound, initial=0)) >= CACC_ASSEMBLY_LIMIT:
        raise UnsupportedError(
            "CACC", "partial sums may reach the 48-bit saturation of the CACC assembly; its order is not modelled"
        )



def check_clip_truncate(cacc: RegView) -> None:
    """CACC's CLIP_TRUNCATE may drop at most the 16 bits between its 48-bit sums and 32-bit output (cmod FAIL)."""
    clip = cacc.D_CLIP_CFG.CLIP_TRUNCATE
    if clip > CACC_MAX_TRUNCATE:
        raise cacc.D_CLIP_CFG.fail("CLIP_TRUNCATE", f"{clip} exceeds {CACC_MAX_TRUNCATE} (48-bit sums, 32-bit output)")


def cacc_cube(
    hw: HwConfig, x: np.ndarray, w: np.ndarray, geom: ConvGeometry, clip_truncate: int
) -> tuple[np.ndarray, int]:
    """CSC + CMAC + CACC of the integer datapath on a fetched (and converted) cube ``x`` and weights ``w``:
    the CACC cube (K rounded up to the memory atom, OH, OW) int64 handed to SDP, the padding lanes 0, and the
    count for ``D_OUT_SATURATION``. (It takes no OpContext: ``golden.cbuf`` imports this module and
    ``golden.engines`` refers to ``golden.cbuf``, so importing the engines package here would close a cycle.)"""
    xmax = _abs_max(x[: geom.channels])
    check_assembly_bound(x, w, geom, xmax)
    acc = direct_conv(x, w, geom, xmax)
    atom = hw.atom_elements(geom.dtype)  # type: ignore[arg-type]
    out = np.zeros((-(-geom.kernels // atom) * atom, geom.out_height, geom.out_width), dtype=np.int64)
    out[: geom.kernels], saturated = cacc_deliver(acc, clip_truncate)
    return out, saturated
