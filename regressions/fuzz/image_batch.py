"""Fuzz properties of image (pixel) input and batched direct convolution: through its register program the
golden conv pipeline equals the independent plain-loop references bit for bit.

* ``conv_image``: ``regressions.lib.reference.conv_image`` unpacks the pixels from the format's name, converts
  them (sign override, CVT, per-lane means) and convolves in pixel space with the CDMA's left/right and the
  CSC's top/bottom padding; golden reads the planes, extends the kernel into channels and convolves the
  extended cube. SDP converts the result on the fly (reference ``sdp``).
* ``conv_batch``: ``regressions.lib.reference.conv_batch`` convolves each batch and places it at its output
  batch stride; golden runs the batched registers (CDMA/CSC/CACC BATCHES, batch strides, SDP BATCH_NUMBER).

Both compare every output byte the program's output region covers (padding lanes and gaps between batches
included).
"""
from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import reject

from compiler.codegen.conv_image import FORMATS
from golden import Dla
from golden.config import HwConfig
from regressions.fuzz import serialize
from regressions.fuzz.engines import CONFIGS, describe, expected_bytes, padded
from regressions.fuzz.properties import Property, register
from regressions.lib import programs
from regressions.lib.programs import image as programs_image
from regressions.lib.programs.image import BatchConvLayer, ImageLayer
from regressions.lib.reference import conv_batch as ref_batch
from regressions.lib.reference import conv_image as ref_image
from regressions.lib.reference import sdp as ref_sdp
from regressions.lib.reference.arith import OutsideCmodDomain
from regressions.lib.strategies import configs_with
from regressions.lib.strategies.conv_image import batch_layers, image_layers

# Example classes of this module, so shrunk failures are saved and replayed like the others'.
for _cls in (ImageLayer, BatchConvLayer):
    serialize.TYPES.setdefault(_cls.__name__, _cls)

#: Presets with batch mode (nv_full).
BATCH_CONFIGS = configs_with(lambda hw: hw.batch)

Built = tuple[programs.LayerTest, bytes, Any]


def _out_cvt(acc: np.ndarray, atom: int, out_cvt: tuple[int, int, int]) -> np.ndarray:
    off, scale, shift = out_cvt
    return ref_sdp.sdp(padded(acc, atom), ref_sdp.SdpParams(cvt_offset=off, cvt_scale=scale, cvt_shift=shift))


def reference_image(hw: HwConfig, layer: ImageLayer) -> np.ndarray:
    """The reference's CACC cube (K, OH, OW) of an image layer."""
    bits = FORMATS[layer.fmt][2]
    raw = ref_image.unpack_pixels(layer.fmt, layer.plane0, layer.plane1, layer.width, layer.x_offset,
                                  hw.memory_atomic_size)
    x = ref_image.convert_pixels(raw, bits, signed=layer.signed, cvt=layer.cvt, means=layer.means, out_bits=8)
    return ref_image.image_conv(
        x, layer.w, stride=layer.stride, pad_top=layer.pad_top, pad_left=layer.pad_left, pad_right=layer.pad_right,
        cdma_pad=layer.cdma_pad, csc_pad=layer.csc_pad, out_hw=layer.output_hw(), clip_truncate=layer.clip_truncate,
    )


def build_image(hw: HwConfig, layer: ImageLayer) -> Built:
    atom = hw.atom_elements()
    want = _out_cvt(reference_image(hw, layer), atom, layer.out_cvt)
    oh, ow = layer.output_hw()
    return programs_image.program_image_conv(hw, layer), expected_bytes(want, atom), (layer.w.shape[0], oh, ow)


def build_batch(hw: HwConfig, layer: BatchConvLayer) -> Built:
    atom = hw.atom_elements()
    oh, ow = layer.output_hw()
    acc = ref_batch.batched_conv(layer.xs, layer.w, cvt=layer.cvt, stride=layer.stride, dilation=layer.dilation,
                                 pad=layer.pad, pad_value=layer.pad_value, out_hw=(oh, ow),
                                 clip_truncate=layer.clip_truncate)
    cubes = np.stack([_out_cvt(a, atom, layer.out_cvt) for a in acc])
    program = programs_image.program_batch_conv(hw, layer)
    _, dst_stride = layer.batch_strides(hw)
    want = ref_batch.place_batches(cubes, atom=atom, line_stride=ow * atom, surface_stride=oh * ow * atom,
                                   batch_stride=dst_stride, size=program.output[1])
    return program, want, (layer.xs.shape[0], layer.w.shape[0], oh, ow, dst_stride)


def describe_batch(got: bytes, want: bytes, shape: tuple[int, int, int, int, int], atom: int) -> str:
    """First line: how many output bytes differ and where the first is (batch, channel, y, x)."""
    if len(got) != len(want):
        return f"golden wrote {len(got)} bytes, the reference {len(want)}"
    n, k, oh, ow, stride = shape
    diff = np.flatnonzero(np.frombuffer(got, np.uint8) != np.frombuffer(want, np.uint8))
    addr = int(diff[0])
    b, rest = divmod(addr, stride)
    surface, rest = divmod(rest, oh * ow * atom)
    y, rest = divmod(rest, ow * atom)
    x, lane = divmod(rest, atom)
    where = (f"batch {b}, channel {surface * atom + lane}, y {y}, x {x}" if y < oh
             else f"byte {addr:#x} between batches")
    return (f"golden differs from the reference in {diff.size} of {len(got)} output bytes; first at {where}: "
            f"golden {np.int8(got[addr])}, reference {np.int8(want[addr])}")


def _check(build, describe_fn):
    def check(hw: HwConfig, example: Any) -> None:
        try:
            program, want, shape = build(hw, example)
        except OutsideCmodDomain:
            reject()
        got = program.run(Dla(hw))
        if got != want:
            raise AssertionError(describe_fn(got, want, shape, hw.atom_elements()))

    return check


def _program(build):
    def program(hw: HwConfig, example: Any) -> tuple[programs.LayerTest, bytes]:
        built, want, _ = build(hw, example)
        return built, want

    return program


CONV_IMAGE = register(Property(
    name="conv_image", engine="CONV", configs=CONFIGS, strategy=image_layers,
    check=_check(build_image, describe), to_json=serialize.to_json, from_json=serialize.from_json,
    program=_program(build_image),
))
CONV_BATCH = register(Property(
    name="conv_batch", engine="CONV", configs=BATCH_CONFIGS, strategy=batch_layers,
    check=_check(build_batch, describe_batch), to_json=serialize.to_json, from_json=serialize.from_json,
    program=_program(build_batch),
))
#: This module's properties.
IMAGE_BATCH_PROPERTIES = (CONV_IMAGE, CONV_BATCH)
