"""A campaign's score and survivors, with the triage of equivalent mutants.

Score = (killed + error + timeout) / (decided - equivalent), per unit and overall. Equivalent mutants are
listed in ``regressions/mutate/triage/<target>.toml`` and ``triage/<target>/*.toml`` (``[[equivalent]] id = ...
reason = ...``): a mutant
whose change no input can observe (say, ``x >> 0`` vs ``x << 0``); each needs its reason. Survivors that are
not equivalent are missing tests: the report lists each with its source line before and after and the tests
that ran it.

Verilog targets use the same format; where results say which pool killed a mutant (NVDLA's RTL: its own traces,
then our suites on the mutants the traces miss), the table adds the kills by the traces and those only our
suites make, and the report counts the latter ("killed by our suite but not by the traces alone").
"""
from __future__ import annotations

import json
import tomllib
from pathlib import Path

from regressions.mutate.campaign import KILLS, MISSES, Result
from regressions.mutate.mutants import Mutant, mutated_source

TRIAGE = Path(__file__).parent / "triage"


def equivalents(target: str) -> dict[str, str]:
    """id -> reason of the mutants triaged equivalent for ``target``."""
    paths = [TRIAGE / f"{target}.toml", *sorted((TRIAGE / target).glob("*.toml"))]
    out: dict[str, str] = {}
    for path in paths:
        if not path.is_file():
            continue
        for entry in tomllib.loads(path.read_text()).get("equivalent", []):
            if not entry.get("reason"):
                raise ValueError(f"{path}: equivalent mutant {entry.get('id')!r} has no reason")
            out[entry["id"]] = entry["reason"]
    return out


def score(results: list[Result], equivalent: dict[str, str]) -> dict:
    """Counts and score of ``results`` (mutants not applied and triaged equivalents left out)."""
    counted = [r for r in results if r.outcome != "not_applied" and r.id not in equivalent]
    killed = sum(r.outcome in KILLS for r in counted)
    missed = sum(r.outcome in MISSES for r in counted)
    out = {"mutants": len(results), "equivalent": sum(r.id in equivalent for r in results),
           "killed": killed, "survived": missed, "score": killed / (killed + missed) if killed + missed else None}
    if any(r.killed_by_traces is not None for r in counted):
        out["killed_by_traces"] = sum(bool(r.killed_by_traces) and r.outcome in KILLS for r in counted)
        out["suite_not_traces"] = sum(r.killed_by_traces is False and bool(r.killed_by_suite) for r in counted)
    return out


def _line_change(root: Path, m: Mutant) -> tuple[str, str]:
    if m.path.endswith((".v", ".sv")):
        from regressions.mutate import verilog

        return verilog.describe(root, m)
    before = (root / m.path).read_text().splitlines()
    mutated = mutated_source(root, m)
    after = mutated.splitlines() if mutated else before
    return before[m.line - 1].strip(), after[m.line - 1].strip() if m.line - 1 < len(after) else ""


def write_report(root: Path, target: str, mutants: list[Mutant], results: dict[str, Result], out: Path) -> dict:
    """``report.json`` and ``report.md`` in ``out``; returns the summary."""
    equivalent = equivalents(target)
    decided = [results[m.id] for m in mutants if m.id in results]
    units: dict[str, list[Result]] = {}
    for r in decided:
        units.setdefault(r.unit, []).append(r)
    summary = {"target": target, **score(decided, equivalent),
               "units": {u: score(rs, equivalent) for u, rs in sorted(units.items())},
               "outcomes": {o: sum(r.outcome == o for r in decided) for o in sorted({r.outcome for r in decided})}}
    by_id = {m.id: m for m in mutants}
    survivors = [r for r in decided if r.outcome in MISSES and r.id not in equivalent]
    lines = [f"# Mutation campaign: {target}", "",
             f"{summary['killed']} killed of {summary['killed'] + summary['survived']} non-equivalent mutants "
             f"({summary['equivalent']} triaged equivalent): score "
             + (f"{summary['score']:.1%}" if summary["score"] is not None else "n/a"), "",
             "| unit | mutants | killed | survived | equivalent | score |", "|---|---|---|---|---|---|"]
    pools = "suite_not_traces" in summary
    if pools:
        lines[-2:] = [f"Killed by our suite but not by the traces alone: {summary['suite_not_traces']} "
                      f"(the traces kill {summary['killed_by_traces']}).", "",
                      "| unit | mutants | killed | survived | equivalent | score | by traces | suite only |",
                      "|---|---|---|---|---|---|---|---|"]
    for u, s in summary["units"].items():
        lines.append(f"| {u} | {s['mutants']} | {s['killed']} | {s['survived']} | {s['equivalent']} | "
                     + (f"{s['score']:.1%}" if s["score"] is not None else "n/a") + " |"
                     + (f" {s.get('killed_by_traces', 0)} | {s.get('suite_not_traces', 0)} |" if pools else ""))
    lines += ["", f"## Survivors ({len(survivors)})", ""]
    survivor_rows = []
    for r in survivors:
        before, after = _line_change(root, by_id[r.id])
        survivor_rows.append({"id": r.id, "outcome": r.outcome, "before": before, "after": after, "tests": r.tests})
        lines.append(f"- `{r.id}` ({r.outcome}, {r.tests} tests): `{before}` -> `{after}`")
    summary["survivors"] = survivor_rows
    (out / "report.json").write_text(json.dumps(summary, indent=1))
    (out / "report.md").write_text("\n".join(lines) + "\n")
    return summary
