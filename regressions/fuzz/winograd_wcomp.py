"""Fuzz properties of Winograd convolution and compressed conv weights, on the presets that have them.

- "conv_winograd": a Winograd convolution (``strategies.conv_winograd.winograd_layers``) through its register
  program (``regressions.lib.programs.winograd``) on ``golden.Dla`` writes exactly the bytes the plain-loop
  reference (``regressions.lib.reference.conv_winograd`` then ``reference.sdp``'s output converter) computes,
  every lane of the output atoms included.
- "conv_wcomp": a direct or Winograd convolution whose weights the program hands over compressed (WMB, weight
  stream, WGS from ``regressions.lib.reference.wcomp``) writes exactly what the reference computes from the
  uncompressed weights: decompression is lossless and in the hardware's order.

Both examples are one DRAM program, so a saved failure carries a replayable trace checking the reference's
CRC. Neither our RTL nor NVDLA's nv_small has these features (no ``duts``).
"""
from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import reject

from compiler.codegen.pack import pack_dc_weights, pack_feature, unpack_feature
from compiler.codegen.winograd import BPE
from golden import Dla
from golden.config import HwConfig
from regressions.fuzz import engines, serialize
from regressions.fuzz.properties import Property, register
from regressions.lib import programs
from regressions.lib.programs import winograd as pw
from regressions.lib.reference.arith import OutsideCmodDomain
from regressions.lib.strategies import configs_with
from regressions.lib.strategies.conv_winograd import WcompExample, wcomp_examples, winograd_layers

# The example classes of this module, so saved failures read back (serialize keeps one table by name).
for _cls in (pw.WinogradLayer, WcompExample):
    serialize.TYPES.setdefault(_cls.__name__, _cls)

#: Presets with Winograd / with weight compression (nv_full; master's nv_large has neither).
WINOGRAD_CONFIGS = configs_with(lambda hw: hw.winograd)
WCOMP_CONFIGS = configs_with(lambda hw: hw.weight_compression)

#: (program, expected output bytes, (channels, height, width, bytes per element))
Built = tuple[programs.LayerTest, bytes, tuple[int, int, int, int]]


def build_winograd(hw: HwConfig, layer: pw.WinogradLayer) -> Built:
    bpe = BPE[layer.precision]
    want = pw.expected_winograd(hw, layer)
    k = layer.u.shape[0]
    return (pw.program_winograd(hw, layer), pack_feature(want, pw.atom(hw, layer.precision), bpe),
            (k, *layer.out_hw, bpe))


def build_wcomp(hw: HwConfig, ex: WcompExample) -> Built:
    """The layer's program with its weights compressed; the expected bytes are the uncompressed layer's."""
    if ex.wg is not None:
        program, want, shape = build_winograd(hw, ex.wg)
        raw, kernels, precision = pw.weight_stream(hw, ex.wg), ex.wg.u.shape[0], ex.wg.precision
    elif ex.dc is not None:
        program, want, (c, h, w) = engines.build_conv(hw, ex.dc)
        shape = (c, h, w, 1)
        raw, kernels, precision = pack_dc_weights(ex.dc.w, hw)[: ex.dc.w.size], ex.dc.w.shape[0], "int8"
    else:
        raise ValueError("a WcompExample needs a dc or a wg layer")
    pw.compress_weights(hw, program, raw, kernels=kernels, precision=precision, keep=ex.keep)
    return program, want, shape


def describe(got: bytes, want: bytes, shape: tuple[int, int, int, int], atom: int) -> str:
    """How many output values differ, and the first (channel, y, x): golden vs reference."""
    c, h, w, bpe = shape
    if len(got) != len(want):
        return f"golden wrote {len(got)} bytes, the reference {len(want)}"
    g = unpack_feature(got, c, h, w, atom, bpe, lanes=True)
    r = unpack_feature(want, c, h, w, atom, bpe, lanes=True)
    diff = np.argwhere(g != r)
    ch, y, x = (int(v) for v in diff[0])
    lane = " (a padding lane)" if ch >= c else ""
    return (f"golden differs from the reference in {len(diff)} of {g.size} output values; first at channel {ch}"
            f"{lane}, y {y}, x {x}: golden {int(g[ch, y, x])}, reference {int(r[ch, y, x])}")


def _check(build):
    def check(hw: HwConfig, example: Any) -> None:
        try:
            program, want, shape = build(hw, example)
        except OutsideCmodDomain:
            reject()
        got = program.run(Dla(hw))
        if got != want:
            atom = hw.memory_atomic_size // shape[3]
            raise AssertionError(describe(got, want, shape, atom))

    return check


def _program(build):
    def program(hw: HwConfig, example: Any) -> tuple[programs.LayerTest, bytes]:
        built, want, _ = build(hw, example)
        return built, want

    return program


CONV_WINOGRAD = register(Property(
    name="conv_winograd", engine="CONV", configs=WINOGRAD_CONFIGS, strategy=winograd_layers,
    check=_check(build_winograd), to_json=serialize.to_json, from_json=serialize.from_json,
    program=_program(build_winograd),
))
CONV_WCOMP = register(Property(
    name="conv_wcomp", engine="CONV", configs=WCOMP_CONFIGS, strategy=wcomp_examples,
    check=_check(build_wcomp), to_json=serialize.to_json, from_json=serialize.from_json,
    program=_program(build_wcomp),
))
#: This module's properties.
WINOGRAD_WCOMP_PROPERTIES = (CONV_WINOGRAD, CONV_WCOMP)

__all__ = ["CONV_WCOMP", "CONV_WINOGRAD", "WINOGRAD_WCOMP_PROPERTIES", "build_wcomp", "build_winograd"]
