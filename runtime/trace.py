"""NVDLA register-level trace format: ``.cfg`` command files and their ``.dat`` payloads (NOTES §5).

A trace is a register program plus a memory image: ``reg_write``/``poll_reg_equal`` drive the CSB,
``mem_init``/``mem_load`` build memory, ``intr_notify`` binds a sync point to an interrupt, and
``check_crc``/``check_file``/``check_nothing`` check results once their sync point fired. Parsing
resolves register names against the config's address map, so every error names ``file:line``.
"""
from __future__ import annotations

import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Iterator, Union

import numpy as np

from dlaio.inputs import kind_of
from golden.budget import MemoryBudgetError, check_size, format_size
from golden.errors import RegisterError, clip_tokens
from golden.intr import DONE_BITS
from golden.regs import RegisterMap

#: intr_notify IDs -> GLB S_INTR_STATUS bit of group 0 (group 1 is the next bit): the register table's
#: sources, and RBK, the register block's name, for RUBIK.
INTR_BITS = {**DONE_BITS, "RBK": DONE_BITS["RUBIK"]}
MEM_NAMES = {"1": "pri_mem", "pri_mem": "pri_mem", "2": "sec_mem", "sec_mem": "sec_mem"}
#: mem_init fill patterns.
FILL_PATTERNS = {"ALL_ZERO": 0x00, "ALL_ONE": 0xFF, "ALL_F": 0xFF}
#: Addresses and sizes at or above 2^40 (1 TiB) are typos or attacks, not memories any NVDLA config has.
MAX_EXTENT = 1 << 40
#: Bytes of parser state per byte of trace or data text (the text, tokens, int64 offsets and values):
#: a text file is refused before it is read when this many times its size exceeds the memory budget.
TEXT_EXPANSION = 8


class TraceError(Exception):
    """A malformed trace: carries ``file:line`` and prints as one line."""

    def __init__(self, path: Path | str, line: int, message: str) -> None:
        self.path, self.line, self.message = Path(path), line, clip_tokens(message)
        super().__init__(f"{path}:{line}: {self.message}")


# ---- commands ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Cmd:
    line: int


@dataclass(frozen=True)
class RegWrite(Cmd):
    name: str
    addr: int
    value: int


@dataclass(frozen=True)
class RegRead(Cmd):
    """``reg_read`` (no check) and ``reg_read_check`` (``expected`` under ``mask``)."""

    name: str
    addr: int
    expected: int | None = None
    mask: int = 0xFFFFFFFF


@dataclass(frozen=True)
class PollRegEqual(Cmd):
    name: str
    addr: int
    value: int


@dataclass(frozen=True)
class MemInit(Cmd):
    mem: str
    base: int
    size: int
    fill: int


@dataclass(frozen=True)
class MemLoad(Cmd):
    mem: str
    base: int
    file: Path


@dataclass(frozen=True)
class IntrNotify(Cmd):
    source: str  # e.g. SDP_0
    bit: int  # GLB status bit
    sync: str


@dataclass(frozen=True)
class CheckCrc(Cmd):
    sync: str
    mem: str
    base: int
    size: int
    crc: int


@dataclass(frozen=True)
class CheckFile(Cmd):
    sync: str
    mem: str
    base: int
    size: int
    file: Path


@dataclass(frozen=True)
class CheckNothing(Cmd):
    sync: str


@dataclass(frozen=True)
class SyncNotify(Cmd):
    unit: str
    event: str


@dataclass(frozen=True)
class SyncWait(Cmd):
    unit: str
    event: str


Command = Union[RegWrite, RegRead, PollRegEqual, MemInit, MemLoad, IntrNotify, CheckCrc, CheckFile, CheckNothing, SyncNotify, SyncWait]


@dataclass
class Trace:
    """One parsed trace test."""

    name: str
    path: Path  # the .cfg file
    commands: list[Command] = field(default_factory=list)
    #: Stop playing at the first failed check (``input.txn`` traces without ``+continue_on_fail``).
    stop_on_fail: bool = False

    @property
    def directory(self) -> Path:
        return self.path.parent

    def data_files(self) -> list[Path]:
        return [c.file for c in self.commands if isinstance(c, (MemLoad, CheckFile))]

    def missing_files(self) -> list[Path]:
        """Data files that do not exist (NVDLA did not ship every blob: the trace is N/A, or an error under
        ``dla trace --strict``). A name that exists but is a directory, FIFO or device is a misnamed data file,
        not an absent one: ``TraceError`` naming the command's file:line (reading a FIFO would hang)."""
        named, missing = set(self.data_files()), []
        for cmd in self.commands:
            file = getattr(cmd, "file", None)
            if file not in named:
                continue
            if not file.exists():
                missing.append(file)
            elif not file.is_file():
                kind = kind_of(file.stat().st_mode)
                raise TraceError(self.path, cmd.line, f"data file {file} is {kind}, not a regular file")
        return missing

    def missing_line(self, file: Path) -> int:
        """The line of the first command that names ``file`` (for an error about it)."""
        return next((c.line for c in self.commands if getattr(c, "file", None) == file), 0)

    def checks(self) -> list[Command]:
        return [c for c in self.commands if isinstance(c, (CheckCrc, CheckFile, CheckNothing))]


# ---- reading text files within the memory budget --------------------------------------------------------
def read_trace_text(path: Path, what: str) -> str:
    """The text of a trace or data file, refused (``TraceError`` naming it) before reading when it is not a
    regular file (``/dev/zero`` or a FIFO would never end) or when parsing it would exceed the memory budget."""
    try:
        st = path.stat()
        if not stat.S_ISREG(st.st_mode):
            raise TraceError(path, 0, f"{what} is {kind_of(st.st_mode)}, not a regular file")
        check_size(f"parsing {what} of {format_size(st.st_size)} (~{TEXT_EXPANSION}x its size)",
                   st.st_size * TEXT_EXPANSION)
        data = path.read_bytes()
    except MemoryBudgetError as exc:
        raise TraceError(path, 0, str(exc)) from None
    except OSError as exc:
        raise TraceError(path, 0, f"cannot read {what}: {exc.strerror or exc}") from None
    try:
        return data.decode()
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise TraceError(path, line, f"{what} is not text (UTF-8: {exc.reason} at byte {exc.start})") from None


def parse_extent(tok: str, path: Path, line: int, what: str, *, allocates: bool = False) -> int:
    """A base address or size: a number in [0, 2^40); a size the player allocates (``allocates``) must
    also fit the memory budget, checked here so the error names file:line before anything runs."""
    value = _number(tok, path, line, what)
    if value < 0:
        raise TraceError(path, line, f"{what} {value} is negative")
    if value >= MAX_EXTENT:
        raise TraceError(path, line, f"{what} {value:#x} is beyond 2^40 (1 TiB): no DLA memory is that large")
    if allocates:
        try:
            check_size(what, value)
        except MemoryBudgetError as exc:
            raise TraceError(path, line, str(exc)) from None
    return value


# ---- .cfg parsing -------------------------------------------------------------------------------------
_CALL = re.compile(r"^\s*([A-Za-z_]\w*)\s*\((.*)\)\s*;?\s*(//.*)?$")


def _number(tok: str, path: Path, line: int, what: str) -> int:
    t = tok.strip()
    try:
        if t.lower().startswith("0x"):
            return int(t, 16)
        return int(t, 10)
    except ValueError:
        raise TraceError(path, line, f"bad number {t!r} for {what}") from None


def parse_word(tok: str, path: Path, line: int, what: str) -> int:
    """A 32-bit register value (a register write, an expected value, a mask, a CRC). A wider or negative
    number is a typo that masking to 32 bits would silently turn into another value: a ``TraceError``."""
    value = _number(tok, path, line, what)
    if not 0 <= value <= 0xFFFFFFFF:
        raise TraceError(path, line, f"value {tok.strip()} for {what} does not fit in 32 bits")
    return value


def _split_args(text: str) -> list[str]:
    out, cur, quoted = [], [], False
    for ch in text:
        if ch == '"':
            quoted = not quoted
            cur.append(ch)
        elif ch == "," and not quoted:
            out.append("".join(cur).strip())
            cur = []
        else:
            cur.append(ch)
    if cur or out:
        out.append("".join(cur).strip())
    return out


def _string(tok: str, path: Path, line: int) -> str:
    t = tok.strip()
    if len(t) < 2 or t[0] != '"' or t[-1] != '"':
        raise TraceError(path, line, f"expected a quoted file name, got {t!r}")
    return t[1:-1]


def data_file_path(trace: Path, name: str, line: int) -> Path:
    """The data file a command names, beside the trace. A name no file system can hold (a NUL byte, a
    component over NAME_MAX) is a ``TraceError`` now, not an OSError/ValueError from the first stat later."""
    file = trace.parent / name
    try:
        os.stat(file)
    except (FileNotFoundError, NotADirectoryError):
        pass  # absent: the trace is N/A (``missing_files``)
    except (OSError, ValueError) as exc:
        shown = name if len(name) <= 60 else f"{name[:60]}..."
        raise TraceError(trace, line, f"data file name {shown!r}: {getattr(exc, 'strerror', None) or exc}") from None
    return file


def _mem(tok: str, path: Path, line: int) -> str:
    t = tok.strip()
    if t not in MEM_NAMES:
        raise TraceError(path, line, f"unknown memory {t!r} (expected pri_mem, sec_mem, 1 or 2)")
    return MEM_NAMES[t]


def parse_cfg(path: Path | str, regmap: RegisterMap, name: str | None = None) -> Trace:
    """Parse a ``.cfg`` trace. Register names resolve against ``regmap``; data paths against the
    trace's directory. Raises ``TraceError`` with file:line on any malformed line."""
    path = Path(path)
    text = read_trace_text(path, "trace")
    trace = Trace(name or path.parent.name, path)
    cmds = trace.commands
    for lineno, raw in enumerate(text.splitlines(), 1):
        stripped = raw.strip()
        if not stripped or stripped.startswith("//") or stripped.startswith("#"):
            continue
        m = _CALL.match(stripped)
        if not m:
            raise TraceError(path, lineno, f"cannot parse {stripped[:60]!r}")
        op, args = m.group(1), _split_args(m.group(2))

        def need(n: int, *, at_least: bool = False) -> None:
            if len(args) != n and not (at_least and len(args) >= n):
                raise TraceError(path, lineno, f"{op} takes {n} arguments, got {len(args)}")

        def reg(tok: str) -> tuple[str, int]:
            try:
                addr, r = regmap.resolve(tok.strip())
            except RegisterError as exc:
                raise TraceError(path, lineno, str(exc)) from None
            return r.full_name, addr

        if op == "reg_write":
            need(2)
            nm, addr = reg(args[0])
            cmds.append(RegWrite(lineno, nm, addr, parse_word(args[1], path, lineno, nm)))
        elif op == "reg_read":
            need(1, at_least=True)
            nm, addr = reg(args[0])
            cmds.append(RegRead(lineno, nm, addr))
        elif op == "reg_read_check":
            if len(args) not in (2, 3):
                raise TraceError(path, lineno, f"{op} takes 2 or 3 arguments, got {len(args)}")
            nm, addr = reg(args[0])
            mask = parse_word(args[2], path, lineno, "mask") if len(args) == 3 else 0xFFFFFFFF
            cmds.append(RegRead(lineno, nm, addr, parse_word(args[1], path, lineno, nm), mask))
        elif op == "poll_reg_equal":
            need(2)
            nm, addr = reg(args[0])
            cmds.append(PollRegEqual(lineno, nm, addr, parse_word(args[1], path, lineno, nm)))
        elif op == "mem_init":
            if len(args) == 3:  # mem_init(mem, base, "file")
                cmds.append(MemLoad(lineno, _mem(args[0], path, lineno), parse_extent(args[1], path, lineno, "mem_init base"),
                                    data_file_path(path, _string(args[2], path, lineno), lineno)))
                continue
            need(4)
            pattern = args[3].strip()
            if pattern not in FILL_PATTERNS:
                raise TraceError(path, lineno, f"unknown mem_init pattern {pattern!r} (known: {', '.join(FILL_PATTERNS)})")
            fill = FILL_PATTERNS[pattern]  # zeros allocate nothing in a sparse memory; other fills do
            cmds.append(MemInit(lineno, _mem(args[0], path, lineno), parse_extent(args[1], path, lineno, "mem_init base"),
                                parse_extent(args[2], path, lineno, "mem_init size", allocates=fill != 0), fill))
        elif op == "mem_load":
            need(3)
            cmds.append(MemLoad(lineno, _mem(args[0], path, lineno), parse_extent(args[1], path, lineno, "mem_load base"),
                                data_file_path(path, _string(args[2], path, lineno), lineno)))
        elif op == "intr_notify":
            need(2)
            source = args[0].strip()
            m2 = re.fullmatch(r"([A-Za-z_]+?)_([01])", source)
            if not m2 or m2.group(1).upper() not in INTR_BITS:
                raise TraceError(path, lineno, f"unknown interrupt source {source!r} (known: {', '.join(f'{k}_0' for k in INTR_BITS)})")
            bit = INTR_BITS[m2.group(1).upper()] + int(m2.group(2))
            cmds.append(IntrNotify(lineno, source.upper(), bit, args[1].strip()))
        elif op == "check_crc":
            need(5)
            cmds.append(CheckCrc(lineno, args[0].strip(), _mem(args[1], path, lineno),
                                 parse_extent(args[2], path, lineno, "check_crc base"),
                                 parse_extent(args[3], path, lineno, "check_crc size"),  # CRCs read in blocks
                                 parse_word(args[4], path, lineno, "crc")))
        elif op == "check_file":
            need(5)
            cmds.append(CheckFile(lineno, args[0].strip(), _mem(args[1], path, lineno),
                                  parse_extent(args[2], path, lineno, "check_file base"),
                                  parse_extent(args[3], path, lineno, "check_file size", allocates=True),
                                  data_file_path(path, _string(args[4], path, lineno), lineno)))
        elif op == "check_nothing":
            need(1)
            cmds.append(CheckNothing(lineno, args[0].strip()))
        elif op in ("sync_notify", "sync_wait"):
            need(2)
            cls = SyncNotify if op == "sync_notify" else SyncWait
            cmds.append(cls(lineno, args[0].strip(), args[1].strip()))
        else:
            raise TraceError(path, lineno, f"unknown command {op!r}")
    return trace


# ---- .dat payloads ------------------------------------------------------------------------------------
#: One entry's body (between its braces): offset, size, payload bytes.
_DAT_ENTRY = re.compile(
    r"\s*'?offset'?\s*:\s*(0x[0-9a-fA-F]+|\d+)\s*,\s*'?size'?\s*:\s*(0x[0-9a-fA-F]+|\d+)\s*,"
    r"\s*'?(?:payload|value)'?\s*:\s*(.*)", re.DOTALL)
#: The same with any offset and size, to name the one that is bad when ``_DAT_ENTRY`` does not match.
_DAT_LOOSE = re.compile(
    r"\s*'?offset'?\s*:\s*([^,]*?)\s*,\s*'?size'?\s*:\s*([^,]*?)\s*,\s*'?(?:payload|value)'?\s*:", re.DOTALL)
_DAT_NUMBER = re.compile(r"0x[0-9a-fA-F]+|\d+")
#: An entry's braces, and what may stand between entries.
_DAT_BLOCK = re.compile(r"\{([^{}]*)\}")
_DAT_GAP = " \t\r\n,"


def _line_of(text: str, pos: int) -> int:
    """The line of ``pos``, counted only for an error message: a data file may hold 10^5 entries."""
    return text.count("\n", 0, pos) + 1


def _dat_entries(text: str, path: Path) -> Iterator[tuple[int, str, str, str]]:
    """(position, offset, size, payload) of every ``{offset:..., size:..., payload:...}`` entry, optionally all
    inside one pair of outer braces (nv_small's files have them, others do not). Anything else - text
    between entries, an entry that does not parse, an entry or the outer braces cut short - is a
    ``TraceError`` naming its line: a skipped entry would leave zeros in memory and fail later as a wrong
    CRC, far from the cause."""

    def stray(pos: int, gap: str, allowed: str) -> TraceError | None:
        """The error for text between entries other than separators (and ``allowed``, an outer brace)."""
        rest = gap.strip(_DAT_GAP)
        if not rest or rest == allowed:
            return None
        at = pos + gap.index(rest[0])
        if rest.startswith("{"):
            return TraceError(path, _line_of(text, at), "entry not closed by '}' (file cut short?)")
        if allowed == "}" and rest.startswith("}"):
            after = rest[1:].lstrip(_DAT_GAP)
            return TraceError(path, _line_of(text, at + rest.index(after[0])),
                              f"text after the closing '}}': {after[:20]!r}")
        return TraceError(path, _line_of(text, at),
                          f"expected an entry {{offset:..., size:..., payload:...}}, got {rest[:20]!r}")

    if len(text) < 64 and "".join(text.split()) in ("", "{}"):  # no entries (write_dat of nothing)
        return
    pos, outer = 0, False
    for m in _DAT_BLOCK.finditer(text):
        gap = text[pos:m.start()]
        if pos == 0:
            outer = gap.strip(_DAT_GAP) == "{"
        error = stray(pos, gap, "{" if pos == 0 else "")
        if error:
            raise error
        entry = _DAT_ENTRY.fullmatch(m.group(1))
        if not entry:
            raise _bad_entry(path, _line_of(text, m.start()), m.group(1))
        yield m.start(), entry.group(1), entry.group(2), entry.group(3)
        pos = m.end()
    tail = text[pos:]
    if pos == 0:  # no entry at all
        outer = tail.strip(_DAT_GAP).startswith("{")
        pos = tail.index("{") + 1 if outer else 0
        tail = text[pos:]
    error = stray(pos, tail, "}" if outer else "")
    if error:
        raise error
    if outer and tail.strip(_DAT_GAP) != "}":
        raise TraceError(path, _line_of(text, len(text)),
                         "the entries' outer '{' is not closed by '}' (file cut short?)")


def _bad_entry(path: Path, line: int, body: str) -> TraceError:
    """Why an entry does not parse, naming the offending offset or size when that is what is wrong."""
    loose = _DAT_LOOSE.match(body)
    if loose:
        for what, tok in zip(("offset", "size"), loose.group(1, 2)):
            if not _DAT_NUMBER.fullmatch(tok):
                return TraceError(path, line, f"bad {what} {tok[:40]!r} (expected 0x... hex or decimal, not negative)")
    return TraceError(path, line, f"expected an entry {{offset:..., size:..., payload:...}}, got {body.strip()[:40]!r}")


def parse_dat(path: Path | str) -> tuple[np.ndarray, np.ndarray]:
    """Parse a ``.dat`` payload file into (offsets, bytes): byte i of an entry goes to offset + i."""
    path = Path(path)
    text = read_trace_text(path, "data file")
    offs: list[np.ndarray] = []
    vals: list[np.ndarray] = []
    for pos, off_tok, size_tok, payload in _dat_entries(text, path):
        # decimal may have leading zeros ("0777"), which int(x, 0) refuses: decimal it is
        off, size = (int(t, 16) if t.startswith("0x") else int(t, 10) for t in (off_tok, size_tok))
        if off + size > MAX_EXTENT:
            raise TraceError(path, _line_of(text, pos), f"entry at offset {off:#x} (+{size} bytes) is beyond "
                                                        "2^40 (1 TiB): no DLA memory is that large")
        toks = payload.split()
        if len(toks) != size:
            raise TraceError(path, _line_of(text, pos),
                             f"entry at offset {off:#x} says size {size} but has {len(toks)} bytes")
        try:
            values = [int(t, 16) for t in toks]
        except ValueError:
            raise TraceError(path, _line_of(text, pos), "bad payload byte") from None
        if any(v < 0 or v > 255 for v in values):  # before numpy, which cannot hold 0x1_0000_0000_0000_0000
            raise TraceError(path, _line_of(text, pos), "payload byte out of range")
        offs.append(off + np.arange(size, dtype=np.int64))
        vals.append(np.array(values, dtype=np.int64))
    if not offs:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.uint8)
    return np.concatenate(offs), np.concatenate(vals).astype(np.uint8)


def write_dat(path: Path | str, data: bytes, chunk: int = 4, skip_zero: bool = False) -> None:
    """Write bytes as a ``.dat`` file (entries of ``chunk`` bytes, as NVDLA's nv_small tests do)."""
    lines = ["{"]
    for off in range(0, len(data), chunk):
        part = data[off : off + chunk]
        if skip_zero and not any(part):
            continue
        payload = " ".join(f"0x{b:02x}" for b in part)
        lines.append(f"{{offset:{off:#x}, size:{len(part)}, payload:{payload}}} ,")
    lines.append("}")
    Path(path).write_text("\n".join(lines) + "\n")


# ---- .cfg writing -------------------------------------------------------------------------------------
def format_command(cmd: Command, base_dir: Path | None = None) -> str:
    """One command in NVDLA's .cfg syntax."""

    def rel(p: Path) -> str:
        return p.name if base_dir is None or p.parent == base_dir else str(p)

    if isinstance(cmd, RegWrite):
        return f"reg_write({cmd.name}, {cmd.value:#x});"
    if isinstance(cmd, RegRead):
        if cmd.expected is None:
            return f"reg_read({cmd.name});"
        return f"reg_read_check({cmd.name}, {cmd.expected:#x}, {cmd.mask:#x});"
    if isinstance(cmd, PollRegEqual):
        return f"poll_reg_equal({cmd.name}, {cmd.value:#x});"
    if isinstance(cmd, MemInit):
        pattern = {v: k for k, v in FILL_PATTERNS.items()}[cmd.fill]
        return f"mem_init({cmd.mem}, {cmd.base:#x}, {cmd.size:#x}, {pattern});"
    if isinstance(cmd, MemLoad):
        return f'mem_load({cmd.mem}, {cmd.base:#x}, "{rel(cmd.file)}");'
    if isinstance(cmd, IntrNotify):
        return f"intr_notify({cmd.source}, {cmd.sync});"
    if isinstance(cmd, CheckCrc):
        return f"check_crc({cmd.sync}, {cmd.mem}, {cmd.base:#x}, {cmd.size:#x}, {cmd.crc:#010x});"
    if isinstance(cmd, CheckFile):
        return f'check_file({cmd.sync}, {cmd.mem}, {cmd.base:#x}, {cmd.size:#x}, "{rel(cmd.file)}");'
    if isinstance(cmd, CheckNothing):
        return f"check_nothing({cmd.sync});"
    if isinstance(cmd, SyncNotify):
        return f"sync_notify({cmd.unit}, {cmd.event});"
    if isinstance(cmd, SyncWait):
        return f"sync_wait({cmd.unit}, {cmd.event});"
    raise TypeError(f"not a trace command: {cmd!r}")


def write_cfg(path: Path | str, commands: Iterable[Command]) -> None:
    path = Path(path)
    path.write_text("\n".join(format_command(c, path.parent) for c in commands) + "\n")


# ---- discovery ------------------------------------------------------------------------------------------
def _walk_following_links(root: Path) -> Iterator[tuple[str, list[str]]]:
    """(directory, file names) under ``root``, following symlinked directories (a folder of links to trace
    directories is a common way to pick a suite), each real directory once, so a link cycle ends."""
    seen: set[tuple[int, int]] = set()
    for d, subdirs, files in os.walk(root, followlinks=True):
        try:
            st = os.stat(d)
        except OSError:
            subdirs[:] = []
            continue
        key = (st.st_dev, st.st_ino)
        if key in seen:
            subdirs[:] = []
            continue
        seen.add(key)
        subdirs.sort()
        yield d, files


def find_traces(root: Path | str, txn: bool = False) -> list[Path]:
    """Trace ``.cfg`` files under ``root`` (a trace directory or a folder of them, searched recursively).
    A directory's trace is ``<dir>/<dir>.cfg`` when present, else its single ``.cfg``. With ``txn``, a
    directory without ``.cfg`` files contributes its nvdlav1 ``*.txn`` files (``input.txn``, runtime/txn.py);
    off by default because most callers parse what they find with ``parse_cfg``."""
    root = Path(root)
    if root.exists() and not root.is_dir():  # a file, or a device/FIFO that parsing refuses with its name
        return [root]
    suffixes = (".cfg", ".txn") if txn else (".cfg",)
    dirs = {Path(d) for d, files in _walk_following_links(root) if any(f.endswith(suffixes) for f in files)}
    found = []
    for d in sorted(dirs):
        own = d / f"{d.name}.cfg"
        cfgs = [own] if own.is_file() else sorted(d.glob("*.cfg"))
        found.extend(cfgs or sorted(d.glob("*.txn")))
    return found
