"""PNNX frontend (``compiler.frontend.pnnx``): the zoo's LeNet, residual net and MobileNet-style net written as
pnnx does (``regressions.lib.zoo.to_pnnx``: nn.Conv2d, nn.BatchNorm2d, nn.ReLU6, pnnx.Expression, nn.Linear...,
weights in the zip .bin) must compute what onnxruntime computes on the same ONNX network, and compiled int8 and fp16
stay within int8 and fp16 accuracy of it; the parameter syntax follows pnnx's reader; malformed files are one-line errors."""
from __future__ import annotations

import zipfile
from pathlib import Path

import numpy as np
import pytest

from compiler.driver import compile_graph, random_inputs
from compiler.float_exec import run_float
from compiler.frontend import load_model, pnnx
from regressions.lib.float_reference import session
from regressions.lib.zoo.models import lenet, mobilenet, resnet
from regressions.lib.zoo.to_pnnx import to_pnnx
from runtime.executor import Network
from tests.compiler.helpers import one_line_error

pytest.importorskip("onnxruntime")
NETS = {"lenet": lenet, "resnet": resnet, "mobilenet": mobilenet}


def written(tmp_path: Path, name: str):
    m = NETS[name](0)
    param = tmp_path / f"{name}.pnnx.param"
    to_pnnx(m, param, tmp_path / f"{name}.pnnx.bin")
    shape = [d.dim_value for d in m.graph.input[0].type.tensor_type.shape.dim]
    return m, param, shape


def onnxruntime(m, x: np.ndarray) -> np.ndarray:
    sess = session(m)
    return np.concatenate([sess.run(None, {m.graph.input[0].name: x[i:i + 1]})[0] for i in range(len(x))])


@pytest.mark.parametrize("name", sorted(NETS))
def test_float_graph_computes_what_onnxruntime_computes(tmp_path: Path, name: str) -> None:
    m, param, shape = written(tmp_path, name)
    g = load_model(param)
    x = np.random.default_rng(1).standard_normal((3, *shape[1:])).astype(np.float32)
    np.testing.assert_allclose(run_float(g, {g.inputs[0]: x})[g.outputs[0]], onnxruntime(m, x), rtol=1e-5,
                               atol=1e-6)


@pytest.mark.parametrize("precision,config,floor", [("int8", "nv_small", 0.99), ("int8", "nv_full", 0.99),
                                                    ("fp16", "nv_full", 0.9999)])
@pytest.mark.parametrize("name", sorted(NETS))
def test_compiled_network_matches_onnxruntime(tmp_path: Path, name: str, precision: str, config: str,
                                              floor: float) -> None:
    m, param, shape = written(tmp_path, name)
    g = pnnx.load(param)
    ld, lowered, _ = compile_graph(g, config, calib_inputs=random_inputs(g, 16, seed=1), precision=precision)
    assert {n.op for n in lowered.nodes if n.op.startswith("cpu.")} <= {"cpu.Softmax"}
    net = Network(ld)
    x = np.random.default_rng(3).standard_normal((4, *shape[1:])).astype(np.float32)
    got = net.run({net.inputs[0]: x})[net.outputs[0]].reshape(4, -1)
    want = onnxruntime(m, x).reshape(4, -1)
    cos = float((got * want).sum() / np.linalg.norm(got) / np.linalg.norm(want))
    assert cos >= floor, cos


def test_parameter_values_follow_pnnx() -> None:
    assert pnnx.parse_value("None") is None and pnnx.parse_value("()") is None
    assert pnnx.parse_value("True") is True and pnnx.parse_value("False") is False
    assert pnnx.parse_value("(3,3)") == (3, 3) and pnnx.parse_value("[1,-1]") == (1, -1)
    assert pnnx.parse_value("1.000000e-05") == pytest.approx(1e-5) and pnnx.parse_value("-7") == -7
    assert pnnx.parse_value("zeros") == "zeros" and pnnx.parse_value("add(@0,@1)") == "add(@0,@1)"


def test_ceil_mode_and_same_padding_and_view(tmp_path: Path) -> None:
    """PyTorch's ceil-mode average (its divisor clips at the padded border), padding='same', Tensor.view."""
    rng = np.random.default_rng(0)
    w = rng.standard_normal((4, 2, 3, 3)).astype(np.float32)
    lines = [
        "pnnx.Input in 0 1 x #x=(1,2,7,7)f32",
        "nn.Conv2d c 1 1 x a bias=False dilation=(1,1) groups=1 in_channels=2 kernel_size=(3,3) out_channels=4 "
        "padding=same padding_mode=zeros stride=(1,1) @weight=(4,2,3,3)f32",
        "nn.AvgPool2d p 1 1 a b ceil_mode=True count_include_pad=True divisor_override=None kernel_size=(3,3) "
        "padding=(1,1) stride=(2,2)",
        "Tensor.view v 1 1 b y shape=(1,-1)",
        "pnnx.Output out 1 0 y",
    ]
    param = tmp_path / "m.pnnx.param"
    param.write_text("7767517\n5 4\n" + "\n".join(lines) + "\n")
    with zipfile.ZipFile(tmp_path / "m.pnnx.bin", "w") as z:
        z.writestr("c.weight", w.tobytes())
    g = pnnx.load(param)
    x = rng.standard_normal((1, 2, 7, 7))
    out = run_float(g, {"x": x})["y"]
    conv = run_float(g, {"x": x}, keep=True)["a"]
    assert conv.shape == (1, 4, 7, 7) and out.shape == (1, 4 * 4 * 4)
    # PyTorch: window [2i-1, 2i+2) clipped to [-1, 8): divisor counts the padding, not the overhang
    ref = np.zeros((1, 4, 4, 4))
    for i in range(4):
        for j in range(4):
            r0, c0 = 2 * i - 1, 2 * j - 1
            r1, c1 = min(r0 + 3, 8), min(c0 + 3, 8)
            win = conv[:, :, max(r0, 0):min(r1, 7), max(c0, 0):min(c1, 7)]
            ref[:, :, i, j] = win.sum(axis=(2, 3)) / ((r1 - r0) * (c1 - c0))
    np.testing.assert_allclose(out.reshape(1, 4, 4, 4), ref, rtol=1e-12)


def err(path: Path, weights: Path | None = None) -> str:
    return one_line_error(pnnx.load, path, weights)


def test_malformed_files_are_one_line_errors(tmp_path: Path) -> None:
    _, param, _ = written(tmp_path, "resnet")
    text = param.read_text()
    bad = tmp_path / "bad.pnnx.param"
    (tmp_path / "bad.pnnx.bin").write_bytes((tmp_path / "resnet.pnnx.bin").read_bytes())
    bad.write_text(text.replace("nn.ReLU ", "nn.GELU ", 1))
    assert "layer 'relu1' (nn.GELU): unsupported PNNX operator" in err(bad)
    bad.write_text(text.replace("@weight=(16,3,3,3)f32", "@weight=(16,3,3,4)f32", 1))
    assert "attribute @weight: 1728 bytes" in err(bad) and "2304 expected" in err(bad)
    bad.write_text(text.replace("add(@0,@1)", "sub(@0,@1)", 1))
    assert "expression 'sub(@0,@1)' is not supported" in err(bad)
    bad.write_text("7767517\n1 1\nInput data 0 1 data 0=227 1=227 2=3\n")  # an ncnn param file
    assert "(Input): unsupported PNNX operator" in err(bad)
    bad.write_text("12345\n")
    assert err(bad) == f"{bad}: not a PNNX param file (first line must be 7767517)"
    bad.write_text(text)
    (tmp_path / "bad.pnnx.bin").write_bytes(b"PK\x03\x04 truncated")
    assert err(bad).startswith(f"{tmp_path / 'bad.pnnx.bin'}: not a PNNX weight archive")
    (tmp_path / "bad.pnnx.bin").unlink()
    assert "not a PNNX weight archive" in err(bad)
    pnnx.load(bad, tmp_path / "resnet.pnnx.bin")  # --weights names the .bin elsewhere
