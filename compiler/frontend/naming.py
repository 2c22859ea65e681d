"""Fresh names for one model conversion (shared by the frontends that build names as they go)."""
from __future__ import annotations

from compiler.ir import Graph


class FreshNames:
    """``base``, else ``base_2``, ``base_3``...: a name neither handed out before nor already a tensor of
    ``graph`` (a model's own names come first, generated ones step aside)."""

    def __init__(self, graph: Graph) -> None:
        self.graph = graph
        self.used: set[str] = set()

    def __call__(self, base: str) -> str:
        name, i = base, 1
        while name in self.used or name in self.graph.shapes:
            i += 1
            name = f"{base}_{i}"
        self.used.add(name)
        return name
