"""The compiled fp16 CMAC + CACC (``golden.engines.conv_fp16_jit``) against the array code it replaces for
NaN-free inputs (``direct_conv_fp16(..., compiled=False)``) and against the plain-loop reference, bit for bit,
over drawn geometries and values: exponent spreads wide enough to shift products out, Inf, denormals, +-0,
pad values, strides, dilations, partial last slices."""
from __future__ import annotations

import importlib.util

import numba
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from golden.engines import conv_fp16 as F
from golden.engines import conv_fp16_jit as jit
from golden.engines.conv_datapath import ConvGeometry
from regressions.lib.reference import conv_fp16 as ref

SPECIAL = np.array([0x0000, 0x8000, 0x7C00, 0xFC00, 0x0001, 0x83FF, 0x7BFF, 0x0400], dtype=np.int64)


def _bits(rng: np.random.Generator, shape, spread: float, special: float) -> np.ndarray:
    """fp16 patterns of N(0,1) * 2^U(-spread, spread), some replaced by special values."""
    v = rng.standard_normal(shape) * np.exp2(rng.uniform(-spread, spread, shape))
    with np.errstate(over="ignore"):  # beyond fp16: Inf
        b = v.astype(np.float16).view(np.uint16).astype(np.int64)
    pick = rng.random(shape) < special
    return np.where(pick, SPECIAL[rng.integers(0, len(SPECIAL), shape)], b)


@st.composite
def layers(draw, max_channels: int = 140):
    c, k = draw(st.integers(1, max_channels)), draw(st.integers(1, 6))
    r, s = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    sy, sx, dy, dx = (draw(st.integers(1, 2)) for _ in range(4))
    pt, pl = draw(st.integers(0, r - 1)), draw(st.integers(0, s - 1))
    h = draw(st.integers((r - 1) * dy + 1, 6))
    w = draw(st.integers((s - 1) * dx + 1, 6))
    oh, ow = (h + pt - (r - 1) * dy - 1) // sy + 1, (w + pl - (s - 1) * dx - 1) // sx + 1
    pad_value = draw(st.sampled_from([0, 0x3C00, 0xC500, 0x7C00]))
    geom = ConvGeometry(c, h, w, k, r, s, oh, ow, stride_y=sy, stride_x=sx, dilation_y=dy, dilation_x=dx,
                        pad_top=pt, pad_left=pl, pad_value=pad_value, dtype="fp16")
    return geom, draw(st.floats(0, 20)), draw(st.sampled_from([0.0, 0.05, 0.3])), draw(st.integers(0, 2**31))


def _operands(case) -> tuple[ConvGeometry, np.ndarray, np.ndarray]:
    geom, spread, special, seed = case
    rng = np.random.default_rng(seed)
    x = _bits(rng, (geom.channels, geom.height, geom.width), spread, special)
    w = _bits(rng, (geom.kernels, geom.channels, geom.kernel_height, geom.kernel_width), spread, special)
    return geom, x, w


@settings(max_examples=60, deadline=None)
@given(case=layers())
def test_compiled_equals_array_code(case) -> None:
    geom, x, w = _operands(case)
    got = F.direct_conv_fp16(x, w, geom)
    want = F.direct_conv_fp16(x, w, geom, compiled=False)
    assert got.dtype == want.dtype == np.uint32
    np.testing.assert_array_equal(got, want)


@settings(max_examples=12, deadline=None)
@given(case=layers(max_channels=70))
def test_compiled_equals_the_plain_loop_reference(case) -> None:
    geom, x, w = _operands(case)
    got = F.direct_conv_fp16(x, w, geom)
    want = ref.direct_conv_fp16(x, w, stride=(geom.stride_y, geom.stride_x),
                                dilation=(geom.dilation_y, geom.dilation_x),
                                pad=(geom.pad_top, geom.pad_left), pad_value=geom.pad_value,
                                out_hw=(geom.out_height, geom.out_width))
    np.testing.assert_array_equal(got, np.asarray(want, dtype=np.uint32))


# ---- the kernel's parts ------------------------------------------------------------------------------------------
def _mantissas(rng: np.random.Generator, n: int) -> np.ndarray:
    """Pre-shifted mantissas of random nonzero fp16 values (normal and denormal), as the CMAC forms them."""
    return F._fields(rng.integers(1, 0x7C01, n))[2].astype(np.int64)


def test_shift_4_booth_product_is_the_floored_product() -> None:
    """``group`` adds floor(p / 16) for lanes one level below the block maximum: the Booth tree's result at
    shift 4 (the kernel relies on it; the module docstring says why it holds)."""
    rng = np.random.default_rng(0)
    w, d = _mantissas(rng, 200_000), _mantissas(rng, 200_000)
    sign = rng.integers(0, 2, w.size)
    mag, neg = F.booth_digits(w)
    negs = ((neg ^ sign) & (mag != 0)).astype(np.uint32)
    got = F.booth_products(mag, negs, d.astype(np.uint32), np.full(w.size, 4))
    np.testing.assert_array_equal(got.astype(np.int64), (np.where(sign == 1, -w, w) * d) >> 4)


def test_packed_booth_equals_the_array_code() -> None:
    """``booth`` on ``booth_code`` (both data signs) against ``conv_fp16.booth_products``, every shift 4..28."""
    jit.kernel()
    rng = np.random.default_rng(1)
    n = 50_000
    w, d = _mantissas(rng, n), _mantissas(rng, n)
    wsign, dsign = rng.integers(0, 2, n), rng.integers(0, 2, n)
    shift = 4 * rng.integers(1, 8, n)
    mag, neg = F.booth_digits(w)
    negs = ((neg ^ wsign ^ dsign) & (mag != 0)).astype(np.uint32)
    want = F.booth_products(mag, negs, d.astype(np.uint32), shift)
    code = jit.booth_code(mag, neg, wsign)

    @numba.njit
    def run(d, shift, code, dsign, out):
        for i in range(d.size):
            c = code[i]
            out[i] = jit.booth(d[i], shift[i], c & 0xFFFF, ((c >> 16) & 0xFFFF) ^ ((c >> 32) & -dsign[i]))

    got = np.empty(n, dtype=np.int64)
    run(d, shift, code, dsign, got)
    np.testing.assert_array_equal(got, want.astype(np.int64))


def test_compiled_group_equals_plain_group() -> None:
    """The LLVM IR ``group`` against its numpy form on blocks with absent lanes and wide level spreads."""
    jit.kernel()
    group = jit.group

    @numba.njit
    def run(wl, dl, ws, ds, out):
        for i in range(wl.shape[0]):
            out[i, 0], out[i, 1], out[i, 2] = group(wl[i], dl[i], ws[i], ds[i])

    rng = np.random.default_rng(2)
    n = 3000
    levels = [np.array([jit.ABSENT, 0, 1, 2, 3, 4, 5, 6, 7]), np.array([jit.ABSENT, 2, 3, 3, 3]),
              np.array([jit.ABSENT, 7, 7, 0])]
    for choices in levels:
        wl, dl = (rng.choice(choices, (n, jit.LANES)).astype(np.int8) for _ in range(2))
        ws, ds = ((_mantissas(rng, n * jit.LANES) * rng.choice([-1, 1], n * jit.LANES)).reshape(n, jit.LANES)
                  .astype(np.int16) for _ in range(2))
        ws[wl == jit.ABSENT] = 0
        ds[dl == jit.ABSENT] = 0
        got = np.empty((n, 3), dtype=np.int64)
        run(wl, dl, ws, ds, got)
        want = np.array([jit.group_plain(wl[i], dl[i], ws[i], ds[i]) for i in range(n)], dtype=np.int64)
        np.testing.assert_array_equal(got, want)


def test_branch_free_cacc_add_equals_the_array_code() -> None:
    """The kernel's ``cacc_add`` against ``conv_fp16.cacc_add``: random accumulators and MAC words of every
    width, zeros, the most negative mantissas and exponent gaps beyond 40."""
    jit.kernel()
    cacc = jit.cacc_add

    @numba.njit
    def run(ae, am, me, mm, out_e, out_m):
        for i in range(ae.size):
            out_e[i], out_m[i] = cacc(ae[i], am[i], me[i], mm[i])

    rng = np.random.default_rng(3)
    n = 400_000

    def signed(bits: int) -> np.ndarray:
        width = rng.integers(0, bits, n)
        v = rng.integers(-(1 << 62), 1 << 62, n) >> (62 - width)
        v = np.where(rng.random(n) < 0.05, 0, v)
        return np.where(rng.random(n) < 0.02, -(1 << width), v)

    am = signed(40)
    am = np.where(rng.random(n) < 0.01, -(1 << 39), am)
    mm = np.clip(signed(38), -(1 << 37), (1 << 37) - 1)
    ae, me = rng.integers(0, 255, n), 4 * rng.integers(0, 15, n)
    got_e, got_m = np.empty(n, dtype=np.int64), np.empty(n, dtype=np.int64)
    run(ae, am, me, mm, got_e, got_m)
    want_e, want_m = F.cacc_add(ae, am, me, mm)
    np.testing.assert_array_equal(got_e, want_e)
    np.testing.assert_array_equal(got_m, want_m)


def _uncompiled_module():
    """A fresh copy of ``conv_fp16_jit`` that ``kernel`` never compiled: its functions are the plain Python
    (with the int versions of ``_clz``/``_ctz``) they are in any process before the first fp16 convolution."""
    spec = importlib.util.spec_from_file_location("conv_fp16_jit_uncompiled", jit.__file__)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_uncompiled_cacc_add_gives_the_same_bits() -> None:
    """Until ``kernel`` compiles them the functions run as plain Python and must give the same bits (module
    docstring): plain ``cacc_add`` (normalizing through ``_lead``/``_clz``) against ``conv_fp16.cacc_add`` on
    MAC words of every width, zero words and accumulators, and exponent gaps beyond 40."""
    plain = _uncompiled_module()
    rng = np.random.default_rng(4)
    n = 4000
    width = rng.integers(0, 38, n)
    mm = np.where(rng.random(n) < 0.05, 0, rng.integers(-(1 << 62), 1 << 62, n) >> (62 - width))
    mm = np.clip(mm, -(1 << 37), (1 << 37) - 1)
    am = np.where(rng.random(n) < 0.05, 0, rng.integers(-(1 << 62), 1 << 62, n) >> (62 - rng.integers(0, 40, n)))
    ae, me = rng.integers(0, 255, n), 4 * rng.integers(0, 15, n)
    got = np.array([plain.cacc_add(int(a), int(b), int(c), int(d)) for a, b, c, d in zip(ae, am, me, mm)])
    want_e, want_m = F.cacc_add(ae, am, me, mm)
    np.testing.assert_array_equal(got[:, 0], want_e)
    np.testing.assert_array_equal(got[:, 1], want_m)


def test_compiled_group_is_exact_when_the_top_lanes_overflow_int32() -> None:
    """64 lanes at one level with the largest pre-shifted mantissas (2047 << 3), all one sign: their products
    add to about 2^34, far beyond int32, so the kernel must rebuild the high bits from 16 * (sum of p >> 4);
    the compiled group must still give the block's exact sum (that of the numpy form)."""
    jit.kernel()
    group = jit.group

    @numba.njit
    def run(wl, dl, ws, ds, out):
        out[0], out[1], out[2] = group(wl, dl, ws, ds)

    top = int(F._fields(np.array([0x0FFF]))[2][0])  # mantissa 0x3FF at the largest pre-shift
    levels = np.full(jit.LANES, 3, dtype=np.int8)
    mant = np.full(jit.LANES, top, dtype=np.int16)
    for sign in (1, -1):
        got = np.empty(3, dtype=np.int64)
        run(levels, levels, mant, (sign * mant).astype(np.int16), got)
        want = jit.group_plain(levels, levels, mant, (sign * mant).astype(np.int16))
        assert tuple(int(v) for v in got) == tuple(int(v) for v in want)
        assert top == 2047 << 3 and abs(int(got[1])) >= 1 << 33  # the sum really is far beyond int32
