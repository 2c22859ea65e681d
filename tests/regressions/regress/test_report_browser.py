"""The HTML report in a real browser: headless Chromium parses it into the tables we wrote (coverage, the
verification plan) with no raw Markdown left, and ``write_report(screenshot=True)`` attaches ``index.png``."""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from regressions.plan import evaluate, load
from regressions.regress.report import page
from regressions.regress.screenshot import find_browser, rendered_dom, screenshot



@dataclass
class Rec:
    nodeid: str
    area: str
    target: str
    outcome: str


def _summary() -> dict:
    records = [Rec("tests/golden/test_pdp.py::test_split_width_equals_unsplit", "golden", "golden", "passed"),
               Rec("regressions/rtl/test_pdp_rtl.py::test_pdp_matches_golden[1]", "rtl-fuzz", "icarus", "failed")]
    coverage = {"functional": {"PDP": {"hit": 1, "bins": 2, "uncovered": ["split:>2"], "counts": {"split:2": 4, "split:>2": 1}}},
                "rtl": {"available": True, "files": {"rtl/engines/dla_pdp.v": {"line": [90, 100], "toggle": [30, 40],
                                                                                "uncovered_lines": [7, 8]}}}}
    return {"run": "20261207-000000", "interrupted": False, "level": "ci", "launcher": "local", "jobs": 2, "seed": 7,
            "design_hash": "d", "git": "g", "wall_seconds": 3.0, "matrix": {}, "failures": [], "trend": None,
            "slowest": [], "counts": {"passed": 1, "failed": 1, "error": 0, "skipped": 0, "total": 2},
            "coverage": coverage, "plan": evaluate(load(), records, coverage)}


def _browser() -> None:
    assert find_browser(), "headless Chromium is needed (make install installs Debian's chromium; or set DLA_CHROMIUM)"


def test_chromium_renders_the_coverage_and_plan_tables(tmp_path: Path) -> None:
    _browser()
    index = tmp_path / "index.html"
    index.write_text(page(_summary(), {}))
    dom, reason = rendered_dom(index)
    assert dom is not None, reason
    assert "**" not in dom and "| feature |" not in dom
    assert "<h2>Verification plan</h2>" in dom and "PDP split width" in dom
    assert 'class="pass">verified (1/1)</td>' in dom  # pdp.split_width on golden
    assert "rtl/engines/dla_pdp.v" in dom and "90/100" in dom


def test_write_report_attaches_a_screenshot_of_the_page(tmp_path: Path) -> None:
    _browser()
    from PIL import Image

    index, png = tmp_path / "index.html", tmp_path / "index.png"
    index.write_text(page(_summary(), {}))
    assert screenshot(index, png) == ""
    image = np.asarray(Image.open(png).convert("L"))
    assert image.shape[1] == 1400 and image.shape[0] >= 900
    assert (image < 128).mean() > 0.002  # text was drawn, not a blank page
    assert len(np.unique(image)) > 8  # table shading and anti-aliased text


def test_a_missing_browser_is_a_reason_not_an_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DLA_CHROMIUM", "no-such-browser-here")
    index = tmp_path / "index.html"
    index.write_text("<html><body>x</body></html>")
    assert "no headless Chromium" in screenshot(index, tmp_path / "index.png")
    assert not (tmp_path / "index.png").exists()
