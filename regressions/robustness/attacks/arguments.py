"""Bad command lines: unknown configs, negative job counts, bad memory sizes, inputs of the wrong shape
or kind, images that are not images, out-of-range options. The promise: one line naming the option or
file, exit 2, before any work."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Callable

import numpy as np

from regressions.robustness.attack import Attack, Scenario
from regressions.robustness.attacks.common import compile_cmd, nvdla_cmd, pdp_trace, run_cmd, with_compile_files, with_run_files
from regressions.robustness.material import Material

FAMILY = "bad arguments"
BAD_INPUT = frozenset({2})


def _with(kind: str, workdir: Path, material: Material) -> str | None:
    if kind == "run":
        with_run_files(workdir, material)
    elif kind == "image":
        material.copy("lenet.dla", workdir)
    elif kind == "compile":
        with_compile_files(workdir, material)
    elif kind == "nvdla":
        material.copy("pdp.nvdla", workdir)
    elif kind == "trace":
        return str(pdp_trace(workdir, material))
    return None


def _args(name: str, kind: str, argv: Callable[[str | None], list[str]], names: tuple[str, ...],
          files: Callable[[Path], None] | None = None, exits: frozenset[int] = BAD_INPUT, env: dict | None = None,
          quick: bool = False) -> Attack:
    """``argv(trace_dir)`` against the files of ``kind`` (run, compile, nvdla, trace), plus ``files``."""
    def setup(workdir: Path, material: Material) -> Scenario:
        rel = _with(kind, workdir, material)
        if files:
            files(workdir)
        return Scenario(argv(rel), names=names, env=env or {}, reports=())
    return Attack(f"{kind}: {name}", FAMILY, setup, exits, quick=quick, line_optional=0 in exits)


def _npy(name: str, array: np.ndarray) -> Callable[[Path], None]:
    def make(workdir: Path) -> None:
        np.save(workdir / name, array, allow_pickle=True)
    return make


def _file(name: str, data: bytes | str) -> Callable[[Path], None]:
    def make(workdir: Path) -> None:
        path = workdir / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data if isinstance(data, bytes) else data.encode())
    return make


def _folder(name: str, *entries: tuple[str, bytes]) -> Callable[[Path], None]:
    def make(workdir: Path) -> None:
        (workdir / name).mkdir()
        for entry, data in entries:
            (workdir / name / entry).write_bytes(data)
    return make


PNG_HEADER = b"\x89PNG\r\n\x1a\n"


def attacks() -> list[Attack]:
    x = np.random.default_rng(1).normal(0, 1, (1, 16, 16, 16)).astype(np.float32)
    t = lambda *more: lambda rel: ["trace", rel, *more]  # noqa: E731
    return [
        # hardware configs and job counts
        _args("--config nv_huge", "trace", t("--config", "nv_huge"), ("nv_huge",), quick=True),
        _args("--config nv_huge", "compile", lambda _: ["compile", "poolnet.onnx", "--config", "nv_huge", "-o", "o.dla"],
              ("nv_huge",)),
        _args("--config nv_huge", "nvdla", lambda _: ["run", "pdp.nvdla", "--config", "nv_huge"], ("nv_huge",)),
        _args("--config of another hardware (nv_full) for an nv_small trace", "trace", t("--config", "nv_full"), (),
              exits=frozenset({0, 1, 2})),
        _args("-j -1", "trace", t("-j", "-1"), ("-j",), quick=True),
        _args("-j abc", "trace", t("-j", "abc"), ("abc",)),
        _args("--timeout -1", "trace", t("--timeout", "-1"), ("--timeout",)),
        _args("--timeout nan", "trace", t("--timeout", "nan"), ("--timeout",)),
        _args("--timeout 0 (documented: no budget)", "trace", t("--timeout", "0"), (), exits=frozenset({0})),
        _args("DLA_TRACE_TIMEOUT=garbage", "trace", t(), ("DLA_TRACE_TIMEOUT",), env={"DLA_TRACE_TIMEOUT": "garbage"}),
        _args("--target nosuch", "trace", t("--target", "nosuch"), ("nosuch",)),
        _args("--define with the golden target", "trace", t("--define", "X=1"), ("--define",)),
        _args("--known-incomplete missing", "trace", t("--known-incomplete", "nope.txt"), ("nope.txt",)),
        _args("--known-incomplete not UTF-8", "trace", t("--known-incomplete", "ki.txt"), ("ki.txt",),
              files=_file("ki.txt", b"\xff\xfe\x00bad\n")),
        _args("a path that does not exist", "trace", lambda _: ["trace", "no/such/trace"], ("no/such/trace",)),
        _args("a folder with no traces", "trace", lambda _: ["trace", "empty"], ("empty",), files=_folder("empty")),
        # memory budgets
        _args("--max-memory lots", "trace", t("--max-memory", "lots"), ("lots",)),
        _args("--max-memory -5", "trace", t("--max-memory", "-5"), ("-5",)),
        _args("--max-memory 0", "trace", t("--max-memory", "0"), ("--max-memory",)),
        _args("--max-memory 1K", "trace", t("--max-memory", "1K", "--json", "r.json"), ("t.cfg",),
              exits=frozenset({1, 2})),
        _args("--max-memory 1e30T", "run", lambda _: run_cmd("--max-memory", "1000000000000000000000000000000T"), (),
              exits=frozenset({0, 2})),
        _args("DLA_MAX_MEMORY=garbage", "trace", t(), ("DLA_MAX_MEMORY",), env={"DLA_MAX_MEMORY": "garbage"}),
        # inputs of dla run
        _args("--input of the wrong shape", "run", lambda _: ["run", "poolnet.dla", "--input", "bad.npy"], ("data",),
              files=_npy("bad.npy", x[:, :3]), quick=True),
        _args("--input of int64", "run", lambda _: ["run", "poolnet.dla", "--input", "bad.npy"], ("bad.npy",),
              files=_npy("bad.npy", x.astype(np.int64)), exits=frozenset({0, 2})),
        _args("--input of NaNs", "run", lambda _: ["run", "poolnet.dla", "--input", "bad.npy"], ("data",),
              files=_npy("bad.npy", np.full_like(x, np.nan)), exits=frozenset({0, 2})),
        _args("--input holding a pickled object", "run", lambda _: ["run", "poolnet.dla", "--input", "bad.npy"],
              ("bad.npy",), files=_npy("bad.npy", np.array([{"a": 1}], dtype=object))),
        _args("--input that is text", "run", lambda _: ["run", "poolnet.dla", "--input", "bad.npy"], ("bad.npy",),
              files=_file("bad.npy", "1 2 3\n")),
        _args("--input missing", "run", lambda _: ["run", "poolnet.dla", "--input", "nope.npy"], ("nope.npy",)),
        _args("--input of an empty .npz", "run", lambda _: ["run", "poolnet.dla", "--input", "e.npz"], ("data",),
              files=lambda w: np.savez(w / "e.npz")),
        _args("--input NAME=PATH of an unknown input", "run", lambda _: ["run", "poolnet.dla", "--input", "nosuch=x.npy"],
              ("nosuch",)),
        _args("--input a .png that is text", "image", lambda _: ["run", "lenet.dla", "--input", "pic.png"], ("pic.png",),
              files=_file("pic.png", "not a picture\n"), quick=True),
        _args("--input a .png cut after its header", "image", lambda _: ["run", "lenet.dla", "--input", "pic.png"],
              ("pic.png",), files=_file("pic.png", PNG_HEADER + b"\0\0\0\rIHDR\0\0")),
        _args("--input a .jpg of random bytes", "image", lambda _: ["run", "lenet.dla", "--input", "pic.jpg"],
              ("pic.jpg",), files=_file("pic.jpg", bytes(range(256)) * 4)),
        _args("--input a .pgm with a bad header", "image", lambda _: ["run", "lenet.dla", "--input", "pic.pgm"],
              ("pic.pgm",), files=_file("pic.pgm", "P5\n-3 99999999\n255\n")),
        _args("--input a .pgm declaring 100000x100000", "image", lambda _: ["run", "lenet.dla", "--input", "pic.pgm"],
              ("pic.pgm",), files=_file("pic.pgm", b"P5\n100000 100000\n255\n" + b"\0" * 64)),
        _args("--input a folder without images", "image", lambda _: ["run", "lenet.dla", "--input", "imgs"], ("imgs",),
              files=_folder("imgs", ("notes.txt", b"hello\n"))),
        _args("--input a folder of broken images", "image", lambda _: ["run", "lenet.dla", "--input", "imgs"], ("imgs",),
              files=_folder("imgs", ("a.png", b"nope"), ("b.jpg", b"nope"))),
        _args("--topk -1", "run", lambda _: run_cmd("--topk", "-1"), ("--topk",)),
        _args("--mean abc", "run", lambda _: run_cmd("--mean", "abc"), ("--mean",)),
        _args("--normalize 0", "run", lambda _: run_cmd("--normalize", "0"), ("--normalize",)),
        _args("--dimg-format with our loadable", "run", lambda _: run_cmd("--dimg-format", "native", "--dimg", "d"),
              ("--dimg",)),
        _args("--input with an NVDLA loadable", "nvdla", lambda _: nvdla_cmd("--input", "nope.npy"), ("--input",),
              exits=frozenset({0, 2})),
        # compile options
        _args("--calib-random 0", "compile",
              lambda _: ["compile", "poolnet.onnx", "--config", "nv_small", "--calib-random", "0", "-o", "o.dla"],
              ("--calib-random",)),
        _args("--calib-random -1", "compile",
              lambda _: ["compile", "poolnet.onnx", "--config", "nv_small", "--calib-random", "-1", "-o", "o.dla"],
              ("--calib-random",)),
        _args("--calib-table of bad JSON", "compile",
              lambda _: ["compile", "poolnet.onnx", "--config", "nv_small", "--calib-table", "c.json", "-o", "o.dla"],
              ("c.json",), files=_file("c.json", "{ not json")),
        _args("--calib-table with NaN scales", "compile",
              lambda _: ["compile", "poolnet.onnx", "--config", "nv_small", "--calib-table", "c.json", "-o", "o.dla"],
              ("c.json",), files=_file("c.json", '{"data": NaN, "bn1": -Infinity}')),
        _args("--calib-table of a list", "compile",
              lambda _: ["compile", "poolnet.onnx", "--config", "nv_small", "--calib-table", "c.json", "-o", "o.dla"],
              ("c.json",), files=_file("c.json", json.dumps([1, 2, 3]))),
        _args("--calib-table missing", "compile",
              lambda _: ["compile", "poolnet.onnx", "--config", "nv_small", "--calib-table", "nope.json", "-o", "o.dla"],
              ("nope.json",)),
        _args("--calib-images of non-images", "compile",
              lambda _: ["compile", "poolnet.onnx", "--config", "nv_small", "--calib-images", "imgs", "-o", "o.dla"],
              ("imgs",), files=_folder("imgs", ("a.png", b"nope"))),
        _args("--emit-trace without --input", "compile", lambda _: compile_cmd("o.dla", "--emit-trace", "tr"),
              ("--input",)),
        _args("--quant bogus", "compile", lambda _: compile_cmd("o.dla", "--quant", "bogus"), ("bogus",)),
        # the command itself
        _args("no subcommand", "none", lambda _: [], ()),
        _args("unknown subcommand", "none", lambda _: ["frobnicate"], ("frobnicate",)),
    ]
