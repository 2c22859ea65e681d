"""Malformed traces: NVDLA's own .cfg, .dat, input.txn and plusargs.txt with one thing wrong each (bytes
that are not UTF-8, negative or 2^40 sizes, unknown registers, bad numbers, cut lines) and data files
that are missing, folders, FIFOs or /dev/zero, with and without --strict. The promise: one line naming
file:line (and the register or field), exit 2, the report still written."""
from __future__ import annotations

from pathlib import Path

from regressions.robustness.attack import Attack, Scenario
from regressions.robustness.attacks.common import (Edit, data_name, fifo, pdp_trace, replace_line, sub, trace_cfg,
                                                   txn_trace)
from regressions.robustness.material import Material

FAMILY = "malformed traces"
BAD_INPUT = frozenset({2})


#: ``needle`` meaning "the file's last line" (a file cut mid-line).
LAST = "<last line>"


def _line_of(text: str | bytes, needle: str | bytes) -> int:
    lines = text.splitlines() if isinstance(text, str) else text.rstrip(b"\n").split(b"\n")
    if needle in (LAST, LAST.encode()):
        return len(lines)
    return next(i for i, ln in enumerate(lines, 1) if needle in ln)


def _cfg(name: str, edit: Edit, needle: str | bytes | None, also: tuple[str, ...] = (),
         exits: frozenset[int] = BAD_INPUT, quick: bool = False, names_cfg: bool = True) -> Attack:
    """An edit of the PDP trace's .cfg; the line must name ``t.cfg:N`` for the line holding ``needle``
    (or only ``also`` when not ``names_cfg``: an error in a file the .cfg points at names that file)."""
    def setup(workdir: Path, material: Material) -> Scenario:
        rel = pdp_trace(workdir, material, edit)
        cfg = trace_cfg(rel)
        text = (workdir / cfg).read_bytes()
        where = f"{cfg}:{_line_of(text, needle if isinstance(needle, bytes) else needle.encode())}" if needle else cfg
        return Scenario(["trace", str(rel), "--json", "report.json"], names=(where, *also) if names_cfg else also,
                        fail_names=("t:",),
                        reports=(Path("report.json"),))
    return Attack(f".cfg: {name}", FAMILY, setup, exits, quick=quick)


def _dat(name: str, edit: Edit, needle: str | bytes | None, exits: frozenset[int] = BAD_INPUT) -> Attack:
    def setup(workdir: Path, material: Material) -> Scenario:
        rel = pdp_trace(workdir, material, copy_data=True)
        dat = workdir / rel / data_name(material)
        new = edit(dat.read_text())
        dat.write_bytes(new if isinstance(new, bytes) else new.encode())
        where = str(rel / dat.name)
        if needle:
            where += f":{_line_of(dat.read_bytes(), needle if isinstance(needle, bytes) else needle.encode())}"
        return Scenario(["trace", str(rel)], names=(where,), fail_names=("t:",))
    return Attack(f".dat: {name}", FAMILY, setup, exits)


def _txn(name: str, edit: Edit | None = None, plusargs: str | bytes | None = None, needle: str | bytes | None = None,
         file: str = "input.txn", exits: frozenset[int] = BAD_INPUT) -> Attack:
    def setup(workdir: Path, material: Material) -> Scenario:
        rel = txn_trace(workdir, material, edit, plusargs)
        path = workdir / rel / file
        where = str(rel / file)
        if needle:
            where += f":{_line_of(path.read_bytes(), needle if isinstance(needle, bytes) else needle.encode())}"
        return Scenario(["trace", str(rel)], names=(where,), fail_names=("s:",))
    return Attack(f"{file}: {name}", FAMILY, setup, exits)


def _txn_data_not_utf8() -> Attack:
    def setup(workdir: Path, material: Material) -> Scenario:
        rel = txn_trace(workdir, material, copy_data=True)
        dat = next((workdir / rel).glob("*.dat"))
        dat.write_bytes(b"\xff\xfe" + dat.read_bytes()[2:])
        return Scenario(["trace", str(rel)], names=(str(rel / dat.name),), fail_names=("s:",))
    return Attack("txn data file: invalid UTF-8", FAMILY, setup)


def _data_file(kind: str, strict: bool) -> Attack:
    """The .cfg's mem_load names a data file that is missing, a folder, a FIFO or /dev/zero."""
    def setup(workdir: Path, material: Material) -> Scenario:
        rel = pdp_trace(workdir, material)
        dat = workdir / rel / data_name(material)
        dat.unlink()
        if kind == "folder":
            dat.mkdir()
        elif kind == "FIFO":
            fifo(dat)
        elif kind == "/dev/zero":
            dat.symlink_to("/dev/zero")
        cfg = trace_cfg(rel)
        where = f"{cfg}:{_line_of((workdir / cfg).read_text(), 'mem_load')}"
        argv = ["trace", str(rel), "--json", "report.json", *(["--strict"] if strict else [])]
        return Scenario(argv, names=(where,), fail_names=("t:", where), reports=(Path("report.json"),))
    # a missing file without --strict is N/A (NVDLA's snapshot lacks some blobs); everything else is refused
    exits = frozenset({0}) if kind == "missing" and not strict else frozenset({1, 2})
    return Attack(f"data file {kind}{' --strict' if strict else ''}", FAMILY, setup, exits,
                  quick=kind in ("FIFO", "missing"), line_optional=0 in exits)


def _long_line(text: str) -> str:
    """An unknown register whose name is 10 MB long: refused, and the line that says so stays readable."""
    return text.replace("reg_write(NVDLA_PDP.S_POINTER_0, 0x0);", "reg_write(NVDLA_PDP.S_" + "X" * 10_000_000 + ", 0x0);")


def attacks() -> list[Attack]:
    out_fill = "mem_init(pri_mem, 0x80000000, 0x1e6c0, ALL_ZERO);"
    pointer = "reg_write(NVDLA_PDP.S_POINTER_0, 0x0);"
    cfg = [
        _cfg("invalid UTF-8 in a line", lambda t: t.replace(pointer, pointer[:-2] + "\xff\xfe);").encode("latin-1"),
             b"\xff\xfe", quick=True),
        _cfg("NUL byte in a line", sub(pointer, pointer[:10] + "\0" + pointer[10:]), "\0"),
        _cfg("negative base", sub(out_fill, "mem_init(pri_mem, -0x80000000, 0x1e6c0, ALL_ZERO);"), "-0x80000000",
             quick=True),
        _cfg("negative size", sub(out_fill, "mem_init(pri_mem, 0x80000000, -0x1e6c0, ALL_ZERO);"), "-0x1e6c0"),
        _cfg("base at 2^40", sub(out_fill, "mem_init(pri_mem, 0x10000000000, 0x1e6c0, ALL_ZERO);"), "0x10000000000"),
        _cfg("size 2^40 in mem_load's region", sub("mem_init(pri_mem, 0x80800000, 0x6900, ALL_ZERO);",
                                                   "mem_init(pri_mem, 0x80800000, 0x10000000000, ALL_ZERO);"),
             "0x10000000000"),
        _cfg("unknown register", sub(pointer, "reg_write(NVDLA_PDP.D_BOGUS_0, 0x0);"), "D_BOGUS_0", ("D_BOGUS_0",),
             quick=True),
        _cfg("unknown unit", sub(pointer, "reg_write(NVDLA_FOO.S_POINTER_0, 0x0);"), "NVDLA_FOO", ("NVDLA_FOO",)),
        _cfg("bad number 0xZZ", sub(pointer, "reg_write(NVDLA_PDP.S_POINTER_0, 0xZZ);"), "0xZZ"),
        _cfg("bad number 12abc", sub(pointer, "reg_write(NVDLA_PDP.S_POINTER_0, 12abc);"), "12abc"),
        _cfg("empty value", sub(pointer, "reg_write(NVDLA_PDP.S_POINTER_0, );"), "S_POINTER_0, )"),
        _cfg("value wider than 32 bits", sub(pointer, "reg_write(NVDLA_PDP.S_POINTER_0, 0x1ffffffff);"), "0x1ffffffff"),
        _cfg("value wider than its field", replace_line("NVDLA_PDP.D_DATA_CUBE_IN_WIDTH_0,",
                                                        "reg_write(NVDLA_PDP.D_DATA_CUBE_IN_WIDTH_0, 0xffffffff);"),
             None, ("D_DATA_CUBE_IN_WIDTH",), exits=frozenset({1, 2})),
        _cfg("line cut before ');'", sub(pointer, pointer[:-2]), "S_POINTER_0, 0x0"),
        _cfg("file cut mid-line", lambda t: t[: t.index("NVDLA_PDP.D_DATA_CUBE_IN_WIDTH_0") + 20],
             LAST),
        _cfg("unknown command", sub(pointer, "reg_frob(NVDLA_PDP.S_POINTER_0, 0x0);"), "reg_frob"),
        _cfg("unknown memory", sub(out_fill, "mem_init(foo_mem, 0x80000000, 0x1e6c0, ALL_ZERO);"), "foo_mem"),
        _cfg("unknown fill pattern", sub(out_fill, "mem_init(pri_mem, 0x80000000, 0x1e6c0, ALL_PLAID);"), "ALL_PLAID"),
        _cfg("check_crc with 3 arguments", sub("check_crc(sync_id_0, 1, 0x80000000, 0x1e6c0, 0x388f5f72);",
                                               "check_crc(sync_id_0, 1, 0x80000000);"), "check_crc"),
        _cfg("intr_notify of an unknown unit", sub("intr_notify(PDP_0, sync_id_0);", "intr_notify(FOO_0, sync_id_0);"),
             "FOO_0"),
        _cfg("check_crc of a sync id never notified", sub("check_crc(sync_id_0,", "check_crc(sync_id_9,"),
             "sync_id_9", exits=frozenset({1, 2})),
        _cfg("a 10 MB register name", _long_line, "S_XXXX"),
        _cfg("binary garbage", lambda t: bytes(range(256)) * 64, None),
        _cfg("mem_load of ../../../../etc/passwd", sub("pdp_12x9x19_8x3_ave_int8_0_in.dat", "../../../../../../../etc/passwd"),
             None, ("etc/passwd",), exits=frozenset({1, 2}), names_cfg=False),
        _cfg("mem_load of /dev/zero by absolute path", sub("pdp_12x9x19_8x3_ave_int8_0_in.dat", "/dev/zero"),
             "/dev/zero", exits=frozenset({1, 2})),
    ]
    dat = [
        _dat("invalid UTF-8", lambda t: t.replace("payload:", "payload:\xff", 1).encode("latin-1"), b"\xff"),
        _dat("bad offset", lambda t: t.replace("offset:0x4,", "offset:0xZZ,", 1), "0xZZ"),
        _dat("fewer payload bytes than size", lambda t: t.replace("size:4, payload:0x9c 0x5a 0xe3 0xa6",
                                                                   "size:4, payload:0x9c 0x5a", 1), "0x9c 0x5a}"),
        _dat("offset past the region", lambda t: t.replace("offset:0x4,", "offset:0x7fffffff,", 1), "0x7fffffff",
             exits=frozenset({1, 2})),
        _dat("negative offset", lambda t: t.replace("offset:0x4,", "offset:-0x4,", 1), "-0x4"),
        _dat("cut in half", lambda t: t[: len(t) // 2], None),
        _dat("payload byte 0x1ff", lambda t: t.replace("payload:0x9c", "payload:0x1ff", 1), "0x1ff"),
    ]
    txn = [
        _txn("invalid UTF-8", lambda t: t.replace("write_reg 0xffff1008", "write_reg \xff0xffff1008").encode("latin-1"),
             needle=b"\xff0xffff1008"),
        _txn("invalid UTF-8", plusargs=b"+read_reg_poll_retries=100000 \xff\xfe", file="plusargs.txt"),
        _txn("unknown command", lambda t: t.replace("write_reg 0xffff1008", "frob_reg 0xffff1008"), needle="frob_reg"),
        _txn("bad hex address", lambda t: t.replace("write_reg 0xffff1008", "write_reg 0xffffZZ08"), needle="0xffffZZ08"),
        _txn("unmapped register address", lambda t: t.replace("write_reg 0xffff1008", "write_reg 0xdeadbeef"),
             needle="0xdeadbeef", exits=frozenset({1, 2})),
        _txn("load_mem of a missing file", lambda t: t.replace("sample_surf.dat", "no_such.dat"), needle="no_such.dat",
             exits=frozenset({0, 1, 2})),
        _txn("load_mem of more bytes than the file", lambda t: t.replace("load_mem 0x80000000 0x1000",
                                                                         "load_mem 0x80000000 0x100000"),
             needle="load_mem 0x80000000"),
        _txn("read_reg with 2 arguments", lambda t: t.replace("read_reg 0xffff1008 0xffffffe0 0x00000100",
                                                              "read_reg 0xffff1008 0xffffffe0"),
             needle="read_reg 0xffff1008 0xffffffe0 #"),
        _txn("plusarg without '+'", plusargs="read_reg_poll_retries=5", file="plusargs.txt"),
        _txn_data_not_utf8(),
    ]
    data = [_data_file(kind, strict) for kind in ("missing", "folder", "FIFO", "/dev/zero") for strict in (False, True)]
    return cfg + dat + txn + data
