"""`make fuzz --list-examples FILE` goes through the one output writer's check (dlaio) before fuzzing: a
FIFO (opening it would block), a device or a folder is one usage line, exit 2, left as it was."""
from __future__ import annotations

import os
import stat

from regressions.fuzz import driver

QUICK = ["--seconds", "120", "--property", "pdp", "--config", "nv_small", "-q"]


def test_list_examples_onto_a_fifo_or_a_folder_is_refused(tmp_path, capsys):
    fifo = tmp_path / "examples.jsonl"
    os.mkfifo(fifo)
    assert driver.main([*QUICK, "--list-examples", str(fifo)], {}) == 2
    err = capsys.readouterr().err.strip()
    assert err.endswith(f"--list-examples {fifo}: it is a FIFO, not a regular file") and "\n" not in err
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert driver.main([*QUICK, "--list-examples", str(tmp_path)], {}) == 2
    assert "it is a directory, not a regular file" in capsys.readouterr().err
