"""The same register-file and engine/DMA vectors as the Icarus tests, simulated by Verilator
(--binary --timing), so both simulators the testbench supports run this RTL identically."""
from __future__ import annotations

import random
import shutil

import pytest

from golden import get_config
from tb.vectors import sim

from .test_engine_sim import engine_program
from .test_regfile_sim import register_program

VERILATOR = sim.verilator_env()
pytestmark = pytest.mark.skipif(
    VERILATOR is None or shutil.which("verilator", path=VERILATOR.get("PATH")) is None,
    reason="verilator not available",
)


@pytest.fixture(scope="module")
def tb_sim(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("verilator_tb")
    cfg = sim.config_dir(tmp, get_config("nv_small"))
    result, exe = sim.verilator_build(tmp, cfg, {"DLA_TEST_ENGINE": None}, VERILATOR, extra=[sim.TB])
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return tmp, exe


@pytest.mark.parametrize("program", ["registers", "engines"])
def test_verilator_runs_the_vectors(tb_sim, program):
    tmp, exe = tb_sim
    hw = get_config("nv_small")
    if program == "registers":
        vec = register_program(hw, random.Random(5), random_steps=2500)
    else:
        vec = engine_program(hw, random.Random(9))
    result = sim.verilator_run(exe, vec.save(tmp / f"{program}.hex"), seed=13)
    assert "TB PASS" in result.stdout, result.stdout[-4000:] + result.stderr[-2000:]
