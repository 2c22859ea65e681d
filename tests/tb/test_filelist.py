"""File lists as EDA tools (and NVDLA's Verilator flow) write them."""
from __future__ import annotations

import pytest

from tb.filelist import FileListError, parse_filelist
from tb.runner import DutSpec


def test_nvdla_style_filelist(tmp_path, monkeypatch):
    rtl = tmp_path / "outdir" / "vmod"
    (rtl / "top").mkdir(parents=True)
    (rtl / "rams").mkdir()
    (rtl / "top" / "NV_nvdla.v").write_text("module NV_nvdla; endmodule\n")
    (rtl / "rams" / "RAM.v").write_text("module RAM; endmodule\n")
    (rtl / "lib.vlib").write_text("module LIB; endmodule\n")
    (rtl / "extra.v").write_text("module EXTRA; endmodule\n")
    verif = tmp_path / "verif"
    verif.mkdir()
    (verif / "more.f").write_text("+define+FROM_NESTED\n${RTL_ROOT}/extra.v\n")
    monkeypatch.setenv("RTL_ROOT", str(rtl))
    (verif / "top.f").write_text(
        "// NVDLA-like list, paths relative to this file\n"
        "-I../outdir/vmod/top\n"
        "+incdir+../outdir/vmod/rams+../outdir/vmod\n"
        "-v ../outdir/vmod/lib.vlib\n"
        "-y ../outdir/vmod/rams   # a library dir\n"
        "+libext+.v+.sv\n"
        "-DNO_PLI\n-DSYNTHESIS=1\n"
        "-Wno-fatal --compiler clang --Mdir obj -o sim\n"
        "--top-module NV_nvdla\n"
        "-f more.f\n"
        "../outdir/vmod/top/NV_nvdla.v\n"
    )
    fl = parse_filelist(verif / "top.f")
    assert fl.sources == [rtl / "extra.v", rtl / "top" / "NV_nvdla.v"]
    assert fl.includes == [rtl / "top", rtl / "rams", rtl]
    assert fl.libraries == [rtl / "lib.vlib"] and fl.library_dirs == [rtl / "rams"]
    assert fl.libexts == [".v", ".sv"]
    assert fl.defines == {"NO_PLI": "1", "SYNTHESIS": "1", "FROM_NESTED": "1"}
    assert fl.toplevel == "NV_nvdla"
    # simulator options are kept (with their values); the ones the cocotb runner owns are dropped
    assert fl.options == ["-Wno-fatal", "--compiler", "clang"]
    spec = DutSpec.from_filelist(verif / "top.f", defines={"SYNTHESIS": "0"}, options=("-Wall",))
    assert spec.toplevel == "NV_nvdla" and ("SYNTHESIS", "0") in spec.defines and spec.options == ("-Wall",)


def test_missing_source_and_variable_are_one_line_errors(tmp_path):
    f = tmp_path / "a.f"
    f.write_text("nope.v\n")
    with pytest.raises(FileListError, match="nope.v does not exist"):
        parse_filelist(f)
    f.write_text("$SURELY_NOT_SET_DLA/x.v\n")
    with pytest.raises(FileListError, match=r"a.f:1: environment variable \$SURELY_NOT_SET_DLA is not set"):
        parse_filelist(f)
    with pytest.raises(FileListError, match="cannot read file list"):
        parse_filelist(tmp_path / "missing.f")
