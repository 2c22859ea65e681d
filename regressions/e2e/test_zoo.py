"""Compiled zoo networks on the golden model against the float network (onnxruntime).

Every zoo model, as ONNX and as Caffe (prototxt + caffemodel from ``to_caffe``), compiles for nv_small,
nv_large and nv_full; ``runtime`` runs it on the golden target. Per network output, the cosine similarity
between the int8 and the float outputs over all the inputs must be >= 0.99 (the worst single input is
reported), and the top-1 class must agree on >= 95% of the inputs.
``DLA_E2E_SAMPLES`` sets the number of random inputs (100 in ``make test``, 200 in ``make regress``; the
Caffe variants use half as many).
Layer by layer, every engine op also equals the independent reference math exactly.
"""
from __future__ import annotations

import functools
import os

import numpy as np
import pytest

onnxruntime = pytest.importorskip("onnxruntime")

from compiler.driver import compile_graph  # noqa: E402
from compiler.frontend import caffe as caffe_frontend  # noqa: E402
from compiler.frontend import onnx as onnx_frontend  # noqa: E402
from regressions.lib.layer_replay import replay_all  # noqa: E402
from regressions.lib.float_reference import session  # noqa: E402
from regressions.lib.zoo import ZOO  # noqa: E402
from regressions.lib.zoo.to_caffe import to_caffe  # noqa: E402
from runtime.executor import Network  # noqa: E402

SAMPLES = int(os.environ.get("DLA_E2E_SAMPLES", "100"))
CONFIGS = ("nv_small", "nv_large", "nv_full")
MIN_COSINE = 0.99
MIN_TOP1 = 0.95


@functools.lru_cache(maxsize=None)
def model(name: str):
    return ZOO[name](0)


@functools.lru_cache(maxsize=None)
def float_outputs(name: str, samples: int) -> tuple[np.ndarray, list[list[np.ndarray]]]:
    m = model(name)
    sess = session(m)
    shape = [d.dim_value for d in m.graph.input[0].type.tensor_type.shape.dim]
    rng = np.random.default_rng(1234)
    xs = rng.standard_normal((samples, *shape[1:])).astype(np.float32)
    refs = [sess.run(None, {m.graph.input[0].name: xs[i:i + 1]}) for i in range(samples)]
    return xs, refs


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    a, b = a.ravel().astype(np.float64), b.ravel().astype(np.float64)
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b) + 1e-30))


def check_against_float(net: Network, name: str, samples: int) -> tuple[float, float, float]:
    """(min over outputs of the cosine over all inputs, worst single-input cosine, top-1 agreement)."""
    xs, refs = float_outputs(name, samples)
    inp = net.inputs[0]
    got = net.run({inp: xs})
    overall, worst, agree = 1.0, 1.0, 0
    for j, out in enumerate(net.outputs):
        ref = np.stack([refs[i][j].reshape(got[out][i].shape) for i in range(samples)])
        overall = min(overall, cosine(got[out], ref))
        worst = min(worst, min(cosine(got[out][i], ref[i]) for i in range(samples)))
    for i in range(samples):
        agree += int(np.argmax(got[net.outputs[0]][i]) == np.argmax(refs[i][0]))
    return overall, worst, agree / samples


@pytest.mark.parametrize("config", CONFIGS)
@pytest.mark.parametrize("name", sorted(ZOO))
def test_onnx_zoo_matches_float(name: str, config: str) -> None:
    g = onnx_frontend.load(model(name))
    ld, _, _ = compile_graph(g, config)
    cos, worst, top1 = check_against_float(Network(ld), name, SAMPLES)
    print(f"{name} {config}: cosine {cos:.4f} (worst input {worst:.4f}), top-1 agreement {top1:.1%} "
          f"over {SAMPLES} inputs")
    assert cos >= MIN_COSINE, f"cosine {cos:.4f} < {MIN_COSINE}"
    assert top1 >= MIN_TOP1, f"top-1 agreement {top1:.1%} < {MIN_TOP1:.0%}"


@pytest.mark.parametrize("config", CONFIGS)
@pytest.mark.parametrize("name", sorted(ZOO))
def test_caffe_zoo_matches_float(name: str, config: str, tmp_path) -> None:
    prototxt, caffemodel = to_caffe(model(name))
    (tmp_path / "deploy.prototxt").write_text(prototxt)
    (tmp_path / "net.caffemodel").write_bytes(caffemodel)
    g = caffe_frontend.load(tmp_path / "deploy.prototxt", tmp_path / "net.caffemodel")
    ld, _, _ = compile_graph(g, config)
    samples = max(10, SAMPLES // 2)
    cos, worst, top1 = check_against_float(Network(ld), name, samples)
    print(f"{name} (Caffe) {config}: cosine {cos:.4f} (worst input {worst:.4f}), top-1 agreement {top1:.1%} "
          f"over {samples} inputs")
    assert cos >= MIN_COSINE
    assert top1 >= MIN_TOP1


@pytest.mark.parametrize("config", CONFIGS)
@pytest.mark.parametrize("name", sorted(ZOO))
def test_every_layer_equals_reference_math(name: str, config: str) -> None:
    g = onnx_frontend.load(model(name))
    ld, lowered, ctx = compile_graph(g, config)
    results = replay_all(ld, lowered, ctx.hw, seed=7)
    assert results and all(r.ok for r in results), [r for r in results if not r.ok]
    ops = {r.op for r in results}
    assert "dla.conv" in ops
