"""The README's promise on bad input, measured: each attack of the hostile sweep is one test.

`make test` runs the fast subset (``Attack.quick``: about 30 attacks of a couple of seconds each, one of
every kind of refusal); the regression unit ``robustness.sweep`` at level ci and above sets
``DLA_ROBUSTNESS=full`` and runs all of them. ``python -m regressions.robustness.sweep`` runs the same
attacks outside pytest and writes the figures (seconds, peak RSS) to JSON.
"""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from regressions.robustness.attack import Attack, Run, Scenario, broken_promises
from regressions.robustness.attacks import all_attacks
from regressions.robustness.execute import _compare, execute, fingerprint
from regressions.robustness.material import Material

ATTACKS = all_attacks()
FULL = os.environ.get("DLA_ROBUSTNESS") == "full"
CHOSEN = [a for a in ATTACKS if FULL or a.quick]


def test_the_sweep_covers_every_family_with_150_attacks():
    families = {a.family for a in ATTACKS}
    assert len(ATTACKS) >= 150
    assert families == {"output clobbering", "memory bombs", "malformed traces", "malformed models",
                         "malformed loadables", "bad arguments", "unbounded polls", "signals"}
    assert 20 <= sum(a.quick for a in ATTACKS) <= 40


def _run(**kw) -> Run:
    base = dict(exit=2, seconds=0.1, peak_rss_mb=40.0, stdout="", stderr="dla: m.onnx: not an ONNX model\n")
    return Run(**{**base, **kw})


def test_the_judge_flags_each_broken_promise():
    attack = Attack("a", "f", lambda w, m: Scenario([]))
    scenario = Scenario(["compile", "m.onnx"], names=("m.onnx",))
    assert broken_promises(attack, scenario, _run()) == []
    assert broken_promises(attack, scenario, _run(stderr="Traceback (most recent call last):\n  x\nValueError\n")) \
        == ["traceback", "3 stderr lines", "line does not name m.onnx"]
    assert broken_promises(attack, scenario, _run(exit=1, stderr="dla: internal error KeyError: 'x'\n")) \
        == ["exit 1 (want 2)", "internal error"]
    assert broken_promises(attack, scenario, _run(peak_rss_mb=900.0)) == ["peak RSS 900 MB > 500 MB"]
    assert broken_promises(attack, scenario, _run(exit=-9, stderr="")) == ["exit 137 (killed by signal 9) (want 2)", "no line"]
    assert broken_promises(attack, scenario, _run(stderr="usage: dla\ndla: error: bad\n")) == \
        ["argparse usage block (1 lines) before the error line", "line does not name m.onnx"]


def test_fingerprints_see_a_clobbered_input_a_replaced_device_and_a_temp_leftover(tmp_path):
    (tmp_path / "model.onnx").write_bytes(b"model")
    os.mkfifo(tmp_path / "pipe")
    (tmp_path / "link").symlink_to("model.onnx")
    before = fingerprint(tmp_path)
    (tmp_path / "model.onnx").write_bytes(b"clobbered")
    (tmp_path / "pipe").unlink()
    (tmp_path / "pipe").write_text("now a file")
    (tmp_path / ".out.dla.x1.tmp").write_text("partial")
    changed, leftovers = _compare(before, fingerprint(tmp_path), may_change=set())
    assert sorted(changed) == ["model.onnx (contents)", "pipe (fifo -> file)"]
    assert leftovers == [".out.dla.x1.tmp"]


@pytest.fixture(scope="module")
def sweep_root(tmp_path_factory) -> tuple[Material, Path]:
    root = tmp_path_factory.mktemp("sweep")
    return Material.build(root / "material"), root


@pytest.mark.parametrize("attack", CHOSEN, ids=[f"{a.family}: {a.name}" for a in CHOSEN])
def test_bad_input_keeps_the_promise(attack: Attack, sweep_root):
    material, root = sweep_root
    scenario, run, broken = execute(attack, material, root)
    assert not broken, (f"{'; '.join(broken)}\n  command: dla {' '.join(scenario.argv) if scenario else '?'}\n"
                        f"  exit {run.shell_exit}, {run.seconds:.1f} s, {run.peak_rss_mb:.0f} MB\n  line: {run.line[:500]}")
