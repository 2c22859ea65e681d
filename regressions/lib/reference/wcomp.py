"""Reference math for NVDLA's compressed conv weights (plain loops; no golden imports).

Definition (hw:nvdlav1 cmod CSC ``get_decompressed_weight``, CDMA WMB/WGS fetch): the uncompressed weight
stream is a sequence of elements (1 byte int8, 2 bytes little-endian int16/fp16) in the conv pipeline's
weight order. Compressed, it is

* WMB: bit i (byte i // 8, bit i % 8, LSB first) is 1 when element i is stored, 0 when it is 0;
* the weight stream: the stored elements, in order;
* WGS: per kernel group (``kernel_group`` kernels of ``elements_per_kernel`` elements), the bytes of the
  weight stream that group stores, as a little-endian uint32.

The hardware fetches whole 128-byte CBUF entries of WMB and stream (the byte counts are multiples of 128) and
the WGS in 32-byte atoms, so ``compress`` pads all three with zeros to those sizes. A compressor may store a
zero element (bit 1, value 0); ``keep`` marks elements to store whatever their value. The hardware needs at
least one stored element (its weight fetch may not be empty), so an all-zero stream stores element 0.
"""

from __future__ import annotations

from dataclasses import dataclass

from .arith import check_range

ENTRY = 128
WGS_ATOM = 32


@dataclass(frozen=True)
class Compressed:
    wmb: bytes
    stream: bytes
    wgs: bytes

    def group_sizes(self, groups: int) -> list[int]:
        return [int.from_bytes(self.wgs[4 * g: 4 * g + 4], "little") for g in range(groups)]


def _pad(data: bytes, unit: int) -> bytes:
    return data + bytes(-len(data) % unit)


def elements_of(raw: bytes, size: int) -> list[int]:
    """The raw element values (unsigned, ``size`` bytes each, little-endian)."""
    check_range("element size", size, 1, 2)
    if len(raw) % size:
        raise ValueError(f"{len(raw)} bytes are not whole {size}-byte elements")
    return [int.from_bytes(raw[i: i + size], "little") for i in range(0, len(raw), size)]


def compress(raw: bytes, *, size: int, kernel_group: int, elements_per_kernel: int, keep=None) -> Compressed:
    """Compress an uncompressed weight byte stream; ``keep[i]`` true stores element i even when it is 0."""
    values = elements_of(raw, size)
    n = len(values)
    if elements_per_kernel <= 0 or n % elements_per_kernel:
        raise ValueError(f"{n} elements are not whole kernels of {elements_per_kernel}")
    stored = [v != 0 or bool(keep is not None and keep[i]) for i, v in enumerate(values)]
    if not any(stored):
        stored[0] = True
    bits = bytearray((n + 7) // 8)
    stream = bytearray()
    group_bytes = []
    per_group = kernel_group * elements_per_kernel
    for i, v in enumerate(values):
        if i % per_group == 0:
            group_bytes.append(0)
        if stored[i]:
            bits[i // 8] |= 1 << (i % 8)
            stream += v.to_bytes(size, "little")
            group_bytes[-1] += size
    wgs = b"".join(g.to_bytes(4, "little") for g in group_bytes)
    return Compressed(_pad(bytes(bits), ENTRY), _pad(bytes(stream), ENTRY), _pad(wgs, WGS_ATOM))


def decompress(wmb: bytes, stream: bytes, *, elements: int, size: int) -> bytes:
    """The uncompressed stream of ``elements`` elements from WMB bits and stored elements."""
    out = bytearray()
    pos = 0
    for i in range(elements):
        if (wmb[i // 8] >> (i % 8)) & 1:
            if pos + size > len(stream):
                raise ValueError(f"element {i}: the stream ends after {len(stream) // size} elements")
            out += stream[pos: pos + size]
            pos += size
        else:
            out += bytes(size)
    return bytes(out)
