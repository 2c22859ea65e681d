"""Fuzz properties of the 16-bit PDP and CDP paths (nv_full): through its register program, golden equals
the independent plain-loop reference bit for bit, padding lanes included.

- ``pdp_int16``: ``regressions.lib.reference.pdp.pool(precision="int16")``, with width splits.
- ``pdp_fp16``: ``regressions.lib.reference.pdp_fp16`` (the cmod's element stream, exact-fraction floats), with
  width splits and NAN_FLUSH_TO_ZERO; also D_NAN_INPUT_NUM / D_INF_INPUT_NUM (every atom PDP_RDMA fetches,
  split overlaps again) and D_NAN_OUTPUT_NUM.
- ``cdp_int16``: ``regressions.lib.reference.cdp.lrn(precision="int16")``.
- ``cdp_fp16``: ``regressions.lib.reference.cdp_fp16``; also the NaN/Inf counters.

As in ``regressions.fuzz.engines``, padding lanes of the input are zeros in memory (+0 for fp16) and the
reference computes the output's padding lanes from them. Examples where the reference refuses (undefined C
in the cmod) are rejected.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np
from hypothesis import reject

from compiler.codegen.pack import unpack_feature
from golden import Dla
from golden.config import HwConfig
from golden.lut import LutRegisters
from regressions.fuzz import serialize
from regressions.fuzz.engines import apply_split, padded
from regressions.fuzz.properties import Property, register
from regressions.lib import programs
from regressions.lib.programs import wide as programs_wide
from regressions.lib.reference import cdp as ref_cdp
from regressions.lib.reference import cdp_fp16 as ref_cdp_fp16
from regressions.lib.reference import pdp as ref_pdp
from regressions.lib.reference import pdp_fp16 as ref_pdp_fp16
from regressions.lib.reference.arith import OutsideCmodDomain
from regressions.lib.strategies.cdp_wide import wide_lrn_layers
from regressions.lib.strategies.pdp import PdpSplit
from regressions.lib.strategies.pdp_wide import WidePdpExample, wide_pdp_examples

#: The one preset with int16/fp16 PDP and CDP datapaths.
WIDE_CONFIGS = ("nv_full",)

serialize.TYPES.update({cls.__name__: cls for cls in (
    programs_wide.WidePoolLayer, programs_wide.WideLrnLayer, WidePdpExample, LutRegisters)})

#: (program, expected output bytes, padded reference output, expected status registers {name: value})
Built = tuple[programs.LayerTest, bytes, np.ndarray, dict[str, int]]


def _nan_inf(bits: np.ndarray) -> tuple[int, int]:
    b = np.asarray(bits, dtype=np.int64) & 0xFFFF
    top = (b & 0x7C00) == 0x7C00
    return int(np.count_nonzero(top & ((b & 0x3FF) != 0))), int(np.count_nonzero(top & ((b & 0x3FF) == 0)))


def _fetched(x: np.ndarray, split: PdpSplit | None, kw: int, sw: int) -> list[np.ndarray]:
    """The input column ranges PDP_RDMA fetches: the cube, or each split with its ``kw - sw`` overlap."""
    if split is None:
        return [x]
    (first, mid, last), overlap = split.in_widths, kw - sw
    parts, start = [x[:, :, :first]], first
    for i in range(1, split.count):
        width = last if i == split.count - 1 else mid
        parts.append(x[:, :, start - overlap : start + width])
        start += width
    return parts


def build_pdp(hw: HwConfig, example: WidePdpExample) -> Built:
    layer = example.layer
    atom = programs_wide.atom_of(hw, layer.dtype)
    program = programs_wide.program_pdp_wide(hw, layer)
    if example.split is not None:
        apply_split(program, example.split)
    x = padded(layer.x, atom)
    recip_w, recip_h = layer.recips()
    geometry = dict(method=layer.method, kernel=layer.kernel, stride=layer.stride, pad=layer.pad,
                    pad_values=layer.pad_values, recip_w=recip_w, recip_h=recip_h, out_hw=layer.out_hw())
    status: dict[str, int] = {}
    if layer.dtype == "fp16":
        want = ref_pdp_fp16.pool_fp16(x, nan_to_zero=layer.nan_to_zero, **geometry)
        # The program reads only the rows its windows use (compiler/codegen/pdp.py used_geometry): count those.
        oh = layer.out_hw()[0]
        used_h = min(x.shape[1], (oh - 1) * layer.stride[0] + layer.kernel[0] - layer.pad[0])
        counts = [_nan_inf(part) for part in _fetched(x[:, :used_h], example.split, layer.kernel[1], layer.stride[1])]
        status = {"PDP.D_NAN_INPUT_NUM": sum(n for n, _ in counts), "PDP.D_INF_INPUT_NUM": sum(i for _, i in counts),
                  "PDP.D_NAN_OUTPUT_NUM": _nan_inf(want)[0]}
    else:
        want = ref_pdp.pool(x, precision="int16", **geometry)
    return program, programs_wide.expected_bytes(want, hw, layer.dtype), want, status


def build_cdp(hw: HwConfig, layer: programs_wide.WideLrnLayer) -> Built:
    atom = programs_wide.atom_of(hw, layer.dtype)
    c = layer.x.shape[0]
    x = padded(layer.x, atom)
    status: dict[str, int] = {}
    if layer.dtype == "fp16":
        want = ref_cdp_fp16.lrn_fp16(x, lut=layer.lut, normalz_len=layer.normalz_len, sqsum_bypass=layer.sqsum_bypass,
                                     mul_bypass=layer.mul_bypass, nan_to_zero=layer.nan_to_zero, channel_count=c)
        nan_in, inf_in = _nan_inf(x)
        status = {"CDP.D_NAN_INPUT_NUM": nan_in, "CDP.D_INF_INPUT_NUM": inf_in,
                  "CDP.D_NAN_OUTPUT_NUM": _nan_inf(want)[0]}
    else:
        want = ref_cdp.lrn(
            x, datin_offset=layer.datin_offset, datin_scale=layer.datin_scale, datin_shifter=layer.datin_shifter,
            normalz_len=layer.normalz_len, sqsum_bypass=layer.sqsum_bypass, mul_bypass=layer.mul_bypass,
            lut=layer.lut, datout_offset=layer.datout_offset, datout_scale=layer.datout_scale,
            datout_shifter=layer.datout_shifter, channel_count=c, precision="int16",
        )
    return programs_wide.program_cdp_wide(hw, layer), programs_wide.expected_bytes(want, hw, layer.dtype), want, status


def _describe(got: bytes, want: np.ndarray, channels: int, atom: int) -> str:
    """How many output values differ and the first one (channel, y, x), golden vs reference."""
    c_pad, h, w = want.shape
    if len(got) != c_pad * h * w * 2:
        return f"golden wrote {len(got)} bytes, the reference {c_pad * h * w * 2}"
    g = unpack_feature(got, channels, h, w, atom, 2, lanes=True) & 0xFFFF
    r = np.asarray(want, dtype=np.int64) & 0xFFFF
    diff = np.argwhere(g != r)
    ch, y, x = (int(v) for v in diff[0])
    lane = " (a padding lane)" if ch >= channels else ""
    return (f"golden differs from the reference in {len(diff)} of {g.size} output values; first at channel {ch}"
            f"{lane}, y {y}, x {x}: golden {int(g[ch, y, x]):#06x}, reference {int(r[ch, y, x]):#06x}"
            " (16-bit patterns)")


def make_check(build: Callable[[HwConfig, Any], Built]) -> Callable[[HwConfig, Any], None]:
    def check(hw: HwConfig, example: Any) -> None:
        try:
            program, want_bytes, want, status = build(hw, example)
        except OutsideCmodDomain:
            reject()
        dla = Dla(hw)
        got = program.run(dla)
        layer = getattr(example, "layer", example)
        if got != want_bytes:
            raise AssertionError(_describe(got, want, layer.x.shape[0], programs_wide.atom_of(hw, layer.dtype)))
        for name, value in status.items():
            if dla.read(name) != value:
                raise AssertionError(f"{name} is {dla.read(name)}, the reference's data imply {value}")

    return check


def make_program(
    build: Callable[[HwConfig, Any], Built],
) -> Callable[[HwConfig, Any], tuple[programs.LayerTest, bytes]]:
    def program(hw: HwConfig, example: Any) -> tuple[programs.LayerTest, bytes]:
        built, want, _, _ = build(hw, example)
        return built, want

    return program


def _property(name: str, engine: str, strategy, build) -> Property:
    return register(Property(
        name=name, engine=engine, configs=WIDE_CONFIGS, strategy=strategy, check=make_check(build),
        to_json=serialize.to_json, from_json=serialize.from_json, program=make_program(build),
    ))


PDP_INT16 = _property("pdp_int16", "PDP", lambda hw: wide_pdp_examples(hw, "int16"), build_pdp)
PDP_FP16 = _property("pdp_fp16", "PDP", lambda hw: wide_pdp_examples(hw, "fp16"), build_pdp)
CDP_INT16 = _property("cdp_int16", "CDP", lambda hw: wide_lrn_layers(hw, "int16"), build_cdp)
CDP_FP16 = _property("cdp_fp16", "CDP", lambda hw: wide_lrn_layers(hw, "fp16"), build_cdp)
#: This module's properties (the registry also holds other modules').
WIDE_PROPERTIES = (PDP_INT16, PDP_FP16, CDP_INT16, CDP_FP16)

__all__ = ["WIDE_PROPERTIES", "PDP_INT16", "PDP_FP16", "CDP_INT16", "CDP_FP16", "build_pdp", "build_cdp"]
