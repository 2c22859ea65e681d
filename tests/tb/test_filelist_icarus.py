"""Verilator-style file lists on Icarus: a module found only through a ``-I`` directory (as NVDLA's
``verilator_nv_small.f`` finds its modules) must build, since Verilator searches -I dirs for modules."""
from __future__ import annotations

import pytest

from tb.runner import DutSpec, _options, build
from tests.tb.conftest import available


def _design(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "leaf.v").write_text("module leaf(output wire y); assign y = 1'b1; endmodule\n")
    (tmp_path / "top.v").write_text("module top(output wire y); leaf u_leaf(.y(y)); endmodule\n")
    flist = tmp_path / "design.f"
    flist.write_text("-Isub\n--top-module top\ntop.v\n")
    return DutSpec.from_filelist(flist, label="inc-as-lib")


def test_icarus_gets_include_dirs_as_library_dirs(tmp_path):
    spec = _design(tmp_path)
    opts = _options(spec, "icarus")
    assert ("-y", str(tmp_path / "sub")) in list(zip(opts, opts[1:]))
    assert "-y" not in _options(spec, "verilator")  # Verilator searches -I dirs itself


@pytest.mark.skipif(not available("icarus"), reason="iverilog not installed")
def test_submodule_found_only_via_include_dir_builds_on_icarus(tmp_path):
    built = build(_design(tmp_path), "icarus", root=tmp_path / "sim")
    assert (built.directory / ".built").is_file()
    assert "leaf" in (built.directory / "sim.vvp").read_text(errors="replace")
