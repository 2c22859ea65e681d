"""Internal errors are ours, not the user's: any exception that is not a user error is one line naming its
type and message, asking for a report, exit 1 (DLA_DEBUG=1 re-raises it for the traceback)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from app import cli

ROOT = Path(__file__).resolve().parents[2]


def broken(args) -> int:
    raise ZeroDivisionError("division by zero in a pass")


def test_internal_error_is_one_line_asking_for_a_report(capsys):
    assert cli._guarded(broken)(None) == 1
    err = capsys.readouterr().err
    assert err == (f"dla: internal error ZeroDivisionError: division by zero in a pass - please report it at "
                   f"{cli.REPORT_AT} (DLA_DEBUG=1 for the traceback)\n")


def test_dla_debug_gives_the_traceback(monkeypatch):
    monkeypatch.setenv("DLA_DEBUG", "1")
    with pytest.raises(ZeroDivisionError):
        cli._guarded(broken)(None)


def test_user_errors_stay_exit_2_without_a_report_request(capsys):
    def refuse(args) -> int:
        raise cli.UserError("x.npy: no such file")

    assert cli._guarded(refuse)(None) == 2
    assert capsys.readouterr().err == "dla: x.npy: no such file\n"


def test_readme_has_the_section_the_message_points_to():
    assert "\n## Reporting bugs\n" in (ROOT / "README.md").read_text()


def test_internal_error_in_a_real_process_has_no_traceback(tmp_path):
    """A compiler crash (here: a model module that raises) reaches the user as the one line, exit 1."""
    code = ("import sys, compiler.driver as d\n"
            "def boom(*a, **k): raise KeyError('t432')\n"
            "d.compile_model = boom\n"
            "from app.cli import main\n"
            "sys.exit(main(sys.argv[1:]))\n")
    model = tmp_path / "m.onnx"
    model.write_bytes(b"x")
    p = subprocess.run([sys.executable, "-c", code, "compile", str(model), "--config", "nv_small", "-o",
                        str(tmp_path / "m.dla")], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert p.returncode == 1 and "Traceback" not in p.stderr
    assert p.stderr.startswith("dla: internal error KeyError: 't432' - please report it at ")
    assert str(tmp_path / "m.dla") not in p.stderr and not (tmp_path / "m.dla").exists()


def test_dla_trace_crash_outside_a_trace_is_the_same_one_line(make_trace, monkeypatch, capsys):
    """Not only compile/run/inspect: a crash in dla trace itself (not in a trace, which gets its own ERROR
    outcome) is one line asking for a report, exit 1."""
    from tests.runtime.conftest import PAYLOAD, passing_lines

    d = make_trace("a_pass", passing_lines(), {"in.dat": PAYLOAD})

    def crash(*args, **kwargs):
        raise RuntimeError("summary went wrong")

    monkeypatch.setattr(cli, "collect", crash)
    assert cli.main(["trace", str(d)]) == 1
    assert capsys.readouterr().err.startswith("dla: internal error RuntimeError: summary went wrong - please report")
