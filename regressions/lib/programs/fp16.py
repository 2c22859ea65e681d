"""Single-layer tests of fp16 SDP operations (nv_full), built from the fp16 reference's parameters.

An ``SdpFp16Layer`` holds the input cube as fp16 bit patterns and a
``regressions.lib.reference.sdp_fp16.Fp16Params``; ``program_sdp_fp16`` lays out the memory image (2-byte
fp16 elements, 16-channel atoms on nv_full, memory operands per stage) and takes the registers from the
compiler's fp16 SDP emitter (``compiler.codegen.sdp_fp16``), NaN/Inf and LUT/saturation counters on.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from compiler.codegen.pack import pack_feature, pack_operands, strides
from compiler.codegen.program import Cube, OperandPlacement
from compiler.codegen.sdp import stage_mem_use
from compiler.codegen.sdp_fp16 import FP16_STAGES, emit_sdp_fp16
from golden.config import HwConfig
from golden.program import RegProgram
from regressions.lib.programs import DST_BASE, OPERAND_BASE, SRC_BASE, LayerTest


@dataclass
class SdpFp16Layer:
    """An fp16 SDP operation from memory: ``x`` is (C, H, W) fp16 bits, ``params`` an ``Fp16Params``."""

    x: np.ndarray
    params: object
    #: Also enable the NaN/Inf counters (SDP_RDMA input, SDP output) and LUT/saturation counters.
    counters: bool = True


def atom_of(hw: HwConfig) -> int:
    return hw.atom_elements("fp16")


def _place_operands(prog: LayerTest, prm, c: int, h: int, w: int, atom: int) -> dict[str, OperandPlacement]:
    """Pack every stage's memory operands (fp16 bits, ALU first) from OPERAND_BASE on, 64 KiB apart."""
    base = OPERAND_BASE
    placed = {}
    for stage, _, _ in FP16_STAGES:
        st = getattr(prm, stage)
        alu_mem, mul_mem = stage_mem_use(st)
        if not (alu_mem or mul_mem):
            continue
        ops = ([np.asarray(st.alu_operand)] if alu_mem else []) + ([np.asarray(st.mul_operand)] if mul_mem else [])
        mode = "kernel" if ops[0].ndim == 1 else "element"
        if any(o.ndim != ops[0].ndim for o in ops):
            raise ValueError(f"{stage}: ALU and MUL memory operands share one DMA, so one mode (kernel/element)")
        data, oline, osurf = pack_operands([o & 0xFFFF for o in ops], c, h, w, atom, 2, mode)
        prog.memory.append((base, data))
        use = "both" if alu_mem and mul_mem else ("alu" if alu_mem else "mul")
        placed[stage] = OperandPlacement(base, mode, 2, use, oline, osurf)
        base += (len(data) + 0xFFFF) & ~0xFFFF
    return placed


def program_sdp_fp16(hw: HwConfig, layer: SdpFp16Layer) -> LayerTest:
    """Registers and memory of an fp16 SDP operation reading its input from memory."""
    atom = atom_of(hw)
    c, h, w = layer.x.shape
    line, surf = strides(c, h, w, atom, 2)
    prog = LayerTest(RegProgram(hw), intr="SDP_0")
    prog.memory.append((SRC_BASE, pack_feature(np.asarray(layer.x) & 0xFFFF, atom, 2)))
    prog.output = (DST_BASE, -(-c // atom) * surf)
    operands = _place_operands(prog, layer.params, c, h, w, atom)
    emit_sdp_fp16(prog.regs, Cube(SRC_BASE, c, h, w, line, surf), Cube(DST_BASE, c, h, w, line, surf), layer.params,
                  operands, layer.counters)
    return prog


def expected_bytes(out: np.ndarray, hw: HwConfig) -> bytes:
    """Output bytes of a (padded C, H, W) result of fp16 bits or int16 values, in the feature layout."""
    return pack_feature(np.asarray(out, dtype=np.int64), atom_of(hw), 2)


__all__ = ["SdpFp16Layer", "atom_of", "expected_bytes", "program_sdp_fp16"]
