"""Hardware configurations: the one source of truth for every size in the tree.

Each preset mirrors an NVDLA ``spec/defs/<name>.spec`` file (nv_full mirrors the nvdlav1 full design,
NVDLA_NOTES §1). ``tests/golden/test_config.py`` re-reads the spec files, when they are available, and
checks that every preset still matches them.
"""
from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import Literal

DataType = Literal["int8", "int16", "fp16"]

#: Bytes per element of each data type.
BYTES_PER_ELEMENT: dict[str, int] = {"int8": 1, "int16": 2, "fp16": 2}


@dataclass(frozen=True)
class HwConfig:
    """Every parameter an NVDLA spec file defines, plus the register address map the config uses."""

    name: str
    feature_types: tuple[DataType, ...]
    weight_types: tuple[DataType, ...]
    weight_compression: bool
    winograd: bool
    batch: bool
    max_batch: int
    secondary_memif: bool  # CV-SRAM
    sdp_bs: bool  # SDP X1
    sdp_bn: bool  # SDP X2
    sdp_ew: bool  # SDP Y
    sdp_lut: bool
    bdma: bool
    rubik: bool
    rubik_contract: bool
    rubik_reshape: bool
    pdp: bool
    cdp: bool
    retiming: bool
    mac_atomic_c: int
    mac_atomic_k: int
    memory_atomic_size: int  # bytes per atom = int8 elements per atom
    cbuf_bank_number: int
    cbuf_bank_width: int  # bytes
    cbuf_bank_depth: int  # entries
    sdp_bs_throughput: int
    sdp_bn_throughput: int
    sdp_ew_throughput: int
    pdp_throughput: int
    cdp_throughput: int
    primary_memif_latency: int
    secondary_memif_latency: int
    primary_memif_max_burst_length: int
    primary_memif_width: int  # bits
    secondary_memif_max_burst_length: int
    secondary_memif_width: int  # bits
    mem_address_width: int
    num_dma_read_clients: int
    num_dma_write_clients: int
    #: "small" for the nv_small/master register map, "full" for the nvdlav1 map (NOTES §2).
    address_map: Literal["small", "full"] = "small"
    #: Address and stride registers count in units of this many bytes (nv_full: 32, fields [31:5]).
    address_unit: int = 1
    #: PDP int8 AVERAGE datapath (docs/golden-semantics.md, PDP): "cmod" (16-bit line buffer, PAD_VALUE_nX
    #: sign-extended, full-precision reciprocal products; NVDLA's conformance CRCs) or "nv_small_rtl" (NVDLA's
    #: nv_small RTL, NV_NVDLA_PDP_CORE_cal1d.v/cal2d.v: 11-bit rows + PAD_VALUE_nX[10:0], 14-bit sums +
    #: (PAD_VALUE_mX*kw)[13:0], 11-bit and 8-bit reciprocal products). They differ only when a sum or a
    #: product overflows those widths (pad values outside n*int8, reciprocals above 1/kernel).
    pdp_average: Literal["cmod", "nv_small_rtl"] = "cmod"
    #: int8 CDP: bits of ``S_LUT_{LE,LO}_START`` the LUT controller compares the square sum with and
    #: subtracts from it to find underflow, index and fraction (``NV_NVDLA_CDP_DP_LUT_CTRL_unit.v``:
    #: ``reg2dp_X_offset[pPP_BW:0]``, pPP_BW = 21, read as 22-bit signed; the same for Y). 38 = the whole
    #: register, as NVDLA's cmod does. The nv_small-family RTL (NVDLA master) uses 22; the slope values
    #: outside the table still measure from the full 38-bit START/END (``NV_NVDLA_CDP_DP_intp.v``).
    cdp_lut_start_bits: int = 38
    #: int8 CDP: whether ``LUT_LO_INDEX_SELECT`` = -32 (0x20) shifts left by 32, as NVDLA's cmod does. The
    #: nv_small-family RTL computes the LO shift amount in 5 bits (``Y_shift_bits_int8_abs``: ~0 + 1 = 0),
    #: so -32 shifts by 0 there; LE's amount has 6 bits and is right.
    cdp_lo_select_minus32: bool = True
    #: fp16 SDP whose X1 (BS) or X2 (BN) operand is one 2-byte component per channel (B/NRDMA_DATA_USE ALU or
    #: MUL, per kernel): the smallest odd number of channel atoms at which the operation never finishes (0:
    #: none). Measured on NVDLA's nv_full RTL (2026-12-07; X1 on the fly from a conv and from memory, X2 from
    #: memory): 3, 5, 7 and 9 atoms and every even number finish; 11 to 31 odd ones hang (SDP's done never
    #: comes; the operand ends in half a 64-byte beat). The cmod computes them; golden refuses them there
    #: (``compiler.passes.fp16`` reads pairs). Y (ERDMA) was not measured.
    sdp_brdma_fp16_half_beat_hang: int = 0

    # ---- derived sizes -------------------------------------------------------------------------
    @property
    def cbuf_size(self) -> int:
        """CBUF capacity in bytes."""
        return self.cbuf_bank_number * self.cbuf_bank_width * self.cbuf_bank_depth

    @property
    def cbuf_entry_bytes(self) -> int:
        return self.cbuf_bank_width

    def atom_elements(self, dtype: DataType = "int8") -> int:
        """Channels per memory atom (surface) for a data type: the feature-cube channel grouping."""
        return self.memory_atomic_size // BYTES_PER_ELEMENT[dtype]

    def mac_atomic_k_for(self, dtype: DataType = "int8") -> int:
        """Kernels per weight group: atomic K for int8, half of it for int16/fp16 (NOTES §3)."""
        return self.mac_atomic_k if dtype == "int8" else self.mac_atomic_k // 2

    def supports(self, dtype: DataType) -> bool:
        return dtype in self.feature_types

    @property
    def units(self) -> frozenset[str]:
        """Register units this configuration implements (CFGROM/GLB/MCIF and the conv pipeline always)."""
        present = {"CFGROM", "GLB", "MCIF", "CDMA", "CSC", "CMAC_A", "CMAC_B", "CACC", "SDP", "SDP_RDMA"}
        if self.pdp:
            present |= {"PDP", "PDP_RDMA"}
        if self.cdp:
            present |= {"CDP", "CDP_RDMA"}
        if self.secondary_memif:
            present.add("CVIF")
        if self.bdma:
            present.add("BDMA")
        if self.rubik:
            present.add("RBK")
        return frozenset(present)

    def derive(self, **changes: object) -> "HwConfig":
        """A variant of this config (e.g. for experiments), still a frozen value."""
        return replace(self, **changes)  # type: ignore[arg-type]


def _small_family(name: str, **kw: object) -> HwConfig:
    base = dict(
        name=name,
        feature_types=("int8",),
        weight_types=("int8",),
        weight_compression=False,
        winograd=False,
        batch=False,
        max_batch=1,
        secondary_memif=False,
        sdp_bs=True,
        sdp_bn=True,
        sdp_ew=False,
        sdp_lut=False,
        bdma=False,
        rubik=False,
        rubik_contract=False,
        rubik_reshape=False,
        pdp=True,
        cdp=True,
        retiming=False,
        mac_atomic_c=8,
        mac_atomic_k=8,
        memory_atomic_size=8,
        cbuf_bank_number=32,
        cbuf_bank_width=8,
        cbuf_bank_depth=512,
        sdp_bs_throughput=1,
        sdp_bn_throughput=1,
        sdp_ew_throughput=0,
        pdp_throughput=1,
        cdp_throughput=1,
        primary_memif_latency=64,
        secondary_memif_latency=0,
        primary_memif_max_burst_length=1,
        primary_memif_width=64,
        secondary_memif_max_burst_length=0,
        secondary_memif_width=0,
        mem_address_width=32,
        num_dma_read_clients=7,
        num_dma_write_clients=3,
        cdp_lut_start_bits=22,
        cdp_lo_select_minus32=False,
    )
    base.update(kw)
    return HwConfig(**base)  # type: ignore[arg-type]


#: nv_small: the PDP average datapath of NVDLA's nv_small RTL, the DUT golden is checked against.
NV_SMALL = _small_family("nv_small", pdp_average="nv_small_rtl")

NV_SMALL_256 = _small_family(
    "nv_small_256", mac_atomic_c=32, cbuf_bank_width=32, cbuf_bank_depth=128
)

NV_SMALL_256_FULL = _small_family(
    "nv_small_256_full",
    mac_atomic_c=32,
    cbuf_bank_width=32,
    cbuf_bank_depth=128,
    secondary_memif=True,
    sdp_ew=True,
    sdp_lut=True,
    sdp_bs_throughput=2,
    sdp_bn_throughput=2,
    sdp_ew_throughput=1,
    secondary_memif_latency=64,
    primary_memif_max_burst_length=4,
    secondary_memif_max_burst_length=4,
    secondary_memif_width=64,
    num_dma_read_clients=8,
)

NV_MEDIUM_512 = _small_family(
    "nv_medium_512",
    mac_atomic_c=32,
    mac_atomic_k=16,
    memory_atomic_size=16,
    cbuf_bank_width=32,
    sdp_bs_throughput=4,
    sdp_bn_throughput=4,
    pdp_throughput=2,
    cdp_throughput=2,
    primary_memif_latency=256,
    primary_memif_max_burst_length=4,
    primary_memif_width=128,
    mem_address_width=64,
)

NV_MEDIUM_1024_FULL = _small_family(
    "nv_medium_1024_full",
    mac_atomic_c=32,
    mac_atomic_k=32,
    memory_atomic_size=32,
    cbuf_bank_width=32,
    secondary_memif=True,
    sdp_ew=True,
    sdp_lut=True,
    sdp_bs_throughput=8,
    sdp_bn_throughput=8,
    sdp_ew_throughput=2,
    pdp_throughput=4,
    cdp_throughput=4,
    primary_memif_latency=1024,
    secondary_memif_latency=1024,
    primary_memif_max_burst_length=4,
    primary_memif_width=256,
    secondary_memif_max_burst_length=4,
    secondary_memif_width=256,
    mem_address_width=64,
    num_dma_read_clients=8,
)

#: nv_large as in the master branch spec (BDMA, RUBIK, Winograd and compression disabled; NOTES §1 caveat).
NV_LARGE = _small_family(
    "nv_large",
    mac_atomic_c=64,
    mac_atomic_k=32,
    memory_atomic_size=32,
    max_batch=32,
    cbuf_bank_number=16,
    cbuf_bank_width=64,
    secondary_memif=True,
    sdp_ew=True,
    sdp_lut=True,
    sdp_bs_throughput=16,
    sdp_bn_throughput=16,
    sdp_ew_throughput=4,
    pdp_throughput=8,
    cdp_throughput=8,
    primary_memif_latency=1024,
    secondary_memif_latency=1024,
    primary_memif_width=256,
    secondary_memif_max_burst_length=1,
    secondary_memif_width=256,
    mem_address_width=64,
    num_dma_read_clients=8,
)

#: The nvdlav1 full design: every data type and unit, the nv_full address map, 32-byte address units.
NV_FULL = _small_family(
    "nv_full",
    feature_types=("int8", "int16", "fp16"),
    weight_types=("int8", "int16", "fp16"),
    weight_compression=True,
    winograd=True,
    batch=True,
    max_batch=32,
    secondary_memif=True,
    sdp_ew=True,
    sdp_lut=True,
    bdma=True,
    rubik=True,
    rubik_contract=True,
    rubik_reshape=True,
    mac_atomic_c=64,
    mac_atomic_k=32,
    memory_atomic_size=32,
    cbuf_bank_number=16,
    cbuf_bank_width=64,
    sdp_bs_throughput=16,
    sdp_bn_throughput=16,
    sdp_ew_throughput=4,
    pdp_throughput=8,
    cdp_throughput=8,
    primary_memif_latency=1024,
    secondary_memif_latency=1024,
    primary_memif_width=512,
    secondary_memif_max_burst_length=1,
    secondary_memif_width=512,
    mem_address_width=64,
    num_dma_read_clients=8,
    num_dma_write_clients=3,
    address_map="full",
    address_unit=32,
    # nvdlav1's CDP compares int8 lanes in pairs, one with all 38 START bits, one with 22: not modelled.
    cdp_lut_start_bits=38,
    cdp_lo_select_minus32=True,
    sdp_brdma_fp16_half_beat_hang=11,
)

PRESETS: dict[str, HwConfig] = {
    c.name: c
    for c in (NV_SMALL, NV_SMALL_256, NV_SMALL_256_FULL, NV_MEDIUM_512, NV_MEDIUM_1024_FULL, NV_LARGE, NV_FULL)
}


def get_config(name: str) -> HwConfig:
    """Look up a preset by name; the error lists the valid names."""
    try:
        return PRESETS[name]
    except KeyError:
        raise KeyError(f"unknown hardware config {name!r}; presets: {', '.join(PRESETS)}") from None


def field_names() -> list[str]:
    return [f.name for f in fields(HwConfig)]
