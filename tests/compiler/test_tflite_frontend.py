"""TFLite frontend (``compiler.frontend.tflite``).

The models (LeNet, a residual net, a MobileNet-style net; ``regressions.lib.zoo.tflite_models``) are written
with LiteRT's own flatbuffer schema, and LiteRT's interpreter computes the references: the float output for
the float IR and the compiled int8/fp16 networks, and the int8 output of the same model quantized by Google's
ai-edge-quantizer (per-channel int8 weights, symmetric int8 activations), which compiles with the model's own
scales and int8 weights and must match LiteRT's integer arithmetic within one output step. Malformed and
unsupported models are one-line errors naming the tensor and the operator.
"""
from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import numpy as np
import pytest

from compiler.driver import compile_graph, random_inputs
from compiler.float_exec import run_float
from compiler.frontend import load_model, tflite as tflite_frontend
from regressions.lib.zoo import tflite_models as tm
from runtime.executor import Network
from tests.compiler.helpers import one_line_error

NAMES = tuple(tm.MODELS)
SAMPLES = 16


@lru_cache(maxsize=None)
def model(name: str, kind: str = "float") -> bytes:
    m = tm.MODELS[name](0)
    return m if kind == "float" else tm.quantize(m, symmetric=kind == "int8")


def saved(tmp_path: Path, name: str, kind: str = "float") -> Path:
    p = tmp_path / f"{name}_{kind}.tflite"
    p.write_bytes(model(name, kind))
    return p


def inputs(name: str) -> np.ndarray:
    """NHWC float inputs."""
    return tm.samples(tm.input_shape(model(name)), SAMPLES, seed=5)


def nchw(x: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(x.transpose(0, 3, 1, 2))


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    a, b = a.ravel().astype(np.float64), b.ravel().astype(np.float64)
    return float(a @ b / np.linalg.norm(a) / np.linalg.norm(b))


@pytest.mark.parametrize("name", NAMES)
def test_float_graph_computes_what_litert_computes(name: str, tmp_path: Path) -> None:
    g = load_model(saved(tmp_path, name))
    xs = inputs(name)
    want = tm.run(model(name), xs)
    got = run_float(g, {g.inputs[0]: nchw(xs)})[g.outputs[0]]
    np.testing.assert_allclose(got.reshape(want.shape), want, rtol=1e-4, atol=1e-5 * float(np.abs(want).max()))


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("precision,config,floor", [("int8", "nv_small", 0.99), ("int8", "nv_full", 0.99),
                                                    ("fp16", "nv_full", 0.9999)])
def test_compiled_network_matches_litert_float(name: str, precision: str, config: str, floor: float,
                                               tmp_path: Path) -> None:
    g = load_model(saved(tmp_path, name))
    ld, lowered, _ = compile_graph(g, config, precision=precision, calib_inputs=random_inputs(g, 16, seed=1),
                                   log=lambda m: None)
    assert not [n.op for n in lowered.nodes if n.op.startswith("cpu.") and n.op != "cpu.Concat"]
    net = Network(ld)
    xs = inputs(name)
    got = net.run({net.inputs[0]: nchw(xs)})[net.outputs[0]]
    want = tm.run(model(name), xs)
    assert cosine(got, want) >= floor


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("config", ["nv_small", "nv_full"])
def test_int8_model_matches_litert_integer_arithmetic(name: str, config: str, tmp_path: Path) -> None:
    """ai-edge-quantizer's int8 model: the model's activation scales (no calibration of them) and its int8
    weights exactly; the DLA's int8 logits equal LiteRT's within one step on >= 99% of the values (measured:
    all of them, most exactly)."""
    path = saved(tmp_path, name, "int8")
    logs: list[str] = []
    g = tflite_frontend.load(path)
    ld, lowered, ctx = compile_graph(g, config, log=logs.append)
    assert any("scales from the model" in line for line in logs), logs
    # every conv/FC runs the model's own int8 weights (in the IR's layout: compared as multisets of values);
    # the mean sums on CMAC with weights 1
    import tflite

    m = tflite.Model.GetRootAs(model(name, "int8"), 0)
    sg = m.Subgraphs(0)
    kernels = [np.sort(m.Buffers(t.Buffer()).DataAsNumpy().view(np.int8)) for t in map(sg.Tensors, range(sg.TensorsLength()))
               if t.Type() == 9 and t.Name().decode().endswith("/kernel")]
    convs = [n.attrs["conv"].weights for n in lowered.nodes if n.op == "dla.conv" and "gap" not in n.name]
    assert len(convs) == len(kernels)
    for w in convs:
        nonzero = np.sort(w[w != 0])
        assert any(np.array_equal(nonzero, k[k != 0]) for k in kernels)
    s_in, s_out = tm.io_scales(model(name, "int8"))
    xs = inputs(name)
    want = tm.run(model(name, "int8"), xs).astype(np.int64)
    net = Network(ld)
    x_grid = np.clip(np.rint(xs / s_in), -128, 127) * s_in  # the int8 input LiteRT gets
    got = net.run({net.inputs[0]: nchw(x_grid.astype(np.float32))}, raw=True)[net.outputs[0]].astype(np.int64)
    assert ctx.scales[net.outputs[0]] == pytest.approx(s_out, rel=1e-6)
    steps = np.abs(got.reshape(want.shape) - want)
    assert np.mean(steps <= 1) >= 0.99 and np.mean(steps == 0) >= 0.5, (np.mean(steps <= 1), steps.max())


# ---- errors ------------------------------------------------------------------------------------------------------
def err(path: Path) -> str:
    return one_line_error(load_model, path)


@pytest.mark.parametrize("name", NAMES)
def test_asymmetric_int8_calibrates_from_the_models_ranges(name: str, tmp_path: Path) -> None:
    """TFLite's converter quantizes activations asymmetrically (zero point -128 after a ReLU), which the DLA's
    symmetric int8 cannot keep: the ranges the model covers replace calibration (said in the log), weights stay
    the model's int8 values, and the network stays within int8 accuracy of the float model."""
    g = tflite_frontend.load(saved(tmp_path, name, "asymmetric"))
    assert g.range_hints and not g.quant_scales
    logs: list[str] = []
    ld, _, ctx = compile_graph(g, "nv_small", calib_inputs=random_inputs(g, 4, seed=1), log=logs.append)
    assert any("asymmetric int8 quantization" in line for line in logs), logs
    assert all(ctx.calibrated[t] == pytest.approx(v) for t, v in g.range_hints.items() if t in ctx.calibrated)
    net = Network(ld)
    xs = inputs(name)
    got = net.run({net.inputs[0]: nchw(xs)})[net.outputs[0]]
    assert cosine(got, tm.run(model(name), xs)) >= 0.99


def _written(tmp_path: Path, build) -> Path:
    m = tm.Writer(0)
    x = m.tensor("input", (1, 8, 8, 4))
    y = build(m, x)
    p = tmp_path / "net.tflite"
    p.write_bytes(m.finish([x], [y]))
    return p


def test_unsupported_operator_names_the_tensor_and_operator(tmp_path: Path) -> None:
    p = _written(tmp_path, lambda m, x: m.unary("EXP", m.conv(x, 4, 3, name="c"), "expo"))
    assert "'expo' (EXP): unsupported TFLite operator (supported: " in err(p)


def test_pad_folds_into_its_reader_or_is_refused(tmp_path: Path) -> None:
    """A zero PAD becomes the next conv's padding (as TensorFlow's MobileNet writes it); read by an ADD it is
    refused, as the DLA has no pad operation."""
    g = load_model(_written(tmp_path, lambda m, x: m.conv(m.pad(x, (1, 1, 2, 0)), 4, 3, padding=tm.VALID)))
    (conv,) = [n for n in g.nodes if n.op == "Conv"]
    assert conv.attrs["pads"] == (1, 1, 2, 0) and conv.inputs[0] == g.inputs[0]
    p = _written(tmp_path, lambda m, x: m.add(m.pad(x, (1, 1, 1, 1), name="p"), m.pad(x, (1, 1, 1, 1)), name="sum"))
    assert "'sum' (ADD): reads a PAD output" in err(p)


def test_per_channel_constant_operands_become_an_affine(tmp_path: Path) -> None:
    """MUL/ADD by a per-channel constant (a BatchNorm TensorFlow did not fold) is a ChannelAffine."""
    def build(m, x):
        scale = m.const("s", np.array([1.0, 2.0, -0.5, 3.0], np.float32))
        shift = m.const("b", np.array([0.1, 0.0, 0.2, -1.0], np.float32))
        y = m.op(m.fb.BuiltinOperator.MUL, [x, scale], m.shapes[x], "mul",
                 (m.fb.BuiltinOptions.MulOptions, m.fb.MulOptionsT()))
        return m.add(y, shift, tm.RELU, name="bn")
    p = _written(tmp_path, build)
    g = load_model(p)
    assert [n.op for n in g.nodes] == ["ChannelAffine", "ChannelAffine", "Relu"]
    x = tm.samples((1, 8, 8, 4), 2, 1)
    got = run_float(g, {g.inputs[0]: nchw(x)})[g.outputs[0]]
    np.testing.assert_allclose(got, nchw(tm.run(p.read_bytes(), x)), rtol=1e-6, atol=1e-6)


def test_not_a_tflite_file_and_corrupt_files(tmp_path: Path) -> None:
    junk = tmp_path / "junk.tflite"
    junk.write_bytes(b"definitely not a flatbuffer")
    assert err(junk) == f"{junk}: not a TFLite flatbuffer (file identifier b'nite', expected b'TFL3')"
    cut = tmp_path / "cut.tflite"
    cut.write_bytes(model("resnet")[:3000])
    assert err(cut).startswith(f"{cut}: ")
    empty = tmp_path / "empty.tflite"
    empty.write_bytes(b"")
    assert "not a TFLite flatbuffer" in err(empty)


def test_cli_compiles_a_tflite_model(tmp_path: Path) -> None:
    from app.cli import main

    src = saved(tmp_path, "lenet", "int8")
    out = tmp_path / "lenet.dla"
    assert main(["compile", str(src), "--config", "nv_small", "-o", str(out)]) == 0
    from runtime.executor import load

    net = load(out)
    s_in, _ = tm.io_scales(model("lenet", "int8"))
    xs = np.clip(np.rint(inputs("lenet")[:2] / s_in), -127, 127) * s_in
    got = net.run({net.inputs[0]: nchw(xs.astype(np.float32))}, raw=True)[net.outputs[0]]
    assert np.abs(got.astype(np.int64).reshape(2, -1) - tm.run(model("lenet", "int8"), xs).reshape(2, -1)).max() <= 1
