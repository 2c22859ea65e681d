"""Float execution of a canonical IR graph on ``floatops.kernels``: the float reference the int8 compiler is
measured against (float64) and calibrates from (float32, streamed through ``observe``)."""
from __future__ import annotations

from typing import Callable, Mapping

import numpy as np

from compiler.errors import CompileError
from compiler.ir import Graph
from floatops.kernels import KERNELS

#: Called with (tensor name, value) for every graph input and node output as soon as it is computed.
Observer = Callable[[str, np.ndarray], None]


def last_uses(graph: Graph) -> dict[str, int]:
    """Index of the last node reading each tensor (graph outputs: past the end), so a run can drop a tensor as
    soon as nothing needs it and hold only the live activations, not every one."""
    last = {t: len(graph.nodes) for t in graph.outputs}
    for i, node in enumerate(graph.nodes):
        for t in node.inputs:
            if t and last.get(t, -1) < i:
                last[t] = max(last.get(t, -1), i)
    return last


def run_float(graph: Graph, feeds: Mapping[str, np.ndarray], *, keep: bool = False, dtype=np.float64,
              observe: Observer | None = None) -> dict[str, np.ndarray]:
    """Run ``graph`` on ``feeds`` (graph input name -> array, any batch size) in ``dtype``.

    Returns the graph outputs, or with ``keep`` every input and node output. Without ``keep`` a tensor is
    freed after its last reader, and ``observe`` sees each value once (calibration streams through it: float32
    halves the memory and more than doubles BLAS speed, and the ranges it records need no more precision).
    Nodes must be in topological order, as frontends and passes leave them.
    """
    missing = [t for t in graph.inputs if t not in feeds]
    if missing:
        raise CompileError(graph.source, f"no value fed for graph input {missing[0]!r}")
    env: dict[str, np.ndarray] = {k: np.asarray(v, dtype=dtype) for k, v in graph.consts.items()}
    env.update({t: np.asarray(feeds[t], dtype=dtype) for t in graph.inputs})
    if observe is not None:
        for t in graph.inputs:
            observe(t, env[t])
    last = {} if keep else last_uses(graph)
    for i, node in enumerate(graph.nodes):
        fn = KERNELS.get(node.op)
        if fn is None:
            raise graph.error(node, f"no float kernel for op {node.op}")
        try:
            args = [env[t] for t in node.inputs if t]
        except KeyError as e:
            raise graph.error(node, f"input {e.args[0]!r} is not computed before this node") from None
        outs = fn(args, node.attrs)
        for name, value in zip(node.outputs, outs):
            value = np.asarray(value)
            if value.dtype != dtype:
                value = value.astype(dtype)
            env[name] = value
            if observe is not None:
                observe(name, value)
        if not keep:
            for t in node.inputs:
                if t and last.get(t) == i and t not in graph.consts:
                    env.pop(t, None)  # a node may read a tensor twice (Add(x, x))
            for t in node.outputs:
                if t not in last:  # read by nobody
                    env.pop(t, None)
    if keep:
        return {k: v for k, v in env.items() if k not in graph.consts}
    return {t: env[t] for t in graph.outputs}
