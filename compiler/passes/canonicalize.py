"""Canonicalize: drop identities, name flattening reshapes Flatten, merge chained per-channel affines, and run a
pre-quantized model's narrowing means as convolutions."""
from __future__ import annotations

import numpy as np

from compiler.ir import Graph
from compiler.passes import CompileContext


def _vec(g: Graph, name: str, c: int) -> np.ndarray:
    v = g.consts[name].astype(np.float64).ravel()
    return np.full(c, v[0]) if v.size == 1 else v


def _is_flatten(src: tuple[int, ...], dst: tuple[int, ...]) -> bool:
    return len(src) > 2 and len(dst) == 2 and dst[0] == src[0] and dst[1] == int(np.prod(src[1:]))


def canonicalize(g: Graph, ctx: CompileContext) -> Graph:
    g.toposort()
    for n in g.nodes:  # an empty tensor (a 0-channel conv) would otherwise fail deep in a later pass
        for t in (*n.inputs, *n.outputs):
            shape = g.shapes.get(t) if t else None
            if shape is not None and 0 in tuple(shape) and (t not in g.consts or len(shape) >= 2):  # (not empty
                # parameter lists such as an unused ROI)
                what = "weights" if t in g.consts else "tensor"
                raise g.error(n, f"{what} {t!r} of shape {tuple(shape)} is empty: nothing to compute")
    for n in list(g.nodes):
        if n.op == "Identity" or (n.op == "Reshape" and g.shapes[n.inputs[0]] == g.shapes[n.outputs[0]]):
            src, dst = n.inputs[0], n.outputs[0]
            g.remove(n)
            prod = g.producer(src)
            if dst in g.outputs and prod is not None and src not in g.outputs:
                # Keep the model's output name: the producer now writes ``dst`` directly.
                prod.outputs = [dst if t == src else t for t in prod.outputs]
                g.replace_uses(src, dst)
            else:
                g.replace_uses(dst, src)
    # Reshape (N, C, H, W) -> (N, C*H*W), the exporters' flatten before a Gemm, is Flatten(axis 1): lowering then
    # sees the cube and runs the Gemm as an H x W conv over C channels.
    for n in g.nodes:
        if n.op == "Reshape" and _is_flatten(g.shapes[n.inputs[0]], g.shapes[n.outputs[0]]):
            n.op, n.attrs = "Flatten", {"axis": 1}
    # ChannelAffine(ChannelAffine(x)) -> one ChannelAffine, when the inner result has no other use.
    changed = True
    while changed:
        changed = False
        for n in g.nodes:
            if n.op != "ChannelAffine":
                continue
            prod = g.producer(n.inputs[0])
            if prod is None or prod.op != "ChannelAffine" or len(g.consumers(prod.outputs[0])) != 1 \
                    or prod.outputs[0] in g.outputs:
                continue
            c = g.shapes[n.inputs[0]][1]
            s1, b1 = _vec(g, prod.inputs[1], c), _vec(g, prod.inputs[2], c)
            s2, b2 = _vec(g, n.inputs[1], c), _vec(g, n.inputs[2], c)
            sname, bname = g.fresh(n.name + "_scale"), g.fresh(n.name + "_bias")
            g.consts[sname] = (s1 * s2).astype(np.float32)
            g.consts[bname] = (b1 * s2 + b2).astype(np.float32)
            g.shapes[sname] = g.shapes[bname] = (c,)
            n.inputs = [prod.inputs[0], sname, bname]
            g.remove(prod)
            changed = True
            break
    _means_as_convs(g)
    g.prune()
    return g


#: Weight bytes (C x C x H x W once block-diagonal) up to which a narrowing mean runs on the convolution pipe.
MEAN_CONV_BYTES = 1 << 22


def _means_as_convs(g: Graph) -> None:
    """A pre-quantized model's global average whose output scale is finer than its input's (TFLite's MEAN,
    onnxruntime's QLinearGlobalAveragePool) rounds and saturates once, at the model's scale. PDP's average
    stores its low byte without saturating, so it needs a coarser grid there; a depthwise convolution of ones
    (int8 weight 1 at scale 1/(H*W)) sums on CMAC and SDP requantizes with saturation, as the model does.
    Same float values, so the IR's meaning is unchanged; bounded by ``MEAN_CONV_BYTES`` of weights."""
    for n in g.nodes:
        if n.op != "GlobalAveragePool":
            continue
        x, y = n.inputs[0], n.outputs[0]
        s_in, s_out = g.quant_scales.get(x), g.quant_scales.get(y)
        shape = g.shapes[x]
        if s_in is None or s_out is None or s_out >= s_in or len(shape) != 4:
            continue
        _, c, h, w = shape
        if c * c * h * w > MEAN_CONV_BYTES:
            continue
        wname = g.fresh(n.name + "_ones")
        g.consts[wname] = np.full((c, 1, h, w), 1.0 / (h * w), dtype=np.float32)
        g.shapes[wname] = (c, 1, h, w)
        n.op, n.inputs = "Conv", [x, wname]
        n.attrs = {"strides": (1, 1), "pads": (0, 0, 0, 0), "dilations": (1, 1), "group": c,
                   "weight_scale": np.full(c, 1.0 / (h * w))}
