"""Batched direct convolution: ``emit_conv`` plus the batch registers (CDMA/CSC/CACC batch number, CDMA and
SDP batch strides, SDP's BATCH_NUMBER), written before the enables as NVDLA's firmware does."""
from __future__ import annotations

from compiler.codegen.conv import emit_conv
from compiler.codegen.program import Cube, OperandPlacement
from golden.engines.conv_datapath import cbuf_geometry, entries_per_slice
from golden.program import Loc, RegProgram, RegWrite
from golden.regs import UNITS


def emit_batch_conv(p: RegProgram, src: Cube, weights: Loc, kernel: tuple[int, int, int, int], dst: Cube, conv,
                    sdp, operands: dict[str, OperandPlacement] | None, *, batches: int, src_stride: int,
                    dst_stride: int) -> None:
    """``batches`` convolutions of one kernel: batch b read at ``src`` + b * ``src_stride``, written by SDP
    at ``dst`` + b * ``dst_stride``. The data banks hold every batch's input."""
    data_banks = -(-batches * src.height * entries_per_slice(p.hw, src.channels, src.width) // cbuf_geometry(p.hw)[1])
    body = RegProgram(p.hw, strict=p.strict)
    emit_conv(body, src, weights, kernel, dst, conv, sdp, operands, data_banks=data_banks)
    mode = UNITS["SDP"].register("D_FEATURE_MODE_CFG")
    batch = mode.field("BATCH_NUMBER")
    staged = False
    for w in body.writes:
        if w.name == "D_OP_ENABLE" and not staged:
            p.reg("CDMA", "D_BATCH_NUMBER", BATCHES=batches - 1)
            p.reg("CDMA", "D_BATCH_STRIDE", src_stride)
            p.reg("CSC", "D_BATCH_NUMBER", BATCHES=batches - 1)
            p.reg("CACC", "D_BATCH_NUMBER", BATCHES=batches - 1)
            p.reg("SDP", "D_DST_BATCH_STRIDE", dst_stride)
            staged = True
        if w.register == mode:
            w = RegWrite(mode, (w.value & ~batch.mask) | batch.encode(batches - 1), w.reloc)
        p.writes.append(w)
