"""Golden against the fp16 direct-convolution reference (``regressions.lib.reference.conv_fp16``) on random
CMAC/CACC words and whole convolutions (the fuzz property ``conv_fp16`` covers register programs; here the
arithmetic units are compared directly, on wider value ranges than a program reaches). The reference's
hand-checked cases are unit tests: ``tests/regressions/lib/reference/test_conv_fp16_reference.py``.
"""
from __future__ import annotations

import numpy as np
import pytest

from golden.engines import conv_fp16 as golden
from golden.engines.conv_datapath import ConvGeometry
from regressions.lib.reference import conv_fp16 as ref

pytestmark = pytest.mark.reference


# ---- golden against the reference ---------------------------------------------------------------------------
def test_golden_cacc_words_equal_the_reference() -> None:
    rng = np.random.default_rng(11)
    n = 20_000
    ae = rng.integers(0, 256, n)
    am = rng.integers(-(1 << 39), 1 << 39, n) >> rng.integers(0, 40, n)
    me = rng.integers(0, 15, n) * 4
    mm = rng.integers(-(1 << 37), 1 << 37, n) >> rng.integers(0, 38, n)
    near = rng.random(n) < 0.7  # exponents within reach of each other, where rounding happens
    ae = np.where(near, np.clip(me + 49 - rng.integers(-3, 42, n), 0, 254), ae)
    ae = np.where(rng.random(n) < 0.02, 255, ae)
    me = np.where(rng.random(n) < 0.02, 63, me)
    am = np.where(rng.random(n) < 0.03, 0, am)
    mm = np.where(rng.random(n) < 0.03, 0, mm)
    ge, gm = golden.cacc_add(ae, am, me, mm)
    want = [ref.cacc_add((int(a), int(b)), (int(c), int(d))) for a, b, c, d in zip(ae, am, me, mm)]
    assert list(zip(ge.tolist(), gm.tolist())) == want
    bits = golden.fp48_to_fp32(ae, am)
    assert bits.tolist() == [ref.fp48_to_fp32((int(a), int(b))) for a, b in zip(ae, am)]


def _fp16_bits(rng: np.random.Generator, shape: tuple[int, ...], e_lo: int, e_hi: int) -> np.ndarray:
    sign, expo = rng.integers(0, 2, shape), rng.integers(e_lo, e_hi + 1, shape)
    bits = (sign << 15) | (expo << 10) | rng.integers(0, 1024, shape)
    specials = rng.random(shape) < 0.05
    return np.where(specials, rng.choice([0, 0x8000, 0x7C00, 0xFC00], shape), bits)


def test_golden_slices_equal_the_reference() -> None:
    rng = np.random.default_rng(12)
    for _ in range(40):
        e_lo = int(rng.integers(0, 31))
        w = _fp16_bits(rng, (3, ref.LANES), e_lo, min(30, e_lo + int(rng.integers(0, 12))))
        d = _fp16_bits(rng, (5, ref.LANES), e_lo, min(30, e_lo + int(rng.integers(0, 12))))
        ge, gm = golden.cmac_slice(w, d)
        for k in range(3):
            for p in range(5):
                assert (int(ge[k, p]), int(gm[k, p])) == ref.cmac_fp16(w[k].tolist(), d[p].tolist())


@pytest.mark.parametrize("seed", range(8))
def test_golden_convolution_equals_the_reference(seed: int) -> None:
    rng = np.random.default_rng(200 + seed)
    c, h, wd = int(rng.integers(1, 140)), int(rng.integers(1, 4)), int(rng.integers(1, 4))
    k, r, s = int(rng.integers(1, 4)), int(rng.integers(1, h + 1)), int(rng.integers(1, wd + 1))
    pt, pl = int(rng.integers(0, r)), int(rng.integers(0, s))
    oh, ow = h + 2 * pt - r + 1, wd + 2 * pl - s + 1
    e_lo = int(rng.integers(0, 28))
    x = _fp16_bits(rng, (c, h, wd), e_lo, min(30, e_lo + 6))
    w = _fp16_bits(rng, (k, c, r, s), e_lo, min(30, e_lo + 6))
    pad = int(rng.integers(0, 1 << 16)) if seed % 2 else 0
    g = ConvGeometry(channels=c, height=h, width=wd, kernels=k, kernel_height=r, kernel_width=s, out_height=oh,
                     out_width=ow, pad_top=pt, pad_left=pl, pad_value=pad, dtype="fp16")
    got = golden.direct_conv_fp16(x, w, g).astype(np.int64)
    want = ref.direct_conv_fp16(x, w, pad=(pt, pl), pad_value=pad, out_hw=(oh, ow))
    np.testing.assert_array_equal(got, want)
