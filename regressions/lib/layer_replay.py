"""Layer-by-layer differential check of compiled networks.

Each engine op of a compiled network -- its register programs exactly as the loadable holds them, every
CBUF piece included -- runs alone on a fresh golden ``Dla`` on random inputs of the network's precision
(int8, int16, or fp16 values drawn N(0, 1)), and its output must equal the independent reference math
(``regressions.reference``; fp16 in exact rational arithmetic) of that layer with the compiler's
parameters. This checks codegen, relocation, splitting and the golden model against plain math, layer by
layer, without trusting the rest of the network.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from compiler.hwparams import TensorOperand
from golden.dla import Dla
from golden.layout import read_cube, write_cube
from golden.lut import LutRegisters
from regressions.lib.reference import cdp as ref_cdp
from regressions.lib.reference import conv as ref_conv
from regressions.lib.reference import cdp_fp16 as ref_cdp_fp16
from regressions.lib.reference import conv_fp16 as ref_conv_fp16
from regressions.lib.reference import conv_winograd as ref_wg
from regressions.lib.reference import pdp as ref_pdp
from regressions.lib.reference import pdp_fp16 as ref_pdp_fp16
from regressions.lib.reference import sdp as ref_sdp
from regressions.lib.reference import sdp_fp16 as ref_sdp_fp16
from loadable import loadable_pb2 as pb
from runtime.executor import place_regions, tensor_layout
from runtime.groups import Groups


@dataclass
class LayerResult:
    name: str
    op: str
    ok: bool
    mismatches: int
    elements: int


def _ref_x(st, cls, operands):
    d = {f.name: getattr(st, f.name) for f in dataclasses.fields(st)}
    for key in ("alu_operand", "mul_operand"):
        if isinstance(d[key], TensorOperand):
            d[key] = operands[d[key].tensor]
    if "alu_cvt" in d:
        d["alu_cvt"] = ref_sdp.SdpOperandCvt(**dataclasses.asdict(d["alu_cvt"]))
        d["mul_cvt"] = ref_sdp.SdpOperandCvt(**dataclasses.asdict(d["mul_cvt"]))
    return cls(**d)


def reference_sdp_params(prm, operands: dict[str, np.ndarray]) -> ref_sdp.SdpParams:
    lut = prm.lut if prm.lut is not None else LutRegisters()
    return ref_sdp.SdpParams(x1=_ref_x(prm.x1, ref_sdp.SdpXParams, operands),
                             x2=_ref_x(prm.x2, ref_sdp.SdpXParams, operands),
                             y=_ref_x(prm.y, ref_sdp.SdpYParams, operands), lut=lut,
                             cvt_offset=prm.cvt_offset, cvt_scale=prm.cvt_scale, cvt_shift=prm.cvt_shift)


def reference_fp16_params(prm, operands: dict[str, np.ndarray]) -> ref_sdp_fp16.Fp16Params:
    """The compiler's fp16 SDP parameters as the fp16 reference takes them (Y: its ALU, a ReLU6 cap, and the
    LUT of a sigmoid or tanh)."""
    def x(st) -> ref_sdp_fp16.Fp16XParams:
        d = {f.name: getattr(st, f.name) for f in dataclasses.fields(ref_sdp_fp16.Fp16XParams)}
        for key in ("alu_operand", "mul_operand"):
            if isinstance(d[key], TensorOperand):
                d[key] = operands[d[key].tensor]
        return ref_sdp_fp16.Fp16XParams(**d)

    y = ref_sdp_fp16.Fp16YParams(**{f.name: getattr(prm.y, f.name) for f in dataclasses.fields(ref_sdp_fp16.Fp16YParams)})
    lut = prm.lut if prm.lut is not None else LutRegisters()
    return ref_sdp_fp16.Fp16Params(x1=x(prm.x1), x2=x(prm.x2), y=y, lut=lut,
                                   out=getattr(prm, "out_precision", None) or "fp16")


def reference(node, inputs: dict[str, np.ndarray], out_shape: tuple[int, int, int], average: str = "cmod"
              ) -> np.ndarray:
    """The layer's output (int8/int16 values, fp16 bit patterns) by the independent reference math;
    ``average`` is the config's PDP AVERAGE datapath (``HwConfig.pdp_average``: nv_small's RTL keeps narrower
    intermediates than the cmod, which only shows when a window's result overflows)."""
    fly = node.attrs.get("flying_pdp")
    if fly is not None:  # SDP -> PDP on the fly: the producer's cube, then the pooling (the same math)
        prm, (_, mc, mh, mw) = fly
        mid = reference(dataclasses.replace(node, attrs={**node.attrs, "flying_pdp": None}), inputs, (mc, mh, mw),
                        average)
        pool = dataclasses.replace(node, op="dla.pdp", inputs=["mid"], attrs={"pdp": prm})
        return reference(pool, {"mid": mid}, out_shape, average)
    x = inputs[node.inputs[0]]
    _, oh, ow = out_shape
    if node.op == "dla.conv":
        conv = node.attrs["conv"]
        if conv.precision == "fp16":
            if conv.in_precision == "int16":  # CDMA's CVT (identity here): each int16 value rounded to fp16
                if conv.cvt != (0, 1, 0):
                    raise ValueError(f"no reference for CDMA CVT {conv.cvt} (only the identity)")
                x = np.asarray(x, dtype=np.float64).astype(np.float16).view(np.uint16).astype(np.int64)
            acc = ref_conv_fp16.direct_conv_fp16(x, conv.weights, stride=conv.stride, dilation=conv.dilation,
                                                 pad=conv.pad, pad_value=conv.pad_value, out_hw=(oh, ow))
            return ref_sdp_fp16.sdp_fp16(acc, reference_fp16_params(node.attrs["sdp"], inputs), fp32_input=True)
        if conv.winograd is not None:  # U already transformed; every lane of the input atoms, padding lanes 0
            geo = conv.winograd
            xp = np.zeros((geo.ce,) + x.shape[1:], dtype=np.int64)
            xp[:x.shape[0]] = x
            acc = ref_wg.winograd_conv(xp, conv.weights.astype(np.int64), out_hw=(oh, ow), pad=geo.pad,
                                       pad_value=conv.pad_value, pra_truncate=conv.pra_truncate,
                                       clip_truncate=conv.clip_truncate, precision=conv.precision)
            return ref_sdp.sdp(acc, reference_sdp_params(node.attrs["sdp"], inputs), out_bits=_BITS[conv.precision])
        # (the per-tap vectorized form of the same reference sum; tests check it equals the loop)
        acc = ref_conv.direct_conv_int8_vectorized(x, conv.weights.astype(np.int64), stride=conv.stride,
                                                   dilation=conv.dilation, pad=conv.pad, pad_value=conv.pad_value,
                                                   out_hw=(oh, ow), clip_truncate=conv.clip_truncate,
                                                   precision=conv.precision)
        return ref_sdp.sdp(acc, reference_sdp_params(node.attrs["sdp"], inputs), out_bits=_BITS[conv.precision])
    if node.op == "dla.sdp":
        prm = node.attrs["sdp"]
        if prm.precision == "fp16":
            return ref_sdp_fp16.sdp_fp16(x, reference_fp16_params(prm, inputs))
        return ref_sdp.sdp(x, reference_sdp_params(prm, inputs), out_bits=_BITS[prm.precision])
    if node.op == "dla.pdp" and node.attrs.get("pdp_regions"):  # one pass per region, each written in place
        out = np.zeros((x.shape[0], oh, ow), dtype=np.int64)
        for r, prm in node.attrs["pdp_regions"]:
            (i0, i1), (j0, j1), (o0, o1), (p0, p1) = r.in_rows, r.in_cols, r.out_rows, r.out_cols
            one = dataclasses.replace(node, attrs={"pdp": prm})
            out[:, o0:o1, p0:p1] = reference(one, {node.inputs[0]: x[:, i0:i1, j0:j1]}, (x.shape[0], o1 - o0, p1 - p0),
                                             average)
        return out
    if node.op == "dla.pdp":
        p = node.attrs["pdp"]
        if p.precision == "fp16":
            return ref_pdp_fp16.pool_fp16(x, method=p.method, kernel=p.kernel, stride=p.stride, pad=p.pad,
                                          pad_values=p.pad_values, recip_w=p.recip_w, recip_h=p.recip_h,
                                          out_hw=(oh, ow))
        return ref_pdp.pool(x, method=p.method, kernel=p.kernel, stride=p.stride, pad=p.pad,
                            pad_values=p.pad_values, recip_w=p.recip_w, recip_h=p.recip_h, out_hw=(oh, ow),
                            average=average, precision=p.precision)
    if node.op == "dla.cdp":
        p = node.attrs["cdp"]
        if p.precision == "fp16":
            return ref_cdp_fp16.lrn_fp16(x, lut=p.lut, normalz_len=p.normalz_len, sqsum_bypass=p.sqsum_bypass,
                                         mul_bypass=p.mul_bypass)
        fields = {f.name: getattr(p, f.name) for f in dataclasses.fields(p) if f.name not in ("lut", "precision")}
        return ref_cdp.lrn(x, lut=p.lut, precision=p.precision, **fields)
    raise ValueError(f"no reference for {node.op}")


#: Output bits of the integer precisions (the SDP reference's ``out_bits``).
_BITS = {"int8": 8, "int16": 16}


def random_feature(rng: np.random.Generator, dtype: int, shape: tuple[int, ...]) -> np.ndarray:
    """Random elements of a FEATURE dtype: int8/int16 over their whole range, fp16 bit patterns of N(0, 1)
    values (finite, as a network's are)."""
    if dtype == pb.Tensor.FP16:
        return rng.standard_normal(shape).astype(np.float16).view(np.uint16).astype(np.int64)
    bits = 16 if dtype == pb.Tensor.INT16 else 8
    return rng.integers(-(1 << (bits - 1)), 1 << (bits - 1), size=shape)


def replay_layer(ld, node, hw, rng: np.random.Generator) -> LayerResult:
    """Run one engine op's register programs alone on the golden model and compare with the reference."""
    tensors = {t.name: t for t in ld.tensors}
    dla = Dla(hw)
    place = place_regions(ld.regions)
    for r in ld.regions:
        if r.content:
            dla.mem.dram.write(place.address(r.id), r.content)
    inputs = {}
    for name in dict.fromkeys(node.inputs):
        t = tensors[name]
        lay = tensor_layout(t)
        vals = np.zeros((lay.padded_channels, t.height, t.width), dtype=np.int64)
        vals[:t.channels] = random_feature(rng, t.dtype, (t.channels, t.height, t.width))
        write_cube(dla.mem.dram, place.address(t.region, t.offset), lay, vals)
        inputs[name] = vals[:t.channels]
    ops = [op for task in ld.tasks if task.WhichOneof("kind") == "dla" for op in task.dla.ops
           if op.name == node.name or op.name.startswith(node.name + "#")]
    groups = Groups(runtime_assigned=True)  # from a fresh DLA (every unit at group 0), whoever assigned them
    for op in ops:
        armed = []
        for w in op.writes:
            value = w.value
            if w.HasField("reloc"):
                value = (place.address(w.reloc.region, w.reloc.offset) >> w.reloc.shift) & 0xFFFFFFFF
            unit = w.name.split(".")[0][len("NVDLA_"):]
            if ".S_POINTER" in w.name:
                value = groups.pointer(unit, value)
            if ".D_OP_ENABLE" in w.name:
                armed.append(unit)
            dla.write_reg(w.addr, value)
        groups.started(armed)
    out = tensors[node.outputs[0]]
    got = read_cube(dla.mem.dram, place.address(out.region, out.offset), tensor_layout(out),
                    signed=out.dtype != pb.Tensor.FP16)[:out.channels]
    want = reference(node, inputs, (out.channels, out.height, out.width), hw.pdp_average)
    bad = int(np.count_nonzero(got != want))
    return LayerResult(node.name, node.op, bad == 0, bad, int(want.size))


def replay_all(ld, lowered, hw, seed: int = 0, max_macs: int | None = None) -> list[LayerResult]:
    """Every engine op of a compiled network; convs above ``max_macs`` are skipped (to bound the time of the
    reference's per-element SDP loops)."""
    rng = np.random.default_rng(seed)
    results = []
    for n in lowered.nodes:
        if not n.op.startswith("dla."):
            continue
        if max_macs is not None and n.op == "dla.conv":
            k, c, r, s = n.attrs["weight"].shape
            out = lowered.shapes[n.outputs[0]]
            spatial = out[2] * out[3] if len(out) == 4 else 1
            if k * c * r * s * spatial > max_macs:
                continue
        results.append(replay_layer(ld, n, hw, rng))
    return results
