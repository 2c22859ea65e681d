"""Operations split between a main target and a fallback that shares its memory (what ``--fallback
golden`` does on RTL), checked here with two golden models so no simulator is needed: the outputs equal
a single target's, each operation ran where it was assigned, ping-pong groups stay consistent on both
(the second PDP op of the loadable is compiled for group 1, yet the main target's PDP never ran before
it), and the profile names the target of each operation."""
from __future__ import annotations

import asyncio

import numpy as np
import pytest

from golden.dla import Dla
from runtime.errors import ExecutionError
from runtime.executor import Network
from runtime.golden_target import GoldenTarget
from runtime.profile import Profile
from tests.runtime.test_executor import C, H, HW, STUB_KERNELS, W, expected_pool, pool_loadable


class Named(GoldenTarget):
    def __init__(self, name: str, dla: Dla | None = None) -> None:
        super().__init__(HW, dla)
        self.name = name


def run_split(net: Network, x: np.ndarray, on_fallback, main: Named, fallback: Named, profile: Profile | None = None):
    return asyncio.run(net.run_async(x, target=main, fallback=fallback, on_fallback=on_fallback, profile=profile,
                                     raw=True))


@pytest.mark.parametrize("on_fallback", [{(0, 0)}, {(1, 0)}, {(0, 0), (1, 0)}, set()])
def test_split_runs_each_op_where_assigned_and_matches_one_target(on_fallback):
    net = Network(pool_loadable(), kernels=STUB_KERNELS)
    x = np.random.default_rng(3).normal(0, 2, (2, C, H, W)).astype(np.float32)
    whole = net.run(x, raw=True)
    main = Named("main")
    fallback = Named("fallback", Dla(HW, mem=main.dla.mem))
    prof = Profile()
    got = run_split(net, x, on_fallback, main, fallback, prof)
    np.testing.assert_array_equal(got["y"], whole["y"])
    assert got["y"].dtype == np.int8
    np.testing.assert_array_equal(got["y"].astype(np.float32) * np.float32(0.05), expected_pool(x)[0])
    # each sample ran each op once, on the target it was assigned to
    n_fallback = 2 * len(on_fallback)
    assert len(fallback.dla.history) == n_fallback and len(main.dla.history) == 4 - n_fallback
    where = {(op.task, op.sample): op.target for op in prof.ops if op.kind == "dla"}
    for (task, sample), target in where.items():
        assert target == ("fallback" if (task, 0) in on_fallback else "main")


def test_targets_already_used_are_rebased_per_target():
    """A second run on the same pair: each target's PDP CONSUMER is wherever the first run left it."""
    net = Network(pool_loadable(), kernels=STUB_KERNELS)
    x = np.random.default_rng(4).normal(0, 2, (1, C, H, W)).astype(np.float32)
    main = Named("main")
    fallback = Named("fallback", Dla(HW, mem=main.dla.mem))
    first = run_split(net, x, {(1, 0)}, main, fallback)
    assert main.dla.read("PDP.S_POINTER") >> 16 == 1 and fallback.dla.read("PDP.S_POINTER") >> 16 == 1
    second = run_split(net, x, {(0, 0)}, main, fallback)
    np.testing.assert_array_equal(first["y"], second["y"])


def test_ops_assigned_to_a_missing_fallback_are_refused():
    net = Network(pool_loadable(), kernels=STUB_KERNELS)
    with pytest.raises(ExecutionError, match="none is given"):
        asyncio.run(net.run_async(np.zeros((1, C, H, W), np.float32), target=Named("main"), on_fallback={(0, 0)}))


def test_op_engines_and_units_come_from_the_register_program():
    net = Network(pool_loadable())
    (_, _, op0), (_, _, op1) = net.dla_ops()
    assert net.op_units(op0) == ["PDP_RDMA", "PDP"] or net.op_units(op0) == ["PDP", "PDP_RDMA"]
    assert net.op_engines(op1) == ("PDP",)
