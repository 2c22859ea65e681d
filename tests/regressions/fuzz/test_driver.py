"""The fuzz driver's command line: usage errors, the seed, reproducibility, exit codes, failures saved,
and the simulator path (with a stand-in simulator)."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from regressions.fuzz import driver
from regressions.fuzz.properties import Property, load
from regressions.fuzz.serialize import from_json, to_json
from regressions.lib.strategies import pool_layers
from runtime import suite
from runtime.suite import FAIL, run_trace

REPO = Path(__file__).resolve().parents[3]
#: A quick, deterministic selection for runs that must finish.
QUICK = ["--seconds", "120", "--property", "pdp", "--config", "nv_small", "-q"]


def run(capsys, argv: list[str], environ: dict[str, str] | None = None) -> tuple[int, list[str], str]:
    code = driver.main(argv, environ or {})
    out, err = capsys.readouterr()
    return code, out.splitlines(), err


@pytest.mark.parametrize("argv,environ,message", [
    (["--seconds", "0"], {}, "--seconds must be positive"),
    (["--seconds", "soon"], {}, "invalid float value"),
    (["--property", "nope"], {}, "unknown property 'nope'"),
    (["--config", "nv_tiny"], {}, "unknown config 'nv_tiny'"),
    (["--target", "verilator", "--property", "cdp"], {}, "does not run on DUT rtl"),
    (["--target", "questa"], {}, "invalid choice"),
    (["--property", "sdp_y", "--config", "nv_small"], {}, "nothing to fuzz"),
    (["--examples", "0"], {}, "--examples must be at least 1"),
    (["--bogus"], {}, "unrecognized arguments"),
    ([], {"FUZZ_SEED": "twelve"}, "FUZZ_SEED='twelve' is not an integer"),
    (["--seed", "-4"], {}, "must not be negative"),
])
def test_usage_errors_are_one_line_and_exit_2(capsys, argv, environ, message) -> None:
    code, out, err = run(capsys, argv, environ)
    assert code == 2
    assert out == []
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("python -m regressions.fuzz: error: "), err
    assert message in lines[0]
    assert "Traceback" not in err


def test_module_entry_point_reports_usage_errors() -> None:
    proc = subprocess.run([sys.executable, "-m", "regressions.fuzz", "--property", "nope"], cwd=REPO,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 2
    assert proc.stderr.strip().count("\n") == 0 and "unknown property 'nope'" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_prints_the_seed_first_and_how_to_reproduce(capsys) -> None:
    code, out, _ = run(capsys, QUICK + ["--examples", "3"], {"FUZZ_SEED": "1234"})
    assert code == 0
    assert out[0] == "fuzz seed: 1234"
    assert out[1] == ("reproduce: FUZZ_SEED=1234 make fuzz FUZZ_SECONDS=120 TARGET=golden (this selection: "
                      "python -m regressions.fuzz --seed 1234 --seconds 120 --target golden --property pdp "
                      "--config nv_small --examples 3)")
    table = out[out.index(next(line for line in out if line.startswith("property"))) + 1:]
    assert table[0].split()[:3] == ["pdp", "nv_small", "3"] and table[0].split()[-1] == "0"
    assert out[-1].startswith("no failures")


def test_seed_flag_beats_the_environment_and_a_random_seed_is_printed(capsys) -> None:
    _, out, _ = run(capsys, QUICK + ["--examples", "1", "--seed", "99"], {"FUZZ_SEED": "1234"})
    assert out[0] == "fuzz seed: 99"
    _, out, _ = run(capsys, QUICK + ["--examples", "1"], {})
    assert out[0].startswith("fuzz seed: ") and int(out[0].split()[-1]) >= 0
    assert out[1].startswith(f"reproduce: FUZZ_SEED={int(out[0].split()[-1])} make fuzz")


def listing(capsys, tmp_path: Path, name: str, *argv: str) -> list[dict]:
    path = tmp_path / name
    code, _, _ = run(capsys, ["--seconds", "300", "-q", "--list-examples", str(path), *argv])
    assert code == 0
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_same_seed_same_examples(capsys, tmp_path: Path) -> None:
    args = ("--property", "sdp", "--config", "nv_small", "--examples", "25")
    first = listing(capsys, tmp_path, "a.jsonl", "--seed", "5", *args)
    assert len(first) == 25
    assert listing(capsys, tmp_path, "b.jsonl", "--seed", "5", *args) == first
    assert listing(capsys, tmp_path, "c.jsonl", "--seed", "6", *args) != first
    # A pair's examples do not depend on what else runs in the same session.
    both = listing(capsys, tmp_path, "d.jsonl", "--seed", "5", "--property", "pdp", *args)
    assert [e for e in both if e["property"] == "sdp"] == first
    # The listed examples are the examples: they read back.
    layer = from_json(first[-1]["example"])
    assert to_json(layer) == first[-1]["example"]


def test_chunk_seeds_are_per_pair_and_stable() -> None:
    assert driver.chunk_seed(1, "sdp", "nv_small", 0) == driver.chunk_seed(1, "sdp", "nv_small", 0)
    seeds = {driver.chunk_seed(1, p, c, i) for p in ("sdp", "pdp") for c in ("nv_small", "nv_large") for i in range(3)}
    assert len(seeds) == 12


@pytest.fixture
def failing_property(monkeypatch) -> Property:
    """A property whose check fails for cubes of three or more values: shrinks to exactly three."""
    def check(hw, layer) -> None:
        assert layer.x.size < 3, f"cube of {layer.x.size} values"

    prop = Property(name="test_too_big", engine="TEST", configs=("nv_small",), strategy=pool_layers, check=check,
                    to_json=to_json, from_json=from_json)
    registered = dict(load())  # the registry refuses changes; the driver sees it plus this property
    monkeypatch.setattr(driver, "load", lambda: {**registered, prop.name: prop})
    return prop


def test_a_failure_exits_1_and_is_saved_shrunk(capsys, tmp_path: Path, failing_property) -> None:
    code, out, _ = run(capsys, ["--seconds", "60", "--seed", "3", "--property", "test_too_big",
                                "--found-dir", str(tmp_path), "-q"])
    assert code == 1
    assert any(line.startswith("FAIL test_too_big on nv_small: AssertionError: cube of 3 values") for line in out)
    saved = list((tmp_path / "test_too_big").glob("nv_small-*.json"))
    assert len(saved) == 1 and any(str(saved[0]) in line for line in out)
    data = json.loads(saved[0].read_text())
    assert data["seed"] == 3 and data["error"] == "AssertionError: cube of 3 values"
    assert from_json(data["example"]).x.size == 3
    assert out[-1] == "1 failure(s); seed 3"


def fake_simulator(fail_index: int | None, monkeypatch):
    """``run_batch`` that plays the traces on golden as our rtl/ computes (``tb.duts.dut_config``, which the
    driver predicts it with); the ``fail_index``-th job is reported FAIL."""
    from tb.duts import dut_config

    real = suite.get_config
    monkeypatch.setattr(suite, "get_config", lambda name: dut_config("rtl", real(name)))
    calls = []

    def run_batch(target, jobs, workers=1, options=None):
        calls.append((target, len(jobs)))
        for i, (cfg, config, _) in enumerate(jobs):
            outcome = run_trace(cfg, config, "golden")
            if i == fail_index:
                outcome.status, outcome.detail = FAIL, "check_crc: stand-in mismatch"
            yield outcome

    return run_batch, calls


def test_simulator_target_plays_batches_of_golden_traces(capsys, monkeypatch, tmp_path: Path) -> None:
    batch, calls = fake_simulator(None, monkeypatch)
    monkeypatch.setattr("runtime.suite.run_batch", batch)
    code, out, _ = run(capsys, ["--target", "verilator", "--seconds", "300", "--examples", "25", "--seed", "2",
                                "--found-dir", str(tmp_path), "-q"])
    assert code == 0, out
    assert out[2].startswith("fuzzing 2 property/config pairs")
    assert "sdp@nv_small" in out[2] and "pdp@nv_small" in out[2]
    assert sorted(calls) == [("verilator", 5), ("verilator", 5), ("verilator", 20), ("verilator", 20)]
    assert not tmp_path.joinpath("sdp").exists()


def test_simulator_mismatch_is_saved_with_its_trace(capsys, monkeypatch, tmp_path: Path) -> None:
    batch, _ = fake_simulator(1, monkeypatch)
    monkeypatch.setattr("runtime.suite.run_batch", batch)
    code, out, _ = run(capsys, ["--target", "icarus", "--property", "pdp", "--seconds", "300", "--examples", "5",
                                "--found-dir", str(tmp_path), "-q"])
    assert code == 1
    assert any("FAIL pdp on nv_small: RTL (icarus) differs from golden: FAIL check_crc" in line for line in out)
    saved = list((tmp_path / "pdp").glob("nv_small-*.json"))
    assert len(saved) == 1
    assert json.loads(saved[0].read_text())["target"] == "icarus"
    assert run_trace(str(saved[0].with_suffix("") / "nv_small" / "pdp.cfg"), "nv_small").status == "PASS"


def test_a_simulator_failure_trace_carries_the_crc_of_its_dut(capsys, monkeypatch, tmp_path: Path) -> None:
    """Seed 2's second pdp example averages pad values outside n*int8, where nv_small's pdp_average
    ("nv_small_rtl") and our RTL's ("cmod") differ: the saved trace must check the CRC the DUT's batch was
    checked with, not the preset's."""
    batch, _ = fake_simulator(1, monkeypatch)
    monkeypatch.setattr("runtime.suite.run_batch", batch)
    code, _, _ = run(capsys, ["--target", "icarus", "--property", "pdp", "--seconds", "300", "--examples", "5",
                              "--seed", "2", "--found-dir", str(tmp_path), "-q"])
    assert code == 1
    (saved,) = (tmp_path / "pdp").glob("nv_small-*.json")
    assert json.loads(saved.read_text())["example"]["layer"]["method"] == "avg"
    assert run_trace(str(saved.with_suffix("") / "nv_small" / "pdp.cfg"), "nv_small").status == "PASS"
