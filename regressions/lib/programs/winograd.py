"""Single-layer tests of Winograd convolutions and of compressed conv weights (``regressions.lib.programs``
style: a register program plus the memory image, run on ``golden.Dla`` or written as a trace).

* ``program_winograd``: the reference's pre-transformed weights and the input in memory, the registers from
  the compiler's Winograd emitter (``compiler.codegen.winograd``).
* ``compress_weights``: turn a program's plain weight stream into WMB / stream / WGS (``reference.wcomp``)
  and set the registers that read them (WEIGHT_FORMAT, WEIGHT_BYTES, WMB_BYTES, WMB and WGS addresses, and a
  weight-bank split that leaves the last CBUF bank to the WMB).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from compiler.codegen.pack import pack_feature, strides
from compiler.codegen.program import Cube
from compiler.codegen.winograd import BPE, emit_winograd, winograd_weight_bytes
from golden.config import HwConfig
from golden.program import RegProgram
from golden.regs import UNITS
from regressions.lib.programs import DST_BASE, SRC_BASE, WEIGHT_BASE, LayerTest
from regressions.lib.reference import conv_winograd as ref_wg
from regressions.lib.reference import wcomp as ref_wcomp

WMB_BASE = 0x8280_0000
WGS_BASE = 0x82C0_0000


@dataclass
class WinogradLayer:
    """A Winograd convolution: input cube, pre-transformed weights and the CDMA/CSC/CACC/SDP settings."""

    x: np.ndarray  # (C, H, W) int8/int16 values
    u: np.ndarray  # (K, Cp*Sy*Sx, 4, 4) pre-transformed weights, Cp = C rounded up to the atom
    out_hw: tuple[int, int] = (4, 4)  # (OH, OW), multiples of 4
    stride: tuple[int, int] = (1, 1)  # (Sy, Sx): CDMA channel extension
    pad: tuple[int, int, int, int] = (1, 1, 1, 1)  # CDMA (top, left, bottom, right)
    pad_value: int = 0
    pra_truncate: int = 0
    clip_truncate: int = 0
    precision: str = "int8"
    out_cvt: tuple[int, int, int] = (0, 1, 0)  # SDP output CVT (offset, scale, shift)

    def ext_hw(self) -> tuple[int, int]:
        """(He, We): the padded, stride-extended input the CSC sees."""
        _, h, w = self.x.shape
        (sy, sx), (pt, pl, pb, pr) = self.stride, self.pad
        return (pt + h + pb) // sy, (pl + w + pr) // sx


@dataclass
class Compression:
    """How to compress a layer's weights: ``keep`` (one flag per weight element, or empty) stores zero
    elements explicitly; the rest of the zeros are dropped."""

    keep: np.ndarray


def atom(hw: HwConfig, precision: str) -> int:
    return hw.atom_elements(precision)  # type: ignore[arg-type]


def padded_input(layer: WinogradLayer, hw: HwConfig) -> np.ndarray:
    """The cube with every lane of its atoms, as the CDMA reads it (padding lanes are 0 in memory)."""
    a = atom(hw, layer.precision)
    c, h, w = layer.x.shape
    out = np.zeros((-(-c // a) * a, h, w), dtype=np.int64)
    out[:c] = layer.x
    return out


def weight_stream(hw: HwConfig, layer: WinogradLayer) -> bytes:
    """The plain Winograd weight bytes (reference packer), not rounded up."""
    group = hw.mac_atomic_k_for(layer.precision)  # type: ignore[arg-type]
    return ref_wg.pack_weights(layer.u, kernel_group=group, precision=layer.precision)


def _word(name: str, **fields: int) -> tuple[str, int]:
    unit, reg = name.split(".")
    register = UNITS[unit].register(reg)
    return register.full_name, register.encode(**fields)


def program_winograd(hw: HwConfig, layer: WinogradLayer) -> LayerTest:
    """Winograd conv -> SDP (flying, Winograd mode) -> memory, with uncompressed weights."""
    prec, bpe = layer.precision, BPE[layer.precision]
    a = atom(hw, prec)
    c, h, w = layer.x.shape
    k, ce = layer.u.shape[:2]
    oh, ow = layer.out_hw
    weights = weight_stream(hw, layer)
    wbytes = winograd_weight_bytes(len(weights))
    line, surf = strides(c, h, w, a, bpe)
    oline, osurf = strides(k, oh, ow, a, bpe)

    p = LayerTest(RegProgram(hw), intr="SDP_0")
    p.memory += [(SRC_BASE, pack_feature(layer.x, a, bpe)), (WEIGHT_BASE, weights + bytes(wbytes - len(weights)))]
    p.output = (DST_BASE, -(-k // a) * osurf)
    emit_winograd(p.regs, Cube(SRC_BASE, c, h, w, line, surf), WEIGHT_BASE, wbytes, (k, ce),
                  Cube(DST_BASE, k, oh, ow, oline, osurf), layer)
    return p


def expected_winograd(hw: HwConfig, layer: WinogradLayer) -> np.ndarray:
    """The reference's output cube (every lane of the output atoms), before packing."""
    from regressions.lib.reference import sdp as ref_sdp

    a = atom(hw, layer.precision)
    acc = ref_wg.winograd_conv(
        padded_input(layer, hw), layer.u, out_hw=layer.out_hw, stride=layer.stride, pad=layer.pad,
        pad_value=layer.pad_value, pra_truncate=layer.pra_truncate, clip_truncate=layer.clip_truncate,
        precision=layer.precision,
    )
    k = acc.shape[0]
    full = np.zeros((-(-k // a) * a,) + acc.shape[1:], dtype=np.int64)
    full[:k] = acc  # CACC delivers 0 past the last kernel; SDP converts those lanes too
    off, scale, shift = layer.out_cvt
    return ref_sdp.sdp(full, ref_sdp.SdpParams(cvt_offset=off, cvt_scale=scale, cvt_shift=shift),
                       out_bits=8 * BPE[layer.precision])


# ---- compressed weights ---------------------------------------------------------------------------------------
def compress_weights(hw: HwConfig, program: LayerTest, raw: bytes, *, kernels: int, precision: str,
                     keep: np.ndarray | None = None) -> ref_wcomp.Compressed:
    """Rewrite ``program`` (whose weights at WEIGHT_BASE are ``raw``, ``kernels`` kernels) to read them
    compressed; returns the three blocks. The weight banks shrink to leave the last CBUF bank to the WMB."""
    size = BPE[precision]
    elements = len(raw) // size
    comp = ref_wcomp.compress(raw, size=size, kernel_group=hw.mac_atomic_k_for(precision),  # type: ignore[arg-type]
                              elements_per_kernel=elements // kernels,
                              keep=None if keep is None or len(keep) == 0 else [bool(v) for v in keep])
    program.memory = [(addr, comp.stream if addr == WEIGHT_BASE else data) for addr, data in program.memory]
    program.memory += [(WMB_BASE, comp.wmb), (WGS_BASE, comp.wgs)]
    names = {f"NVDLA_{u}.D_WEIGHT_BYTES_0" for u in ("CDMA", "CSC")}
    extra = [
        _word("CDMA.D_WEIGHT_FORMAT", WEIGHT_FORMAT=1), _word("CSC.D_WEIGHT_FORMAT", WEIGHT_FORMAT=1),
        _word("CDMA.D_WMB_BYTES", WMB_BYTES=len(comp.wmb)), _word("CSC.D_WMB_BYTES", WMB_BYTES=len(comp.wmb)),
        ("NVDLA_CDMA.D_WMB_ADDR_LOW_0", WMB_BASE), ("NVDLA_CDMA.D_WMB_ADDR_HIGH_0", 0),
        ("NVDLA_CDMA.D_WGS_ADDR_LOW_0", WGS_BASE), ("NVDLA_CDMA.D_WGS_ADDR_HIGH_0", 0),
    ]
    writes = []
    for name, value in program.writes:
        if name in names:
            value = len(comp.stream)
        elif name in ("NVDLA_CDMA.D_BANK_0", "NVDLA_CSC.D_BANK_0"):
            bank = UNITS[name.split(".")[0][len("NVDLA_"):]].register("D_BANK")
            data = bank.field("DATA_BANK").decode(value)
            value = bank.encode(DATA_BANK=data, WEIGHT_BANK=max(0, hw.cbuf_bank_number - data - 3))
        elif name.endswith(".D_OP_ENABLE_0") and extra:
            writes += extra
            extra = []
        writes.append((name, value))
    program.writes = writes
    return comp
