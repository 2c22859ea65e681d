"""Simulator file lists (``-f file.f``) as EDA tools write them, e.g. NVDLA's
``verif/verilator/verilator_nv_small.f``.

Understood: source files, ``-f``/``-F`` nesting, ``-I dir`` / ``+incdir+a+b``, ``-D K[=V]`` /
``+define+K[=V]``, ``-v file`` (library file), ``-y dir`` (library directory), ``+libext+.v+.sv``,
``--top-module T``, ``$VAR``/``${VAR}``, and ``//`` or ``#`` comments. Relative paths resolve against the
directory of the file list that names them (that is where NVDLA runs Verilator from). Anything else that
starts with ``-`` or ``+`` is kept as a simulator option.
"""
from __future__ import annotations

import os
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path


class FileListError(Exception):
    """A file list that cannot be read; carries ``file:line``."""


@dataclass
class FileList:
    sources: list[Path] = field(default_factory=list)
    includes: list[Path] = field(default_factory=list)
    defines: dict[str, str] = field(default_factory=dict)
    libraries: list[Path] = field(default_factory=list)  # -v files
    library_dirs: list[Path] = field(default_factory=list)  # -y dirs
    libexts: list[str] = field(default_factory=list)
    toplevel: str | None = None
    options: list[str] = field(default_factory=list)  # other simulator options, verbatim


#: Simulator options that take a value as the next token (kept together).
_OPTION_ARGS = {"--compiler", "--output-split", "--threads", "-j", "--x-assign", "--x-initial", "--trace-depth",
                "-CFLAGS", "-LDFLAGS", "--error-limit"}
#: Options the cocotb runner sets itself (build mode, output dir and name, VPI); dropped, with their value.
_RUNNER_OWNED = {"--cc": 0, "-cc": 0, "--exe": 0, "-exe": 0, "--vpi": 0, "--public-flat-rw": 0,
                 "--Mdir": 1, "-Mdir": 1, "-o": 1, "--prefix": 1}

_VAR = re.compile(r"\$\{(\w+)\}|\$(\w+)")


def _expand(token: str, where: str) -> str:
    def sub(m: re.Match) -> str:
        name = m.group(1) or m.group(2)
        if name not in os.environ:
            raise FileListError(f"{where}: environment variable ${name} is not set")
        return os.environ[name]

    return _VAR.sub(sub, token)


def _strip_comment(line: str) -> str:
    for marker in ("//", "#"):
        pos = line.find(marker)
        if pos >= 0:
            line = line[:pos]
    return line


def parse_filelist(path: Path | str, _seen: tuple[Path, ...] = ()) -> FileList:
    """Parse a file list (recursively through ``-f``)."""
    path = Path(path).resolve()
    if path in _seen:
        raise FileListError(f"{path}: includes itself through -f")
    try:
        text = path.read_text()
    except OSError as exc:
        raise FileListError(f"{path}: cannot read file list: {exc.strerror or exc}") from None
    out = FileList()
    base = path.parent

    def resolve(tok: str, where: str) -> Path:
        p = Path(_expand(tok, where)).expanduser()
        return p if p.is_absolute() else (base / p).resolve()

    tokens: list[tuple[str, str]] = []
    for lineno, raw in enumerate(text.splitlines(), 1):
        where = f"{path}:{lineno}"
        try:
            parts = shlex.split(_strip_comment(raw))
        except ValueError as exc:
            raise FileListError(f"{where}: {exc}") from None
        tokens.extend((p, where) for p in parts)

    it = iter(tokens)
    for tok, where in it:
        def arg() -> str:
            try:
                return next(it)[0]
            except StopIteration:
                raise FileListError(f"{where}: {tok} needs an argument") from None

        if tok in ("-f", "-F"):
            sub = parse_filelist(resolve(arg(), where), _seen + (path,))
            out.sources += sub.sources
            out.includes += sub.includes
            out.defines.update(sub.defines)
            out.libraries += sub.libraries
            out.library_dirs += sub.library_dirs
            out.libexts += sub.libexts
            out.options += sub.options
            out.toplevel = sub.toplevel or out.toplevel
        elif tok.startswith("+incdir+"):
            out.includes += [resolve(d, where) for d in tok[len("+incdir+"):].split("+") if d]
        elif tok.startswith("+define+"):
            for d in tok[len("+define+"):].split("+"):
                if d:
                    k, _, v = d.partition("=")
                    out.defines[k] = v or "1"
        elif tok.startswith("+libext+"):
            out.libexts += [e for e in tok[len("+libext+"):].split("+") if e]
        elif tok.startswith("-I"):
            out.includes.append(resolve(tok[2:] or arg(), where))
        elif tok.startswith("-D"):
            k, _, v = (tok[2:] or arg()).partition("=")
            out.defines[k] = v or "1"
        elif tok == "-v":
            out.libraries.append(resolve(arg(), where))
        elif tok == "-y":
            out.library_dirs.append(resolve(arg(), where))
        elif tok in ("--top-module", "-top-module", "--top", "-top"):
            out.toplevel = arg()
        elif tok in _RUNNER_OWNED:
            for _ in range(_RUNNER_OWNED[tok]):
                arg()
        elif tok in _OPTION_ARGS:
            out.options += [tok, _expand(arg(), where)]
        elif tok.startswith(("-", "+")):
            out.options.append(_expand(tok, where))
        else:
            out.sources.append(resolve(tok, where))
    for p in out.sources + out.libraries:
        if not p.is_file():
            raise FileListError(f"{path}: {p} does not exist")
    return out
