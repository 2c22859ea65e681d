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
from regressions.zoo.models import lenet
from runtime.executor import Network
from runtime.loadable import ExecutionError

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
