"""The regression report goes through the one output writer (dlaio): a report root that cannot be a folder
fails before any test runs; a report file that cannot be written still leaves the summary printed, one
line naming the file, exit 2, and whatever was at the path untouched."""
from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from tests.regressions.regress.test_regress import regress, sample_lists  # noqa: F401 - a fixture


def test_report_root_that_is_a_file_fails_before_running(sample_lists: Path, tmp_path: Path) -> None:  # noqa: F811
    out = tmp_path / "out"
    out.write_text("not a folder")
    r = regress(["--lists", str(sample_lists), "--level", "smoke", "--units", "pass.a", "--out", str(out)])
    assert r.returncode == 2, r.stdout + r.stderr
    assert r.stderr.strip() == f"regress: cannot write {out}: it is a regular file, not a folder"
    assert "passed" not in r.stdout and out.read_text() == "not a folder"


def test_unwritable_report_file_still_prints_the_summary(sample_lists: Path, tmp_path: Path) -> None:  # noqa: F811
    if os.geteuid() != 0:
        pytest.skip("making a device node needs root")
    out = tmp_path / "out"
    r = regress(["--lists", str(sample_lists), "--level", "smoke", "--units", "pass.a", "--out", str(out)])
    assert r.returncode == 0, r.stdout + r.stderr
    run = (out / "latest").resolve()
    page = run / "index.html"
    page.unlink()
    os.mknod(page, stat.S_IFCHR | 0o666, os.makedev(1, 7))  # a /dev/full twin where the page was
    (run / "summary.md").unlink()
    r = regress(["report", "--run-dir", str(run)])
    assert r.returncode == 2, r.stdout + r.stderr
    assert "'passed': 1" in r.stdout  # the summary is printed anyway
    assert r.stderr.strip() == f"regress: cannot write report {page}: it is a device, not a regular file"
    assert stat.S_ISCHR(os.lstat(page).st_mode)
    assert (run / "summary.md").is_file()  # the other report files are still written
    assert not [p for p in run.iterdir() if p.name.startswith(".")]
