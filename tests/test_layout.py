"""Where tests live (README, "Where tests live"): unit tests of a package under ``tests/<package>/``, suites
(regression tests, differential and fuzz properties, conformance) only under ``regressions/<area>/``.
A test file anywhere else is one a reader (and ``make test``'s reviewer) would not look for."""
from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
#: The product's packages and our RTL: their tests are unit tests, under tests/<package>/.
PACKAGES = ("golden", "compiler", "runtime", "tb", "app", "loadable", "floatops", "dlaio", "rtl")
#: The suite areas of regressions/: the only places outside tests/ that hold test files.
SUITE_AREAS = ("conformance", "e2e", "fuzz", "golden", "limits", "nvdla", "robustness", "rtl")
#: The verification library: what suites and tests import, never a test itself.
LIBRARY = REPO / "regressions" / "lib"


def _test_files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("test_*.py") if ".venv" not in p.parts)


def test_no_test_files_inside_the_packages() -> None:
    misplaced = [p.relative_to(REPO) for pkg in PACKAGES if (REPO / pkg).is_dir() for p in _test_files(REPO / pkg)]
    assert not misplaced, f"unit tests belong under tests/<package>/: {misplaced}"


def test_regressions_hold_test_files_only_in_suite_areas() -> None:
    """The runner (regressions/regress), coverage collection and the verification library are tested by
    unit tests under tests/regressions/, not beside their code."""
    misplaced = [p.relative_to(REPO) for p in _test_files(REPO / "regressions")
                 if p.relative_to(REPO / "regressions").parts[0] not in SUITE_AREAS]
    assert not misplaced, f"unit tests of regressions/ belong under tests/regressions/: {misplaced}"


def test_the_verification_library_holds_no_tests() -> None:
    """regressions/lib is imported by suites and unit tests alike; its own unit tests live under
    tests/regressions/lib/, and a suite that checks golden against it lives in a suite area."""
    assert LIBRARY.is_dir()
    misplaced = [p.relative_to(REPO) for p in _test_files(LIBRARY)]
    assert not misplaced, f"regressions/lib holds library code only: {misplaced}"


def test_tests_mirror_the_tree() -> None:
    """Every folder of tests/ is named after the top-level package (or rtl/) whose unit tests it holds."""
    strays = [d.name for d in (REPO / "tests").iterdir()
              if d.is_dir() and d.name != "__pycache__" and not (REPO / d.name).is_dir()]
    assert not strays, f"tests/ folders without a package of that name: {strays}"
