"""Model zoo: every network is a valid opset-13 ONNX model the frontend takes, ``run_float`` matches ONNX's
reference evaluator on it, its logits depend on the input, and it stays convertible to Caffe; the digits CNN
trains to >= 95 % float accuracy."""
from __future__ import annotations

import functools
import math

import numpy as np
import onnx
import pytest
from onnx import numpy_helper
from onnx.reference import ReferenceEvaluator
from onnx.reference.op_run import OpRun

from compiler.float_exec import run_float
from compiler.frontend.onnx import load
from compiler.ops import OPS
from regressions.lib.zoo import ZOO
from regressions.lib.zoo.digits import DigitsModel, train_digits
from regressions.lib.zoo.models import cost

NAMES = sorted(ZOO)


@functools.lru_cache(maxsize=None)
def built(name: str, seed: int = 0) -> onnx.ModelProto:
    return ZOO[name](seed)


@functools.lru_cache(maxsize=1)
def digits() -> DigitsModel:
    """Trained once per test process."""
    return train_digits(0)


def attrs(node: onnx.NodeProto) -> dict:
    return {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}


@pytest.mark.parametrize("name", NAMES)
def test_model_is_valid_onnx_with_the_zoo_conventions(name: str) -> None:
    m = built(name)
    onnx.checker.check_model(m, full_check=True)
    assert [(o.domain, o.version) for o in m.opset_import] == [("", 13)]
    assert [i.name for i in m.graph.input] == ["data"]
    dims = [d.dim_value for d in m.graph.input[0].type.tensor_type.shape.dim]
    assert dims[0] == 1 and len(dims) == 4
    macs, params = cost(m)
    assert macs < 30e6 and params > 0
    assert m.graph.node[-1].op_type == "Softmax"


class LRN(OpRun):
    """ONNX's LRN formula, one channel window at a time (the reference evaluator's own LRN loops over the batch
    axis where it means channels, so with N=1 it normalizes channel 0 only)."""

    op_domain = ""

    def _run(self, x, alpha=None, beta=None, bias=None, size=None):  # type: ignore[no-untyped-def]
        lo, hi = (size - 1) // 2, size - 1 - (size - 1) // 2
        square_sum = np.stack([(x[:, max(0, c - lo) : c + hi + 1] ** 2).sum(axis=1) for c in range(x.shape[1])],
                              axis=1)
        return ((x / (bias + alpha / size * square_sum) ** beta).astype(x.dtype),)


def reference(m: onnx.ModelProto) -> ReferenceEvaluator:
    """The reference evaluator on the same graph read as opset 15, with a correct LRN: its BatchNormalization-9
    (opsets 9-13) blends the batch statistics in through momentum's default value, which inference BN must not
    do; no op of the zoo changed meaning between opsets 13 and 15."""
    m15 = onnx.ModelProto()
    m15.CopyFrom(m)
    m15.opset_import[0].version = 15
    return ReferenceEvaluator(m15, new_ops=[LRN])


@pytest.mark.parametrize("name", NAMES)
def test_run_float_matches_the_reference_evaluator(name: str) -> None:
    m = built(name)
    g = load(m)
    assert {n.op for n in g.nodes} <= set(OPS)
    x = np.random.default_rng(5).standard_normal(g.shapes["data"]).astype(np.float32)
    logits = g.nodes[-1].inputs[0]
    m_logits = onnx.ModelProto()
    m_logits.CopyFrom(m)
    m_logits.graph.output.append(onnx.helper.make_empty_tensor_value_info(logits))
    want_prob, want_logits = reference(m_logits).run(None, {"data": x})
    got = run_float(g, {"data": x}, keep=True)
    assert got[g.outputs[0]].shape == want_prob.shape
    np.testing.assert_allclose(got[logits], want_logits, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(got[g.outputs[0]], want_prob, rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("name", NAMES)
def test_logits_depend_on_the_input(name: str) -> None:
    """Across 20 random inputs the logits spread clearly and the top-1 class is not always the same."""
    g = load(built(name))
    logits_name = g.nodes[-1].inputs[0]
    x = np.random.default_rng(11).standard_normal((20, *g.shapes["data"][1:]))
    logits = run_float(g, {"data": x}, keep=True)[logits_name]
    assert 1.0 < logits.std(axis=1).mean() < 3.0
    top = logits.argmax(axis=1)
    assert len(set(top.tolist())) >= 4
    assert np.bincount(top).max() <= 10
    assert np.abs(logits - logits.mean(axis=0)).mean() > 0.5  # input signal, not a per-class constant


@pytest.mark.parametrize("name", NAMES)
def test_seeded(name: str) -> None:
    a, b, c = built(name, 0), ZOO[name](0), built(name, 1)
    assert a.SerializeToString() == b.SerializeToString()
    wa = {t.name: numpy_helper.to_array(t) for t in a.graph.initializer}
    wc = {t.name: numpy_helper.to_array(t) for t in c.graph.initializer}
    assert wa.keys() == wc.keys()
    assert any(not np.array_equal(wa[k], wc[k]) for k in wa if wa[k].size > 1)


@pytest.mark.parametrize("name", NAMES)
def test_convertible_to_caffe(name: str) -> None:
    """Pooling sizes equal Caffe's ceil-mode sizes, no padded AveragePool, Gemm transB=1, ReLU6 is Clip(0, 6)."""
    m = built(name)
    shapes = {"data": [d.dim_value for d in m.graph.input[0].type.tensor_type.shape.dim]}
    inferred = onnx.shape_inference.infer_shapes(m)
    for vi in list(inferred.graph.value_info) + list(inferred.graph.output):
        shapes[vi.name] = [d.dim_value for d in vi.type.tensor_type.shape.dim]
    consts = {t.name: numpy_helper.to_array(t) for t in m.graph.initializer}
    for node in m.graph.node:
        a = attrs(node)
        if node.op_type in ("MaxPool", "AveragePool"):
            (kh, kw), (sy, sx) = a["kernel_shape"], a.get("strides", [1, 1])
            pt, pl, pb, pr = a.get("pads", [0, 0, 0, 0])
            assert (pt, pl) == (pb, pr), "Caffe pads symmetrically"
            h, w = shapes[node.input[0]][2:]
            caffe = [math.ceil((h + 2 * pt - kh) / sy) + 1, math.ceil((w + 2 * pl - kw) / sx) + 1]
            caffe = [o - 1 if p and (o - 1) * s >= size + p else o
                     for o, p, s, size in zip(caffe, (pt, pl), (sy, sx), (h, w))]
            assert shapes[node.output[0]][2:] == caffe
            if node.op_type == "AveragePool":
                assert not any(a.get("pads", [0]))
        if node.op_type == "Gemm":
            assert a.get("transB") == 1 and a.get("transA", 0) == 0
        if node.op_type == "Clip":
            assert [float(consts[t]) for t in node.input[1:]] == [0.0, 6.0]
        assert node.op_type in {"Conv", "BatchNormalization", "Relu", "Clip", "MaxPool", "AveragePool", "LRN",
                                "Add", "Concat", "GlobalAveragePool", "Flatten", "Gemm", "Softmax"}


def test_digits_trains_to_95_percent() -> None:
    d = digits()
    assert d.float_accuracy >= 0.95
    # Training time is not asserted: a test must pass on a loaded machine (CPU time grew 3x under load).
    assert d.x_test.dtype == np.float32 and d.x_test.shape[1:] == (1, 8, 8)
    assert 0.0 <= d.x_test.min() and d.x_test.max() <= 1.0
    assert len(d.y_test) == len(d.x_test) and set(d.y_test.tolist()) == set(range(10))


def test_digits_model_through_the_frontend() -> None:
    d = digits()
    onnx.checker.check_model(d.model, full_check=True)
    assert [i.name for i in d.model.graph.input] == ["data"]
    g = load(d.model)
    logits = run_float(g, {"data": d.x_test})[g.outputs[0]]  # the whole test split as one batch
    assert float((logits.argmax(axis=1) == d.y_test).mean()) == pytest.approx(d.float_accuracy)
    want = reference(d.model).run(None, {"data": d.x_test[:8]})[0]
    np.testing.assert_allclose(logits[:8], want, rtol=1e-4, atol=1e-5)
