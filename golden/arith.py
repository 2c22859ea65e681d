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
    """``v / 2**shift`` rounded to nearest, ties away from zero; a negative shift shifts left.

    Exact for any shift and |v| < 2**63: the rounding bit is added after shifting by ``shift - 1``,
    ``((|v| >> (s-1)) + 1) >> 1 == (|v| + 2**(s-1)) >> s``, so nothing overflows int64 even for the
    10-bit EW truncation (shifts up to 1023) or products near 2**62. Shifts of 64 or more give 0.
    """
    v = as_i64(v)
    s = as_i64(shift)
    if s.ndim == 0 and int(s) == 0:
        return v
    if s.size and 0 < int(s.min()) and int(s.max()) < 62:
        # Fast path for right shifts (scalar or per channel): for v < 0, -floor((-v + h) / 2^s) equals
        # (v + h - 1) >> s with h = 2^(s-1); |v| < 2^62 keeps v + h inside int64.
        h = np.left_shift(1, s - 1)
        return (v + h - (v < 0)) >> s
    mag = np.abs(v)
    right = ((mag >> np.clip(s - 1, 0, 63)) + 1) >> 1
    right = np.where(s > 63, 0, right)
    right = np.where(v < 0, -right, right)
    if s.ndim == 0 and int(s) > 0:
        return right
    left = v << np.clip(-s, 0, 63)
    return np.where(s > 0, right, left)


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
