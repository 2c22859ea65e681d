"""Fuzz properties of the 16-bit direct convolution (nv_full): golden through its register program equals the
independent plain-loop reference bit for bit, every output lane included.

* ``conv_fp16``: fp16 (or int16 converted by CDMA) through the cmod's block-aligned CMAC and 48-bit CACC
  (``regressions.lib.reference.conv_fp16``), FP32 handed to an otherwise bypassed SDP that writes fp16
  (``Fp32ToFp16``: nearest even, saturating at +-65504).
* ``conv_int16``: int16 through ``regressions.lib.reference.conv`` (48-bit accumulation, CLIP_TRUNCATE) and the
  int16 SDP output converter of ``regressions.lib.reference.sdp``.

Programs come from ``regressions.lib.programs.conv_wide`` (the compiler's codegen is int8 only). Examples are
``WideConvLayer``s, registered with ``regressions.fuzz.serialize`` so shrunk failures are saved and replayed.
"""
from __future__ import annotations

import numpy as np

from golden import Dla
from golden.config import HwConfig
from regressions.fuzz import serialize
from regressions.fuzz.properties import Property, register
from regressions.lib.programs import LayerTest
from regressions.lib.programs.conv_wide import WideConvLayer, atom16, pack16, program_conv_wide, unpack16
from regressions.lib.reference import conv as ref_conv
from regressions.lib.reference import conv_fp16 as ref_fp16
from regressions.lib.reference import sdp as ref_sdp
from regressions.lib.strategies.conv import fp16_conv_layers, int16_conv_layers

#: The only preset with int16 and fp16 datapaths.
CONFIGS = ("nv_full",)

serialize.TYPES.setdefault(WideConvLayer.__name__, WideConvLayer)

Built = tuple[LayerTest, bytes, tuple[int, int, int]]


def _padded(cube: np.ndarray, atom: int) -> np.ndarray:
    c = cube.shape[0]
    out = np.zeros((-(-c // atom) * atom,) + cube.shape[1:], dtype=np.int64)
    out[:c] = cube
    return out


def build_fp16(hw: HwConfig, layer: WideConvLayer) -> Built:
    """LayerTest and the reference's output bytes of an fp16 layer."""
    atom = atom16(hw)
    k = layer.w.shape[0]
    oh, ow = layer.output_hw()
    if layer.source_precision == "int16":
        off, scale, trunc = layer.cvt  # type: ignore[misc]
        x = np.vectorize(lambda v: ref_fp16.int16_cvt_to_fp16(int(v), off, scale, trunc), otypes=[np.int64])(layer.x)
    else:
        x = ref_fp16.nan_to_zero(layer.x) if layer.nan_to_zero else np.asarray(layer.x, dtype=np.int64)
    acc = ref_fp16.direct_conv_fp16(x, layer.w, stride=layer.stride, dilation=layer.dilation, pad=layer.pad,
                                    pad_value=layer.pad_value, out_hw=(oh, ow))
    # Kernels past K: their MAC cells stay off and CACC delivers +0.0 (FP32 0), which SDP converts too.
    half = np.vectorize(ref_fp16.fp32_to_fp16, otypes=[np.int64])(_padded(acc, atom))
    return program_conv_wide(hw, layer), pack16(half, atom), (k, oh, ow)


def build_int16(hw: HwConfig, layer: WideConvLayer) -> Built:
    """LayerTest and the reference's output bytes of an int16 layer."""
    atom = atom16(hw)
    k = layer.w.shape[0]
    oh, ow = layer.output_hw()
    x = layer.x if layer.cvt is None else ref_conv.cdma_input_cvt(layer.x, *layer.cvt, out_bits=16)
    acc = ref_conv.direct_conv(x, layer.w, stride=layer.stride, dilation=layer.dilation, pad=layer.pad,
                               pad_value=layer.pad_value & 0xFFFF, out_hw=(oh, ow),
                               clip_truncate=layer.clip_truncate, precision="int16")
    off, scale, shift = layer.out_cvt
    want = ref_sdp.sdp(_padded(acc, atom), ref_sdp.SdpParams(cvt_offset=off, cvt_scale=scale, cvt_shift=shift),
                       out_bits=16)
    return program_conv_wide(hw, layer), pack16(want, atom), (k, oh, ow)


def describe(hw: HwConfig, got: bytes, want: bytes, shape: tuple[int, int, int]) -> str:
    """How many 16-bit output lanes differ and the first one (channel, y, x), golden vs reference (hex)."""
    if len(got) != len(want):
        return f"golden wrote {len(got)} bytes, the reference {len(want)}"
    c, h, w = shape
    g, r = unpack16(got, c, h, w, atom16(hw)), unpack16(want, c, h, w, atom16(hw))
    diff = np.argwhere(g != r)
    ch, y, x = (int(v) for v in diff[0])
    lane = " (a padding lane)" if ch >= c else ""
    return (f"golden differs from the reference in {len(diff)} of {g.size} output lanes; first at channel {ch}{lane}, "
            f"y {y}, x {x}: golden {int(g[ch, y, x]):#06x}, reference {int(r[ch, y, x]):#06x}")


def _check(build):
    def check(hw: HwConfig, layer: WideConvLayer) -> None:
        program, want, shape = build(hw, layer)
        got = program.run(Dla(hw))
        if got != want:
            raise AssertionError(describe(hw, got, want, shape))

    return check


def _program(build):
    def program(hw: HwConfig, layer: WideConvLayer) -> tuple[LayerTest, bytes]:
        built, want, _ = build(hw, layer)
        return built, want

    return program


def _property(name: str, strategy, build) -> Property:
    return register(Property(
        name=name, engine="CONV", configs=CONFIGS, strategy=strategy, check=_check(build),
        to_json=serialize.to_json, from_json=serialize.from_json, program=_program(build),
    ))


CONV_FP16 = _property("conv_fp16", fp16_conv_layers, build_fp16)
CONV_INT16 = _property("conv_int16", int16_conv_layers, build_int16)
#: This module's properties.
WIDE_CONV_PROPERTIES = (CONV_FP16, CONV_INT16)
