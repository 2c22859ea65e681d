"""pytest plugin of ``make regress`` (``-p regressions.regress.plugin``).

- keeps only the tests of the selected units (``--regress-units``: a JSON plan, see ``regress.local``);
- writes one result record per finished test to ``<--regress-out>/results.jsonl`` as it finishes (in the
  xdist controller, which also sees "worker crashed" reports), so an interrupted run loses nothing;
- saves each failing test's full report under ``<out>/artifacts/<test>/log.txt``.

Coverage is ``regressions.coverage.plugin``'s job (loaded beside this one, on at levels with
``DLA_COVERAGE=1``).
"""
from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest

from dlaio import write_atomic
from regressions.regress.lists import Matcher, Unit
from runtime.processes import die_with_parent, exit_text
from regressions.regress.results import Record, RecordWriter


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("regress")
    group.addoption("--regress-units", metavar="PLAN", help="JSON plan: all units, the selected ids, seed")
    group.addoption("--regress-out", metavar="DIR", help="where results.jsonl, artifacts and coverage go")
    group.addoption("--regress-only", metavar="UNIT", help="run only this unit of the plan (farm launchers)")


class RegressPlugin:
    def __init__(self, config: pytest.Config, plan: dict, out: Path) -> None:
        self.config = config
        self.out = out
        self.matcher = Matcher([Unit.from_json(u) for u in plan["units"]])
        only = config.getoption("--regress-only")
        self.selected = {only} if only else set(plan["selected"])
        self.seed = plan.get("seed")
        self.durations: dict[str, float] = plan.get("durations") or {}
        self.worker = getattr(config, "workerinput", {}).get("workerid", "")
        if self.worker:  # an xdist worker must not outlive its controller (kill -9 of the run)
            die_with_parent()
        #: Only the process that sees every report writes records: the xdist controller, or a lone pytest.
        self.writer = RecordWriter(out) if not self.worker else None
        self._partial: dict[str, Record] = {}

    # ---- selection -----------------------------------------------------------------------------
    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, config: pytest.Config, items: list[pytest.Item]) -> None:
        keep, drop = [], []
        for item in items:
            unit = self.matcher.unit_of(item.nodeid)
            (keep if unit is not None and unit.id in self.selected else drop).append(item)
        if drop:
            config.hook.pytest_deselected(items=drop)
        if self.durations:
            # Longest first (durations of the previous run; a stable sort keeps the file order of equals),
            # so a long test does not start last while the other workers idle. Every xdist worker sorts
            # the same way, so their collections stay identical.
            keep.sort(key=lambda item: -self.durations.get(item.nodeid, UNKNOWN_SECONDS))
        items[:] = keep

    # ---- results -------------------------------------------------------------------------------
    def _record(self, nodeid: str) -> Record:
        rec = self._partial.get(nodeid)
        if rec is None:
            unit = self.matcher.unit_of(nodeid)
            rec = Record(nodeid=nodeid, unit=unit.id if unit else "unlisted", area=unit.area if unit else "?",
                         target=unit.target if unit else "?", outcome="passed", seed=self.seed)
            self._partial[nodeid] = rec
        return rec

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if self.writer is None:
            return
        rec = self._record(report.nodeid)
        rec.duration += report.duration
        node = getattr(report, "node", None)  # the xdist worker that ran it
        if node is not None:
            rec.worker = str(node.workerinput.get("workerid", ""))
        for key, value in report.user_properties:
            rec.properties[str(key)] = str(value)
        if report.failed:
            # A failing call is a failure; failing set-up/tear-down (or a crashed worker: when="???") an error.
            outcome = "failed" if report.when == "call" else "error"
            if rec.outcome not in ("failed", "error"):
                rec.outcome = outcome
            rec.longrepr += ("\n" if rec.longrepr else "") + self._longrepr(report)
        elif report.skipped and rec.outcome == "passed":
            rec.outcome = "skipped"
            rec.longrepr = _skip_reason(report)
        if report.when == "teardown" or report.when not in ("setup", "call"):
            self._finish(report, rec)

    @staticmethod
    def _longrepr(report: pytest.TestReport) -> str:
        text = str(report.longreprtext or "")
        if report.when not in ("setup", "call", "teardown"):
            text = f"worker {_worker_end(getattr(report, 'node', None))} while running this test\n{text}"
        return text

    def _finish(self, report: pytest.TestReport, rec: Record) -> None:
        del self._partial[rec.nodeid]
        rec.finished = time.time()
        if rec.outcome in ("failed", "error"):
            rec.artifacts = self._save_artifacts(report, rec)
        assert self.writer is not None
        self.writer.write(rec)

    def _save_artifacts(self, report: pytest.TestReport, rec: Record) -> str:
        """The failure's full text, captured output and the paths it names, in one folder per test."""
        name = re.sub(r"[^A-Za-z0-9_.\-\[\]]+", "_", rec.nodeid)[-150:]
        folder = self.out / "artifacts" / name
        folder.mkdir(parents=True, exist_ok=True)
        parts = [f"# {rec.nodeid}", f"outcome: {rec.outcome}", f"seed: {rec.seed}", "", rec.longrepr]
        for title, content in report.sections:
            parts += ["", f"---- {title} ----", content]
        text = "\n".join(parts)
        write_atomic(folder / "log.txt", text)
        # Simulator logs, waveforms and results the failure names (tb keeps each simulation's folder).
        named = sorted({m for m in _PATHS.findall(text) if Path(m).is_file()})
        for i, path in enumerate(named[:MAX_LINKS]):
            rec.properties[f"{'waves' if path.endswith(_WAVES) else 'log'}{i}"] = path
        return str(folder)

    def pytest_sessionfinish(self) -> None:
        # Tests whose teardown never reported (interrupted mid-test) are written with what is known.
        if self.writer is not None:
            for rec in list(self._partial.values()):
                if rec.outcome == "passed":
                    rec.outcome = "error"
                    rec.longrepr += "\ninterrupted before the test finished"
                rec.finished = time.time()
                self.writer.write(rec)
            self._partial.clear()


def _worker_end(node: object) -> str:
    """How a crashed xdist worker ended ("killed by SIGKILL", "exit 3"), from its process (execnet popen
    gateway); "crashed" when that cannot be known."""
    popen = getattr(getattr(getattr(node, "gateway", None), "_io", None), "popen", None)
    if popen is None:
        return "crashed"
    try:
        return exit_text(popen.wait(timeout=10))
    except Exception:  # noqa: BLE001 - still running, or not a Popen: say what is known
        return "crashed"


def _skip_reason(report: pytest.TestReport) -> str:
    longrepr = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return str(longrepr[2]).removeprefix("Skipped: ")
    return str(report.longreprtext or "")


#: Absolute paths of logs and waveforms in a failure's text, linked from the report.
_WAVES = (".vcd", ".fst", ".ghw")
_PATHS = re.compile(r"(/[^\s:'\"()\[\]]+\.(?:log|vcd|fst|ghw|xml))")
MAX_LINKS = 8

#: Ordering weight of a test the previous run did not have.
UNKNOWN_SECONDS = 1.0

_PLUGIN_KEY = pytest.StashKey[RegressPlugin]()


def pytest_configure(config: pytest.Config) -> None:
    plan_path, out = config.getoption("--regress-units"), config.getoption("--regress-out")
    if not plan_path or not out:
        return
    plan = json.loads(Path(plan_path).read_text())
    plugin = RegressPlugin(config, plan, Path(out))
    config.stash[_PLUGIN_KEY] = plugin
    config.pluginmanager.register(plugin, "regress-plugin")


def pytest_unconfigure(config: pytest.Config) -> None:
    plugin = config.stash.get(_PLUGIN_KEY, None)
    if plugin is not None and plugin.writer is not None:
        plugin.writer.close()
