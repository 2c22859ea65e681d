from __future__ import annotations

import numpy as np
import pytest

from golden.regs import register_map
from runtime.trace import (
    CheckCrc,
    IntrNotify,
    MemLoad,
    RegWrite,
    TraceError,
    find_traces,
    parse_cfg,
    parse_dat,
    write_cfg,
    write_dat,
)

SMALL = register_map("small")


def test_parses_every_command_form(make_trace):
    d = make_trace("t", [
        "reg_write(NVDLA_PDP.D_DATA_CUBE_IN_WIDTH_0, 0x7);",
        "reg_write(NVDLA_CDP.S_POINTER_0, 0);",
        "reg_write(NVDLA_CDP.D_OP_ENABLE_0,0x1);",
        "poll_reg_equal(NVDLA_CDMA.S_CBUF_FLUSH_STATUS_0,0x1);",
        "mem_init(pri_mem, 0x80000000, 0x1000, ALL_ZERO);",
        'mem_load(pri_mem, 0x80000000, "x.dat");',
        "intr_notify(cdma_dat_0, s0);",
        "intr_notify(SDP_1, s1);",
        "check_crc(s1, pri_mem, 0x80000000, 0x800, 0x0badc0de); //MC",
        "check_nothing(s0);",
        "reg_read_check(NVDLA_PDP.D_DATA_CUBE_IN_WIDTH_0, 0x7);",
        "sync_notify(NVDLA_SDP, e0);",
    ])
    t = parse_cfg(d / "t.cfg", SMALL)
    assert len(t.commands) == 12
    assert t.commands[0] == RegWrite(1, "NVDLA_PDP.D_DATA_CUBE_IN_WIDTH_0", SMALL.address("PDP", "D_DATA_CUBE_IN_WIDTH"), 7)
    assert isinstance(t.commands[5], MemLoad) and t.commands[5].file == d / "x.dat"
    assert t.commands[6] == IntrNotify(7, "CDMA_DAT_0", 16, "s0")
    assert t.commands[7].bit == 1
    assert t.commands[8] == CheckCrc(9, "s1", "pri_mem", 0x80000000, 0x800, 0x0BADC0DE)
    assert t.missing_files() == [d / "x.dat"]


@pytest.mark.parametrize(
    "line,message",
    [
        ("frobnicate(1);", "unknown command 'frobnicate'"),
        ("reg_write(NVDLA_PDP.D_NOT_A_REG_0, 0x1);", "has no register D_NOT_A_REG"),
        ("reg_write(NVDLA_PDP.D_OP_ENABLE_0, 0xZZ);", "bad number"),
        ("mem_init(pri_mem, 0x0, 0x10, SOMETIMES);", "unknown mem_init pattern"),
        ("intr_notify(FOO_0, s);", "unknown interrupt source"),
        ("check_crc(s, 1, 0x0, 0x10);", "check_crc takes 5 arguments"),
        ("this is not a command", "cannot parse"),
        ("reg_write(NVDLA_PDP.S_POINTER_0, 0x1ffffffff);", "value 0x1ffffffff for NVDLA_PDP.S_POINTER_0 does not fit in 32 bits"),
        ("reg_write(NVDLA_PDP.S_POINTER_0, -1);", "value -1 for NVDLA_PDP.S_POINTER_0 does not fit in 32 bits"),
        ("poll_reg_equal(NVDLA_PDP.S_STATUS_0, 0x100000000);", "does not fit in 32 bits"),
        ("check_crc(s, 1, 0x0, 0x10, 0x1deadbeef);", "value 0x1deadbeef for crc does not fit in 32 bits"),
    ],
)
def test_malformed_lines_name_file_and_line(make_trace, line, message):
    d = make_trace("bad", ["// header", "reg_write(NVDLA_PDP.S_POINTER_0, 0);", line])
    with pytest.raises(TraceError) as ei:
        parse_cfg(d / "bad.cfg", SMALL)
    assert str(ei.value).startswith(f"{d / 'bad.cfg'}:3: ")
    assert message in str(ei.value)


def test_dat_round_trip_and_both_dialects(tmp_path):
    data = bytes(np.random.default_rng(1).integers(0, 256, 37, dtype=np.uint8))
    write_dat(tmp_path / "a.dat", data)
    offs, vals = parse_dat(tmp_path / "a.dat")
    assert offs.tolist() == list(range(37)) and vals.tobytes() == data
    (tmp_path / "b.dat").write_text("{\n{'offset':0x20, size:2, value:0x0A 0xff},\n}\n")
    offs, vals = parse_dat(tmp_path / "b.dat")
    assert offs.tolist() == [0x20, 0x21] and vals.tolist() == [10, 255]


def test_dat_errors_name_the_line(tmp_path):
    (tmp_path / "c.dat").write_text("{\n{offset:0x0, size:4, payload:0x01 0x02} ,\n}\n")
    with pytest.raises(TraceError, match=r"c\.dat:2: .*size 4 but has 2"):
        parse_dat(tmp_path / "c.dat")


GOOD_DAT = "{\n{offset:0x0, size:2, payload:0x01 0x02} ,\n{offset:0x4, size:2, payload:0x03 0x04} ,\n}\n"


@pytest.mark.parametrize("text, line, message", [
    (GOOD_DAT.replace("offset:0x4,", "offset:0xZZ,"), 3, "bad offset '0xZZ'"),
    (GOOD_DAT.replace("offset:0x4,", "offset:-0x4,"), 3, "bad offset '-0x4'"),
    (GOOD_DAT.replace("size:2, payload:0x03", "size:two, payload:0x03"), 3, "bad size 'two'"),
    (GOOD_DAT[:GOOD_DAT.index("size:2, payload:0x03")], 3, "entry not closed by '}' (file cut short?)"),
    (GOOD_DAT[:GOOD_DAT.rindex("}")], 4, "the entries' outer '{' is not closed by '}' (file cut short?)"),
    (GOOD_DAT.replace("} ,\n{offset:0x4", "} junk\n{offset:0x4"), 2, "got 'junk'"),
    (GOOD_DAT + "trailing\n", 5, "text after the closing '}': 'trailing"),
    ("{offset:0x0, size:1, payload:0x01},\n{offset:0x1, si", 2, "entry not closed by '}'"),
    ("hello\n", 1, "got 'hello'"),
])
def test_dat_entries_that_do_not_parse_are_errors_not_skipped(tmp_path, text, line, message):
    """An entry skipped would leave zeros in memory and show up as a wrong CRC far from the cause."""
    (tmp_path / "d.dat").write_text(text)
    with pytest.raises(TraceError) as ei:
        parse_dat(tmp_path / "d.dat")
    assert str(ei.value).startswith(f"{tmp_path / 'd.dat'}:{line}: ") and message in str(ei.value)


@pytest.mark.parametrize("text", ["", "{\n}\n", "{offset:0x0, size:2, payload:0x01 0x02},\n"])
def test_dat_without_entries_or_outer_braces(tmp_path, text):
    (tmp_path / "d.dat").write_text(text)
    offs, vals = parse_dat(tmp_path / "d.dat")
    assert vals.tolist() == ([1, 2] if "payload" in text else []) and offs.tolist() == ([0, 1] if text.strip("{}\n") else [])


def test_a_huge_register_name_is_echoed_clipped(make_trace):
    """A 10 MB register name: the error names the file:line and the start of the name, in one short line."""
    name = "S_" + "X" * 10_000_000
    d = make_trace("big", [f"reg_write(NVDLA_PDP.{name}, 0x0);"])
    with pytest.raises(TraceError) as ei:
        parse_cfg(d / "big.cfg", SMALL)
    text = str(ei.value)
    assert text.startswith(f"{d / 'big.cfg'}:1: unit PDP has no register S_XXXX") and len(text) < 300
    assert f"...({len(name)} characters)" in text


def test_write_cfg_round_trip(make_trace):
    d = make_trace("rt", [
        "reg_write(NVDLA_SDP.D_DATA_CUBE_WIDTH_0, 0x1f);",
        'mem_load(pri_mem, 0x80000000, "in.dat");',
        "intr_notify(SDP_0, sync_id_0);",
        "check_crc(sync_id_0, pri_mem, 0x80000000, 0x40, 0xdeadbeef);",
    ])
    t = parse_cfg(d / "rt.cfg", SMALL)
    write_cfg(d / "copy.cfg", t.commands)
    t2 = parse_cfg(d / "copy.cfg", SMALL)
    assert t2.commands == t.commands


def test_find_traces_prefers_the_directory_named_cfg(make_trace, tmp_path):
    make_trace("one", ["check_nothing(0);"])
    d = make_trace("two", ["check_nothing(0);"])
    (d / "extra.cfg").write_text("check_nothing(0);\n")
    found = find_traces(tmp_path)
    assert [p.name for p in found] == ["one.cfg", "two.cfg"]


def test_find_traces_follows_symlinked_trace_dirs_and_survives_loops(make_trace, tmp_path):
    """A suite picked as a folder of symlinks to trace directories (Path.rglob does not follow them)."""
    one = make_trace("one", ["check_nothing(0);"])
    two = make_trace("two", ["check_nothing(0);"], config="other")
    picked = tmp_path / "picked"
    picked.mkdir()
    (picked / "a").symlink_to(one, target_is_directory=True)
    (picked / "nested").mkdir()
    (picked / "nested" / "b").symlink_to(two, target_is_directory=True)
    (picked / "nested" / "loop").symlink_to(picked, target_is_directory=True)  # a cycle
    (picked / "dangling").symlink_to(tmp_path / "gone", target_is_directory=True)
    found = find_traces(picked)
    assert found == [picked / "a" / "one.cfg", picked / "nested" / "b" / "two.cfg"]
