"""Operations in flight like the hardware: the executor starts an operation while earlier ones run (two
per unit, one per ping-pong group) when the data allows it, with results identical to one at a time."""
from __future__ import annotations

import numpy as np
import onnx
import pytest

from compiler.driver import compile_model
from golden.regs import register_map
from regressions.lib.zoo import ZOO
from runtime.executor import Network
from runtime.golden_target import GoldenTarget


@pytest.fixture(scope="module")
def inception(tmp_path_factory) -> Network:
    path = tmp_path_factory.mktemp("zoo") / "inception.onnx"
    onnx.save(ZOO["inception"](0), path)
    return Network(compile_model(path, config="nv_small", calib_random=4, log=lambda m: None))


class Recorder(GoldenTarget):
    def __init__(self, hw):
        super().__init__(hw)
        self.regmap = register_map(hw.address_map)
        self.log: list[tuple[str, int]] = []

    async def write_reg(self, addr, value):
        reg = self.regmap.lookup(addr)
        self.log.append((f"{reg.unit}.{reg.name}", value))
        await super().write_reg(addr, value)


def test_pipelined_equals_sequential(inception):
    x = np.random.default_rng(1).standard_normal((2, 3, 32, 32)).astype(np.float32)
    pipelined = inception.run(x, raw=True)
    assert inception.concurrency.get("CACC", 0) == 2 and inception.concurrency.get("SDP", 0) == 2
    sequential = inception.run(x, raw=True, pipeline=False)
    assert pipelined.keys() == sequential.keys()
    for name in pipelined:
        assert np.array_equal(pipelined[name], sequential[name]), name


def test_a_second_operation_starts_before_the_first_is_retired(inception):
    x = np.random.default_rng(2).standard_normal((1, 3, 32, 32)).astype(np.float32)
    rec = Recorder(inception.hw)
    inception.run(x, target=rec)
    log = rec.log
    enables = [i for i, (name, v) in enumerate(log) if name == "CACC.D_OP_ENABLE" and v & 1]
    clears = [i for i, (name, _) in enumerate(log) if name == "GLB.S_INTR_STATUS"]
    # somewhere two convolutions are enabled with no interrupt cleared in between
    assert any(not any(a < c < b for c in clears) for a, b in zip(enables, enables[1:]))
    seq = Recorder(inception.hw)
    inception.run(x, target=seq, pipeline=False)
    enables = [i for i, (name, v) in enumerate(seq.log) if name == "CACC.D_OP_ENABLE" and v & 1]
    clears = [i for i, (name, _) in enumerate(seq.log) if name == "GLB.S_INTR_STATUS"]
    assert all(any(a < c < b for c in clears) for a, b in zip(enables, enables[1:]))
