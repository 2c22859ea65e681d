"""Integer arithmetic primitives of the NVDLA datapath, vectorized over int64 numpy arrays.

The cmod (``cmod/hls/include/nvdla_int.h``) shifts right with rounding half away from zero and then
saturates; every CVT, CACC, SDP truncation, PDP and CDP uses that rule (NVDLA_NOTES §4, §8.1).
"""
from __future__ import annotations

import numpy as np

Int = np.ndarray | int


def as_i64(x: Int) -> np.ndarray:
    return np.asarray(x, dtype=np.int64)


def rha(v: Int, shift: Int) -> np.ndarray:
    """``v / 2**shift`` rounded to nearest, ties away from zero. A negative shift shifts left."""
    v = as_i64(v)
    s = as_i64(shift)
    if s.ndim == 0:
        s_int = int(s)
        if s_int <= 0:
            return v << -s_int
        mag = (np.abs(v) + (1 << (s_int - 1))) >> s_int
        return np.where(v < 0, -mag, mag)
    pos = np.maximum(s, 0)
    half = np.where(pos > 0, np.left_shift(1, np.maximum(pos - 1, 0)), 0)
    mag = (np.abs(v) + half) >> pos
    right = np.where(v < 0, -mag, mag)
    return np.where(s < 0, v << np.maximum(-s, 0), right)


def sat(v: Int, bits: int) -> np.ndarray:
    """Clamp to the signed ``bits``-bit range."""
    lim = 1 << (bits - 1)
    return np.clip(as_i64(v), -lim, lim - 1)


def sat_unsigned(v: Int, bits: int) -> np.ndarray:
    return np.clip(as_i64(v), 0, (1 << bits) - 1)


def sign_extend(v: Int, bits: int) -> np.ndarray | int:
    """Interpret the low ``bits`` bits of ``v`` as two's complement."""
    if isinstance(v, (int, np.integer)):
        v = int(v) & ((1 << bits) - 1)
        return v - (1 << bits) if v >> (bits - 1) else v
    a = as_i64(v) & ((1 << bits) - 1)
    return np.where(a >> (bits - 1) != 0, a - (1 << bits), a)


def shift_right_sat(v: Int, shift: Int, bits: int) -> np.ndarray:
    """cmod ``IntShiftRight``: rha then saturate to ``bits``."""
    return sat(rha(v, shift), bits)
