"""CRC-32 (zlib's reflected IEEE polynomial) of runs of zero bytes, without materialising them.

``check_crc`` over gigabytes of memory that was never written must cost microseconds, not a gigabyte
buffer: appending zeros is a linear map on the CRC register, so n zero bytes are that map raised to the
n-th power, built by repeated squaring (as zlib's ``crc32_combine`` does).
"""
from __future__ import annotations

from functools import lru_cache

_POLY = 0xEDB88320  # reflected 0x04C11DB7


def _apply(matrix: tuple[int, ...], vector: int) -> int:
    """GF(2) matrix (32 columns as ints) times vector."""
    out, i = 0, 0
    while vector:
        if vector & 1:
            out ^= matrix[i]
        vector >>= 1
        i += 1
    return out


def _square(matrix: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(_apply(matrix, col) for col in matrix)


@lru_cache(maxsize=None)
def _zero_bytes_operator(log2_bytes: int) -> tuple[int, ...]:
    """The map on the (inverted) CRC register for 2**log2_bytes zero bytes."""
    if log2_bytes == 0:
        bit = (_POLY,) + tuple(1 << i for i in range(31))  # one zero bit: shift right, xor poly on carry
        op = bit
        for _ in range(3):  # 8 bits = 2**3 squarings of the one-bit map
            op = _square(op)
        return op
    return _square(_zero_bytes_operator(log2_bytes - 1))


def crc32_zeros(crc: int, nbytes: int) -> int:
    """``zlib.crc32(bytes(nbytes), crc)`` in O(log nbytes) time and no memory."""
    if nbytes < 0:
        raise ValueError(f"negative length {nbytes}")
    state = crc ^ 0xFFFFFFFF
    k = 0
    while nbytes:
        if nbytes & 1:
            state = _apply(_zero_bytes_operator(k), state)
        nbytes >>= 1
        k += 1
    return state ^ 0xFFFFFFFF
