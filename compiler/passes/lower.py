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

Each canonical op's lowering rule lives in ``compiler.lowering`` and is found through the op table
(``compiler.ops.OPS``); an op without a rule, or whose rule declines, runs on the CPU.
"""
from __future__ import annotations

from compiler.ir import Graph
from compiler.lowering import Lowering
from compiler.ops import OPS
from compiler.passes import CompileContext


def lower(g: Graph, ctx: CompileContext) -> Graph:
    g.toposort()
    lw = Lowering(g, ctx, list(g.nodes))
    for n in lw.nodes:
        if n.name in lw.absorbed:
            continue
        rule = OPS[n.op].lower if n.op in OPS else None
        if rule is None or not rule(lw, n):
            lw.on_cpu(n)
    g.nodes = lw.out
    g.prune()
    return g
