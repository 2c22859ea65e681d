"""Winograd convolution (``--profile performance|fast-math``): mark the 3x3 convolutions that can run in the
conv pipeline's Winograd mode, F(2x2, 3x3), on configs that have it.

A marked convolution's weights are transformed (``U = G g G^T``) and quantized in that domain by ``quantize``,
its CSC pre-transforms the input (PRA: ``V = B^T d B``, then ``sat(rha(V, PRA_TRUNCATE))``) and CMAC multiplies
4x4 tiles: 2.25x fewer multiplications per output. What the hardware and golden's Winograd model take
(``golden.engines.conv_winograd``) bounds what is marked:

* int8 or int16 (golden has no fp16 Winograd); stride 1, dilation 1, a 3x3 kernel, no channel-diagonal
  (depthwise) structure, no model-given int8 weights (their scales are the model's, in the plain domain);
* output height and width multiples of 4 (4x4 output blocks); the model's top/left padding fits 5 bits and
  the padding that makes up the input to output + 4 fits 6 bits;
* the whole padded input in the data banks and the whole transformed weight set in the rest (no split);
* SDP on the fly without an element-wise operand (it reads those in raster order, CACC delivers 2x2 tiles).

``PRA_TRUNCATE``: B^T d B adds four inputs, so a tile value can reach 4x the input range. int16 networks keep
4x range headroom (``quantize.RANGE_HEADROOM``), so 0 keeps every bit; int8 ones use the full range, so only
``fast-math`` takes int8 convolutions, its PRA dropping ``winograd_int8_pra_truncate`` = 1 bit (the largest
sums saturate: measured better than dropping 2 bits on a single layer, cosine 0.9989 against 0.9975).
"""
from __future__ import annotations

from compiler.codegen.winograd import ENTRY, winograd_geometry
from compiler.ir import Graph
from compiler.passes import CompileContext
from compiler.passes.mixed import node_precision
from compiler.passes.split_conv import diagonal_chunk, kernel_unit
from compiler.postops import Eltwise

PRECISIONS = ("int8", "int16")


def why_not_winograd(g: Graph, n, ctx: CompileContext) -> str | None:
    """Why convolution ``n`` cannot run in Winograd mode, or None when it can."""
    hw, dtype = ctx.hw, node_precision(n, ctx)
    if n.attrs.get("convert"):
        return "a precision converter"
    if dtype not in PRECISIONS:
        return f"{dtype} (golden models Winograd in int8 and int16)"
    if dtype == "int8" and not ctx.profile.winograd_int8:
        return "int8 (its PRA must drop input bits: --profile fast-math only)"
    w = n.attrs["weight"]
    k, c, r, s = w.shape
    if (r, s) != (3, 3) or tuple(n.attrs["stride"]) != (1, 1) or tuple(n.attrs["dilation"]) != (1, 1):
        return "not a 3x3 stride-1 undilated kernel"
    if n.attrs.get("weight_scale") is not None:
        return "the model's own int8 weights"
    if any(isinstance(p, Eltwise) for p in n.attrs.get("post", [])):
        return "an element-wise SDP operand"
    shape_in, shape_out = g.shapes[n.inputs[0]], g.shapes[n.outputs[0]]
    if len(shape_in) != 4 or len(shape_out) != 4:
        return "not a 4-D cube"
    _, _, h, wd = shape_in
    oh, ow = shape_out[2], shape_out[3]
    if oh % 4 or ow % 4:
        return f"output {oh}x{ow} is not whole 4x4 blocks"
    if diagonal_chunk(w, kernel_unit(hw, dtype)):
        return "channel-diagonal (depthwise) kernels"
    pt, pl = int(n.attrs["pads"][0]), int(n.attrs["pads"][1])
    geo = winograd_geometry(hw, dtype, (c, h, wd), (oh, ow), (pt, pl))
    if max(pt, pl) > 31 or min(geo.pad) < 0 or max(geo.pad[2:]) > 63:
        return f"padding {geo.pad} does not fit CDMA's fields"
    if geo.data_banks > hw.cbuf_bank_number - 1:
        return "its padded input does not fit the CBUF data banks whole"
    bank_bytes = hw.cbuf_bank_width * hw.cbuf_bank_depth
    weight_bytes = -(-k * geo.ce * 16 * (1 if dtype == "int8" else 2) // ENTRY) * ENTRY
    if weight_bytes > (hw.cbuf_bank_number - geo.data_banks) * bank_bytes:
        return "its transformed weights do not fit the CBUF weight banks whole"
    return None


def winograd(g: Graph, ctx: CompileContext) -> Graph:
    """Mark eligible convolutions (``attrs["winograd"]``: the geometry) when the profile asks for Winograd."""
    if not (ctx.profile.winograd and ctx.hw.winograd):
        return g
    marked = 0
    for n in g.nodes:
        if n.op != "dla.conv":
            continue
        if why_not_winograd(g, n, ctx) is None:
            _, c, h, wd = g.shapes[n.inputs[0]]
            oh, ow = g.shapes[n.outputs[0]][2:]
            n.attrs["winograd"] = winograd_geometry(ctx.hw, node_precision(n, ctx), (c, h, wd), (oh, ow),
                                                    (int(n.attrs["pads"][0]), int(n.attrs["pads"][1])))
            marked += 1
    if marked:
        ctx.log(f"  Winograd: {marked} convolution(s)")
    return g


__all__ = ["why_not_winograd", "winograd"]
