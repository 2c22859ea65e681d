"""The regression runner end to end on sample tests: lists, xdist launcher, records, report, RERUN=failed,
a crashing worker and Ctrl-C."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from junitparser import JUnitXml

from regressions.regress import lists
from regressions.regress.lists import REPO, ListError

SAMPLES = "tests/regressions/regress/samples"
LEVELS = """
[levels.smoke]
description = "quick"
env = { SAMPLE_LEVEL = "smoke" }
[levels.ci]
description = "more"
budget_minutes = 15
env = { SAMPLE_LEVEL = "ci" }
"""


def unit(uid: str, area: str, target: str, level: str, tests: list[str]) -> str:
    return (f'[[unit]]\nid = "{uid}"\narea = "{area}"\ntarget = "{target}"\nlevel = "{level}"\n'
            f'tags = ["sample"]\ntests = {json.dumps(tests)}\n')


@pytest.fixture
def sample_lists(tmp_path: Path) -> Path:
    d = tmp_path / "lists"
    d.mkdir()
    (d / "levels.toml").write_text(LEVELS)
    (d / "samples.toml").write_text("\n".join([
        unit("pass.a", "golden-area", "golden", "smoke", [f"{SAMPLES}/sample_pass.py::test_param[a]"]),
        unit("pass.rest", "golden-area", "golden", "smoke", [f"{SAMPLES}/sample_pass.py::*"]),
        unit("fail", "rtl-area", "verilator", "smoke", [f"{SAMPLES}/sample_fail.py::*"]),
        unit("slow", "rtl-area", "icarus", "ci", [f"{SAMPLES}/sample_slow.py::*"]),
    ]))
    return d


def regress(args: list[str], seed: int = 7, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "regressions.regress", *args], cwd=REPO, capture_output=True,
                          text=True, timeout=300, env=_env(seed, **env))


def _env(seed: int, **extra: str) -> dict[str, str]:
    return {**os.environ, "DLA_REGRESS_SAMPLES": "1", "EXPECT_SEED": str(seed), "PYTHONDONTWRITEBYTECODE": "1",
            **extra}


def test_list_errors_name_the_file_and_unit(tmp_path: Path) -> None:
    d = tmp_path / "l"
    d.mkdir()
    (d / "levels.toml").write_text(LEVELS)
    (d / "a.toml").write_text(unit("x", "a", "golden", "weekly", ["tests/x.py"]))
    with pytest.raises(ListError, match=r"a.toml: unit x: level 'weekly' is not one of smoke, ci"):
        lists.load_units(lists.load_levels(d), d)
    (d / "a.toml").write_text(unit("x", "a", "golden", "smoke", ["t.py"]) + unit("x", "b", "golden", "ci", ["u.py"]))
    with pytest.raises(ListError, match="a.toml: unit x: id also used in a.toml"):
        lists.load_units(lists.load_levels(d), d)
    (d / "a.toml").write_text(unit("x", "a", "golden", "smoke", ["t.py"]).replace("tags", "tag"))
    with pytest.raises(ListError, match="unknown key"):
        lists.load_units(lists.load_levels(d), d)
    (d / "a.toml").write_text("[[unit]]\nid = ")
    with pytest.raises(ListError, match="a.toml"):
        lists.load_units(lists.load_levels(d), d)
    r = regress(["--lists", str(d), "--level", "smoke"])
    assert r.returncode == 2 and r.stderr.startswith("regress: ") and "Traceback" not in r.stderr


def test_matcher_brackets_are_literal_and_first_unit_wins(sample_lists: Path) -> None:
    units = lists.load_units(lists.load_levels(sample_lists), sample_lists)
    m = lists.Matcher(units)
    assert m.unit_of(f"{SAMPLES}/sample_pass.py::test_param[a]").id == "pass.a"
    assert m.unit_of(f"{SAMPLES}/sample_pass.py::test_param[b]").id == "pass.rest"
    assert m.unit_of(f"{SAMPLES}/sample_pass.py::test_parama") is not None  # '*' only
    assert lists.Matcher(units[:1]).unit_of(f"{SAMPLES}/sample_pass.py::test_param[ab]") is None
    assert [u.id for u in lists.select(units, "smoke")] == ["pass.a", "pass.rest", "fail"]
    assert [u.id for u in lists.select(units, "ci")] == ["pass.a", "pass.rest", "fail", "slow"]


def test_the_shipped_lists_load_and_every_pattern_has_files() -> None:
    levels = lists.load_levels()
    assert list(levels) == ["smoke", "ci", "nightly", "full"]
    units = lists.load_units(levels)
    assert {u.target for u in units} >= {"golden", "verilator", "icarus"}
    missing = [(u.id, p) for u in units for p in u.missing()]
    assert not missing


def test_run_report_and_rerun_failed(sample_lists: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    r = regress(["--lists", str(sample_lists), "--level", "smoke", "--jobs", "2", "--out", str(out), "--seed", "7"])
    assert r.returncode == 1, r.stdout + r.stderr
    run = (out / "latest").resolve()
    assert run.parent == out and (out / "latest").is_symlink()
    failed = (run / "failed.txt").read_text().split()
    assert failed == [f"{SAMPLES}/sample_fail.py::test_crashes_its_worker", f"{SAMPLES}/sample_fail.py::test_fails"]
    xml = JUnitXml.fromfile(str(run / "junit.xml"))
    suites = {s.name: s for s in xml}
    assert set(suites) == {"pass.a", "pass.rest", "fail"}
    assert (suites["pass.a"].tests, suites["pass.rest"].tests) == (1, 3)
    assert suites["pass.rest"].skipped == 1 and suites["fail"].failures + suites["fail"].errors == 2
    summary = json.loads((run / "summary.json").read_text())
    assert summary["counts"] == {"error": 1, "failed": 1, "passed": 3, "skipped": 1, "total": 6}
    assert summary["matrix"]["rtl-area"]["verilator"]["failed"] == 1 and summary["seed"] == 7
    crash = next(f for f in summary["failures"] if "crashes" in f["nodeid"])
    assert crash["outcome"] == "error" and "crash" in (run / crash["artifacts"] / "log.txt").read_text()
    fail = next(f for f in summary["failures"] if f["nodeid"].endswith("test_fails"))
    assert "arithmetic is off" in fail["message"]
    log = (run / fail["artifacts"] / "log.txt").read_text()
    assert "some captured output" in log and "seed: 7" in log
    sim_log = fail["properties"]["log0"]
    assert sim_log.endswith("sim.log") and Path(sim_log).read_text() == "simulator output\n"
    page = (run / "index.html").read_text()
    assert "test_fails" in page and 'href="' + fail["artifacts"] + '/log.txt"' in page
    assert f'href="file://{sim_log}"' in page
    md = (run / "summary.md").read_text()
    assert "| rtl-area |" in md and "RERUN=failed" in md and (run / "trend.png").read_bytes()[:4] == b"\x89PNG"

    # RERUN=failed: exactly the two failed tests, the crash now fixed.
    time.sleep(1.1)  # a new timestamped folder
    r = regress(["--lists", str(sample_lists), "--rerun", "failed", "--jobs", "1", "--out", str(out)],
                SAMPLE_FIXED="1")
    assert r.returncode == 1, r.stdout + r.stderr
    rerun = (out / "latest").resolve()
    assert rerun != run
    s2 = json.loads((rerun / "summary.json").read_text())
    assert s2["rerun_of"] == run.name and s2["level"] == "smoke"
    assert s2["counts"]["total"] == 2 and s2["counts"]["passed"] == 1
    assert s2["trend"]["previous"] == run.name and s2["trend"]["fixed"] == [failed[0]]
    assert (rerun / "failed.txt").read_text().split() == [failed[1]]


def test_ctrl_c_still_reports_what_ran(sample_lists: Path, tmp_path: Path) -> None:
    out, slow_done = tmp_path / "out", tmp_path / "slow_done"
    proc = subprocess.Popen([sys.executable, "-m", "regressions.regress", "--lists", str(sample_lists),
                             "--level", "ci", "--units", "slow", "--jobs", "2", "--out", str(out)],
                            cwd=REPO, env=_env(7, DLA_REGRESS_SLOW_DONE=str(slow_done)),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    deadline = time.time() + 120
    while time.time() < deadline:
        results = list(out.glob("*/local/results.jsonl"))
        if results and len(results[0].read_text().splitlines()) >= 4:
            break
        time.sleep(0.2)
    else:
        proc.kill()
        pytest.fail("quick tests never reported")
    os.killpg(proc.pid, signal.SIGINT)  # what a terminal's Ctrl-C does: the whole foreground group
    text, _ = proc.communicate(timeout=300)  # a hang guard, not a measured duration
    assert proc.returncode == 130, text
    assert not slow_done.exists(), "the interrupt waited for the slow test (120 s of sleep) to finish"
    run = (out / "latest").resolve()
    summary = json.loads((run / "summary.json").read_text())
    assert summary["interrupted"] and summary["counts"]["passed"] == 4
    assert JUnitXml.fromfile(str(run / "junit.xml")).tests >= 4
    assert "INTERRUPTED" in (run / "summary.md").read_text()


def test_one_unit_is_self_contained(sample_lists: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    r = regress(["--lists", str(sample_lists), "--level", "smoke", "--units", "pass.a", "--jobs", "1",
                 "--out", str(out)])
    assert r.returncode == 0, r.stdout + r.stderr
    run = (out / "latest").resolve()
    r = regress(["unit", "--run-dir", str(run), "--unit", "pass.rest", "--seed", "7"])
    assert r.returncode == 0, r.stdout + r.stderr
    u = run / "units" / "pass.rest"
    meta = json.loads((u / "unit.json").read_text())
    assert meta["seed"] == 7 and meta["design_hash"] == lists.design_hash() and meta["tests"] == 3
    assert JUnitXml.fromfile(str(u / "result.xml")).tests == 3
    recs = [json.loads(x) for x in (u / "results.jsonl").read_text().splitlines()]
    assert {x["unit"] for x in recs} == {"pass.rest"}
    r = regress(["unit", "--run-dir", str(run), "--unit", "nope"])
    assert r.returncode != 0 and "nope" in r.stderr + r.stdout


def test_every_collected_test_belongs_to_a_unit_of_ci() -> None:
    """`make regress` (level ci) runs everything `make test` does: no test file is left out of the lists."""
    r = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
                        "-p", "no:xdist"], cwd=REPO, capture_output=True, text=True, timeout=600)
    nodeids = [ln for ln in r.stdout.splitlines() if "::" in ln]
    assert len(nodeids) > 1000, r.stdout[-2000:] + r.stderr[-2000:]
    units = lists.load_units(lists.load_levels())
    matcher = lists.Matcher(units)
    orphans = [n for n in nodeids if matcher.unit_of(n) is None]
    assert not orphans, f"{len(orphans)} tests in no unit, e.g. {orphans[:5]}"
    ci = {u.id for u in lists.select(units, "ci")}
    outside = [n for n in nodeids if matcher.unit_of(n).id not in ci]
    assert not outside, f"{len(outside)} tests not run at level ci, e.g. {outside[:5]}"
