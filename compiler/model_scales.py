"""A pre-quantized model's activation scales (``Graph.quant_scales``) carried to the IR tensors that hold the
same grid: the frontends record the scales the model names, but the model also computes in float between a
dequantize and the next quantize (onnxruntime's QOperator graphs apply ReLU and global pooling to dequantized
values), and frontends add views (a flatten after a mean). A ReLU, a max pool or a view of values on a grid
stays on it, so its output takes its input's scale; a view's input takes its output's. A tensor left without a
scale is calibrated, which would round where the model does not."""
from __future__ import annotations

from compiler.ir import Graph

#: Ops whose output values lie on their input's grid (so need no requantization).
FORWARD = frozenset({"Relu", "MaxPool", "GlobalMaxPool", "Flatten", "Reshape", "Identity"})
#: Ops that only move values: their input is on their output's grid too.
BACKWARD = frozenset({"Flatten", "Reshape", "Identity"})


def propagate(g: Graph) -> int:
    """Fill ``g.quant_scales`` through ``FORWARD``/``BACKWARD`` ops until nothing changes; returns how many
    tensors gained a scale."""
    scales = g.quant_scales
    if not scales:
        return 0
    added = 0
    changed = True
    while changed:
        changed = False
        for n in g.nodes:
            if not n.inputs or not n.outputs:
                continue
            x, y = n.inputs[0], n.outputs[0]
            if n.op in FORWARD and x in scales and y not in scales:
                scales[y] = scales[x]
                added += 1
                changed = True
            elif n.op in BACKWARD and y in scales and x not in scales and x not in g.consts:
                scales[x] = scales[y]
                added += 1
                changed = True
    return added
