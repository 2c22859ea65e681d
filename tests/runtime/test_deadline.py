"""Wall-clock budgets and the terminal status line of ``dla compile`` and ``dla run``: a job past its
``--timeout`` ends with one line naming what it was doing (exit 1); no test here measures a duration."""
from __future__ import annotations

import io
import re
import time
from pathlib import Path

import numpy as np
import pytest

from app.cli import main
from loadable.format import write_loadable
from runtime import executor
from runtime.deadline import DeadlineExceeded, wall_clock
from runtime.status import StatusLine
from tests.app.test_cli_compile_run import stub_compiler  # noqa: F401 - a fixture
from tests.runtime.test_executor import C, H, W, pool_loadable


def forever() -> None:
    while True:
        time.sleep(0.01)


def test_wall_clock_interrupts_the_main_thread_naming_the_step() -> None:
    with pytest.raises(DeadlineExceeded, match=r"the job ran past its time budget of 0.2 s \(pass 3/9: lower\)"):
        with wall_clock(0.2, "the job", ["pass 3/9: lower"]):
            forever()


def test_no_budget_means_none() -> None:
    with wall_clock(0, "the job"):
        time.sleep(0.05)  # no alarm is set: nothing raises


def test_compile_past_its_budget_is_one_line_naming_the_pass(stub_compiler, tmp_path: Path, capsys) -> None:  # noqa: F811
    def slow_compile(model, *, progress=lambda step: None, **_options):
        progress("pass 5/9: lower")
        forever()

    stub_compiler.compile_model = slow_compile
    model = tmp_path / "net.onnx"
    model.write_bytes(b"onnx")
    out = tmp_path / "net.dla"
    rc = main(["compile", str(model), "--config", "nv_small", "-o", str(out), "--timeout", "0.5"])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 1 and len(err) == 1, err
    assert err[0] == ("dla: dla compile ran past its time budget of 0.5 s (pass 5/9: lower); give it more with "
                      "--timeout SECONDS (0 = no budget)")
    assert not out.exists()


def test_run_past_its_budget_is_one_line_naming_the_task(monkeypatch, tmp_path: Path, capsys) -> None:
    loadable = tmp_path / "pools.dla"
    write_loadable(loadable, pool_loadable())
    x = tmp_path / "x.npy"
    np.save(x, np.zeros((1, C, H, W), dtype=np.float32))

    def slow_run(self, inputs, *, progress=None, **_options):
        progress(2, 6, self.msg.tasks[1])
        forever()

    monkeypatch.setattr(executor.Network, "run", slow_run)
    rc = main(["run", str(loadable), "--input", str(x), "--timeout", "0.5"])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 1 and len(err) == 1, err
    assert err[0].startswith("dla: dla run ran past its time budget of 0.5 s (task 2/6 (")


def test_negative_timeout_is_bad_input(tmp_path: Path, capsys) -> None:
    loadable = tmp_path / "pools.dla"
    write_loadable(loadable, pool_loadable())
    x = tmp_path / "x.npy"
    np.save(x, np.zeros((1, C, H, W), dtype=np.float32))
    with pytest.raises(SystemExit) as stop:  # an argument error: argparse's exit, one line
        main(["run", str(loadable), "--input", str(x), "--timeout", "-1"])
    assert stop.value.code == 2
    assert capsys.readouterr().err.strip() == ("dla run: argument --timeout: '-1': must be a finite number of "
                                               "seconds, 0 or more (see dla run --help)")


def test_status_line_only_on_a_terminal() -> None:
    tty = io.StringIO()
    line = StatusLine(tty, enabled=True)
    line.show("pass 1/9: canonicalize", force=True)
    line.clear()
    assert re.fullmatch(r"\r\x1b\[K\[\d+ s\] pass 1/9: canonicalize\r\x1b\[K", tty.getvalue())
    log = io.StringIO()  # not a terminal: CI logs get nothing
    quiet = StatusLine(log)
    quiet.show("pass 1/9: canonicalize", force=True)
    quiet.clear()
    assert log.getvalue() == ""
