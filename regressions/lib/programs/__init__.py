"""Register programs for single layers, built from mathematical parameters.

A ``LayerTest`` is the project's currency in small: a register program (``golden.program.RegProgram``)
plus the memory image it needs, and the output region to read back. It runs on a ``golden.Dla`` directly or becomes a
``.cfg`` trace for any target. The reference-math tests, the benchmarks and the fuzzers build their
operations here; the register writes come from the compiler's codegen (``compiler.codegen``) with fixed
addresses, so these tests exercise exactly what compiled networks program.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Sequence

import numpy as np

from compiler.codegen.cdp import emit_cdp
from compiler.codegen.conv import emit_conv
from compiler.codegen.pack import pack_dc_weights, pack_feature, pack_operands, strides
from compiler.codegen.pdp import emit_pdp
from compiler.codegen.program import Cube, OperandPlacement
from compiler.codegen.sdp import STAGES, stage_mem_use
from golden.config import HwConfig
from golden.lut import LutRegisters
from golden.program import RegProgram

#: Default memory map of a single-layer program (all in primary DRAM).
SRC_BASE = 0x8000_0000
OPERAND_BASE = 0x8100_0000
WEIGHT_BASE = 0x8200_0000
DST_BASE = 0x8400_0000


@dataclass
class LayerTest:
    """A single-layer test: a register program (fixed addresses), the memory image it needs, and the output
    bytes to read back once ``intr`` fired."""

    regs: RegProgram
    memory: list[tuple[int, bytes]] = field(default_factory=list)
    output: tuple[int, int] = (DST_BASE, 0)  # (address, size)
    intr: str = "SDP_0"

    @property
    def writes(self) -> list[tuple[str, int]]:
        """The program's writes as (NVDLA register name, value); assigning replaces the program."""
        return self.regs.absolute()

    @writes.setter
    def writes(self, writes: Sequence[tuple[str, int]]) -> None:
        self.regs = RegProgram.of(self.regs.hw, writes)

    def extend(self, regs: RegProgram) -> None:
        self.regs.writes += regs.writes

    def with_writes(self, writes: Sequence[tuple[str, int]]) -> "LayerTest":
        """A copy whose program is ``writes`` (tests patch single registers this way)."""
        return replace(self, regs=RegProgram.of(self.regs.hw, writes))

    def run(self, dla) -> bytes:
        """Load memory, write every register (engines fire on their OP_EN) and return the output bytes."""
        for addr, data in self.memory:
            dla.mem.write(addr, data)
        for name, value in self.writes:
            addr, _ = dla.map.resolve(name)
            dla.write_reg(addr, value)
        return dla.mem.dram.read_bytes(*self.output)

    def write_trace(self, directory: Path, name: str, crc: int) -> Path:
        """Save as an NVDLA ``.cfg`` trace (plus ``.dat`` files) checking ``crc`` on the output."""
        from runtime.trace import write_dat

        directory.mkdir(parents=True, exist_ok=True)
        lines = []
        for i, (addr, data) in enumerate(self.memory):
            write_dat(directory / f"{name}_{i}.dat", data)
            lines.append(f'mem_load(pri_mem, {addr:#x}, "{name}_{i}.dat");')
        lines += [f"reg_write({n}, {v:#x});" for n, v in self.writes]
        lines.append(f"intr_notify({self.intr}, sync_id_0);")
        lines.append(f"check_crc(sync_id_0, pri_mem, {self.output[0]:#x}, {self.output[1]:#x}, {crc:#010x});")
        cfg = directory / f"{name}.cfg"
        cfg.write_text("\n".join(lines) + "\n")
        return cfg


# ---- feature cubes ------------------------------------------------------------------------------------
def packed_cube(base: int, c: int, h: int, w: int, atom: int) -> Cube:
    line, surf = strides(c, h, w, atom)
    return Cube(base, c, h, w, line, surf)


# ---- PDP ------------------------------------------------------------------------------------------------
@dataclass
class PoolLayer:
    x: np.ndarray  # (C, H, W) int8 values
    method: str  # "max", "min", "avg"
    kernel: tuple[int, int]  # (kh, kw)
    stride: tuple[int, int]  # (sh, sw)
    pad: tuple[int, int, int, int] = (0, 0, 0, 0)  # top, left, bottom, right
    pad_values: Sequence[int] = (0,) * 7  # raw PAD_VALUE_1X..7X
    recip_w: int | None = None
    recip_h: int | None = None

    def out_hw(self) -> tuple[int, int]:
        _, h, w = self.x.shape
        (kh, kw), (sh, sw), (pt, pl, pb, pr) = self.kernel, self.stride, self.pad
        return (h + pt + pb - kh) // sh + 1, (w + pl + pr - kw) // sw + 1


def program_pdp(hw: HwConfig, layer: PoolLayer, crop: bool = True) -> LayerTest:
    """``crop=False`` keeps the layer's raw geometry (unused input rows and pads, ``emit_pdp``)."""
    from compiler.hwparams import PdpParams

    atom = hw.atom_elements()
    c, h, w = layer.x.shape
    oh, ow = layer.out_hw()
    (kh, kw) = layer.kernel
    p = LayerTest(RegProgram(hw), intr="PDP_0")
    p.memory.append((SRC_BASE, pack_feature(layer.x, atom)))
    dst = packed_cube(DST_BASE, c, oh, ow, atom)
    p.output = (DST_BASE, -(-c // atom) * dst.surface_stride)
    prm = PdpParams(layer.method, layer.kernel, layer.stride, layer.pad, tuple(layer.pad_values),
                    layer.recip_w if layer.recip_w is not None else 0x10000 // kw,
                    layer.recip_h if layer.recip_h is not None else 0x10000 // kh)
    regs = RegProgram(hw)
    emit_pdp(regs, packed_cube(SRC_BASE, c, h, w, atom), dst, prm, crop=crop)
    p.extend(regs)
    return p


# ---- CDP ------------------------------------------------------------------------------------------------
@dataclass
class LrnLayer:
    x: np.ndarray  # (C, H, W) int8 values
    lut: LutRegisters
    datin_offset: int = 0
    datin_scale: int = 1
    datin_shifter: int = 0
    normalz_len: int = 0
    sqsum_bypass: bool = False
    mul_bypass: bool = False
    datout_offset: int = 0
    datout_scale: int = 1
    datout_shifter: int = 0


def program_cdp(hw: HwConfig, layer: LrnLayer) -> LayerTest:
    atom = hw.atom_elements()
    c, h, w = layer.x.shape
    p = LayerTest(RegProgram(hw), intr="CDP_0")
    p.memory.append((SRC_BASE, pack_feature(layer.x, atom)))
    dst = packed_cube(DST_BASE, c, h, w, atom)
    p.output = (DST_BASE, -(-c // atom) * dst.surface_stride)
    regs = RegProgram(hw)
    emit_cdp(regs, packed_cube(SRC_BASE, c, h, w, atom), dst, layer)
    p.extend(regs)
    return p


# ---- SDP ------------------------------------------------------------------------------------------------
@dataclass
class SdpLayer:
    """An SDP operation from memory. ``params`` is a ``regressions.lib.reference.sdp.SdpParams``-like object
    with x1/x2/y stages, lut and output cvt; operands are ints (REG), (C,) arrays (MEM per kernel) or
    (C, H, W) arrays (MEM per element)."""

    x: np.ndarray  # (C, H, W) int8 values
    params: object
    operand_bytes: int = 2  # MEM operand element size, 1 or 2


def _operand_kind(op) -> str:
    return {0: "reg", 1: "kernel", 3: "element"}[np.asarray(op).ndim]


def place_operands(p: LayerTest, prm, c: int, h: int, w: int, atom: int, operand_bytes: int) -> dict[str, OperandPlacement]:
    """Pack every memory operand of ``prm`` into ``p.memory`` from OPERAND_BASE on; their placements."""
    base = OPERAND_BASE
    placed = {}
    for stage, _, _ in STAGES:
        st = getattr(prm, stage)
        alu_mem, mul_mem = stage_mem_use(st)
        if not (alu_mem or mul_mem):
            continue
        ops = ([np.asarray(st.alu_operand)] if alu_mem else []) + ([np.asarray(st.mul_operand)] if mul_mem else [])
        mode = _operand_kind(ops[0])
        size = 2 if stage == "y" else operand_bytes
        data, oline, osurf = pack_operands(ops, c, h, w, atom, size, mode)
        p.memory.append((base, data))
        placed[stage] = OperandPlacement(base, mode, size, "both" if alu_mem and mul_mem else ("alu" if alu_mem else "mul"),
                                         oline, osurf)
        base += (len(data) + 0xFFFF) & ~0xFFFF
    return placed


def program_sdp(hw: HwConfig, layer: SdpLayer) -> LayerTest:
    from compiler.codegen.sdp import emit_sdp, sdp_enables

    atom = hw.atom_elements()
    c, h, w = layer.x.shape
    p = LayerTest(RegProgram(hw), intr="SDP_0")
    p.memory.append((SRC_BASE, pack_feature(layer.x, atom)))
    dst = packed_cube(DST_BASE, c, h, w, atom)
    p.output = (DST_BASE, -(-c // atom) * dst.surface_stride)
    operands = place_operands(p, layer.params, c, h, w, atom, layer.operand_bytes)
    regs = RegProgram(hw)
    needs_rdma = emit_sdp(regs, packed_cube(SRC_BASE, c, h, w, atom), dst, layer.params, operands, enable=False)
    # The LUT and saturation counters on: coverage sees which LUT paths and saturation an example hit.
    regs.reg("SDP", "D_PERF_ENABLE", PERF_LUT_EN=1, PERF_SAT_EN=1)
    sdp_enables(regs, needs_rdma)
    p.extend(regs)
    return p


# ---- direct convolution (CDMA/CSC/CMAC/CACC -> SDP on the fly) -----------------------------------------------
@dataclass
class ConvLayer:
    x: np.ndarray  # (C, H, W) int8 values
    w: np.ndarray  # (K, C, R, S) int8 weights
    stride: tuple[int, int] = (1, 1)  # (sy, sx)
    dilation: tuple[int, int] = (1, 1)  # (dy, dx)
    pad: tuple[int, int] = (0, 0)  # (top, left); right/bottom padding follows from out_hw
    pad_value: int = 0
    out_hw: tuple[int, int] | None = None  # default: symmetric padding
    clip_truncate: int = 0
    cvt: tuple[int, int, int] | None = None  # CDMA input CVT (offset, scale, truncate)
    #: SDP output CVT (offset, scale, shift) applied on the fly; identity saturates to int8.
    out_cvt: tuple[int, int, int] = (0, 1, 0)

    def output_hw(self) -> tuple[int, int]:
        if self.out_hw is not None:
            return self.out_hw
        _, h, w = self.x.shape
        _, _, r, s = self.w.shape
        (sy, sx), (dy, dx), (pt, pl) = self.stride, self.dilation, self.pad
        return ((h + 2 * pt - ((r - 1) * dy + 1)) // sy + 1, (w + 2 * pl - ((s - 1) * dx + 1)) // sx + 1)


def program_conv(dla_or_hw, layer: ConvLayer, reuse=None) -> LayerTest | bytes:
    """LayerTest a direct convolution whose int32 CACC output SDP converts on the fly and writes.
    Given a ``Dla`` it runs the layer and returns the output bytes; given a HwConfig, the LayerTest.
    ``reuse`` (``compiler.codegen.conv.CbufReuse``) keeps its input or weights in the CBUF for the next
    convolution, or takes the previous one's."""
    from compiler.hwparams import SdpParams

    hw = dla_or_hw if isinstance(dla_or_hw, HwConfig) else dla_or_hw.hw
    atom = hw.atom_elements()
    c, h, w = layer.x.shape
    k, _, r, s = layer.w.shape
    oh, ow = layer.output_hw()
    p = LayerTest(RegProgram(hw), intr="SDP_0")
    p.memory += [(SRC_BASE, pack_feature(layer.x, atom)), (WEIGHT_BASE, pack_dc_weights(layer.w, hw))]
    dst = packed_cube(DST_BASE, k, oh, ow, atom)
    p.output = (DST_BASE, -(-k // atom) * dst.surface_stride)
    off, scale, shift = layer.out_cvt
    sdp = SdpParams(cvt_offset=off, cvt_scale=scale, cvt_shift=shift)
    regs = RegProgram(hw)
    emit_conv(regs, packed_cube(SRC_BASE, c, h, w, atom), WEIGHT_BASE, (k, c, r, s), dst, layer, sdp, reuse=reuse)
    p.extend(regs)
    if isinstance(dla_or_hw, HwConfig):
        return p
    return p.run(dla_or_hw)
