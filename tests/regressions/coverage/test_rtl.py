"""RTL coverage: the .dat merge and per-file figures on hand-made files, then real nv_small traces on a
Verilator coverage build (and Icarus, which has none)."""
from __future__ import annotations

from pathlib import Path

import pytest

from app.targets import register_simulators
from conftest import nvdla_traces_root
from regressions.coverage import rtl
from runtime.suite import PASS, run_batch
from tb.runner import RTL_COVERAGE_ENV, RTL_COVERAGE_OPTIONS, build_manifest
from tb.suite import builtin_dut

register_simulators()  # run_batch and Network.run find the simulators by name

FIFO = rtl.RTL_ROOT / "dla_fifo.v"
PDP_TRACES = ("pdp_8x8x64_2x2_min_int8_0", "pdp_16x6x16_4x2_split_max_int8_0")


def point(path: Path | str, line: int, kind: str, count: int, covers: str = "", comment: str = "block") -> str:
    keys = {"f": str(path), "l": str(line), "n": "1", "t": kind, "page": f"v_{kind}/mod", "o": comment}
    if covers:
        keys["S"] = covers
    keys["h"] = "TOP.u"
    return "C '" + "".join(f"\x01{k}\x02{v}" for k, v in keys.items()) + f"' {count}\n"


def write_dat(path: Path, *points: str) -> Path:
    path.write_text(rtl.HEADER + "\n" + "".join(points))
    return path


# ---- the format and the figures -------------------------------------------------------------------------------
def test_merge_sums_points_and_counts_lines_toggles_per_rtl_file(tmp_path):
    cov = tmp_path / "cov"
    cov.mkdir()
    write_dat(cov / "a.dat",
              point(FIFO, 10, "line", 5, "10-12"),
              point(FIFO, 20, "branch", 0, "20-21", "if"),
              point(FIFO, 20, "branch", 3, "22", "else"),
              point(FIFO, 5, "toggle", 0, comment="full:0->1"),
              point(FIFO, 5, "toggle", 0, comment="full:1->0"),
              point(tmp_path / "build" / "include" / "dla_config.vh", 3, "line", 0))
    write_dat(cov / "b.dat",
              point(FIFO, 10, "line", 0, "10-12"),
              point(FIFO, 20, "branch", 0, "20-21", "if"),
              point(FIFO, 5, "toggle", 1, comment="full:0->1"))
    (cov / "notes.dat").write_text("not coverage\n")  # e.g. a trace payload: skipped, reported

    summary = rtl.summarize(cov)
    assert summary["available"] and summary["inputs"] == 2
    assert "notes.dat" in summary["reason"]
    assert list(summary["files"]) == ["rtl/dla_fifo.v"]  # the build's generated header is not ours
    fifo = summary["files"]["rtl/dla_fifo.v"]
    # Lines 10-12 (block hit), 20 (the else arm starts there), 22 hit; 21 only in the untaken if arm.
    assert fifo["line"] == [5, 6] and fifo["uncovered_lines"] == [21]
    assert fifo["branch"] == [1, 2] and fifo["toggle"] == [1, 2]
    assert summary["total"] == {"line": [5, 6], "branch": [1, 2], "toggle": [1, 2]}

    merged = rtl.read_dat(Path(summary["merged"]))
    by_comment = {rtl.point_keys(name)["o"]: n for name, n in merged.items() if "dla_fifo" in name}
    assert by_comment == {"block": 5, "if": 0, "else": 3, "full:0->1": 1, "full:1->0": 0}
    annotated = (Path(summary["annotated_dir"]) / "rtl" / "dla_fifo.v").read_text().splitlines()
    assert annotated[20].startswith("%000000") and annotated[9].startswith(" 000005")
    assert len(annotated) == len(FIFO.read_text().splitlines())

    again = rtl.summarize(cov)  # the merged output is never read back as an input
    assert again["files"] == summary["files"] and again["inputs"] == 2


def test_compact_folds_one_workers_files_into_one(tmp_path):
    for i, count in enumerate((1, 2, 4)):
        write_dat(tmp_path / f"verilator-rtl-{100}-{i}.dat", point(FIFO, 10, "line", count, "10-12"))
    write_dat(tmp_path / "verilator-rtl-200-0.dat", point(FIFO, 10, "line", 8, "10-12"))  # another worker
    (tmp_path / "verilator-rtl-100-9.dat").write_text("truncated")
    into = tmp_path / "gw0-100.dat"
    assert rtl.compact(tmp_path, "*-100-*.dat", into) == 3
    assert sorted(p.name for p in tmp_path.iterdir()) == ["gw0-100.dat", "verilator-rtl-100-9.dat",
                                                          "verilator-rtl-200-0.dat"]
    assert list(rtl.read_dat(into).values()) == [7]
    write_dat(tmp_path / "verilator-rtl-100-3.dat", point(FIFO, 10, "line", 10, "10-12"))
    assert rtl.compact(tmp_path, "*-100-*.dat", into) == 1
    assert list(rtl.read_dat(into).values()) == [17]
    summary = rtl.summarize(tmp_path)
    assert summary["inputs"] == 2 and "verilator-rtl-100-9.dat" in summary["reason"]


def test_no_coverage_files_says_why(tmp_path):
    summary = rtl.summarize(tmp_path)
    assert summary["available"] is False and "DLA_RTL_COVERAGE_DIR" in summary["reason"]
    assert summary["files"] == {} and summary["annotated_dir"] is None
    (tmp_path / "x.icarus").write_text("ran\n")
    summary = rtl.summarize([tmp_path, tmp_path / "missing"])
    assert summary["available"] is False and "Icarus has no" in summary["reason"]


def test_coverage_builds_differ_from_plain_builds_for_verilator_only(monkeypatch, tmp_path):
    spec = builtin_dut("nv_small")
    monkeypatch.delenv(RTL_COVERAGE_ENV, raising=False)
    plain = {sim: build_manifest(spec, sim, False) for sim in ("verilator", "icarus")}
    monkeypatch.setenv(RTL_COVERAGE_ENV, str(tmp_path))
    coverage = {sim: build_manifest(spec, sim, False) for sim in ("verilator", "icarus")}
    assert coverage["icarus"] == plain["icarus"]
    assert coverage["verilator"]["options"] == [*plain["verilator"]["options"][:2], *RTL_COVERAGE_OPTIONS,
                                                *plain["verilator"]["options"][2:]]


# ---- real simulations ------------------------------------------------------------------------------------------
def _pdp_jobs(pytestconfig, simulator: str, names: tuple[str, ...]) -> list[tuple[str, str, str]]:
    root = nvdla_traces_root(pytestconfig) / "nv_small"
    cfgs = [root / n / f"{n}.cfg" for n in names]
    if not all(c.is_file() for c in cfgs):
        pytest.skip(f"nv_small PDP traces not found under {root}")
    return [(str(c), "nv_small", simulator) for c in cfgs]


@pytest.mark.rtl
def test_verilator_pdp_traces_give_line_and_toggle_coverage(pytestconfig, monkeypatch, tmp_path):
    cov = tmp_path / "coverage" / "rtl"
    monkeypatch.setenv(RTL_COVERAGE_ENV, str(cov))
    jobs = _pdp_jobs(pytestconfig, "verilator", PDP_TRACES)
    outcomes = list(run_batch("verilator", jobs, workers=2, options={"runs_root": str(tmp_path / "runs")}))
    assert [o.status for o in outcomes] == [PASS] * len(jobs), [o.line() for o in outcomes]
    assert len(list(cov.glob("*.dat"))) == 2  # one per simulation

    summary = rtl.summarize(cov)
    assert summary["available"], summary["reason"]
    line, toggle = summary["total"]["line"], summary["total"]["toggle"]
    assert line[1] > 0 and toggle[1] > 0
    assert 0 < line[0] < line[1] and 0 < toggle[0] < toggle[1]
    for rel, fig in summary["files"].items():
        assert rel.startswith("rtl/") and not rel.endswith(".vh"), rel
        hit, total = fig["line"]
        assert hit + len(fig["uncovered_lines"]) == total, rel
        assert fig["uncovered_lines"] == sorted(set(fig["uncovered_lines"]))
    pdp = summary["files"]["rtl/engines/dla_pdp.v"]
    assert pdp["line"][0] > 0 and pdp["toggle"][0] > 0
    assert (Path(summary["annotated_dir"]) / "rtl" / "engines" / "dla_pdp.v").is_file()


@pytest.mark.rtl
def test_icarus_runs_leave_a_reason_not_coverage(pytestconfig, monkeypatch, tmp_path):
    cov = tmp_path / "coverage" / "rtl"
    monkeypatch.setenv(RTL_COVERAGE_ENV, str(cov))
    jobs = _pdp_jobs(pytestconfig, "icarus", PDP_TRACES[:1])
    outcomes = list(run_batch("icarus", jobs, options={"runs_root": str(tmp_path / "runs")}))
    assert [o.status for o in outcomes] == [PASS], [o.line() for o in outcomes]
    summary = rtl.summarize(cov)
    assert summary["available"] is False and "1 icarus simulation" in summary["reason"]
    assert "Icarus has no" in summary["reason"]
