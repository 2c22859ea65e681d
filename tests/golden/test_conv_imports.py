"""The conv variants import their shared datapath downward only: no cycle, no import hidden in a function.

``conv`` dispatches to ``cdma_image``, ``conv_batch``, ``conv_fp16`` and ``conv_winograd``; they and
``conv_wcomp`` take the shared CDMA/CSC/CMAC/CACC steps from ``conv_datapath``, which imports none of them.
A function-level import is how a cycle hides from import time, so those are refused as well.
"""
from __future__ import annotations

import ast
from pathlib import Path

import golden.engines

ENGINES_DIR = Path(golden.engines.__file__).parent
PACKAGE = "golden.engines"
CONV_MODULES = sorted(p.stem for p in ENGINES_DIR.glob("conv*.py")) + ["cdma_image"]


def _imports(tree: ast.AST) -> list[tuple[str, ast.stmt]]:
    """Engine modules named by every import statement of ``tree`` (nested ones included)."""
    found: list[tuple[str, ast.stmt]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(alias.name, node) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.append((node.module, node))
            if node.module == PACKAGE:  # ``from golden.engines import conv_batch`` names a module
                found += [(f"{PACKAGE}.{alias.name}", node) for alias in node.names]
    return [(name[len(PACKAGE) + 1:], node) for name, node in found if name.startswith(PACKAGE + ".")]


def _graph() -> dict[str, set[str]]:
    graph = {}
    for mod in CONV_MODULES:
        tree = ast.parse((ENGINES_DIR / f"{mod}.py").read_text())
        graph[mod] = {name.split(".")[0] for name, _ in _imports(tree)} & set(CONV_MODULES)
    return graph


def _reaches(graph: dict[str, set[str]], start: str, goal: str) -> bool:
    seen, todo = set(), list(graph[start])
    while todo:
        mod = todo.pop()
        if mod == goal:
            return True
        if mod not in seen:
            seen.add(mod)
            todo += graph.get(mod, ())
    return False


def test_conv_modules_have_no_cycle():
    graph = _graph()
    assert {"conv", "conv_datapath", "cdma_image", "conv_batch", "conv_fp16"} <= set(graph)
    cycles = [mod for mod in graph if _reaches(graph, mod, mod)]
    assert not cycles, f"import cycle through {cycles}: {graph}"


def test_shared_datapath_imports_no_engine_module():
    """Not even the package: ``golden.cbuf`` imports the datapath, and ``golden.engines`` refers to ``golden.cbuf``."""
    tree = ast.parse((ENGINES_DIR / "conv_datapath.py").read_text())
    modules = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    modules |= {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    assert not {m for m in modules if m == PACKAGE or m.startswith(PACKAGE + ".")}


def test_no_function_level_imports():
    for mod in CONV_MODULES:
        tree = ast.parse((ENGINES_DIR / f"{mod}.py").read_text())
        top = set(map(id, tree.body))
        nested = [f"{mod}.py:{node.lineno}" for _, node in _imports(tree) if id(node) not in top]
        assert not nested, f"engine imports inside functions: {nested}"
