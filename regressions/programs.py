"""Register programs for single layers, built from mathematical parameters.

A ``Program`` is the project's currency in small: NVDLA register writes (by name) plus the memory image
they need, and the output region to read back. It runs on a ``golden.Dla`` directly or becomes a
``.cfg`` trace for any target. The reference-math tests, the benchmarks and the fuzzers build their
operations here; nothing in ``golden`` imports this module.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import numpy as np

from golden.config import HwConfig

#: Default memory map of a single-layer program (all in primary DRAM).
SRC_BASE = 0x8000_0000
OPERAND_BASE = 0x8100_0000
WEIGHT_BASE = 0x8200_0000
DST_BASE = 0x8400_0000


@dataclass
class Program:
    writes: list[tuple[str, int]] = field(default_factory=list)
    memory: list[tuple[int, bytes]] = field(default_factory=list)
    output: tuple[int, int] = (DST_BASE, 0)  # (address, size)
    intr: str = "SDP_0"

    def reg(self, unit: str, register: str, value: int = 0, **fields: int) -> None:
        from golden.regs import UNITS

        reg = UNITS[unit].register(register)
        word = reg.encode(**fields) if fields else value & 0xFFFFFFFF
        self.writes.append((reg.full_name, word))

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
def strides(c: int, h: int, w: int, atom: int, bpe: int = 1) -> tuple[int, int]:
    """Packed (line stride, surface stride) of a cube."""
    line = w * atom * bpe
    return line, line * h


def pack_feature(x: np.ndarray, atom: int, bpe: int = 1) -> bytes:
    """(C, H, W) ints -> NVDLA feature layout, line- and surface-packed, padding lanes zero."""
    c, h, w = x.shape
    surfaces = -(-c // atom)
    buf = np.zeros((surfaces * atom, h, w), dtype=np.int64)
    buf[:c] = x
    arr = buf.reshape(surfaces, atom, h, w).transpose(0, 2, 3, 1)  # surface, line, pixel, lane
    return np.ascontiguousarray(arr).astype({1: "<i1", 2: "<i2", 4: "<i4"}[bpe]).tobytes()


def unpack_feature(raw: bytes, c: int, h: int, w: int, atom: int, bpe: int = 1, lanes: bool = False) -> np.ndarray:
    """Inverse of ``pack_feature``; with ``lanes`` the padding lanes of the last surface are kept."""
    surfaces = -(-c // atom)
    dt = {1: "<i1", 2: "<i2", 4: "<i4"}[bpe]
    arr = np.frombuffer(raw[: surfaces * atom * h * w * bpe], dtype=dt).astype(np.int64)
    cube = arr.reshape(surfaces, h, w, atom).transpose(0, 3, 1, 2).reshape(surfaces * atom, h, w)
    return cube if lanes else cube[:c]


def _u32(v: int) -> int:
    return v & 0xFFFFFFFF


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


def program_pdp(hw: HwConfig, layer: PoolLayer) -> Program:
    atom = hw.atom_elements()
    c, h, w = layer.x.shape
    oh, ow = layer.out_hw()
    (kh, kw), (sh, sw), (pt, pl, pb, pr) = layer.kernel, layer.stride, layer.pad
    src_line, src_surf = strides(c, h, w, atom)
    dst_line, dst_surf = strides(c, oh, ow, atom)
    p = Program(intr="PDP_0")
    p.memory.append((SRC_BASE, pack_feature(layer.x, atom)))
    p.output = (DST_BASE, -(-c // atom) * dst_surf)
    method = {"avg": 0, "max": 1, "min": 2}[layer.method]
    for unit in ("PDP_RDMA", "PDP"):
        p.reg(unit, "S_POINTER", 0)
        p.reg(unit, "D_DATA_CUBE_IN_WIDTH", w - 1)
        p.reg(unit, "D_DATA_CUBE_IN_HEIGHT", h - 1)
        p.reg(unit, "D_DATA_CUBE_IN_CHANNEL", c - 1)
        p.reg(unit, "D_SRC_BASE_ADDR_LOW", SRC_BASE)
        p.reg(unit, "D_SRC_LINE_STRIDE", src_line)
        p.reg(unit, "D_SRC_SURFACE_STRIDE", src_surf)
        p.reg(unit, "D_PARTIAL_WIDTH_IN", PARTIAL_WIDTH_IN_FIRST=w - 1)
    p.reg("PDP_RDMA", "D_SRC_RAM_CFG", SRC_RAM_TYPE=1)
    p.reg("PDP_RDMA", "D_DATA_FORMAT", INPUT_DATA=0)  # int8 (several units reset to int16)
    p.reg("PDP", "D_DATA_FORMAT", INPUT_DATA=0)
    p.reg("PDP_RDMA", "D_FLYING_MODE", FLYING_MODE=1)
    p.reg("PDP_RDMA", "D_POOLING_KERNEL_CFG", KERNEL_WIDTH=kw - 1, KERNEL_STRIDE_WIDTH=sw - 1)
    p.reg("PDP_RDMA", "D_POOLING_PADDING_CFG", PAD_WIDTH=pl)
    p.reg("PDP", "D_DATA_CUBE_OUT_WIDTH", ow - 1)
    p.reg("PDP", "D_DATA_CUBE_OUT_HEIGHT", oh - 1)
    p.reg("PDP", "D_DATA_CUBE_OUT_CHANNEL", c - 1)
    p.reg("PDP", "D_PARTIAL_WIDTH_OUT", PARTIAL_WIDTH_OUT_FIRST=ow - 1)
    p.reg("PDP", "D_OPERATION_MODE_CFG", POOLING_METHOD=method, FLYING_MODE=1)
    p.reg("PDP", "D_POOLING_KERNEL_CFG", KERNEL_WIDTH=kw - 1, KERNEL_HEIGHT=kh - 1,
          KERNEL_STRIDE_WIDTH=sw - 1, KERNEL_STRIDE_HEIGHT=sh - 1)
    p.reg("PDP", "D_POOLING_PADDING_CFG", PAD_LEFT=pl, PAD_TOP=pt, PAD_RIGHT=pr, PAD_BOTTOM=pb)
    p.reg("PDP", "D_RECIP_KERNEL_WIDTH", layer.recip_w if layer.recip_w is not None else 0x10000 // kw)
    p.reg("PDP", "D_RECIP_KERNEL_HEIGHT", layer.recip_h if layer.recip_h is not None else 0x10000 // kh)
    for i, v in enumerate(layer.pad_values, 1):
        p.reg("PDP", f"D_POOLING_PADDING_VALUE_{i}_CFG", v & 0x7FFFF)
    p.reg("PDP", "D_DST_BASE_ADDR_LOW", DST_BASE)
    p.reg("PDP", "D_DST_LINE_STRIDE", dst_line)
    p.reg("PDP", "D_DST_SURFACE_STRIDE", dst_surf)
    p.reg("PDP", "D_DST_RAM_CFG", DST_RAM_TYPE=1)
    p.reg("PDP_RDMA", "D_OP_ENABLE", 1)
    p.reg("PDP", "D_OP_ENABLE", 1)
    return p


# ---- LUTs (SDP and CDP share the access protocol) ----------------------------------------------------------
def _lut_writes(p: Program, unit: str, le: Sequence[int], lo: Sequence[int]) -> None:
    for table_id, table in ((0, le), (1, lo)):
        p.reg(unit, "S_LUT_ACCESS_CFG", LUT_ADDR=0, LUT_TABLE_ID=table_id, LUT_ACCESS_TYPE=1)
        for v in table:
            p.reg(unit, "S_LUT_ACCESS_DATA", v & 0xFFFF)


def _le_function(f) -> int:
    return 0 if f in ("exp", "exponent", 0) else 1


def _program_lut(p: Program, unit: str, lut) -> None:
    """Tables and S_LUT_* settings of an SDP or CDP LUT. CDP's START/END are 38-bit (LOW + HIGH[5:0]
    registers), SDP's are single 32-bit registers."""
    _lut_writes(p, unit, lut.le_table, lut.lo_table)
    p.reg(unit, "S_LUT_CFG", LUT_LE_FUNCTION=_le_function(lut.le_function), LUT_UFLOW_PRIORITY=lut.uflow_priority,
          LUT_OFLOW_PRIORITY=lut.oflow_priority, LUT_HYBRID_PRIORITY=lut.hybrid_priority)
    p.reg(unit, "S_LUT_INFO", (lut.le_index_offset & 0xFF) | ((lut.le_index_select & 0xFF) << 8)
          | ((lut.lo_index_select & 0xFF) << 16))
    wide = unit == "CDP"
    for tab in ("le", "lo"):
        for end in ("start", "end"):
            v = getattr(lut, f"{tab}_{end}")
            name = f"S_LUT_{tab.upper()}_{end.upper()}"
            if wide:
                p.reg(unit, f"{name}_LOW", _u32(v))
                p.reg(unit, f"{name}_HIGH", (v >> 32) & 0x3F)
            else:
                p.reg(unit, name, _u32(v))
        p.reg(unit, f"S_LUT_{tab.upper()}_SLOPE_SCALE", (getattr(lut, f"{tab}_slope_uflow_scale") & 0xFFFF)
              | ((getattr(lut, f"{tab}_slope_oflow_scale") & 0xFFFF) << 16))
        p.reg(unit, f"S_LUT_{tab.upper()}_SLOPE_SHIFT", (getattr(lut, f"{tab}_slope_uflow_shift") & 0x1F)
              | ((getattr(lut, f"{tab}_slope_oflow_shift") & 0x1F) << 5))


# ---- CDP ------------------------------------------------------------------------------------------------
@dataclass
class LrnLayer:
    x: np.ndarray  # (C, H, W) int8 values
    lut: object  # regressions.reference.cdp.CdpLut
    datin_offset: int = 0
    datin_scale: int = 1
    datin_shifter: int = 0
    normalz_len: int = 0
    sqsum_bypass: bool = False
    mul_bypass: bool = False
    datout_offset: int = 0
    datout_scale: int = 1
    datout_shifter: int = 0


def program_cdp(hw: HwConfig, layer: LrnLayer) -> Program:
    atom = hw.atom_elements()
    c, h, w = layer.x.shape
    line, surf = strides(c, h, w, atom)
    lut = layer.lut
    p = Program(intr="CDP_0")
    p.memory.append((SRC_BASE, pack_feature(layer.x, atom)))
    p.output = (DST_BASE, -(-c // atom) * surf)
    p.reg("CDP_RDMA", "S_POINTER", 0)
    p.reg("CDP", "S_POINTER", 0)
    _program_lut(p, "CDP", lut)
    p.reg("CDP_RDMA", "D_DATA_CUBE_WIDTH", w - 1)
    p.reg("CDP_RDMA", "D_DATA_CUBE_HEIGHT", h - 1)
    p.reg("CDP_RDMA", "D_DATA_CUBE_CHANNEL", c - 1)
    p.reg("CDP_RDMA", "D_SRC_BASE_ADDR_LOW", SRC_BASE)
    p.reg("CDP_RDMA", "D_SRC_LINE_STRIDE", line)
    p.reg("CDP_RDMA", "D_SRC_SURFACE_STRIDE", surf)
    p.reg("CDP_RDMA", "D_SRC_DMA_CFG", SRC_RAM_TYPE=1)
    p.reg("CDP_RDMA", "D_DATA_FORMAT", INPUT_DATA=0)  # int8 (the reset value is int16)
    p.reg("CDP", "D_DATA_FORMAT", INPUT_DATA_TYPE=0)
    p.reg("CDP", "D_FUNC_BYPASS", SQSUM_BYPASS=int(layer.sqsum_bypass), MUL_BYPASS=int(layer.mul_bypass))
    p.reg("CDP", "D_DST_BASE_ADDR_LOW", DST_BASE)
    p.reg("CDP", "D_DST_LINE_STRIDE", line)
    p.reg("CDP", "D_DST_SURFACE_STRIDE", surf)
    p.reg("CDP", "D_DST_DMA_CFG", DST_RAM_TYPE=1)
    p.reg("CDP", "D_LRN_CFG", NORMALZ_LEN=layer.normalz_len)
    p.reg("CDP", "D_DATIN_OFFSET", layer.datin_offset & 0xFFFF)
    p.reg("CDP", "D_DATIN_SCALE", layer.datin_scale & 0xFFFF)
    p.reg("CDP", "D_DATIN_SHIFTER", layer.datin_shifter)
    p.reg("CDP", "D_DATOUT_OFFSET", _u32(layer.datout_offset))
    p.reg("CDP", "D_DATOUT_SCALE", layer.datout_scale & 0xFFFF)
    p.reg("CDP", "D_DATOUT_SHIFTER", layer.datout_shifter)
    p.reg("CDP_RDMA", "D_OP_ENABLE", 1)
    p.reg("CDP", "D_OP_ENABLE", 1)
    return p


# ---- SDP ------------------------------------------------------------------------------------------------
@dataclass
class SdpLayer:
    """An SDP operation from memory. ``params`` is a ``regressions.reference.sdp.SdpParams``-like object
    with x1/x2/y stages, lut and output cvt; operands are ints (REG), (C,) arrays (MEM per kernel) or
    (C, H, W) arrays (MEM per element)."""

    x: np.ndarray  # (C, H, W) int8 values
    params: object
    operand_bytes: int = 2  # MEM operand element size, 1 or 2


def _reg_operand(op, bits: int) -> int:
    """Register word of a REG operand; 0 when the operand comes from memory."""
    return int(op) & ((1 << bits) - 1) if np.ndim(op) == 0 else 0


def _operand_kind(op) -> str:
    a = np.asarray(op)
    return {0: "reg", 1: "kernel", 3: "element"}[a.ndim]


def _pack_operands(ops: list[np.ndarray], c: int, h: int, w: int, atom: int, size: int, mode: str) -> tuple[bytes, int, int]:
    """Interleave operand components (ALU then MUL) and pack them; returns (bytes, line, surface stride)."""
    comps = len(ops)
    lane = size * comps
    dt = {1: "<i1", 2: "<i2"}[size]
    if mode == "kernel":
        padded = -(-c // atom) * atom
        arr = np.zeros((padded, comps), dtype=np.int64)
        for i, op in enumerate(ops):
            arr[:c, i] = op
        return arr.astype(dt).tobytes(), 0, 0
    surfaces = -(-c // atom)
    arr = np.zeros((surfaces * atom, h, w, comps), dtype=np.int64)
    for i, op in enumerate(ops):
        arr[:c, :, :, i] = op
    arr = arr.reshape(surfaces, atom, h, w, comps).transpose(0, 2, 3, 1, 4)
    line = w * atom * lane
    return np.ascontiguousarray(arr).astype(dt).tobytes(), line, line * h


def program_sdp(hw: HwConfig, layer: SdpLayer) -> Program:
    atom = hw.atom_elements()
    c, h, w = layer.x.shape
    line, surf = strides(c, h, w, atom)
    prm = layer.params
    p = Program(intr="SDP_0")
    p.memory.append((SRC_BASE, pack_feature(layer.x, atom)))
    p.output = (DST_BASE, -(-c // atom) * surf)
    p.reg("SDP_RDMA", "S_POINTER", 0)
    p.reg("SDP", "S_POINTER", 0)
    lut = getattr(prm, "lut", None)
    if lut is not None and not prm.y.bypass and not prm.y.lut_bypass:
        _program_lut(p, "SDP", lut)
    for unit in ("SDP_RDMA", "SDP"):
        p.reg(unit, "D_DATA_CUBE_WIDTH", w - 1)
        p.reg(unit, "D_DATA_CUBE_HEIGHT", h - 1)
        p.reg(unit, "D_DATA_CUBE_CHANNEL", c - 1)
    p.reg("SDP_RDMA", "D_SRC_BASE_ADDR_LOW", SRC_BASE)
    p.reg("SDP_RDMA", "D_SRC_LINE_STRIDE", line)
    p.reg("SDP_RDMA", "D_SRC_SURFACE_STRIDE", surf)
    p.reg("SDP_RDMA", "D_SRC_DMA_CFG", SRC_RAM_TYPE=1)
    p.reg("SDP_RDMA", "D_FEATURE_MODE_CFG", 0)  # off-flying, int8 in/proc/out
    p.reg("SDP", "D_FEATURE_MODE_CFG", 0)
    p.reg("SDP", "D_DATA_FORMAT", PROC_PRECISION=0, OUT_PRECISION=0)
    base = OPERAND_BASE
    for stage, prefix, rdma in (("x1", "BS", "B"), ("x2", "BN", "N"), ("y", "EW", "E")):
        st = getattr(prm, stage)
        alu_mem = not st.bypass and not st.alu_bypass and _operand_kind(st.alu_operand) != "reg"
        mul_mem = not st.bypass and not st.mul_bypass and _operand_kind(st.mul_operand) != "reg"
        if alu_mem or mul_mem:
            ops = ([np.asarray(st.alu_operand)] if alu_mem else []) + ([np.asarray(st.mul_operand)] if mul_mem else [])
            mode = _operand_kind(ops[0].tolist() if ops[0].ndim == 0 else ops[0])
            size = 2 if stage == "y" else layer.operand_bytes
            data, oline, osurf = _pack_operands(ops, c, h, w, atom, size, mode)
            p.memory.append((base, data))
            use = 2 if alu_mem and mul_mem else (1 if alu_mem else 0)
            p.reg("SDP_RDMA", f"D_{rdma}RDMA_CFG", 0, **{
                f"{rdma}RDMA_DISABLE": 0, f"{rdma}RDMA_DATA_USE": use, f"{rdma}RDMA_DATA_SIZE": int(size == 2),
                f"{rdma}RDMA_DATA_MODE": int(mode == "element"), f"{rdma}RDMA_RAM_TYPE": 1})
            p.reg("SDP_RDMA", f"D_{prefix}_BASE_ADDR_LOW", base)
            p.reg("SDP_RDMA", f"D_{prefix}_LINE_STRIDE", oline)
            p.reg("SDP_RDMA", f"D_{prefix}_SURFACE_STRIDE", osurf)
            base += (len(data) + 0xFFFF) & ~0xFFFF
        else:
            p.reg("SDP_RDMA", f"D_{rdma}RDMA_CFG", 0, **{f"{rdma}RDMA_DISABLE": 1})
        if stage == "y":
            p.reg("SDP", "D_DP_EW_CFG", EW_BYPASS=int(st.bypass), EW_ALU_BYPASS=int(st.alu_bypass),
                  EW_ALU_ALGO=st.alu_algo, EW_MUL_BYPASS=int(st.mul_bypass), EW_MUL_PRELU=int(st.mul_prelu),
                  EW_LUT_BYPASS=int(st.lut_bypass))
            p.reg("SDP", "D_DP_EW_ALU_CFG", EW_ALU_SRC=int(alu_mem), EW_ALU_CVT_BYPASS=int(st.alu_cvt.bypass))
            p.reg("SDP", "D_DP_EW_ALU_SRC_VALUE", _reg_operand(st.alu_operand, 32))
            p.reg("SDP", "D_DP_EW_ALU_CVT_OFFSET_VALUE", _u32(st.alu_cvt.offset))
            p.reg("SDP", "D_DP_EW_ALU_CVT_SCALE_VALUE", st.alu_cvt.scale & 0xFFFF)
            p.reg("SDP", "D_DP_EW_ALU_CVT_TRUNCATE_VALUE", st.alu_cvt.truncate)
            p.reg("SDP", "D_DP_EW_MUL_CFG", EW_MUL_SRC=int(mul_mem), EW_MUL_CVT_BYPASS=int(st.mul_cvt.bypass))
            p.reg("SDP", "D_DP_EW_MUL_SRC_VALUE", _reg_operand(st.mul_operand, 32))
            p.reg("SDP", "D_DP_EW_MUL_CVT_OFFSET_VALUE", _u32(st.mul_cvt.offset))
            p.reg("SDP", "D_DP_EW_MUL_CVT_SCALE_VALUE", st.mul_cvt.scale & 0xFFFF)
            p.reg("SDP", "D_DP_EW_MUL_CVT_TRUNCATE_VALUE", st.mul_cvt.truncate)
            p.reg("SDP", "D_DP_EW_TRUNCATE_VALUE", st.truncate)
        else:
            p.reg("SDP", f"D_DP_{prefix}_CFG", 0, **{
                f"{prefix}_BYPASS": int(st.bypass), f"{prefix}_ALU_BYPASS": int(st.alu_bypass),
                f"{prefix}_ALU_ALGO": st.alu_algo, f"{prefix}_MUL_BYPASS": int(st.mul_bypass),
                f"{prefix}_MUL_PRELU": int(st.mul_prelu), f"{prefix}_RELU_BYPASS": int(st.relu_bypass)})
            p.reg("SDP", f"D_DP_{prefix}_ALU_CFG", 0, **{f"{prefix}_ALU_SRC": int(alu_mem),
                                                       f"{prefix}_ALU_SHIFT_VALUE": st.alu_shift})
            p.reg("SDP", f"D_DP_{prefix}_ALU_SRC_VALUE", _reg_operand(st.alu_operand, 16))
            p.reg("SDP", f"D_DP_{prefix}_MUL_CFG", 0, **{f"{prefix}_MUL_SRC": int(mul_mem),
                                                       f"{prefix}_MUL_SHIFT_VALUE": st.mul_shift})
            p.reg("SDP", f"D_DP_{prefix}_MUL_SRC_VALUE", _reg_operand(st.mul_operand, 16))
    p.reg("SDP", "D_DST_BASE_ADDR_LOW", DST_BASE)
    p.reg("SDP", "D_DST_LINE_STRIDE", line)
    p.reg("SDP", "D_DST_SURFACE_STRIDE", surf)
    p.reg("SDP", "D_DST_DMA_CFG", DST_RAM_TYPE=1)
    p.reg("SDP", "D_CVT_OFFSET", _u32(prm.cvt_offset))
    p.reg("SDP", "D_CVT_SCALE", prm.cvt_scale & 0xFFFF)
    p.reg("SDP", "D_CVT_SHIFT", prm.cvt_shift)
    needs_rdma = True  # input comes from memory
    if needs_rdma:
        p.reg("SDP_RDMA", "D_OP_ENABLE", 1)
    p.reg("SDP", "D_OP_ENABLE", 1)
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


def pack_dc_weights(w: np.ndarray, hw: HwConfig) -> bytes:
    """NVDLA direct-conv weight layout (NOTES §3): kernel groups of atomic K, channel groups of MAC
    atomic C, then r, s, k, c; partial groups unpadded; total rounded up to the CBUF width."""
    k_n, c_n, r_n, s_n = w.shape
    kf, cf = hw.mac_atomic_k, hw.mac_atomic_c
    parts = []
    for k0 in range(0, k_n, kf):
        for c0 in range(0, c_n, cf):
            blk = w[k0:k0 + kf, c0:c0 + cf]  # (k, c, r, s)
            parts.append(np.ascontiguousarray(blk.transpose(2, 3, 0, 1)).astype(np.int8).tobytes())
    raw = b"".join(parts)
    return raw + bytes(-len(raw) % hw.cbuf_bank_width)


def program_conv(dla_or_hw, layer: ConvLayer) -> Program | bytes:
    """Program a direct convolution whose int32 CACC output SDP converts on the fly and writes.
    Given a ``Dla`` it runs the layer and returns the output bytes; given a HwConfig, the Program."""
    from golden.config import HwConfig as _Hw

    hw = dla_or_hw if isinstance(dla_or_hw, _Hw) else dla_or_hw.hw
    atom = hw.atom_elements()
    c, h, w = layer.x.shape
    k, _, r, s = layer.w.shape
    oh, ow = layer.output_hw()
    line, surf = strides(c, h, w, atom)
    out_line, out_surf = strides(k, oh, ow, atom)
    from golden.engines.conv import entries_per_slice

    eps = entries_per_slice(hw, c, w)  # CBUF entries per input line, as the CBUF rule demands
    data_banks = -(-h * eps // hw.cbuf_bank_depth)
    weights = pack_dc_weights(layer.w, hw)
    wbytes = -(-len(weights) // 128) * 128
    pad_raw = layer.pad_value & 0xFF
    (sy, sx), (dy, dx), (pt, pl) = layer.stride, layer.dilation, layer.pad
    p = Program(intr="SDP_0")
    p.memory += [(SRC_BASE, pack_feature(layer.x, atom)), (WEIGHT_BASE, weights)]
    p.output = (DST_BASE, -(-k // atom) * out_surf)
    # SDP: on the fly from CACC, every stage bypassed, output CVT, written to memory.
    p.reg("SDP", "S_POINTER", 0)
    p.reg("SDP", "D_DATA_CUBE_WIDTH", ow - 1)
    p.reg("SDP", "D_DATA_CUBE_HEIGHT", oh - 1)
    p.reg("SDP", "D_DATA_CUBE_CHANNEL", k - 1)
    p.reg("SDP", "D_FEATURE_MODE_CFG", FLYING_MODE=1)
    p.reg("SDP", "D_DATA_FORMAT", PROC_PRECISION=0, OUT_PRECISION=0)
    p.reg("SDP", "D_DP_BS_CFG", BS_BYPASS=1, BS_ALU_BYPASS=1, BS_MUL_BYPASS=1, BS_RELU_BYPASS=1)
    p.reg("SDP", "D_DP_BN_CFG", BN_BYPASS=1, BN_ALU_BYPASS=1, BN_MUL_BYPASS=1, BN_RELU_BYPASS=1)
    p.reg("SDP", "D_DP_EW_CFG", EW_BYPASS=1, EW_ALU_BYPASS=1, EW_MUL_BYPASS=1, EW_LUT_BYPASS=1)
    p.reg("SDP", "D_DST_BASE_ADDR_LOW", DST_BASE)
    p.reg("SDP", "D_DST_LINE_STRIDE", out_line)
    p.reg("SDP", "D_DST_SURFACE_STRIDE", out_surf)
    p.reg("SDP", "D_DST_DMA_CFG", DST_RAM_TYPE=1)
    off, scale, shift = layer.out_cvt
    p.reg("SDP", "D_CVT_OFFSET", _u32(off))
    p.reg("SDP", "D_CVT_SCALE", scale & 0xFFFF)
    p.reg("SDP", "D_CVT_SHIFT", shift)
    for unit in ("CDMA", "CSC", "CMAC_A", "CMAC_B", "CACC"):
        p.reg(unit, "S_POINTER", 0)
        p.reg(unit, "D_MISC_CFG", CONV_MODE=0, PROC_PRECISION=0,
              **({"IN_PRECISION": 0} if unit in ("CDMA", "CSC") else {}))
    p.reg("CDMA", "D_DATAIN_FORMAT", 0)
    p.reg("CDMA", "D_DATAIN_SIZE_0", DATAIN_WIDTH=w - 1, DATAIN_HEIGHT=h - 1)
    p.reg("CDMA", "D_DATAIN_SIZE_1", DATAIN_CHANNEL=c - 1)
    p.reg("CDMA", "D_DATAIN_SIZE_EXT_0", DATAIN_WIDTH_EXT=w - 1, DATAIN_HEIGHT_EXT=h - 1)
    p.reg("CDMA", "D_DAIN_RAM_TYPE", DATAIN_RAM_TYPE=1)
    p.reg("CDMA", "D_DAIN_ADDR_LOW_0", SRC_BASE)
    p.reg("CDMA", "D_LINE_STRIDE", line)
    p.reg("CDMA", "D_SURF_STRIDE", surf)
    p.reg("CDMA", "D_DAIN_MAP", LINE_PACKED=1, SURF_PACKED=1)
    p.reg("CDMA", "D_ENTRY_PER_SLICE", eps - 1)
    p.reg("CDMA", "D_WEIGHT_SIZE_0", BYTE_PER_KERNEL=r * s * c - 1)
    p.reg("CDMA", "D_WEIGHT_SIZE_1", WEIGHT_KERNEL=k - 1)
    p.reg("CDMA", "D_WEIGHT_RAM_TYPE", WEIGHT_RAM_TYPE=1)
    p.reg("CDMA", "D_WEIGHT_ADDR_LOW", WEIGHT_BASE)
    p.reg("CDMA", "D_WEIGHT_BYTES", wbytes)
    p.reg("CDMA", "D_CONV_STRIDE", CONV_X_STRIDE=sx - 1, CONV_Y_STRIDE=sy - 1)
    p.reg("CDMA", "D_ZERO_PADDING", PAD_LEFT=pl, PAD_TOP=pt)
    p.reg("CDMA", "D_ZERO_PADDING_VALUE", pad_raw)
    p.reg("CDMA", "D_BANK", DATA_BANK=data_banks - 1, WEIGHT_BANK=max(hw.cbuf_bank_number - data_banks - 1, 0))
    if layer.cvt is not None:
        cvt_off, cvt_scale, cvt_trunc = layer.cvt
        p.reg("CDMA", "D_CVT_CFG", CVT_EN=1, CVT_TRUNCATE=cvt_trunc)
        p.reg("CDMA", "D_CVT_OFFSET", cvt_off & 0xFFFF)
        p.reg("CDMA", "D_CVT_SCALE", cvt_scale & 0xFFFF)
    p.reg("CSC", "D_DATAIN_FORMAT", 0)
    p.reg("CSC", "D_DATAIN_SIZE_EXT_0", DATAIN_WIDTH_EXT=w - 1, DATAIN_HEIGHT_EXT=h - 1)
    p.reg("CSC", "D_DATAIN_SIZE_EXT_1", DATAIN_CHANNEL_EXT=c - 1)
    p.reg("CSC", "D_ENTRY_PER_SLICE", eps - 1)
    p.reg("CSC", "D_WEIGHT_SIZE_EXT_0", WEIGHT_WIDTH_EXT=s - 1, WEIGHT_HEIGHT_EXT=r - 1)
    p.reg("CSC", "D_WEIGHT_SIZE_EXT_1", WEIGHT_CHANNEL_EXT=c - 1, WEIGHT_KERNEL=k - 1)
    p.reg("CSC", "D_WEIGHT_BYTES", wbytes)
    p.reg("CSC", "D_DATAOUT_SIZE_0", DATAOUT_WIDTH=ow - 1, DATAOUT_HEIGHT=oh - 1)
    p.reg("CSC", "D_DATAOUT_SIZE_1", DATAOUT_CHANNEL=k - 1)
    p.reg("CSC", "D_ATOMICS", ow * oh - 1)
    p.reg("CSC", "D_CONV_STRIDE_EXT", CONV_X_STRIDE_EXT=sx - 1, CONV_Y_STRIDE_EXT=sy - 1)
    p.reg("CSC", "D_DILATION_EXT", X_DILATION_EXT=dx - 1, Y_DILATION_EXT=dy - 1)
    p.reg("CSC", "D_ZERO_PADDING", PAD_LEFT=pl, PAD_TOP=pt)
    p.reg("CSC", "D_ZERO_PADDING_VALUE", pad_raw)
    p.reg("CSC", "D_BANK", DATA_BANK=data_banks - 1, WEIGHT_BANK=max(hw.cbuf_bank_number - data_banks - 1, 0))
    p.reg("CACC", "D_DATAOUT_SIZE_0", DATAOUT_WIDTH=ow - 1, DATAOUT_HEIGHT=oh - 1)
    p.reg("CACC", "D_DATAOUT_SIZE_1", DATAOUT_CHANNEL=k - 1)
    p.reg("CACC", "D_DATAOUT_ADDR", DST_BASE)
    p.reg("CACC", "D_LINE_STRIDE", out_line)
    p.reg("CACC", "D_SURF_STRIDE", out_surf)
    p.reg("CACC", "D_CLIP_CFG", CLIP_TRUNCATE=layer.clip_truncate)
    # Enable order of NVDLA's firmware: SDP first, then CACC, CMAC_A, CMAC_B, CSC, CDMA.
    for unit in ("SDP", "CACC", "CMAC_A", "CMAC_B", "CSC", "CDMA"):
        p.reg(unit, "D_OP_ENABLE", 1)
    if isinstance(dla_or_hw, _Hw):
        return p
    return p.run(dla_or_hw)
