"""Reference math for a batched direct convolution and where SDP writes each batch.

Rules (nvdlav1 cmod: CDMA batch fetch, CSC batch loop, CACC ``SendToSDPCommon``, SDP
``WdmaSequenceBatch``): batch b is an independent direct convolution of batch b's input with the one kernel;
the SDP converts every batch alike and writes element (c, y, x) of batch b at
``b * batch_stride + (c // atom) * surface_stride + y * line_stride + x * atom + c % atom`` from its base,
every lane of the last surface included.
"""

from __future__ import annotations

import numpy as np

from .arith import check_range
from .conv import cdma_input_cvt, direct_conv


def batched_conv(xs, w, *, cvt: tuple[int, int, int] | None = None, **conv) -> np.ndarray:
    """(N, K, OH, OW): ``direct_conv`` of each batch (after the CDMA input CVT when ``cvt`` is given)."""
    batches = np.asarray(xs)
    if batches.ndim != 4:
        raise ValueError("xs must be (N, C, H, W)")
    check_range("batches", batches.shape[0], 1, 32)
    outs = []
    for b in range(batches.shape[0]):
        x = batches[b] if cvt is None else cdma_input_cvt(batches[b], *cvt)
        outs.append(direct_conv(x, w, **conv))
    return np.stack(outs)


def place_batches(cubes, *, atom: int, line_stride: int, surface_stride: int, batch_stride: int,
                  size: int) -> bytes:
    """The ``size`` output bytes from the base: each int8 cube (N, C_pad, H, W) at its batch's place, the
    bytes no batch writes left 0."""
    data = np.asarray(cubes)
    n, channels, height, width = data.shape
    if channels % atom:
        raise ValueError("cubes must carry whole atoms (padding lanes included)")
    out = bytearray(size)
    for b in range(n):
        for c in range(channels):
            for y in range(height):
                for x in range(width):
                    addr = b * batch_stride + (c // atom) * surface_stride + y * line_stride + x * atom + c % atom
                    out[addr] = int(data[b, c, y, x]) & 0xFF
    return bytes(out)
