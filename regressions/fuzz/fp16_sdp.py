"""Fuzz properties of the fp16 SDP (nv_full): through its register program, golden equals the independent
fp16 reference (``regressions.lib.reference.sdp_fp16``, exact fractions) bit for bit, padding lanes included,
and reports the NaN/Inf counters the reference's data imply.

- ``sdp_fp16``: X1/X2 (ALU MAX/MIN/SUM/EQL, MUL, PReLU, ReLU; REG and MEM operands), NAN_TO_ZERO, fp16 or
  int16 output.
- ``sdp_y_fp16``: the same plus Y (MUL, ALU, the fp LUT) on smaller cubes.

Padding lanes of the input and of MEM operands are zeros in memory (+0.0), and the reference computes the
padding lanes of the output from them, as ``regressions.fuzz.engines`` does for the integer paths.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from golden import Dla
from golden.config import HwConfig
from golden.lut import LutRegisters
from regressions.fuzz import serialize
from regressions.fuzz.engines import _pad_operand, padded
from regressions.fuzz.properties import Property, register
from regressions.lib.programs import LayerTest
from regressions.lib.programs import fp16 as programs_fp16
from regressions.lib.reference import sdp_fp16 as ref
from regressions.lib.strategies.sdp_fp16 import sdp_fp16_layers

#: The one preset with an fp16 datapath.
FP16_CONFIGS = ("nv_full",)

# The examples' classes, so saved failures are written and read back (serialize.TYPES is the registry).
serialize.TYPES.update({cls.__name__: cls for cls in (
    programs_fp16.SdpFp16Layer, ref.Fp16Params, ref.Fp16XParams, ref.Fp16YParams, LutRegisters)})


def padded_params(params: ref.Fp16Params, atom: int) -> ref.Fp16Params:
    """MEM operands padded to whole atoms with +0.0 (what memory holds past the last channel)."""
    def stage(st):
        return replace(st, alu_operand=_pad_operand(st.alu_operand, atom), mul_operand=_pad_operand(st.mul_operand, atom))

    return replace(params, x1=stage(params.x1), x2=stage(params.x2), y=stage(params.y))


def reference_output(hw: HwConfig, layer: programs_fp16.SdpFp16Layer) -> np.ndarray:
    """The reference's (padded C, H, W) output: fp16 bits, or int16 values."""
    atom = programs_fp16.atom_of(hw)
    return ref.sdp_fp16(padded(layer.x, atom), padded_params(layer.params, atom))


def build(hw: HwConfig, layer: programs_fp16.SdpFp16Layer) -> tuple[LayerTest, bytes, np.ndarray]:
    want = reference_output(hw, layer)
    return programs_fp16.program_sdp_fp16(hw, layer), programs_fp16.expected_bytes(want, hw), want


def _nan16(bits: np.ndarray) -> int:
    b = np.asarray(bits, dtype=np.int64) & 0xFFFF
    return int(np.count_nonzero(((b & 0x7C00) == 0x7C00) & ((b & 0x3FF) != 0)))


def _inf16(bits: np.ndarray) -> int:
    b = np.asarray(bits, dtype=np.int64) & 0x7FFF
    return int(np.count_nonzero(b == 0x7C00))


def check(hw: HwConfig, layer: programs_fp16.SdpFp16Layer) -> None:
    program, want, out = build(hw, layer)
    dla = Dla(hw)
    got = program.run(dla)
    atom = programs_fp16.atom_of(hw)
    if got != want:
        c, h, w = layer.x.shape
        g = np.frombuffer(got, dtype="<u2").astype(np.int64)
        r = np.frombuffer(want, dtype="<u2").astype(np.int64)
        diff = np.flatnonzero(g != r)
        i = int(diff[0])
        raise AssertionError(
            f"golden differs from the fp16 reference in {len(diff)} of {g.size} output values; first at byte "
            f"{2 * i} (surface-major layout, {atom} lanes): golden {g[i]:#06x}, reference {r[i]:#06x}"
        )
    if layer.counters:
        x = padded(layer.x, atom)
        expect = {("SDP_RDMA", "D_STATUS_NAN_INPUT_NUM"): _nan16(x), ("SDP_RDMA", "D_STATUS_INF_INPUT_NUM"): _inf16(x)}
        if layer.params.out == "fp16":
            expect[("SDP", "D_STATUS_NAN_OUTPUT_NUM")] = _nan16(out)
            expect[("SDP", "D_PERF_OUT_SATURATION")] = int(np.count_nonzero((out & 0x7FFF) == 0x7BFF))
        for (unit, reg), value in expect.items():
            state = dla.units[unit]
            seen = state.groups[state.consumer ^ 1].get(state.unit.register(reg).offset, 0)
            if seen != value:
                raise AssertionError(f"{unit}.{reg} is {seen}, the reference's data imply {value}")


def program(hw: HwConfig, layer: programs_fp16.SdpFp16Layer) -> tuple[LayerTest, bytes]:
    built, want, _ = build(hw, layer)
    return built, want


def _property(name: str, strategy) -> Property:
    return register(Property(
        name=name, engine="SDP", configs=FP16_CONFIGS, strategy=strategy, check=check,
        to_json=serialize.to_json, from_json=serialize.from_json, program=program,
    ))


SDP_FP16 = _property("sdp_fp16", lambda hw: sdp_fp16_layers(hw))
SDP_Y_FP16 = _property("sdp_y_fp16", lambda hw: sdp_fp16_layers(hw, with_y=True))
#: This module's properties.
FP16_PROPERTIES = (SDP_FP16, SDP_Y_FP16)


def describe(example: Any) -> str:
    """One line naming an example's shape and stages (for logs)."""
    p = example.params
    stages = [n for n, s in (("x1", p.x1), ("x2", p.x2), ("y", p.y)) if not s.bypass]
    return f"fp16 SDP {example.x.shape} stages {','.join(stages) or 'none'} out {p.out}"
