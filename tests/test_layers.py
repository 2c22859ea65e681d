"""The import direction of ../shared/docs/ARCHITECTURE.md holds: layers only point down and no module takes
part in an import cycle.

The rules are import-linter contracts in pyproject.toml (``[tool.importlinter]``), the same ones
``make lint`` runs; a second test shows the checker fails, naming the import, when a rule is broken.
"""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import grimp

ROOT = Path(__file__).resolve().parents[1]
#: The product's packages, top layer first (pyproject.toml's layers contract).
PACKAGES = ("app", "tb", "compiler", "runtime", "loadable", "floatops", "golden", "dlaio")


def lint_imports(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    exe = shutil.which("lint-imports", path=str(Path(sys.executable).parent)) or "lint-imports"
    return subprocess.run([exe, "--no-cache", "--no-logo", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=600)


def test_layer_contracts_are_kept() -> None:
    run = lint_imports(ROOT)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "0 broken" in run.stdout


def _package(root: Path, name: str, modules: dict[str, str]) -> None:
    (root / name).mkdir()
    (root / name / "__init__.py").write_text("")
    for module, text in modules.items():
        (root / name / f"{module}.py").write_text(text)


def test_a_lower_layer_importing_a_higher_one_breaks_the_contract(tmp_path: Path) -> None:
    """A runtime-like package reaching up into an application-like one from inside a function (where the
    runtime's CLI once imported the compiler): the layers contract must report that very import."""
    _package(tmp_path, "high", {"cli": "import low.executor\n"})
    _package(tmp_path, "low", {"executor": "def run():\n    from high.cli import main\n    return main\n"})
    (tmp_path / "pyproject.toml").write_text(
        '[tool.importlinter]\nroot_packages = ["high", "low"]\n\n'
        '[[tool.importlinter.contracts]]\nname = "layers"\ntype = "layers"\nlayers = ["high", "low"]\n'
    )
    run = lint_imports(tmp_path)
    assert run.returncode == 1, run.stdout + run.stderr
    assert "1 broken" in run.stdout and "low.executor -> high.cli" in run.stdout, run.stdout


def import_cycles(packages: tuple[str, ...] = PACKAGES) -> list[list[str]]:
    """Strongly connected groups of more than one module in the import graph of ``packages``, counting
    every import statement (inside functions and ``TYPE_CHECKING`` blocks too): Tarjan's algorithm."""
    graph = grimp.build_graph(*packages, cache_dir=None)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[list[str]] = []
    for start in sorted(graph.modules):
        if start in index:
            continue
        work = [(start, iter(sorted(graph.find_modules_directly_imported_by(start))))]
        index[start] = low[start] = len(index)
        stack.append(start)
        while work:
            module, targets = work[-1]
            target = next(targets, None)
            if target is not None:
                if target not in index:
                    index[target] = low[target] = len(index)
                    stack.append(target)
                    work.append((target, iter(sorted(graph.find_modules_directly_imported_by(target)))))
                elif target in stack:
                    low[module] = min(low[module], index[target])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[module])
            if low[module] == index[module]:
                group = []
                while True:
                    member = stack.pop()
                    group.append(member)
                    if member == module:
                        break
                if len(group) > 1:
                    cycles.append(sorted(group))
    return cycles


def test_no_import_cycles() -> None:
    assert import_cycles() == []


def test_the_cycle_finder_finds_a_cycle_through_a_function_level_import(tmp_path: Path, monkeypatch) -> None:
    _package(tmp_path, "ring", {"a": "import ring.b\n", "b": "def f():\n    import ring.a\n"})
    monkeypatch.syspath_prepend(str(tmp_path))
    assert import_cycles(("ring",)) == [["ring.a", "ring.b"]]
