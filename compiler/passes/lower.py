"""Lower canonical ops to engine ops, fusing what one hardware operation can do.

Engine ops (all on int8 feature cubes; 2-D (N, C) tensors are C x 1 x 1 cubes):

- ``dla.conv``  CONV pipeline + SDP on the fly: attrs ``weight`` (K, C, R, S) float, ``bias`` (K,),
  ``stride``, ``dilation``, ``pads`` (t, l, b, r), ``post`` (SDP post-ops, below). FC is a conv whose kernel
  covers the whole input; grouped/depthwise convs become block-diagonal dense kernels; ConvTranspose is a
  CPU zero-insertion followed by a conv with the flipped kernel.
- ``dla.sdp``   SDP from memory with ``post`` ops (standalone affine/activation/eltwise).
- ``dla.pdp``   pooling: ``method``, ``kernel``, ``stride``, ``pads``.
- ``dla.cdp``   LRN: ``size``, ``alpha``, ``beta``, ``bias``.
- ``view.concat`` / ``view.slice`` / ``view.reshape``: no data movement when the memory planner can place
  the tensors inside one another (channel offsets on atom boundaries); otherwise they become CPU copies.
- ``cpu.<Op>``  a canonical op run by the runtime in float (Softmax, Sigmoid without a LUT, ...).

SDP post-ops fill the SDP datapath in its fixed order, so a chain is fused only while it fits:
``affine`` (X1 ALU+MUL) -> ``relu`` (X1 ReLU) -> ``eltwise`` add/max (X2 ALU) or mul (X2 MUL) ->
``relu``/``prelu`` (X2 ReLU / X2 MUL PReLU) -> ``lut`` sigmoid/tanh (Y LUT, configs with an SDP LUT).
"""
from __future__ import annotations

import numpy as np

from compiler.ir import Graph, Node
from compiler.passes import CompileContext
from golden.engines.pdp import MAX_KERNEL

SLOTS = {"affine": 0, "relu1": 1, "eltwise": 2, "act2": 3, "lut": 4}
CDP_WINDOWS = (3, 5, 7, 9)
#: CPU ops that only move int8 values: their inputs and outputs share one scale, so they are exact.
SAME_SCALE_CPU = ("Concat", "Slice", "Split", "Flatten", "Reshape", "MaxPool", "GlobalMaxPool", "Identity")
MAX_PDP_STRIDE = 16
MAX_PDP_PAD = 7


# ---- post-op chains ---------------------------------------------------------------------------------------
def _slot_state(post: list[dict]) -> int:
    return max((p["_slot"] for p in post), default=-1)


def _as_post(g: Graph, n: Node, main: str) -> dict | None:
    """The post-op form of a canonical node applied to tensor ``main``, or None if SDP cannot do it."""
    c = _channels(g.shapes[main])
    if n.op == "Relu" or (n.op == "Clip" and n.attrs.get("min") is not None and n.attrs["min"] == 0):
        return {"op": "relu"}
    if n.op == "Clip" and n.attrs.get("min") is None and n.attrs.get("max") is None:
        return {"op": "identity"}
    if n.op == "PRelu":
        slope = g.consts[n.inputs[1]].astype(np.float64).ravel()
        return {"op": "prelu", "slope": np.full(c, slope[0]) if slope.size == 1 else slope}
    if n.op == "LeakyRelu":
        return {"op": "prelu", "slope": np.full(c, float(n.attrs.get("alpha", 0.01)))}
    if n.op == "ChannelAffine":
        s = g.consts[n.inputs[1]].astype(np.float64).ravel()
        b = g.consts[n.inputs[2]].astype(np.float64).ravel()
        return {"op": "affine", "scale": np.full(c, s[0]) if s.size == 1 else s,
                "bias": np.full(c, b[0]) if b.size == 1 else b}
    if n.op in ("Add", "Max", "Mul"):
        other = n.inputs[1] if n.inputs[0] == main else n.inputs[0]
        return {"op": "eltwise", "kind": n.op.lower(), "tensor": other}
    if n.op in ("Sigmoid", "Tanh"):
        return {"op": "lut", "fn": n.op.lower()}
    return None


def _fit(post: list[dict], p: dict, hw) -> dict | None:
    """``p`` with its datapath slot if it can follow ``post`` in one SDP operation, else None."""
    state = _slot_state(post)
    kinds = {q["op"]: q for q in post}
    op = p["op"]
    if op == "identity":
        return dict(p, _slot=max(state, 0))
    if op == "affine":
        if state < 0:
            return dict(p, _slot=0)
        if state == 0:  # compose with the previous affine
            return dict(p, _slot=0)
        return None
    if op == "relu":
        if state < 1:
            return dict(p, _slot=1)
        if state == 1 or (state == 3 and kinds.get("relu", {}).get("_slot") == 3):
            return dict(p, _slot=state)  # relu after relu is a no-op
        if state == 2:
            return dict(p, _slot=3)
        return None
    if op == "prelu":
        elt = kinds.get("eltwise")
        if elt is not None and (elt["kind"] == "mul" or np.ptp(p["slope"]) != 0):
            return None  # X2 MUL is taken, or its per-channel operand would clash with the per-element one
        return dict(p, _slot=3) if state < 3 else None
    if op == "eltwise":
        return dict(p, _slot=2) if state < 2 else None
    if op == "lut":
        return dict(p, _slot=4) if state < 4 and hw.sdp_lut and hw.sdp_ew else None
    return None


def _channels(shape) -> int:
    return int(shape[1]) if len(shape) >= 2 else int(shape[0])


def _cube_ok(shape) -> bool:
    return (len(shape) == 4 or len(shape) == 2) and shape[0] == 1


# ---- the pass ---------------------------------------------------------------------------------------------
def lower(g: Graph, ctx: CompileContext) -> Graph:
    hw = ctx.hw
    g.toposort()
    out: list[Node] = []
    absorbed: set[str] = set()
    placed_in_concat: set[str] = set()
    nodes = list(g.nodes)

    def single_use(t: str) -> Node | None:
        cons = g.consumers(t)
        if len(cons) == 1 and t not in g.outputs and cons[0].name not in absorbed:
            return cons[0]
        return None

    def fuse(e: Node) -> None:
        """Absorb following ops into engine node ``e`` while the SDP datapath has room."""
        while True:
            t = e.outputs[0]
            nxt = single_use(t)
            if nxt is None:
                return
            p = _as_post(g, nxt, t)
            if p is None or (p["op"] == "eltwise" and (g.shapes[nxt.inputs[0]] != g.shapes[nxt.inputs[1]]
                                                       or p["tensor"] == t)):
                return
            fitted = _fit(e.attrs["post"], p, hw)
            if fitted is None:
                return
            if p["op"] == "eltwise":
                e.inputs.append(p["tensor"])
            e.attrs["post"].append(fitted)
            e.attrs["layers"].append(nxt.name)
            e.outputs = list(nxt.outputs)
            absorbed.add(nxt.name)

    def emit(node: Node) -> Node:
        out.append(node)
        return node

    for n in nodes:
        if n.name in absorbed:
            continue
        shapes = [g.shapes[t] for t in n.inputs if t and t not in g.consts]
        cube_ok = all(_cube_ok(s) for s in shapes) and all(_cube_ok(g.shapes[o]) for o in n.outputs)
        if n.op in ("Conv", "Gemm", "ConvTranspose") and cube_ok:
            for e in _lower_conv(g, n, ctx):
                emit(e)
            if out[-1].op == "dla.conv":
                fuse(out[-1])
            continue
        if n.op in ("MaxPool", "AveragePool", "GlobalMaxPool", "GlobalAveragePool") and cube_ok and hw.pdp:
            pdp = _lower_pool(g, n)
            if pdp is not None:
                for e in pdp:
                    emit(e)
                if out[-1].op == "dla.conv":
                    fuse(out[-1])
                continue
        if n.op == "LRN" and hw.cdp and int(n.attrs["size"]) in CDP_WINDOWS and cube_ok:
            emit(Node(n.name, "dla.cdp", [n.inputs[0]], list(n.outputs), dict(n.attrs, layers=[n.name])))
            continue
        if n.op == "Concat" and cube_ok and _concat_in_place(g, n, hw.atom_elements(), nodes, placed_in_concat):
            placed_in_concat.update(n.inputs)
            emit(Node(n.name, "view.concat", list(n.inputs), list(n.outputs), {"layers": [n.name]}))
            continue
        if n.op in ("Slice", "Split") and cube_ok and _slice_in_place(g, n, hw.atom_elements()):
            start = int(n.attrs["start"]) if n.op == "Slice" else 0
            sizes = [int(n.attrs["end"]) - start] if n.op == "Slice" else [int(v) for v in n.attrs["split"]]
            for o, size in zip(n.outputs, sizes):
                emit(Node(g.fresh(f"{n.name}_{o}") if n.op == "Split" else n.name, "view.slice", [n.inputs[0]], [o],
                          {"start": start, "count": size, "layers": [n.name]}))
                start += size
            continue
        if n.op in ("Flatten", "Reshape") and _cube_ok(g.shapes[n.outputs[0]]) and _same_cube(g.shapes[n.inputs[0]], g.shapes[n.outputs[0]]):
            emit(Node(n.name, "view.reshape", [n.inputs[0]], list(n.outputs), {"layers": [n.name]}))
            continue
        if cube_ok and n.op in ("Relu", "Clip", "PRelu", "LeakyRelu", "ChannelAffine", "Add", "Max", "Mul",
                                "Sigmoid", "Tanh"):
            main = n.inputs[0]
            p = _as_post(g, n, main)
            if p is not None and not (p["op"] == "eltwise" and g.shapes[n.inputs[0]] != g.shapes[n.inputs[1]]):
                fitted = _fit([], p, hw)
                if fitted is not None:
                    ins = [main] + ([p["tensor"]] if p["op"] == "eltwise" else [])
                    e = emit(Node(n.name, "dla.sdp", ins, list(n.outputs), {"post": [fitted], "layers": [n.name]}))
                    fuse(e)
                    continue
        # Everything else runs on the CPU in float.
        emit(Node(n.name, f"cpu.{n.op}", list(n.inputs), list(n.outputs),
                  dict(n.attrs, layers=[n.name], same_scale=n.op in SAME_SCALE_CPU)))
    g.nodes = out
    g.prune()
    return g


_COMPUTE_OPS = ("Conv", "Gemm", "ConvTranspose", "MaxPool", "AveragePool", "GlobalMaxPool", "GlobalAveragePool",
                "LRN", "Relu", "Clip", "PRelu", "LeakyRelu", "ChannelAffine", "Add", "Max", "Mul", "Sigmoid", "Tanh")


def _concat_in_place(g: Graph, n: Node, atom: int, nodes: list[Node], taken: set[str]) -> bool:
    """Channel concat without a copy: every input starts on an atom boundary of the output, is written by
    a compute op (so its producer can write straight into the concat buffer) and is in no other concat."""
    if int(n.attrs.get("axis", 1)) % 4 != 1 or len(g.shapes[n.outputs[0]]) != 4:
        return False
    if len(set(n.inputs)) != len(n.inputs):
        return False
    offset = 0
    for t in n.inputs:
        prod = g.producer(t)
        if offset % atom or prod is None or prod.op not in _COMPUTE_OPS or t in taken or t in g.outputs:
            return False
        if any(c.op == "Concat" and c is not n for c in g.consumers(t)):
            return False
        offset += g.shapes[t][1]
    return True


def _slice_in_place(g: Graph, n: Node, atom: int) -> bool:
    """A channel slice is a view when it starts on an atom boundary and ends on one (or at the end)."""
    shape = g.shapes[n.inputs[0]]
    if int(n.attrs.get("axis", 1)) % len(shape) != 1 or len(shape) != 4:
        return False
    start = int(n.attrs["start"]) if n.op == "Slice" else 0
    sizes = [int(n.attrs["end"]) - start] if n.op == "Slice" else [int(v) for v in n.attrs["split"]]
    for o, size in zip(n.outputs, sizes):
        if start % atom or (size % atom and start + size != shape[1]) or o in g.outputs:
            return False
        start += size
    return True


def _same_cube(a, b) -> bool:
    """(1, C, 1, 1) and (1, C) are the same C x 1 x 1 cube in memory."""
    def fold(s):
        s = tuple(s)
        return (s[1], 1, 1) if len(s) == 2 else tuple(s[1:])
    return _cube_ok(a) and _cube_ok(b) and fold(a) == fold(b)


def _block_diagonal(w: np.ndarray, group: int, c_in: int) -> np.ndarray:
    """Grouped kernel (K, C/g, R, S) -> dense (K, C, R, S) with zeros outside each group's block."""
    k, cg, r, s = w.shape
    if group == 1:
        return w
    dense = np.zeros((k, c_in, r, s), dtype=np.float64)
    kg = k // group
    for i in range(group):
        dense[i * kg:(i + 1) * kg, i * cg:(i + 1) * cg] = w[i * kg:(i + 1) * kg]
    return dense


def _lower_conv(g: Graph, n: Node, ctx: CompileContext) -> list[Node]:
    x = n.inputs[0]
    w = g.consts[n.inputs[1]].astype(np.float64)
    bias = g.consts[n.inputs[2]].astype(np.float64).ravel() if len(n.inputs) > 2 and n.inputs[2] else None
    layers = [n.name]
    pre: list[Node] = []
    if n.op == "Gemm":
        src = g.producer(x)
        if src is not None and src.op == "Flatten" and len(g.shapes[src.inputs[0]]) == 4 \
                and g.shapes[src.inputs[0]][0] == 1:
            x = src.inputs[0]  # FC over the whole cube: kernel = H x W
            _, c, h, wd = g.shapes[x]
            w = w.reshape(w.shape[0], c, h, wd)
        else:
            w = w.reshape(w.shape[0], w.shape[1], 1, 1)
        attrs = {"stride": (1, 1), "dilation": (1, 1), "pads": (0, 0, 0, 0)}
    elif n.op == "Conv":
        c_in = g.shapes[x][1]
        w = _block_diagonal(w, int(n.attrs.get("group", 1)), c_in)
        attrs = {"stride": tuple(n.attrs["strides"]), "dilation": tuple(n.attrs["dilations"]),
                 "pads": tuple(n.attrs["pads"])}
    else:  # ConvTranspose: zero-insert on the CPU, then a stride-1 conv with the flipped kernel
        (sy, sx), (pt, pl, pb, pr), (dy, dx) = n.attrs["strides"], n.attrs["pads"], n.attrs["dilations"]
        oph, opw = n.attrs.get("output_padding", (0, 0))
        group = int(n.attrs.get("group", 1))
        c_in, kg, r, s = w.shape
        cg = c_in // group
        conv_w = np.zeros((kg * group, c_in, r, s))
        for i in range(group):
            blk = w[i * cg:(i + 1) * cg]  # (cg, kg, r, s)
            conv_w[i * kg:(i + 1) * kg, i * cg:(i + 1) * cg] = blk.transpose(1, 0, 2, 3)[:, :, ::-1, ::-1]
        pads = (dy * (r - 1) - pt, dx * (s - 1) - pl, dy * (r - 1) - pb + oph, dx * (s - 1) - pr + opw)
        if min(pads) < 0:
            raise g.error(n, "padding larger than the dilated kernel extent is not supported")
        z = g.fresh(f"{n.name}_zero_inserted")
        _, c, h, wd = g.shapes[x]
        g.shapes[z] = (1, c, (h - 1) * sy + 1 + pads[0] + pads[2], (wd - 1) * sx + 1 + pads[1] + pads[3])
        pre.append(Node(g.fresh(f"{n.name}_zero_insert"), "cpu.ZeroInsert", [x], [z],
                        {"strides": (sy, sx), "pads": pads, "layers": [n.name], "same_scale": True}))
        x, w = z, conv_w
        attrs = {"stride": (1, 1), "dilation": (dy, dx), "pads": (0, 0, 0, 0)}
    k = w.shape[0]
    post = [{"op": "affine", "scale": np.ones(k), "bias": bias if bias is not None else np.zeros(k), "_slot": 0}]
    conv = Node(n.name, "dla.conv", [x], list(n.outputs), dict(attrs, weight=w, post=post, layers=layers))
    return pre + [conv]


def _lower_pool(g: Graph, n: Node) -> list[Node] | None:
    x = n.inputs[0]
    _, c, h, w = g.shapes[x]
    if n.op == "GlobalAveragePool":
        # A conv whose kernel covers the map with 1/(H*W) on the channel diagonal: exact int32 sums and a
        # saturating SDP requantization at full int8 precision (PDP would keep the input's scale or wrap).
        # split_conv runs it one channel atom at a time, so the kernel stays small.
        w_avg = np.zeros((c, c, h, w))
        w_avg[np.arange(c), np.arange(c)] = 1.0 / (h * w)
        post = [{"op": "affine", "scale": np.ones(c), "bias": np.zeros(c), "_slot": 0}]
        return [Node(n.name, "dla.conv", [x], list(n.outputs),
                     {"stride": (1, 1), "dilation": (1, 1), "pads": (0, 0, 0, 0), "weight": w_avg, "post": post,
                      "layers": [n.name]})]
    if n.op.startswith("Global"):
        method = "max" if n.op == "GlobalMaxPool" else "avg"
        if h <= MAX_KERNEL and w <= MAX_KERNEL:
            return [Node(n.name, "dla.pdp", [x], list(n.outputs),
                         {"method": method, "kernel": (h, w), "stride": (h, w), "pads": (0, 0, 0, 0), "layers": [n.name]})]
        # Two PDP passes: k1 x k1 pooling with stride k1, then the rest (exact for max, two roundings for avg).
        k1h = next((d for d in range(2, MAX_KERNEL + 1) if h % d == 0 and h // d <= MAX_KERNEL), None)
        k1w = next((d for d in range(2, MAX_KERNEL + 1) if w % d == 0 and w // d <= MAX_KERNEL), None)
        if k1h is None or k1w is None:
            return None
        mid = g.fresh(f"{n.name}_partial")
        g.shapes[mid] = (1, c, h // k1h, w // k1w)
        return [Node(g.fresh(f"{n.name}_1"), "dla.pdp", [x], [mid],
                     {"method": method, "kernel": (k1h, k1w), "stride": (k1h, k1w), "pads": (0, 0, 0, 0),
                      "layers": [n.name], "amax_like": x}),
                Node(n.name, "dla.pdp", [mid], list(n.outputs),
                     {"method": method, "kernel": (h // k1h, w // k1w), "stride": (h // k1h, w // k1w),
                      "pads": (0, 0, 0, 0), "layers": [n.name]})]
    kh, kw = n.attrs["kernel"]
    sy, sx = n.attrs["strides"]
    pads = tuple(n.attrs["pads"])
    if max(kh, kw) > MAX_KERNEL or max(sy, sx) > MAX_PDP_STRIDE or max(pads) > MAX_PDP_PAD:
        return None
    if pads[0] >= kh or pads[2] >= kh or pads[1] >= kw or pads[3] >= kw:
        return None
    method = "max" if n.op == "MaxPool" else "avg"
    if method == "avg" and any(pads) and not n.attrs.get("count_include_pad", False):
        return None  # PDP divides by the whole kernel
    return [Node(n.name, "dla.pdp", [x], list(n.outputs),
                 {"method": method, "kernel": (kh, kw), "stride": (sy, sx), "pads": pads, "layers": [n.name]})]
