"""``dla trace --strict``: a trace whose data file is missing is an ERROR, not N/A, unless it is listed as
known-incomplete.

NVDLA did not ship every blob its traces name, so by default such a trace is N/A with the reason. But the same
N/A hides a misnamed data file in a user's suite (a typo drops the trace from the run with exit 0). Strict mode
turns every missing data file into an error naming the trace's file:line, except for traces listed in a
known-incomplete file: one ``<config>/<trace name>`` (or a bare trace name, any config) per line, ``#`` starts a
comment. ``regressions/lists/known-incomplete.txt`` lists NVDLA's nv_small traces whose blobs are absent.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from dlaio.inputs import not_a_file
from golden.config import PRESETS, get_config
from golden.regs import register_map
from runtime.suite import ERROR, NA, Outcome
from runtime.trace import TraceError
from runtime.txn import parse_trace

#: How every target words the N/A of a trace whose data file is absent (runtime/suite.py, tb/suite.py).
MISSING_DATA = "missing data file "


@dataclass(frozen=True)
class KnownIncomplete:
    """The traces allowed to miss data files, as ``config/name`` (or ``name`` for any config)."""

    entries: frozenset[str] = frozenset()
    source: str = ""

    @classmethod
    def load(cls, path: Path | str) -> KnownIncomplete:
        """Read a list file; ValueError naming file:line for an entry that cannot name a trace."""
        path = Path(path)
        why = not_a_file(path)
        if why:  # a FIFO would block the read forever
            raise ValueError(f"{path}: cannot read the known-incomplete list ({why})")
        try:
            text = path.read_text()
        except (OSError, UnicodeDecodeError) as exc:
            raise ValueError(f"{path}: cannot read the known-incomplete list ({getattr(exc, 'strerror', None) or exc})") from None
        entries = set()
        for lineno, raw in enumerate(text.splitlines(), 1):
            entry = raw.split("#", 1)[0].strip()
            if not entry:
                continue
            if " " in entry or "\t" in entry:
                raise ValueError(f"{path}:{lineno}: one trace per line, got {entry!r}")
            config, sep, name = entry.rpartition("/")
            if sep and (config not in PRESETS or not name):
                raise ValueError(f"{path}:{lineno}: {entry!r} is not <config>/<trace name> "
                                 f"(configs: {', '.join(PRESETS)})")
            entries.add(entry)
        return cls(frozenset(entries), str(path))

    def covers(self, out: Outcome) -> bool:
        return f"{out.config}/{out.name}" in self.entries or out.name in self.entries


def is_missing_data(out: Outcome) -> bool:
    return out.status == NA and out.detail.startswith(MISSING_DATA)


def strict_outcome(out: Outcome, known: KnownIncomplete) -> Outcome:
    """``out`` under --strict: a missing data file is an error naming the command's file:line (bad input, like a
    malformed trace) unless ``known`` lists the trace; every other outcome is unchanged."""
    if not is_missing_data(out):
        return out
    if known.covers(out):
        return replace(out, detail=f"{out.detail} (known incomplete)")
    listed = f" in {known.source}" if known.source else ""
    return replace(out, status=ERROR, bad_input=True,
                   detail=f"{_where(out)}: {out.detail} (--strict: not listed as known-incomplete{listed})")


def _where(out: Outcome) -> str:
    """``file:line`` of the command naming the first missing data file (the trace is parsed again: this only
    runs for a trace about to be reported as an error)."""
    try:
        trace = parse_trace(Path(out.path), register_map(get_config(out.config).address_map), name=out.name)
        missing = trace.missing_files()
    except (TraceError, KeyError, OSError):
        return out.path
    return f"{trace.path}:{trace.missing_line(missing[0])}" if missing else out.path
