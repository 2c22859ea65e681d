"""The attack families of the hostile sweep, one module each; ``all_attacks`` lists them in sweep order."""
from __future__ import annotations

from regressions.robustness.attack import Attack


def all_attacks() -> list[Attack]:
    from regressions.robustness.attacks import arguments, bombs, loadables, models, outputs, polls, signals, traces

    found = [a for family in (outputs, bombs, traces, models, loadables, arguments, polls, signals)
             for a in family.attacks()]
    names = [a.name for a in found]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise ValueError(f"attack names must be unique: {', '.join(duplicates)}")
    return found
