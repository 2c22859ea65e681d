"""The firmware scheduler model: ping-pong groups, dependency counts, two ops in flight per engine,
results identical to one-op-at-a-time execution, and clean errors for graphs that cannot run."""
from __future__ import annotations

import numpy as np
import pytest

from golden.config import get_config
from golden.regs import register_map
from regressions.lib.nvdla_loadables import (
    ATOM,
    add_output,
    feature_cube,
    independent_pools,
    maxpool2,
    pack_feature,
    pool_2x2_op,
)
from runtime.golden_target import GoldenTarget
from runtime.nvdla import descriptors as d
from runtime.nvdla import fbs
from runtime.nvdla.run import NvdlaNetwork, NvdlaRunError
from runtime.nvdla.writer import LoadableBuilder

HW = get_config("nv_small")


class Recorder(GoldenTarget):
    """The golden target, logging register traffic as UNIT.REG names."""

    def __init__(self, hw):
        super().__init__(hw)
        self.regmap = register_map(hw.address_map)
        self.log: list[tuple[str, str, int]] = []

    async def write_reg(self, addr, value):
        reg = self.regmap.lookup(addr)
        self.log.append(("w", f"{reg.unit}.{reg.name}", value))
        await super().write_reg(addr, value)

    async def read_reg(self, addr):
        value = await super().read_reg(addr)
        reg = self.regmap.lookup(addr)
        self.log.append(("r", f"{reg.unit}.{reg.name}", value))
        return value


def _unpack(buf: bytes, c: int, h: int, w: int) -> np.ndarray:
    s = -(-c // ATOM)
    a = np.frombuffer(buf, dtype=np.int8)[: s * h * w * ATOM].reshape(s, h, w, ATOM)
    return a.transpose(0, 3, 1, 2).reshape(s * ATOM, h, w)[:c]


def _run(blob: bytes, target=None):
    target = target or GoldenTarget(HW)
    return NvdlaNetwork(fbs.parse(blob)).run(target), target


@pytest.fixture
def images():
    rng = np.random.default_rng(3)
    return [rng.integers(-128, 128, size=(8, 8, 8), dtype=np.int8) for _ in range(3)]


def test_independent_ops_run_two_per_engine_and_match_one_at_a_time(images):
    result, rec = _run(independent_pools(images), Recorder(HW))
    stats = result.tasks[0].stats
    assert stats.ops == {"PDP": 3}
    assert stats.max_in_flight["PDP"] == 2  # both ping-pong groups busy at once
    # the first two ops are programmed into groups 0 and 1 and enabled before any interrupt is serviced
    first_status = next(i for i, e in enumerate(rec.log) if e[1] == "GLB.S_INTR_STATUS")
    enables = [e for e in rec.log[:first_status] if e[1] == "PDP.D_OP_ENABLE"]
    producers = [e[2] & 1 for e in rec.log[:first_status] if e[0] == "w" and e[1] == "PDP.S_POINTER"]
    assert len(enables) == 2 and {0, 1} <= set(producers)
    for i, x in enumerate(images):  # bytes equal to running each op in a loadable of its own
        alone, _ = _run(independent_pools([x]))
        assert result.outputs[i].data == alone.outputs[0].data
        assert np.array_equal(_unpack(result.outputs[i].data, 8, 4, 4), maxpool2(x))


def test_a_consumer_waits_for_its_producer(images):
    b = LoadableBuilder()
    src = b.buffer("src", 512, pack_feature(images[0]))
    mid = b.buffer("mid", 128)
    out = b.buffer("out", 32)
    first = b.op(d.OP_PDP, pool_2x2_op(), d.PdpSurfaceDesc(src_data=feature_cube(src, 8, 8, 8), dst_data=feature_cube(mid, 8, 4, 4)))
    b.op(d.OP_PDP, pool_2x2_op(), d.PdpSurfaceDesc(src_data=feature_cube(mid, 8, 4, 4), dst_data=feature_cube(out, 8, 2, 2)),
         after=[first])
    add_output(b, out, "out", 8, 2, 2)
    ld = fbs.parse(b.build())
    deps = next(x for x in ld.blobs if x.sub_interface == fbs.SUB_DEPGRAPH).data
    op0, op1 = d.CommonOpDesc.decode(deps, 0), d.CommonOpDesc.decode(deps, 36)
    assert (op0.consumers[d.OP_PDP].index, op0.consumers[d.OP_PDP].event) == (1, d.EVENT_OP_COMPLETED)
    assert op1.dependency_count == 1
    rec = Recorder(HW)
    result = NvdlaNetwork(ld).run(rec)
    assert result.tasks[0].stats.max_in_flight["PDP"] == 1
    enables = [i for i, e in enumerate(rec.log) if e[1] == "PDP.D_OP_ENABLE"]
    first_clear = next(i for i, e in enumerate(rec.log) if e[0] == "w" and e[1] == "GLB.S_INTR_STATUS")
    assert enables[0] < first_clear < enables[1]
    assert np.array_equal(_unpack(result.outputs[0].data, 8, 2, 2), maxpool2(maxpool2(images[0])))


def test_a_target_that_already_ran_is_reused(images):
    """The free group comes from the hardware's S_POINTER CONSUMER, so a second run on the same DLA
    (now at group 1) works and gives the same bytes."""
    target = GoldenTarget(HW)
    blob = independent_pools(images[:1])
    first, _ = _run(blob, target)
    second, _ = _run(blob, target)
    assert first.outputs[0].data == second.outputs[0].data


def _patched(blob: bytes, sub: int, patch) -> bytes:
    ld = fbs.parse(blob)
    b = next(x for x in ld.blobs if x.sub_interface == sub)
    b.data = patch(bytearray(b.data))
    b.size = len(b.data)
    return fbs.build(ld)


def test_a_graph_that_cannot_finish_is_reported(images):
    def wait_forever(deps: bytearray) -> bytes:
        op = d.CommonOpDesc.decode(bytes(deps), 0)
        op.dependency_count = 1  # nobody will ever signal it
        return op.encode() + bytes(deps[36:])

    blob = _patched(independent_pools(images[:1]), fbs.SUB_DEPGRAPH, wait_forever)
    with pytest.raises(NvdlaRunError, match=r"stalled after 0 of 1 ops: op 0 \(PDP\) group \d waiting on 1 event"):
        _run(blob)


def test_a_descriptor_outside_its_blob_is_reported(images):
    def two_ops(net: bytearray) -> bytes:
        n = d.NetworkDesc.decode(bytes(net))
        n.num_operations = 2
        return n.encode()

    blob = _patched(independent_pools(images[:1]), fbs.SUB_NETWORK, two_ops)
    with pytest.raises(NvdlaRunError, match=r"operation_desc_index for 2 operations: bytes 0\.\.232 are outside "
                                            r"address 1 \(116 bytes\)"):
        _run(blob)


def test_a_cube_address_outside_the_address_list_is_reported(images):
    def bad_address(surfs: bytearray) -> bytes:
        s = d.PdpSurfaceDesc.decode(bytes(surfs))
        s.dst_data.address = 40
        return s.encode().ljust(len(surfs), b"\0")

    blob = _patched(independent_pools(images[:1]), fbs.SUB_SURFS, bad_address)
    with pytest.raises(NvdlaRunError, match=r"op 0 \(PDP\): address index 40 is outside the task's address list"):
        _run(blob)
