"""`dla trace --target icarus|verilator`: the golden target's output lines and exit rule, on RTL."""
from __future__ import annotations

import json

import pytest

from app.cli import main
from regressions.lib.fixture_dut import FIXTURE_DIR, copy_trace, fixture_header, write_trace
from tb.runner import REPO
from tb.suite import builtin_dut
from tests.tb.conftest import available

needs_icarus = pytest.mark.skipif(not available("icarus"), reason="iverilog not installed")


@pytest.fixture(autouse=True)
def private_build_root(tmp_path, monkeypatch):
    """These DUTs live in tmp_path, so their builds would never be reused: keep them out of build/."""
    monkeypatch.setenv("DLA_SIM_BUILD", str(tmp_path / "sim"))


@pytest.fixture
def fixture_filelist(tmp_path):
    """The fixture DUT as a user would hand it over: a file list with an include directory."""
    inc = tmp_path / "inc"
    inc.mkdir()
    (inc / "fixture_regs.vh").write_text(fixture_header())
    f = tmp_path / "fixture.f"
    f.write_text(f"+incdir+inc\n{FIXTURE_DIR / 'NV_nvdla.v'}\n")
    return f


@needs_icarus
def test_lines_summary_exit_code_and_reports(fixture_filelist, tmp_path, capsys):
    root = tmp_path / "traces"
    copy_trace(root, "a_copy", 16)
    copy_trace(root, "b_bad", 8, crc=0x1234)
    write_trace(root, "c_hang", ["reg_write(NVDLA_CACC.D_OP_ENABLE_0, 0x1);", "intr_notify(CACC_0, s0);",
                                 "check_nothing(s0);"])
    write_trace(root, "d_missing", ['mem_load(pri_mem, 0x80000000, "nope.dat");', "check_nothing(0);"])
    write_trace(root, "e_cdp", ["reg_write(NVDLA_CDP.D_OP_ENABLE_0, 0x1);", "intr_notify(CDP_0, s0);",
                                "check_nothing(s0);"])
    copy_trace(root, "f_copy", 24, burst=3)
    js = tmp_path / "r.json"
    rc = main(["trace", str(root / "nv_small"), "--target", "icarus", "--rtl-filelist", str(fixture_filelist),
               "--timeout-cycles", "3000", "--reset-idle-cycles", "8", "-j", "2", "--json", str(js)])
    cap = capsys.readouterr()
    out = cap.out.splitlines()
    assert rc == 1
    assert out[0] == "PASS  a_copy"
    assert out[1].startswith("FAIL  b_bad: check_crc at line 12:") and "expected crc 0x00001234" in out[1]
    assert out[2].startswith("FAIL  c_hang: timeout: no completion within 3000 cycles at sim time")
    assert out[3] == "N/A   d_missing: missing data file nope.dat"
    assert out[4] == "N/A   e_cdp: engine CDP not in DUT"
    assert out[5] == "PASS  f_copy"
    assert out[6] == "2 passed, 2 failed, 2 skipped" and len(out) == 7
    doc = json.loads(js.read_text())
    assert [t["status"] for t in doc["traces"]] == ["PASS", "FAIL", "FAIL", "N/A", "N/A", "PASS"]
    assert doc["traces"][0]["target"] == "icarus" and doc["traces"][0]["metrics"]["cycles"] > 0
    assert "simulation logs in" in cap.err  # kept because something failed


@needs_icarus
def test_build_errors_are_shown_once_with_file_line(tmp_path, capsys):
    bad = tmp_path / "bad.v"
    bad.write_text("module NV_nvdla(input wire a);\n  wire b = ;\nendmodule\n")
    f = tmp_path / "bad.f"
    f.write_text(f"{bad}\n")
    root = tmp_path / "traces"
    for name in ("t1", "t2", "t3"):
        copy_trace(root, name, 8)
    rc = main(["trace", str(root / "nv_small"), "--target", "icarus", "--rtl-filelist", str(f)])
    cap = capsys.readouterr()
    assert rc == 1
    assert cap.err.count("icarus build of NV_nvdla failed") == 1 and f"{bad}:2: syntax error" in cap.err
    lines = cap.out.splitlines()
    assert all(ln.startswith(f"ERROR {n}: DUT build failed ({bad}:2:") for ln, n in zip(lines, ("t1", "t2", "t3")))
    assert lines[-1] == "0 passed, 3 failed, 0 skipped"


@needs_icarus
def test_malformed_trace_is_bad_input_before_any_simulation(fixture_filelist, tmp_path, capsys):
    d = write_trace(tmp_path, "broken", ["reg_write(NVDLA_PDP.BOGUS_0, 1);", "check_nothing(0);"]).parent
    rc = main(["trace", str(d), "--target", "icarus", "--rtl-filelist", str(fixture_filelist)])
    cap = capsys.readouterr()
    assert rc == 2
    assert cap.err.strip() == f"{d / 'broken.cfg'}:1: unit PDP has no register BOGUS_0"


def test_option_and_setup_errors_are_one_line(tmp_path, capsys):
    d = copy_trace(tmp_path, "x", 8).parent
    assert main(["trace", str(d), "--define", "A=1"]) == 2
    assert "--define only apply to --target icarus|verilator" in capsys.readouterr().err
    assert main(["trace", str(d), "--target", "icarus", "--rtl-filelist", str(tmp_path / "none.f")]) == 2
    err = capsys.readouterr().err
    assert "cannot read file list" in err and "Traceback" not in err
    assert main(["trace", str(d), "--target", "icarus", "--define", "=1"]) == 2


def test_builtin_dut_is_rtl_with_generated_config_header():
    spec = builtin_dut("nv_small")
    assert REPO / "rtl" / "NV_nvdla.v" in spec.sources and spec.toplevel == "NV_nvdla"
    names = [name for name, _ in spec.headers]
    assert "dla_config.vh" in names
    assert builtin_dut("nv_small") == spec  # deterministic: same build hash every time


@needs_icarus
def test_input_txn_traces_play_on_rtl(fixture_filelist, tmp_path, capsys):
    """NVDLA's older input.txn format runs on a simulated DUT through the same player: load_mem, write_reg
    at CSB word addresses, wait, dump_mem compared with the expected dump (pass and fail)."""
    from golden.regs import register_map
    from tests.runtime.test_txn import data_file, dump_file
    from regressions.lib.fixture_dut import DST, SRC

    small = register_map("small")
    payload = bytes((7 + i * 13) & 0xFF for i in range(16 * 8))

    def reg(unit: str, name: str) -> str:
        return f"{0xFFFF0000 | small.address(unit, name) >> 2:#x}"

    for name, expected in (("good", payload), ("bad", payload[:5] + b"\xee" + payload[6:])):
        d = tmp_path / "txn" / name
        d.mkdir(parents=True)
        (d / "in.dat").write_text(data_file(payload))
        (d / "out.dat").write_text(dump_file(expected, DST))
        (d / "input.txn").write_text("\n".join([
            f"load_mem {SRC:#x} {len(payload):#x} in.dat",
            f"write_reg {reg('GLB', 'S_INTR_MASK')} 0x3f03fc",
            f"write_reg {reg('PDP_RDMA', 'D_SRC_BASE_ADDR_LOW')} {SRC:#x}",
            f"write_reg {reg('PDP', 'D_DST_BASE_ADDR_LOW')} {DST:#x}",
            f"write_reg {reg('PDP', 'D_DATA_CUBE_IN_WIDTH')} 0xf",
            f"write_reg {reg('PDP', 'D_DATA_CUBE_IN_HEIGHT')} 0x0",
            f"write_reg {reg('PDP_RDMA', 'D_OP_ENABLE')} 0x1",
            f"write_reg {reg('PDP', 'D_OP_ENABLE')} 0x1",
            "wait",
            f"dump_mem {DST:#x} {len(payload):#x} out.dat",
        ]) + "\n")
    rc = main(["trace", str(tmp_path / "txn"), "--config", "nv_small", "--target", "icarus",
               "--rtl-filelist", str(fixture_filelist),
               "--timeout-cycles", "20000", "--reset-idle-cycles", "8"])
    out = capsys.readouterr().out.splitlines()
    assert rc == 1
    assert out[0].startswith("FAIL  bad: dump_mem at line 10:") and "first at offset 0x5" in out[0]
    assert out[1] == "PASS  good"
    assert out[2] == "1 passed, 1 failed, 0 skipped"
