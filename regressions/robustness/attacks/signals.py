"""Signals: a worker of `dla trace -j 2` killed, the parent terminated, interrupted or killed, and Ctrl-C
or SIGTERM during compile and run. The promise: 130 (SIGINT) / 143 (SIGTERM) as the shell sees them, the traces that finished
reported (--json written), a killed worker an ERROR naming the signal, no traceback, no partial file,
and no process left behind (workers die with their parent)."""
from __future__ import annotations

import signal
from pathlib import Path

import numpy as np

from regressions.robustness.attack import Attack, Scenario, Signal
from regressions.robustness.attacks.common import compile_cmd
from regressions.robustness.attacks.models import _conv_chain
from regressions.robustness.material import NVDLA_TRACES, Material

FAMILY = "signals"
#: Enough of NVDLA's traces that two workers are busy for several seconds (convolutions are the slow ones).
SLOW_TRACES = 12


def _traces(workdir: Path) -> str:
    """``suite/nv_small/<trace>`` symlinks to NVDLA's trace folders (read in place)."""
    suite = workdir / "suite" / "nv_small"
    suite.mkdir(parents=True)
    names = sorted(p.name for p in (NVDLA_TRACES / "nv_small").iterdir() if p.name.startswith("dc_"))
    for name in names[:SLOW_TRACES]:
        (suite / name).symlink_to(NVDLA_TRACES / "nv_small" / name)
    return "suite"


def _trace(name: str, sig: Signal, exits: frozenset[int], jobs: int = 2, report: bool = True,
           fail_names: tuple[str, ...] = ()) -> Attack:
    def setup(workdir: Path, material: Material) -> Scenario:
        argv = ["trace", _traces(workdir), "-j", str(jobs), "--json", "r.json"]
        return Scenario(argv, fail_names=fail_names, reports=(Path("r.json"),) if report else (), signal=sig)
    return Attack(f"dla trace -j {jobs}: {name}", FAMILY, setup, exits, line_optional=True)


def _compile(name: str, sig: Signal, exits: frozenset[int]) -> Attack:
    chain = _conv_chain(1000)

    def setup(workdir: Path, material: Material) -> Scenario:
        scenario = chain.setup(workdir, material)
        return Scenario(scenario.argv, signal=sig)
    return Attack(f"dla compile (1000-conv chain): {name}", FAMILY, setup, exits, line_optional=True)


def _run(name: str, sig: Signal, exits: frozenset[int]) -> Attack:
    def setup(workdir: Path, material: Material) -> Scenario:
        material.copy("poolnet.dla", workdir)
        x = np.random.default_rng(3).normal(0, 1, (2000, 16, 16, 16)).astype(np.float32)
        np.save(workdir / "batch.npy", x)
        return Scenario(["run", "poolnet.dla", "--input", "batch.npy", "--output", "y.npy"], signal=sig)
    return Attack(f"dla run (2000 samples): {name}", FAMILY, setup, exits, line_optional=True)


def attacks() -> list[Attack]:
    first = "PASS"  # the first trace reported: workers are busy with the next ones
    term, intr, kill = signal.SIGTERM, signal.SIGINT, signal.SIGKILL
    return [
        _trace("SIGKILL one worker", Signal(kill, "worker", first), frozenset({1}), fail_names=("SIGKILL",)),
        _trace("SIGTERM one worker", Signal(term, "worker", first), frozenset({1}), fail_names=("SIGTERM",)),
        _trace("SIGTERM the parent", Signal(term, "parent", first), frozenset({143})),
        _trace("SIGINT the parent", Signal(intr, "parent", first), frozenset({130})),
        _trace("SIGKILL the parent (workers must die too)", Signal(kill, "parent", first), frozenset({137}),
               report=False),
        _trace("SIGTERM the parent", Signal(term, "parent", first), frozenset({143}), jobs=1),
        _trace("SIGINT the parent", Signal(intr, "parent", first), frozenset({130}), jobs=1),
        _trace("SIGTERM the parent before any trace finished", Signal(term, "parent", None, delay=1.5),
               frozenset({143})),
        _compile("SIGINT", Signal(intr, "parent", None, delay=3.0), frozenset({130})),
        _compile("SIGTERM", Signal(term, "parent", None, delay=3.0), frozenset({143})),
        _run("SIGINT", Signal(intr, "parent", None, delay=3.0), frozenset({130})),
        _run("SIGTERM", Signal(term, "parent", None, delay=3.0), frozenset({143})),
    ]
