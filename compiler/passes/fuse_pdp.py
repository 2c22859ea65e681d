"""SDP -> PDP on the fly (``--profile performance|fast-math``): a pooling that alone reads what a convolution's
(or an SDP operation's) SDP writes takes it straight from SDP instead (``D_FEATURE_MODE_CFG.OUTPUT_DST=PDP``,
PDP ``FLYING_MODE=ON_FLYING``), so the cube between them never goes to memory and back.

The pair becomes one node, the producer with ``attrs["flying_pdp"]`` (the pooling's parameters and the
intermediate cube's shape) and the pooling's outputs. What the hardware and golden take bounds the pairs:

* the producer is one hardware operation (a convolution in one piece, not Winograd, whose SDP cannot feed
  PDP; an SDP operation of one channel group), and so is the pooling (no edge regions, one channel group);
* the intermediate has no other reader, is no network output or view member, and both are in one task;
* the pooling's windows read every row SDP sends (PDP on the fly cannot skip rows: unread rows break the
  next PDP operation, ``golden.dla`` refuses them);
* with ``--format nvdla`` the export writes the pair as kmd's fused SDP/PDP descriptors (NVDLA's firmware
  then arms PDP before SDP, as our program does).
"""
from __future__ import annotations

from compiler.codegen.pdp import used_geometry
from compiler.emit import MAX_ENGINE_CHANNELS
from compiler.ir import Graph
from compiler.passes import CompileContext


def fuse_pdp(g: Graph, ctx: CompileContext) -> Graph:
    if not ctx.profile.fuse_pdp:
        return g
    consumers: dict[str, list] = {}
    producer = {o: n for n in g.nodes for o in n.outputs}
    for n in g.nodes:
        for t in n.inputs:
            consumers.setdefault(t, []).append(n)
    fused = 0
    for pool in list(g.nodes):
        if pool.op != "dla.pdp" or pool.attrs.get("pdp_regions") or pool.attrs.get("pdp") is None:
            continue
        t = pool.inputs[0]
        prod = producer.get(t)
        if prod is None or not _fusable(g, prod, pool, t, consumers):
            continue
        prod.attrs["flying_pdp"] = (pool.attrs["pdp"], tuple(g.shapes[t]))
        prod.attrs["layers"] = list(prod.attrs.get("layers", [prod.name])) + list(pool.attrs.get("layers", [pool.name]))
        prod.outputs = list(pool.outputs)
        producer.update({o: prod for o in pool.outputs})
        g.nodes.remove(pool)
        fused += 1
    if fused:
        ctx.log(f"  SDP->PDP on the fly: {fused} pooling(s)")
    return g


def _fusable(g: Graph, prod, pool, t: str, consumers: dict) -> bool:
    if prod.op == "dla.conv":
        if len(prod.attrs.get("pieces", [])) != 1 or prod.attrs["conv"].winograd is not None:
            return False
    elif prod.op != "dla.sdp":
        return False
    if prod.attrs.get("flying_pdp") is not None or prod.attrs.get("task") != pool.attrs.get("task"):
        return False
    if [c.name for c in consumers.get(t, [])] != [pool.name] or t in g.outputs or len(prod.outputs) != 1:
        return False
    shape = g.shapes[t]
    if len(shape) != 4 or shape[1] > MAX_ENGINE_CHANNELS:
        return False
    _, _, h, w = shape
    oh, ow = g.shapes[pool.outputs[0]][2:]
    used_h, _, _ = used_geometry(h, w, oh, ow, pool.attrs["pdp"])
    return used_h == h


__all__ = ["fuse_pdp"]
