"""Bad command lines and odd input paths: one line on stderr naming the option (and what it accepts) or
the path, exit 2, before any work (issue 15, hostile sweep)."""
from __future__ import annotations

import os

import pytest

from app.cli import main


def _error_line(capsys, argv: list[str]) -> str:
    """Run ``dla argv`` expecting an argument error: exit 2 and exactly one stderr line, which is returned."""
    with pytest.raises(SystemExit) as stop:
        main(argv)
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1, err
    return err.strip()


@pytest.mark.parametrize("argv, wanted", [
    (["trace", "t", "--config", "nv_huge"], ["dla trace: argument --config:", "'nv_huge'", "nv_small"]),
    (["compile", "m.onnx", "--config", "nv_huge", "-o", "o.dla"],
     ["dla compile: argument --config/--configtarget: unknown config 'nv_huge'", "nv_small", "opendla-small"]),
    (["run", "n.nvdla", "--config", "nv_huge"], ["dla run: argument --config:", "nv_full"]),
    (["compile", "m.onnx", "--config", "nv_small", "-o", "o.dla", "--quant", "bogus"],
     ["argument --quant/--quantizationMode:", "'bogus'", "per-kernel", "per-filter"]),
    (["trace", "t", "-j", "abc"], ["argument -j/--jobs:", "'abc' is not an integer"]),
    (["trace", "t", "-j", "-1"], ["argument -j/--jobs:", "'-1': must be 0 or more"]),
    (["trace", "t", "--timeout", "nan"], ["argument --timeout:", "'nan'", "finite"]),
    (["trace", "t", "--timeout", "-1"], ["argument --timeout:", "'-1'"]),
    (["trace", "t", "--max-memory", "lots"], ["argument --max-memory:", "'lots' is not a size"]),
    (["trace", "t", "--max-memory", "0"], ["argument --max-memory:", "positive"]),
    ([], ["dla: the following arguments are required: command"]),
    (["frobnicate"], ["dla: argument command: invalid choice: 'frobnicate'", "'trace'"]),
])
def test_argument_errors_are_one_line(capsys, argv, wanted):
    line = _error_line(capsys, argv)
    assert not line.startswith("usage:")
    for text in wanted:
        assert text in line
    sub = argv[0] if argv and argv[0] in ("trace", "compile", "run") else None
    assert line.endswith(f"(see dla {sub} --help)" if sub else "(see dla --help)")


def test_regress_argument_errors_are_one_line(capsys):
    from regressions.regress.__main__ import main as regress

    with pytest.raises(SystemExit) as stop:
        regress(["run", "--launcher", "carrier-pigeon"])
    err = capsys.readouterr().err
    assert stop.value.code == 2 and len(err.splitlines()) == 1
    assert "argument --launcher: invalid choice: 'carrier-pigeon'" in err and "local" in err


def test_malformed_dla_max_memory_is_refused_by_name(monkeypatch, capsys, tmp_path):
    """A typo in DLA_MAX_MEMORY no longer leaves the default budget silently in force."""
    monkeypatch.setenv("DLA_MAX_MEMORY", "garbage")
    assert main(["trace", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err == "dla: DLA_MAX_MEMORY='garbage' is not a size (expected e.g. 512M, 8G or a number of bytes)"


def test_malformed_dla_max_memory_is_a_typed_error(monkeypatch):
    from golden.budget import BudgetSettingError, max_memory

    monkeypatch.setenv("DLA_MAX_MEMORY", "-5")
    with pytest.raises(BudgetSettingError, match="DLA_MAX_MEMORY='-5'"):
        max_memory()


def test_trace_budget_from_the_environment_is_named(monkeypatch):
    from runtime.suite import trace_budget

    monkeypatch.setenv("DLA_TRACE_TIMEOUT", "nan")
    with pytest.raises(ValueError, match=r"DLA_TRACE_TIMEOUT='nan': .*finite"):
        trace_budget()
    with pytest.raises(ValueError, match=r"--timeout -1: "):
        trace_budget(-1.0)


@pytest.mark.parametrize("command", ["run", "compile"])
@pytest.mark.parametrize("kind", ["FIFO", "directory", "device"])
def test_inputs_that_are_not_regular_files(tmp_path, monkeypatch, capsys, command, kind):
    """A FIFO is refused before it is opened (dla run used to block on it forever); a folder, FIFO or
    device is worded as what it is, not as "no such file"."""
    monkeypatch.chdir(tmp_path)
    name = "net.dla" if command == "run" else "m.onnx"
    if kind == "FIFO":
        os.mkfifo(name)
    elif kind == "directory":
        os.mkdir(name)
    else:
        name = "/dev/null"
    argv = ["run", name, "--input", "x.npy"] if command == "run" else \
        ["compile", name, "--config", "nv_small", "-o", "o.dla"]
    assert main(argv) == 2
    assert capsys.readouterr().err.strip() == f"dla: {name}: not a regular file (a {kind})"


def test_an_input_array_that_is_a_fifo(tmp_path):
    from runtime.inputs import InputError, load_array

    os.mkfifo(tmp_path / "x.npy")
    with pytest.raises(InputError, match=r"x.npy: not a regular file \(a FIFO\)"):
        load_array(tmp_path / "x.npy")


def test_missing_loadable_is_no_such_file(tmp_path, capsys):
    assert main(["run", str(tmp_path / "nope.dla"), "--input", "x.npy"]) == 2
    assert capsys.readouterr().err.strip() == f"dla: {tmp_path / 'nope.dla'}: no such file or directory"


def test_known_incomplete_list_that_is_a_fifo(make_trace, tmp_path, capsys):
    """Reading a FIFO would block forever: refused by what it is."""
    from tests.runtime.conftest import PAYLOAD, passing_lines

    make_trace("t", passing_lines(), {"in.dat": PAYLOAD})
    os.mkfifo(tmp_path / "ki.txt")
    assert main(["trace", str(tmp_path / "nv_small"), "--known-incomplete", str(tmp_path / "ki.txt")]) == 2
    assert capsys.readouterr().err.strip() == (f"dla trace: {tmp_path / 'ki.txt'}: cannot read the known-incomplete "
                                               "list (not a regular file (a FIFO))")
