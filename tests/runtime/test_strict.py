"""Misnamed data is visible: a missing data file is N/A with the reason by default and an ERROR naming
file:line under ``dla trace --strict`` unless listed as known-incomplete; a directory, FIFO or device named as
a data file is always an error naming file:line (runtime/strict.py, runtime/trace.py Trace.missing_files)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import KNOWN_INCOMPLETE, nvdla_traces_root
from app.cli import main
from golden.config import get_config
from golden.regs import register_map
from runtime.strict import KnownIncomplete, is_missing_data, strict_outcome
from runtime.suite import ERROR, NA, PASS, run_trace, trace_name
from runtime.trace import find_traces
from runtime.txn import parse_trace
from tests.runtime.conftest import PAYLOAD, passing_lines

#: passing_lines() names its data file on this line (mem_load).
MEM_LOAD_LINE = 3


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "app.cli", *args], capture_output=True, text=True,
                          cwd=Path(__file__).resolve().parents[2], timeout=300)


def test_missing_data_file_is_na_with_the_reason_by_default(make_trace, capsys):
    d = make_trace("c_missing", passing_lines())
    assert main(["trace", str(d)]) == 0
    assert capsys.readouterr().out.splitlines() == ["N/A   c_missing: missing data file in.dat",
                                                    "0 passed, 0 failed, 1 skipped"]


def test_strict_makes_a_missing_data_file_an_error_naming_file_line(make_trace):
    make_trace("a_pass", passing_lines(), {"in.dat": PAYLOAD})
    d = make_trace("c_missing", passing_lines())
    p = run_cli("trace", str(d.parent), "--strict")
    assert p.returncode == 2
    where = f"{d / 'c_missing.cfg'}:{MEM_LOAD_LINE}"
    assert p.stdout.splitlines() == [
        "PASS  a_pass",
        f"ERROR c_missing: {where}: missing data file in.dat (--strict: not listed as known-incomplete)",
        "1 passed, 1 failed, 0 skipped",
    ]
    assert p.stderr.splitlines() == [f"{where}: missing data file in.dat (--strict: not listed as known-incomplete)"]


def test_known_incomplete_list_keeps_listed_traces_na(make_trace, tmp_path):
    make_trace("c_missing", passing_lines())
    make_trace("d_missing", passing_lines())
    listed = tmp_path / "known.txt"
    listed.write_text("# NVDLA did not ship in.dat\nnv_small/c_missing  # the reason\n\n")
    p = run_cli("trace", str(tmp_path / "nv_small"), "--known-incomplete", str(listed))  # implies --strict
    assert p.returncode == 2
    lines = p.stdout.splitlines()
    assert lines[0] == "N/A   c_missing: missing data file in.dat (known incomplete)"
    assert lines[1].startswith("ERROR d_missing: ") and f"not listed as known-incomplete in {listed}" in lines[1]
    assert lines[-1] == "0 passed, 1 failed, 1 skipped"


def test_known_incomplete_bare_name_matches_any_config(make_trace):
    out = run_trace(str(make_trace("c_missing", passing_lines()) / "c_missing.cfg"), "nv_small")
    assert is_missing_data(out)
    assert strict_outcome(out, KnownIncomplete(frozenset({"c_missing"}))).status == NA
    assert strict_outcome(out, KnownIncomplete(frozenset({"nv_full/c_missing"}))).status == ERROR


def test_strict_leaves_other_outcomes_alone(make_trace):
    out = run_trace(str(make_trace("a_pass", passing_lines(), {"in.dat": PAYLOAD}) / "a_pass.cfg"), "nv_small")
    assert out.status == PASS and strict_outcome(out, KnownIncomplete()) == out


@pytest.mark.parametrize("text, message", [
    ("nv_small/a b\n", r":1: one trace per line"),
    ("\n# ok\nnv_tiny/a\n", r":3: 'nv_tiny/a' is not <config>/<trace name>"),
    ("nv_small/\n", r":1: 'nv_small/' is not <config>/<trace name>"),
])
def test_bad_known_incomplete_list_is_one_line_exit_2(make_trace, tmp_path, text, message):
    d = make_trace("a_pass", passing_lines(), {"in.dat": PAYLOAD})
    listed = tmp_path / "known.txt"
    listed.write_text(text)
    p = run_cli("trace", str(d), "--known-incomplete", str(listed))
    assert p.returncode == 2 and p.stdout == ""
    assert len(p.stderr.splitlines()) == 1 and str(listed) + message in p.stderr, p.stderr


def test_unreadable_known_incomplete_list_exit_2(make_trace, tmp_path):
    p = run_cli("trace", str(make_trace("a", passing_lines())), "--known-incomplete", str(tmp_path / "nope.txt"))
    assert p.returncode == 2 and "nope.txt: cannot read the known-incomplete list" in p.stderr
    assert "Traceback" not in p.stderr


def _fifo(path: Path) -> None:
    os.mkfifo(path)


def _directory(path: Path) -> None:
    path.mkdir()


def _dev_zero(path: Path) -> None:
    path.symlink_to("/dev/zero")


@pytest.mark.parametrize("make, kind", [(_directory, "a directory"), (_fifo, "a FIFO"), (_dev_zero, "a device")])
@pytest.mark.parametrize("strict", [False, True])
def test_non_regular_data_file_is_an_error_naming_file_line(make_trace, make, kind, strict):
    d = make_trace("weird", passing_lines())
    make(d / "in.dat")
    p = run_cli("trace", str(d), *(["--strict"] if strict else []))
    where = f"{d / 'weird.cfg'}:{MEM_LOAD_LINE}"
    assert p.returncode == 2
    assert p.stdout.splitlines() == [f"ERROR weird: {where}: data file {d / 'in.dat'} is {kind}, not a regular file",
                                     "0 passed, 1 failed, 0 skipped"]
    assert "Traceback" not in p.stderr


def test_non_regular_data_file_in_a_txn_trace(tmp_path):
    d = tmp_path / "nv_full" / "t"
    d.mkdir(parents=True)
    (d / "in.dat").mkdir()
    (d / "input.txn").write_text("load_mem 0x80000000 0x20 in.dat\n")
    out = run_trace(str(d / "input.txn"), "nv_full")
    assert out.status == ERROR and out.bad_input
    assert out.detail == f"{d / 'input.txn'}:1: data file {d / 'in.dat'} is a directory, not a regular file"


def test_simulator_precheck_reports_a_non_regular_data_file(make_trace):
    """The simulator targets decide N/A before building anything (tb/suite.py precheck): same error."""
    from tb.suite import precheck

    d = make_trace("weird", passing_lines())
    (d / "in.dat").mkdir()
    out = precheck(str(d / "weird.cfg"), "nv_small", "verilator")
    assert out is not None and out.status == ERROR and out.bad_input
    assert out.detail.startswith(f"{d / 'weird.cfg'}:{MEM_LOAD_LINE}: data file ")


def test_repo_list_names_exactly_the_nv_small_traces_missing_blobs(pytestconfig):
    """regressions/lists/known-incomplete.txt against NVDLA's snapshot: each listed trace misses a data file
    (no stale entry hides a later misnaming) and every trace missing one is listed (the 11 of nv_small)."""
    root = nvdla_traces_root(pytestconfig) / "nv_small"
    if not root.is_dir():
        pytest.skip(f"no NVDLA traces under {root}")
    known = KnownIncomplete.load(KNOWN_INCOMPLETE)
    regmap = register_map(get_config("nv_small").address_map)
    missing = {f"nv_small/{trace_name(c)}" for c in find_traces(root, txn=True)
               if parse_trace(c, regmap).missing_files()}
    assert missing == known.entries
    assert len(missing) == 11
    listed = next(c for c in find_traces(root) if f"nv_small/{c.parent.name}" in known.entries)
    assert strict_outcome(run_trace(str(listed), "nv_small"), known).status == NA
