"""PDP: planar pooling (max, min, average) over each channel, int8, int16 and fp16 (NVDLA_NOTES §4 PDP).

The model follows NVDLA's cmod (``cmod/pdp/NV_NVDLA_pdp.cpp``, fp16 in ``cmod/hls_wrapper/pdp_hls_wrapper.cpp``);
int8 is checked against the nv_small trace tests bit for bit, int16 against nv_full's ``pdp_max_pooling_int16``:

- Input comes from the **PDP_RDMA** registers (base, strides, size, RAM type) when off-flying, or from
  SDP on the fly (``FLYING_MODE=ON_FLYING``, which is 0 in the RDL encoding).
- Output (ox, oy) covers input columns ``[ox*sw - pad_left, +kw)`` and rows ``[oy*sh - pad_top, +kh)``.
- MAX/MIN take only the real taps; padding never takes part.
- AVERAGE (int8/int16) accumulates in a line buffer of 16 (int8) or 32 (int16) bits, all sums wrapping. A
  window with ``n`` padded columns adds ``PAD_VALUE_{n}X`` once per real row, and ``m`` padded rows add
  ``PAD_VALUE_{m}X * kw``; then ``out = rha(rha(t*RECIP_KERNEL_WIDTH, 16)*RECIP_KERNEL_HEIGHT, 16)`` and the
  low 8 (16) bits are stored. PAD_VALUE_nX are sign-extended from 8/9/10/10/11/11/11 bits (int8) or
  16/17/18/18/19/19/19 bits (int16), the cmod's ``int_sign_extend``.
- fp16 converts each input to FP17 and runs the cmod's exact sequence of FP17 operations (``golden.fp``,
  not IEEE): per window row, ``acc = b0``, then ``acc = acc + b`` for each further real column in order,
  and after every column ``+ pad_l`` and ``+ pad_r``, which are +0 except at the row's last real column,
  where the FP17 pattern ``PAD_VALUE_{n}X[16:0]`` goes into the left slot (window padded on the left or on
  both sides) or the right slot. Rows combine the same way (``acc = row + acc``) with ``pad_t``/``pad_b`` =
  ``PAD_VALUE_{m}X[16:0] * kw`` in FP17. The sum is multiplied by RECIP_KERNEL_WIDTH then
  RECIP_KERNEL_HEIGHT (FP17 patterns, firmware 0x7C00 = 1.0, 0x7800 = 0.5, ...) and narrowed to fp16
  (RNE, overflow saturates to +-65504). MAX/MIN compare fp16 patterns sign-magnitude (+0 > -0, a NaN
  operand wins). With ``D_NAN_FLUSH_TO_ZERO`` set, NaN inputs read from memory become +0 (not on the fly).
  ``D_NAN_INPUT_NUM``/``D_INF_INPUT_NUM`` count the fp16 NaN/Inf lanes of every atom PDP_RDMA fetches
  (split overlaps count again), ``D_NAN_OUTPUT_NUM`` the NaN lanes written.
- Split-width mode pools each split on its own sub-cube (split i>0 re-reads ``kw - sw`` columns of its
  left neighbour, with no left padding; only the first split pads left and only the last pads right).
  With consistent partial widths (checked here) this equals unsplit pooling.

On the fly, SDP hands over the padded cube (C rounded up to the atom, H, W) it would have written: int8 and
int16 as int64 arrays of the values, fp16 as a ``np.float16`` array whose bit patterns are the results
(PDP reads them with ``.view(np.uint16)``, so NaN payloads survive; ``np.uint16`` pattern arrays are
accepted too). SDP's ``D_DATA_FORMAT.OUT_PRECISION`` must equal PDP's ``INPUT_DATA``.

NVDLA's nv_small RTL differs from the cmod (docs/golden-semantics.md, PDP): on nv_small int8 AVERAGE runs
through the RTL's datapath widths (``HwConfig.pdp_average``, ``pool_rtl_average``); right/bottom padding the
RTL's flush count gets wrong is refused (``flush_counts``), and ``Dla`` refuses a PDP after one that left
input rows unread (``unread_rows``).

The layout/DMA helpers at the bottom are shared with ``cdp.py``.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from golden import fp
from golden.arith import rha, sign_extend
from golden.config import BYTES_PER_ELEMENT
from golden.dma import check_format, feature_cube
from golden.engines import Engine, OpContext, Views, register
from golden.errors import ConfigError
from golden.intr import unit_done_bits
from golden.layout import CubeLayout, read_cube, write_cube
from golden.regs import RegView

#: ``D_OPERATION_MODE_CFG.FLYING_MODE`` (and PDP_RDMA ``D_FLYING_MODE``): 0 ON_FLYING (SDP), 1 OFF_FLYING.
ON_FLYING, OFF_FLYING = 0, 1
#: ``D_OPERATION_MODE_CFG.POOLING_METHOD``.
AVERAGE, MAX, MIN = 0, 1, 2
METHOD_NAMES = {AVERAGE: "average", MAX: "max", MIN: "min"}
#: Largest pooling kernel; the KERNEL_WIDTH/HEIGHT fields could encode 16.
MAX_KERNEL = 8
#: 1/kernel size as NVDLA's kmd firmware (``pdp.c``) writes RECIP_KERNEL_WIDTH/HEIGHT for kernel sizes 1..8:
#: the int (16.16) and the fp16 encodings. A loadable run by that firmware gets these, nothing else.
FIRMWARE_RECIP_KERNEL = ((0x10000, 0x8000, 0x5555, 0x4000, 0x3333, 0x2AAA, 0x2492, 0x2000),
                         (0x7C00, 0x7800, 0x7555, 0x7400, 0x7266, 0x7155, 0x7092, 0x7000))
#: Width (bits) of the sign extension of PAD_VALUE_1X..7X per data type (cmod ``int_sign_extend`` sign bits
#: 7..10 for int8, 15..18 for int16).
PAD_VALUE_BITS = {"int8": (8, 9, 10, 10, 11, 11, 11), "int16": (16, 17, 18, 18, 19, 19, 19)}
#: Width of the average line buffer (cmod: int16_t for int8, int32_t for int16) and of the stored result.
ACC_BITS = {"int8": 16, "int16": 32}
OUT_BITS = {"int8": 8, "int16": 16}
#: FP17 patterns of kernel widths 1..8 that scale a vertical pad value (cmod ``kernel_width_map``). The
#: cmod's table ends at 7.0, so an 8-wide kernel reads past it (undefined); 8.0 continues its pattern.
KERNEL_WIDTH_FP17 = (0x7C00, 0x8000, 0x8200, 0x8400, 0x8500, 0x8600, 0x8700, 0x8800)
#: Low bits of PAD_VALUE_nX / RECIP_KERNEL_* the fp16 path reads as FP17 (ac_int<17> assignment).
FP17_MASK = 0x1FFFF


# ---- register decoding ---------------------------------------------------------------------------
@dataclass(frozen=True)
class Pooling:
    """Decoded, validated pooling parameters of one PDP operation."""

    method: int
    kernel_width: int
    kernel_height: int
    stride_width: int
    stride_height: int
    pad_left: int
    pad_top: int
    pad_right: int
    pad_bottom: int
    recip_width: int  # int: unsigned 0.16 fixed point (17-bit field); fp16: FP17 pattern
    recip_height: int
    #: PAD_VALUE_1X..7X as the line buffer sees them (index n-1 for n padded taps): sign-extended and
    #: wrapped to ACC_BITS for int8/int16, FP17 patterns for fp16.
    pad_values: tuple[int, ...]
    dtype: str = "int8"
    #: ``HwConfig.pdp_average``: "nv_small_rtl" runs int8 AVERAGE through the widths of NVDLA's nv_small RTL
    #: (``pool_rtl_average``), reading ``raw_pad_values`` (the 19-bit fields).
    average: str = "cmod"
    raw_pad_values: tuple[int, ...] = (0,) * 7

    @classmethod
    def from_view(cls, pdp: RegView, dtype: str = "int8", average: str = "cmod") -> "Pooling":
        mode = pdp.D_OPERATION_MODE_CFG
        method = mode.POOLING_METHOD
        if method not in METHOD_NAMES:
            raise mode.fail("POOLING_METHOD", f"{method} is not a pooling method (0 average, 1 max, 2 min)")
        kcfg = pdp.D_POOLING_KERNEL_CFG
        kw, kh = kcfg.KERNEL_WIDTH + 1, kcfg.KERNEL_HEIGHT + 1
        for name, k in (("KERNEL_WIDTH", kw), ("KERNEL_HEIGHT", kh)):
            if k > MAX_KERNEL:
                raise kcfg.fail(name, f"kernel of {k} is larger than the PDP maximum {MAX_KERNEL}")
        pads = pdp.D_POOLING_PADDING_CFG
        pl, pt, pr, pb = pads.PAD_LEFT, pads.PAD_TOP, pads.PAD_RIGHT, pads.PAD_BOTTOM
        for name, pad, k in (("PAD_LEFT", pl, kw), ("PAD_RIGHT", pr, kw), ("PAD_TOP", pt, kh), ("PAD_BOTTOM", pb, kh)):
            if pad >= k:
                raise pads.fail(name, f"padding {pad} is not smaller than the kernel ({k}): a window would hold no data")
        raw = tuple(getattr(getattr(pdp, f"D_POOLING_PADDING_VALUE_{n}_CFG"), f"PAD_VALUE_{n}X") for n in range(1, 8))
        if dtype == "fp16":
            pad_values = tuple(v & FP17_MASK for v in raw)
        else:
            pad_values = tuple(
                _pad_value(v, bits, ACC_BITS[dtype]) for v, bits in zip(raw, PAD_VALUE_BITS[dtype])
            )
        return cls(
            method=method,
            kernel_width=kw,
            kernel_height=kh,
            stride_width=kcfg.KERNEL_STRIDE_WIDTH + 1,
            stride_height=kcfg.KERNEL_STRIDE_HEIGHT + 1,
            pad_left=pl,
            pad_top=pt,
            pad_right=pr,
            pad_bottom=pb,
            recip_width=pdp.D_RECIP_KERNEL_WIDTH.RECIP_KERNEL_WIDTH,
            recip_height=pdp.D_RECIP_KERNEL_HEIGHT.RECIP_KERNEL_HEIGHT,
            pad_values=pad_values,
            dtype=dtype,
            average=average if dtype == "int8" else "cmod",
            raw_pad_values=raw,
        )



def pooled_size(size: int, kernel: int, stride: int, pad_before: int, pad_after: int) -> int:
    """Outputs whose windows fit the padded extent (0 if none does)."""
    span = pad_before + size + pad_after - kernel
    return span // stride + 1 if span >= 0 else 0


def flush_counts(size: int, kernel: int, stride: int, pad_before: int, pad_after: int) -> tuple[int, int]:
    """(outputs NVDLA's RTL emits after the last input column/row, outputs that really end there).

    Every window that holds the last input column (row) is complete when it arrives; the core emits one of
    them then and *flushes* the others afterwards. ``NV_NVDLA_PDP_CORE_cal1d.v`` (width) and ``_cal2d.v``
    (height) do not count those windows: they take ``flush_num = floor(PAD_RIGHT / stride)`` (resp.
    PAD_BOTTOM), which is right only when the last window ends on the last padded column; when the input plus
    the leading pad is narrower than the kernel (``small_active``) they take ``(size + pads - kernel) / stride``
    if that divides exactly, else 0. Any other count emits one output too many (wrong data after it) or too
    few (the core never finishes: PDP done is never raised)."""
    pad_after = min(pad_after, 7)
    rtl = min(pad_after // stride, 7)
    if rtl and size + pad_before < kernel:  # small_active / non_split_small_active
        remain = size + pad_before + pad_after - kernel
        rtl = remain // stride if remain % stride == 0 and 1 <= remain // stride <= 6 else 0
    outputs = pooled_size(size, kernel, stride, pad_before, pad_after)
    first = -(-max(0, pad_before + size - kernel) // stride)  # first window holding the last input
    return rtl, max(0, outputs - first - 1)


def unread_rows(pdp: RegView) -> int:
    """Input rows below the last window of a PDP operation (0 when the windows reach the last row).

    NVDLA's RTL (nv_small, measured: every kernel height 1-3 and stride 1-4 tried) runs such an operation
    right, but the *next* PDP operation then writes wrong data or never raises done. ``Dla`` refuses that next
    PDP (``ConfigError`` on ``PDP.D_DATA_CUBE_IN_HEIGHT.CUBE_IN_HEIGHT`` naming this one)."""
    kcfg, pads = pdp.D_POOLING_KERNEL_CFG, pdp.D_POOLING_PADDING_CFG
    kh, sh = kcfg.KERNEL_HEIGHT + 1, kcfg.KERNEL_STRIDE_HEIGHT + 1
    height = pdp.D_DATA_CUBE_IN_HEIGHT.CUBE_IN_HEIGHT + 1
    out_height = pdp.D_DATA_CUBE_OUT_HEIGHT.CUBE_OUT_HEIGHT + 1
    return max(0, height + pads.PAD_TOP - (out_height - 1) * sh - kh)


def _pad_value(v: int, bits: int, acc_bits: int) -> int:
    """PAD_VALUE_nX as the cmod's int_sign_extend leaves it in the accumulator: the sign bit ``bits-1``
    is copied upwards, OR-ed with the whole 19-bit field, and the result wraps to ``acc_bits`` bits."""
    ext = ~((1 << bits) - 1) if (v >> (bits - 1)) & 1 else 0
    return int(sign_extend(ext | v, acc_bits))


@dataclass(frozen=True)
class Split:
    """One width split: input columns [in_start, +in_width) pooled to outputs [out_start, +out_width)."""

    in_start: int
    in_width: int
    out_start: int
    out_width: int
    pad_left: int
    pad_right: int
    #: Field checked for this split's geometry (FIRST/MID/LAST), for error messages.
    part: str


def splits(pdp: RegView, pool: Pooling, in_width: int, out_width: int) -> list[Split]:
    """The width splits the PDP runs, validated so their union is exactly the unsplit pooling."""
    count = pdp.D_OPERATION_MODE_CFG.SPLIT_NUM + 1
    kw, sw = pool.kernel_width, pool.stride_width
    if count == 1:
        return [Split(0, in_width, 0, out_width, pool.pad_left, pool.pad_right, "")]
    pin, pout = pdp.D_PARTIAL_WIDTH_IN, pdp.D_PARTIAL_WIDTH_OUT
    first_in, mid_in, last_in = (getattr(pin, f"PARTIAL_WIDTH_IN_{p}") + 1 for p in ("FIRST", "MID", "LAST"))
    first_out, mid_out, last_out = (getattr(pout, f"PARTIAL_WIDTH_OUT_{p}") + 1 for p in ("FIRST", "MID", "LAST"))
    total_in = first_in + (count - 2) * mid_in + last_in
    total_out = first_out + (count - 2) * mid_out + last_out
    if total_in != in_width:
        raise pin.fail(
            "PARTIAL_WIDTH_IN_FIRST",
            f"{count} splits cover {total_in} input columns (first {first_in}, mid {mid_in}, last {last_in}), "
            f"the cube has {in_width}",
        )
    if total_out != out_width:
        raise pout.fail(
            "PARTIAL_WIDTH_OUT_FIRST",
            f"{count} splits cover {total_out} output columns (first {first_out}, mid {mid_out}, last {last_out}), "
            f"the cube has {out_width}",
        )
    overlap = kw - sw  # columns re-read from the previous split (negative: skipped)
    result = []
    for i in range(count):
        if i == 0:
            part, in_start, width, out_start, ow = "FIRST", 0, first_in, 0, first_out
            pl, pr = pool.pad_left, 0
        else:
            part = "LAST" if i == count - 1 else "MID"
            in_start = first_in + (i - 1) * mid_in - overlap
            width = (last_in if part == "LAST" else mid_in) + overlap
            out_start = first_out + (i - 1) * mid_out
            ow = last_out if part == "LAST" else mid_out
            pl, pr = 0, (pool.pad_right if part == "LAST" else 0)
            if in_start < 0 or width < 1 or out_start * sw - pool.pad_left != in_start:
                raise pin.fail(
                    f"PARTIAL_WIDTH_IN_{part}",
                    f"split {i} starts at input column {in_start}, but its first output ({out_start}) "
                    f"starts at column {out_start * sw - pool.pad_left}",
                )
        natural = pooled_size(width, kw, sw, pl, pr)
        if ow != natural:
            raise pout.fail(
                f"PARTIAL_WIDTH_OUT_{part}",
                f"split {i} has {width} input columns (pads {pl}/{pr}), which pool to {natural} outputs, not {ow}",
            )
        result.append(Split(in_start, width, out_start, ow, pl, pr, part))
    return result


# ---- the pooling datapath ------------------------------------------------------------------------
def _taps(out_size: int, kernel: int, stride: int, pad_before: int, in_size: int) -> tuple[np.ndarray, np.ndarray]:
    """Input index of every (output, tap), clipped into range, and whether the tap is real data."""
    idx = (np.arange(out_size, dtype=np.int64) * stride - pad_before)[:, None] + np.arange(kernel, dtype=np.int64)[None, :]
    valid = (idx >= 0) & (idx < in_size)
    return np.clip(idx, 0, in_size - 1), valid


def pool(x: np.ndarray, cfg: Pooling, out_height: int, out_width: int, pad_left: int | None = None) -> np.ndarray:
    """Pool a (C, H, W) cube to (C, out_height, out_width) as the PDP does.

    int8/int16: values in, values out (int64). fp16: fp16 bit patterns in and out (int64 holding 16 bits).
    Separable like the hardware: a line operation over kernel columns, then a vertical pass over rows.
    ``pad_left`` overrides the register pad for one split (right padding needs no parameter: it only
    decides how many outputs there are, which the caller passes in).
    """
    pl = cfg.pad_left if pad_left is None else pad_left
    _, height, width = x.shape
    kw, kh = cfg.kernel_width, cfg.kernel_height
    cols, col_ok = _taps(out_width, kw, cfg.stride_width, pl, width)
    rows, row_ok = _taps(out_height, kh, cfg.stride_height, cfg.pad_top, height)
    if not (col_ok.any(axis=1).all() and row_ok.any(axis=1).all()):
        raise ConfigError("PDP.D_POOLING_PADDING_CFG", "a pooling window holds no input data")
    x = x.astype(np.int64, copy=False)
    if cfg.dtype == "fp16":
        return _pool_fp16(x, cfg, cols, col_ok, rows, row_ok)

    if cfg.method == AVERAGE and cfg.average == "nv_small_rtl":
        return pool_rtl_average(x, cfg, cols, col_ok, rows, row_ok)
    if cfg.method == AVERAGE:
        line = np.zeros(x.shape[:2] + (out_width,), dtype=np.int64)
        for kx in range(kw):
            line += x[:, :, cols[:, kx]] * col_ok[:, kx]
        total = np.zeros(x.shape[:1] + (out_height, out_width), dtype=np.int64)
        for ky in range(kh):
            total += line[:, rows[:, ky], :] * row_ok[:, ky][:, None]
        pad_tbl = np.array((0,) + cfg.pad_values, dtype=np.int64)
        pad_cols = kw - col_ok.sum(axis=1)  # padded columns per output column
        pad_rows = kh - row_ok.sum(axis=1)
        # Each real row's line result carries PAD_VALUE_{n}X; m padded rows add PAD_VALUE_{m}X * kw.
        pad_sum = (kh - pad_rows)[:, None] * pad_tbl[pad_cols][None, :] + kw * pad_tbl[pad_rows][:, None]
        acc = sign_extend(total + pad_sum[None, :, :], ACC_BITS[cfg.dtype])  # the line buffer wraps
        avg = rha(rha(acc * cfg.recip_width, 16) * cfg.recip_height, 16)
        return sign_extend(avg, OUT_BITS[cfg.dtype])  # the low bits are stored

    better = np.maximum if cfg.method == MAX else np.minimum
    worst = np.iinfo(np.int64).min if cfg.method == MAX else np.iinfo(np.int64).max
    line = np.full(x.shape[:2] + (out_width,), worst, dtype=np.int64)
    for kx in range(kw):
        line = better(line, np.where(col_ok[:, kx], x[:, :, cols[:, kx]], worst))
    out = np.full(x.shape[:1] + (out_height, out_width), worst, dtype=np.int64)
    for ky in range(kh):
        out = better(out, np.where(row_ok[:, ky][:, None], line[:, rows[:, ky], :], worst))
    return out


#: Widths of NVDLA's nv_small int8 AVERAGE datapath: a row of taps (+ horizontal pad) in
#: NV_NVDLA_PDP_CORE_cal1d.v (8+3 bits), the sum of rows in the cal2d line buffer (8+6 bits), the product
#: registers of the two reciprocal multiplies (``data_hmult_8bit_0_ext`` 31 bits, ``data_vmult_8bit_0_ext``
#: 28 bits) and their results (``hmult_8bit_0`` 11 bits, ``vmult_8bit_0`` 8 bits).
RTL_ROW_BITS, RTL_SUM_BITS = 11, 14
RTL_HMULT = (31, 11)
RTL_VMULT = (28, 8)


def rtl_round(p: np.ndarray, ext_bits: int, out_bits: int) -> np.ndarray:
    """One reciprocal multiply of cal2d: ``ext = p mod 2^ext_bits`` (the product register), rounded at bit 16
    half away from zero and cut to ``out_bits``. A negative ``ext`` keeps ``ext[out_bits+15:16]`` (+1 above
    one half); a positive one keeps only ``ext[out_bits+14:16]`` plus the rounding bit 15, so a positive
    result of ``2^(out_bits-1)`` or more loses its top bit (``i8_less_neg_0_5``/``hmult_8bit``)."""
    ext = np.asarray(p, dtype=np.int64) & ((1 << ext_bits) - 1)
    negative = (ext >> (ext_bits - 1)) & 1 == 1
    whole = ext >> 16
    half = (ext >> 15) & 1
    above_half = (half == 1) & ((ext & 0x7FFF) != 0)
    neg = whole + above_half
    pos = (whole & ((1 << (out_bits - 1)) - 1)) + half
    return sign_extend(np.where(negative, neg, pos), out_bits)


def pool_rtl_average(
    x: np.ndarray, cfg: Pooling, cols: np.ndarray, col_ok: np.ndarray, rows: np.ndarray, row_ok: np.ndarray
) -> np.ndarray:
    """int8 AVERAGE as NVDLA's nv_small RTL computes it (``HwConfig.pdp_average == "nv_small_rtl"``).

    - cal1d: each real row of a window sums its real taps; with n padded columns it adds
      ``PAD_VALUE_nX[10:0]`` and keeps 11 bits (``unit1d_actv_data_8bit_0``).
    - cal2d: the rows are summed in 14 bits (``pooling_SUM``); with m padded rows
      ``(PAD_VALUE_mX * kernel_width)[13:0]`` (``pad_value[13:0]``) is added into 15 bits (``data_8bit_0``).
    - ``* RECIP_KERNEL_WIDTH`` into 11 bits, then ``* RECIP_KERNEL_HEIGHT`` into the 8 bits stored
      (``rtl_round``).
    Equal to the cmod's rule while no sum or product overflows those widths."""
    kw, kh = cfg.kernel_width, cfg.kernel_height
    raw = np.array((0,) + tuple(int(v) for v in cfg.raw_pad_values), dtype=np.int64)
    line = np.zeros(x.shape[:2] + (cols.shape[0],), dtype=np.int64)
    for kx in range(kw):
        line += x[:, :, cols[:, kx]] * col_ok[:, kx]
    pad_cols = kw - col_ok.sum(axis=1)
    line = sign_extend(line + raw[pad_cols][None, None, :], RTL_ROW_BITS)  # raw[0] = 0: no padding
    total = np.zeros(x.shape[:1] + (rows.shape[0], cols.shape[0]), dtype=np.int64)
    for ky in range(kh):
        total += line[:, rows[:, ky], :] * row_ok[:, ky][:, None]
    total = sign_extend(total, RTL_SUM_BITS)
    pad_rows = kh - row_ok.sum(axis=1)
    vpad = sign_extend(raw[pad_rows] * kw, RTL_SUM_BITS)
    acc = total + vpad[None, :, None]
    stage1 = rtl_round(acc * cfg.recip_width, *RTL_HMULT)
    return rtl_round(stage1 * cfg.recip_height, *RTL_VMULT)


def _pad_slots(ok: np.ndarray, pads: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """FP17 pad operands (outputs, taps) of the "before" and "after" slots along one axis.

    The cmod adds both slots after every real tap; they are +0 except at a window's last real tap, where
    ``pads[n-1]`` (n padded taps) goes into the before slot if the window is padded before its data
    (alone or on both sides), else into the after slot."""
    kernel = ok.shape[1]
    n_pad = kernel - ok.sum(axis=1)
    last = kernel - 1 - np.argmax(ok[:, ::-1], axis=1)  # last real tap
    value = np.where(n_pad > 0, np.concatenate([[0], pads])[n_pad], 0)
    at_last = np.arange(kernel)[None, :] == last[:, None]
    before = ~ok[:, 0]
    first = np.where(at_last & before[:, None], value[:, None], 0)
    second = np.where(at_last & ~before[:, None], value[:, None], 0)
    return first, second


def _pool_fp16(
    x: np.ndarray, cfg: Pooling, cols: np.ndarray, col_ok: np.ndarray, rows: np.ndarray, row_ok: np.ndarray
) -> np.ndarray:
    """fp16 pooling in the cmod's order of FP17 operations (module docstring); x holds fp16 patterns."""
    kw, kh = cfg.kernel_width, cfg.kernel_height
    average = cfg.method == AVERAGE
    pick = fp.fp16_max if cfg.method == MAX else fp.fp16_min
    if average:
        x = fp.fp16_to_fp17(x).astype(np.int64)
        pads = np.array(cfg.pad_values, dtype=np.int64)
        col_pads = _pad_slots(col_ok, pads)
        kw_fp17 = KERNEL_WIDTH_FP17[kw - 1]
        row_pads = _pad_slots(row_ok, fp.fp17_mul(pads, kw_fp17).astype(np.int64))

    def combine(acc: np.ndarray | None, new: np.ndarray, started: np.ndarray, new_first: bool) -> np.ndarray:
        if acc is None:
            return new
        if average:
            both = fp.fp17_add(new, acc) if new_first else fp.fp17_add(acc, new)
        else:
            both = pick(new, acc) if new_first else pick(acc, new)
        return np.where(started, both.astype(np.int64), new)

    # Line operation (W): acc = acc (op) input, in column order.
    line: np.ndarray | None = None
    started = np.zeros(cols.shape[0], dtype=bool)
    for kx in range(kw):
        real = col_ok[:, kx]
        value = combine(line, x[:, :, cols[:, kx]], started, new_first=False)
        if average:
            value = fp.fp17_add(value, col_pads[0][:, kx]).astype(np.int64)
            value = fp.fp17_add(value, col_pads[1][:, kx]).astype(np.int64)
        line = value if line is None else np.where(real, value, line)
        started |= real
    # Stage 0 (H): acc = line row (op) acc, in row order.
    assert line is not None
    acc: np.ndarray | None = None
    started = np.zeros(rows.shape[0], dtype=bool)
    for ky in range(kh):
        real = row_ok[:, ky][:, None]
        value = combine(acc, line[:, rows[:, ky], :], started[:, None], new_first=True)
        if average:
            value = fp.fp17_add(value, row_pads[0][:, ky][:, None]).astype(np.int64)
            value = fp.fp17_add(value, row_pads[1][:, ky][:, None]).astype(np.int64)
        acc = value if acc is None else np.where(real, value, acc)
        started |= row_ok[:, ky]
    assert acc is not None
    if not average:
        return acc
    # Stage 1: sum * recip_w * recip_h in FP17, narrowed to fp16.
    scaled = fp.fp17_mul(fp.fp17_mul(acc, cfg.recip_width & FP17_MASK), cfg.recip_height & FP17_MASK)
    return fp.fp17_to_fp16(scaled).astype(np.int64)


def nan_inf_counts(bits: np.ndarray) -> tuple[int, int]:
    """(NaN, Inf) lanes among fp16 patterns (the cmod's D_*_NUM statistics)."""
    special = (bits & 0x7C00) == 0x7C00
    nan = special & ((bits & 0x3FF) != 0)
    return int(nan.sum()), int((special & ~nan).sum())


# ---- the engine ----------------------------------------------------------------------------------
def _flying(views: Views) -> bool:
    return views["PDP"].D_OPERATION_MODE_CFG.FLYING_MODE == ON_FLYING


def source(views: Views) -> str | None:
    return "SDP" if _flying(views) else None


def rdma_needed(views: Views) -> bool:
    return not _flying(views)


def run(ctx: OpContext) -> None:
    pdp = ctx.regs["PDP"]
    dtype = check_format(pdp.D_DATA_FORMAT, "INPUT_DATA", ctx.hw)
    pool_cfg = Pooling.from_view(pdp, dtype, ctx.hw.pdp_average)
    channels = pdp.D_DATA_CUBE_IN_CHANNEL.CUBE_IN_CHANNEL + 1
    height = pdp.D_DATA_CUBE_IN_HEIGHT.CUBE_IN_HEIGHT + 1
    width = pdp.D_DATA_CUBE_IN_WIDTH.CUBE_IN_WIDTH + 1
    out_height = pdp.D_DATA_CUBE_OUT_HEIGHT.CUBE_OUT_HEIGHT + 1
    out_width = pdp.D_DATA_CUBE_OUT_WIDTH.CUBE_OUT_WIDTH + 1
    out_channels = pdp.D_DATA_CUBE_OUT_CHANNEL.CUBE_OUT_CHANNEL + 1
    if out_channels != channels:
        raise pdp.D_DATA_CUBE_OUT_CHANNEL.fail("CUBE_OUT_CHANNEL", f"{out_channels} channels out, {channels} in")
    kw, kh = pool_cfg.kernel_width, pool_cfg.kernel_height
    want_w = pooled_size(width, kw, pool_cfg.stride_width, pool_cfg.pad_left, pool_cfg.pad_right)
    want_h = pooled_size(height, kh, pool_cfg.stride_height, pool_cfg.pad_top, pool_cfg.pad_bottom)
    if out_width != want_w:
        raise pdp.D_DATA_CUBE_OUT_WIDTH.fail(
            "CUBE_OUT_WIDTH",
            f"width {width}, kernel {kw}, stride {pool_cfg.stride_width}, pads {pool_cfg.pad_left}/"
            f"{pool_cfg.pad_right} give {want_w} outputs, not {out_width}",
        )
    if out_height != want_h:
        raise pdp.D_DATA_CUBE_OUT_HEIGHT.fail(
            "CUBE_OUT_HEIGHT",
            f"height {height}, kernel {kh}, stride {pool_cfg.stride_height}, pads {pool_cfg.pad_top}/"
            f"{pool_cfg.pad_bottom} give {want_h} outputs, not {out_height}",
        )
    parts = splits(pdp, pool_cfg, width, out_width)
    _check_flush(pdp, pool_cfg, height, parts[-1])
    if pool_cfg.method == AVERAGE and pool_cfg.pad_top and unread_rows(pdp):
        raise pdp.D_DATA_CUBE_IN_HEIGHT.fail(
            "CUBE_IN_HEIGHT",
            f"{height} rows leave {unread_rows(pdp)} below the last window of an AVERAGE with top padding: NVDLA's "
            "RTL then adds other pad values (measured, not modelled)",
        )
    atom = ctx.hw.atom_elements(dtype)  # type: ignore[arg-type]
    nan_in = inf_in = 0

    if _flying(ctx.regs):
        if len(parts) > 1:
            raise pdp.D_OPERATION_MODE_CFG.fail("SPLIT_NUM", "split-width mode needs input from memory (OFF_FLYING)")
        in_layout = CubeLayout(channels, height, width, 0, 0, atom, BYTES_PER_ELEMENT[dtype])
        x = _flying_input(ctx, pdp, dtype, (in_layout.padded_channels, height, width))
    else:
        rdma = ctx.regs["PDP_RDMA"]
        _check_rdma(rdma, pdp)
        space, base, in_layout = feature_cube(
            ctx.hw, ctx.mem, rdma, "SRC", "D_SRC_RAM_CFG", channels, height, width, dtype  # type: ignore[arg-type]
        )
        if in_layout.padded_channels * height * width > CHUNK_ELEMENTS:
            counts = _run_in_blocks(ctx, pdp, pool_cfg, parts, space, base, in_layout, out_height, out_width, dtype)
            if counts is not None:
                for name, value in zip(("D_NAN_INPUT_NUM", "D_INF_INPUT_NUM", "D_NAN_OUTPUT_NUM"), counts):
                    ctx.report("PDP", name, value)
                return None
        x, nan_in, inf_in = _screen_fp16(read_cube(space, base, in_layout, signed=dtype != "fp16"), pdp, parts, dtype)

    out = np.empty((in_layout.padded_channels, out_height, out_width), dtype=np.int64)
    for part in parts:
        sub = x[:, :, part.in_start : part.in_start + part.in_width]
        out[:, :, part.out_start : part.out_start + part.out_width] = pool(
            sub, pool_cfg, out_height, part.out_width, part.pad_left
        )
    space, base, out_layout = feature_cube(
        ctx.hw, ctx.mem, pdp, "DST", "D_DST_RAM_CFG", channels, out_height, out_width, dtype  # type: ignore[arg-type]
    )
    write_cube(space, base, out_layout, out)
    nan_out = nan_inf_counts(out)[0] if dtype == "fp16" else 0
    ctx.report("PDP", "D_NAN_INPUT_NUM", nan_in)
    ctx.report("PDP", "D_INF_INPUT_NUM", inf_in)
    ctx.report("PDP", "D_NAN_OUTPUT_NUM", nan_out)
    return None


def _screen_fp16(x: np.ndarray, pdp: RegView, parts: list[Split], dtype: str) -> tuple[np.ndarray, int, int]:
    """(x with NaNs flushed when D_NAN_FLUSH_TO_ZERO asks, NaN inputs, Inf inputs) of fetched rows; fp16 only."""
    nan_in = inf_in = 0
    if dtype != "fp16":
        return x, 0, 0
    for part in parts:  # every atom the RDMA fetches, split overlaps again
        nan, inf = nan_inf_counts(x[:, :, part.in_start : part.in_start + part.in_width])
        nan_in, inf_in = nan_in + nan, inf_in + inf
    if pdp.D_NAN_FLUSH_TO_ZERO.NAN_TO_ZERO:
        x = np.where(((x & 0x7C00) == 0x7C00) & ((x & 0x3FF) != 0), 0, x)
    return x, nan_in, inf_in


#: Input elements (held as int64, several copies while pooling) above which a cube from memory is pooled one
#: surface and a band of output rows at a time: a legal 2048x2048x64 cube is 256 MiB of int8 but would be
#: gigabytes of int64 in one pass. Bands are bit-exact: each output row only reads its own window's rows.
CHUNK_ELEMENTS = 1 << 21


def _run_in_blocks(ctx: OpContext, pdp: RegView, cfg: Pooling, parts: list[Split], space, base: int,
                   in_layout: CubeLayout, out_height: int, out_width: int,
                   dtype: str) -> tuple[int, int, int] | None:
    """Pool a large cube from memory in (surface, band of output rows) blocks, each input row fetched once
    (rows shared by two bands are kept), and write each block's output. Returns the (NaN in, Inf in, NaN out)
    counts, or None (nothing done) when input and output overlap in memory: then one pass must read it all
    before anything is written."""
    channels, height, width, atom = in_layout.channels, in_layout.height, in_layout.width, in_layout.atom
    out_space, out_base, out_layout = feature_cube(
        ctx.hw, ctx.mem, pdp, "DST", "D_DST_RAM_CFG", channels, out_height, out_width, dtype  # type: ignore[arg-type]
    )
    if base < out_base + out_layout.span() and out_base < base + in_layout.span():
        return None
    kh, sh, pt = cfg.kernel_height, cfg.stride_height, cfg.pad_top
    _, row_ok = _taps(out_height, kh, sh, pt, height)
    for part in parts:  # the checks pool() makes, for the whole cube before the first block is written
        _, col_ok = _taps(part.out_width, cfg.kernel_width, cfg.stride_width, part.pad_left, part.in_width)
        if not (col_ok.any(axis=1).all() and row_ok.any(axis=1).all()):
            raise ConfigError("PDP.D_POOLING_PADDING_CFG", "a pooling window holds no input data")
    band = max(1, CHUNK_ELEMENTS // (atom * width * sh))
    nan_in = inf_in = nan_out = 0
    for surface in range(in_layout.surfaces):
        lanes = min(atom, channels - surface * atom)
        in_surface = base + surface * in_layout.surf_stride
        held, held_from, fetched = None, 0, 0  # rows [held_from, fetched) of this surface, as int64
        for oy0 in range(0, out_height, band):
            oy1 = min(out_height, oy0 + band)
            first = oy0 * sh - pt  # the band's first window row (negative: top padding)
            r0 = max(0, first)
            r1 = height if oy1 == out_height else min(height, (oy1 - 1) * sh - pt + kh)
            if r1 > fetched:  # fetch every row once, in order, also rows no window uses (as the RDMA does)
                rows = replace(in_layout, channels=lanes, height=r1 - fetched)
                new = read_cube(space, in_surface + fetched * in_layout.line_stride, rows, signed=dtype != "fp16")
                new, nan, inf = _screen_fp16(new, pdp, parts, dtype)
                nan_in, inf_in = nan_in + nan, inf_in + inf
                if held is None:
                    held, held_from = new, fetched
                else:  # drop the rows above this band's first window
                    keep = max(held_from, min(r0, fetched))
                    held, held_from = np.concatenate([held[:, keep - held_from :], new], axis=1), keep
                fetched = r1
            x = held[:, r0 - held_from : r1 - held_from]
            band_cfg = replace(cfg, pad_top=r0 - first)
            out = np.empty((x.shape[0], oy1 - oy0, out_width), dtype=np.int64)
            for part in parts:
                out[:, :, part.out_start : part.out_start + part.out_width] = pool(
                    x[:, :, part.in_start : part.in_start + part.in_width], band_cfg, oy1 - oy0, part.out_width,
                    part.pad_left,
                )
            if dtype == "fp16":
                nan_out += nan_inf_counts(out)[0]
            block = replace(out_layout, channels=lanes, height=oy1 - oy0)
            write_cube(out_space, out_base + surface * out_layout.surf_stride + oy0 * out_layout.line_stride,
                       block, out)
    return nan_in, inf_in, nan_out


def _check_flush(pdp: RegView, cfg: Pooling, height: int, last: Split) -> None:
    """Refuse right/bottom padding the RTL's flush count gets wrong (``flush_counts``): a pad the last
    window does not reach, beyond what the stride absorbs."""
    axes = (
        ("PAD_RIGHT", "column", last.in_width, cfg.kernel_width, cfg.stride_width, last.pad_left, cfg.pad_right),
        ("PAD_BOTTOM", "row", height, cfg.kernel_height, cfg.stride_height, cfg.pad_top, cfg.pad_bottom),
    )
    for name, what, size, kernel, stride, before, after in axes:
        rtl, real = flush_counts(size, kernel, stride, before, after)
        # cal2d flushing too many rows is harmless (last_pooling_flag starts no window past the input; measured
        # on the RTL); too few hangs it. cal1d gets both wrong.
        if rtl < real or (rtl > real and name == "PAD_RIGHT"):
            effect = "writes a wrong output" if rtl > real else "never finishes (no PDP done)"
            raise pdp.D_POOLING_PADDING_CFG.fail(
                name,
                f"{after} with kernel {kernel}, stride {stride}: the last window does not reach the last padded "
                f"{what}; NVDLA's PDP flushes {rtl} outputs after the last input {what} where {real} end there, "
                f"and {effect}",
            )


def _flying_input(ctx: OpContext, pdp: RegView, dtype: str, shape: tuple[int, int, int]) -> np.ndarray:
    """The cube SDP hands over (module docstring: int64 values, or fp16 patterns in a float16 array)."""
    fmt = pdp.D_DATA_FORMAT
    sdp = ctx.regs.get("SDP")
    if sdp is not None:
        sent = sdp.D_DATA_FORMAT.OUT_PRECISION
        if sent != fmt.INPUT_DATA:
            raise fmt.fail(
                "INPUT_DATA", f"{fmt.INPUT_DATA}, but SDP sends D_DATA_FORMAT.OUT_PRECISION={sent} on the fly"
            )
    x = ctx.flying_input
    if x is None or x.shape != shape:
        got = None if x is None else x.shape
        raise pdp.D_DATA_CUBE_IN_WIDTH.fail("CUBE_IN_WIDTH", f"SDP delivers a cube of shape {got}, PDP expects {shape}")
    half = x.dtype in (np.float16, np.uint16)
    if half != (dtype == "fp16"):
        raise fmt.fail("INPUT_DATA", f"{dtype} pooling, but SDP delivers a {x.dtype} cube")
    return x.view(np.uint16).astype(np.int64) if half else x.astype(np.int64)


def _check_rdma(rdma: RegView, pdp: RegView) -> None:
    """PDP_RDMA must fetch what the PDP core consumes; a mismatch hangs or misaligns the hardware.

    PDP_RDMA.D_FLYING_MODE is not checked: NVDLA's firmware (``pdp.c``) never writes it, leaving the
    reset value ON_FLYING while it enables the RDMA for pooling from memory, and NVDLA's regression
    goldens come from exactly that programming. Enabling the RDMA is what makes it fetch."""
    pairs = [
        (rdma.D_DATA_CUBE_IN_WIDTH, "CUBE_IN_WIDTH", pdp.D_DATA_CUBE_IN_WIDTH.CUBE_IN_WIDTH),
        (rdma.D_DATA_CUBE_IN_HEIGHT, "CUBE_IN_HEIGHT", pdp.D_DATA_CUBE_IN_HEIGHT.CUBE_IN_HEIGHT),
        (rdma.D_DATA_CUBE_IN_CHANNEL, "CUBE_IN_CHANNEL", pdp.D_DATA_CUBE_IN_CHANNEL.CUBE_IN_CHANNEL),
        (rdma.D_DATA_FORMAT, "INPUT_DATA", pdp.D_DATA_FORMAT.INPUT_DATA),
        (rdma.D_OPERATION_MODE_CFG, "SPLIT_NUM", pdp.D_OPERATION_MODE_CFG.SPLIT_NUM),
    ]
    if pdp.D_OPERATION_MODE_CFG.SPLIT_NUM:
        # Only split mode uses the RDMA's own kernel and partial-width registers (for the overlap).
        pairs += [
            (rdma.D_POOLING_KERNEL_CFG, "KERNEL_WIDTH", pdp.D_POOLING_KERNEL_CFG.KERNEL_WIDTH),
            (rdma.D_POOLING_KERNEL_CFG, "KERNEL_STRIDE_WIDTH", pdp.D_POOLING_KERNEL_CFG.KERNEL_STRIDE_WIDTH),
        ] + [
            (rdma.D_PARTIAL_WIDTH_IN, f, getattr(pdp.D_PARTIAL_WIDTH_IN, f))
            for f in ("PARTIAL_WIDTH_IN_FIRST", "PARTIAL_WIDTH_IN_MID", "PARTIAL_WIDTH_IN_LAST")
        ]
    for reg, name, want in pairs:
        got = getattr(reg, name)
        if got != want:
            raise reg.fail(name, f"is {got}, but the PDP core is programmed for {want}")


ENGINE = register(
    Engine(
        name="PDP",
        units=("PDP",),
        rdma="PDP_RDMA",
        done_bits=unit_done_bits("PDP"),
        run=run,
        source=source,
        rdma_needed=rdma_needed,
    )
)
