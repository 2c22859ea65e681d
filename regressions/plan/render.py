"""The verification plan's section of the regression report (Markdown and HTML) and its one-run summary."""
from __future__ import annotations

import html
from pathlib import Path

from regressions.plan import (NOT_APPLICABLE, NOT_RUN, NOT_VERIFIED, PARTIAL, TARGET_NAMES, TARGETS, VERIFIED, PlanError,
                              evaluate, load)

#: How many unmapped tests the report lists before "... and N more".
UNMAPPED_SHOWN = 40


def plan_summary(records: list, coverage: dict | None, directory: Path | None = None) -> dict:
    """``evaluate`` of the plan for one run; a malformed plan is an ``error`` entry, never a lost report."""
    try:
        features = load(directory) if directory else load()
    except PlanError as exc:
        return {"error": f"verification plan: {exc}"}
    return evaluate(features, records, coverage)


def _cell(cell: dict) -> str:
    if cell["status"] in (NOT_APPLICABLE, NOT_RUN):
        return cell["status"]
    return f"{cell['status']} ({cell['passed']}/{cell['tests']})"


def _bins(row: dict, collected: bool) -> str:  # noqa: D103 - "hit/total", or why there is no figure
    if not row["bins"]:
        return ""
    if not collected:
        return f"{row['bins']} (not collected)"
    return f"{row['bins_hit']}/{row['bins']}"


def _lines(row: dict) -> str:
    return ", ".join(f"{u} {h}/{t}" for u, (h, t) in row["rtl_lines"].items())


def plan_markdown(plan: dict) -> list[str]:
    if "error" in plan:
        return [f"- {plan['error']}"]
    out = [" ".join(f"**{TARGET_NAMES[t]}**: {_counts(c)}." for t, c in plan["counts"].items()), "",
           "| feature | " + " | ".join(TARGET_NAMES[t] for t in TARGETS) + " | bins | RTL lines |",
           "|---" * (len(TARGETS) + 3) + "|"]
    for row in plan["features"]:
        out.append(f"| {row['name']} (`{row['id']}`) | " + " | ".join(_cell(row["targets"][t]) for t in TARGETS)
                   + f" | {_bins(row, plan['functional_collected'])} | {_lines(row)} |")
    missed = [(row["id"], b) for row in plan["features"] for b in row["bins_missed"]]
    if missed:
        out += ["", "Bins the plan needs that no operation hit: " + ", ".join(f"`{b}` ({i})" for i, b in missed)]
    out += ["", f"Tests that map to no feature: {len(plan['unmapped'])}"]
    out += [f"- `{n}`" for n in plan["unmapped"][:UNMAPPED_SHOWN]]
    if len(plan["unmapped"]) > UNMAPPED_SHOWN:
        out.append(f"- ... and {len(plan['unmapped']) - UNMAPPED_SHOWN} more (summary.json)")
    return out


_CLASS = {VERIFIED: "pass", PARTIAL: "part", NOT_VERIFIED: "fail", NOT_RUN: "skip", NOT_APPLICABLE: "skip"}


def _counts(c: dict) -> str:
    return ", ".join(f"{c.get(s, 0)} {s}" for s in (VERIFIED, PARTIAL, NOT_VERIFIED, NOT_RUN))


def plan_html(plan: dict) -> str:
    e = html.escape
    if "error" in plan:
        return f"<p>{e(plan['error'])}</p>"
    counts = "".join(f"<li><b>{e(TARGET_NAMES[t])}</b>: {e(_counts(c))}</li>" for t, c in plan["counts"].items())
    rows = []
    for row in plan["features"]:
        cells = "".join(f'<td class="{_CLASS[row["targets"][t]["status"]]}">{e(_cell(row["targets"][t]))}</td>' for t in TARGETS)
        missed = e(", ".join(row["bins_missed"]))
        sources = e(", ".join(row["source"]))
        rows.append(f'<tr><td title="{sources}">{e(row["name"])}<br><code>{e(row["id"])}</code></td>{cells}'
                    f'<td title="missed: {missed}">{e(_bins(row, plan["functional_collected"]))}</td><td>{e(_lines(row))}</td></tr>')
    unmapped = "".join(f"<li><code>{e(n)}</code></li>" for n in plan["unmapped"][:UNMAPPED_SHOWN])
    more = len(plan["unmapped"]) - UNMAPPED_SHOWN
    return (f"<ul>{counts}</ul><table><tr><th>feature</th>"
            + "".join(f"<th>{e(TARGET_NAMES[t])}</th>" for t in TARGETS)
            + "<th>bins hit</th><th>RTL lines</th></tr>" + "".join(rows) + "</table>"
            + f"<h3>Tests that map to no feature: {len(plan['unmapped'])}</h3>"
            + (f"<ul>{unmapped}</ul>" if unmapped else "") + (f"<p>... and {more} more (summary.json)</p>" if more > 0 else ""))
