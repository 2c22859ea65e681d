"""LRN on CDP in fp16 (``compiler.lut.lrn_fp16``): the compiler's table run on golden's CDP over square
sums from 0 to deep in LE's octaves, against the float function (within the design's predicted error) and
against the plain reference math of the same registers (bit for bit); networks keep LRN on the DLA."""
from __future__ import annotations

import numpy as np
import pytest

from compiler.lut import LRN_SIZES, lrn_fp16
from golden import Dla
from golden.config import get_config
from compiler.codegen.pack import unpack_feature
from regressions.lib.programs import wide as programs_wide
from regressions.lib.reference import cdp_fp16 as ref

NV_FULL = get_config("nv_full")
#: fp16's relative rounding step: the output x * r is narrowed to fp16 once, r once more to FP17.
FP16_STEP = 2.0 ** -10


def _run(x: np.ndarray, design, size: int) -> np.ndarray:
    """The design's CDP program on golden over fp16 patterns ``x`` (C, H, W): output fp16 patterns."""
    p = design.params
    layer = programs_wide.WideLrnLayer(x=x, dtype="fp16", lut=p.lut, normalz_len=LRN_SIZES[size])
    prog = programs_wide.program_cdp_wide(NV_FULL, layer)
    out = prog.run(Dla(NV_FULL))
    c, h, w = x.shape
    return unpack_feature(out, c, h, w, NV_FULL.atom_elements("fp16"), 2) & 0xFFFF


def _values(rng: np.random.Generator, shape, unit: float) -> np.ndarray:
    """Magnitudes log-uniform over unit * 2^[-10, 3], random signs, some zeros, as float16."""
    v = unit * np.exp2(rng.uniform(-10, 3, shape)) * rng.choice([-1.0, 1.0], shape)
    v[rng.random(shape) < 0.1] = 0.0
    return v.astype(np.float16)


@pytest.mark.parametrize("size,alpha,beta,bias", [(5, 1e-4, 0.75, 1.0), (5, 1e-4, 0.75, 2.0), (3, 5e-5, 0.5, 1.0),
                                                  (9, 1e-3, 0.75, 1.5)])
def test_cdp_lrn_fp16_follows_the_function_within_the_predicted_error(size, alpha, beta, bias) -> None:
    design = lrn_fp16(size, alpha, beta, bias)
    assert design.lo_error < 6e-4 and design.lo_reach > 4  # within about one fp16 step where f bends
    assert design.le_error < 0.05  # a power law interpolated per octave: a few percent at most
    rng = np.random.default_rng(size)
    x = _values(rng, (24, 6, 7), (bias * size / alpha) ** 0.5)  # u = a*S/bias from 0 to ~10^2
    got = _run(x.view(np.uint16).astype(np.int64), design, size)
    xs = x.astype(np.float64)
    half = size // 2
    sq = np.pad(xs * xs, ((half, half), (0, 0), (0, 0)))
    s = sum(sq[d: d + xs.shape[0]] for d in range(size))
    ideal = xs * (bias + alpha / size * s) ** -beta
    y = got.astype(np.uint16).view(np.float16).astype(np.float64)
    u = alpha / size * s / bias
    tol = np.where(u <= design.lo_reach, design.lo_error, design.le_error) + 2 * FP16_STEP
    err = np.abs(y - ideal)
    assert np.all(err <= tol * np.abs(ideal) + 2.0 ** -24), float(np.max(err / np.maximum(np.abs(ideal), 1e-30)))
    assert (u > design.lo_reach).mean() > 0.1 and (u <= design.lo_reach).mean() > 0.1  # both tables used
    want = ref.lrn_fp16(x.view(np.uint16).astype(np.int64)[:, :2, :3], lut=design.params.lut,
                        normalz_len=LRN_SIZES[size])  # the plain-loop reference is slow: a corner of the cube
    np.testing.assert_array_equal(got[:, :2, :3], want & 0xFFFF)


def test_lrn_fp16_refuses_what_it_cannot_tabulate() -> None:
    with pytest.raises(ValueError, match="windows are 3, 5, 7 or 9"):
        lrn_fp16(4, 1e-4, 0.75, 1.0)
    with pytest.raises(ValueError, match="alpha > 0"):
        lrn_fp16(5, 0.0, 0.75, 1.0)
    with pytest.raises(ValueError, match="exponent range"):
        lrn_fp16(5, 1e-30, 0.75, 1.0)
    with pytest.raises(ValueError, match="beyond fp16"):
        lrn_fp16(5, 1e-4, 3.0, 1e-3)
