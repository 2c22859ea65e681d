"""Named DUTs (``tb.duts``): names, file list overrides, one-line errors."""
from __future__ import annotations

import pytest

from tb.duts import DUT_ENV, NAMED_DUTS, DutError, dut_from_env, named_dut
from tb.runner import REPO
from tb.suite import RtlOptions, settings_for


def test_rtl_is_ours_and_has_no_filelist():
    assert "rtl" in NAMED_DUTS and named_dut("rtl") is None


def test_nvdla_default_path_is_beside_the_clone(monkeypatch):
    monkeypatch.delenv("DLA_NVDLA_NV_SMALL_FILELIST", raising=False)
    monkeypatch.delenv("NVDLA_RTL", raising=False)
    path = (REPO / NAMED_DUTS["nvdla-nv_small"]).resolve()
    assert path == (REPO.parent / "shared" / "nvdla" / "rtl" / "nv_small" / "nv_small.f").resolve()
    if path.is_file():
        assert named_dut("nvdla-nv_small") == path


def test_filelist_env_overrides_and_missing_file_is_one_line(tmp_path, monkeypatch):
    f = tmp_path / "mine.f"
    f.write_text("top.v\n")
    monkeypatch.setenv("DLA_NVDLA_NV_SMALL_FILELIST", str(f))
    assert named_dut("nvdla-nv_small") == f
    monkeypatch.setenv("DLA_NVDLA_NV_SMALL_FILELIST", str(tmp_path / "none.f"))
    with pytest.raises(DutError, match=r"^NVDLA nv_small RTL not found at .*none\.f; set DLA_NVDLA_NV_SMALL_FILELIST$"):
        named_dut("nvdla-nv_small")


def test_nvdla_rtl_root_env(tmp_path, monkeypatch):
    monkeypatch.delenv("DLA_NVDLA_NV_SMALL_FILELIST", raising=False)
    (tmp_path / "nv_small").mkdir()
    (tmp_path / "nv_small" / "nv_small.f").write_text("top.v\n")
    monkeypatch.setenv("NVDLA_RTL", str(tmp_path))
    assert named_dut("nvdla-nv_small") == tmp_path / "nv_small" / "nv_small.f"


def test_unknown_name_lists_known_ones(monkeypatch):
    with pytest.raises(DutError, match=r"unknown DUT 'nope' \(known: rtl, nvdla-nv_small\)"):
        named_dut("nope")
    monkeypatch.setenv(DUT_ENV, "nope")
    with pytest.raises(DutError):
        dut_from_env()
    monkeypatch.setenv(DUT_ENV, "")
    assert dut_from_env() == "rtl"


def test_named_nvdla_dut_gets_user_rtl_defaults(tmp_path, monkeypatch):
    f = tmp_path / "nv.f"
    f.write_text("top.v\n")
    monkeypatch.setenv("DLA_NVDLA_NV_SMALL_FILELIST", str(f))
    s = settings_for(RtlOptions(filelist=str(named_dut("nvdla-nv_small"))))
    assert s.reset_idle_cycles == 8192 and not s.builtin_rtl


TRACE = REPO.parent / "shared" / "nvdla" / "traces" / "nv_small" / "pdp_8x8x64_2x2_ave_int8_0"


@pytest.mark.parametrize("argv, message", [
    (["--dut", "nope"], "dla trace: unknown DUT 'nope' (known: rtl, nvdla-nv_small)"),
    (["--dut", "nvdla-nv_small", "--rtl-filelist", "my.f"],
     "dla trace: --dut nvdla-nv_small and --rtl-filelist my.f are mutually exclusive"),
])
def test_cli_dut_errors_are_one_line_exit_2(argv, message, capsys):
    from app.cli import main

    if not TRACE.is_dir():
        pytest.skip(f"no trace at {TRACE}")
    assert main(["trace", str(TRACE), "--target", "icarus", *argv]) == 2
    assert capsys.readouterr().err.strip() == message


def test_fuzz_dut_option_and_env(monkeypatch):
    from regressions.fuzz.driver import UsageError, parse

    assert parse(["--target", "icarus"], {}).dut == "rtl"
    assert parse(["--target", "icarus"], {DUT_ENV: "rtl"}).dut == "rtl"
    with pytest.raises(UsageError, match="unknown DUT"):
        parse(["--target", "icarus"], {DUT_ENV: "nope"})
    with pytest.raises(UsageError, match="needs a simulator target"):
        parse(["--dut", "nvdla-nv_small"], {})


def test_golden_predicts_each_dut_with_the_rules_its_rtl_implements():
    """Our rtl/ implements the cmod's PDP AVERAGE datapath; NVDLA's nv_small RTL is the config itself."""
    from golden import get_config
    from tb.duts import dut_config

    hw = get_config("nv_small")
    assert hw.pdp_average == "nv_small_rtl"
    assert dut_config("rtl", hw).pdp_average == "cmod" and dut_config("rtl", hw).name == "nv_small"
    assert dut_config("nvdla-nv_small", hw) is hw
