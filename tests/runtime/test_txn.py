"""nvdlav1 ``input.txn`` traces (runtime/txn.py): parsing, playing on the golden model, errors, CLI."""
from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path

import pytest

from conftest import nvdla_traces_root
from app.cli import main
from golden.config import get_config
from golden.regs import register_map
from runtime.golden_target import GoldenTarget
from runtime.player import play
from runtime.suite import ERROR, FAIL, NA, PASS, run_suite, run_trace
from runtime.trace import RegWrite, TraceError, find_traces
from runtime.txn import DumpMem, LoadMem, PollReg, Wait, parse_plusargs, parse_txn, parse_txn_data

HW = get_config("nv_full")
FULL = register_map(HW.address_map)


def word(unit: str, reg: str) -> str:
    """nvdlav1 CSB word address of a register, as the traces spell it."""
    return f"{0xFFFF0000 | FULL.address(unit, reg) >> 2:#010x}"


DST_SURF = word("BDMA", "CFG_DST_SURF")  # a plain read/write register
INTR_STATUS = word("GLB", "S_INTR_STATUS")
INTR_SET = word("GLB", "S_INTR_SET")


def data_file(payload: bytes, header: str = "Data_size = {n:#x}\nPrecision = INT8\n", per_line: int = 32) -> str:
    lines = [header.format(n=len(payload)).rstrip("\n")] if header else []
    for i in range(0, len(payload), per_line):
        lines.append(" ".join(f"0x{b:02x}" for b in payload[i : i + per_line]))
    return "\n".join(lines) + "\n"


def dump_file(payload: bytes, base: int) -> str:
    """The framing of NVDLA's dump files (header, separators, trailer) around the bytes."""
    body = data_file(payload, header="", per_line=32).splitlines()
    return "\n".join([f"dumped memory,start_address={base:#x} size={len(payload):#x}", "memory type:dram",
                      "=" * 30, "", *(" " + b for b in body), "", "=" * 20, "dump done"]) + "\n"


@pytest.fixture
def make_txn(tmp_path):
    """``<tmp>/nv_full/<name>/input.txn`` with data files and an optional plusargs.txt."""

    def make(name: str, lines: list[str], files: dict[str, str] | None = None, plusargs: str | None = None) -> Path:
        d = tmp_path / "nv_full" / name
        d.mkdir(parents=True)
        for fname, text in (files or {}).items():
            (d / fname).write_text(text)
        if plusargs is not None:
            (d / "plusargs.txt").write_text(plusargs + "\n")
        (d / "input.txn").write_text("\n".join(lines) + "\n")
        return d / "input.txn"

    return make


def play_txn(path: Path):
    return asyncio.run(play(parse_txn(path, FULL), GoldenTarget(HW)))


# ---- the 7 nv_full traces ------------------------------------------------------------------------------
def nv_full_root(pytestconfig) -> Path:
    root = nvdla_traces_root(pytestconfig) / "nv_full"
    if not root.is_dir():
        pytest.skip(f"no nv_full traces at {root}")
    return root


def test_parses_every_nv_full_trace(pytestconfig):
    root = nv_full_root(pytestconfig)
    found = find_traces(root, txn=True)
    assert found and all(p.name == "input.txn" for p in found)
    assert find_traces(root) == []  # .cfg-only callers are not handed .txn files
    kinds: set[type] = set()
    for path in found:
        trace = parse_txn(path, FULL)
        text = [ln for ln in path.read_text().splitlines() if ln.split("#", 1)[0].strip()]
        assert len(trace.commands) == len(text), path
        kinds |= {type(c) for c in trace.commands}
        for cmd in trace.commands:
            if isinstance(cmd, (RegWrite, PollReg)):  # the trailing comment names the register
                comment = path.read_text().splitlines()[cmd.line - 1].split("#", 1)[1]
                assert comment.startswith(cmd.name[:-2]), (path, cmd.line, cmd.name, comment)
            if isinstance(cmd, (LoadMem, DumpMem)):
                assert len(cmd.data if isinstance(cmd, LoadMem) else cmd.expected) == cmd.size
        plus = parse_plusargs(path.parent / "plusargs.txt")
        polls = [c for c in trace.commands if isinstance(c, PollReg)]
        want = int(plus.get("read_reg_poll_retries", "1"), 0)
        assert all(c.retries == want for c in polls)
        assert trace.stop_on_fail == ("continue_on_fail" not in plus)
    assert kinds == {LoadMem, RegWrite, PollReg, Wait, DumpMem}


def test_cvsram_addresses_go_to_sec_mem(pytestconfig):
    root = nv_full_root(pytestconfig)
    if not (root / "sanity1_cvsram" / "input.txn").is_file():
        pytest.skip("no sanity1_cvsram")
    loads = [c for c in parse_txn(root / "sanity1_cvsram" / "input.txn", FULL).commands if isinstance(c, LoadMem)]
    assert loads and all(c.mem == "sec_mem" for c in loads)


def test_cli_runs_the_nv_full_suite(pytestconfig, tmp_path, capsys):
    root = nv_full_root(pytestconfig)
    junit, js = tmp_path / "r.xml", tmp_path / "r.json"
    main(["trace", str(root), "--config", "nv_full", "-j", "1", "--junit", str(junit), "--json", str(js)])
    doc = json.loads(js.read_text())
    by_name = {t["name"]: t for t in doc["traces"]}
    assert len(by_name) == len(find_traces(root, txn=True))
    assert not any(t["bad_input"] for t in doc["traces"]), capsys.readouterr().out
    assert not any(t["traceback"] for t in doc["traces"])
    if "sanity0" in by_name:
        assert by_name["sanity0"]["status"] == PASS
    assert junit.is_file()


# ---- synthetic traces on the golden model --------------------------------------------------------------
def test_masked_read_reg_pass_and_fail(make_txn):
    path = make_txn("regs", [
        "# comment line",
        f"write_reg {DST_SURF} 0xf0a5a500   # trailing comment",
        f"read_reg {DST_SURF} 0xffffffe0 0xf0a5a51f  # low bits are outside the mask",
        f"read_reg {DST_SURF} 0xffffffe0 0x00a5a500",
        f"read_reg {DST_SURF} 0x0 0x12345678",
    ], plusargs="+continue_on_fail")
    result = play_txn(path)
    assert [c.ok for c in result.checks] == [True, False, True]
    bad = result.checks[1]
    assert bad.line == 4 and bad.got == 0xF0A5A500 and "NVDLA_BDMA.CFG_DST_SURF_0" in bad.message


def test_read_reg_failure_stops_without_continue_on_fail(make_txn):
    lines = [f"write_reg {DST_SURF} 0x100", f"read_reg {DST_SURF} 0xffffffff 0x200",
             f"read_reg {DST_SURF} 0xffffffff 0x300"]
    stopped = play_txn(make_txn("stop", lines))
    assert [c.ok for c in stopped.checks] == [False] and "stopped" in stopped.checks[0].message
    going = play_txn(make_txn("go", lines, plusargs="+continue_on_fail"))
    assert [c.ok for c in going.checks] == [False, False]


def test_poll_retries_and_wait(make_txn):
    # S_INTR_SET raises a done bit, `wait` sees it, the polled read matches, the W1C write clears it.
    path = make_txn("poll", [
        f"write_reg {INTR_SET} 0x40",
        "wait",
        f"read_reg {INTR_STATUS} 0x40 0x40",
        f"write_reg {INTR_STATUS} 0xffffffff",
        f"read_reg {INTR_STATUS} 0x40 0x40",
    ], plusargs="+read_reg_poll_retries=7 +continue_on_fail")
    result = play_txn(path)
    assert [c.ok for c in result.checks] == [True, False]
    assert "after 7 reads" in result.checks[1].message


def test_wait_without_interrupt_is_an_error(make_txn):
    out = run_trace(str(make_txn("nowait", [f"write_reg {DST_SURF} 0x1", "wait"])), "nv_full")
    assert out.status == ERROR and "line 2: wait" in out.detail and not out.bad_input


def test_self_clearing_kick_readback_accepts_completion(make_txn):
    op_en = word("PDP", "D_OP_ENABLE")
    parsed = parse_txn(make_txn("kick", [f"read_reg {op_en} 0x1 0x1", f"read_reg {DST_SURF} 0x1 0x1"]), FULL)
    kick, plain = parsed.commands
    assert kick.done_ok and kick.matches(0) and kick.matches(1)
    assert not plain.done_ok and not plain.matches(0)


def test_load_mem_then_dump_mem(make_txn, tmp_path):
    payload = bytes((i * 37 + 5) & 0xFF for i in range(96))
    base = 0x80001000
    good = make_txn("dump_ok", [f"load_mem {base:#x} {len(payload):#x} in.dat", f"dump_mem {base:#x} 0x40 out.dat"],
                    {"in.dat": data_file(payload + bytes(32)), "out.dat": dump_file(payload[:0x40], base)})
    result = play_txn(good)
    assert [c.kind for c in result.checks] == ["dump_mem"] and result.passed
    # load_mem loads SIZE bytes only: the file's extra bytes stay out of memory
    assert run_trace(str(good), "nv_full").status == PASS

    wrong = bytearray(payload[:0x40])
    wrong[0x23] ^= 0xFF
    bad = make_txn("dump_bad", [f"load_mem {base:#x} 0x40 in.dat", f"dump_mem {base:#x} 0x40 out.dat"],
                   {"in.dat": data_file(payload[:0x40]), "out.dat": dump_file(bytes(wrong), base)})
    out = run_trace(str(bad), "nv_full")
    assert out.status == FAIL and "first at offset 0x23" in out.detail and out.checks[0]["first_diff"] == base + 0x23


def test_cvsram_load_is_not_visible_in_dram(make_txn):
    payload = bytes(range(32))
    path = make_txn("cv", ["load_mem 0x50000000 0x20 in.dat", "dump_mem 0x50000000 0x20 out.dat"],
                    {"in.dat": data_file(payload), "out.dat": dump_file(payload, 0x50000000)})
    trace = parse_txn(path, FULL)
    target = GoldenTarget(HW)
    assert asyncio.run(play(trace, target)).passed
    assert target.dla.mem.space("sec_mem").read_bytes(0x50000000, 32) == payload


def test_data_file_parsing(tmp_path):
    f = tmp_path / "d.dat"
    f.write_text("# dumped @ x\nW=0x8\nData_size=0x3\nCrc=0x1\n0x01 0x02  # note\n\n0xff\n")
    assert parse_txn_data(f) == b"\x01\x02\xff"
    f.write_text("Data_size = 0x4\n0x01 0x02\n")
    with pytest.raises(TraceError, match=r"d.dat:1: truncated"):
        parse_txn_data(f)
    f.write_text("0x01 0x2g\n")
    with pytest.raises(TraceError, match=r"d.dat:1: bad byte"):
        parse_txn_data(f)


BAD_TRACES = {
    "unknown_command": ([f"write_reg {DST_SURF} 0x1", "poke 0x1 0x2"], {}, r"input.txn:2: unknown command 'poke'"),
    "bad_number": ([f"write_reg {DST_SURF} 0xzz"], {}, r"input.txn:1: bad number '0xzz'"),
    "arity": ([f"read_reg {DST_SURF} 0x1"], {}, r"input.txn:1: read_reg takes 3 arguments, got 2"),
    "not_a_word_address": (["write_reg 0x402c 0x1"], {}, r"input.txn:1: register address 0x402c"),
    "no_register": (["write_reg 0xffff0fff 0x1"], {}, r"input.txn:1: no register at 0xffff0fff"),
    "short_file": (["load_mem 0x80000000 0x40 in.dat"], {"in.dat": data_file(bytes(32), header="")},
                   r"input.txn:1: load_mem: in.dat holds 0x20 bytes, fewer than 0x40"),
    "truncated_file": (["dump_mem 0x80000000 0x20 out.dat"], {"out.dat": "Data_size = 0x40\n" + data_file(bytes(32), header="")},
                       r"out.dat:1: truncated"),
}


@pytest.mark.parametrize("case", sorted(BAD_TRACES))
def test_malformed_trace_is_one_line_error(make_txn, case):
    lines, files, pattern = BAD_TRACES[case]
    out = run_trace(str(make_txn(case, lines, files)), "nv_full")
    assert out.status == ERROR and out.bad_input and not out.traceback
    assert "\n" not in out.detail
    assert re.search(pattern, out.detail), out.detail


def test_missing_data_file_is_not_applicable(make_txn):
    """As for a .cfg trace: NVDLA's trace trees lack some large data files; such a trace is N/A."""
    out = run_trace(str(make_txn("nofile", ["load_mem 0x80000000 0x20 nope.dat"], {})), "nv_full")
    assert out.status == NA and out.detail == "missing data file nope.dat"


def test_bad_plusargs(make_txn):
    out = run_trace(str(make_txn("plus", [f"write_reg {DST_SURF} 0x1"], plusargs="+read_reg_poll_retries=lots")), "nv_full")
    assert out.status == ERROR and out.bad_input and "plusargs.txt:1: bad number 'lots'" in out.detail


@pytest.mark.parametrize("plusargs, line, message", [
    ("+read_reg_poll_retries=-1", 1, "+read_reg_poll_retries=-1: expected a number of reads from 0 to 1,000,000"),
    ("+continue_on_fail\n+read_reg_poll_retries=1000000000000", 2,
     "+read_reg_poll_retries=1000000000000: expected a number of reads from 0 to 1,000,000"),
])
def test_poll_retries_out_of_range_are_refused_at_parse_time(make_txn, plusargs, line, message):
    path = make_txn("plus", [f"write_reg {DST_SURF} 0x1"], plusargs=plusargs)
    with pytest.raises(TraceError) as ei:
        parse_txn(path, FULL)
    assert str(ei.value) == f"{path.parent / 'plusargs.txt'}:{line}: {message}"


def test_register_values_wider_than_32_bits_are_errors(make_txn):
    path = make_txn("wide", [f"write_reg {DST_SURF} 0x100000000"])
    with pytest.raises(TraceError, match=r"input\.txn:1: value 0x100000000 for .* does not fit in 32 bits"):
        parse_txn(path, FULL)


def test_suite_carries_on_after_a_bad_trace(make_txn, tmp_path, capsys):
    make_txn("a_bad", ["frobnicate"])
    make_txn("b_good", [f"write_reg {DST_SURF} 0x20", f"read_reg {DST_SURF} 0xffffffff 0x20"])
    root = tmp_path / "nv_full"
    jobs = [(str(p), "nv_full", "golden") for p in find_traces(root, txn=True)]
    assert [o.status for o in run_suite(jobs)] == [ERROR, PASS]
    js = tmp_path / "r.json"
    assert main(["trace", str(root), "--json", str(js)]) == 2  # config inferred from the folder name
    captured = capsys.readouterr()
    assert "ERROR a_bad: " in captured.out and "PASS  b_good" in captured.out and "Traceback" not in captured.err
    assert "1 passed, 1 failed, 0 skipped" in captured.out
    assert [t["name"] for t in json.loads(js.read_text())["traces"]] == ["a_bad", "b_good"]
