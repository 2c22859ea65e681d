"""The report of a regression run, built from its records alone (so any launcher, and any interrupted run,
gets the same report): ``junit.xml``, ``summary.json``, ``summary.md``, ``index.html``, ``failed.txt``,
plots as PNG, and the trend against the previous run.
"""
from __future__ import annotations

import html
import json
import os
import time
from collections import Counter, defaultdict
from pathlib import Path

from dlaio import OutputError, write_atomic
from regressions.plan.render import plan_html, plan_markdown, plan_summary
from regressions.regress.lists import REPO
from regressions.regress.plan import Plan
from regressions.regress.results import BAD, OUTCOMES, Record, read_records, write_junit

SLOWEST = 15
BENCH_RESULTS = REPO / "build" / "bench" / "results.json"


def _counts(records: list[Record]) -> dict[str, int]:
    c = Counter(r.outcome for r in records)
    return {o: c.get(o, 0) for o in OUTCOMES} | {"total": len(records)}


def previous_summary(run_dir: Path) -> dict | None:
    """The newest earlier run's summary in the same output folder."""
    runs = sorted((p for p in run_dir.parent.iterdir() if p.is_dir() and p != run_dir
                   and (p / "summary.json").is_file() and p.name < run_dir.name), key=lambda p: p.name)
    for p in reversed(runs):
        try:
            return json.loads((p / "summary.json").read_text())
        except (OSError, json.JSONDecodeError):
            continue
    return None


def history(run_dir: Path, limit: int = 30) -> list[dict]:
    out = []
    for p in sorted(run_dir.parent.iterdir()):
        if p.is_dir() and (p / "summary.json").is_file() and p.name <= run_dir.name:
            try:
                s = json.loads((p / "summary.json").read_text())
            except (OSError, json.JSONDecodeError):
                continue
            out.append({"run": s["run"], "level": s["level"], "wall_seconds": s["wall_seconds"], **s["counts"]})
    return out[-limit:]


def _trend(records: list[Record], prev: dict | None) -> dict | None:
    if prev is None:
        return None
    before = {f["nodeid"]: f["outcome"] for f in prev.get("failures", [])}
    now_bad = {r.nodeid for r in records if r.outcome in BAD}
    ran = {r.nodeid for r in records}
    return {
        "previous": prev["run"],
        "previous_level": prev["level"],
        "delta": {k: v - prev["counts"].get(k, 0) for k, v in _counts(records).items()},
        "wall_delta": None,
        "new_failures": sorted(now_bad - set(before)),
        "fixed": sorted(n for n in before if n in ran and n not in now_bad),
        "still_failing": sorted(now_bad & set(before)),
    }


def _coverage(run_dir: Path) -> dict:
    """Functional and RTL coverage of the run, plus NVDLA's RTL per unit, NVDLA's traces against our suites
    (``nvdla_rtl``: a measurement inside the run, else the latest ``make rtl-coverage``; ``{}`` without one)."""
    try:
        from regressions.coverage.functional import summarize
        from regressions.coverage.nvdla_rtl import report_view
    except ImportError as e:
        return {"error": f"coverage unavailable: {e}"}
    try:
        cov = summarize(run_dir)
    except Exception as e:  # a coverage problem must not cost the report
        return {"error": f"coverage summary failed: {type(e).__name__}: {e}"}
    try:
        cov["nvdla_rtl"] = report_view(run_dir)
    except Exception as e:  # nor a broken NVDLA measurement
        cov["nvdla_rtl"] = {"error": f"NVDLA RTL coverage unreadable: {type(e).__name__}: {e}"}
    return cov


def summarize_run(run_dir: Path, plan: Plan, records: list[Record], *, finished: float, interrupted: bool) -> dict:
    matrix: dict[str, dict[str, dict[str, int]]] = defaultdict(dict)
    by_cell: dict[tuple[str, str], list[Record]] = defaultdict(list)
    by_unit: dict[str, list[Record]] = defaultdict(list)
    for r in records:
        by_cell[(r.area, r.target)].append(r)
        by_unit[r.unit].append(r)
    for (area, target), recs in sorted(by_cell.items()):
        matrix[area][target] = _counts(recs)
    units = {}
    for u in plan.selected_units():
        recs = by_unit.get(u.id, [])
        units[u.id] = {"area": u.area, "target": u.target, "counts": _counts(recs),
                       "seconds": round(sum(r.duration for r in recs), 2)}
    not_run = sorted(u for u, info in units.items() if info["counts"]["total"] == 0)
    prev = previous_summary(run_dir)
    wall = finished - plan.started
    trend = _trend(records, prev)
    if trend is not None:
        trend["wall_delta"] = round(wall - prev["wall_seconds"], 1)
    failures = [{"nodeid": r.nodeid, "unit": r.unit, "area": r.area, "target": r.target, "outcome": r.outcome,
                 "message": r.message, "seed": r.seed,
                 "artifacts": os.path.relpath(r.artifacts, run_dir) if r.artifacts else None,
                 "properties": r.properties} for r in records if r.outcome in BAD]
    budget = plan.level.budget_minutes
    return {
        "run": run_dir.name,
        "level": plan.level.name,
        "launcher": plan.launcher,
        "jobs": plan.jobs,
        "seed": plan.seed,
        "design_hash": plan.design_hash,
        "git": plan.git,
        "host": plan.host,
        "command": plan.command,
        "rerun_of": plan.rerun_of,
        "started": plan.started,
        "finished": finished,
        "wall_seconds": round(wall, 1),
        "budget_minutes": budget,
        "over_budget": bool(budget and wall > budget * 60),
        "interrupted": interrupted,
        "counts": _counts(records),
        "matrix": matrix,
        "units": units,
        "not_run": not_run,
        "slowest": [{"nodeid": r.nodeid, "seconds": round(r.duration, 2), "outcome": r.outcome}
                    for r in sorted(records, key=lambda r: -r.duration)[:SLOWEST]],
        "failures": failures,
        "trend": trend,
        "coverage": (coverage := _coverage(run_dir)),
        "plan": plan_summary(records, coverage),
    }


# ---- plots -------------------------------------------------------------------------------------------
def write_plots(run_dir: Path, summary: dict) -> dict[str, str]:
    """PNG plots: per-area time and the trend over earlier runs; the latest ``make bench`` results."""
    plots: dict[str, str] = {}
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return plots
    runs = history(run_dir)
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 3.6))
    seconds: dict[str, float] = defaultdict(float)
    for u in summary["units"].values():
        seconds[f'{u["area"]}/{u["target"]}'] += u["seconds"]
    names = sorted(seconds, key=seconds.get)
    ax1.barh(names, [seconds[n] for n in names], color="#4878a8")
    ax1.set_xlabel("test seconds (summed over workers)")
    ax1.set_title("time per area / target")
    xs = range(len(runs))
    ax2.plot(xs, [r["wall_seconds"] for r in runs], "o-", label="wall s")
    ax2.set_ylabel("wall seconds")
    ax3 = ax2.twinx()
    ax3.plot(xs, [r["failed"] + r["error"] for r in runs], "s--", color="#c44e52", label="failures")
    ax3.set_ylabel("failures + errors")
    ax2.set_xticks(list(xs), [f'{r["run"][-6:]}\n{r["level"]}' for r in runs], fontsize=7)
    ax2.set_title("trend over runs")
    fig.tight_layout()
    write_atomic(run_dir / "trend.png", lambda f: fig.savefig(f, format="png", dpi=90))
    plt.close(fig)
    plots["trend"] = "trend.png"
    if BENCH_RESULTS.is_file():
        try:
            from regressions.bench_plot import plot

            plot(json.loads(BENCH_RESULTS.read_text()), run_dir / "bench.png")
            plots["bench"] = "bench.png"
        except Exception as e:  # an old or partial results.json must not cost the report
            summary.setdefault("notes", []).append(f"bench plot skipped: {type(e).__name__}: {e}")
    return plots


# ---- text renderings ---------------------------------------------------------------------------------
def _cell(c: dict[str, int]) -> str:
    bad = c["failed"] + c["error"]
    return f'{c["passed"]}/{c["total"]}' + (f" ({bad} FAIL)" if bad else "") + (f' ({c["skipped"]} skipped)' if c["skipped"] else "")


def _targets(summary: dict) -> list[str]:
    return sorted({t for row in summary["matrix"].values() for t in row})


def _nvdla_uncovered(unit: dict) -> str:
    from regressions.coverage.nvdla_rtl import capped

    return capped({f: i["uncovered_lines"] for f, i in unit.get("files", {}).items() if i["uncovered_lines"]}, 40)


def _coverage_lines(cov: dict) -> list[str]:
    lines = []
    if "error" in cov:
        return [f"- {cov['error']}"]
    for engine, info in sorted(cov.get("functional", {}).items()):
        lines.append(f"- **{engine}** functional: {info['hit']}/{info['bins']} bins")
        if info.get("uncovered"):
            lines.append(f"  - uncovered: {', '.join(info['uncovered'])}")
    rtl = cov.get("rtl", {})
    if rtl.get("available"):
        for f, info in sorted(rtl.get("files", {}).items()):
            (lh, lt), (th, tt) = info["line"], info["toggle"]
            lines.append(f"- RTL `{f}`: lines {lh}/{lt}, toggles {th}/{tt}")
            if info.get("uncovered_lines"):
                shown = info["uncovered_lines"][:40]
                more = len(info["uncovered_lines"]) - len(shown)
                lines.append(f"  - uncovered lines: {', '.join(map(str, shown))}" + (f" (+{more})" if more > 0 else ""))
        for unit, info in (rtl.get("nvdla") or {}).get("units", {}).items():
            (lh, lt), (th, tt) = info["line"], info["toggle"]
            lines.append(f"- NVDLA RTL `{unit}` (this run): lines {lh}/{lt}, toggles {th}/{tt}")
            if lh < lt:
                lines.append(f"  - uncovered lines: {_nvdla_uncovered(info)}")
    elif rtl:
        lines.append(f"- RTL coverage: {rtl.get('reason', 'not collected')}")
    nv = cov.get("nvdla_rtl") or {}
    if "error" in nv:
        lines.append(f"- {nv['error']}")
    elif nv:
        from regressions.coverage.nvdla_rtl import markdown as nvdla_markdown

        verdict = "ahead on every unit" if nv["suite_ahead_everywhere"] else "NOT ahead on every unit"
        lines += ["", f"### NVDLA nv_small RTL per unit: NVDLA's traces vs our suites ({verdict})", "",
                  f"`{nv['source']}` (git `{nv.get('git')}`, "
                  f"{time.strftime('%Y-%m-%d %H:%M', time.localtime(nv['generated'] or 0))}; "
                  f"`make rtl-coverage`)", "",
                  *nvdla_markdown({"pools": nv["pools"], "units": nv["rows"]})]
    return lines


def coverage_html(cov: dict) -> str:
    """The coverage section as HTML tables (the Markdown lines' content): functional bins per engine with the
    uncovered ones, RTL line/toggle coverage per file with its uncovered lines, and NVDLA's RTL per unit
    (collected in this run; NVDLA's traces against our suites, ``_nvdla_rtl_html``)."""
    e = html.escape
    if "error" in cov:
        return f"<p>{e(cov['error'])}</p>"
    out = []
    functional = cov.get("functional", {})
    if functional:
        rows = []
        for engine, info in sorted(functional.items()):
            cls = "pass" if info["hit"] == info["bins"] else "fail"
            rows.append(f'<tr><th>{e(engine)}</th><td class="{cls}">{info["hit"]}/{info["bins"]}</td>'
                        f'<td>{e(", ".join(info.get("uncovered") or [])) or "&mdash;"}</td></tr>')
        out.append("<h3>Functional bins</h3><table><tr><th>engine</th><th>hit</th><th>uncovered</th></tr>"
                   + "".join(rows) + "</table>")
    rtl = cov.get("rtl", {})
    if rtl.get("available"):
        rows = []
        for f, info in sorted(rtl.get("files", {}).items()):
            (lh, lt), (th, tt) = info["line"], info["toggle"]
            lines = info.get("uncovered_lines") or []
            shown = ", ".join(map(str, lines[:40])) + (f" (+{len(lines) - 40})" if len(lines) > 40 else "")
            rows.append(f"<tr><td><code>{e(f)}</code></td><td>{lh}/{lt}</td><td>{th}/{tt}</td>"
                        f"<td>{e(shown) or '&mdash;'}</td></tr>")
        out.append("<h3>RTL</h3><table><tr><th>file</th><th>lines</th><th>toggles</th><th>uncovered lines</th></tr>"
                   + "".join(rows) + "</table>")
    elif rtl:
        out.append(f"<p>RTL coverage: {e(rtl.get('reason', 'not collected'))}</p>")
    units = (rtl.get("nvdla") or {}).get("units", {}) if rtl.get("available") else {}
    if units:
        rows = [f"<tr><th>{e(u)}</th><td>{i['line'][0]}/{i['line'][1]}</td><td>{i['toggle'][0]}/{i['toggle'][1]}</td>"
                f"<td>{e(_nvdla_uncovered(i)) or '&mdash;'}</td></tr>" for u, i in units.items()]
        out.append("<h3>NVDLA RTL (this run)</h3><table><tr><th>unit</th><th>lines</th><th>toggles</th>"
                   "<th>uncovered lines</th></tr>" + "".join(rows) + "</table>")
    out.append(_nvdla_rtl_html(cov.get("nvdla_rtl") or {}))
    return "".join(out) or "<p>no coverage collected</p>"


def _nvdla_rtl_html(nv: dict) -> str:
    """NVDLA's RTL per unit, NVDLA's traces against our suites: lines and toggles of each, whether the suite is
    ahead, the lines only the traces run and the suite's uncovered lines (capped; all in the measurement)."""
    e = html.escape
    if not nv:
        return ""
    if "error" in nv:
        return f"<p>{e(nv['error'])}</p>"

    def fig(pair: list[int] | None) -> str:
        return "" if not pair else f"{pair[0]}/{pair[1]}" + (f" ({100 * pair[0] / pair[1]:.1f}%)" if pair[1] else "")

    pools = nv["pools"]
    rows = []
    for r in nv["rows"]:
        verdict = r.get("ahead", "")
        cls = "pass" if verdict in ("yes", "tie") else "fail"
        only = ""
        if "only_traces" in r:
            only = f"{r['only_traces']}" + (f": {r['only_traces_shown']}" if r["only_traces"] else "")
        unc = (r.get("uncovered") or {}).get(nv.get("pool") or "suite") or {}
        figures = "".join(f"<td>{e(fig(r[k].get(p)))}</td>" for k in ("line", "toggle") for p in ("traces", "suite"))
        rows.append(f"<tr><th>{e(r['unit'])}</th>{figures}"
                    f'<td class="{cls}">{e(verdict)}</td><td>{e(only) or "&mdash;"}</td>'
                    f"<td>{unc.get('count', 0)}: {e(unc.get('shown') or '') or '&mdash;'}</td></tr>")
    about = "".join(f"<li>{e(p)}: {info.get('sims')} simulations/tests, {info.get('seconds')} s, lines "
                    f"{e(fig(info['total'].get('line')))}, toggles {e(fig(info['total'].get('toggle')))}"
                    + (f", level {e(str(info.get('level')))}" if info.get("level") else "") + "</li>"
                    for p, info in pools.items())
    verdict = "ahead on every unit" if nv["suite_ahead_everywhere"] else "not ahead on every unit"
    return (f"<h3>NVDLA nv_small RTL per unit: NVDLA's traces vs our suites ({verdict})</h3>"
            f"<p><code>{e(nv['source'])}</code>, git <code>{e(str(nv.get('git')))}</code></p><ul>{about}</ul>"
            "<table><tr><th>unit</th><th>lines traces</th><th>lines suite</th><th>toggles traces</th>"
            "<th>toggles suite</th><th>ahead?</th><th>lines only traces run</th><th>uncovered lines (suite)</th></tr>"
            + "".join(rows) + "</table>")


def markdown(summary: dict, plots: dict[str, str]) -> str:
    c = summary["counts"]
    status = "INTERRUPTED" if summary["interrupted"] else ("FAIL" if c["failed"] + c["error"] else "PASS")
    out = [f"# Regression {summary['run']}: {status}", "",
           f"level **{summary['level']}**, launcher {summary['launcher']}, jobs {summary['jobs']}, "
           f"seed `{summary['seed']}`, design `{summary['design_hash']}`, git `{summary['git']}`", "",
           f"**{c['passed']} passed, {c['failed']} failed, {c['error']} errors, {c['skipped']} skipped** "
           f"of {c['total']} in {summary['wall_seconds']:.0f} s"
           + (f" (budget {summary['budget_minutes']} min exceeded)" if summary["over_budget"] else ""), ""]
    if summary["not_run"]:
        out += [f"Units with no results: {', '.join(summary['not_run'])}", ""]
    targets = _targets(summary)
    out += ["## Area x target", "", "| area | " + " | ".join(targets) + " |", "|---" * (len(targets) + 1) + "|"]
    for area, row in sorted(summary["matrix"].items()):
        out.append(f"| {area} | " + " | ".join(_cell(row[t]) if t in row else "" for t in targets) + " |")
    out += [""]
    if summary["failures"]:
        out += ["## Failures", ""]
        for f in summary["failures"]:
            out.append(f"- `{f['nodeid']}` ({f['outcome']}): {f['message']}")
            out.append(f"  - reproduce: `FUZZ_SEED={f['seed']} .venv/bin/python -m pytest '{f['nodeid']}'`"
                       + (f"; log: {f['artifacts']}/log.txt" if f["artifacts"] else ""))
            out += [f"  - {k}: {v}" for k, v in sorted(f["properties"].items()) if k.startswith(("log", "waves"))]
        out += ["", "Rerun exactly these: `make regress RERUN=failed` (add `WAVES=1` for waveforms).", ""]
    t = summary["trend"]
    if t:
        d = t["delta"]
        out += ["## Trend", "", f"against {t['previous']} (level {t['previous_level']}): passed {d['passed']:+d}, "
                f"failed {d['failed'] + d['error']:+d}, wall {t['wall_delta']:+.0f} s"]
        out += [f"- new failure: `{n}`" for n in t["new_failures"]]
        out += [f"- fixed: `{n}`" for n in t["fixed"]]
        out += [""]
    out += ["## Slowest tests", "", "| seconds | test | outcome |", "|---|---|---|"]
    out += [f"| {s['seconds']:.1f} | `{s['nodeid']}` | {s['outcome']} |" for s in summary["slowest"]]
    out += ["", "## Coverage", "", *_coverage_lines(summary["coverage"]), ""]
    if "plan" in summary:
        out += ["## Verification plan", "", *plan_markdown(summary["plan"]), ""]
    out += [f"![{name}]({path})" for name, path in plots.items()]
    if summary.get("screenshot"):
        out += ["", f"Screenshot of index.html in headless Chromium: [{summary['screenshot']}]({summary['screenshot']})"]
    out += [f"- note: {n}" for n in summary.get("notes", [])]
    return "\n".join(out) + "\n"


_CSS = """body{font-family:sans-serif;margin:1.5em;max-width:80em}table{border-collapse:collapse;margin:.5em 0}
td,th{border:1px solid #ccc;padding:.2em .6em;text-align:left}.pass{background:#dfd}.fail{background:#fcc}
.skip{background:#eee}.part{background:#ffd}code{font-size:90%}pre{background:#f6f6f6;padding:.5em;overflow:auto;max-height:20em}"""


def page(summary: dict, plots: dict[str, str]) -> str:
    e = html.escape
    c = summary["counts"]
    bad = c["failed"] + c["error"]
    status = "INTERRUPTED" if summary["interrupted"] else ("FAIL" if bad else "PASS")
    targets = _targets(summary)
    rows = []
    for area, row in sorted(summary["matrix"].items()):
        cells = []
        for t in targets:
            if t not in row:
                cells.append("<td></td>")
                continue
            cls = "fail" if row[t]["failed"] + row[t]["error"] else ("pass" if row[t]["passed"] else "skip")
            cells.append(f'<td class="{cls}">{e(_cell(row[t]))}</td>')
        rows.append(f"<tr><th>{e(area)}</th>{''.join(cells)}</tr>")
    fails = []
    for f in summary["failures"]:
        links = []
        if f["artifacts"]:
            links.append(f'<a href="{e(f["artifacts"])}/log.txt">log</a>')
        for key, value in f["properties"].items():
            if key.startswith(("log", "waves", "sim_dir")) or value.endswith((".vcd", ".fst", ".log")):
                links.append(f'<a href="file://{e(value)}">{e(key)}</a>')
        fails.append(f"<tr><td><code>{e(f['nodeid'])}</code></td><td>{e(f['outcome'])}</td>"
                     f"<td>{e(f['message'])}</td><td>{f['seed']}</td><td>{' '.join(links)}</td></tr>")
    t = summary["trend"]
    trend = "<p>no earlier run</p>"
    if t:
        d = t["delta"]
        trend = (f"<p>against {e(t['previous'])} (level {e(t['previous_level'])}): passed {d['passed']:+d}, "
                 f"failures {d['failed'] + d['error']:+d}, wall {t['wall_delta']:+.0f} s</p><ul>"
                 + "".join(f"<li>new failure <code>{e(n)}</code></li>" for n in t["new_failures"])
                 + "".join(f"<li>fixed <code>{e(n)}</code></li>" for n in t["fixed"]) + "</ul>")
    slow = "".join(f"<tr><td>{s['seconds']:.1f}</td><td><code>{e(s['nodeid'])}</code></td><td>{e(s['outcome'])}</td></tr>"
                   for s in summary["slowest"])
    cov = coverage_html(summary["coverage"])
    imgs = "".join(f'<h2>{e(n)}</h2><img src="{e(p)}" alt="{e(n)}">' for n, p in plots.items())
    return f"""<!doctype html><html><head><meta charset="utf-8"><title>regress {e(summary['run'])}</title>
<style>{_CSS}</style></head><body>
<h1>Regression {e(summary['run'])}: {status}</h1>
<p>level <b>{e(summary['level'])}</b>, launcher {e(summary['launcher'])}, jobs {e(str(summary['jobs']))},
seed <code>{summary['seed']}</code>, design <code>{e(summary['design_hash'])}</code>, git <code>{e(summary['git'])}</code></p>
<p><b>{c['passed']} passed, {c['failed']} failed, {c['error']} errors, {c['skipped']} skipped</b> of {c['total']}
in {summary['wall_seconds']:.0f} s. <a href="junit.xml">junit.xml</a> · <a href="summary.md">summary.md</a> ·
<a href="failed.txt">failed.txt</a></p>
<h2>Area x target</h2><table><tr><th></th>{''.join(f'<th>{e(t)}</th>' for t in targets)}</tr>{''.join(rows)}</table>
<h2>Failures</h2>{'<table><tr><th>test</th><th>outcome</th><th>message</th><th>seed</th><th>links</th></tr>' + ''.join(fails) + '</table><p>Rerun: <code>make regress RERUN=failed</code> (add <code>WAVES=1</code> for waveforms)</p>' if fails else '<p>none</p>'}
<h2>Trend</h2>{trend}
<h2>Slowest tests</h2><table><tr><th>s</th><th>test</th><th>outcome</th></tr>{slow}</table>
<h2>Coverage</h2>{cov}
<h2>Verification plan</h2>{plan_html(summary["plan"]) if "plan" in summary else "<p>not evaluated</p>"}{imgs}</body></html>
"""


def _atomic(path: Path, text: str) -> None:
    write_atomic(path, text)


def write_report(run_dir: Path, *, interrupted: bool = False, launcher_exit: int | None = None,
                 screenshot: bool = False) -> dict:
    """Every report file of ``run_dir`` from its plan and records; returns the summary. A file that cannot
    be written (disk full, ...) does not stop the others: it is listed in ``summary["unwritten"]`` (one
    ``dlaio.OutputError`` each) so the caller still prints the summary, then one line per file."""
    plan = Plan.read(run_dir)
    records = read_records(run_dir)
    finished = time.time()
    unwritten: list[OutputError] = []

    def attempt(write, *args) -> None:
        try:
            write(*args)
        except OutputError as exc:
            unwritten.append(exc)

    attempt(write_junit, records, run_dir / "junit.xml",
            {"level": plan.level.name, "seed": str(plan.seed), "design_hash": plan.design_hash})
    summary = summarize_run(run_dir, plan, records, finished=finished, interrupted=interrupted)
    summary["launcher_exit"] = launcher_exit
    if launcher_exit not in (None, 0, 1, 5):
        summary.setdefault("notes", []).append(f"pytest exited {launcher_exit} (internal error or crash)")
    attempt(_atomic, run_dir / "failed.txt", "".join(f"{f['nodeid']}\n" for f in summary["failures"]))
    attempt(_atomic, run_dir / "summary.json", json.dumps(summary, indent=1))  # before plots: history reads it
    plots: dict[str, str] = {}
    attempt(lambda: plots.update(write_plots(run_dir, summary)))
    attempt(_atomic, run_dir / "summary.md", markdown(summary, plots))
    attempt(_atomic, run_dir / "index.html", page(summary, plots))
    if screenshot:  # what a reader sees, from a real browser: index.png beside the page
        from regressions.regress.screenshot import screenshot as take

        reason = take(run_dir / "index.html", run_dir / "index.png")
        summary["screenshot"] = "index.png" if not reason else None
        if reason:
            summary.setdefault("notes", []).append(f"no screenshot of index.html: {reason}")
        attempt(_atomic, run_dir / "summary.md", markdown(summary, plots))
    attempt(_atomic, run_dir / "summary.json", json.dumps(summary, indent=1))
    summary["unwritten"] = list({e.path: e for e in unwritten}.values())
    return summary
