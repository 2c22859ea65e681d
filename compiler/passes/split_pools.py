"""Global pooling beyond PDP's 8x8 window as window pools, before calibration.

A global average over an H x W map is an average of block averages: a k1 x k1 pool with stride k1, then one
over the remaining n2 x n2 (``lowering._pool_passes``). When no k1 <= 8 divides the side (13, SqueezeNet's
conv10), the first pool pads the map up to a multiple with zeros it counts, and the last pool's ``gain``
(padded area / true area) undoes their share: the engines fold it into the PDP reciprocal. Done before
calibration, so every pass's output has a calibrated range of its own (a block average spans a wider range
than the global one; PDP stores the low byte of an average, so a range too small for it would wrap).
Global max pooling splits only without padding (padding must not win a max).
"""
from __future__ import annotations

from compiler.ir import Graph, Node
from compiler.lowering import _pool_passes
from compiler.passes import CompileContext
from golden.engines.pdp import MAX_KERNEL


def split_pools(g: Graph, ctx: CompileContext) -> Graph:
    for n in [n for n in g.nodes if n.op in ("GlobalAveragePool", "GlobalMaxPool")]:
        shape = g.shapes[n.inputs[0]]
        if len(shape) != 4 or (shape[2] <= MAX_KERNEL and shape[3] <= MAX_KERNEL):
            continue
        avg = n.op == "GlobalAveragePool"
        ph, pw = _pool_passes(shape[2], avg), _pool_passes(shape[3], avg)
        if ph is None or pw is None:
            continue  # lowering leaves it to the CPU
        ph += [(1, 0)] * (len(pw) - len(ph))
        pw += [(1, 0)] * (len(ph) - len(pw))
        area = 1
        for (kh, _), (kw, _) in zip(ph, pw):
            area *= kh * kw
        index = g.nodes.index(n)
        g.remove(n)
        x = n.inputs[0]
        for i, ((kh, pad_h), (kw, pad_w)) in enumerate(zip(ph, pw)):
            last = i == len(ph) - 1
            _, c, ih, iw = g.shapes[x]
            out = n.outputs[0] if last else g.fresh(f"{n.name}_pass{i + 1}")
            g.shapes[out] = (1, c, (ih + pad_h) // kh, (iw + pad_w) // kw)
            attrs = {"kernel": (kh, kw), "strides": (kh, kw), "pads": (0, 0, pad_h, pad_w), "count_include_pad": True}
            if last and avg and area != shape[2] * shape[3]:
                attrs["gain"] = area / (shape[2] * shape[3])
            op = "AveragePool" if avg else "MaxPool"
            g.nodes.insert(index + i, Node(n.name if last else g.fresh(f"{n.name}_{i + 1}"), op, [x], [out], attrs))
            x = out
        ctx.log(f"  {n.name}: {shape[2]}x{shape[3]} global pool as {len(ph)} PDP passes")
    return g
