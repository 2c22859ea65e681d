"""Malformed loadables for `dla run` / `dla inspect`: our .dla (protobuf in a DLALOAD container) and
NVDLA's .nvdla flatbuffers cut short, bit-flipped, with a wrong magic or version, swapped for each
other, or not files at all. The promise: one line naming the loadable, exit 2, no output written."""
from __future__ import annotations

import struct
import zlib
from pathlib import Path
from typing import Callable

from regressions.robustness.attack import Attack, Scenario
from regressions.robustness.attacks.common import device_twin, fifo
from regressions.robustness.material import Material

FAMILY = "malformed loadables"
BAD_INPUT = frozenset({2})


def _flip(offset: int | Callable[[int], int], bit: int = 3) -> Callable[[bytes], bytes]:
    def edit(b: bytes) -> bytes:
        at = offset(len(b)) if callable(offset) else offset
        out = bytearray(b)
        out[at] ^= 1 << bit
        return bytes(out)
    return edit


def _ours(name: str, edit: Callable[[bytes], bytes], command: str = "run", exits: frozenset[int] = BAD_INPUT,
          also: tuple[str, ...] = (), quick: bool = False) -> Attack:
    def setup(workdir: Path, material: Material) -> Scenario:
        (workdir / "net.dla").write_bytes(edit((material.root / "poolnet.dla").read_bytes()))
        material.copy("x.npy", workdir)
        argv = ["inspect", "net.dla"] if command == "inspect" else ["run", "net.dla", "--input", "x.npy",
                                                                   "--output", "y.npy"]
        return Scenario(argv, names=("net.dla", *also))
    return Attack(f"dla {command} .dla: {name}", FAMILY, setup, exits, quick=quick, line_optional=0 in exits)


def _repack(version: int | None = None, payload: Callable[[bytes], bytes] | None = None) -> Callable[[bytes], bytes]:
    """A container whose header is consistent with a changed version or payload (so the crc does not
    catch it first)."""
    from loadable.format import HEADER

    def edit(b: bytes) -> bytes:
        magic, major, _, _ = HEADER.unpack_from(b)
        body = payload(b[HEADER.size:]) if payload else b[HEADER.size:]
        return HEADER.pack(magic, major if version is None else version, len(body), zlib.crc32(body)) + body
    return edit


def _nvdla(name: str, edit: Callable[[bytes], bytes] | None = None, more: tuple[str, ...] = ("--config", "nv_small"),
           source: str = "pdp.nvdla", exits: frozenset[int] = BAD_INPUT, also: tuple[str, ...] = (),
           quick: bool = False) -> Attack:
    def setup(workdir: Path, material: Material) -> Scenario:
        data = (material.root / source).read_bytes()
        (workdir / "net.nvdla").write_bytes(edit(data) if edit else data)
        return Scenario(["run", "net.nvdla", *more, "--dimg", "out", "--dimg-format", "native"],
                        names=("net.nvdla", *also))
    return Attack(f"dla run .nvdla: {name}", FAMILY, setup, exits, quick=quick, line_optional=0 in exits)


def _swapped(name: str, source: str, as_name: str, more: tuple[str, ...], also: tuple[str, ...] = ()) -> Attack:
    def setup(workdir: Path, material: Material) -> Scenario:
        material.copy(source, workdir, as_name)
        material.copy("x.npy", workdir)
        return Scenario(["run", as_name, *more], names=(as_name, *also))
    return Attack(f"dla run: {name}", FAMILY, setup)


def _not_a_file(kind: str, command: str) -> Attack:
    def setup(workdir: Path, material: Material) -> Scenario:
        path = workdir / "net.dla"
        if kind == "folder":
            path.mkdir()
        elif kind == "FIFO":
            fifo(path)
        elif kind == "device node":
            device_twin(path)
        else:
            path.symlink_to("/dev/zero")
        material.copy("x.npy", workdir)
        argv = ["inspect", "net.dla"] if command == "inspect" else ["run", "net.dla", "--input", "x.npy"]
        return Scenario(argv, names=("net.dla",))
    return Attack(f"dla {command}: loadable is a {kind}", FAMILY, setup, quick=kind == "folder" and command == "run")


def attacks() -> list[Attack]:
    from loadable.format import HEADER

    ours = [
        _ours("empty file", lambda b: b""),
        _ours("cut to 4 bytes", lambda b: b[:4]),
        _ours("cut inside the header", lambda b: b[:12]),
        _ours("header only", lambda b: b[: HEADER.size], quick=True),
        _ours("cut in half", lambda b: b[: len(b) // 2]),
        _ours("last byte missing", lambda b: b[:-1]),
        _ours("trailing bytes", lambda b: b + b"\0" * 7),
        _ours("bit flip in the magic", _flip(1)),
        _ours("bit flip in the version", _flip(8)),
        _ours("bit flip in the length", _flip(13)),
        _ours("bit flip in the crc", _flip(17)),
        _ours("bit flip early in the payload", _flip(HEADER.size + 10)),
        _ours("bit flip mid-payload", _flip(lambda n: n // 2)),
        _ours("bit flip at the end", _flip(lambda n: n - 3)),
        _ours("wrong magic", lambda b: b"NOTALOAD" + b[8:]),
        _ours("format version 99 (consistent header)", _repack(version=99), also=("version",)),
        _ours("random payload under a valid crc", _repack(payload=lambda p: bytes((i * 151 + 7) % 256 for i in range(len(p))))),
        _ours("empty payload under a valid crc", _repack(payload=lambda p: b"")),
        _ours("payload cut to half under a valid crc", _repack(payload=lambda p: p[: len(p) // 2])),
        _ours("cut in half", lambda b: b[: len(b) // 2], command="inspect"),
        _ours("bit flip mid-payload", _flip(lambda n: n // 2), command="inspect"),
    ]
    nvdla = [
        _nvdla("cut to 8 bytes", lambda b: b[:8], quick=True),
        _nvdla("cut to 64 bytes", lambda b: b[:64]),
        _nvdla("cut in half", lambda b: b[: len(b) // 2]),
        _nvdla("last byte missing", lambda b: b[:-1], exits=frozenset({0, 2})),
        _nvdla("root offset past the end", lambda b: struct.pack("<I", len(b) + 100) + b[4:]),
        _nvdla("root offset 0xffffffff", lambda b: b"\xff\xff\xff\xff" + b[4:]),
        _nvdla("bit flips in the first 64 bytes", lambda b: bytes(x ^ 0x41 if 8 <= i < 64 else x for i, x in enumerate(b)),
               exits=frozenset({0, 2})),
        _nvdla("bit flip mid-file", _flip(lambda n: n // 2), exits=frozenset({0, 2})),
        _nvdla("all bytes 0xff after the root", lambda b: b[:4] + b"\xff" * (len(b) - 4)),
        _nvdla("without --config", more=(), also=("--config",)),
        _nvdla("legacy layout read as current", source="pdp_legacy.nvdla",
               more=("--config", "nv_small", "--descriptor-layout", "current"), exits=frozenset({0, 2})),
        _nvdla("current layout read as legacy", more=("--config", "nv_small", "--descriptor-layout", "legacy"),
               exits=frozenset({0, 2})),
    ]
    swapped = [
        _swapped("NVDLA's .nvdla renamed .dla, without --config", "pdp.nvdla", "net.dla", ("--input", "x.npy")),
        _swapped("our .dla renamed .nvdla, with --config", "poolnet.dla", "net.nvdla", ("--config", "nv_small"),
                 also=("--config",)),
        _swapped("our .dla with --dimg", "poolnet.dla", "net.dla", ("--input", "x.npy", "--dimg", "d"),
                 also=("--dimg",)),
    ]
    odd = [_not_a_file(kind, cmd) for kind in ("folder", "FIFO", "device node", "symlink to /dev/zero")
           for cmd in ("run", "inspect")]
    return ours + nvdla + swapped + odd
