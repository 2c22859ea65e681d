"""Saved fuzz failures (``regressions/found``) still pass: every bug the fuzzers found stays fixed.
The store itself (saving, round trips, replay as ``@example``s) is unit-tested in
``tests/regressions/fuzz/test_found.py``."""
from __future__ import annotations

from golden import get_config
from regressions.fuzz import found
from regressions.fuzz.properties import load

PROPS = load()


def test_every_saved_failure_passes_now() -> None:
    """The repository's found/ holds failures whose bugs are fixed (README): each must pass."""
    failing = []
    for saved in found.load(PROPS):
        try:
            PROPS[saved.property].check(get_config(saved.config), saved.example)
        except Exception as exc:
            failing.append(f"{saved.path}: {found.first_line(exc)}")
    assert not failing, "\n".join(failing)
    assert (found.FOUND_DIR / "README.md").is_file()
