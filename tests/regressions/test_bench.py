"""``make bench`` machinery (``regressions.bench``, ``regressions.bench_plot``): a ``--quick`` run writes
the results JSON with every key of its sections and a PNG; the regress section times a stand-in for
``python -m regressions.regress`` through the same contract (``<out>/latest/summary.json`` with
``wall_seconds``). The figures themselves are not judged here: speed targets live in the benchmark."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from regressions import bench
from regressions.bench_plot import plot, plot_history
from tb.runner import SimulatorUnavailable, simulator_version

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
TRACES = Path(os.environ.get("NVDLA_TRACES", bench.REPO.parent / "shared" / "nvdla" / "traces"))

GOLDEN_KEYS = ["gemm_mac_per_s", "golden_conv_mac_per_s", "golden_conv_gemm_ratio"] + [
    f"golden_{e}_{k}" for e in ("sdp", "pdp", "cdp") for k in ("elements_per_s", "gemm_ratio")]
SUITE_KEYS = ["nv_small_suite_seconds"]
RTL_KEYS = ["verilator_cycles_per_s", "icarus_cycles_per_s", "verilator_icarus_speed_ratio",
            "rtl_verilator_cycles_per_s", "rtl_icarus_cycles_per_s",
            "nv_small_verilator_suite_seconds", "nv_small_icarus_suite_seconds"]
REGRESS_KEYS = ["regress_seconds_1", "regress_seconds_2", "regress_parallel_speedup"]


def _simulators_available() -> bool:
    try:
        for sim in bench.SIMULATORS:
            simulator_version(sim)
    except SimulatorUnavailable:
        return False
    return True


def assert_png(path: Path, min_bytes: int = 20_000) -> None:
    data = path.read_bytes()
    assert data[:8] == PNG_SIGNATURE, f"{path} is not a PNG"
    assert len(data) >= min_bytes, f"{path} is only {len(data)} bytes"
    width, height = int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
    assert width >= 800 and height >= 400, (width, height)


def run_bench(*args: str, timeout: float = 900) -> subprocess.CompletedProcess:
    """The bench in a subprocess; ``timeout`` is only a hang guard (a quick run took 120+ s on 2 cores with
    both busy), never a speed check: speed lives in the bench results, not in an assertion."""
    return subprocess.run([sys.executable, "-m", "regressions.bench", *args], capture_output=True, text=True,
                          cwd=bench.REPO, timeout=timeout)


def test_quick_run_writes_results_and_plot(tmp_path):
    out = tmp_path / "bench" / "results.json"
    skip = []
    expected = GOLDEN_KEYS + ["compile_zoo_seconds"]
    if (TRACES / "nv_small").is_dir():
        expected += SUITE_KEYS
        if _simulators_available():
            expected += RTL_KEYS
        else:
            skip.append("rtl")
    else:
        skip += ["suite", "rtl"]
    skipping = ["--skip", ",".join(skip)] if skip else []
    proc = run_bench("--quick", "--out", str(out), "--traces", str(TRACES), *skipping)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    results = json.loads(out.read_text())
    assert results["quick"] is True and results["errors"] == {}
    assert "regress" not in results["sections"], "--quick leaves the regress section out"
    for key in expected:
        value = results[key]
        if isinstance(value, dict):
            assert value and all(t > 0 for per_cfg in value.values() for t in per_cfg.values()), (key, value)
        else:
            assert isinstance(value, (int, float)) and value > 0, (key, value)
    assert set(results["compile_zoo_seconds"]) == {"lenet", "resnet", "mobilenet", "inception"}
    machine = results["machine"]
    assert machine["cpus"] >= 1 and machine["python"] and machine["numpy"] and machine["date"]
    assert set(results["targets"]) == set(bench.TARGETS)
    assert all(t["met"] is None for t in results["targets"].values()), "quick runs are not judged"
    for section in results["sections"]:
        assert section in proc.stdout and results["section_seconds"][section] >= 0
    assert_png(out.with_suffix(".png"))
    history = (out.parent / "history.jsonl").read_text().splitlines()
    assert len(history) == 1 and json.loads(history[0])["quick"] is True
    # No duration is asserted here (tests must pass on a loaded machine); make bench reports its own times.


STAND_IN = textwrap.dedent("""
    import argparse, json, pathlib, time
    ap = argparse.ArgumentParser()
    ap.add_argument("--level"); ap.add_argument("--jobs", type=int); ap.add_argument("--out")
    a = ap.parse_args()
    run = pathlib.Path(a.out) / time.strftime("%Y%m%d-%H%M%S")
    run.mkdir(parents=True)
    (run / "summary.json").write_text(json.dumps({"level": a.level, "wall_seconds": 6.0 / a.jobs + 1.0}))
    (pathlib.Path(a.out) / "latest").symlink_to(run.name)
    calls = pathlib.Path(__file__).with_name("calls.txt")
    calls.write_text(calls.read_text() + f"{a.jobs}\\n" if calls.exists() else f"{a.jobs}\\n")
""")


def test_regress_section_times_one_and_two_workers_after_a_warm_up(tmp_path):
    script = tmp_path / "regress_stand_in.py"
    script.write_text(STAND_IN)
    out = tmp_path / "results.json"
    proc = run_bench("--only", "regress", "--no-plot", "--out", str(out),
                     "--regress-cmd", f"{{python}} {script} --level {{level}} --jobs {{jobs}} --out {{out}}")
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    results = json.loads(out.read_text())
    assert (tmp_path / "calls.txt").read_text().split() == ["2", "1", "2"], "warm-up first, then 1 and 2 workers"
    assert results["regress_warmup"] is True and results["regress_level"] == "smoke"
    assert results["regress_seconds_1"] == 7.0 and results["regress_seconds_2"] == 4.0
    assert results["regress_parallel_speedup"] == pytest.approx(1.75)
    assert results["targets"]["regress_parallel_speedup"]["met"] is True
    assert all(r["source"] == "summary" and r["cpu_seconds"] >= 0 for r in results["regress_runs"])


def test_a_failing_section_is_recorded_and_the_others_still_run(tmp_path):
    out = tmp_path / "results.json"
    proc = run_bench("--only", "regress,golden", "--quick", "--no-plot", "--out", str(out),
                     "--regress-cmd", "{python} -c pass")
    assert proc.returncode == 1
    results = json.loads(out.read_text())
    assert results["sections"] == ["golden", "regress"]
    assert "summary.json" in results["errors"]["regress"]
    assert "golden" not in results["errors"] and results["golden_conv_gemm_ratio"] > 0


def test_section_selection():
    assert bench.select_sections([], [], quick=False) == list(bench.SECTIONS)
    assert "regress" not in bench.select_sections([], [], quick=True)
    assert "nvdla" not in bench.select_sections([], [], quick=True)
    assert "imagenet" not in bench.select_sections([], [], quick=True)
    assert bench.select_sections(["imagenet"], [], quick=True) == ["imagenet"]
    assert bench.select_sections(["regress"], [], quick=True) == ["regress"]
    assert bench.select_sections(["nvdla"], [], quick=True) == ["nvdla"]
    assert bench.select_sections([], ["rtl", "regress"], quick=False) == ["golden", "suite", "compile", "profiles",
                                                                           "imagenet", "nvdla"]
    with pytest.raises(SystemExit):
        bench.select_sections(["nope"], [], quick=False)


def test_plot_draws_partial_and_full_results(tmp_path):
    """Any key may be missing (a skipped section): the panel says so instead of failing."""
    plot({"machine": {"date": "2026-01-01T00:00:00+00:00"}, "quick": False}, tmp_path / "empty.png")
    assert_png(tmp_path / "empty.png", min_bytes=10_000)
    full = {
        "machine": {"date": "2026-01-01T00:00:00+00:00", "cpus": 2, "blas": {"name": "openblas"}},
        "gemm_mac_per_s": 6e10, "golden_conv_mac_per_s": 2.4e10, "golden_conv_gemm_ratio": 0.4,
        **{f"golden_{e}_elements_per_s": 1e7 for e in ("sdp", "pdp", "cdp")},
        **{f"golden_{e}_gemm_ratio": 1e7 / 6e10 for e in ("sdp", "pdp", "cdp")},
        "nv_small_suite_seconds": 1.3, "nv_small_verilator_suite_seconds": 4.0, "nv_small_icarus_suite_seconds": 10.4,
        "verilator_cycles_per_s": 1.6e4, "icarus_cycles_per_s": 4.8e3, "verilator_icarus_speed_ratio": 3.3,
        "compile_zoo_seconds": {"lenet": {"nv_small": 0.01, "nv_full": 0.01}},
        "compile_resnet50_seconds_by_config": {"nv_small": 3.0, "nv_large": 2.5, "nv_full": 2.4},
        "regress_seconds_1": 120.0, "regress_seconds_2": 70.0, "regress_parallel_speedup": 1.71,
        "regress_warmup": True, "section_seconds": {"golden": 3.0}, "errors": {"rtl": "BenchError: x"},
    }
    full["targets"] = bench.targets_report(full)
    t0 = time.perf_counter()
    plot(full, tmp_path / "full.png")
    print(f"plot of a full report: {time.perf_counter() - t0:.2f} s")  # reported, not asserted (machine load)
    assert_png(tmp_path / "full.png")
    plot_history([full, {**full, "golden_conv_gemm_ratio": 0.5}, {"machine": {}}], tmp_path / "history.png")
    assert_png(tmp_path / "history.png")
    assert not list(tmp_path.glob(".*.tmp*")), "temporary files are renamed into place"


def test_imagenet_children_compile_and_run_a_network(tmp_path):
    """The ``imagenet`` section's children (``python -m regressions.bench_imagenet compile|run``) on a small
    network: each reports its figures as the JSON line the section reads."""
    import onnx

    from regressions import bench_imagenet
    from regressions.lib.zoo import ZOO

    model, out = tmp_path / "lenet.onnx", tmp_path / "lenet.dla"
    onnx.save(ZOO["lenet"](0), model)
    built = bench_imagenet._child(["compile", str(model), "nv_small", str(out)])
    assert built["seconds"] > 0 and built["peak_rss_mb"] > 0 and out.stat().st_size > 0
    ran = bench_imagenet._child(["run", str(out), "2"])
    assert ran["seconds_per_input"] > 0 and ran["peak_rss_mb"] > 0
