"""Per-test result records: appended as JSON lines while tests finish, merged into JUnit XML afterwards.

Records are the unit of exchange between launchers and the report. Writing one line per finished test
(flushed at once) is what makes an interrupted or crashed run still report everything that ran.
"""
from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path

from junitparser import Error, Failure, JUnitXml, Skipped, TestCase, TestSuite

from dlaio import write_atomic

RESULTS = "results.jsonl"
#: Outcomes, worst first (the order a summary lists them in).
OUTCOMES = ("error", "failed", "passed", "skipped")
BAD = ("error", "failed")


@dataclass
class Record:
    nodeid: str
    unit: str
    area: str
    target: str
    outcome: str  # one of OUTCOMES
    duration: float = 0.0
    #: Failure text (traceback, assertion) or skip reason.
    longrepr: str = ""
    worker: str = ""
    seed: int | None = None
    #: Report-relative path of the test's artifact folder (failure log, waveforms), if any.
    artifacts: str | None = None
    #: Extra ``record_property`` values of the test (simulator log paths, waveforms, cycles ...).
    properties: dict[str, str] = field(default_factory=dict)
    finished: float = 0.0

    @property
    def message(self) -> str:
        """First meaningful line of ``longrepr``: the one-line reason shown in tables."""
        lines = [ln.strip() for ln in self.longrepr.splitlines() if ln.strip()]
        for ln in lines:
            if ln.startswith("E "):
                return ln[1:].strip()
        return lines[-1] if lines else ""


class RecordWriter:
    """Appends records to ``<dir>/results.jsonl``; each line is flushed before the next test starts."""

    def __init__(self, directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self.path = directory / RESULTS
        self._f = open(self.path, "a", encoding="utf-8")

    def write(self, rec: Record) -> None:
        self._f.write(json.dumps(asdict(rec)) + "\n")
        self._f.flush()
        os.fsync(self._f.fileno())

    def close(self) -> None:
        self._f.close()


def read_records(run_dir: Path) -> list[Record]:
    """Every record under ``run_dir`` (all launchers, all units); the last record of a node id wins.
    A torn last line (a process killed mid-write) is ignored."""
    by_id: dict[str, Record] = {}
    for path in sorted(run_dir.rglob(RESULTS)):
        for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
            try:
                rec = Record(**json.loads(line))
            except (json.JSONDecodeError, TypeError):
                continue
            by_id[rec.nodeid] = rec
    return sorted(by_id.values(), key=lambda r: (r.unit, r.nodeid))


def _case(rec: Record) -> TestCase:
    path, _, name = rec.nodeid.partition("::")
    case = TestCase(name or path, classname=path.removesuffix(".py").replace("/", "."), time=round(rec.duration, 3))
    if rec.outcome == "failed":
        case.result = [Failure(rec.message[:500])]
        case.result[0].text = rec.longrepr
    elif rec.outcome == "error":
        case.result = [Error(rec.message[:500])]
        case.result[0].text = rec.longrepr
    elif rec.outcome == "skipped":
        case.result = [Skipped(rec.longrepr[:500])]
    if rec.properties or rec.seed is not None or rec.artifacts:
        props = dict(rec.properties)
        if rec.seed is not None:
            props["seed"] = str(rec.seed)
        if rec.artifacts:
            props["artifacts"] = rec.artifacts
        # junitparser has no per-case properties API; JUnit readers (Jenkins, GitLab) accept this form.
        from xml.etree import ElementTree as ET

        el = ET.SubElement(case._elem, "properties")
        for k, v in sorted(props.items()):
            ET.SubElement(el, "property", name=k, value=str(v))
    return case


def write_junit(records: list[Record], path: Path, properties: dict[str, str] | None = None) -> None:
    """Standard JUnit XML: one ``testsuite`` per unit (named by unit id), one ``testcase`` per test."""
    xml = JUnitXml(name="dla-regress")
    suites: dict[str, TestSuite] = {}
    for rec in records:
        suite = suites.get(rec.unit)
        if suite is None:
            suite = suites[rec.unit] = TestSuite(rec.unit)
            for k, v in (properties or {}).items():
                suite.add_property(k, str(v))
            suite.add_property("area", rec.area)
            suite.add_property("target", rec.target)
        suite.add_testcase(_case(rec))
    for suite in suites.values():
        suite.update_statistics()
        xml.add_testsuite(suite)
    xml.update_statistics()
    write_atomic(path, lambda f: xml.write(f, pretty=True))
