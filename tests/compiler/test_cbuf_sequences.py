"""Compiled networks are right on hardware across layers, not only layer by layer: the golden model keeps the
CBUF state NVDLA's RTL keeps (golden/cbuf.py), so a program the RTL computes differently is refused.

Held here: LeNet for nv_small, whose conv2 used to fetch D_WEIGHT_BYTES rounded up to 128 bytes (25,088 for
25,000 bytes of kernels). fc1#0 kept conv2's bank split, so NVDLA's RTL read conv2's 11 unconsumed weight
entries as fc1#0's first weights and every output word differed, while the golden model, computing each layer
alone, passed it."""
from __future__ import annotations

import numpy as np
import pytest

from compiler.codegen import conv as codegen_conv
from compiler.driver import compile_graph
from compiler.frontend import onnx as onnx_frontend
from golden.errors import ConfigError
from regressions.lib.zoo.models import lenet
from runtime.errors import ExecutionError
from runtime.executor import Network

X = np.random.default_rng(1).standard_normal((2, 1, 28, 28)).astype(np.float32)


def _run_lenet() -> dict[str, np.ndarray]:
    ld, _, _ = compile_graph(onnx_frontend.load(lenet(0)), "nv_small")
    net = Network(ld)
    return net.run({net.inputs[0]: X})


def test_lenet_runs_on_golden_across_layers() -> None:
    out = _run_lenet()
    assert all(np.isfinite(v).all() for v in out.values())


def test_lenet_with_over_fetched_weights_is_refused_at_fc1(monkeypatch: pytest.MonkeyPatch) -> None:
    def rounded_to_128(hw, k, c, r, s, bpe=1):  # the old codegen rule
        return -(-k * c * r * s * bpe // 128) * 128

    monkeypatch.setattr(codegen_conv, "weight_fetch_bytes", rounded_to_128)
    with pytest.raises(ExecutionError, match=r"op 'fc1#0': ConfigError: CDMA\.D_BANK\.WEIGHT_BANK: 11 weight "
                       r"entries operation #2 \(convolution") as info:
        _run_lenet()
    assert isinstance(info.value.__cause__, ConfigError)


def _misc_flags(ld) -> dict[str, int]:
    """CDMA.D_MISC_CFG of every convolution op, by op name."""
    out = {}
    for task in ld.tasks:
        for op in task.dla.ops if task.HasField("dla") else ():
            for w in op.writes:
                if w.name == "NVDLA_CDMA.D_MISC_CFG_0":
                    out[op.name] = w.value
    return out


def test_kernel_groups_of_one_band_fetch_the_band_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """fc1 runs as 4 kernel groups over the same 4x4x50 input: the first keeps it (SKIP_DATA_RLS), the
    middle ones reuse and keep it, the last reuses and releases it; results equal fetching it four times."""
    ld, _, _ = compile_graph(onnx_frontend.load(lenet(0)), "nv_small")
    skip, reuse = 1 << 24, 1 << 16
    flags = _misc_flags(ld)
    assert [flags[f"fc1#{i}"] & (skip | reuse) for i in range(4)] == [skip, skip | reuse, skip | reuse, reuse]
    assert flags["conv1"] & (skip | reuse) == 0 and flags["fc2"] & (skip | reuse) == 0
    with_reuse = _run_lenet()
    from compiler import emit

    monkeypatch.setattr(emit, "cbuf_reuse", lambda *a: codegen_conv.CbufReuse())
    without = _run_lenet()
    assert all(np.array_equal(with_reuse[k], without[k]) for k in with_reuse)
