"""Compressed conv weights for the compiler: the plain weight stream as WMB mask, sparse stream and WGS sizes.

The format is the conv pipeline's (``golden.engines.conv_wcomp`` states it and checks every rule): one mask bit
per element of the uncompressed stream (LSB first), the non-zero elements in order, and per kernel group a
little-endian uint32 of the stream bytes it stores; WMB and stream in whole 128-byte CBUF entries, the WGS in
32-byte atoms. Compression only pays where weights are sparse (depthwise convs run as dense diagonal chunks,
pruned networks): ``worth_it`` compares the bytes the CDMA fetches either way.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

#: A CBUF entry: the CSC reads the WMB and the stream 128 bytes at a time.
ENTRY = 128
#: The CDMA fetches the WGS in 32-byte atoms.
WGS_ATOM = 32
#: The WMB lives in one 256-entry CBUF bank; a kernel group's mask may span at most this many entries
#: (golden refuses more: refilling the bank within a group is not modelled).
MAX_GROUP_WMB_ENTRIES = 254


@dataclass(frozen=True)
class CompressedWeights:
    wmb: bytes
    stream: bytes
    wgs: bytes

    @property
    def fetched(self) -> int:
        """Bytes the CDMA fetches for these weights."""
        return len(self.wmb) + len(self.stream) + len(self.wgs)


def _pad(data: bytes, unit: int) -> bytes:
    return data + bytes(-len(data) % unit)


def compress(raw: bytes, *, bpe: int, kernels: int, kernel_group: int) -> CompressedWeights:
    """Compress the plain stream ``raw`` of ``kernels`` kernels (``bpe``-byte elements, any trailing padding
    beyond whole kernels ignored). An all-zero stream keeps element 0: the CDMA may not fetch 0 bytes."""
    values = np.frombuffer(raw, dtype=np.uint8 if bpe == 1 else "<u2")
    if values.size % kernels:
        raise ValueError(f"{values.size} elements are not whole kernels of {kernels}")
    keep = values != 0
    if not keep.any():
        keep[0] = True
    per_kernel = values.size // kernels
    group_elements = kernel_group * per_kernel
    starts = np.arange(0, values.size, group_elements)
    counts = np.add.reduceat(keep.astype(np.int64), starts) * bpe
    return CompressedWeights(
        wmb=_pad(np.packbits(keep, bitorder="little").tobytes(), ENTRY),
        stream=_pad(values[keep].astype(values.dtype).tobytes(), ENTRY),
        wgs=_pad(counts.astype("<u4").tobytes(), WGS_ATOM),
    )


def group_wmb_entries(elements_per_kernel: int, kernels: int, kernel_group: int) -> int:
    """The most WMB entries one kernel group's mask spans (the mask runs on across groups unaligned)."""
    ends = np.minimum(np.arange(1, -(-kernels // kernel_group) + 1) * kernel_group, kernels) * elements_per_kernel
    starts = np.concatenate([[0], ends[:-1]])
    return int((-(-ends // (8 * ENTRY)) - starts // (8 * ENTRY)).max())


def worth_it(comp: CompressedWeights, plain_bytes: int) -> bool:
    """Compressed weights fetch fewer bytes than the plain stream."""
    return comp.fetched < plain_bytes


__all__ = ["CompressedWeights", "MAX_GROUP_WMB_ENTRIES", "compress", "group_wmb_entries", "worth_it"]
