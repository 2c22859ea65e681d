"""The `dla trace` contract: one line per trace, the exact summary line, exit codes, reports."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from app.cli import main
from tests.runtime.conftest import PAYLOAD, passing_lines


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "app.cli", *args], capture_output=True, text=True,
                          cwd=Path(__file__).resolve().parents[2])


def test_pass_fail_na_error_and_summary(make_trace, tmp_path, capsys):
    make_trace("a_pass", passing_lines(), {"in.dat": PAYLOAD})
    make_trace("b_fail", passing_lines(crc_value=0x12345678), {"in.dat": PAYLOAD})
    make_trace("c_missing", passing_lines())  # no in.dat
    make_trace("d_error", [
        "reg_write(NVDLA_PDP.D_OP_ENABLE_0, 0x1);",
        "reg_write(NVDLA_PDP.D_DATA_CUBE_IN_WIDTH_0, 0x3);",
        "check_nothing(0);",
    ])
    junit, js = tmp_path / "r.xml", tmp_path / "r.json"
    rc = main(["trace", str(tmp_path / "nv_small"), "--junit", str(junit), "--json", str(js)])
    out = capsys.readouterr().out.splitlines()
    assert rc == 1
    assert out[0] == "PASS  a_pass"
    assert out[1].startswith("FAIL  b_fail: check_crc at line 7:") and "expected crc 0x12345678" in out[1]
    assert out[2] == "N/A   c_missing: missing data file in.dat"
    assert out[3].startswith("ERROR d_error: ConfigError: PDP.D_DATA_CUBE_IN_WIDTH:")
    assert out[-1] == "1 passed, 2 failed, 1 skipped"
    assert "<testsuite" in junit.read_text() and "b_fail" in junit.read_text()
    doc = json.loads(js.read_text())
    assert doc["summary"] == out[-1] and [t["status"] for t in doc["traces"]] == ["PASS", "FAIL", "N/A", "ERROR"]


def test_parallel_run_gives_the_same_lines(make_trace, tmp_path, capsys):
    for i in range(4):
        make_trace(f"t{i}", passing_lines(), {"in.dat": PAYLOAD})
    assert main(["trace", str(tmp_path / "nv_small"), "-j", "2"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out == [f"PASS  t{i}" for i in range(4)] + ["4 passed, 0 failed, 0 skipped"]


def test_malformed_cfg_is_one_line_and_exit_2(make_trace):
    d = make_trace("broken", ["reg_write(NVDLA_PDP.D_OP_ENABLE_0, 0x1);", "reg_write(NVDLA_PDP.BOGUS_0, 1);"])
    p = run_cli("trace", str(d))
    assert p.returncode == 2
    assert p.stderr.strip() == f"{d / 'broken.cfg'}:2: unit PDP has no register BOGUS_0"
    assert "Traceback" not in p.stdout + p.stderr
    assert p.stdout.splitlines()[-1] == "0 passed, 1 failed, 0 skipped"


def test_missing_path_and_uninferable_config_exit_2(tmp_path):
    p = run_cli("trace", str(tmp_path / "nope"))
    assert p.returncode == 2 and "no such file or directory" in p.stderr and "Traceback" not in p.stderr
    (tmp_path / "plain").mkdir()
    (tmp_path / "plain" / "x.cfg").write_text("check_nothing(0);\n")
    p = run_cli("trace", str(tmp_path / "plain"))
    assert p.returncode == 2 and "--config" in p.stderr


def test_config_flag_overrides_folder_name(make_trace, tmp_path, capsys):
    make_trace("a", passing_lines(), {"in.dat": PAYLOAD}, config="somewhere")
    assert main(["trace", str(tmp_path / "somewhere"), "--config", "nv_large"]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "1 passed, 0 failed, 0 skipped"
