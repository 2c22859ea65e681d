"""Byte layouts NVDLA's engines read: feature cubes, direct-conv weights, SDP operands (NOTES §3)."""
from __future__ import annotations

import numpy as np

from golden.config import HwConfig

_DT = {1: "<i1", 2: "<i2", 4: "<i4"}


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
    return np.ascontiguousarray(arr).astype(_DT[bpe]).tobytes()


def unpack_feature(raw: bytes, c: int, h: int, w: int, atom: int, bpe: int = 1, lanes: bool = False) -> np.ndarray:
    """Inverse of ``pack_feature``; with ``lanes`` the padding lanes of the last surface are kept."""
    surfaces = -(-c // atom)
    arr = np.frombuffer(raw[: surfaces * atom * h * w * bpe], dtype=_DT[bpe]).astype(np.int64)
    cube = arr.reshape(surfaces, h, w, atom).transpose(0, 3, 1, 2).reshape(surfaces * atom, h, w)
    return cube if lanes else cube[:c]


def pack_dc_weights(w: np.ndarray, hw: HwConfig, dtype: str = "int8") -> bytes:
    """NVDLA direct-conv weight layout (NOTES §3): kernel groups of atomic K (half of it for 16-bit
    elements), channel groups of MAC atomic C, then r, s, k, c; partial groups unpadded; total rounded up to
    the CBUF width. 16-bit weights are int16 values or fp16 bit patterns, little-endian."""
    k_n, c_n, r_n, s_n = w.shape
    kf, cf = hw.mac_atomic_k_for(dtype), hw.mac_atomic_c  # type: ignore[arg-type]
    elem = np.int8 if dtype == "int8" else "<u2"
    if dtype != "int8":
        w = np.asarray(w, dtype=np.int64) & 0xFFFF
    if k_n % kf == 0 and c_n % cf == 0:  # whole groups only: one transpose instead of a loop per group
        groups = np.asarray(w).astype(elem).reshape(k_n // kf, kf, c_n // cf, cf, r_n, s_n)
        raw = np.ascontiguousarray(groups.transpose(0, 2, 4, 5, 1, 3)).tobytes()
        return raw + bytes(-len(raw) % hw.cbuf_bank_width)
    parts = []
    for k0 in range(0, k_n, kf):
        for c0 in range(0, c_n, cf):
            blk = w[k0:k0 + kf, c0:c0 + cf]  # (k, c, r, s)
            parts.append(np.ascontiguousarray(blk.transpose(2, 3, 0, 1)).astype(elem).tobytes())
    raw = b"".join(parts)
    return raw + bytes(-len(raw) % hw.cbuf_bank_width)


def pack_operands(ops: list[np.ndarray], c: int, h: int, w: int, atom: int, size: int, mode: str) -> tuple[bytes, int, int]:
    """Interleave SDP operand components (ALU then MUL) and pack them; returns (bytes, line, surface stride).
    ``mode`` "kernel": one value per channel; "element": a (C, H, W) cube of values."""
    comps = len(ops)
    lane = size * comps
    if mode == "kernel":
        padded = -(-c // atom) * atom
        arr = np.zeros((padded, comps), dtype=np.int64)
        for i, op in enumerate(ops):
            arr[:c, i] = op
        return arr.astype(_DT[size]).tobytes(), 0, 0
    surfaces = -(-c // atom)
    arr = np.zeros((surfaces * atom, h, w, comps), dtype=np.int64)
    for i, op in enumerate(ops):
        arr[:c, :, :, i] = op
    arr = arr.reshape(surfaces, atom, h, w, comps).transpose(0, 2, 3, 1, 4)
    line = w * atom * lane
    return np.ascontiguousarray(arr).astype(_DT[size]).tobytes(), line, line * h
