"""Pre-quantized ONNX models (``compiler.frontend.onnx_quant``): onnxruntime's static quantizer writes a float
residual net (BatchNorm folded by its ``quant_pre_process``) in QDQ and in QOperator form, symmetric int8 with
per-channel weights. They compile with the model's own scales (QDQ: no calibration at all) and int8 weights,
the DLA rounds and saturates where the model does, and golden is compared with onnxruntime's own execution of
the quantized model: layer by layer within one output step, end to end within a few.
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
from regressions.lib.float_reference import session
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


def _steps(path: Path, config: str, logs: list[str] | None = None) -> tuple[np.ndarray, object]:
    """|golden - onnxruntime| in output steps over SAMPLES inputs, and the compile context."""
    model = onnx.load(path)
    ld, _, ctx = compile_graph(onnx_frontend.load(model), config, log=(logs or []).append)
    net = Network(ld)
    xs = np.random.default_rng(7).standard_normal((SAMPLES, 3, 32, 32)).astype(np.float32)
    got = net.run({net.inputs[0]: xs})[net.outputs[0]].reshape(SAMPLES, -1)
    sess = session(model)
    want = np.concatenate([sess.run(None, {"data": xs[i:i + 1]})[0].reshape(1, -1) for i in range(SAMPLES)])
    return np.abs(got - want) / ctx.scales[net.outputs[0]], ctx


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
    of the values (rounding: SDP's 16-bit multipliers against onnxruntime's float32 requantization)."""
    model = onnx.load(models[fmt])
    consts = {i.name for i in model.graph.initializer}
    names = [n.output[0] for n in model.graph.node if n.op_type == "DequantizeLinear" and n.input[0] not in consts]
    # up to the global average pool (whose output keeps PDP's headroom: a coarser grid than the model's)
    cuts = names[:next((i for i, t in enumerate(names) if "gap" in t or "fc" in t or "flatten" in t), len(names))]
    assert len(cuts) >= 5  # (QOperator: convs and adds; QDQ also every ReLU)
    within = {}
    for t in cuts:
        onnx.utils.extract_model(str(models[fmt]), str(tmp_path / "cut.onnx"), ["data"], [t])
        steps, _ = _steps(tmp_path / "cut.onnx", "nv_small")
        within[t] = float(np.mean(steps <= 1.0 + 1e-6))
    assert min(within.values()) >= 0.995, within


@pytest.mark.parametrize("config", ["nv_small", "nv_full"])
def test_whole_network_stays_close_to_onnxruntime(models, config: str) -> None:
    """End to end the steps add up (an FC reading 32 pooled values amplifies a one-step difference), but the
    logits stay within a few steps of onnxruntime's int8 ones and far closer than the float network."""
    steps, _ = _steps(models["QDQ"], config)
    assert np.median(steps) == 0 and np.mean(steps <= 1.0 + 1e-6) >= 0.85 and np.percentile(steps, 99) <= 20, \
        (np.mean(steps <= 1.0 + 1e-6), np.percentile(steps, [50, 99]))


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
