"""``make regress LAUNCHER=slurm`` against a real single-node Slurm started and stopped here.

The cluster (``regress.slurm_cluster``) lives in a temp dir with its own munged, ports and state; the
tests skip, saying why, only where Slurm is neither installed nor installable (not root, no apt-get).
Units are real: two quick golden-model test files listed in a temporary lists folder.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from xml.etree import ElementTree

import pytest

from regressions.regress import slurm
from regressions.regress.lists import REPO, Unit, load_levels, load_units
from regressions.regress.launcher import Interrupted, drive
from regressions.regress.plan import Plan
from regressions.regress.results import read_records
from regressions.regress.slurm_cluster import SlurmCluster, SlurmUnavailable, cluster_fixture
from regressions.regress.slurm_cluster import running as is_running

pytestmark = pytest.mark.slurm

slurm_cluster = cluster_fixture(scope="module")

LEVELS = """
[levels.smoke]
description = "slurm launcher test"
env = { DLA_FUNC_COVERAGE = "0", DLA_RTL_COVERAGE = "0" }
"""
UNITS = """
[[unit]]
id = "golden.config"
area = "golden"
target = "slurm"
level = "smoke"
tests = ["tests/golden/test_config.py::*"]

[[unit]]
id = "golden.memory"
area = "golden"
target = "slurm"
level = "smoke"
tests = ["tests/golden/test_memory.py::*"]
"""
#: A unit the launcher submits but the run's plan does not know: the unit command exits 1 without results.
BOGUS = Unit(id="no.such.unit", area="golden", target="slurm", tags=(), levels=("smoke",), tests=("nothing",))


@pytest.fixture
def lists_dir(tmp_path: Path) -> Path:
    d = tmp_path / "lists"
    d.mkdir()
    (d / "levels.toml").write_text(LEVELS)
    (d / "golden.toml").write_text(UNITS)
    return d


def _collected(path: str) -> set[str]:
    """Node ids pytest collects from a test file (what a unit's records must cover)."""
    out = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", path],
                         cwd=REPO, capture_output=True, text=True, timeout=600)
    return {line for line in out.stdout.splitlines() if line.startswith(path + "::")}


def test_make_regress_launcher_slurm(slurm_cluster: SlurmCluster, lists_dir: Path, tmp_path: Path) -> None:
    """The whole command (`make regress LAUNCHER=slurm` minus make): plan, array job, merged report."""
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "regressions.regress", "--lists", str(lists_dir), "run", "--level", "smoke",
           "--launcher", "slurm", "--seed", "7", "--out", str(out)]
    # A fresh command line's environment: nothing of this pytest (xdist worker id, current test) leaks in.
    env = {k: v for k, v in slurm_cluster.client_env().items() if not k.startswith("PYTEST_")}
    done = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "units submitted as array job" in done.stdout and "2/2 done" in done.stdout, done.stdout
    run_dir = (out / "latest").resolve()
    assert (run_dir / "slurm" / "units.txt").read_text().split() == ["golden.config", "golden.memory"]

    records = read_records(run_dir)
    expected = _collected("tests/golden/test_config.py") | _collected("tests/golden/test_memory.py")
    assert expected and {r.nodeid for r in records} == expected
    assert {r.outcome for r in records} == {"passed"}
    for unit in ("golden.config", "golden.memory"):
        unit_dir = run_dir / "units" / unit
        meta = json.loads((unit_dir / "unit.json").read_text())
        assert (meta["unit"], meta["seed"], meta["level"], meta["exit"]) == (unit, 7, "smoke", 0)
        assert (unit_dir / "result.xml").is_file()
    # The merged report: one JUnit suite per unit, every test in it.
    suites = {s.get("name"): s for s in ElementTree.parse(run_dir / "junit.xml").getroot().iter("testsuite")}
    assert set(suites) == {"golden.config", "golden.memory"}
    assert sum(int(s.get("tests")) for s in suites.values()) == len(expected)
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["counts"]["passed"] == len(expected) and not summary["not_run"]


def launch(units: list[Unit], run_dir: Path, **options) -> int:
    """``units`` as a Slurm array job driven to the end, as ``make regress LAUNCHER=slurm`` does; returns
    how many units produced their own results."""
    launcher = slurm.SlurmLauncher(units, run_dir, **options)
    drive(launcher)
    return launcher.produced


def _plan(run_dir: Path, lists_dir: Path, seed: int) -> list[Unit]:
    levels = load_levels(lists_dir)
    units = load_units(levels, lists_dir)
    run_dir.mkdir()
    Plan(level=levels["smoke"], units=[u.to_json() for u in units], selected=[u.id for u in units], seed=seed,
         jobs="1", launcher="slurm", design_hash="test").write(run_dir)
    return units


def test_unit_without_results_gets_error_record(slurm_cluster: SlurmCluster, lists_dir: Path,
                                                tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    units = _plan(run_dir, lists_dir, seed=3)
    lines: list[str] = []
    produced = launch([units[0], BOGUS], run_dir, level="smoke", seed=3, lists_dir=lists_dir,
                            env=slurm_cluster.env, poll_s=0.3, progress=lines.append)
    assert produced == 1
    job = lines[0].split()[1].rstrip(":")
    assert lines[-1].startswith(f"slurm {job}: 2/2 done"), lines

    by_unit: dict[str, list] = {}
    for rec in read_records(run_dir):
        by_unit.setdefault(rec.unit, []).append(rec)
    assert {r.outcome for r in by_unit["golden.config"]} == {"passed"}
    [error] = by_unit[BOGUS.id]
    log = run_dir / "slurm" / f"{job}_1.log"
    assert (error.nodeid, error.outcome, error.area, error.target) == ("no.such.unit::<unit>", "error", "golden",
                                                                       "slurm")
    assert f"slurm array task {job}_1 of unit no.such.unit" in error.longrepr
    assert "FAILED, exit code 1:0" in error.longrepr and str(log) in error.longrepr
    # the tail of the task's log says what went wrong
    assert "not in the plan" in error.longrepr
    assert error.properties == {"slurm_task": f"{job}_1", "slurm_log": str(log)}
    assert (run_dir / "units" / BOGUS.id / "result.xml").is_file()


STAND_IN = """\
import sys, time
args = sys.argv[1:]
print("stand-in unit", args[args.index("--unit") + 1], flush=True)
time.sleep(300)
"""


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def test_interrupt_cancels_job_and_reports_unfinished(slurm_cluster: SlurmCluster, tmp_path: Path) -> None:
    """Ctrl-C while waiting: scancel, error records for units that never finished, ``Interrupted``."""
    stand_in = tmp_path / "stand_in.py"
    stand_in.write_text(STAND_IN)
    units = [Unit(id=f"slow.{i}", area="golden", target="slurm", tags=(), levels=("smoke",), tests=("x",))
             for i in range(3)]
    run_dir = tmp_path / "run"
    lines: list[str] = []

    def progress(line: str) -> None:
        lines.append(line)
        if " 2 running" in line:  # both CPUs busy, one task pending: the user presses Ctrl-C ...
            job = lines[0].split()[1].rstrip(":")
            log = run_dir / "slurm" / f"{job}_0.log"
            deadline = time.monotonic() + 60
            while "stand-in unit" not in (log.read_text() if log.exists() else ""):  # ... once it really runs
                assert time.monotonic() < deadline, f"task 0 never started its stand-in: {lines}"
                time.sleep(0.1)
            raise KeyboardInterrupt

    with pytest.raises(Interrupted):
        launch(units, run_dir, level="smoke", seed=1, env=slurm_cluster.env, poll_s=0.3, progress=progress,
                     command=(sys.executable, str(stand_in)))
    job = lines[0].split()[1].rstrip(":")
    assert slurm_cluster.run("squeue", "-h", "-j", job, check=False).stdout.strip() == ""
    records = {r.unit: r for r in read_records(run_dir)}
    assert set(records) == {u.id for u in units}
    for task, unit in enumerate(units):
        rec = records[unit.id]
        assert rec.outcome == "error" and rec.longrepr.startswith("interrupted (Ctrl-C/SIGTERM), job cancelled: ")
        assert f"{job}_{task}" in rec.longrepr and "CANCELLED" in rec.longrepr
    # the stand-ins that were running were killed with their tasks
    assert "stand-in unit slow.0" in records["slow.0"].longrepr
    deadline = time.monotonic() + 10
    while [p for p in slurm_cluster.processes() if "stand_in.py" in _cmdline(p)]:
        assert time.monotonic() < deadline, "the cancelled stand-ins are still running"
        time.sleep(0.1)


def test_cluster_stop_leaves_nothing_running() -> None:
    """Stopping the cluster with a job still running kills the job, its step daemon and the daemons."""
    try:
        cluster = SlurmCluster(install=False)
    except SlurmUnavailable as e:
        pytest.skip(f"no single-node Slurm: {e}")
    with cluster:
        job = cluster.run("sbatch", "--parsable", "--output=/dev/null", "--wrap", "sleep 300").stdout.strip()
        deadline = time.monotonic() + 30
        while cluster.run("squeue", "-h", "-j", job, "-o", "%T").stdout.strip() != "RUNNING":
            assert time.monotonic() < deadline, "the sleep job never started"
            time.sleep(0.2)
        running = cluster.processes()
        assert len(running) >= 4  # munged, slurmctld, slurmd, slurmstepd, the job
        root, conf = cluster.dir, cluster.conf
    assert cluster.processes() == []
    assert not [pid for pid in running if is_running(pid)]
    assert not root.exists() and not conf.exists()


def test_batch_script_runs_the_task_s_unit(tmp_path: Path) -> None:
    """Task i runs line i+1 of units.txt with the run's level, seed and lists (no Slurm needed)."""
    units = tmp_path / "units.txt"
    units.write_text("a.first\nb.second\n")
    script = tmp_path / "unit.sbatch"
    script.write_text(slurm.batch_script(units, tmp_path / "run dir", level="ci", seed=5, lists_dir=tmp_path,
                                         command=("echo", "RUN")))
    env = {**os.environ, "SLURM_ARRAY_JOB_ID": "9", "SLURM_ARRAY_TASK_ID": "1"}
    out = subprocess.run(["bash", str(script)], env=env, capture_output=True, text=True).stdout.splitlines()
    assert out[0].startswith("slurm 9_1: unit b.second on ")
    assert out[1] == f"RUN --lists {tmp_path} unit --run-dir {tmp_path}/run dir --unit b.second --level ci --seed 5"
    env["SLURM_ARRAY_TASK_ID"] = "2"
    assert subprocess.run(["bash", str(script)], env=env, capture_output=True).returncode == 2


def test_missing_sbatch_is_one_clear_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(slurm, "which", lambda name: None)
    with pytest.raises(slurm.SlurmLaunchError, match="sbatch not found"):
        launch([BOGUS], tmp_path, level="smoke", seed=0)


def test_failed_submission_is_one_clear_error(slurm_cluster: SlurmCluster, tmp_path: Path) -> None:
    with pytest.raises(slurm.SlurmLaunchError, match=r"sbatch exited 1: .*invalid partition") as e:
        launch([BOGUS], tmp_path, level="smoke", seed=0, env=slurm_cluster.env,
                     sbatch_args=("--partition=no_such_partition",))
    assert "\n" not in str(e.value)


def test_unavailable_says_why(monkeypatch: pytest.MonkeyPatch) -> None:
    """Where Slurm is missing and cannot be installed, the reason (the skip message) says so."""
    from regressions.regress import slurm_cluster

    monkeypatch.setattr(slurm_cluster, "which", lambda name: None)
    monkeypatch.setattr(slurm_cluster.os, "geteuid", lambda: 1000)
    with pytest.raises(SlurmUnavailable, match=r"not installed \(slurmctld, slurmd, .*\) and installing it needs root"):
        SlurmCluster()
    monkeypatch.setattr(slurm_cluster.os, "geteuid", lambda: 0)
    with pytest.raises(SlurmUnavailable, match="no apt-get to install it with"):
        SlurmCluster()
    with pytest.raises(SlurmUnavailable, match=r"Slurm is not installed"):
        SlurmCluster(install=False)
