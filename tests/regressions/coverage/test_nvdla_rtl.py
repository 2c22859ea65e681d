"""NVDLA RTL coverage per unit (``regressions.coverage.rtl`` on NVDLA's tree, ``regressions.coverage.nvdla_rtl``'s
pools, comparison, line map and pytest plugin) on hand-made ``.dat`` files and a fake NVDLA root: no RTL build."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from regressions.coverage import nvdla_rtl, rtl
from tb.runner import RTL_COVERAGE_ENV

FIFO = rtl.RTL_ROOT / "dla_fifo.v"


def point(path: Path | str, line: int, kind: str, count: int, covers: str = "", comment: str = "block",
          hier: str = "TOP.u") -> str:
    keys = {"f": str(path), "l": str(line), "n": "1", "t": kind, "page": f"v_{kind}/mod", "o": comment}
    if covers:
        keys["S"] = covers
    keys["h"] = hier
    return "C '" + "".join(f"\x01{k}\x02{v}" for k, v in keys.items()) + f"' {count}\n"


def write_dat(path: Path, *points: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(rtl.HEADER + "\n" + "".join(points))
    return path


@pytest.fixture
def nvdla(tmp_path, monkeypatch) -> Path:
    """A fake NVDLA RTL root (``$NVDLA_RTL/nv_small``) with a CDMA, a PDP, a fifo library and a top file."""
    monkeypatch.delenv("DLA_NVDLA_NV_SMALL_FILELIST", raising=False)
    monkeypatch.setenv("NVDLA_RTL", str(tmp_path / "rtl"))
    root = tmp_path / "rtl" / "nv_small"
    for rel in ("vmod/nvdla/cdma/NV_NVDLA_CDMA_dc.v", "vmod/nvdla/pdp/NV_NVDLA_PDP_core.v",
                "vmod/fifos/NV_NVDLA_PDP_RDMA_lat_fifo.v", "vmod/nvdla/top/NV_nvdla.v"):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text("module m;\n" * 40)
    (root / "nv_small.f").write_text("vmod/nvdla/top/NV_nvdla.v\n")
    return root


def dc(root: Path) -> Path:
    return root / "vmod/nvdla/cdma/NV_NVDLA_CDMA_dc.v"


def pdp(root: Path) -> Path:
    return root / "vmod/nvdla/pdp/NV_NVDLA_PDP_core.v"


def lat(root: Path) -> Path:
    return root / "vmod/fifos/NV_NVDLA_PDP_RDMA_lat_fifo.v"


# ---- rtl.py on NVDLA's tree ---------------------------------------------------------------------------------------
def test_root_and_units_follow_the_tb(nvdla, monkeypatch):
    assert rtl.nvdla_root() == nvdla.resolve()
    assert rtl.nvdla_unit("vmod/nvdla/cdma/NV_NVDLA_CDMA_dc.v") == "cdma"
    assert rtl.nvdla_unit("vmod/fifos/x.v") == "fifos"
    assert rtl.nvdla_unit("vmod/rams/model/RAMDP.v") == "rams"
    assert rtl.nvdla_unit("nv_small.f") == "other"
    other = nvdla.parent / "elsewhere.f"
    monkeypatch.setenv("DLA_NVDLA_NV_SMALL_FILELIST", str(other))
    assert rtl.nvdla_root() == other.parent.resolve()


def test_summarize_reduces_nvdla_files_per_unit_beside_ours(nvdla, tmp_path):
    cov = tmp_path / "cov"
    write_dat(cov / "a.dat",
              point(FIFO, 10, "line", 5, "10-12"),
              point(dc(nvdla), 3, "line", 2, "3-4"),
              point(dc(nvdla), 8, "branch", 0, "8-9", "if"),
              point(dc(nvdla), 8, "branch", 1, "10", "else"),
              point(dc(nvdla), 2, "toggle", 1, comment="a:0->1"),
              point(dc(nvdla), 2, "toggle", 0, comment="a:1->0"),
              point(pdp(nvdla), 5, "line", 0, "5-6"),
              point(lat(nvdla), 7, "toggle", 0, comment="b:0->1"))
    # The same PDP line in a second instance, hit there: a line is hit when any instance hit it.
    write_dat(cov / "b.dat", point(pdp(nvdla), 5, "line", 3, "5", hier="TOP.v"))
    summary = rtl.summarize(cov)
    assert summary["available"] and list(summary["files"]) == ["rtl/dla_fifo.v"]  # ours as before
    assert summary["files"]["rtl/dla_fifo.v"]["line"] == [3, 3]
    nv = summary["nvdla"]
    assert nv["root"] == str(nvdla.resolve())
    assert list(nv["units"]) == ["cdma", "pdp", "fifos"]  # datapath order, libraries last
    cdma = nv["units"]["cdma"]
    assert cdma["line"] == [4, 5] and cdma["branch"] == [1, 2] and cdma["toggle"] == [1, 2]
    assert cdma["files"]["vmod/nvdla/cdma/NV_NVDLA_CDMA_dc.v"]["uncovered_lines"] == [9]
    assert nv["units"]["pdp"]["line"] == [1, 2]
    assert nv["units"]["pdp"]["files"]["vmod/nvdla/pdp/NV_NVDLA_PDP_core.v"]["uncovered_lines"] == [6]
    assert nv["units"]["fifos"]["toggle"] == [0, 1] and nv["units"]["fifos"]["line"] == [0, 0]
    assert nv["total"] == {"line": [5, 7], "branch": [1, 2], "toggle": [1, 3]}
    full = json.loads(Path(summary["nvdla_uncovered"]).read_text())
    assert full == {"cdma": {"vmod/nvdla/cdma/NV_NVDLA_CDMA_dc.v": [9]},
                    "pdp": {"vmod/nvdla/pdp/NV_NVDLA_PDP_core.v": [6]}, "fifos": {}}
    assert not (Path(summary["annotated_dir"]) / "vmod").exists()  # NVDLA's sources are never copied


def test_only_nvdla_points_are_coverage_too(nvdla, tmp_path):
    write_dat(tmp_path / "a.dat", point(dc(nvdla), 3, "line", 1))
    summary = rtl.summarize(tmp_path)
    assert summary["available"] and summary["files"] == {} and summary["nvdla"]["units"]["cdma"]["line"] == [1, 1]
    assert summary["reason"] == ""


def test_line_ranges_round_trip():
    assert rtl.line_ranges([7, 1, 2, 3, 3, 9, 10]) == "1-3,7,9-10"
    assert rtl.parse_ranges("1-3,7,9-10") == [1, 2, 3, 7, 9, 10]
    assert rtl.line_ranges([]) == "" and rtl.parse_ranges("") == []


# ---- pools, comparison, line map ------------------------------------------------------------------------------------
def _pool(out: Path, pool: str, sims: dict[str, list[str]], statuses: dict[str, str] | None = None) -> dict:
    """A pool as the command leaves it: one collector per simulation set, then finish_pool."""
    pool_dir = out / pool
    collector = nvdla_rtl.Collector(pool_dir)
    for i, (sim, points) in enumerate(sims.items()):
        dat = write_dat(pool_dir / "raw" / f"s{i}.dat", *points)
        collector.take(sim, [dat], status=(statuses or {}).get(sim, "PASS"))
        assert not dat.exists()  # reduced, then deleted
    return nvdla_rtl.finish_pool(pool_dir, pool, 1.5, {"cached": True}, {"level": "ci"} if pool == "suite" else {})


def test_traces_against_suite_per_unit(nvdla, tmp_path):
    out = tmp_path / "out"
    _pool(out, "traces", {
        "pdp_trace": [point(pdp(nvdla), 5, "line", 1, "5-6"), point(pdp(nvdla), 9, "line", 0),
                      point(pdp(nvdla), 2, "toggle", 1, comment="p:0->1"), point(dc(nvdla), 3, "line", 0),
                      point(dc(nvdla), 2, "toggle", 0, comment="a:0->1")],
        "na_trace": [point(pdp(nvdla), 5, "line", 1, "5-6"), point(dc(nvdla), 3, "line", 1)],
    }, {"na_trace": "N/A"})
    _pool(out, "suite", {
        "tests/a.py::test_pdp": [point(pdp(nvdla), 5, "line", 1, "5-6"), point(pdp(nvdla), 9, "line", 2),
                                 point(pdp(nvdla), 2, "toggle", 0, comment="p:0->1"), point(dc(nvdla), 3, "line", 0),
                                 point(dc(nvdla), 2, "toggle", 0, comment="a:0->1")],
        "tests/a.py::test_conv": [point(dc(nvdla), 3, "line", 4), point(dc(nvdla), 2, "toggle", 1, comment="a:0->1")],
    })
    result = nvdla_rtl.compare(out)
    rows = {r["unit"]: r for r in result["units"]}
    assert list(rows) == ["cdma", "pdp"]
    assert rows["cdma"]["line"] == {"traces": [1, 1], "suite": [1, 1]}
    assert rows["cdma"]["toggle"] == {"traces": [0, 1], "suite": [1, 1]}
    assert rows["cdma"]["ahead"] == "yes" and rows["cdma"]["only_traces"] == 0
    # PDP: the suite runs line 9 the traces miss, but misses the toggle the traces hit.
    assert rows["pdp"]["line"] == {"traces": [2, 3], "suite": [3, 3]}
    assert rows["pdp"]["toggle"] == {"traces": [1, 1], "suite": [0, 1]}
    assert rows["pdp"]["ahead"] == "no" and rows["pdp"]["only_suite"] == 1
    assert rows["pdp"]["uncovered"]["traces"] == {"count": 1, "shown": "NV_NVDLA_PDP_core.v:9"}
    assert result["suite_ahead_everywhere"] is False
    assert result["pools"]["traces"]["statuses"] == {"PASS": 1, "N/A": 1}
    assert result["pools"]["suite"]["total"]["line"] == [4, 4]
    md = (out / "report.md").read_text()
    assert "| pdp | 2/3 (66.7%) | 3/3 (100.0%) | 1/1 (100.0%) | 0/1 (0.0%) | no | 0 |" in md
    assert json.loads((out / "summary.json").read_text())["units"] == result["units"]
    # Each simulation keeps the points it hit (a coverage file); the merged file has every point.
    hits = rtl.read_dat(out / "traces" / "hits" / "pdp_trace.dat.gz")
    assert sorted(hits.values()) == [1, 1]
    merged = rtl.read_dat(out / "traces" / "merged.dat")
    assert len(merged) == 5 and sum(merged.values()) == 4
    # Which simulations run a line (what a mutation campaign asks).
    assert nvdla_rtl.covering(out, "vmod/nvdla/pdp/NV_NVDLA_PDP_core.v", 6) == {
        "traces": ["na_trace", "pdp_trace"], "suite": ["tests/a.py::test_pdp"]}
    assert nvdla_rtl.covering(out, str(dc(nvdla)), 3) == {"traces": ["na_trace"], "suite": ["tests/a.py::test_conv"]}
    assert nvdla_rtl.covering(out, "vmod/nvdla/pdp/NV_NVDLA_PDP_core.v", 9) == {"suite": ["tests/a.py::test_pdp"]}


def test_lines_only_the_traces_run_are_listed(nvdla, tmp_path):
    out = tmp_path / "out"
    _pool(out, "traces", {"t": [point(pdp(nvdla), 5, "line", 1, "5-6"), point(pdp(nvdla), 20, "line", 1)]})
    _pool(out, "suite", {"s": [point(pdp(nvdla), 5, "line", 1, "5-6"), point(pdp(nvdla), 20, "line", 0),
                               point(pdp(nvdla), 2, "toggle", 1, comment="p:0->1")]})
    [row] = nvdla_rtl.compare(out)["units"]
    assert row["ahead"] == "no" and row["only_traces"] == 1
    assert row["only_traces_shown"] == "NV_NVDLA_PDP_core.v:20"
    assert json.loads((out / "only-traces.json").read_text()) == {"pdp": {"vmod/nvdla/pdp/NV_NVDLA_PDP_core.v": "20"}}
    assert nvdla_rtl.main(["--compare", "--out", str(out)]) == 1  # the suite is not ahead everywhere


def test_capped_lists_say_how_many_more():
    files = {"a/x.v": list(range(1, 31)), "b/y.v": [50, 51, 52]}
    assert nvdla_rtl.capped(files, 31) == "x.v:1-30; y.v:50 (+2 more)"
    assert nvdla_rtl.capped(files, 100) == "x.v:1-30; y.v:50-52"


def test_ahead_rules():
    def rows(lt, ls, tt, ts):
        return {"traces": [lt, 9], "suite": [ls, 9]}, {"traces": [tt, 9], "suite": [ts, 9]}

    assert nvdla_rtl.ahead(*rows(3, 4, 5, 5)) == "yes"
    assert nvdla_rtl.ahead(*rows(3, 3, 5, 5)) == "tie"
    assert nvdla_rtl.ahead(*rows(3, 9, 5, 4)) == "no"


def test_suite_units_are_ours_on_nvdla_rtl_by_level():
    ci = {u.id for u in nvdla_rtl.suite_units("ci")}
    smoke = {u.id for u in nvdla_rtl.suite_units("smoke")}
    assert {"nvdla.rtl.networks", "nvdla.rtl.fuzz.layers", "nvdla.rtl.cbuf", "nvdla.rtl.rules",
            "nvdla.rtl.found"} <= ci
    assert smoke < ci
    assert "nvdla.rtl.traces" not in ci  # NVDLA's traces are the other pool
    assert not any("nv_full" in u or "icarus" in u or "mutation" in u for u in ci)


# ---- the pytest plugin ----------------------------------------------------------------------------------------------
PLUGIN_TEST = '''
import os
from pathlib import Path

import pytest

ENV = "DLA_RTL_COVERAGE_DIR"
POINT = "C '\\x01f\\x02{f}\\x01l\\x023\\x01t\\x02line\\x01h\\x02TOP' {n}\\n"


@pytest.fixture
def no_rtl_coverage(monkeypatch):
    monkeypatch.delenv(ENV, raising=False)  # as regressions/rtl/nvdla_rtl.py does
    yield


@pytest.mark.usefixtures("no_rtl_coverage")
@pytest.mark.parametrize("n", [1, 2])
def test_sim(n):
    d = Path(os.environ[ENV])  # the plugin put it back for the body
    d.mkdir(parents=True, exist_ok=True)
    (d / f"sim-{os.getpid()}-{n}.dat").write_text("# SystemC::Coverage-3\\n" + POINT.format(f=os.environ["DC"], n=n))
'''


def test_the_plugin_keeps_coverage_on_and_reduces_per_test(nvdla, tmp_path):
    (tmp_path / "t").mkdir()
    (tmp_path / "t" / "test_fake.py").write_text(PLUGIN_TEST)
    pool = tmp_path / "suite"
    env = {k: v for k, v in os.environ.items() if k != RTL_COVERAGE_ENV}
    env.update({nvdla_rtl.PLUGIN_ENV: str(pool), "DC": str(dc(nvdla)), "PYTHONPATH": str(rtl.REPO)})
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "regressions.coverage.nvdla_rtl", "-p",
                           "no:cacheprovider", "-p", "no:xdist", "-q", "--rootdir", str(tmp_path / "t"),
                           str(tmp_path / "t" / "test_fake.py")], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    sims = {json.loads(p.read_text())["id"].split("::")[-1]: json.loads(p.read_text())
            for p in (pool / "sims").glob("*.json")}
    assert set(sims) == {"test_sim[1]", "test_sim[2]"}
    assert sims["test_sim[1]"]["status"] == "passed" and sims["test_sim[1]"]["dat"] == 1
    assert sims["test_sim[2]"]["lines"]["nvdla"] == {"vmod/nvdla/cdma/NV_NVDLA_CDMA_dc.v": "3"}
    assert list(rtl.read_dat(pool / nvdla_rtl.UNIVERSE).values()) == [0]
    summary = nvdla_rtl.finish_pool(pool, "suite", 1.0, {}, {})
    assert summary["sims"] == 2 and summary["statuses"] == {"passed": 2}
    assert list(rtl.read_dat(pool / "merged.dat").values()) == [3]
    assert not list((pool / "raw").rglob("*.dat"))


# ---- the regression report ----------------------------------------------------------------------------------------
def _measurement(out: Path, nvdla: Path) -> None:
    """PDP: the traces run line 20, the suite does not but hits the toggle; CDMA: the suite runs lines 3-4."""
    _pool(out, "traces", {"t": [point(pdp(nvdla), 5, "line", 1, "5-6"), point(pdp(nvdla), 20, "line", 1),
                                point(pdp(nvdla), 2, "toggle", 0, comment="p:0->1"),
                                point(dc(nvdla), 3, "line", 0, "3-4"), point(dc(nvdla), 7, "line", 0)]})
    _pool(out, "suite", {"s": [point(pdp(nvdla), 5, "line", 1, "5-6"), point(pdp(nvdla), 20, "line", 0),
                               point(pdp(nvdla), 2, "toggle", 1, comment="p:0->1"),
                               point(dc(nvdla), 3, "line", 1, "3-4"), point(dc(nvdla), 7, "line", 0)]})
    nvdla_rtl.compare(out)


def test_the_report_shows_traces_against_suite_per_unit(nvdla, tmp_path):
    from html.parser import HTMLParser

    from regressions.plan import _rtl_lines
    from regressions.regress.report import _coverage, _coverage_lines, coverage_html

    run = tmp_path / "run"
    _measurement(run / "nvdla.rtl.coverage" / "coverage" / nvdla_rtl.RUN_SUBDIR, nvdla)
    cov = _coverage(run)
    nv = cov["nvdla_rtl"]
    assert nv["pool"] == "suite" and nv["suite_ahead_everywhere"] is False
    assert nv["units"]["pdp"]["line"] == [2, 3] and nv["units"]["cdma"]["line"] == [2, 3]
    assert _rtl_lines(cov)["nvdla:pdp"] == (2, 3)  # what the verification plan cites
    md = "\n".join(_coverage_lines(cov))
    assert "NOT ahead on every unit" in md
    assert "| pdp | 3/3 (100.0%) | 2/3 (66.7%) | 0/1 (0.0%) | 1/1 (100.0%) | no | 1: NV_NVDLA_PDP_core.v:20 |" in md
    assert "| cdma | 0/3 (0.0%) | 2/3 (66.7%) | 0/0 | 0/0 | yes | 0 |" in md
    assert "- cdma (suite, 1): NV_NVDLA_CDMA_dc.v:7" in md

    class Rows(HTMLParser):
        rows: list[list[str]] = []

        def handle_starttag(self, tag, attrs):
            if tag == "tr":
                self.rows.append([])

        def handle_data(self, data):
            if self.rows and self.lasttag in ("td", "th"):
                self.rows[-1].append(data)

    page = coverage_html(cov)
    parser = Rows()
    parser.feed(page)
    [row] = [r for r in parser.rows if r and r[0] == "pdp"]
    assert row[1:] == ["3/3 (100.0%)", "2/3 (66.7%)", "0/1 (0.0%)", "1/1 (100.0%)", "no",
                       "1: NV_NVDLA_PDP_core.v:20", "1: NV_NVDLA_PDP_core.v:20"]
    assert "**" not in page and 'class="fail">no<' in page


def test_the_report_takes_the_latest_measurement_beside_its_runs(nvdla, tmp_path):
    from regressions.regress.report import _coverage, coverage_html

    run = tmp_path / "build" / "regress" / "20261207-000000"
    run.mkdir(parents=True)
    assert _coverage(run)["nvdla_rtl"] == {}
    assert coverage_html({"nvdla_rtl": {}}) == "<p>no coverage collected</p>"
    latest = tmp_path / "build" / "rtl-coverage" / "20261207-010000"
    _measurement(latest, nvdla)
    (latest.parent / "latest").symlink_to(latest.name)
    nv = _coverage(run)["nvdla_rtl"]
    assert Path(nv["source"]).resolve() == latest.resolve() and [r["unit"] for r in nv["rows"]] == ["cdma", "pdp"]
    (latest / "summary.json").write_text(json.dumps({"format": 0}))
    assert "format 0" in _coverage(run)["nvdla_rtl"]["error"]
    assert "format 0" in coverage_html(_coverage(run))


def test_nvdla_coverage_collected_in_a_run_is_listed_per_unit(nvdla, tmp_path):
    from regressions.regress.report import _coverage, _coverage_lines, coverage_html

    write_dat(tmp_path / "u" / "coverage" / "rtl" / "a.dat", point(pdp(nvdla), 5, "line", 1),
              point(pdp(nvdla), 6, "line", 0))
    cov = _coverage(tmp_path)
    assert cov["rtl"]["nvdla_units"] == {"pdp": {"line": [1, 2], "branch": [0, 0], "toggle": [0, 0]}}
    assert "- NVDLA RTL `pdp` (this run): lines 1/2, toggles 0/0" in _coverage_lines(cov)
    assert "<th>pdp</th><td>1/2</td><td>0/0</td><td>NV_NVDLA_PDP_core.v:6</td>" in coverage_html(cov)
