"""Input-channel (K-reduction) splitting of convolutions and fully connected layers too large for the CBUF.

``split_conv`` splits a conv by output rows and kernel groups, but each piece still reads every input channel:
a conv whose one group of kernels (``R x S x C`` bytes each) or one input line does not fit the CBUF cannot run
at all (VGG's FC6 is a 7x7 conv over 512 channels: 8 kernels need 200 KB on nv_small's 128 KB CBUF), nor can
one with more channels than DATAIN_CHANNEL's 13 bits count. Such a layer is rewritten, before calibration, as
a chain over channel slices::

    t0 = Conv(x[c0:c1], W[:, c0:c1])
    t1 = Conv(x[c1:c2], W[:, c1:c2]) + t0
    ...
    y  = Conv(x[cl:C],  W[:, cl:C], B) + t(l-1)       (then the layer's own activation)

Each slice starts on a memory atom, so it is a view of ``x`` (no copy), and each ``+`` is the SDP eltwise
operand the lowering fuses into the conv behind it. The int8 hardware (nv_small has no int16 datapath) cannot
carry 32-bit partial sums through memory, so each partial ``t`` is an int8 tensor with its own calibrated
scale: one more rounding per slice, the price of running the layer on the DLA at all. Slices are as few as
the CBUF allows.
"""
from __future__ import annotations

import math

import numpy as np

from compiler.ir import Graph, Node
from compiler.passes import CompileContext
from compiler.passes.split_conv import plan_pieces

#: DATAIN_CHANNEL / WEIGHT_CHANNEL are 13-bit fields (channels - 1).
MAX_CHANNELS = 1 << 13


def _fits(hw, c: int, h: int, w: int, k: int, r: int, s: int, n: Node, out_h: int, dtype: str) -> bool:
    if c > MAX_CHANNELS:
        return False
    stride = tuple(n.attrs.get("strides", (1, 1)))
    dil = tuple(n.attrs.get("dilations", (1, 1)))
    pad_top = int(n.attrs.get("pads", (0, 0, 0, 0))[0])
    try:
        plan_pieces(hw, c, h, w, k, r, s, stride, dil, pad_top, out_h, dtype)
    except ValueError:
        return False
    return True


def _geometry(g: Graph, n: Node) -> tuple[str, np.ndarray, Node | None] | None:
    """(4-D input tensor, dense (K, C, R, S) weights, the Flatten the Gemm reads through or None) of a Conv or
    Gemm the engines run as one conv, or None (grouped convs run channel atom by channel atom already)."""
    if n.op == "Conv":
        if int(n.attrs.get("group", 1)) != 1 or len(g.shapes[n.inputs[0]]) != 4:
            return None
        return n.inputs[0], g.consts[n.inputs[1]], None
    if n.op == "Gemm":
        src = g.producer(n.inputs[0])
        w = g.consts[n.inputs[1]]
        if src is not None and src.op == "Flatten" and len(g.shapes[src.inputs[0]]) == 4 \
                and g.shapes[src.inputs[0]][0] == 1:
            _, c, h, wd = g.shapes[src.inputs[0]]
            return src.inputs[0], w.reshape(w.shape[0], c, h, wd), src
        if g.shapes[n.inputs[0]][0] == 1:
            return n.inputs[0], w.reshape(w.shape[0], w.shape[1], 1, 1), None
    return None


def _slice_channels(atom: int, c: int, fits) -> int | None:
    """The largest slice width (a multiple of the memory atom) every slice of which fits, or None."""
    for parts in range(2, c // atom + 2):
        width = math.ceil(math.ceil(c / parts) / atom) * atom
        if fits(width) and fits(c - (math.ceil(c / width) - 1) * width):
            return width
    return None


def split_channels(g: Graph, ctx: CompileContext) -> Graph:
    hw = ctx.hw
    for n in [n for n in g.nodes if n.op in ("Conv", "Gemm")]:
        geo = _geometry(g, n)
        if geo is None:
            continue
        x, w, flatten = geo
        _, c, h, wd = g.shapes[x] if len(g.shapes[x]) == 4 else (1, g.shapes[x][1], 1, 1)
        k, _, r, s = w.shape
        out_h = g.shapes[n.outputs[0]][2] if len(g.shapes[n.outputs[0]]) == 4 else 1

        def fits(cs: int) -> bool:
            return _fits(hw, cs, h, wd, k, r, s, n, out_h, ctx.precision)

        if fits(c):
            continue
        width = _slice_channels(ctx.atom, c, fits)
        if width is None:
            raise g.error(n, f"even one {ctx.atom}-channel slice of its {k} {r}x{s} kernels does not fit "
                             f"the {hw.cbuf_bank_number}-bank CBUF of {hw.name}")
        _rewrite(g, n, x, w, flatten, width)
        ctx.log(f"  {n.name}: {c} input channels in {math.ceil(c / width)} slices of {width}")
    g.toposort()
    g.prune()
    return g


def _rewrite(g: Graph, n: Node, x: str, w: np.ndarray, flatten: Node | None, width: int) -> None:
    """Replace ``n`` by the slice chain of the module docstring."""
    if len(g.shapes[x]) == 2:  # a Gemm on an (1, C) vector: the same as a 1x1 conv on a C x 1 x 1 cube
        cube = g.fresh(f"{n.name}_cube")
        g.shapes[cube] = (1, g.shapes[x][1], 1, 1)
        g.nodes.append(Node(g.fresh(f"{n.name}_as_cube"), "Reshape", [x], [cube], {"shape": g.shapes[cube]}))
        x = cube
    c = g.shapes[x][1]
    bias = n.inputs[2] if len(n.inputs) > 2 and n.inputs[2] else None
    if n.op == "Conv":
        attrs = {key: n.attrs[key] for key in ("strides", "pads", "dilations")}
    else:
        attrs = {"strides": (1, 1), "pads": (0, 0, 0, 0), "dilations": (1, 1)}
    attrs["group"] = 1
    y = n.outputs[0]
    out_shape = g.shapes[y] if n.op == "Conv" else (1, w.shape[0], 1, 1)
    g.remove(n)
    partial = None
    starts = list(range(0, c, width))
    for i, c0 in enumerate(starts):
        c1 = min(c, c0 + width)
        last = i == len(starts) - 1
        tag = f"{n.name}/c{c0}-{c1}"
        xs = g.fresh(f"{tag}_in")
        g.shapes[xs] = (1, c1 - c0, *g.shapes[x][2:])
        g.nodes.append(Node(g.fresh(f"{tag}_slice"), "Slice", [x], [xs], {"axis": 1, "start": c0, "end": c1}))
        wname = g.fresh(f"{tag}_W")
        g.consts[wname] = np.ascontiguousarray(w[:, c0:c1], dtype=np.float32)
        g.shapes[wname] = g.consts[wname].shape
        conv_out = g.fresh(f"{tag}_conv")
        g.shapes[conv_out] = out_shape
        g.nodes.append(Node(tag, "Conv", [xs, wname] + ([bias] if last and bias else []), [conv_out], dict(attrs)))
        if partial is None:
            partial = conv_out
            continue
        out = (y if n.op == "Conv" else g.fresh(f"{n.name}_sum")) if last else g.fresh(f"{tag}_partial")
        g.shapes[out] = out_shape
        g.nodes.append(Node(g.fresh(f"{tag}_accumulate"), "Add", [conv_out, partial], [out]))
        partial = out
    if n.op == "Gemm":
        g.nodes.append(Node(g.fresh(f"{n.name}_flat"), "Flatten", [partial], [y], {"axis": 1}))
