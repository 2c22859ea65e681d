"""Building blocks the attack families share: a trace laid out in the temp dir from NVDLA's files, the
standard commands, and hostile paths (device node twin, FIFO, symlinks)."""
from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Callable

from regressions.robustness.material import PDP_TRACE, TXN_TRACE, Material

Edit = Callable[[str], "str | bytes"]


def _write(path: Path, text: str | bytes) -> None:
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text)


def pdp_trace(workdir: Path, material: Material, edit: Edit | None = None, *, copy_data: bool = False,
              name: str = "t", source: str = PDP_TRACE) -> Path:
    """``nv_small/<name>/<name>.cfg`` (NVDLA's cfg, edited) beside its data files, symlinked to NVDLA's
    (read in place) unless ``copy_data`` (an attack that targets the data file must not reach the shared
    original). Returns the trace dir, relative to ``workdir``."""
    src = material.nvdla_trace(source)
    rel = Path("nv_small") / name
    folder = workdir / rel
    folder.mkdir(parents=True)
    cfg = next(src.glob("*.cfg"))
    text = cfg.read_text()
    _write(folder / f"{name}.cfg", edit(text) if edit else text)
    for data in src.glob("*.dat"):
        if copy_data:
            (folder / data.name).write_bytes(data.read_bytes())
        else:
            (folder / data.name).symlink_to(data)
    return rel


def data_name(material: Material, source: str = PDP_TRACE) -> str:
    return next(material.nvdla_trace(source).glob("*.dat")).name


def txn_trace(workdir: Path, material: Material, edit: Edit | None = None, plusargs: str | bytes | None = None,
              *, copy_data: bool = False) -> Path:
    """``nv_full/s/input.txn`` (+ plusargs.txt, data) from NVDLA's nvdlav1 sanity trace."""
    config, name = TXN_TRACE
    src = material.nvdla_trace(name, config)
    rel = Path(config) / "s"
    folder = workdir / rel
    folder.mkdir(parents=True)
    text = (src / "input.txn").read_text()
    _write(folder / "input.txn", edit(text) if edit else text)
    _write(folder / "plusargs.txt", plusargs if plusargs is not None else (src / "plusargs.txt").read_text())
    for data in src.glob("*.dat"):
        if copy_data:
            (folder / data.name).write_bytes(data.read_bytes())
        else:
            (folder / data.name).symlink_to(data)
    return rel


def trace_cfg(rel: Path) -> str:
    return str(rel / f"{rel.name}.cfg")


def cfg_line(rel_cfg: str, text: str, needle: str) -> str:
    """``file:line`` of the first line holding ``needle`` (what the error should name)."""
    for i, line in enumerate(text.splitlines(), 1):
        if needle in line:
            return f"{rel_cfg}:{i}"
    raise ValueError(f"{needle!r} not in the trace")


def replace_line(needle: str, new: str) -> Edit:
    """Replace the first line holding ``needle`` by ``new``."""
    def edit(text: str) -> str:
        lines = text.splitlines()
        i = next(i for i, ln in enumerate(lines) if needle in ln)
        lines[i] = new
        return "\n".join(lines) + "\n"
    return edit


def sub(old: str, new: str) -> Edit:
    def edit(text: str) -> str:
        if old not in text:
            raise ValueError(f"{old!r} not in the trace")
        return text.replace(old, new, 1)
    return edit


def device_twin(path: Path) -> Path:
    """A character device like /dev/full (1, 7) at ``path``: the sweep runs as root in its temp dir."""
    os.mknod(path, stat.S_IFCHR | 0o666, os.makedev(1, 7))
    return path


def fifo(path: Path) -> Path:
    os.mkfifo(path)
    return path


def run_cmd(*more: str) -> list[str]:
    return ["run", "poolnet.dla", "--input", "x.npy", *more]


def compile_cmd(out: str = "out.dla", *more: str, model: str = "poolnet.onnx") -> list[str]:
    return ["compile", model, "--config", "nv_small", "--calib-random", "2", "-o", out, *more]


def nvdla_cmd(*more: str, loadable: str = "pdp.nvdla") -> list[str]:
    return ["run", loadable, "--config", "nv_small", *more]


def with_run_files(workdir: Path, material: Material) -> None:
    material.copy("poolnet.dla", workdir)
    material.copy("x.npy", workdir)


def with_compile_files(workdir: Path, material: Material) -> None:
    material.copy("poolnet.onnx", workdir)
    material.copy("x.npy", workdir)
