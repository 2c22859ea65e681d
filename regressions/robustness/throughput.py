"""Examples per second per format: the figure that says how many mutated files a run can afford, printed at
the end of the session (``conftest.pytest_terminal_summary``) and kept in this process for it. ``parse`` is
the time inside the reader (writing the file included); ``wall`` adds hypothesis' generation and shrinking,
so examples/s is what a run really gets."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Rate:
    examples: int = 0
    #: Mutated inputs refused with one of our errors (the rest were accepted as valid).
    refused: int = 0
    parse: float = 0.0
    wall: float = 0.0

    @property
    def per_second(self) -> float:
        seconds = self.wall or self.parse
        return self.examples / seconds if seconds > 0 else 0.0


RATES: dict[str, Rate] = {}


def record(fmt: str, seconds: float, refused: bool) -> None:
    """One example parsed in ``seconds``."""
    rate = RATES.setdefault(fmt, Rate())
    rate.examples += 1
    rate.parse += seconds
    rate.refused += refused


def record_wall(fmt: str, seconds: float) -> None:
    """Wall time of a whole hypothesis run of ``fmt``."""
    RATES.setdefault(fmt, Rate()).wall += seconds


def dump() -> dict[str, list[float]]:
    """The rates as plain data, for an xdist worker to hand to the controller (``workeroutput``)."""
    return {name: [r.examples, r.refused, r.parse, r.wall] for name, r in RATES.items()}


def merge(data: dict[str, list[float]] | None) -> None:
    """Add a worker's ``dump`` to this process's rates."""
    for name, (examples, refused, parse, wall) in (data or {}).items():
        rate = RATES.setdefault(name, Rate())
        rate.examples += int(examples)
        rate.refused += int(refused)
        rate.parse += parse
        rate.wall += wall


def summary() -> list[str]:
    """One line per format and a total, for the terminal summary."""
    if not RATES:
        return []
    lines = [f"{'format':<12} {'examples':>9} {'refused':>8} {'parse s':>8} {'wall s':>8} {'examples/s':>11}"]
    total = Rate()
    for name, r in RATES.items():
        lines.append(f"{name:<12} {r.examples:>9} {r.refused:>8} {r.parse:>8.1f} {r.wall:>8.1f} {r.per_second:>11.1f}")
        total.examples, total.refused = total.examples + r.examples, total.refused + r.refused
        total.parse, total.wall = total.parse + r.parse, total.wall + r.wall
    lines.append(f"{'total':<12} {total.examples:>9} {total.refused:>8} {total.parse:>8.1f} {total.wall:>8.1f} "
                 f"{total.per_second:>11.1f}")
    return lines
