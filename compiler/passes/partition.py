"""DLA/CPU partitioning: order the engine ops so DLA operations run in maximal uninterrupted groups, and
give each op its task: consecutive DLA ops form one DLA task (one submission to the hardware), each CPU op
is a task of its own. Views do no work and belong to no task."""
from __future__ import annotations

from compiler.ir import Graph, Node
from compiler.passes import CompileContext


def is_dla(n: Node) -> bool:
    return n.op.startswith("dla.")


def is_view(n: Node) -> bool:
    return n.op.startswith("view.")


def partition(g: Graph, ctx: CompileContext) -> Graph:
    ready = set(g.inputs) | set(g.consts)
    pending = list(g.nodes)
    order: list[Node] = []
    while pending:
        runnable = [n for n in pending if all(t in ready for t in n.inputs if t)]
        if not runnable:
            raise g.error(pending[0], "graph has a cycle")
        # Views first (free), then DLA work, then one CPU op at a time.
        pick = next((n for n in runnable if is_view(n)), None) or next((n for n in runnable if is_dla(n)), None) \
            or runnable[0]
        order.append(pick)
        pending.remove(pick)
        ready.update(pick.outputs)
    g.nodes = order
    task = -1
    prev_dla = False
    for n in order:
        if is_view(n):
            n.attrs["task"] = None
            continue
        if is_dla(n):
            if not prev_dla:
                task += 1
            prev_dla = True
        else:
            task += 1
            prev_dla = False
        n.attrs["task"] = task
    return g
