"""Output clobbering: every output option of every command aimed at something that is not a fresh path
(a device node, a FIFO, symlinks, a directory, an unwritable place, the command's own inputs). The
promise: refused before any work with one line naming the path, nothing clobbered, nothing left over."""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from regressions.robustness.attack import Attack, Scenario
from regressions.robustness.attacks.common import (compile_cmd, data_name, device_twin, fifo, nvdla_cmd, pdp_trace,
                                                   run_cmd, trace_cfg, with_compile_files, with_run_files)
from regressions.robustness.material import Material

FAMILY = "output clobbering"
FILE_OUT, DIR_OUT = "hostile.out", "hostile_dir"


@dataclass(frozen=True)
class Option:
    """An output option: how to build its command's inputs and the argv with the output path filled in.
    ``inputs(workdir)`` lists the command's inputs that an output may not overwrite."""
    name: str
    kind: str  # "file" or "dir"
    prepare: Callable[[Path, Material], Path | None]
    argv: Callable[[str, Path | None], list[str]]
    inputs: Callable[[Path | None, Material], list[str]]


def _trace_files(workdir: Path, material: Material) -> Path:
    return pdp_trace(workdir, material, copy_data=True)  # copied: an attack aims outputs at the data file


def _prepare_run(workdir: Path, material: Material) -> None:
    with_run_files(workdir, material)


def _prepare_nvdla(workdir: Path, material: Material) -> None:
    material.copy("pdp.nvdla", workdir)


def _prepare_compile(workdir: Path, material: Material) -> None:
    with_compile_files(workdir, material)


OPTIONS = (
    Option("run --output", "file", _prepare_run, lambda p, _: run_cmd("--output", p),
           lambda _, m: ["poolnet.dla", "x.npy"]),
    Option("compile -o", "file", _prepare_compile, lambda p, _: compile_cmd(p), lambda _, m: ["poolnet.onnx"]),
    Option("trace --json", "file", _trace_files, lambda p, t: ["trace", str(t), "--json", p],
           lambda t, m: [trace_cfg(t), str(t / data_name(m))]),
    Option("trace --junit", "file", _trace_files, lambda p, t: ["trace", str(t), "--junit", p],
           lambda t, m: [trace_cfg(t)]),
    Option("run --rawdump", "dir", _prepare_run, lambda p, _: run_cmd("--rawdump", p), lambda _, m: ["."]),
    Option("run --dimg", "dir", _prepare_nvdla, lambda p, _: nvdla_cmd("--dimg", p, "--dimg-format", "native"), lambda _, m: ["."]),
    Option("compile --emit-trace", "dir", _prepare_compile,
           lambda p, _: compile_cmd("out.dla", "--emit-trace", p, "--input", "x.npy"), lambda _, m: ["."]),
    Option("compile --dump-passes", "dir", _prepare_compile,
           lambda p, _: compile_cmd("out.dla", "--dump-passes", p), lambda _, m: ["."]),
)


@dataclass(frozen=True)
class Hostile:
    """A hostile output path: ``make(workdir, kind)`` builds it and returns (path as given, paths that may
    legitimately change)."""
    name: str
    make: Callable[[Path, str], tuple[str, tuple[str, ...]]]
    exits: frozenset[int] = frozenset({2})


def _device(w: Path, kind: str) -> tuple[str, tuple[str, ...]]:
    name = FILE_OUT if kind == "file" else DIR_OUT
    device_twin(w / name)
    return name, ()


def _fifo(w: Path, kind: str) -> tuple[str, tuple[str, ...]]:
    name = FILE_OUT if kind == "file" else DIR_OUT
    fifo(w / name)
    return name, ()


def _symlink_to_existing(w: Path, kind: str) -> tuple[str, tuple[str, ...]]:
    if kind == "file":
        (w / "target.bin").write_bytes(b"old contents\n")
        (w / FILE_OUT).symlink_to("target.bin")
        return FILE_OUT, ("target.bin",)
    (w / "target_dir").mkdir()
    (w / DIR_OUT).symlink_to("target_dir")
    return DIR_OUT, ("target_dir",)


def _dangling(w: Path, kind: str) -> tuple[str, tuple[str, ...]]:
    name = FILE_OUT if kind == "file" else DIR_OUT
    (w / name).symlink_to("nowhere/at/all")
    return name, ()


def _symlink_to_device(w: Path, kind: str) -> tuple[str, tuple[str, ...]]:
    device_twin(w / "twin")
    name = FILE_OUT if kind == "file" else DIR_OUT
    (w / name).symlink_to("twin")
    return name, ()


def _wrong_kind(w: Path, kind: str) -> tuple[str, tuple[str, ...]]:
    """A directory where a file goes (``--junit DIR``), a regular file where a directory goes."""
    if kind == "file":
        (w / FILE_OUT).mkdir()
        (w / FILE_OUT / "keep.txt").write_text("keep me\n")
        return FILE_OUT, ()
    (w / DIR_OUT).write_text("a file, not a folder\n")
    return DIR_OUT, ()


def _unwritable(w: Path, kind: str) -> tuple[str, tuple[str, ...]]:
    """sysfs refuses new files even to root (chmod does not stop root)."""
    return f"/sys/{FILE_OUT if kind == 'file' else DIR_OUT}", ()


def _parent_is_a_file(w: Path, kind: str) -> tuple[str, tuple[str, ...]]:
    (w / "plain.txt").write_text("plain\n")
    return f"plain.txt/{FILE_OUT if kind == 'file' else DIR_OUT}", ()


def _missing_parent(w: Path, kind: str) -> tuple[str, tuple[str, ...]]:
    return f"no/such/folder/{FILE_OUT if kind == 'file' else DIR_OUT}", ()


HOSTILES = (
    Hostile("device node twin (1,7)", _device),
    Hostile("FIFO", _fifo),
    Hostile("symlink to an existing one", _symlink_to_existing, frozenset({0})),
    Hostile("dangling symlink", _dangling, frozenset({0, 2})),
    Hostile("symlink to a device node", _symlink_to_device),
    Hostile("wrong kind (dir for a file, file for a dir)", _wrong_kind),
    Hostile("unwritable folder (/sys)", _unwritable),
    Hostile("parent is a file", _parent_is_a_file),
    Hostile("missing parent folder", _missing_parent, frozenset({0, 2})),
)


#: The (option, hostile path) pairs of the fast subset: one of each kind of refusal, each command once.
QUICK = {("run --output", "device node twin (1,7)"), ("run --output", "FIFO"), ("run --dimg", "FIFO"),
         ("trace --junit", "wrong kind (dir for a file, file for a dir)"), ("compile --emit-trace", "device node twin (1,7)")}


def _attack(option: Option, hostile: Hostile) -> Attack:
    def setup(workdir: Path, material: Material) -> Scenario:
        extra = option.prepare(workdir, material)
        path, may_change = hostile.make(workdir, option.kind)
        return Scenario(option.argv(path, extra), names=(path,), may_change=may_change)

    quick = (option.name, hostile.name) in QUICK
    return Attack(f"{option.name} -> {hostile.name}", FAMILY, setup, hostile.exits, quick=quick,
                  line_optional=0 in hostile.exits)


def _onto_input(option: Option, index: int) -> Attack:
    def setup(workdir: Path, material: Material) -> Scenario:
        extra = option.prepare(workdir, material)
        target = option.inputs(extra, material)[index]
        return Scenario(option.argv(target, extra), names=(target,))

    quick = index == 0 and option.name in ("run --output", "compile -o", "trace --json")
    return Attack(f"{option.name} -> its own input #{index + 1}", FAMILY, setup, quick=quick)


def _onto_hard_link() -> Attack:
    def setup(workdir: Path, material: Material) -> Scenario:
        with_run_files(workdir, material)
        os.link(workdir / "x.npy", workdir / "x_link.npy")
        return Scenario(run_cmd("--output", "x_link.npy"), names=("x_link.npy",))

    return Attack("run --output -> a hard link of its input", FAMILY, setup)


def _trace_input_count(option: Option) -> int:
    return {"trace --json": 2}.get(option.name, 1 if option.kind == "dir" else 1 + (option.name == "run --output"))


def attacks() -> list[Attack]:
    out = [_attack(o, h) for o in OPTIONS for h in HOSTILES]
    out += [_onto_input(o, i) for o in OPTIONS for i in range(_trace_input_count(o))]
    out.append(_onto_hard_link())
    return out
