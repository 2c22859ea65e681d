"""Integer helpers shared by the reference modules (written independently of the golden model).

Every right shift in the NVDLA int8 datapaths is an ``ac_fixed`` conversion with
``AC_RND_INF`` rounding (half away from zero) followed by ``AC_SAT`` saturation, so the
reference builds everything from three primitives: :func:`rha`, :func:`sat` and
:func:`sign_extend`.
"""

from __future__ import annotations


class OutsideCmodDomain(ValueError):
    """The configuration reaches a point where the cmod's result is undefined C behaviour.

    Examples: a native C shift by at least the operand width, or a signed int64 overflow.
    The reference refuses such inputs rather than guessing; property tests should
    ``assume`` them away.
    """


def rha(v: int, s: int) -> int:
    """Return ``v / 2**s`` rounded to nearest, ties away from zero (ac_fixed AC_RND_INF).

    ``s <= 0`` means an exact left shift by ``-s``.  This is the rounding used by the
    cmod's ``IntShiftRight``, the CACC clip, every CVT, SDP truncation, PDP and CDP.
    """
    v = int(v)
    s = int(s)
    if s <= 0:
        return v << (-s)
    magnitude = abs(v)
    quotient, remainder = divmod(magnitude, 1 << s)
    if 2 * remainder >= (1 << s):
        quotient += 1
    return quotient if v >= 0 else -quotient


def sat(v: int, bits: int) -> int:
    """Clamp ``v`` to the signed ``bits``-bit range (``IntSaturation`` / AC_SAT)."""
    hi = (1 << (bits - 1)) - 1
    lo = -(1 << (bits - 1))
    v = int(v)
    if v > hi:
        return hi
    if v < lo:
        return lo
    return v


def sign_extend(v: int, bits: int) -> int:
    """Interpret the low ``bits`` bits of ``v`` as a two's-complement number.

    This is also what narrowing an ``ac_int`` by assignment does (wrap, no saturation).
    """
    mask = (1 << bits) - 1
    v = int(v) & mask
    if v >> (bits - 1):
        v -= 1 << bits
    return v


def check_range(name: str, v: int, lo: int, hi: int) -> int:
    """Return ``int(v)`` if ``lo <= v <= hi``; raise ValueError naming the parameter otherwise.

    Reference functions validate every scalar against the width of the hardware field it
    stands for, so a glue-code mistake shows up as an error instead of a silent wrap.
    """
    iv = int(v)
    if iv != v or not lo <= iv <= hi:
        raise ValueError(f"{name}={v!r} outside [{lo}, {hi}]")
    return iv


def check_signed(name: str, v: int, bits: int) -> int:
    """``check_range`` for a signed ``bits``-bit field."""
    return check_range(name, v, -(1 << (bits - 1)), (1 << (bits - 1)) - 1)


def check_unsigned(name: str, v: int, bits: int) -> int:
    """``check_range`` for an unsigned ``bits``-bit field."""
    return check_range(name, v, 0, (1 << bits) - 1)
