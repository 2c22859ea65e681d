"""Python mutants of the golden model, made by cosmic-ray's operators (``cosmic_ray.plugins``).

A mutant is one operator applied at one of its occurrences in one file: arithmetic and bitwise operators
swapped (``+``/``-``, ``<<``/``>>``, ``&``/``|``, ``*``/``//``), comparisons loosened or tightened (``<``/``<=``,
``==``/``!=``), numbers moved by one (rounding and shift amounts, range bounds: ``NumberReplacer``), signs and
``not`` dropped or added, booleans flipped, loops run zero times. Mutants inside ``raise`` and ``assert``
statements (messages, the checks that refuse bad programs: another campaign's job), in docstrings and in type
annotations (never evaluated) are not made. Each gets a stable id ``path:line:col:operator:occurrence`` so results files stay valid as long as the
file is unchanged (the file's hash is recorded with each result).
"""
from __future__ import annotations

import ast
import hashlib
import random
from dataclasses import dataclass
from pathlib import Path

#: cosmic-ray operators a golden campaign applies (each name expands to its occurrences in a file).
OPERATORS = (
    "core/ReplaceBinaryOperator_Add_Sub", "core/ReplaceBinaryOperator_Sub_Add",
    "core/ReplaceBinaryOperator_Mul_FloorDiv", "core/ReplaceBinaryOperator_FloorDiv_Mul",
    "core/ReplaceBinaryOperator_Mul_Add", "core/ReplaceBinaryOperator_Div_Mul",
    "core/ReplaceBinaryOperator_LShift_RShift", "core/ReplaceBinaryOperator_RShift_LShift",
    "core/ReplaceBinaryOperator_BitAnd_BitOr", "core/ReplaceBinaryOperator_BitOr_BitAnd",
    "core/ReplaceBinaryOperator_BitXor_BitOr", "core/ReplaceBinaryOperator_Mod_FloorDiv",
    "core/ReplaceComparisonOperator_Lt_LtE", "core/ReplaceComparisonOperator_LtE_Lt",
    "core/ReplaceComparisonOperator_Gt_GtE", "core/ReplaceComparisonOperator_GtE_Gt",
    "core/ReplaceComparisonOperator_Eq_NotEq", "core/ReplaceComparisonOperator_NotEq_Eq",
    "core/NumberReplacer", "core/ReplaceUnaryOperator_USub_UAdd", "core/ReplaceUnaryOperator_Invert_UAdd",
    "core/ReplaceUnaryOperator_Delete_Not",
    "core/ReplaceTrueWithFalse", "core/ReplaceFalseWithTrue", "core/ReplaceAndWithOr", "core/ReplaceOrWithAnd",
    "core/ZeroIterationForLoop",
)


@dataclass(frozen=True)
class Mutant:
    path: str  # relative to the repository root
    operator: str
    occurrence: int
    line: int
    col: int
    unit: str  # what the file models (the engine's module name)

    @property
    def id(self) -> str:
        return f"{self.path}:{self.line}:{self.col}:{self.operator.removeprefix('core/')}:{self.occurrence}"


def _annotations(tree: ast.AST) -> list[tuple[tuple[int, int], tuple[int, int]]]:
    """(start, end) positions of type annotations (never evaluated: the modules use postponed annotations)."""
    spans = []
    for node in ast.walk(tree):
        notes = []
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            a = node.args
            notes = [x.annotation for x in (*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg)
                     if x is not None] + [node.returns]
        elif isinstance(node, ast.AnnAssign):
            notes = [node.annotation]
        spans += [((n.lineno, n.col_offset), (n.end_lineno, n.end_col_offset)) for n in notes if n is not None]
    return spans


def _skipped_lines(source: str) -> set[int]:
    """Lines of ``raise``/``assert`` statements and of docstrings."""
    skip: set[int] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.Raise, ast.Assert)):
            skip.update(range(node.lineno, (node.end_lineno or node.lineno) + 1))
        elif isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                    and isinstance(body[0].value.value, str):
                skip.update(range(body[0].lineno, (body[0].end_lineno or body[0].lineno) + 1))
    return skip


#: The golden model's datapath: every engine, and the arithmetic, float, LUT, layout, CBUF, DMA, CRC, interrupt,
#: memory and top-level sequencing they share (not presets, memory budgets, error types or register tables).
GOLDEN_UNITS = ("golden/engines/*.py", "golden/arith.py", "golden/fp.py", "golden/lut.py", "golden/layout.py",
                "golden/cbuf.py", "golden/dma.py", "golden/crc.py", "golden/intr.py", "golden/memory.py",
                "golden/dla.py", "golden/program.py")


def golden_files(root: Path, unit: str | None = None) -> list[str]:
    """The golden campaign's files (relative paths), or one unit's (its module name, e.g. ``sdp``)."""
    files = sorted({str(p.relative_to(root)) for pattern in GOLDEN_UNITS for p in root.glob(pattern)
                    if p.name != "__init__.py"})
    if unit is not None:
        files = [f for f in files if Path(f).stem == unit]
        if not files:
            raise ValueError(f"no golden unit {unit!r}")
    return files


def file_hash(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()[:16]


#: Files mutated by ``regressions.mutate.verilog`` instead of cosmic-ray.
VERILOG_SUFFIXES = (".v", ".sv")


def enumerate_mutants(root: Path, paths: list[str], operators: tuple[str, ...] = OPERATORS) -> list[Mutant]:
    """Every mutant of ``paths`` (relative to ``root``) by ``operators``, in file order (Verilog files: every
    mutant of ``regressions.mutate.verilog``)."""
    if paths and all(p.endswith(VERILOG_SUFFIXES) for p in paths):
        from regressions.mutate import verilog

        return verilog.enumerate_mutants(root, paths)
    import cosmic_ray.plugins
    from cosmic_ray.ast import ast_nodes, get_ast_from_path

    out: list[Mutant] = []
    for rel in paths:
        path = root / rel
        source = path.read_text()
        skip, notes = _skipped_lines(source), _annotations(ast.parse(source))
        module = get_ast_from_path(path)
        nodes = list(ast_nodes(module))
        for name in operators:
            operator = cosmic_ray.plugins.get_operator(name)()
            positions = [start for node in nodes for start, _ in operator.mutation_positions(node)]
            for occurrence, (line, col) in enumerate(positions):
                if line not in skip and not any(a <= (line, col) < b for a, b in notes):
                    out.append(Mutant(rel, name, occurrence, line, col, Path(rel).stem))
    return out


def mutated_source(root: Path, m: Mutant) -> str | None:
    """The file's text with the mutant applied, or None if the operator no longer applies there."""
    if m.path.endswith(VERILOG_SUFFIXES):
        from regressions.mutate import verilog

        return verilog.mutated_source(root, m)
    import cosmic_ray.plugins
    from cosmic_ray.mutating import mutate_code

    code = (root / m.path).read_text()
    return mutate_code(code, cosmic_ray.plugins.get_operator(m.operator)(), m.occurrence)


def sample(mutants: list[Mutant], n: int | None, seed: int) -> list[Mutant]:
    """``n`` mutants drawn evenly across units (round robin over shuffled per-unit lists); all when ``n`` is None
    or larger than the population. Deterministic for a seed."""
    if n is None or n >= len(mutants):
        return list(mutants)
    rng = random.Random(seed)
    by_unit: dict[str, list[Mutant]] = {}
    for m in mutants:
        by_unit.setdefault(m.unit, []).append(m)
    for pool in by_unit.values():
        rng.shuffle(pool)
    picked: list[Mutant] = []
    while len(picked) < n:
        for unit in sorted(by_unit):
            if by_unit[unit] and len(picked) < n:
                picked.append(by_unit[unit].pop())
    return picked
