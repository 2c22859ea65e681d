"""Compressed conv weights (``D_WEIGHT_FORMAT.WEIGHT_FORMAT=1``): WMB mask bits, WGS group sizes, sparse stream.

The conv pipeline reads its weights either as the plain byte stream (direct conv: ``conv_datapath.weight_byte_offsets``
order; Winograd: ``conv_winograd.weight_element_offsets`` order) or, compressed, as three memory blocks that
decompress to exactly that stream (hw:nvdlav1 ``cmod/csc/NV_NVDLA_csc.cpp get_decompressed_weight``, fed by
``SendWeightToMacSequencer{DirectConv,WinoConv}Common``; fetched by ``cmod/cdma/NV_NVDLA_cdma.cpp``
``ConvWMB*``/``ConvWGS*``/``DirectConvWeight*SequencerCommon``):

* **WMB** at ``CDMA.D_WMB_ADDR``, ``D_WMB_BYTES`` long: one bit per weight element of the uncompressed stream,
  in stream order, LSB first within each byte. The CSC walks the elements in exactly the order of the
  uncompressed layout (direct: kernel group, channel group, tap, kernel, channel; Winograd: kernel group,
  channel block, kernel, position, channel), so bit i belongs to element i, and the bits run on across kernel
  groups without padding (a group's mask may end mid-byte; the CSC saves and restores its read position
  between groups).
* **Weight stream** at ``D_WEIGHT_ADDR``, ``D_WEIGHT_BYTES`` long: the elements whose bit is 1, in order, each
  1 byte (int8) or 2 bytes little-endian (int16/fp16); an element whose bit is 0 is 0. Like the mask it is
  one continuous stream over all kernel groups.
* **WGS** at ``D_WGS_ADDR``: one little-endian uint32 per kernel group (atomic K kernels for int8, atomic K / 2
  for int16/fp16), the bytes of that group's weight stream. The CDMA uses them only to tell the CSC when a
  group's weights are in the CBUF; the data path ignores them. (Byte counts is what the CDMA compares them
  with; NVDLA's compiler never emits compressed weights, so no NVDLA-made blocks confirm the convention.)

The CBUF holds the WMB in its last bank (cmod ``CBUF_WMB_BANK`` = 15) as 128-byte entries of 1024 bits, the
weight stream in the weight banks as 128-byte entries. Legality (cmod FAILs and hazards, ConfigError naming the
field): both ``*_BYTES`` counts are multiples of the 128-byte entry (fields ``[27:7]``/``[31:7]`` on nvdlav1)
and equal to the entries the CSC reads (it FAILs at the end of the layer otherwise): ``WMB_BYTES`` =
ceil(elements / 1024) * 128, ``WEIGHT_BYTES`` = ceil(kept elements * bytes / 128) * 128 (and never 0, which
the CDMA FAILs); CDMA and CSC agree on format and sizes; WGS never promises more bytes than ``WEIGHT_BYTES``
(the CDMA never hands that group over) and never fewer than the group really spans in 128-byte entries (the
CSC would read entries the CDMA has not written yet); the data and weight banks leave the WMB bank free (the
cmod does not check this; weights written into the last bank would collide with the WMB there).
fp16 direct convolution with compressed weights is refused by ``conv.run`` (its fp16 path fetches plainly).
"""
from __future__ import annotations

from typing import Mapping

import numpy as np

from golden.config import HwConfig
from golden.dma import dma_address, ram_space
from golden.errors import UnsupportedError
from golden.memory import Memory
from golden.regs import RegView

#: CBUF entry: the CSC reads the WMB and the weight stream 128 bytes at a time.
ENTRY_BYTES = 128
#: Mask bits per WMB entry.
ENTRY_BITS = 8 * ENTRY_BYTES
#: The WMB lives in one CBUF bank of this many entries (nvdlav1: 256 x 128 B), the last bank.
WMB_BANK_ENTRIES = 256
#: The WGS is fetched in 32-byte atoms, one uint32 per kernel group.
WGS_ATOM = 32
#: Kernel groups whose mask spans more WMB entries than this are refused (UnsupportedError): the CDMA refills
#: the 256-entry WMB bank while a group is in use, in 256-byte requests, and whether that can deadlock near
#: a full bank depends on flow control that is not modelled.
MAX_GROUP_WMB_ENTRIES = WMB_BANK_ENTRIES - 2


def is_compressed(regs: Mapping[str, RegView], hw: HwConfig) -> bool:
    """Whether the operation reads compressed weights; CDMA and CSC must agree, and the config must have the
    feature (nv_small has none: UnsupportedError naming it)."""
    formats = [(unit, regs[unit].D_WEIGHT_FORMAT) for unit in ("CDMA", "CSC") if unit in regs]
    for unit, fmt in formats:
        if fmt.WEIGHT_FORMAT and not hw.weight_compression:
            raise UnsupportedError(
                unit, f"{fmt.where('WEIGHT_FORMAT')}=COMPRESSED but {hw.name} has no weight compression"
            )
    (_, first), *others = formats
    for _, fmt in others:
        if fmt.WEIGHT_FORMAT != first.WEIGHT_FORMAT:
            raise fmt.fail("WEIGHT_FORMAT",
                           f"is {fmt.WEIGHT_FORMAT}, {first.where('WEIGHT_FORMAT')} is {first.WEIGHT_FORMAT}")
    return bool(first.WEIGHT_FORMAT)


def kernel_group_size(hw: HwConfig, dtype: str) -> int:
    """Kernels per WGS entry: the kernel group of the weight layout (atomic K, halved for 2-byte types)."""
    return hw.mac_atomic_k_for("int8" if dtype == "int8" else "int16")


def decompress(wmb: np.ndarray, stream: np.ndarray, elements: int, bpe: int) -> np.ndarray:
    """The uncompressed weight bytes (``elements * bpe`` uint8): element i is the next stream element when
    WMB bit i (LSB first) is 1, else 0. ``stream`` must hold at least as many elements as bits are set."""
    bits = np.unpackbits(np.asarray(wmb, dtype=np.uint8), bitorder="little")[:elements].astype(bool)
    if bits.size < elements:
        raise ValueError(f"WMB holds {bits.size} bits, {elements} needed")
    kept = int(np.count_nonzero(bits))
    raw = np.asarray(stream, dtype=np.uint8)
    if raw.size < kept * bpe:
        raise ValueError(f"stream holds {raw.size // bpe} elements, the mask keeps {kept}")
    out = np.zeros((elements, bpe), dtype=np.uint8)
    out[bits] = raw[: kept * bpe].reshape(kept, bpe)
    return out.reshape(-1)


def _group_bounds(kernels: int, group: int, elements_per_kernel: int) -> np.ndarray:
    """Element index where each kernel group ends (cumulative, length = number of groups)."""
    ends = np.minimum(np.arange(1, -(-kernels // group) + 1, dtype=np.int64) * group, kernels)
    return ends * elements_per_kernel


def _entries(nbits_or_bytes: np.ndarray | int, unit: int) -> np.ndarray:
    return -(-np.asarray(nbits_or_bytes, dtype=np.int64) // unit)


def read_weights(
    hw: HwConfig, mem: Memory, regs: Mapping[str, RegView], kernels: int, bytes_per_kernel: int, dtype: str
) -> np.ndarray:
    """The ``kernels * bytes_per_kernel`` uncompressed weight bytes (uint8) the CSC feeds the MACs: read from
    ``D_WEIGHT_ADDR`` as they are, or decompressed from WMB/stream after the checks of the module docstring."""
    cdma = regs["CDMA"]
    space = ram_space(hw, mem, cdma.D_WEIGHT_RAM_TYPE, "WEIGHT_RAM_TYPE")
    weight_addr = dma_address(hw, cdma, "D_WEIGHT_ADDR")
    total = kernels * bytes_per_kernel
    if not is_compressed(regs, hw):
        return space.read(weight_addr, total)

    bpe = 1 if dtype == "int8" else 2
    elements = total // bpe
    csc = regs["CSC"]
    bank = cdma.D_BANK
    if bank.DATA_BANK + bank.WEIGHT_BANK + 2 > hw.cbuf_bank_number - 1:
        raise bank.fail("WEIGHT_BANK", f"data ({bank.DATA_BANK + 1}) + weight ({bank.WEIGHT_BANK + 1}) banks reach "
                        f"CBUF bank {hw.cbuf_bank_number - 1}, which holds the WMB of compressed weights")

    # WMB: one bit per element, whole 128-byte entries, all of which the CSC reads.
    wmb_bytes = cdma.D_WMB_BYTES.WMB_BYTES
    if csc.D_WMB_BYTES.WMB_BYTES != wmb_bytes:
        raise csc.D_WMB_BYTES.fail("WMB_BYTES", f"CSC says {csc.D_WMB_BYTES.WMB_BYTES}, CDMA fetches {wmb_bytes}")
    if wmb_bytes % ENTRY_BYTES:
        raise cdma.D_WMB_BYTES.fail("WMB_BYTES", f"{wmb_bytes} is not a multiple of the {ENTRY_BYTES}-byte CBUF entry")
    need = int(_entries(elements, ENTRY_BITS)) * ENTRY_BYTES
    if wmb_bytes != need:
        raise cdma.D_WMB_BYTES.fail(
            "WMB_BYTES", f"{wmb_bytes} but {kernels} kernels of {bytes_per_kernel // bpe} elements need {elements} "
            f"mask bits = {need} bytes; the CSC FAILs unless it reads every WMB entry"
        )
    wmb = space.read(dma_address(hw, cdma, "D_WMB_ADDR"), wmb_bytes)
    bits = np.unpackbits(wmb, bitorder="little")[:elements]

    # Kernel groups: the mask may not outgrow the WMB bank within one group.
    group = kernel_group_size(hw, dtype)
    ends = _group_bounds(kernels, group, bytes_per_kernel // bpe)
    starts = np.concatenate([[0], ends[:-1]])
    span = _entries(ends, ENTRY_BITS) - _entries(starts, ENTRY_BITS)
    if int(span.max()) > MAX_GROUP_WMB_ENTRIES:
        g = int(np.argmax(span))
        raise UnsupportedError("WEIGHT_COMPRESSION", f"kernel group {g}'s mask spans {int(span[g])} WMB entries; "
                               f"refilling the {WMB_BANK_ENTRIES}-entry WMB bank within a group is not modelled")

    # Weight stream: every kept element, whole entries, all read by the CSC.
    csum = np.concatenate([[0], np.cumsum(bits, dtype=np.int64)])
    kept = int(csum[-1])
    wbytes = cdma.D_WEIGHT_BYTES.WEIGHT_BYTES
    if wbytes % ENTRY_BYTES:
        raise cdma.D_WEIGHT_BYTES.fail("WEIGHT_BYTES",
                                       f"{wbytes} is not a multiple of the {ENTRY_BYTES}-byte CBUF entry")
    need = int(_entries(kept * bpe, ENTRY_BYTES)) * ENTRY_BYTES
    if kept == 0:
        raise cdma.D_WEIGHT_BYTES.fail("WEIGHT_BYTES", "the WMB keeps no weight, so there is no stream to fetch "
                                       "(the CDMA FAILs on 0 weight bytes; keep one zero weight explicitly)")
    if wbytes != need:
        raise cdma.D_WEIGHT_BYTES.fail(
            "WEIGHT_BYTES", f"{wbytes} but the WMB keeps {kept} elements = {need} bytes in {ENTRY_BYTES}-byte entries; "
            f"the CSC FAILs unless it reads every weight entry"
        )
    stream = space.read(weight_addr, wbytes)

    # WGS: per kernel group, the stream bytes the CDMA counts before handing the group to the CSC.
    groups = ends.size
    wgs_raw = space.read(dma_address(hw, cdma, "D_WGS_ADDR"), -(-4 * groups // WGS_ATOM) * WGS_ATOM)
    wgs = wgs_raw[: 4 * groups].view("<u4").astype(np.int64)
    promised = np.cumsum(wgs)
    true_end = csum[ends] * bpe  # stream byte where each group's weights end
    over = np.nonzero(promised > wbytes)[0]
    if over.size:
        g = int(over[0])
        raise cdma.D_WGS_ADDR_LOW.fail("WGS_ADDR_LOW", f"WGS[0..{g}] add up to {int(promised[g])} bytes, more than "
                                       f"WEIGHT_BYTES={wbytes}: the CDMA never hands kernel group {g} to the CSC")
    # The CDMA checks the count at every 128-byte entry it has written (the first at 128).
    handed = np.maximum(_entries(promised, ENTRY_BYTES), 1) * ENTRY_BYTES
    short = np.nonzero(handed < _entries(true_end, ENTRY_BYTES) * ENTRY_BYTES)[0]
    if short.size:
        g = int(short[0])
        raise cdma.D_WGS_ADDR_LOW.fail(
            "WGS_ADDR_LOW", f"WGS[{g}]={int(wgs[g])} understates kernel group {g}: its weights end at stream byte "
            f"{int(true_end[g])}, but the CDMA hands it over after {int(handed[g])} bytes, so the CSC would read "
            f"CBUF entries not yet fetched"
        )
    return decompress(wmb, stream, elements, bpe)


__all__ = [
    "ENTRY_BITS", "ENTRY_BYTES", "WMB_BANK_ENTRIES", "decompress", "is_compressed",
    "kernel_group_size", "read_weights",
]
