"""PDP: planar pooling (max, min, average) over each channel, int8 (NVDLA_NOTES §4 PDP).

The model follows NVDLA's cmod (``cmod/pdp/NV_NVDLA_pdp.cpp``) and is checked against the nv_small trace
tests bit for bit:

- Input comes from the **PDP_RDMA** registers (base, strides, size, RAM type) when off-flying, or from
  SDP on the fly (``FLYING_MODE=ON_FLYING``, which is 0 in the RDL encoding).
- Output (ox, oy) covers input columns ``[ox*sw - pad_left, +kw)`` and rows ``[oy*sh - pad_top, +kh)``.
- MAX/MIN take only the real taps; padding never takes part.
- AVERAGE accumulates in an int16 line buffer (all sums wrap mod 2^16). A window with ``n`` padded
  columns adds ``PAD_VALUE_{n}X`` once per real row, and ``m`` padded rows add ``PAD_VALUE_{m}X * kw``;
  then ``out = rha(rha(t*RECIP_KERNEL_WIDTH, 16)*RECIP_KERNEL_HEIGHT, 16)`` and the low byte is stored.
- Split-width mode pools each split on its own sub-cube (split i>0 re-reads ``kw - sw`` columns of its
  left neighbour, with no left padding; only the first split pads left and only the last pads right).
  With consistent partial widths (checked here) this equals unsplit pooling.

The layout/DMA helpers at the bottom are shared with ``cdp.py``.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from golden.arith import rha, sign_extend
from golden.engines import Engine, OpContext, Views, register
from golden.errors import ConfigError
from golden.dma import check_int8, feature_cube
from golden.layout import CubeLayout, read_cube, write_cube
from golden.regs import RegValue, RegView

#: ``D_OPERATION_MODE_CFG.FLYING_MODE`` (and PDP_RDMA ``D_FLYING_MODE``): 0 ON_FLYING (SDP), 1 OFF_FLYING.
ON_FLYING, OFF_FLYING = 0, 1
#: ``D_OPERATION_MODE_CFG.POOLING_METHOD``.
AVERAGE, MAX, MIN = 0, 1, 2
METHOD_NAMES = {AVERAGE: "average", MAX: "max", MIN: "min"}
#: Largest pooling kernel; the KERNEL_WIDTH/HEIGHT fields could encode 16.
MAX_KERNEL = 8
#: Width (bits) of the int8 sign extension of PAD_VALUE_1X..7X (cmod ``int_sign_extend`` sign bits 7..10).
PAD_VALUE_BITS = (8, 9, 10, 10, 11, 11, 11)
#: ``D_DATA_FORMAT`` encodings.


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
    recip_width: int  # unsigned 0.16 fixed point (17-bit field)
    recip_height: int
    #: PAD_VALUE_1X..7X as the int16 line buffer sees them (index n-1 for n padded taps).
    pad_values: tuple[int, ...]

    @classmethod
    def from_view(cls, pdp: RegView) -> "Pooling":
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
        pad_values = tuple(
            _pad_value(getattr(pdp, f"D_POOLING_PADDING_VALUE_{n}_CFG"), f"PAD_VALUE_{n}X", bits)
            for n, bits in enumerate(PAD_VALUE_BITS, start=1)
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
        )



def pooled_size(size: int, kernel: int, stride: int, pad_before: int, pad_after: int) -> int:
    """Outputs whose windows fit the padded extent (0 if none does)."""
    span = pad_before + size + pad_after - kernel
    return span // stride + 1 if span >= 0 else 0


def _pad_value(reg: RegValue, name: str, bits: int) -> int:
    """PAD_VALUE_nX as the cmod's int_sign_extend leaves it in the int16 accumulator: the sign bit
    ``bits-1`` is copied upwards, OR-ed with the whole 19-bit field, and the result wraps to 16 bits."""
    v = getattr(reg, name)
    ext = ~((1 << bits) - 1) if (v >> (bits - 1)) & 1 else 0
    return int(sign_extend(ext | v, 16))


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
    """Pool a (C, H, W) int8-valued cube to (C, out_height, out_width) int8 values, as the PDP does.

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
        acc = sign_extend(total + pad_sum[None, :, :], 16)  # the int16 line buffer wraps
        avg = rha(rha(acc * cfg.recip_width, 16) * cfg.recip_height, 16)
        return sign_extend(avg, 8)  # the low byte is stored

    better = np.maximum if cfg.method == MAX else np.minimum
    worst = np.iinfo(np.int64).min if cfg.method == MAX else np.iinfo(np.int64).max
    line = np.full(x.shape[:2] + (out_width,), worst, dtype=np.int64)
    for kx in range(kw):
        line = better(line, np.where(col_ok[:, kx], x[:, :, cols[:, kx]], worst))
    out = np.full(x.shape[:1] + (out_height, out_width), worst, dtype=np.int64)
    for ky in range(kh):
        out = better(out, np.where(row_ok[:, ky][:, None], line[:, rows[:, ky], :], worst))
    return out


# ---- the engine ----------------------------------------------------------------------------------
def _flying(views: Views) -> bool:
    return views["PDP"].D_OPERATION_MODE_CFG.FLYING_MODE == ON_FLYING


def source(views: Views) -> str | None:
    return "SDP" if _flying(views) else None


def rdma_needed(views: Views) -> bool:
    return not _flying(views)


def run(ctx: OpContext) -> None:
    pdp = ctx.regs["PDP"]
    check_int8(pdp.D_DATA_FORMAT, "INPUT_DATA", "PDP")
    pool_cfg = Pooling.from_view(pdp)
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
    atom = ctx.hw.atom_elements("int8")

    if _flying(ctx.regs):
        if len(parts) > 1:
            raise pdp.D_OPERATION_MODE_CFG.fail("SPLIT_NUM", "split-width mode needs input from memory (OFF_FLYING)")
        x = ctx.flying_input
        in_layout = CubeLayout(channels, height, width, 0, 0, atom)
        if x is None or x.shape != (in_layout.padded_channels, height, width):
            got = None if x is None else x.shape
            raise pdp.D_DATA_CUBE_IN_WIDTH.fail(
                "CUBE_IN_WIDTH", f"SDP delivers a cube of shape {got}, PDP expects {(in_layout.padded_channels, height, width)}"
            )
    else:
        rdma = ctx.regs["PDP_RDMA"]
        _check_rdma(rdma, pdp)
        space, base, in_layout = feature_cube(ctx.hw, ctx.mem, rdma, "SRC", "D_SRC_RAM_CFG", channels, height, width)
        x = read_cube(space, base, in_layout)

    out = np.empty((in_layout.padded_channels, out_height, out_width), dtype=np.int64)
    for part in parts:
        sub = x[:, :, part.in_start : part.in_start + part.in_width]
        out[:, :, part.out_start : part.out_start + part.out_width] = pool(
            sub, pool_cfg, out_height, part.out_width, part.pad_left
        )
    space, base, out_layout = feature_cube(ctx.hw, ctx.mem, pdp, "DST", "D_DST_RAM_CFG", channels, out_height, out_width)
    write_cube(space, base, out_layout, out)
    for reg in ("D_NAN_INPUT_NUM", "D_INF_INPUT_NUM", "D_NAN_OUTPUT_NUM"):
        ctx.report("PDP", reg, 0)  # floating-point statistics; always 0 for int8
    return None


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
        done_bits=(("PDP", 4),),
        run=run,
        source=source,
        rdma_needed=rdma_needed,
    )
)
