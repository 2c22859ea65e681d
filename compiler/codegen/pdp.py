"""PDP (pooling) from memory to memory."""
from __future__ import annotations

from compiler.codegen.program import Cube, pointers
from golden.program import RegProgram
from compiler.hwparams import PdpParams

METHODS = {"avg": 0, "max": 1, "min": 2}


def used_geometry(h: int, w: int, oh: int, ow: int, prm: PdpParams) -> tuple[int, int, int]:
    """(input rows, bottom pad, right pad) the windows of ``dst`` really use.

    NVDLA's PDP (nv_small RTL, docs/golden-semantics.md "PDP") must not be given input rows below its last
    window (the next PDP then runs wrong or hangs) nor right padding its last window does not reach (cal1d
    flushes floor(PAD_RIGHT/stride) outputs after the last column), nor bottom padding a short input's
    windows do not reach (cal2d hangs). The outputs are the same: those rows and pads are in no window."""
    (kh, kw), (sh, sw), (pt, pl, _, _) = prm.kernel, prm.stride, prm.pad
    rows_end = (oh - 1) * sh + kh - pt  # one past the last row (padded rows beyond h) of the last window
    cols_end = (ow - 1) * sw + kw - pl
    return min(h, rows_end), max(0, rows_end - h), max(0, cols_end - w)


def emit_pdp(p: RegProgram, src: Cube, dst: Cube, prm: PdpParams, ram_type: int = 1, crop: bool = True,
             crop_rows: bool = True, flying: bool = False) -> None:
    """PDP from ``src`` to ``dst``; ``crop`` (always, but for tests of the raw geometry) reads only the rows
    (unless not ``crop_rows``: on the fly SDP sends them all) and pads the windows use (``used_geometry``).
    ``flying``: the input comes from SDP on the fly (``src`` gives its shape only); PDP_RDMA stays idle."""
    rdma = () if flying else ("PDP_RDMA",)
    crop_rows = crop_rows and not flying
    pointers(p, *rdma, "PDP")
    (kh, kw), (sh, sw), (pt, pl, pb, pr) = prm.kernel, prm.stride, prm.pad
    c, h, w = src.channels, src.height, src.width
    if crop:
        used_h, pb, pr = used_geometry(h, w, dst.height, dst.width, prm)
        h = used_h if crop_rows else h
    for unit in (*rdma, "PDP"):
        p.reg(unit, "D_DATA_CUBE_IN_WIDTH", w - 1)
        p.reg(unit, "D_DATA_CUBE_IN_HEIGHT", h - 1)
        p.reg(unit, "D_DATA_CUBE_IN_CHANNEL", c - 1)
        p.addr(unit, "D_SRC_BASE_ADDR_LOW", src.loc)
        p.reg(unit, "D_SRC_LINE_STRIDE", src.line_stride)
        p.reg(unit, "D_SRC_SURFACE_STRIDE", src.surface_stride)
        p.reg(unit, "D_PARTIAL_WIDTH_IN", PARTIAL_WIDTH_IN_FIRST=w - 1)
    if not flying:
        p.reg("PDP_RDMA", "D_SRC_RAM_CFG", SRC_RAM_TYPE=ram_type)
        p.reg("PDP_RDMA", "D_DATA_FORMAT", INPUT_DATA=0)  # int8 (several units reset to int16)
    p.reg("PDP", "D_DATA_FORMAT", INPUT_DATA=0)
    if not flying:
        p.reg("PDP_RDMA", "D_FLYING_MODE", FLYING_MODE=1)
        p.reg("PDP_RDMA", "D_POOLING_KERNEL_CFG", KERNEL_WIDTH=kw - 1, KERNEL_STRIDE_WIDTH=sw - 1)
        p.reg("PDP_RDMA", "D_POOLING_PADDING_CFG", PAD_WIDTH=pl)
    p.reg("PDP", "D_DATA_CUBE_OUT_WIDTH", dst.width - 1)
    p.reg("PDP", "D_DATA_CUBE_OUT_HEIGHT", dst.height - 1)
    p.reg("PDP", "D_DATA_CUBE_OUT_CHANNEL", c - 1)
    p.reg("PDP", "D_PARTIAL_WIDTH_OUT", PARTIAL_WIDTH_OUT_FIRST=dst.width - 1)
    p.reg("PDP", "D_OPERATION_MODE_CFG", POOLING_METHOD=METHODS[prm.method], FLYING_MODE=int(not flying))
    p.reg("PDP", "D_POOLING_KERNEL_CFG", KERNEL_WIDTH=kw - 1, KERNEL_HEIGHT=kh - 1,
          KERNEL_STRIDE_WIDTH=sw - 1, KERNEL_STRIDE_HEIGHT=sh - 1)
    p.reg("PDP", "D_POOLING_PADDING_CFG", PAD_LEFT=pl, PAD_TOP=pt, PAD_RIGHT=pr, PAD_BOTTOM=pb)
    p.reg("PDP", "D_RECIP_KERNEL_WIDTH", prm.recip_w)
    p.reg("PDP", "D_RECIP_KERNEL_HEIGHT", prm.recip_h)
    for i, v in enumerate(prm.pad_values, 1):
        p.reg("PDP", f"D_POOLING_PADDING_VALUE_{i}_CFG", v & 0x7FFFF)
    p.addr("PDP", "D_DST_BASE_ADDR_LOW", dst.loc)
    p.reg("PDP", "D_DST_LINE_STRIDE", dst.line_stride)
    p.reg("PDP", "D_DST_SURFACE_STRIDE", dst.surface_stride)
    p.reg("PDP", "D_DST_RAM_CFG", DST_RAM_TYPE=ram_type)
    if not flying:
        p.reg("PDP_RDMA", "D_OP_ENABLE", 1)
    p.reg("PDP", "D_OP_ENABLE", 1)
