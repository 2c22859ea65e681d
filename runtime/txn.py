"""NVDLA's older trace format: nvdlav1 ``input.txn`` command files (+ ``plusargs.txt``, data files).

One command per line, ``#`` starts a comment (whole line or trailing):

- ``load_mem ADDR SIZE FILE``: the first SIZE bytes of FILE's payload go to ADDR (the header comment of
  the format calls SIZE "offset"; in every nv_full trace it equals the file's ``Data_size``);
- ``write_reg ADDR DATA [MISC]`` / ``read_reg ADDR MASK EXPECT``: ADDR is a CSB *word* address in the
  form ``0xffff0000 | (byte >> 2)`` (NOTES §2), mapped here to the config's byte address so the command
  becomes the same ``RegWrite``/``RegRead`` a ``.cfg`` trace yields; ``read_reg`` compares under MASK;
- ``wait``: wait for the interrupt that ends the outstanding operation;
- ``dump_mem ADDR SIZE FILE``: read SIZE bytes at ADDR and compare them with FILE's payload.

``plusargs.txt`` holds testbench switches: ``+read_reg_poll_retries=N`` turns every ``read_reg`` into a
poll of up to N reads (hardware finishes asynchronously), ``+continue_on_fail`` keeps playing after a
failed ``read_reg`` (otherwise the trace stops there, as NVDLA's testbench does).

Data files are text: ``Key = value`` header lines (``Data_size``, ``W``, ``Precision``, ...), ``#`` comments,
separators, and lines of ``0xNN`` bytes; dump files wrap the bytes in a ``dumped memory,...`` header and a
``dump done`` trailer. Every byte line must hold only bytes, so a corrupt file is an error naming its line.
``Data_size`` counts the meaningful bytes; a file may hold more (the nv_full ``sample_surf.dat`` holds 0x4000
bytes for a 0x1000-byte surface), never fewer.

Every ``read_reg`` becomes a ``PollReg`` (one read when there is no poll plusarg). Read-backs of the
registers that start an operation and clear when it ends (``D_OP_ENABLE``, BDMA ``CFG_LAUNCH0/1``) also
accept 0: whether the operation is still running when the read arrives is timing, and a target that
completes operations synchronously (the golden model) has always finished; completion itself is checked
by ``wait``, the status reads and ``dump_mem``.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from golden.regs import RegisterMap
from runtime.trace import (Cmd, RegWrite, Trace, TraceError, data_file_path, parse_extent, parse_word,
                           read_trace_text)

#: nvdlav1 CSB word addresses carry this prefix (``0xffff0000 | byte >> 2``).
CSB_WORD_PREFIX = 0xFFFF0000
#: Memory windows of the nvdlav1 testbench: CV-SRAM at 0x5000_0000 (the ``*_cvsram`` traces load there
#: and program RAM_TYPE=CV), DRAM (MC) from 0x8000_0000.
CVSRAM_BASE, DRAM_BASE = 0x5000_0000, 0x8000_0000
#: GLB.S_INTR_STATUS bits a ``wait`` listens to: every done bit of NOTES §2's table.
ALL_DONE_BITS = 0x3F03FF
PLUSARGS_FILE = "plusargs.txt"
#: Most reads one ``read_reg`` poll may make (``+read_reg_poll_retries``): NVDLA's traces ask 10 or 100,000;
#: a read costs ~5 us on golden and far more on a simulator, so 10^12 would never end. A larger value is
#: refused when the trace is parsed, naming plusargs.txt, instead of polling for minutes and then failing.
MAX_POLL_READS = 1_000_000
#: Registers that start an operation and clear when it finishes (NOTES §2).
SELF_CLEARING = frozenset({"D_OP_ENABLE", "CFG_LAUNCH0", "CFG_LAUNCH1"})


def memory_for(addr: int) -> str:
    """The target memory (``pri_mem``/``sec_mem``) an nvdlav1 trace address lives in."""
    return "sec_mem" if CVSRAM_BASE <= addr < DRAM_BASE else "pri_mem"


# ---- commands (besides the shared RegWrite / RegRead) ------------------------------------------------
@dataclass(frozen=True)
class LoadMem(Cmd):
    """``load_mem``: ``data`` (already parsed, exactly ``size`` bytes) goes to ``base`` in ``mem``."""

    mem: str
    base: int
    size: int
    file: Path
    data: bytes = field(repr=False, compare=False, default=b"")


@dataclass(frozen=True)
class PollReg(Cmd):
    """``read_reg``: up to ``retries`` reads (``+read_reg_poll_retries=N``, else 1) until the masked value
    matches; still different after that is a failed check. ``done_ok``: a masked 0 also passes (the
    read-back of a self-clearing kick register whose operation may already be over)."""

    name: str
    addr: int
    expected: int
    mask: int
    retries: int = 1
    done_ok: bool = False

    def matches(self, value: int) -> bool:
        got = value & self.mask
        return got == self.expected & self.mask or (self.done_ok and got == 0)


@dataclass(frozen=True)
class Wait(Cmd):
    """``wait``: block until the DLA raises an interrupt (any GLB done bit in ``bits``)."""

    bits: int = ALL_DONE_BITS


@dataclass(frozen=True)
class DumpMem(Cmd):
    """``dump_mem``: read ``size`` bytes at ``base`` and compare with ``expected`` (from ``file``)."""

    mem: str
    base: int
    size: int
    file: Path
    expected: bytes = field(repr=False, compare=False, default=b"")


@dataclass
class TxnTrace(Trace):
    """A parsed ``input.txn`` trace; ``plusargs`` as read from ``plusargs.txt`` (``+flag`` -> "")."""

    plusargs: dict[str, str] = field(default_factory=dict)

    def data_files(self) -> list[Path]:
        return [c.file for c in self.commands if isinstance(c, (LoadMem, DumpMem))]

    def checks(self) -> list:
        return [c for c in self.commands if isinstance(c, (PollReg, DumpMem))]


# ---- data files --------------------------------------------------------------------------------------
_BYTE = re.compile(r"0x[0-9a-fA-F]{1,2}")


def parse_txn_data(path: Path | str) -> bytes:
    """The byte payload of an nvdlav1 data or dump file: every line whose first token starts with
    ``0x`` is a byte line; the rest (headers, separators, trailers, ``#`` comments) is skipped.
    A ``Data_size`` header, when present, must match the byte count."""
    path = Path(path)
    text = read_trace_text(path, "data file")
    out = bytearray()
    declared: tuple[int, int] | None = None  # (Data_size, line)
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        toks = line.split()
        if toks[0][:2].lower() != "0x":
            key, eq, value = line.partition("=")
            if eq and key.strip().lower() == "data_size":
                try:
                    declared = (int(value.strip(), 0), lineno)
                except ValueError:
                    raise TraceError(path, lineno, f"bad Data_size {value.strip()!r}") from None
            continue
        for tok in toks:
            if not _BYTE.fullmatch(tok):
                raise TraceError(path, lineno, f"bad byte {tok!r} (expected 0xNN)")
        out.extend(int(t, 16) for t in toks)
    if declared is not None and len(out) < declared[0]:
        raise TraceError(path, declared[1], f"truncated: Data_size is {declared[0]:#x} but the file holds {len(out):#x} bytes")
    return bytes(out)


# ---- plusargs ----------------------------------------------------------------------------------------
def parse_plusargs(path: Path | str) -> dict[str, str]:
    """``+name=value`` and ``+flag`` tokens of a plusargs file; an absent file means none."""
    path = Path(path)
    if not path.is_file():
        return {}
    out: dict[str, str] = {}
    for lineno, raw in enumerate(read_trace_text(path, "plusargs file").splitlines(), 1):
        for tok in raw.split("#", 1)[0].split():
            if not tok.startswith("+") or len(tok) < 2:
                raise TraceError(path, lineno, f"bad plusarg {tok!r} (expected +name or +name=value)")
            name, _, value = tok[1:].partition("=")
            out[name] = value
    return out


def _plusarg_line(path: Path, name: str) -> int:
    """The line of the last ``+name`` in a plusargs file (the one in force), for an error about it."""
    found = 1
    for lineno, raw in enumerate(read_trace_text(path, "plusargs file").splitlines(), 1):
        if any(tok[1:].partition("=")[0] == name for tok in raw.split("#", 1)[0].split()):
            found = lineno
    return found


def _poll_retries(path: Path, raw: str) -> int:
    """``+read_reg_poll_retries``: a count of reads in [0, MAX_POLL_READS] (0 and 1 both mean one read)."""
    try:
        retries = int(raw, 0)
    except ValueError:
        raise TraceError(path, _plusarg_line(path, "read_reg_poll_retries"),
                         f"bad number {raw!r} for +read_reg_poll_retries (reads from 0 to {MAX_POLL_READS:,})") from None
    if not 0 <= retries <= MAX_POLL_READS:
        raise TraceError(path, _plusarg_line(path, "read_reg_poll_retries"),
                         f"+read_reg_poll_retries={raw}: expected a number of reads from 0 to {MAX_POLL_READS:,}")
    return retries


# ---- input.txn ---------------------------------------------------------------------------------------
def _number(tok: str, path: Path, line: int, what: str) -> int:
    try:
        return int(tok, 16) if tok.lower().startswith("0x") else int(tok, 10)
    except ValueError:
        raise TraceError(path, line, f"bad number {tok!r} for {what}") from None


_ARITY = {"load_mem": (3,), "write_reg": (2, 3), "read_reg": (3,), "wait": (0,), "dump_mem": (3,)}


def parse_txn(path: Path | str, regmap: RegisterMap, name: str | None = None) -> TxnTrace:
    """Parse an ``input.txn`` (and the ``plusargs.txt`` beside it). Register addresses resolve against
    ``regmap``; data files are read and checked now, so any malformed input is a ``TraceError`` naming
    ``file:line`` before anything runs."""
    path = Path(path)
    text = read_trace_text(path, "trace")
    plusargs = parse_plusargs(path.parent / PLUSARGS_FILE)
    retries = 0
    if "read_reg_poll_retries" in plusargs:
        retries = _poll_retries(path.parent / PLUSARGS_FILE, plusargs["read_reg_poll_retries"])
    trace = TxnTrace(name or path.parent.name, path, plusargs=plusargs,
                     stop_on_fail="continue_on_fail" not in plusargs)
    cmds = trace.commands
    for lineno, raw in enumerate(text.splitlines(), 1):
        toks = raw.split("#", 1)[0].split()
        if not toks:
            continue
        op, args = toks[0], toks[1:]
        if op not in _ARITY:
            raise TraceError(path, lineno, f"unknown command {op!r} (known: {', '.join(_ARITY)})")
        if len(args) not in _ARITY[op]:
            want = " or ".join(str(n) for n in _ARITY[op])
            raise TraceError(path, lineno, f"{op} takes {want} arguments, got {len(args)}")

        def reg(tok: str) -> tuple[str, int, str]:
            word = _number(tok, path, lineno, "register address")
            if word & 0xFFFF0000 != CSB_WORD_PREFIX:
                raise TraceError(path, lineno, f"register address {tok} is not a CSB word address 0xffffXXXX")
            byte = (word & 0xFFFF) << 2
            r = regmap.lookup(byte)
            if r is None:
                raise TraceError(path, lineno, f"no register at {tok} (byte address {byte:#x}) in the {regmap.kind} address map")
            return r.full_name, byte, r.name

        def data(tok: str, size: int, what: str) -> tuple[Path, bytes]:
            file = data_file_path(path, tok, lineno)
            if not file.is_file():  # reported by ``missing_files`` (N/A, as for a .cfg trace)
                return file, b""
            payload = parse_txn_data(file)
            if len(payload) < size:
                raise TraceError(path, lineno, f"{what}: {tok} holds {len(payload):#x} bytes, fewer than {size:#x}")
            return file, payload[:size]

        if op == "write_reg":  # a third MISC argument (format header: misc_bits) carries no data
            nm, addr, _ = reg(args[0])
            cmds.append(RegWrite(lineno, nm, addr, parse_word(args[1], path, lineno, nm)))
        elif op == "read_reg":
            nm, addr, short = reg(args[0])
            mask = parse_word(args[1], path, lineno, "mask")
            expected = parse_word(args[2], path, lineno, "expected value")
            cmds.append(PollReg(lineno, nm, addr, expected, mask, max(retries, 1), short in SELF_CLEARING))
        elif op == "wait":
            cmds.append(Wait(lineno))
        else:  # load_mem / dump_mem
            base = parse_extent(args[0], path, lineno, f"{op} address")
            size = parse_extent(args[1], path, lineno, f"{op} size", allocates=True)
            file, payload = data(args[2], size, op)
            cls = LoadMem if op == "load_mem" else DumpMem
            cmds.append(cls(lineno, memory_for(base), base, size, file, payload))
    return trace


def is_txn(path: Path | str) -> bool:
    return Path(path).suffix == ".txn"


def parse_trace(path: Path | str, regmap: RegisterMap, name: str | None = None) -> Trace:
    """Either trace format by its file: ``input.txn`` (this module) or a ``.cfg`` (``runtime.trace``). Every
    player and target takes what this returns, so no caller has to know the format."""
    from runtime.trace import parse_cfg

    return (parse_txn if is_txn(path) else parse_cfg)(path, regmap, name=name)
