"""Ping-pong groups chosen by the runtime (``runtime.groups``): a loadable that leaves them to the runtime
runs, pipelines and traces exactly as one whose groups the compiler fixed (loadable format 1.0)."""
from __future__ import annotations

import asyncio

import numpy as np
import pytest

from golden.intr import done_bit
from loadable import loadable_pb2 as pb
from runtime.executor import Network, load
from runtime.golden_target import GoldenTarget
from runtime.groups import Groups, consumer, group_bit, producer
from tests.runtime.test_executor import C, H, HW, STUB_KERNELS, W, _one_pdp, expected_pool, pool_file, rng  # noqa: F401


def _runtime_groups(msg: pb.Loadable) -> pb.Loadable:
    """The loadable as the compiler writes it since 1.1: S_POINTER 0 and group-0 done bits mean "this op's
    group", and the runtime picks the groups."""
    out = pb.Loadable()
    out.CopyFrom(msg)
    out.pingpong = pb.Loadable.RUNTIME
    for task in out.tasks:
        for op in task.dla.ops if task.WhichOneof("kind") == "dla" else ():
            op.interrupt_mask = sum(1 << (bit & ~1) for bit in range(32) if op.interrupt_mask >> bit & 1)
            for w in op.writes:
                if ".S_POINTER" in w.name:
                    w.value = 0
    return out


@pytest.mark.parametrize("pipeline", [True, False])
def test_runtime_assigned_groups_match_compiler_assigned_ones(pool_file, rng, pipeline):
    """A loadable that leaves groups to the runtime runs as the compiler-assigned one does, also on a
    target whose PDP CONSUMER sits at group 1, and its traces are the same."""
    old = load(pool_file, kernels=STUB_KERNELS)
    new = Network(_runtime_groups(old.msg), kernels=STUB_KERNELS)
    x = rng.normal(0, 2, (1, C, H, W)).astype(np.float32)
    for net in (old, new):
        target = GoldenTarget(HW)
        asyncio.run(_one_pdp(net, target))
        assert target.dla.read("PDP.S_POINTER") >> 16 == 1
        out = asyncio.run(net.run_async(x, target=target, pipeline=pipeline))
        np.testing.assert_array_equal(out["y"], expected_pool(x)[0])


def test_runtime_assigned_groups_write_the_same_traces(pool_file, rng, tmp_path):
    old = load(pool_file, kernels=STUB_KERNELS)
    new = Network(_runtime_groups(old.msg), kernels=STUB_KERNELS)
    x = rng.normal(0, 2, (1, C, H, W)).astype(np.float32)
    traces = [net.emit_trace(x, tmp_path / name) for name, net in (("old", old), ("new", new))]
    assert [c.read_text() for c in traces[0]] == [c.read_text() for c in traces[1]]


def test_groups_alternate_per_unit_from_the_consumer_group():
    groups = Groups(runtime_assigned=True)
    groups.start = {"PDP": 1}
    groups.next = {"PDP": 1}
    pdp = 1 << done_bit("PDP")
    assert (groups.pointer("PDP", 0), groups.done_bits(pdp)) == (1, [done_bit("PDP") + 1])
    groups.started(["PDP"])
    assert (groups.pointer("PDP", 0), groups.done_bits(pdp)) == (0, [done_bit("PDP")])
    groups.ran_elsewhere(["PDP"])  # another target's operations use that target's groups
    assert groups.pointer("PDP", 0) == 0


def test_compiler_assigned_groups_are_rebased_by_the_start_groups():
    groups = Groups(runtime_assigned=False)
    groups.start = {"PDP": 1}
    assert groups.pointer("PDP", 1) == 0 and groups.done_bits(1 << (done_bit("PDP") + 1)) == [done_bit("PDP")]
    groups.started(["PDP"])  # fixed by the compiler: nothing moves on this target
    assert groups.pointer("PDP", 1) == 0
    groups.ran_elsewhere(["PDP"])  # the compiler counted the other target's operation
    assert groups.pointer("PDP", 1) == 1


def test_s_pointer_fields():
    word = 1 << 16
    assert (producer(word), consumer(word)) == (0, 1)
    assert group_bit(done_bit("CDMA_DAT"), 1) == done_bit("CDMA_DAT") + 1
