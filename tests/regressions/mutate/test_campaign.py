"""The mutation campaign machinery (``regressions.mutate``) on a small stand-in project: mutants come from
cosmic-ray's operators, only the tests covering a line run against it (from a real coverage run), outcomes
are right, a rerun resumes, and the report scores what it should (triaged equivalents left out)."""
from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

pytest.importorskip("cosmic_ray")
pytest.importorskip("pytest_cov")

from regressions.mutate import report  # noqa: E402
from regressions.mutate.campaign import read_results, run_campaign  # noqa: E402
from regressions.mutate.mutants import enumerate_mutants, sample  # noqa: E402
from regressions.mutate.select import build_map  # noqa: E402

MODEL = '''\
"""A stand-in engine."""


def rha(v: int, s: int) -> int:
    """Round half away... (a docstring: 1 + 1 is never mutated)."""
    if s == 0:
        return v
    return (v + (1 << (s - 1))) >> s


def unused(x: int) -> int:
    return x + 2


def checked(x: int) -> int:
    if x < 0:
        raise ValueError(f"negative: {x + 1}")
    return x


SCALE = 4 // 1
'''

TESTS = '''\
from pkg.model import SCALE, checked, rha


def test_scale():
    assert SCALE == 4


def test_rha_rounds_halves_up():
    assert rha(5, 1) == 3 and rha(4, 1) == 2 and rha(7, 0) == 7 and rha(6, 2) == 2


def test_checked_passes_positive():
    assert checked(3) == 3
'''


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "__init__.py").write_text("")
    (root / "pkg" / "model.py").write_text(MODEL)
    (root / "tests").mkdir()
    (root / "tests" / "test_model.py").write_text(TESTS)
    (root / "conftest.py").write_text("")
    return root


#: A few operators that reach the stand-in's three interesting lines (a subprocess per mutant costs ~1 s).
FEW = ("core/ReplaceBinaryOperator_Add_Sub", "core/ReplaceBinaryOperator_LShift_RShift",
       "core/ReplaceComparisonOperator_Lt_LtE")


def test_mutants_skip_docstrings_raises_and_annotations(project: Path) -> None:
    lines = {m.line for m in enumerate_mutants(project, ["pkg/model.py"])}
    assert {6, 8, 12, 16} <= lines
    assert not lines & {1, 4, 5, 11, 15, 17}  # docstrings, annotated defs, the raise (its f-string's 1)


def test_campaign_kills_what_the_tests_see_and_resumes(project: Path, tmp_path: Path) -> None:
    mutants = [m for m in enumerate_mutants(project, ["pkg/model.py"], FEW) if m.line in (8, 12, 16)]
    cmap = build_map(project, ["pkg/model.py"], ("tests",), tmp_path / "map", jobs=1, say=lambda m: None)
    assert cmap.tests_for("pkg/model.py", 8) == ["tests/test_model.py::test_rha_rounds_halves_up"]
    assert cmap.tests_for("pkg/model.py", 12) == []
    out = tmp_path / "campaign"
    results = run_campaign(project, mutants, cmap, out, jobs=2, say=lambda m: None)
    by_line: dict[int, set[str]] = {}
    for m in mutants:
        by_line.setdefault(m.line, set()).add(results[m.id].outcome)
    assert by_line[8] == {"killed"}  # every change to the rounding is seen
    assert by_line[12] == {"no_coverage"}  # no test runs unused()
    assert "survived" in by_line[16]  # x < 0 -> x <= 0: checked(0) is never tried
    assert (project / "pkg" / "model.py").read_text() == MODEL  # the project itself is never mutated
    again = run_campaign(project, mutants, cmap, out, jobs=2, say=lambda m: None)
    assert again == results and len(read_results(out / "results.jsonl")) == len(mutants)


def test_a_mutant_that_breaks_the_import_is_an_error_kill(project: Path, tmp_path: Path) -> None:
    """``4 // 1`` -> ``4 // 0`` fails at import: pytest finds no collectors (exit 4) for the node ids, which the
    unmutated copy collects, so the mutant is caught ("error"), not a tool failure."""
    from regressions.mutate.mutants import mutated_source

    (m,) = [m for m in enumerate_mutants(project, ["pkg/model.py"], ("core/NumberReplacer",))
            if m.line == 21 and "4 // 0" in (mutated_source(project, m) or "")]
    cmap = build_map(project, ["pkg/model.py"], ("tests",), tmp_path / "map", jobs=1, say=lambda m: None)
    results = run_campaign(project, [m], cmap, tmp_path / "c", jobs=1, say=lambda m: None)
    assert results[m.id].outcome == "error" and "collection fails" in results[m.id].killer
    # the other changes of that line are caught by test_scale, which only reads the constant (its test file
    # imports the module by name)
    assert "tests/test_model.py::test_scale" in cmap.tests_for("pkg/model.py", 21)


def test_report_scores_without_equivalents(project: Path, tmp_path: Path, monkeypatch) -> None:
    mutants = sample(enumerate_mutants(project, ["pkg/model.py"], FEW), None, 1)
    cmap = build_map(project, ["pkg/model.py"], ("tests",), tmp_path / "map", jobs=1, say=lambda m: None)
    results = run_campaign(project, mutants, cmap, tmp_path / "c", jobs=2, say=lambda m: None)
    survivor = next(r for r in results.values() if r.outcome == "survived")
    (tmp_path / "triage").mkdir()
    (tmp_path / "triage" / "toy.toml").write_text(
        f'[[equivalent]]\nid = "{survivor.id}"\nreason = "pretend it cannot be observed"\n')
    monkeypatch.setattr(report, "TRIAGE", tmp_path / "triage")
    s = report.write_report(project, "toy", mutants, results, tmp_path / "c")
    kills = sum(r.outcome in ("killed", "error", "timeout") for r in results.values())
    misses = sum(r.outcome in ("survived", "no_coverage") for r in results.values()) - 1
    assert (s["killed"], s["survived"], s["equivalent"]) == (kills, misses, 1)
    assert s["score"] == pytest.approx(kills / (kills + misses))
    md = (tmp_path / "c" / "report.md").read_text()
    assert survivor.id not in md and "## Survivors" in md
    assert json.loads((tmp_path / "c" / "report.json").read_text())["units"]["model"]["equivalent"] == 1
    (tmp_path / "triage" / "toy.toml").write_text(f'[[equivalent]]\nid = "{survivor.id}"\n')
    with pytest.raises(ValueError, match="has no reason"):
        report.equivalents("toy")


def test_sample_is_even_across_units_and_deterministic() -> None:
    from regressions.mutate.mutants import Mutant

    ms = [Mutant(f"{u}.py", "op", i, i + 1, 0, u) for u in ("a", "b", "c") for i in range(10 if u == "a" else 2)]
    picked = sample(ms, 6, 3)
    assert picked == sample(ms, 6, 3) and len(picked) == 6
    assert {m.unit for m in picked} == {"a", "b", "c"} and sum(m.unit == "b" for m in picked) == 2
