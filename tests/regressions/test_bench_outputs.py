"""`make bench` checks every file it will write before its sections run (minutes): a results path that is
a folder or a device is one line and exit 2 at once, the thing at the path untouched."""
from __future__ import annotations

import os
import stat

import pytest

from regressions.bench import main


def test_results_path_that_is_a_folder_fails_before_any_section(tmp_path, capsys):
    (tmp_path / "results.json").mkdir()
    assert main(["--out", str(tmp_path / "results.json"), "--quick", "--no-plot"]) == 2
    out, err = capsys.readouterr()
    assert out == ""  # no section ran
    assert err.strip() == f"bench: cannot write {tmp_path / 'results.json'}: it is a directory, not a regular file"


def test_history_that_is_a_device_survives(tmp_path, capsys):
    if os.geteuid() != 0:
        pytest.skip("making a device node needs root")
    history = tmp_path / "history.jsonl"
    os.mknod(history, stat.S_IFCHR | 0o666, os.makedev(1, 7))
    assert main(["--out", str(tmp_path / "results.json"), "--quick", "--no-plot"]) == 2
    assert "history.jsonl: it is a device" in capsys.readouterr().err
    assert stat.S_ISCHR(os.lstat(history).st_mode) and not (tmp_path / "results.json").exists()
