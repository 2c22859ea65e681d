"""Fuzz properties of the golden engines: through its register program, each engine equals the
independent plain-loop reference (``regressions.lib.reference``) bit for bit, padding lanes included.

One registration per property ("conv", "sdp", "sdp_y", "pdp", "cdp"). ``program(hw, example)`` gives the
register program and the bytes the *reference* says the engine writes (every atom lane of the output
surfaces, as the engine writes them), so a saved trace checks the reference's CRC on any target. The
check runs the program on ``golden.Dla`` and compares those bytes. The reference compares the same way
as ``regressions/golden/test_golden_vs_reference.py``: padding lanes of the input and of MEM
operands are zeros in memory, and the reference computes the padding lanes of the output from them.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Any, Callable

import numpy as np
from hypothesis import reject

from compiler.codegen.pack import pack_feature, unpack_feature
from golden import Dla
from golden.config import HwConfig
from golden.regs import UNITS
from regressions.fuzz import serialize
from regressions.fuzz.properties import Property, register
from regressions.lib import programs
from regressions.lib.reference import cdp as ref_cdp
from regressions.lib.reference import conv as ref_conv
from regressions.lib.reference import pdp as ref_pdp
from regressions.lib.reference import sdp as ref_sdp
from regressions.lib.reference.arith import OutsideCmodDomain
from regressions.lib.strategies import configs_with
from regressions.lib.strategies.cdp import lrn_layers
from regressions.lib.strategies.conv import conv_layers
from regressions.lib.strategies.pdp import PdpExample, PdpSplit, pdp_examples
from regressions.lib.strategies.sdp import sdp_layers, sdp_y_layers

#: Presets every engine property runs on: one per distinct atom / MAC / CBUF geometry, plus nv_full for its
#: address map (32-byte address units). nv_small_256_full only adds EW/LUT to nv_small_256 (see sdp_y).
CONFIGS = ("nv_small", "nv_small_256", "nv_medium_512", "nv_medium_1024_full", "nv_large", "nv_full")
#: Presets with the SDP Y (EW) unit (all of them have the LUT too).
EW_CONFIGS = configs_with(lambda hw: hw.sdp_ew)
#: Our RTL implements PDP and SDP X1/X2 for this preset.
RTL_CONFIG = "nv_small"

#: (program, expected output bytes, output (channels, height, width))
Built = tuple[programs.LayerTest, bytes, tuple[int, int, int]]


# ---- shared helpers -----------------------------------------------------------------------------------
def padded(x: np.ndarray, atom: int) -> np.ndarray:
    """The cube with its channels padded to whole atoms with zeros (what memory holds)."""
    c = x.shape[0]
    out = np.zeros((-(-c // atom) * atom,) + x.shape[1:], dtype=np.int64)
    out[:c] = x
    return out


def _pad_operand(op: Any, atom: int) -> Any:
    if np.ndim(op) == 1:
        return np.concatenate([np.asarray(op, dtype=np.int64), np.zeros(-len(op) % atom, dtype=np.int64)])
    if np.ndim(op) == 3:
        return padded(np.asarray(op), atom)
    return op


def padded_operands(params: ref_sdp.SdpParams, atom: int) -> ref_sdp.SdpParams:
    """MEM operands padded to the atom like the data: padding lanes read zeros from memory."""
    def stage(st):
        return replace(st, alu_operand=_pad_operand(st.alu_operand, atom),
                       mul_operand=_pad_operand(st.mul_operand, atom))

    return replace(params, x1=stage(params.x1), x2=stage(params.x2), y=stage(params.y))


def expected_bytes(want: np.ndarray, atom: int) -> bytes:
    """The reference's (padded-channel) int8 cube in the engine's output layout."""
    return pack_feature(want, atom)


def describe(got: bytes, want: bytes, shape: tuple[int, int, int], atom: int) -> str:
    """First line: how many output bytes differ and the first one (channel, y, x), golden vs reference."""
    c, h, w = shape
    if len(got) != len(want):
        return f"golden wrote {len(got)} bytes, the reference {len(want)}"
    g = unpack_feature(got, c, h, w, atom, lanes=True)
    r = unpack_feature(want, c, h, w, atom, lanes=True)
    diff = np.argwhere(g != r)
    ch, y, x = (int(v) for v in diff[0])
    lane = " (a padding lane)" if ch >= c else ""
    return (f"golden differs from the reference in {len(diff)} of {g.size} output values; first at channel {ch}"
            f"{lane}, y {y}, x {x}: golden {int(g[ch, y, x])}, reference {int(r[ch, y, x])}")


def make_check(build: Callable[[HwConfig, Any], Built]) -> Callable[[HwConfig, Any], None]:
    """Check of one example: golden through the register program equals the reference's bytes.
    Examples where the reference refuses (undefined C in the cmod) are rejected."""
    def check(hw: HwConfig, example: Any) -> None:
        try:
            program, want, shape = build(hw, example)
        except OutsideCmodDomain:
            reject()
        got = program.run(Dla(hw))
        if got != want:
            raise AssertionError(describe(got, want, shape, hw.atom_elements()))

    return check


def make_program(
    build: Callable[[HwConfig, Any], Built],
) -> Callable[[HwConfig, Any], tuple[programs.LayerTest, bytes]]:
    def program(hw: HwConfig, example: Any) -> tuple[programs.LayerTest, bytes]:
        built, want, _ = build(hw, example)
        return built, want

    return program


# ---- PDP ------------------------------------------------------------------------------------------------
def _word(name: str, **fields: int) -> tuple[str, int]:
    unit, reg = name.split(".")
    register_ = UNITS[unit].register(reg)
    return register_.full_name, register_.encode(**fields)


def apply_split(program: programs.LayerTest, split: PdpSplit) -> None:
    """Program split-width mode into a PDP program (``programs.program_pdp`` writes one split):
    ``SPLIT_NUM`` and the partial widths in both PDP and PDP_RDMA, before the enables."""
    (fi, mi, li), (fo, mo, lo) = split.in_widths, split.out_widths
    partial_in = dict(PARTIAL_WIDTH_IN_FIRST=fi - 1, PARTIAL_WIDTH_IN_MID=mi - 1, PARTIAL_WIDTH_IN_LAST=li - 1)
    mode = UNITS["PDP"].register("D_OPERATION_MODE_CFG")
    split_bits = mode.field("SPLIT_NUM").encode(split.count - 1)
    writes = []
    for name, value in program.writes:
        if name == mode.full_name:
            value = (value & ~mode.field("SPLIT_NUM").mask) | split_bits
        elif name.endswith(".D_PARTIAL_WIDTH_IN_0"):
            value = UNITS[name[6:].split(".")[0]].register("D_PARTIAL_WIDTH_IN").encode(**partial_in)
        elif name == "NVDLA_PDP.D_PARTIAL_WIDTH_OUT_0":
            value = _word("PDP.D_PARTIAL_WIDTH_OUT", PARTIAL_WIDTH_OUT_FIRST=fo - 1, PARTIAL_WIDTH_OUT_MID=mo - 1,
                          PARTIAL_WIDTH_OUT_LAST=lo - 1)[1]
        elif name == "NVDLA_PDP_RDMA.D_OP_ENABLE_0":
            writes.append(_word("PDP_RDMA.D_OPERATION_MODE_CFG", SPLIT_NUM=split.count - 1))
        writes.append((name, value))
    program.writes = writes


def build_pdp(hw: HwConfig, example: PdpExample) -> Built:
    layer = example.layer
    atom = hw.atom_elements()
    program = programs.program_pdp(hw, layer)
    if example.split is not None:
        apply_split(program, example.split)
    c = layer.x.shape[0]
    oh, ow = layer.out_hw()
    kh, kw = layer.kernel
    want = ref_pdp.pool(
        padded(layer.x, atom), method=layer.method, kernel=layer.kernel, stride=layer.stride, pad=layer.pad,
        pad_values=layer.pad_values,
        recip_w=layer.recip_w if layer.recip_w is not None else 0x10000 // kw,
        recip_h=layer.recip_h if layer.recip_h is not None else 0x10000 // kh,
        out_hw=(oh, ow), average=hw.pdp_average,
    )
    return program, expected_bytes(want, atom), (c, oh, ow)


# ---- CDP ------------------------------------------------------------------------------------------------
def build_cdp(hw: HwConfig, layer: programs.LrnLayer) -> Built:
    atom = hw.atom_elements()
    c, h, w = layer.x.shape
    want = ref_cdp.lrn(
        padded(layer.x, atom), datin_offset=layer.datin_offset, datin_scale=layer.datin_scale,
        datin_shifter=layer.datin_shifter, normalz_len=layer.normalz_len, sqsum_bypass=layer.sqsum_bypass,
        mul_bypass=layer.mul_bypass, lut=layer.lut, datout_offset=layer.datout_offset,
        datout_scale=layer.datout_scale, datout_shifter=layer.datout_shifter, channel_count=c,
        start_bits=hw.cdp_lut_start_bits, lo_select_minus32=hw.cdp_lo_select_minus32,
    )
    return programs.program_cdp(hw, layer), expected_bytes(want, atom), (c, h, w)


# ---- SDP ------------------------------------------------------------------------------------------------
def build_sdp(hw: HwConfig, layer: programs.SdpLayer) -> Built:
    atom = hw.atom_elements()
    want = ref_sdp.sdp(padded(layer.x, atom), padded_operands(layer.params, atom))
    return programs.program_sdp(hw, layer), expected_bytes(want, atom), layer.x.shape


# ---- direct convolution ---------------------------------------------------------------------------------
def build_conv(hw: HwConfig, layer: programs.ConvLayer) -> Built:
    atom = hw.atom_elements()
    k = layer.w.shape[0]
    oh, ow = layer.output_hw()
    x = layer.x if layer.cvt is None else ref_conv.cdma_input_cvt(layer.x, *layer.cvt)
    acc = ref_conv.direct_conv(x, layer.w, stride=layer.stride, dilation=layer.dilation, pad=layer.pad,
                               pad_value=layer.pad_value, out_hw=(oh, ow), clip_truncate=layer.clip_truncate)
    off, scale, shift = layer.out_cvt
    # CACC delivers 0 in the lanes past K; SDP converts them like the others.
    want = ref_sdp.sdp(padded(acc, atom), ref_sdp.SdpParams(cvt_offset=off, cvt_scale=scale, cvt_shift=shift))
    return programs.program_conv(hw, layer), expected_bytes(want, atom), (k, oh, ow)


# ---- registrations ----------------------------------------------------------------------------------------
def _property(name: str, engine: str, configs: tuple[str, ...], strategy, build, duts: tuple[str, ...] = ()) -> Property:
    return register(Property(
        name=name, engine=engine, configs=configs, strategy=strategy, check=make_check(build),
        to_json=serialize.to_json, from_json=serialize.from_json, program=make_program(build), duts=duts,
    ))


#: DUTs with each engine: our RTL has PDP and SDP; NVDLA's nv_small all four (it has no BDMA or Rubik).
_OURS_AND_NVDLA, _NVDLA = ("rtl", "nvdla-nv_small"), ("nvdla-nv_small",)
CONV = _property("conv", "CONV", CONFIGS, conv_layers, build_conv, duts=_NVDLA)
SDP = _property("sdp", "SDP", CONFIGS, sdp_layers, build_sdp, duts=_OURS_AND_NVDLA)
SDP_Y = _property("sdp_y", "SDP", EW_CONFIGS, lambda hw: sdp_y_layers(hw, with_x2=True), build_sdp)
PDP = _property("pdp", "PDP", CONFIGS, pdp_examples, build_pdp, duts=_OURS_AND_NVDLA)
CDP = _property("cdp", "CDP", CONFIGS, lrn_layers, build_cdp, duts=_NVDLA)
#: This module's properties (the registry also holds other modules').
ENGINE_PROPERTIES = (CONV, SDP, SDP_Y, PDP, CDP)
