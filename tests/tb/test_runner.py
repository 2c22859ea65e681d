"""Runner hygiene: content-hashed builds reused across calls and processes, one build under concurrency,
build errors reported once with file:line."""
from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from golden.memory import Memory
from regressions.lib.fixture_dut import fixture_dut
from tb.memory import AddressSpaceView
from tb.runner import REPO, BuildError, DutSpec, build, extract_errors
from tests.tb.conftest import available

needs_icarus = pytest.mark.skipif(not available("icarus"), reason="iverilog not installed")


def test_extract_errors_gives_file_line_for_each_simulator():
    verilator_log = textwrap.dedent("""\
        %Warning-WIDTH: /rtl/a.v:3:9: Operator ASSIGN expects 8 bits
        %Error: /rtl/top.v:12:5: syntax error, unexpected IDENTIFIER
        %Error-PINMISSING: /rtl/top.v:40:3: Cell has missing pin: 'clk'
        %Error: Exiting due to 2 error(s)
    """)
    assert extract_errors(verilator_log) == [
        "/rtl/top.v:12: syntax error, unexpected IDENTIFIER",
        "/rtl/top.v:40: Cell has missing pin: 'clk'",
    ]
    icarus_log = "/rtl/top.v:7: warning: implicit definition\n/rtl/top.v:12: syntax error\n" \
                 "/rtl/top.v:12: error: invalid module item.\n"
    assert extract_errors(icarus_log) == ["/rtl/top.v:12: syntax error", "/rtl/top.v:12: error: invalid module item."]
    assert extract_errors("make: *** [all] Error 2\n") == ["make: *** [all] Error 2"]


def test_address_space_view_is_the_golden_memory():
    mem = Memory()
    view = AddressSpaceView(mem.dram, 1 << 32)
    view[0x80000000:0x80000004] = b"\x01\x02\x03\x04"
    assert mem.dram.read_bytes(0x80000000, 4) == b"\x01\x02\x03\x04"
    mem.write(0x80000100, b"\xaa\xbb")
    assert view[0x80000100:0x80000102] == b"\xaa\xbb" and view[0x80000101] == 0xBB
    assert len(view) == 1 << 32


@needs_icarus
def test_build_is_cached_by_content(make_build_root):
    first = build(fixture_dut(), "icarus", root=make_build_root)
    again = build(fixture_dut(), "icarus", root=make_build_root)
    assert not first.cached and again.cached and again.directory == first.directory
    assert (first.directory / "include" / "fixture_regs.vh").is_file()  # generated header on the include path
    other = build(fixture_dut(defines=(("FIXTURE_VARIANT", "1"),)), "icarus", root=make_build_root)
    assert other.directory != first.directory and not other.cached
    without_cdp = build(fixture_dut(absent=()), "icarus", root=make_build_root)  # header content differs
    assert without_cdp.directory not in (first.directory, other.directory)


@needs_icarus
def test_concurrent_builds_build_once(make_build_root):
    """Two processes (as two xdist workers would) asking for the same DUT: one builds, one reuses."""
    code = textwrap.dedent(f"""\
        import sys; sys.path.insert(0, {str(REPO)!r})
        from pathlib import Path
        from tb.runner import build
        from regressions.lib.fixture_dut import fixture_dut
        b = build(fixture_dut(), "icarus", root=Path({str(make_build_root)!r}))
        print(b.cached, b.directory)
    """)
    procs = [subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True) for _ in range(2)]
    outs = [p.communicate(timeout=600)[0].split() for p in procs]  # a hang guard only
    assert sorted(o[0] for o in outs) == ["False", "True"]
    assert outs[0][1] == outs[1][1]


@needs_icarus
def test_build_error_is_reported_once_with_file_line(make_build_root, tmp_path):
    bad = tmp_path / "bad.v"
    bad.write_text("module NV_nvdla(input wire a);\n  wire b = ;\nendmodule\n")
    spec = DutSpec(sources=(bad,), label="bad")
    with pytest.raises(BuildError) as first:
        build(spec, "icarus", root=make_build_root)
    assert first.value.errors[0].startswith(f"{bad}:2:")
    assert f"{bad}:2:" in str(first.value) and "full log:" in str(first.value)
    log = first.value.log
    stamp = log.stat().st_mtime_ns
    with pytest.raises(BuildError) as second:  # remembered: same errors, no second compile
        build(spec, "icarus", root=make_build_root)
    assert second.value.errors == first.value.errors and log.stat().st_mtime_ns == stamp
