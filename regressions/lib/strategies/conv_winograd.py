"""Winograd convolutions and compressed conv weights, legal on a config that has the feature (nv_full).

Winograd (``winograd_layers``): int8 or int16 features (what the config's datapath supports); CDMA stride
(``D_CONV_STRIDE``, channel extension) and padding (``D_ZERO_PADDING``: 5-bit left/top, 6-bit right/bottom)
such that the padded size is a multiple of 4*stride; outputs in whole 4x4 blocks, the extended input 4 (or
8) pixels larger; channels filling partial and whole atoms (the padding lanes are read too), kernels filling
partial and whole kernel groups (32 int8, 16 int16); PRA_TRUNCATE 0..2 (RDL range); CLIP_TRUNCATE at most 16;
the SDP output CVT. Weights are drawn as pre-transformed 4x4 values, or made from 3x3 (stride-extended) kernels
by the reference's writer with the integral ``(2G) g (2G)^T``. Sizes stay within what the plain-loop
reference does in about 50 ms.

Compressed weights (``wcomp_examples``): a direct convolution (``conv_layers``) or a Winograd one whose
weights are thinned by a drawn density (all kept .. all zero), some zeros stored explicitly (``keep``); the
data banks leave the last CBUF bank to the WMB.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np
from hypothesis import assume
from hypothesis import strategies as st

from golden.config import HwConfig
from golden.engines.conv_datapath import data_banks_needed
from regressions.lib import programs
from regressions.lib.strategies import (
    field_ints,
    field_range,
    ints,
    magnitude_bits,
    rescale_shift,
    signed_bits,
    values,
)
from regressions.lib.programs.winograd import WinogradLayer
from regressions.lib.reference import conv_winograd as ref_wg
from regressions.lib.strategies.conv import conv_layers

#: Multiply-accumulates of the plain-loop reference (K x tiles x extended channels x 16).
WORK = 160_000
#: Strides drawn (the field holds 1..8; larger ones only grow the extended channels).
MAX_STRIDE = 3


@dataclass
class WcompExample:
    """A conv layer (direct: ``dc``, or Winograd: ``wg``) whose weights are read compressed; ``keep`` flags
    zero weight elements stored explicitly (empty: none)."""

    dc: programs.ConvLayer | None = None
    wg: WinogradLayer | None = None
    keep: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros(0, dtype=np.int64))


def _precision(draw, hw: HwConfig) -> str:
    return draw(st.sampled_from([p for p in ("int8", "int16") if hw.supports(p)]))  # type: ignore[arg-type]


def _axis(draw, hw: HwConfig, out: int, stride: int, before: str, after: str) -> tuple[int, int, int]:
    """(input size, pad before, pad after) of one axis whose extended size is ``out`` + 4 (or + 8)."""
    ext = out + draw(st.sampled_from([4, 4, 4, 8]))
    total = ext * stride
    lo_b, hi_b = field_range(hw, "CDMA", "D_ZERO_PADDING", before)
    pad_before = draw(ints((lo_b, min(hi_b, total - 1)), typical=(0, 2)))
    _, hi_a = field_range(hw, "CDMA", "D_ZERO_PADDING", after)
    pad_after = draw(ints((0, min(hi_a, total - pad_before - 1)), typical=(0, 3)))
    return total - pad_before - pad_after, pad_before, pad_after


@st.composite
def winograd_layers(draw, hw: HwConfig) -> WinogradLayer:
    """A Winograd convolution legal on ``hw`` (which must have Winograd)."""
    precision = _precision(draw, hw)
    bits = 8 if precision == "int8" else 16
    atom = hw.atom_elements(precision)  # type: ignore[arg-type]
    group = hw.mac_atomic_k_for(precision)  # type: ignore[arg-type]
    sy = draw(ints((1, MAX_STRIDE), typical=(1, 2)))
    sx = draw(ints((1, MAX_STRIDE), typical=(1, 2)))
    oh = 4 * draw(st.integers(1, 3))
    ow = 4 * draw(st.integers(1, 3))
    h, pt, pb = _axis(draw, hw, oh, sy, "PAD_TOP", "PAD_BOTTOM")
    w, pl, pr = _axis(draw, hw, ow, sx, "PAD_LEFT", "PAD_RIGHT")
    c = draw(st.one_of(st.integers(1, 2 * atom), st.sampled_from([atom, 2 * atom])))
    ce = -(-c // atom) * atom * sx * sy
    tiles = oh * ow // 4
    k_top = max(1, min(2 * group + 1, WORK // (tiles * ce * 16)))
    # Partial and whole kernel groups: two draws in three sit at a group boundary (as far as the budget allows).
    boundary = st.sampled_from(sorted({min(n, k_top) for n in (group, group + 1, 2 * group + 1)}))
    k = draw(st.one_of(st.integers(1, k_top), boundary, boundary))

    x = values(draw, (c, h, w), signed_bits(bits))
    if draw(st.booleans()):
        u = values(draw, (k, ce, 4, 4), signed_bits(bits))
    else:  # made from small 3x3 (stride-extended) kernels: (2G) g (2G)^T, at most 9 x |g|
        g_lim = (1 << (bits - 1)) // 9 - 1
        rk, sk = draw(st.integers(1, 3 * sy)), draw(st.integers(1, 3 * sx))
        g = values(draw, (k, c, rk, sk), (-g_lim, g_lim))
        u = np.asarray(ref_wg.winograd_weights(g, stride=(sy, sx), atom=atom, scale=2, precision=precision),
                       dtype=np.int64)
    pad_value = draw(st.integers(*signed_bits(bits)))
    pra = draw(field_ints(hw, "CSC", "D_PRA_CFG", "PRA_TRUNCATE", hi=2))
    # One block's tile output is a sum of up to 36 products; blocks add up like a random walk.
    acc_bits = (bits - pra) + magnitude_bits(u) + (4 * ce).bit_length() // 2 + 3
    clip = draw(field_ints(hw, "CACC", "D_CLIP_CFG", "CLIP_TRUNCATE", hi=16,
                           typical=(max(0, acc_bits - 20), min(16, acc_bits - 6))))
    out_bits = bits
    value_bits = max(1, acc_bits - clip)
    scale = draw(field_ints(hw, "SDP", "D_CVT_SCALE", "CVT_SCALE", signed=True, typical=(-1024, 1024)))
    near = 1 << max(0, value_bits - 2)
    out_cvt = (
        draw(field_ints(hw, "SDP", "D_CVT_OFFSET", "CVT_OFFSET", signed=True, typical=(-near, near))),
        scale,
        rescale_shift(draw, field_range(hw, "SDP", "D_CVT_SHIFT", "CVT_SHIFT"), value_bits + 1, scale, out_bits),
    )
    return WinogradLayer(x=x, u=u, out_hw=(oh, ow), stride=(sy, sx), pad=(pt, pl, pb, pr), pad_value=pad_value,
                         pra_truncate=pra, clip_truncate=clip, precision=precision, out_cvt=out_cvt)


def _thin(draw, weights: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Zero a drawn fraction of ``weights`` and flag some zeros to be stored explicitly; (weights, keep)."""
    density = draw(st.sampled_from([0.3, 0.05, 0.6, 0.9, 1.0, 0.0]))
    rng = np.random.default_rng(draw(st.integers(0, (1 << 32) - 1)))
    thinned = np.where(rng.random(weights.shape) < density, weights, 0)
    keep = np.zeros(0, dtype=np.int64)
    if draw(st.integers(0, 3)) == 0:
        keep = (rng.random(weights.size) < draw(st.sampled_from([0.01, 0.2, 1.0]))).astype(np.int64)
    return thinned, keep


@st.composite
def wcomp_examples(draw, hw: HwConfig) -> WcompExample:
    """A direct or Winograd convolution with its weights to be compressed (``hw`` has compression)."""
    if hw.winograd and draw(st.booleans()):
        layer = draw(winograd_layers(hw))
        u, keep = _thin(draw, layer.u)
        return WcompExample(wg=dataclasses.replace(layer, u=u), keep=keep)
    layer = draw(conv_layers(hw))
    c, h, w = layer.x.shape
    assume(data_banks_needed(hw, c, h, w) <= hw.cbuf_bank_number - 2)
    weights, keep = _thin(draw, layer.w)
    return WcompExample(dc=dataclasses.replace(layer, w=weights), keep=keep)


__all__ = ["WcompExample", "wcomp_examples", "winograd_layers"]
