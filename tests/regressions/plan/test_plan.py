"""The verification plan (``regressions/plan``): the repository's plan is consistent with the functional bins,
the golden-semantics notes and the test tree, and a run's records become the per-target status the report
shows."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from regressions.plan import (NOT_APPLICABLE, NOT_RUN, NOT_VERIFIED, PARTIAL, VERIFIED, PlanError, check_plan, doc_bullets,
                              evaluate, load, target_of)
from regressions.plan.render import plan_html, plan_markdown
from regressions.regress.report import page


@dataclass
class Rec:
    nodeid: str
    area: str
    target: str
    outcome: str


def _write(tmp_path: Path, text: str) -> Path:
    (tmp_path / "a.toml").write_text(text)
    return tmp_path


PLAN = """
[[feature]]
id = "pdp.split"
name = "PDP split width"
tests = ["tests/golden/test_pdp.py::test_split_*"]
fuzz = ["regressions/fuzz/test_engines.py::test_pdp_split_*"]
bins = ["PDP:split:2"]
targets = ["golden", "nvdla-rtl"]

[[feature]]
id = "sdp.rtl"
name = "SDP on our RTL"
tests = ["regressions/rtl/test_sdp_rtl.py::*"]
targets = ["rtl"]
"""


def test_the_repository_plan_is_consistent() -> None:
    """Every bin it names exists, every golden-semantics bullet is cited, every pattern names test files and
    every test file is named by a feature."""
    assert check_plan() == []
    features = load()
    assert len(features) >= 60
    assert len({f.id for f in features}) == len(features)


def test_a_bullet_nobody_cites_and_a_bad_pattern_are_problems(tmp_path: Path) -> None:
    features = [f for f in load() if "docs/golden-semantics.md#sdp/2" not in f.source]
    problems = check_plan(features)
    assert "docs/golden-semantics.md#sdp/2: no feature cites this bullet" in problems
    bad = load(_write(tmp_path, PLAN.replace("test_pdp.py", "test_nothing.py").replace("PDP:split:2", "PDP:split:9")))
    problems = check_plan(bad)
    assert any("pattern 'tests/golden/test_nothing.py::test_split_*' names no test file" in p for p in problems)
    assert any("bin 'PDP:split:9': no such bin of PDP" in p for p in problems)


def test_doc_bullets_number_top_level_bullets_per_section(tmp_path: Path) -> None:
    doc = tmp_path / "d.md"
    doc.write_text("# T\n- intro\n## Convolution (CDMA)\n- a\n  - nested\n- b\n## SDP\n- c\n")
    assert doc_bullets(doc) == [f"{doc}#convolution/1", f"{doc}#convolution/2", f"{doc}#sdp/1"]


@pytest.mark.parametrize("text, message", [
    ('[[feature]]\nid = "x"\nname = "X"\n', "names no test"),
    ('[[feature]]\nid = "x"\nname = "X"\ntests = ["a"]\ncolour = 1\n', "unknown key(s) colour"),
    ('[[feature]]\nid = "x"\nname = "X"\ntests = ["a"]\ntargets = ["fpga"]\n', "unknown target(s) fpga"),
    ('[[feature]]\nid = "x"\nname = "X"\ntests = ["a"]\n[[feature]]\nid = "x"\nname = "Y"\ntests = ["b"]\n', "also used"),
    ('[[feature]\n', "a.toml"),
])
def test_malformed_plans_are_one_line_errors_naming_file_and_feature(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(PlanError, match=None) as info:
        load(_write(tmp_path, text))
    assert message in str(info.value) and "\n" not in str(info.value) and str(info.value).startswith("a.toml")


def test_records_map_to_targets() -> None:
    assert target_of("nvdla-rtl-traces", "verilator") == "nvdla-rtl"
    assert target_of("rtl-traces", "icarus") == "rtl"
    assert target_of("golden", "golden") == target_of("tooling", "host") == "golden"


def test_status_per_target_from_records_and_bins(tmp_path: Path) -> None:
    features = load(_write(tmp_path, PLAN))
    records = [
        Rec("tests/golden/test_pdp.py::test_split_width_equals_unsplit", "golden", "golden", "passed"),
        Rec("regressions/fuzz/test_engines.py::test_pdp_split_mode_is_programmed[nv_small]", "fuzz", "golden", "passed"),
        Rec("regressions/rtl/test_sdp_rtl.py::test_sdp_random_layers_match_golden", "rtl-fuzz", "icarus", "failed"),
        Rec("tests/golden/test_pdp.py::test_average_by_hand", "golden", "golden", "passed"),
    ]
    hit = {"functional": {"PDP": {"counts": {"split:2": 3}}}}
    plan = evaluate(features, records, hit)
    split, sdp = plan["features"]
    assert split["targets"]["golden"]["status"] == VERIFIED and split["targets"]["golden"]["passed"] == 2
    assert split["targets"]["nvdla-rtl"]["status"] == NOT_RUN  # required there, never selected there
    assert split["targets"]["rtl"]["status"] == NOT_APPLICABLE
    assert sdp["targets"]["rtl"]["status"] == NOT_VERIFIED  # only a failure
    assert plan["unmapped"] == ["tests/golden/test_pdp.py::test_average_by_hand"]
    assert plan["counts"]["golden"] == {VERIFIED: 1, PARTIAL: 0, NOT_VERIFIED: 0, NOT_RUN: 0}
    assert plan["counts"]["nvdla-rtl"][NOT_RUN] == 1
    missed = evaluate(features, records, {"functional": {"PDP": {"counts": {"split:2": 0}}}})
    assert missed["features"][0]["targets"]["golden"]["status"] == PARTIAL
    assert missed["features"][0]["bins_missed"] == ["PDP:split:2"]
    # no functional coverage collected: bins are unknown, not missed
    assert evaluate(features, records, {})["features"][0]["targets"]["golden"]["status"] == VERIFIED


def test_the_report_shows_the_plan_as_a_table(tmp_path: Path) -> None:
    features = load(_write(tmp_path, PLAN))
    records = [Rec("tests/golden/test_pdp.py::test_split_a", "golden", "golden", "passed"),
               Rec("tests/x.py::test_orphan", "golden", "golden", "passed")]
    plan = evaluate(features, records, {"functional": {"PDP": {"counts": {}}}})
    html = plan_html(plan)
    assert '<td class="part">partial (1/1)</td>' in html and "PDP split width" in html
    assert "<code>tests/x.py::test_orphan</code>" in html and "**" not in html
    md = "\n".join(plan_markdown(plan))
    assert "| PDP split width (`pdp.split`) | partial (1/1) | n/a | not run | 0/1 |" in md
    assert "Bins the plan needs that no operation hit: `PDP:split:2` (pdp.split)" in md
    summary = {"run": "r", "interrupted": False, "counts": {"passed": 1, "failed": 0, "error": 0, "skipped": 0, "total": 1},
               "level": "ci", "launcher": "local", "jobs": 1, "seed": 1, "design_hash": "d", "git": "g", "matrix": {},
               "failures": [], "trend": None, "slowest": [], "coverage": {}, "wall_seconds": 1.0, "plan": plan}
    assert "<h2>Verification plan</h2><ul>" in page(summary, {})
