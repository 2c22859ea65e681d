"""Named DUTs: ``--dut NAME`` / ``DUT=NAME`` / ``$DLA_DUT`` instead of a file list path.

A name stands for a simulator file list the testbench builds exactly as ``--rtl-filelist`` would
(``tb.suite.RtlOptions.filelist`` -> ``tb.runner.DutSpec.from_filelist``), so a named NVDLA DUT gets every
user-RTL default (e.g. 8192 idle cycles after reset). ``rtl`` is our own ``rtl/``, rendered per hardware
config; it has no file list.

Where NVDLA's RTL is: ``../shared/nvdla/rtl`` beside the clone, like the traces (``NVDLA_TRACES``) and
spec (``NVDLA_SPEC``); ``NVDLA_RTL=DIR`` moves that root, and ``DLA_NVDLA_NV_SMALL_FILELIST=F`` points at
one file list directly. The package never ships NVDLA's files.
"""
from __future__ import annotations

import os
from pathlib import Path

from golden.config import HwConfig
from runtime.suite import TargetSetupError
from tb.runner import REPO

#: The environment variable the pytest RTL suites and the make targets read the DUT name from.
DUT_ENV = "DLA_DUT"
#: Our RTL in ``rtl/`` (the default).
BUILTIN_DUT = "rtl"
#: Moves the folder holding NVDLA's RTL (one ``<config>/<config>.f`` per config), as NVDLA_TRACES does.
NVDLA_RTL_ENV = "NVDLA_RTL"
_SHARED_RTL = Path("../shared/nvdla/rtl")

#: DUT name -> its file list relative to the repository root (None: our ``rtl/``, built per config).
NAMED_DUTS: dict[str, Path | None] = {
    BUILTIN_DUT: None,
    "nvdla-nv_small": _SHARED_RTL / "nv_small" / "nv_small.f",
}
#: DUT name -> the HwConfig fields whose rule that RTL implements differently from the config's NVDLA hardware.
#: Golden is the reference for a DUT with these applied (``dut_config``). Our ``rtl/`` implements the cmod's
#: PDP AVERAGE datapath (``dla_pdp.v``: 16-bit sums), not nv_small RTL's 11/14-bit one; both agree while
#: no sum overflows (docs/golden-semantics.md, PDP).
DUT_SEMANTICS: dict[str, dict[str, object]] = {BUILTIN_DUT: {"pdp_average": "cmod"}}
#: DUT name -> the environment variable that overrides its file list path.
FILELIST_ENV: dict[str, str] = {"nvdla-nv_small": "DLA_NVDLA_NV_SMALL_FILELIST"}


class DutError(TargetSetupError, ValueError):
    """An unknown DUT name, or a named DUT whose RTL is not there: the user's setup, one line, exit 2."""


def dut_filelist(name: str) -> Path | None:
    """Where ``name``'s file list should be (env overrides applied), without checking it exists."""
    if name not in NAMED_DUTS:
        raise DutError(f"unknown DUT {name!r} (known: {', '.join(NAMED_DUTS)})")
    rel = NAMED_DUTS[name]
    if rel is None:
        return None
    env = FILELIST_ENV.get(name)
    if env and os.environ.get(env, "").strip():
        return Path(os.environ[env].strip()).expanduser().resolve()
    root = os.environ.get(NVDLA_RTL_ENV, "").strip()
    if root and rel.is_relative_to(_SHARED_RTL):
        return (Path(root).expanduser() / rel.relative_to(_SHARED_RTL)).resolve()
    return (REPO / rel).resolve()


def named_dut(name: str) -> Path | None:
    """The file list of DUT ``name`` for ``RtlOptions(filelist=...)`` / ``DutSpec.from_filelist``, or None
    for ``rtl`` (our RTL, which ``RtlOptions`` builds when ``filelist`` is None). Raises DutError for an
    unknown name or a file list that is not there."""
    path = dut_filelist(name)
    if path is not None and not path.is_file():
        what = name.removeprefix("nvdla-")
        env = FILELIST_ENV.get(name, NVDLA_RTL_ENV)
        raise DutError(f"NVDLA {what} RTL not found at {path}; set {env}")
    return path


def dut_from_env(default: str = BUILTIN_DUT) -> str:
    """The DUT name in ``$DLA_DUT`` (``default`` when unset or empty), checked against NAMED_DUTS."""
    name = os.environ.get(DUT_ENV, "").strip() or default
    dut_filelist(name)  # raises DutError for an unknown name
    return name


def dut_config(name: str, hw: HwConfig) -> HwConfig:
    """``hw`` as DUT ``name`` implements it: the config golden must use to predict that RTL's outputs."""
    return hw.derive(**DUT_SEMANTICS[name]) if DUT_SEMANTICS.get(name) else hw
