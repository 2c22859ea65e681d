"""Coverage closure on NVDLA's nv_small RTL: what NVDLA's own traces exercise that our other suites did not
(``python -m regressions.coverage.nvdla_rtl``: the lines and toggles per unit of NVDLA's traces alone against our
suites), checked against the golden model.

- **Register sweep.** NVDLA's traces write every register of a unit, unused ones included, with random values;
  our programs write what an operation needs, mostly small numbers, so the upper bits of sizes, strides,
  addresses and operands never toggle. The sweep writes every writable register of every unit nv_small has, in
  both ping-pong groups, all ones, then random, then zeros, and reads each back (CFGROM: every word) checking
  golden's value: the register files, the CSB read multiplexers and the ping-pong group selection, without
  starting an operation (``D_OP_ENABLE`` is never written).
"""
from __future__ import annotations

import random
from pathlib import Path

import pytest

from golden import Dla, get_config
from golden.config import HwConfig
from golden.regs import UNITS, register_map
from regressions.rtl.nvdla_rtl import CONFIG, FULL, SIM_WORKERS, SIMULATOR, nvdla_rtl_options
from regressions.rtl.nvdla_rtl import no_rtl_coverage  # noqa: F401 (a fixture, used by pytestmark)
from runtime.suite import PASS, run_trace
from tb.suite import run_traces

pytestmark = [pytest.mark.rtl, pytest.mark.usefixtures("no_rtl_coverage")]
HW = get_config(CONFIG)
#: Registers the sweep leaves alone: writing them starts an operation, reads or writes a LUT entry, or raises
#: or clears interrupts (GLB.S_INTR_MASK is swept).
SWEEP_SKIPPED = ("D_OP_ENABLE", "S_LUT_ACCESS_CFG", "S_LUT_ACCESS_DATA", "S_INTR_SET", "S_INTR_STATUS", "S_POINTER")
PATTERNS = ("ones", "random", "zeros")


def register_sweep(hw: HwConfig, directory: Path, name: str, seed: int) -> Path:
    """The sweep as the trace ``directory/name/name.cfg``: every check is golden's read-back of the same writes."""
    rng = random.Random(seed)
    dla = Dla(hw)
    regmap = register_map(hw.address_map)
    lines: list[str] = []

    def write(reg, value: int) -> None:
        dla.write_reg(regmap.address(reg.unit, reg.name), value)
        lines.append(f"reg_write({reg.full_name}, {value:#x});")

    def check(reg) -> None:
        lines.append(f"reg_read_check({reg.full_name}, {dla.read_reg(regmap.address(reg.unit, reg.name)):#x});")

    for unit in sorted(hw.units):
        registers = UNITS[unit].registers
        if unit == "CFGROM":
            for reg in registers:
                check(reg)
            continue
        swept = [r for r in registers if r.write_mask and r.name not in SWEEP_SKIPPED]
        pointer = UNITS[unit].by_name.get("S_POINTER")
        for group in (0, 1) if pointer is not None else (None,):
            if pointer is not None:
                write(pointer, group)
            for pattern in PATTERNS:
                for reg in swept:
                    write(reg, {"ones": reg.write_mask, "zeros": 0,
                                "random": rng.getrandbits(32) & reg.write_mask}[pattern])
                for reg in swept:
                    check(reg)
            if pointer is not None:
                check(pointer)
        if pointer is not None:
            write(pointer, 0)
    cfg = directory / name / f"{name}.cfg"
    cfg.parent.mkdir(parents=True, exist_ok=True)
    cfg.write_text("\n".join(lines) + "\n")
    return cfg


def test_register_sweep_on_nvdla_rtl(tmp_path: Path) -> None:
    options = nvdla_rtl_options()
    cfgs = [register_sweep(HW, tmp_path / CONFIG, f"regs_sweep_{seed}", seed) for seed in ((1, 2) if FULL else (1,))]
    golden = [run_trace(str(c), CONFIG) for c in cfgs]
    assert all(o.status == PASS for o in golden), [o.line() for o in golden]
    rtl = list(run_traces([(c, CONFIG) for c in cfgs], SIMULATOR, workers=SIM_WORKERS, options=options))
    assert all(o.status == PASS for o in rtl), [o.line() for o in rtl]
