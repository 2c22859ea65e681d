"""Lowering rules: one per canonical op family, each turning a node into engine ops (``dla.*``, ``view.*``)
when the hardware can run it, or declining so the pass runs it on the CPU. ``compiler.ops`` binds each rule
to its op names; ``passes.lower`` walks the graph and dispatches through that table. The engine ops and the
SDP fusion rules are described in ``passes.lower``.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Callable

import numpy as np

from compiler.ir import Graph, Node
from compiler.passes import CompileContext
from compiler.postops import Affine, Eltwise, Identity, Lut, PostOp, PRelu, Relu
from floatops.kernels import average_divisor_pads
from golden.engines.pdp import MAX_KERNEL

#: SDP datapath stages a post-op can occupy (``PostOp.slot``).
SLOTS = {"affine": 0, "relu1": 1, "eltwise": 2, "act2": 3, "lut": 4}
CDP_WINDOWS = (3, 5, 7, 9)
#: CPU ops that only move int8 values: their inputs and outputs share one scale, so they are exact.
SAME_SCALE_CPU = ("Concat", "Slice", "Split", "Flatten", "Reshape", "Transpose", "MaxPool", "GlobalMaxPool",
                  "Identity")
MAX_PDP_STRIDE = 16
MAX_PDP_PAD = 7


# ---- post-op chains ---------------------------------------------------------------------------------------
def _slot_state(post: list[PostOp]) -> int:
    return max((p.slot for p in post), default=-1)


def _as_post(g: Graph, n: Node, main: str) -> PostOp | None:
    """The post-op form of a canonical node applied to tensor ``main``, or None if SDP cannot do it."""
    c = _channels(g.shapes[main])
    if n.op == "Relu":
        return Relu()
    if n.op == "Clip" and n.attrs.get("min") is not None and n.attrs["min"] == 0:
        cap = n.attrs.get("max")
        return Relu(cap=float(cap) if cap is not None else None)
    if n.op == "Clip" and n.attrs.get("min") is None and n.attrs.get("max") is None:
        return Identity()
    if n.op == "PRelu":
        slope = g.consts[n.inputs[1]].astype(np.float64).ravel()
        return PRelu(np.full(c, slope[0]) if slope.size == 1 else slope)
    if n.op == "LeakyRelu":
        return PRelu(np.full(c, float(n.attrs.get("alpha", 0.01))))
    if n.op == "ChannelAffine":
        s = g.consts[n.inputs[1]].astype(np.float64).ravel()
        b = g.consts[n.inputs[2]].astype(np.float64).ravel()
        return Affine(np.full(c, s[0]) if s.size == 1 else s, np.full(c, b[0]) if b.size == 1 else b)
    if n.op in ("Add", "Max", "Mul"):
        other = n.inputs[1] if n.inputs[0] == main else n.inputs[0]
        return Eltwise(n.op.lower(), other)
    if n.op in ("Sigmoid", "Tanh"):
        return Lut(n.op.lower())
    return None


def _fit(post: list[PostOp], p: PostOp, hw, precision: str = "int8") -> PostOp | None:
    """``p`` with its datapath slot if it can follow ``post`` in one SDP operation, else None. Sigmoid and
    tanh take Y's LUT in every precision (``compiler.lut``: int8/int16 tables over the int32 input, fp16 ones
    over the float input) where the config has it."""
    state = _slot_state(post)
    kinds = {type(q): q for q in post}
    match p:
        case Identity():
            return replace(p, slot=max(state, 0))
        case Affine():
            return replace(p, slot=0) if state <= 0 else None  # at 0: composes with the previous affine
        case Relu():
            if state < 1:
                return replace(p, slot=1)
            if state == 1 or (state == 3 and Relu in kinds and kinds[Relu].slot == 3):
                return replace(p, slot=state)  # relu after relu is a no-op
            return replace(p, slot=3) if state == 2 else None
        case PRelu():
            elt = kinds.get(Eltwise)
            if elt is not None and (elt.kind == "mul" or np.ptp(p.slope) != 0):
                return None  # X2 MUL is taken, or its per-channel operand would clash with the per-element one
            return replace(p, slot=3) if state < 3 else None
        case Eltwise():
            return replace(p, slot=2) if state < 2 else None
        case Lut():
            return replace(p, slot=4) if state < 4 and hw.sdp_lut and hw.sdp_ew else None
    return None


def _channels(shape) -> int:
    return int(shape[1]) if len(shape) >= 2 else int(shape[0])


def _cube_ok(shape) -> bool:
    return (len(shape) == 4 or len(shape) == 2) and shape[0] == 1


# ---- one run of the pass ----------------------------------------------------------------------------------
@dataclass
class Lowering:
    """The state one lowering run shares between rules: the engine ops emitted so far and the canonical
    nodes fusion has absorbed into them."""

    g: Graph
    ctx: CompileContext
    nodes: list[Node]
    out: list[Node] = field(default_factory=list)
    absorbed: set[str] = field(default_factory=set)
    families: dict[str, tuple[str, int]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.families = concat_families(self.g, self.ctx.atom)

    def emit(self, node: Node) -> Node:
        self.out.append(node)
        return node

    def cube_ok(self, n: Node) -> bool:
        """Every activation input and output is a batch-1 cube (NCHW or NC) the engines can address."""
        g = self.g
        return all(_cube_ok(g.shapes[t]) for t in n.inputs if t and t not in g.consts) \
            and all(_cube_ok(g.shapes[o]) for o in n.outputs)

    def single_use(self, t: str) -> Node | None:
        cons = self.g.consumers(t)
        if len(cons) == 1 and t not in self.g.outputs and cons[0].name not in self.absorbed:
            return cons[0]
        return None

    def fuse(self, e: Node) -> None:
        """Absorb following ops into engine node ``e`` while the SDP datapath has room."""
        g = self.g
        while True:
            t = e.outputs[0]
            nxt = self.single_use(t)
            if nxt is None:
                return
            p = _as_post(g, nxt, t)
            if p is None or (isinstance(p, Eltwise) and (g.shapes[nxt.inputs[0]] != g.shapes[nxt.inputs[1]]
                                                         or p.tensor == t)):
                return
            if t in self.ctx.fixed_scales and not self._exact_through(t, nxt, p):
                return  # a pre-quantized model rounds and saturates ``t`` to int8 here: so does the DLA
            precision = self.ctx.precision_of(e.attrs["layers"][0])
            if self.ctx.overrides.get(nxt.name, precision) != precision:
                return  # --precision-overrides: a layer asking for another type is its own operation
            fitted = _fit(e.attrs["post"], p, self.ctx.hw, precision)
            if fitted is None:
                return
            if precision == "fp16" and any(isinstance(q, Relu) and q.cap is not None
                                                    for q in e.attrs["post"]):
                return  # fp16 caps on Y, after the whole chain: nothing may follow a capped ReLU
            if isinstance(p, Eltwise):
                e.inputs.append(p.tensor)
            e.attrs["post"].append(fitted)
            e.attrs["layers"].append(nxt.name)
            e.outputs = list(nxt.outputs)
            self.absorbed.add(nxt.name)

    def _exact_through(self, t: str, nxt: Node, p) -> bool:
        """Whether fusing ``nxt`` past ``t``, which a pre-quantized model quantizes, computes what the model
        does: only a ReLU to a tensor of the same scale (max(q, 0) of the int8 values: no rounding between)."""
        out = nxt.outputs[0]
        amax = self.ctx.amax
        return isinstance(p, Relu) and out in amax and t in amax and amax[out] == amax[t]

    def fuse_last_conv(self) -> None:
        if self.out[-1].op == "dla.conv":
            self.fuse(self.out[-1])

    def on_cpu(self, n: Node) -> None:
        """Everything no rule lowers runs on the CPU in float."""
        self.emit(Node(n.name, f"cpu.{n.op}", list(n.inputs), list(n.outputs),
                       dict(n.attrs, layers=[n.name], same_scale=n.op in SAME_SCALE_CPU)))


#: A lowering rule: emit the engine ops for ``n`` and return True, or return False to leave it to the CPU.
LowerRule = Callable[[Lowering, Node], bool]


# ---- the rules --------------------------------------------------------------------------------------------
def lower_conv(lw: Lowering, n: Node) -> bool:
    """Conv, Gemm, ConvTranspose: a CONV pipeline op with its SDP chain (see ``_lower_conv``)."""
    if not lw.cube_ok(n):
        return False
    for e in _lower_conv(lw.g, n, lw.ctx):
        lw.emit(e)
    lw.fuse_last_conv()
    return True


def lower_pool(lw: Lowering, n: Node) -> bool:
    """Max/average pooling on PDP (global average as a conv), within PDP's kernel, stride and pad limits."""
    if not (lw.cube_ok(n) and lw.ctx.hw.pdp):
        return False
    pdp = _lower_pool(lw.g, n)
    if pdp is None:
        return False
    for e in pdp:
        lw.emit(e)
    lw.fuse_last_conv()
    return True


def lower_lrn(lw: Lowering, n: Node) -> bool:
    """LRN on CDP, for the window sizes CDP has, in int8 and fp16 (``compiler.lut``: int8 tables over the
    square sums of the calibrated scales, fp16 ones over the network's own values; int16 LRN stays on the
    CPU)."""
    if not (lw.ctx.hw.cdp and lw.ctx.precision_of(n.name) in ("int8", "fp16") and int(n.attrs["size"]) in CDP_WINDOWS
            and lw.cube_ok(n)):
        return False
    lw.emit(Node(n.name, "dla.cdp", [n.inputs[0]], list(n.outputs), dict(n.attrs, layers=[n.name])))
    return True


def lower_concat(lw: Lowering, n: Node) -> bool:
    """A channel concat whose inputs can be written in place (``concat_families``): a view, no copy. A concat
    inside a bigger one of its family records where (``within``: the bigger one's output, channel offset)."""
    if not (lw.cube_ok(n) and n.name in lw.families):
        return False
    root, offset = lw.families[n.name]
    attrs: dict = {"layers": [n.name]}
    if root != n.outputs[0]:
        attrs["within"] = (root, offset)
    lw.emit(Node(n.name, "view.concat", list(n.inputs), list(n.outputs), attrs))
    return True


def lower_slice(lw: Lowering, n: Node) -> bool:
    """Slice, Split on atom boundaries of the channel axis: one view per output."""
    g = lw.g
    if not (lw.cube_ok(n) and _slice_in_place(g, n, lw.ctx.atom)):
        return False
    start = int(n.attrs["start"]) if n.op == "Slice" else 0
    sizes = [int(n.attrs["end"]) - start] if n.op == "Slice" else [int(v) for v in n.attrs["split"]]
    for o, size in zip(n.outputs, sizes):
        lw.emit(Node(g.fresh(f"{n.name}_{o}") if n.op == "Split" else n.name, "view.slice", [n.inputs[0]], [o],
                     {"start": start, "count": size, "layers": [n.name]}))
        start += size
    return True


def lower_reshape(lw: Lowering, n: Node) -> bool:
    """Flatten, Reshape between the same C x H x W cube: a view."""
    g = lw.g
    if not (_cube_ok(g.shapes[n.outputs[0]]) and _same_cube(g.shapes[n.inputs[0]], g.shapes[n.outputs[0]])):
        return False
    lw.emit(Node(n.name, "view.reshape", [n.inputs[0]], list(n.outputs), {"layers": [n.name]}))
    return True


def lower_sdp(lw: Lowering, n: Node) -> bool:
    """Activations, ChannelAffine and eltwise ops not fused into a conv: a standalone ``dla.sdp`` from memory,
    which then fuses what follows."""
    if not lw.cube_ok(n):
        return False
    g = lw.g
    main = n.inputs[0]
    p = _as_post(g, n, main)
    if p is None or (isinstance(p, Eltwise) and g.shapes[n.inputs[0]] != g.shapes[n.inputs[1]]):
        return False
    fitted = _fit([], p, lw.ctx.hw, lw.ctx.precision_of(n.name))
    if fitted is None:
        return False
    ins = [main] + ([p.tensor] if isinstance(p, Eltwise) else [])
    lw.fuse(lw.emit(Node(n.name, "dla.sdp", ins, list(n.outputs), {"post": [fitted], "layers": [n.name]})))
    return True


_COMPUTE_OPS = ("Conv", "Gemm", "ConvTranspose", "MaxPool", "AveragePool", "GlobalMaxPool", "GlobalAveragePool",
                "LRN", "Relu", "Clip", "PRelu", "LeakyRelu", "ChannelAffine", "Add", "Max", "Mul", "Sigmoid", "Tanh")


def _within(small: Node, big: Node) -> int | None:
    """Index in ``big.inputs`` where ``small.inputs`` occur as a contiguous run, or None."""
    first = small.inputs[0]
    for i, t in enumerate(big.inputs):
        if t == first and big.inputs[i:i + len(small.inputs)] == small.inputs:
            return i
    return None


def concat_families(g: Graph, atom: int) -> dict[str, tuple[str, int]]:
    """Channel concats that can be views, grouped into families sharing one buffer: concat node name ->
    (output tensor of the family's biggest concat, channel offset in it).

    A family is a biggest concat R and every concat whose inputs are a contiguous run of R's (DenseNet: layer
    l reads Concat(f0..f(l-1)), the block ends with Concat(f0..fL)). Each input is then written once, by its
    producer, at its channel offset in R's buffer, and every smaller concat is a channel range of it. The
    family is in place only if every input starts on a memory atom of R, is written by a compute op (so the
    producer can write there), appears once, is no graph output and is in no concat outside the family."""
    cats = [n for n in g.nodes if n.op == "Concat" and int(n.attrs.get("axis", 1)) % 4 == 1
            and len(g.shapes[n.outputs[0]]) == 4 and len(set(n.inputs)) == len(n.inputs)]
    roots = []
    for b in cats:
        bigger = [c for c in cats if c is not b and _within(b, c) is not None
                  and (len(c.inputs) > len(b.inputs) or cats.index(c) < cats.index(b))]
        if not bigger:
            roots.append(b)
    families: dict[str, tuple[str, int]] = {}
    for r in roots:
        offsets, off = {}, 0
        for t in r.inputs:
            offsets[t] = off
            off += g.shapes[t][1]
        members = [a for a in cats if _within(a, r) is not None]
        ok = all(offsets[t] % atom == 0 and t not in g.outputs
                 and (p := g.producer(t)) is not None and p.op in _COMPUTE_OPS for t in r.inputs)
        names = {a.name for a in members}
        ok = ok and all(c.name in names for t in r.inputs for c in g.consumers(t) if c.op == "Concat")
        if ok and not any(a.name in families for a in members):
            for a in members:
                families[a.name] = (r.outputs[0], offsets[a.inputs[0]])
    return families


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


def block_diagonal(w: np.ndarray, group: int) -> np.ndarray:
    """Grouped kernel (K, C/g, R, S) -> dense (K, C, R, S) with zeros outside each group's block, in ``w``'s
    dtype: what the engines run for a grouped conv (fold_shuffle and pad_channels rewrite convs into it)."""
    k, cg, r, s = w.shape
    if group == 1:
        return w
    dense = np.zeros((k, cg * group, r, s), dtype=w.dtype)
    kg = k // group
    for i in range(group):
        dense[i * kg:(i + 1) * kg, i * cg:(i + 1) * cg] = w[i * kg:(i + 1) * kg]
    return dense


def _lower_conv(g: Graph, n: Node, ctx: CompileContext) -> list[Node]:
    x = n.inputs[0]
    w = g.consts[n.inputs[1]]  # float32, as the graph holds it: quantize widens one block of kernels at a time
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
        w = block_diagonal(w, int(n.attrs.get("group", 1)))
        attrs = {"stride": tuple(n.attrs["strides"]), "dilation": tuple(n.attrs["dilations"]),
                 "pads": tuple(n.attrs["pads"])}
    else:  # ConvTranspose: zero-insert on the CPU, then a stride-1 conv with the flipped kernel
        (sy, sx), (pt, pl, pb, pr), (dy, dx) = n.attrs["strides"], n.attrs["pads"], n.attrs["dilations"]
        oph, opw = n.attrs.get("output_padding", (0, 0))
        group = int(n.attrs.get("group", 1))
        c_in, kg, r, s = w.shape
        cg = c_in // group
        conv_w = np.zeros((kg * group, c_in, r, s), dtype=w.dtype)
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
    post = [Affine(np.ones(k), bias if bias is not None else np.zeros(k), slot=0)]
    if "weight_scale" in n.attrs and n.op != "ConvTranspose" and np.size(n.attrs["weight_scale"]) == k:
        attrs["weight_scale"] = np.asarray(n.attrs["weight_scale"], dtype=np.float64)
    conv = Node(n.name, "dla.conv", [x], list(n.outputs), dict(attrs, weight=w, post=post, layers=layers))
    return pre + [conv]


def _pool_passes(size: int, pad_ok: bool) -> list[tuple[int, int]] | None:
    """(kernel, bottom/right pad) of each PDP pass averaging or maxing ``size`` values down to one: one pass
    up to PDP's kernel limit, else a k1-window pass with stride k1 and then the rest. A size with no divisor in
    range (13) pads the first pass up to a multiple (``pad_ok``: averages count the zero padding, and the
    last pass's reciprocal undoes the larger divisor)."""
    if size <= MAX_KERNEL:
        return [(size, 0)]
    best = None
    for k1 in range(MAX_KERNEL, 1, -1):  # ties: the larger first window (a smaller partial map)
        n2 = -(-size // k1)
        pad = n2 * k1 - size
        if n2 > MAX_KERNEL or pad > min(MAX_PDP_PAD, k1 - 1) or (pad and not pad_ok):
            continue
        if best is None or pad < best[0][1]:
            best = [(k1, pad), (n2, 0)]
    return best


def _global_pool(g: Graph, n: Node, c: int, h: int, w: int) -> list[Node] | None:
    """Global max/average pooling within PDP's window: one pass (``passes.split_pools`` has already turned a
    bigger one into window pools)."""
    if h > MAX_KERNEL or w > MAX_KERNEL:
        return None
    method = "max" if n.op == "GlobalMaxPool" else "avg"
    return [Node(n.name, "dla.pdp", [n.inputs[0]], list(n.outputs),
                 {"method": method, "kernel": (h, w), "stride": (h, w), "pads": (0, 0, 0, 0), "layers": [n.name]})]


@dataclass(frozen=True)
class PoolRegion:
    """One PDP pass of an average whose divisor varies at the edges: output rows/cols [o0, o1) computed from
    input rows/cols [i0, i1) with their own kernel, stride and zero padding (t, l, b, r)."""

    out_rows: tuple[int, int]
    out_cols: tuple[int, int]
    in_rows: tuple[int, int]
    in_cols: tuple[int, int]
    kernel: tuple[int, int]
    stride: tuple[int, int]
    pads: tuple[int, int, int, int]


def _axis_segments(size: int, k: int, s: int, p0: int, d0: int, d1: int, out: int
                   ) -> list[tuple[int, int, int, int, int, int, int, int]] | None:
    """(o0, o1, i0, i1, kernel, stride, pad0, pad1) runs along one axis: the outputs whose divisor counts the
    whole kernel form one strided run; every edge output is a run of one whose kernel is its divisor's window
    (the window clipped to the input and its counted padding), so PDP's kernel-area reciprocal is the
    divisor."""
    runs = []
    full = [o for o in range(out) if o * s - p0 >= -d0 and o * s - p0 + k <= size + d1]
    for o in range(out):
        if full and o == full[0]:
            a, b = full[0] * s - p0, full[-1] * s - p0 + k
            runs.append((full[0], full[-1] + 1, max(a, 0), min(b, size), k, s, max(0, -a), max(0, b - size)))
        elif not full or not full[0] <= o <= full[-1]:
            a = max(o * s - p0, -d0)
            b = min(o * s - p0 + k, size + d1)
            if min(b, size) <= max(a, 0):
                return None  # a window of padding only
            runs.append((o, o + 1, max(a, 0), min(b, size), b - a, 1, max(0, -a), max(0, b - size)))
    return runs


def avg_pool_regions(h: int, w: int, out_hw: tuple[int, int], kernel: tuple[int, int], stride: tuple[int, int],
                     pads: tuple[int, int, int, int], counted: tuple[int, int, int, int]
                     ) -> list[PoolRegion] | None:
    """The PDP passes of an average whose divisor is not the whole kernel everywhere (count_include_pad=False
    with padding, Caffe's ceil-mode overhang): PDP always divides by its kernel's area, so each edge
    row/column of outputs runs as its own pass with the kernel its divisor counts, writing into the output in
    place. None if some window holds padding only."""
    rows = _axis_segments(h, kernel[0], stride[0], pads[0], counted[0], counted[2], out_hw[0])
    cols = _axis_segments(w, kernel[1], stride[1], pads[1], counted[1], counted[3], out_hw[1])
    if rows is None or cols is None:
        return None
    return [PoolRegion((r[0], r[1]), (c[0], c[1]), (r[2], r[3]), (c[2], c[3]), (r[4], c[4]), (r[5], c[5]),
                       (r[6], c[6], r[7], c[7])) for r in rows for c in cols]


def _lower_pool(g: Graph, n: Node) -> list[Node] | None:
    x = n.inputs[0]
    _, c, h, w = g.shapes[x]
    if n.op.startswith("Global"):
        return _global_pool(g, n, c, h, w)
    kh, kw = n.attrs["kernel"]
    sy, sx = n.attrs["strides"]
    pads = tuple(int(p) for p in n.attrs["pads"])
    if max(kh, kw) > MAX_KERNEL or max(sy, sx) > MAX_PDP_STRIDE or max(pads) > MAX_PDP_PAD:
        return None
    if pads[0] >= kh or pads[2] >= kh or pads[1] >= kw or pads[3] >= kw:
        return None
    method = "max" if n.op == "MaxPool" else "avg"
    attrs = {"method": method, "kernel": (kh, kw), "stride": (sy, sx), "pads": pads, "layers": [n.name]}
    if "gain" in n.attrs:
        attrs["gain"] = float(n.attrs["gain"])
    counted = average_divisor_pads(n.attrs)
    if method == "avg" and counted != pads:
        regions = avg_pool_regions(h, w, tuple(g.shapes[n.outputs[0]][2:]), (kh, kw), (sy, sx), pads, counted)
        if regions is None:
            return None
        attrs["regions"], attrs["divisor_pads"] = regions, counted
    return [Node(n.name, "dla.pdp", [x], list(n.outputs), attrs)]
