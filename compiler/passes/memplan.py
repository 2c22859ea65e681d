"""Memory planning: where every activation lives, with liveness-based reuse of scratch memory.

Views make tensors share a buffer (a concat's inputs are written straight into it; a concat inside a bigger
one of its family is a channel range of the bigger one's buffer; a slice reads inside its source). Each remaining buffer is placed in the INPUT, OUTPUT or SCRATCH region; scratch buffers
whose lifetimes (first write .. last read, in execution order) do not overlap share addresses (greedy
best-fit by size). The plan reports the scratch peak against the sum of all scratch buffers.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from compiler.ir import Graph
from compiler.passes import CompileContext

ALIGN = 256
REGION_WEIGHTS, REGION_INPUT, REGION_OUTPUT, REGION_SCRATCH = 0, 1, 2, 3


def align(v: int, a: int = ALIGN) -> int:
    return -(-v // a) * a


@dataclass
class Placement:
    """A feature tensor in memory: region, byte offset, cube and strides."""

    region: int
    offset: int
    channels: int
    height: int
    width: int
    line_stride: int
    surface_stride: int


@dataclass
class MemoryPlan:
    placements: dict[str, Placement] = field(default_factory=dict)
    host: set[str] = field(default_factory=set)  # tensors that live on the CPU side only (float)
    region_sizes: dict[int, int] = field(default_factory=dict)
    peak: int = 0
    unshared: int = 0


def fold_cube(shape) -> tuple[int, int, int]:
    """The model shape as a (C, H, W) cube: (1, C, H, W) -> C, H, W; (1, K) -> K, 1, 1."""
    shape = tuple(int(v) for v in shape)
    if len(shape) == 4:
        return shape[1], shape[2], shape[3]
    if len(shape) == 2:
        return shape[1], 1, 1
    if len(shape) == 3:
        return shape
    raise ValueError(f"shape {list(shape)} is not a feature cube")


def memplan(g: Graph, ctx: CompileContext) -> Graph:
    atom, bpe = ctx.atom, ctx.bpe
    plan = MemoryPlan()
    index = {n.name: i for i, n in enumerate(g.nodes)}
    producer = {o: n for n in g.nodes for o in n.outputs}
    consumers: dict[str, list] = {}
    for n in g.nodes:
        for t in n.inputs:
            consumers.setdefault(t, []).append(n)

    # HOST tensors: made by a CPU op and read by no DLA op (nor view).
    for n in g.nodes:
        if n.op.startswith("cpu."):
            for o in n.outputs:
                if all(c.op.startswith("cpu.") for c in consumers.get(o, [])):
                    plan.host.add(o)

    # Views: child -> (parent, byte offset).
    parent: dict[str, tuple[str, int]] = {}
    for n in g.nodes:
        if n.op == "view.concat" and "within" in n.attrs:  # a channel range of its family's biggest concat
            big, channels = n.attrs["within"]
            _, h, w = fold_cube(g.shapes[big])
            parent[n.outputs[0]] = (big, channels // atom * h * w * atom * bpe)
        elif n.op == "view.concat":
            out = n.outputs[0]
            _, h, w = fold_cube(g.shapes[out])
            surf = h * w * atom * bpe
            off = 0
            for t in n.inputs:
                parent[t] = (out, off // atom * surf)
                off += fold_cube(g.shapes[t])[0]
        elif n.op == "view.slice":
            src = n.inputs[0]
            c, h, w = fold_cube(g.shapes[src])
            parent[n.outputs[0]] = (src, n.attrs["start"] // atom * h * w * atom * bpe)
        elif n.op == "view.reshape":
            parent[n.outputs[0]] = (n.inputs[0], 0)

    def root(t: str) -> tuple[str, int]:
        off = 0
        while t in parent:
            t, d = parent[t]
            off += d
        return t, off

    tensors = [t for t in g.inputs] + [o for n in g.nodes for o in n.outputs]
    tensors = [t for t in dict.fromkeys(tensors) if t not in plan.host]
    members: dict[str, list[str]] = {}
    for t in tensors:
        members.setdefault(root(t)[0], []).append(t)

    end = len(g.nodes)
    buffers = []
    for r, ts in members.items():
        c, h, w = fold_cube(g.shapes[r])
        line, surf = w * atom * bpe, w * atom * h * bpe
        size = -(-c // atom) * surf
        first = min(index[producer[t].name] if t in producer else -1 for t in ts)
        last = max([index[c.name] for t in ts for c in consumers.get(t, [])] + [first]
                   + [end if t in g.outputs else -1 for t in ts])
        if r in g.inputs:
            region = REGION_INPUT
        elif any(t in g.outputs for t in ts):
            region = REGION_OUTPUT
        else:
            region = REGION_SCRATCH
        buffers.append((r, region, size, first, last, (c, h, w, line, surf)))

    offsets: dict[str, int] = {}
    sizes = {REGION_INPUT: 0, REGION_OUTPUT: 0}
    for r, region, size, _, _, _ in buffers:
        if region != REGION_SCRATCH:
            offsets[r] = sizes[region]
            sizes[region] += align(size)
    # Scratch: greedy best fit, biggest buffers first, against every already-placed overlapping buffer.
    placed: list[tuple[int, int, int, int]] = []  # (offset, size, first, last)
    scratch = [b for b in buffers if b[1] == REGION_SCRATCH]
    for r, _, size, first, last, _ in sorted(scratch, key=lambda b: (-b[2], b[3])):
        size = align(size)
        busy = sorted((o, o + s) for o, s, f, l in placed if not (l < first or f > last))
        best, cursor = None, 0
        for lo, hi in busy:
            if lo - cursor >= size and (best is None or lo - cursor < best[1]):
                best = (cursor, lo - cursor)
            cursor = max(cursor, hi)
        off = best[0] if best is not None else cursor
        offsets[r] = off
        placed.append((off, size, first, last))
    plan.peak = max((o + s for o, s, _, _ in placed), default=0)
    plan.unshared = sum(align(b[2]) for b in scratch)
    sizes[REGION_SCRATCH] = plan.peak

    region_of = {b[0]: b[1] for b in buffers}
    geom = {b[0]: b[5] for b in buffers}
    for t in tensors:
        r, off = root(t)
        c, h, w = fold_cube(g.shapes[t])
        _, _, _, line, surf = geom[r]
        plan.placements[t] = Placement(region_of[r], offsets[r] + off, c, h, w, line, surf)
    plan.region_sizes = {k: max(v, ALIGN) for k, v in sizes.items()}
    ctx.plan = plan  # type: ignore[attr-defined]
    ctx.log(f"memory plan: scratch peak {plan.peak} B with reuse, {plan.unshared} B without")
    return g
