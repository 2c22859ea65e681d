"""Mixed precision per layer (``dla compile --precision-overrides``): int16 and fp16 layers in one network.

NVDLA's engines convert between its two 16-bit types in two places only, so each boundary between layers
of different types becomes one operation (a *converter*, ``attrs["convert"] = (from, to)``):

- int16 -> fp16: a 1x1 fp16 convolution whose CDMA converts its int16 input (CVT_EN with IN_PRECISION=INT16:
  ``Int17ToFp16`` of each value, exact up to 2048 and rounded to fp16 beyond), identity weights, and SDP's Y
  MUL by the tensor's int16 scale as an fp32 REG operand, so the fp16 tensor holds the real values (no
  scale folded into a consumer's weights, where small scales would make fp16 denormals);
- fp16 -> int16: a standalone fp16 SDP whose Y MUL divides by the int16 tensor's scale (fp32) and whose output
  converter writes INT16 (``Fp32ToFp16`` then ``Fp16ToInt16``: the int16 values keep fp16's 11 bits).

int8 does not mix: no engine converts between int8 and 16 bits (the cmod refuses those SDP precision pairs and
CDMA converts int16 only). Layer names are the model's; a name fused into an operation with another layer
overrides that whole operation (two different overrides on one operation are refused naming both).

Each engine op's precision is ``attrs["precision"]`` (``node_precision``); each tensor's element type is in
``ctx.tensor_dtypes``. CPU ops read and write any type (the runtime converts); concats take their own
precision and views their input's. Network inputs take their consumers' type when all agree.
"""
from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np

from compiler.errors import CompileError
from compiler.ir import Graph, Node
from compiler.passes import CompileContext
from compiler.postops import Eltwise

#: The precisions one network can mix.
MIXABLE = ("int16", "fp16")


def parse_overrides(spec: str) -> dict[str, str]:
    """``layer=int16,layer2=fp16`` or the path of a JSON object {layer: precision}."""
    path = Path(spec)
    if spec.endswith(".json") or path.is_file():
        try:
            data = json.loads(path.read_text())
        except OSError as exc:
            raise CompileError(spec, f"--precision-overrides: cannot read ({exc.strerror})") from None
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise CompileError(spec, f"--precision-overrides: not JSON ({exc})") from None
        if not isinstance(data, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in data.items()):
            raise CompileError(spec, "--precision-overrides: the JSON must be an object {\"layer\": \"int16\"|\"fp16\"}")
        return dict(data)
    out: dict[str, str] = {}
    for item in filter(None, (s.strip() for s in spec.split(","))):
        layer, eq, precision = item.rpartition("=")
        if not eq or not layer:
            raise CompileError("", f"--precision-overrides: {item!r} is not layer=precision")
        out[layer.strip()] = precision.strip()
    return out


def node_precision(n: Node, ctx: CompileContext) -> str:
    """The data type an engine op computes in: its override, else the network's."""
    return n.attrs.get("precision", ctx.precision)


def tensor_dtype(t: str, ctx: CompileContext) -> str:
    return ctx.tensor_dtypes.get(t, ctx.precision)


def check_overrides(overrides: dict[str, str], base: str) -> None:
    if base not in MIXABLE:
        raise CompileError("", f"--precision-overrides needs --precision int16 or fp16, not {base}: NVDLA's engines "
                               "convert only between int16 and fp16 (no int8 <-> 16-bit conversion)")
    for layer, p in overrides.items():
        if p not in MIXABLE:
            raise CompileError("", f"--precision-overrides: {layer}={p}: a layer can be int16 or fp16 "
                                   "(NVDLA converts only between those two)")


def _owners(g: Graph, overrides: dict[str, str]) -> dict[str, str]:
    """Lowered op name -> its precision override."""
    owner: dict[str, Node] = {}
    for n in g.nodes:
        for layer in n.attrs.get("layers") or [n.name]:
            owner.setdefault(layer, n)
        owner.setdefault(n.name, n)
    chosen: dict[str, str] = {}
    by: dict[str, str] = {}
    for layer, p in overrides.items():
        n = owner.get(layer)
        if n is None:
            names = list(dict.fromkeys(x for m in g.nodes for x in m.attrs.get("layers") or []))
            raise CompileError(g.source, f"--precision-overrides: the network has no layer {layer!r} (it has "
                                         f"{', '.join(names[:12])}{', ...' if len(names) > 12 else ''})")
        if not (n.op.startswith(("dla.", "cpu.")) or n.op == "view.concat"):
            raise CompileError(g.source, f"--precision-overrides: {layer!r} is a view ({n.op}); it has its input's "
                                         "type")
        if chosen.get(n.name, p) != p:
            raise CompileError(g.source, f"--precision-overrides: {by[n.name]!r} and {layer!r} run as one operation "
                                         f"({n.name}) but ask for {chosen[n.name]} and {p}")
        chosen[n.name], by[n.name] = p, layer
    return chosen


def assign_precisions(g: Graph, ctx: CompileContext) -> Graph:
    """Each engine op's precision, each tensor's type, and a converter at every boundary (module docstring)."""
    if not ctx.overrides:
        return g
    base = ctx.precision
    check_overrides(ctx.overrides, base)
    chosen = _owners(g, ctx.overrides)
    typed = [n for n in g.nodes if n.op.startswith(("dla.", "cpu.")) or n.op == "view.concat"]
    for n in typed:
        n.attrs["precision"] = chosen.get(n.name, base)
    dtypes = _tensor_types(g, base)
    count = _insert_converters(g, ctx, dtypes)
    ctx.tensor_dtypes = dtypes
    mix = {q: sum(1 for n in typed if n.attrs["precision"] == q and n.op.startswith("dla.")) for q in MIXABLE}
    ctx.log(f"mixed precision: {mix['int16']} int16 and {mix['fp16']} fp16 engine ops, {count} converters")
    return g


def _tensor_types(g: Graph, base: str) -> dict[str, str]:
    """Every tensor's type: its producer's precision; a view's input's; a network input its consumers' when they
    agree, else ``base``."""
    dtypes: dict[str, str] = {}
    for t in g.inputs:
        users = {c.attrs["precision"] for c in g.consumers(t) if "precision" in c.attrs}
        dtypes[t] = users.pop() if len(users) == 1 else base
    for n in g.nodes:  # (fusion may list an eltwise operand's producer after its consumer)
        for o in n.outputs:
            dtypes.setdefault(o, n.attrs.get("precision", ""))
    for n in g.nodes:
        for o in n.outputs:
            if not dtypes[o]:
                dtypes[o] = _view_dtype(g, n, dtypes, base)
    return dtypes


def _insert_converters(g: Graph, ctx: CompileContext, dtypes: dict[str, str]) -> int:
    """A converter before each engine op (or concat) input of another type, shared by its consumers of the same
    type; ``dtypes`` gains the converted tensors. Returns how many were inserted."""
    converted: dict[tuple[str, str], str] = {}
    nodes: list[Node] = []
    for n in g.nodes:
        p = n.attrs.get("precision")
        for i, t in enumerate(n.inputs if p is not None and not n.op.startswith("cpu.") else ()):
            have = dtypes.get(t, ctx.precision)
            if have == p:
                continue
            if (t, p) not in converted:
                cv = _converter(g, t, have, p)
                if t in ctx.amax:  # the same real values: the same calibrated range
                    ctx.amax[cv.outputs[0]] = ctx.amax[t]
                nodes.append(cv)
                dtypes[cv.outputs[0]] = p
                converted[(t, p)] = cv.outputs[0]
            new = converted[(t, p)]
            n.inputs[i] = new
            if n.attrs.get("post"):
                n.attrs["post"] = [replace(q, tensor=new) if isinstance(q, Eltwise) and q.tensor == t else q
                                   for q in n.attrs["post"]]
        nodes.append(n)
    g.nodes = nodes
    g.toposort()
    return len(converted)


def _view_dtype(g: Graph, n: Node, dtypes: dict[str, str], base: str) -> str:
    """A view's type: its input's (through chains of views)."""
    while n is not None and n.inputs and "precision" not in n.attrs:
        t = n.inputs[0]
        if dtypes.get(t):
            return dtypes[t]
        n = g.producer(t)
    return base if n is None or not n.inputs else n.attrs["precision"]


def _converter(g: Graph, t: str, have: str, want: str) -> Node:
    """The operation that turns tensor ``t`` of type ``have`` into ``want`` (module docstring)."""
    out = g.fresh(f"{t}_as_{want}")
    g.shapes[out] = g.shapes[t]
    shape = g.shapes[t]
    c = int(shape[1]) if len(shape) >= 2 else int(shape[0])
    attrs = {"convert": (have, want), "layers": [], "post": [], "precision": "fp16"}
    if want == "fp16":
        eye = np.eye(c, dtype=np.float32).reshape(c, c, 1, 1)
        return Node(out, "dla.conv", [t], [out], dict(attrs, weight=eye, stride=(1, 1), dilation=(1, 1),
                                                       pads=(0, 0, 0, 0)))
    return Node(out, "dla.sdp", [t], [out], attrs)


# ---- register parameters ----------------------------------------------------------------------------------
def _f32(v: float) -> int:
    """The fp32 bit pattern of ``v`` (SDP Y's REG operands in fp16 processing)."""
    return int(np.array([v], dtype=np.float32).view(np.uint32)[0])


def converter_params(n: Node, scale: float) -> None:
    """A converter's registers: ``scale`` is the int16 side's tensor scale."""
    from compiler.hwparams import ConvParams, SdpParams, YStage
    from compiler.passes.fp16 import ONE

    have, want = n.attrs["convert"]
    if want == "fp16":  # int16 q -> fp16(q) by CDMA's CVT, times 1, then Y MUL by the scale: the real value
        c = n.attrs["weight"].shape[0]
        eye = np.where(np.eye(c, dtype=bool), ONE, 0).reshape(c, c, 1, 1).astype(np.int64)
        n.attrs["conv"] = ConvParams(weights=eye, precision="fp16", in_precision="int16", cvt=(0, 1, 0))
        y = YStage(bypass=False, mul_bypass=False, mul_operand=_f32(scale))
        n.attrs["sdp"] = SdpParams(y=y, precision="fp16")
    else:  # fp16 x -> x / scale in fp32, narrowed to fp16, then to int16 by the output converter
        y = YStage(bypass=False, mul_bypass=False, mul_operand=_f32(1.0 / scale))
        n.attrs["sdp"] = SdpParams(y=y, precision="fp16", out_precision="int16")


def mixed_params(g: Graph, ctx: CompileContext) -> Graph:
    """The ``quantize`` pass of a mixed network: int16 ops quantized with the calibrated int16 scales, fp16
    ops as ``passes.fp16`` builds them, converters; fp16 tensors have scale 1."""
    from compiler.passes.fp16 import fp16_node
    from compiler.passes.quantize import quantize_node, quantize_scales

    as_int16 = replace(ctx, precision="int16")
    scales = quantize_scales(g, as_int16)
    for n in g.nodes:
        if "convert" in n.attrs:
            side = n.inputs[0] if n.attrs["convert"][0] == "int16" else n.outputs[0]
            converter_params(n, scales[side])
        elif node_precision(n, ctx) == "fp16":
            fp16_node(g, n, ctx)
        else:
            quantize_node(g, n, scales, as_int16)
    ctx.scales = {t: (s if tensor_dtype(t, ctx) == "int16" else 1.0) for t, s in scales.items()}
    return g
