"""The hostile sweep: every attack of ``attacks/`` against the real `dla`, one line per attack, a summary,
and a JSON file with every attack's figures (exit, seconds, peak RSS, the line the user read).

    python -m regressions.robustness.sweep [--out build/robustness/sweep.json] [-k FILTER] [-j 2] [--quick]

Exit status 0 when every promise was kept, 1 when any was broken (the list says which and why).
"""
from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from regressions.robustness.attack import Attack, Run
from regressions.robustness.attacks import all_attacks
from regressions.robustness.execute import execute
from regressions.robustness.material import REPO, Material

DEFAULT_OUT = REPO / "build" / "robustness" / "sweep.json"
MAX_JOBS = 2  # the machine is shared: two children at most


@dataclass
class Verdict:
    attack: Attack
    run: Run
    broken: list[str]
    command: list[str]

    @property
    def kept(self) -> bool:
        return not self.broken

    def line(self) -> str:
        head = f"{'PASS' if self.kept else 'BROKEN':<6} [{self.attack.family}] {self.attack.name}"
        if self.broken:
            head += f" -- {'; '.join(self.broken)}"
        return f"{head}\n         exit {self.run.shell_exit}, {self.run.seconds:.1f} s, {self.run.peak_rss_mb:.0f} MB: {_clip(self.run.line)!r}"

    def to_json(self) -> dict:
        r = self.run
        return {"name": self.attack.name, "family": self.attack.family, "kept": self.kept, "broken": self.broken,
                "command": self.command, "exit": r.shell_exit, "killed_by_signal": -r.exit if r.exit is not None and r.exit < 0 else None, "seconds": round(r.seconds, 3),
                "peak_rss_mb": round(r.peak_rss_mb, 1), "line": _clip(r.line, 1000), "stderr": r.stderr[-2000:],
                "stdout": r.stdout[-2000:]}


def _clip(text: str, limit: int = 300) -> str:
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} characters)"


def select(attacks: list[Attack], pattern: str | None, quick: bool) -> list[Attack]:
    """``-k``: attacks whose name or family holds the (case-insensitive) text; ``--quick``: the fast subset."""
    chosen = [a for a in attacks if not quick or a.quick]
    if pattern:
        chosen = [a for a in chosen if pattern.lower() in f"{a.family} {a.name}".lower()]
    return chosen


def sweep(attacks: list[Attack], jobs: int = 1, echo=print) -> list[Verdict]:
    """Run ``attacks`` (at most ``MAX_JOBS`` at a time) in one temp root; material is built once."""
    root = Path(tempfile.mkdtemp(prefix="dla-sweep."))
    try:
        material = Material.build(root / "material")

        def one(attack: Attack) -> Verdict:
            scenario, run, broken = execute(attack, material, root)
            verdict = Verdict(attack, run, broken, scenario.argv if scenario else [])
            echo(verdict.line())
            return verdict

        with ThreadPoolExecutor(max_workers=max(1, min(jobs, MAX_JOBS))) as pool:
            return list(pool.map(one, attacks))
    finally:
        shutil.rmtree(root, ignore_errors=True)


def summary(verdicts: list[Verdict]) -> str:
    kept = sum(v.kept for v in verdicts)
    return f"{len(verdicts)} attacks, {kept} promises kept, {len(verdicts) - kept} broken"


def write_json(path: Path, verdicts: list[Verdict], seconds: float) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    doc = {"summary": summary(verdicts), "seconds": round(seconds, 1),
           "attacks": [v.to_json() for v in verdicts]}
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(doc, indent=1) + "\n")
    tmp.replace(path)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m regressions.robustness.sweep", description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="the JSON figures (default: %(default)s)")
    parser.add_argument("-k", metavar="FILTER", help="only attacks whose family or name holds FILTER")
    parser.add_argument("-j", "--jobs", type=int, default=1, help=f"attacks at once (at most {MAX_JOBS})")
    parser.add_argument("--quick", action="store_true", help="only the fast subset `make test` runs")
    parser.add_argument("--list", action="store_true", help="list the attacks and exit")
    args = parser.parse_args(argv)
    chosen = select(all_attacks(), args.k, args.quick)
    if args.list:
        for a in chosen:
            print(f"[{a.family}] {a.name}{'  (quick)' if a.quick else ''}")
        print(f"{len(chosen)} attacks")
        return 0
    if not chosen:
        print("no attack matches", file=sys.stderr)
        return 2
    start = time.monotonic()
    verdicts = sweep(chosen, args.jobs, echo=lambda line: print(line, flush=True))
    seconds = time.monotonic() - start
    write_json(args.out, verdicts, seconds)
    print(summary(verdicts))
    broken = [v for v in verdicts if not v.kept]
    if broken:
        print("broken:")
        for v in broken:
            print(f"  {v.attack.name}: {'; '.join(v.broken)} | {_clip(v.run.line)}")
    print(f"figures in {args.out} ({seconds:.0f} s)")
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
