"""Pre-quantized ONNX models (``compiler.frontend.onnx_quant``): onnxruntime's static quantizer writes a float
residual net (BatchNorm folded by its ``quant_pre_process``) in QDQ and in QOperator form, symmetric int8 with
per-channel weights. They compile with the model's own scales (QDQ: no calibration at all) and int8 weights,
the DLA rounds and saturates where the model does, and golden is compared with onnxruntime's own execution of
the quantized model: layer by layer within one output step, end to end within a few.

onnxruntime runs the model as written, op by op (graph optimizations off). Its default optimizations fuse
DequantizeLinear -> Conv -> QuantizeLinear into a QLinearConv and, on every x86 build (``QDQIsInt8Allowed()`` is
false there), turn the int8 activations into uint8 (zero point 128): the U8S8 kernel of a CPU without VNNI
(AVX2, AVX-512 without VNNI) adds pairs of u8 x s8 products in saturating 16 bits (vpmaddubsw), so large
activations times large weights come out wrong by up to tens of steps. On an AVX2-only machine that fused
path is more than one step off the QDQ model's own arithmetic on 4.6% of bn2's values (up to 41 steps) and
on 79% of the logits (up to 58), alike with onnxruntime 1.20.1 and 1.32.0. Unfused, onnxruntime equals a float64 numpy
evaluation of the QDQ graph (dequantize, float op, quantize rounding half to even) on every value of every
cut; QOperator's QLinearConv keeps int8 activations and is exact either way.
"""
from __future__ import annotations

import copy
from pathlib import Path

import numpy as np
import onnx
import onnx.utils
import pytest

from compiler.driver import compile_graph
from compiler.errors import CompileError
from compiler.frontend import onnx as onnx_frontend
from regressions.lib.zoo.models import resnet
from runtime.executor import Network

quantization = pytest.importorskip("onnxruntime.quantization")
SAMPLES = 32


class _Reader(quantization.CalibrationDataReader):
    def __init__(self, n: int = 16) -> None:
        rng = np.random.default_rng(0)
        self.feeds = iter([{"data": rng.standard_normal((1, 3, 32, 32)).astype(np.float32)} for _ in range(n)])

    def get_next(self):
        return next(self.feeds, None)


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> dict[str, Path]:
    """The zoo's residual net without its softmax (logits out), BN folded, quantized both ways."""
    d = tmp_path_factory.mktemp("prequantized")
    m = resnet(0)
    assert m.graph.node[-1].op_type == "Softmax"
    logits = m.graph.node[-1].input[0]
    del m.graph.node[-1]
    out = copy.deepcopy(m.graph.output[0])
    out.name = logits
    del m.graph.output[:]
    m.graph.output.extend([out])
    onnx.save(m, d / "float.onnx")
    from onnxruntime.quantization.shape_inference import quant_pre_process

    quant_pre_process(str(d / "float.onnx"), str(d / "pre.onnx"), skip_symbolic_shape=True)
    paths = {"float": d / "float.onnx"}
    for fmt in ("QDQ", "QOperator"):
        paths[fmt] = d / f"{fmt}.onnx"
        quantization.quantize_static(
            str(d / "pre.onnx"), str(paths[fmt]), _Reader(), quant_format=getattr(quantization.QuantFormat, fmt),
            per_channel=True, activation_type=quantization.QuantType.QInt8,
            weight_type=quantization.QuantType.QInt8,
            extra_options={"ActivationSymmetric": True, "WeightSymmetric": True})
    return paths


def _onnxruntime(model: onnx.ModelProto):
    """onnxruntime executing the quantized model as written, op by op (see the module docstring: its fused QDQ
    path saturates 16-bit partial sums on x86 CPUs without VNNI). One intra-op thread: the cuts are small."""
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_DISABLE_ALL
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    return onnxruntime.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])


def _steps(path: Path, config: str, logs: list[str] | None = None) -> tuple[np.ndarray, object]:
    """golden - onnxruntime in whole output steps over SAMPLES inputs (signed integers: both are int8 values
    times the model's float32 scale, so a one-step difference is not 1 +- float32 noise), and the compile
    context."""
    model = onnx.load(path)
    ld, _, ctx = compile_graph(onnx_frontend.load(model), config, log=(logs or []).append)
    net = Network(ld)
    xs = np.random.default_rng(7).standard_normal((SAMPLES, 3, 32, 32)).astype(np.float32)
    got = net.run({net.inputs[0]: xs})[net.outputs[0]].reshape(SAMPLES, -1)
    sess = _onnxruntime(model)
    want = np.concatenate([sess.run(None, {"data": xs[i:i + 1]})[0].reshape(1, -1) for i in range(SAMPLES)])
    scale = ctx.scales[net.outputs[0]]
    return np.rint(got / scale) - np.rint(want / scale), ctx


def test_qdq_compiles_with_the_models_scales_and_int8_weights(models) -> None:
    logs: list[str] = []
    model = onnx.load(models["QDQ"])
    ld, lowered, ctx = compile_graph(onnx_frontend.load(model), "nv_small", log=logs.append)
    assert any("no calibration" in line for line in logs), logs
    assert not any(line.startswith("calibrating") for line in logs)
    inits = {i.name: onnx.numpy_helper.to_array(i) for i in model.graph.initializer}
    scales = {n.input[0]: inits[n.input[1]] for n in model.graph.node if n.op_type == "QuantizeLinear"}
    assert ctx.scales["data"] == pytest.approx(float(scales["data"]), rel=1e-6)
    # every conv's int8 weights are the model's own int8 initializers
    int8 = [v for v in inits.values() if v.dtype == np.int8 and v.ndim == 4]
    # but the global average's (its model scale finer than its input's): it sums on CMAC, int8 ones
    # block-diagonal over the 8x8 cube
    convs = [n.attrs["conv"].weights for n in lowered.nodes
             if n.op == "dla.conv" and n.attrs["conv"].weights.shape[2] > 1]
    means = [w for w in convs if w.shape[2:] == (8, 8)]
    assert len(means) == 1 and set(np.unique(means[0]).tolist()) == {0, 1}
    assert all(any(w.shape == q.shape and np.array_equal(w, q) for q in int8) for w in convs if w is not means[0])


@pytest.mark.parametrize("fmt", ["QDQ", "QOperator"])
def test_each_layer_matches_onnxruntime_int8_within_one_step(models, fmt: str, tmp_path: Path) -> None:
    """The model cut after each quantized tensor: the DLA's int8 equals onnxruntime's within one step on >= 99.5%
    of the values (rounding: SDP's 16-bit multipliers against onnxruntime's float32 requantization), exactly on
    >= 95% and without a bias (|mean signed error| <= 0.05 step; measured: >= 99.8% within one step, >= 97.2%
    exact, |mean| <= 0.01), so a systematic one-step error fails."""
    model = onnx.load(models[fmt])
    consts = {i.name for i in model.graph.initializer}
    names = [n.output[0] for n in model.graph.node if n.op_type == "DequantizeLinear" and n.input[0] not in consts]
    cuts = names
    assert len(cuts) >= 6  # (QOperator: convs, adds and the FC; QDQ also every ReLU and the pooled vector)
    within, exact, bias = {}, {}, {}
    for t in cuts:
        onnx.utils.extract_model(str(models[fmt]), str(tmp_path / "cut.onnx"), ["data"], [t])
        steps, _ = _steps(tmp_path / "cut.onnx", "nv_small")
        within[t] = float(np.mean(np.abs(steps) <= 1))
        exact[t] = float(np.mean(steps == 0))
        bias[t] = float(np.mean(steps))
    assert min(within.values()) >= 0.995, within
    assert min(exact.values()) >= 0.95, exact
    assert max(abs(b) for b in bias.values()) <= 0.05, bias


@pytest.mark.parametrize("fmt", ["QDQ", "QOperator"])
@pytest.mark.parametrize("config", ["nv_small", "nv_full"])
def test_whole_network_matches_onnxruntime_within_one_step(models, fmt: str, config: str) -> None:
    """End to end, the logits equal onnxruntime's int8 ones within one step on >= 99% of the values (measured:
    all, 97% exactly): requantization multiplies by an X1 x X2 pair as fine as onnxruntime's float32 scale,
    the global average sums on CMAC and saturates at the model's scale, and QOperator's float ReLU and pooling
    between a dequantize and a quantize keep the grid they read (``compiler.model_scales``)."""
    steps, _ = _steps(models[fmt], config)
    steps = np.abs(steps)
    assert np.mean(steps <= 1) >= 0.99 and np.median(steps) == 0, (np.mean(steps <= 1), steps.max())


def test_asymmetric_and_per_axis_activations_are_refused(models, tmp_path: Path) -> None:
    asym = tmp_path / "asym.onnx"
    quantization.quantize_static(str(models["float"]), str(asym), _Reader(4), quant_format=quantization.QuantFormat.QDQ,
                                 activation_type=quantization.QuantType.QUInt8,
                                 weight_type=quantization.QuantType.QInt8)
    with pytest.raises(CompileError, match=r"zero point \d+ \(uint8\): the DLA's int8 tensors are symmetric"):
        onnx_frontend.load(asym)
    per_axis = tmp_path / "per_axis.onnx"  # BatchNorm not folded: onnxruntime quantizes its output per channel
    quantization.quantize_static(str(models["float"]), str(per_axis), _Reader(4), per_channel=True,
                                 quant_format=quantization.QuantFormat.QDQ,
                                 activation_type=quantization.QuantType.QInt8,
                                 weight_type=quantization.QuantType.QInt8,
                                 extra_options={"ActivationSymmetric": True, "WeightSymmetric": True})
    with pytest.raises(CompileError, match="per-axis activation scales are not supported"):
        onnx_frontend.load(per_axis)


# ---- the pieces ----------------------------------------------------------------------------------------------
def test_multiplier_pair_holds_every_channel_to_22_bits() -> None:
    """One 16-bit multiplier with a shared shift keeps 15 bits for the largest channel and fewer for the
    others; an X1 x X2 pair keeps 22 or more for each over a 45x spread of channel scales (27 near the
    largest), near onnxruntime's float32 scale (24) and TFLite's 31-bit multiplier."""
    from compiler.passes.quantize import fixed, multiplier_pair

    ratio = np.random.default_rng(3).uniform(0.02, 0.9, 64) * 2.0 ** 10
    a, b, shift = multiplier_pair(ratio)
    assert a.max() <= 32767 and b.max() <= 32767 and a.min() >= 1 and b.min() >= 1
    pair_error = np.abs(a * b / 2.0 ** shift / ratio - 1)
    q, sh = fixed(ratio)
    single_error = np.abs(q / 2.0 ** sh / ratio - 1)
    assert pair_error.max() < 2.0 ** -22 and single_error.max() > 2.0 ** -14
    assert multiplier_pair(np.array([1.0, -1.0])) is None and multiplier_pair(np.array([1.0, 1e-9])) is None


def test_model_scales_follow_relu_pooling_and_views() -> None:
    """A ReLU, a max pool or a view of values on a grid stays on it; a view's input takes its output's scale;
    an op that rescales (a conv, an average) passes nothing on."""
    from compiler.ir import Graph, Node
    from compiler.model_scales import propagate

    g = Graph(inputs=["x"], outputs=["f"])
    g.nodes = [Node("r", "Relu", ["x"], ["r"]), Node("m", "MaxPool", ["r"], ["m"]),
               Node("a", "GlobalAveragePool", ["m"], ["a"]), Node("f", "Flatten", ["a"], ["f"]),
               Node("c", "Conv", ["m", "w"], ["c"])]
    g.consts["w"] = np.zeros((1, 1, 1, 1), np.float32)
    g.quant_scales = {"x": 0.5, "f": 0.25}
    assert propagate(g) == 3
    assert g.quant_scales == {"x": 0.5, "r": 0.5, "m": 0.5, "a": 0.25, "f": 0.25}
