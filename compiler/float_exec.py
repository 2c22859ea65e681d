"""Float64 execution of a canonical IR graph on ``floatops.kernels``: the float reference the int8 compiler
is measured against and calibrates from."""
from __future__ import annotations

from typing import Mapping

import numpy as np

from compiler.errors import CompileError
from compiler.ir import Graph
from floatops.kernels import KERNELS


def run_float(graph: Graph, feeds: Mapping[str, np.ndarray], *, keep: bool = False) -> dict[str, np.ndarray]:
    """Run ``graph`` in float64 on ``feeds`` (graph input name -> array, any batch size).

    Returns the graph outputs, or with ``keep`` every input and node output (the compiler calibrates its int8
    scales from these). Nodes must be in topological order, as frontends and passes leave them.
    """
    missing = [t for t in graph.inputs if t not in feeds]
    if missing:
        raise CompileError(graph.source, f"no value fed for graph input {missing[0]!r}")
    env: dict[str, np.ndarray] = {k: np.asarray(v, dtype=np.float64) for k, v in graph.consts.items()}
    env.update({t: np.asarray(feeds[t], dtype=np.float64) for t in graph.inputs})
    for node in graph.nodes:
        fn = KERNELS.get(node.op)
        if fn is None:
            raise graph.error(node, f"no float kernel for op {node.op}")
        try:
            args = [env[t] for t in node.inputs if t]
        except KeyError as e:
            raise graph.error(node, f"input {e.args[0]!r} is not computed before this node") from None
        outs = fn(args, node.attrs)
        for name, value in zip(node.outputs, outs):
            env[name] = value
    if keep:
        return {k: v for k, v in env.items() if k not in graph.consts}
    return {t: env[t] for t in graph.outputs}
