"""The HTML report renders its coverage section as HTML tables, not the Markdown the ``summary.md`` lines use
(a page once showed ``**BDMA** functional: 10/11 bins`` verbatim)."""
from __future__ import annotations

import re
from html.parser import HTMLParser

from regressions.regress.report import coverage_html

COVERAGE = {
    "functional": {"BDMA": {"hit": 10, "bins": 11, "uncovered": ["<line_repeat>"]},
                   "SDP": {"hit": 4, "bins": 4, "uncovered": []}},
    "rtl": {"available": True, "files": {"rtl/sdp.v": {"line": [90, 100], "toggle": [300, 400],
                                                       "uncovered_lines": list(range(1, 51))}}},
}


class _Cells(HTMLParser):
    """Table rows as lists of cell texts."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: list[list[str]] = []
        self.cell: list[str] | None = None

    def handle_starttag(self, tag, attrs) -> None:
        if tag == "tr":
            self.rows.append([])
        elif tag in ("td", "th"):
            self.cell = []

    def handle_endtag(self, tag) -> None:
        if tag in ("td", "th") and self.cell is not None:
            self.rows[-1].append("".join(self.cell))
            self.cell = None

    def handle_data(self, data) -> None:
        if self.cell is not None:
            self.cell.append(data)


def test_coverage_is_tables_without_markdown() -> None:
    page = coverage_html(COVERAGE)
    assert "**" not in page and "`" not in page and not re.search(r"^\s*- ", page, re.M)
    cells = _Cells()
    cells.feed(page)
    assert ["BDMA", "10/11", "<line_repeat>"] in cells.rows  # escaped in the page, text in the cell
    assert ["SDP", "4/4", "\u2014"] in cells.rows
    (rtl,) = [r for r in cells.rows if r and r[0] == "rtl/sdp.v"]
    assert rtl[1:3] == ["90/100", "300/400"] and rtl[3].endswith("40 (+10)")
    assert 'class="fail">10/11' in page and 'class="pass">4/4' in page


def test_coverage_errors_and_absent_rtl_are_one_paragraph() -> None:
    assert coverage_html({"error": "coverage unavailable: <x>"}) == "<p>coverage unavailable: &lt;x&gt;</p>"
    assert coverage_html({"rtl": {"available": False, "reason": "no simulator"}}) == \
        "<p>RTL coverage: no simulator</p>"
    assert coverage_html({}) == "<p>no coverage collected</p>"
