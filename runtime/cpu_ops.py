"""CPU tasks of a loadable: the float operations the DLA has no engine for (Softmax, Concat, ...).

The kernels themselves are the compiler's float reference (``floatops.kernels.KERNELS``), so a CPU
task computes exactly what the compiler's float model of the network computes; this module only turns the
proto's attributes into Python values and moves tensors in and out. A registry can be injected (tests,
or a runtime with its own kernels).
"""
from __future__ import annotations

from typing import Any, Callable, Mapping, Sequence

import numpy as np

from floatops.kernels import KERNELS
from loadable import loadable_pb2 as pb
from runtime.errors import ExecutionError

#: A CPU kernel: (inputs in the model's shapes, attrs) -> outputs in the model's shapes.
Kernel = Callable[[list[np.ndarray], dict], list[np.ndarray]]


def attr_value(attr: pb.Attr) -> Any:
    """One ``Attr``: i -> int, f -> float, s -> str, ints -> tuple of int, floats -> tuple of float."""
    which = attr.WhichOneof("value")
    if which == "i":
        return int(attr.i)
    if which == "f":
        return float(attr.f)
    if which == "s":
        return str(attr.s)
    if which == "ints":
        return tuple(int(v) for v in attr.ints.v)
    if which == "floats":
        return tuple(float(v) for v in attr.floats.v)
    return None


def attrs_to_dict(attrs: Mapping[str, pb.Attr]) -> dict[str, Any]:
    return {k: attr_value(v) for k, v in sorted(attrs.items())}


def default_kernels() -> Mapping[str, Kernel]:
    """The float kernels the compiler calibrated with (tests inject others through ``kernels=``)."""
    return KERNELS


def run_cpu_task(task: pb.Task, inputs: Sequence[np.ndarray], kernels: Mapping[str, Kernel] | None = None
                 ) -> list[np.ndarray]:
    """Run one CPU task on float inputs; returns float32 outputs, one per ``task.cpu.outputs``."""
    cpu = task.cpu
    registry = kernels if kernels is not None else default_kernels()
    kernel = registry.get(cpu.op)
    if kernel is None:
        raise ExecutionError(f"task {task.id} ({task.name!r}): no CPU kernel for op {cpu.op!r} "
                             f"(known: {', '.join(sorted(registry))})")
    try:
        outs = kernel([np.asarray(x, dtype=np.float32) for x in inputs], attrs_to_dict(cpu.attrs))
    except ExecutionError:
        raise
    except Exception as exc:  # a kernel rejecting its inputs is the loadable's problem, reported in one line
        raise ExecutionError(f"task {task.id} ({task.name!r}): CPU op {cpu.op} failed: "
                             f"{type(exc).__name__}: {exc}") from exc
    outs = list(outs)
    if len(outs) != len(cpu.outputs):
        raise ExecutionError(f"task {task.id} ({task.name!r}): CPU op {cpu.op} returned {len(outs)} outputs, "
                             f"the loadable names {len(cpu.outputs)}")
    return [np.asarray(o, dtype=np.float32) for o in outs]
