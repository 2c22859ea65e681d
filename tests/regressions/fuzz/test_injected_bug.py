"""The fuzzer finds a real bug: a copy of ``golden/`` whose SDP output converter (C stage, ``output_cvt`` in
``golden/engines/sdp.py``) truncates instead of rounding half away from zero.

The driver runs as a subprocess on the copy (the copy's directory is the working directory and first on
PYTHONPATH, so ``import golden`` resolves to it; everything else comes from the repository) with a fixed
seed and a budget of examples, not seconds (what it finds must not depend on the machine's load). It must
fail the ``sdp`` property on every preset within a few examples, shrink each failure to a tiny cube, save
the JSON and a trace checking the reference's CRC (which the correct golden passes and the mutant fails),
and the unmodified copy must pass the same seed. The time it took is printed, not asserted.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from regressions.fuzz import serialize
from runtime.suite import PASS, run_trace

REPO = Path(__file__).resolve().parents[3]
SEED = 20240607
#: Examples per preset: the bug is found within the first few of each (3 to 6 with this seed).
EXAMPLES = 100
#: At most this many examples into a preset's run: a fuzzer that needs more has lost its edge.
FOUND_WITHIN = 20
#: The driver's wall-clock budget, only a cap: the example budget ends the run (about 2 minutes unloaded).
SECONDS = 1800
#: A shrunk example may hold at most this many input values (C x H x W).
MAX_SHRUNK_VALUES = 4
#: The C stage: sat8(sat17(rha((x - offset) * scale, shift))). The mutant floors the shift instead.
ROUNDED = "t = sat(rha(v, cvt.shift), 17)"
TRUNCATED = "t = sat(v >> cvt.shift, 17)"


def golden_copy(root: Path, mutate: bool) -> Path:
    shutil.copytree(REPO / "golden", root / "golden", ignore=shutil.ignore_patterns("__pycache__"))
    if mutate:
        sdp = root / "golden" / "engines" / "sdp.py"
        before = sdp.read_text()
        after = before.replace(ROUNDED, TRUNCATED)
        sdp.write_text(after)
        assert before.count(ROUNDED) == 1 and after != before and TRUNCATED in after, "the mutation did not apply"
        assert ROUNDED in (REPO / "golden" / "engines" / "sdp.py").read_text(), "the repository must stay intact"
    return root


def python(root: Path, *args: str, timeout: float) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("FUZZ_SEED", "PYTHONPATH")}
    env["PYTHONPATH"] = f"{root}{os.pathsep}{REPO}"
    return subprocess.run([sys.executable, *args], cwd=root, env=env, capture_output=True, text=True,
                          timeout=timeout)


def fuzz(root: Path, found_dir: Path, examples: int) -> tuple[subprocess.CompletedProcess, float]:
    start = time.monotonic()
    proc = python(root, "-m", "regressions.fuzz", "--seconds", str(SECONDS), "--examples", str(examples),
                  "--property", "sdp", "--seed", str(SEED), "--found-dir", str(found_dir), "-q",
                  timeout=SECONDS + 240)  # a hang guard, not a measured duration
    return proc, time.monotonic() - start


def test_truncating_sdp_output_cvt_is_found_and_shrunk(tmp_path: Path) -> None:
    root = golden_copy(tmp_path / "mutant", mutate=True)
    imported = python(root, "-c", "import golden, regressions; print(golden.__file__); print(regressions.__file__)",
                      timeout=600).stdout.split()
    assert Path(imported[0]).is_relative_to(root) and Path(imported[1]).is_relative_to(REPO)

    found_dir = tmp_path / "found"
    proc, seconds = fuzz(root, found_dir, EXAMPLES)
    print(proc.stdout)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    pairs = int(next(line for line in lines if line.startswith("fuzzing ")).split()[1])
    fails = [line for line in lines if line.startswith("FAIL sdp on ")]
    assert len(fails) == pairs and all("golden differs from the reference" in line for line in fails), fails
    found = [line.split() for line in lines if line.startswith("  found ")]
    found_at = [float(words[1]) for words in found]
    at_example = [int(words[words.index("example") + 1]) for words in found]
    print(f"time to find: first failure {found_at[0]:.1f} s into the run; whole run {seconds:.1f} s "
          f"({len(fails)} preset(s) failed, at examples {at_example})")
    assert len(at_example) == pairs and max(at_example) <= FOUND_WITHIN, at_example

    saved = sorted(found_dir.glob("sdp/*.json"))
    assert len(saved) == len(fails)
    for path in saved:
        data = json.loads(path.read_text())
        layer = serialize.from_json(data["example"])
        print(f"shrunk {path.name}: x {layer.x.tolist()} params {data['example']['params']}")
        assert data["seed"] == SEED and data["error"].startswith("AssertionError: golden differs")
        assert layer.x.size <= MAX_SHRUNK_VALUES, f"{path.name}: {layer.x.shape} is not shrunk"
        cfg = path.with_suffix("") / data["config"] / "sdp.cfg"
        assert cfg.is_file() and list(cfg.parent.glob("sdp_*.dat"))
        # The trace checks the reference's CRC: the correct golden (this process's) passes it ...
        assert run_trace(str(cfg), data["config"]).status == PASS
    # ... and the mutant fails it.
    replay = python(root, "-m", "app.cli", "trace", str(saved[0].with_suffix("")), "-q", timeout=600)
    assert replay.returncode == 1 and "FAIL" in replay.stdout, replay.stdout + replay.stderr


def test_unmodified_copy_passes_the_same_seed(tmp_path: Path) -> None:
    root = golden_copy(tmp_path / "clean", mutate=False)
    found_dir = tmp_path / "found"
    proc, seconds = fuzz(root, found_dir, FOUND_WITHIN)  # the examples that found the mutant, and more
    print(proc.stdout)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "no failures" in proc.stdout.splitlines()[-1]
    assert not found_dir.exists() or not any(found_dir.rglob("*.json"))
