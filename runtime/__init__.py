"""Runtime: the trace format and player, the loadable executor, the Target protocol and targets."""
from __future__ import annotations

__all__ = ["load"]


def __getattr__(name: str):  # lazy: the executor pulls in protobuf and the golden model
    if name == "load":
        from runtime.executor import load

        return load
    raise AttributeError(name)
