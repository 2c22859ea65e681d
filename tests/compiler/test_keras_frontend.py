"""Keras ``.h5`` frontend (``compiler.frontend.keras_h5``), read with h5py alone.

The fixtures (``tests/compiler/fixtures/keras``: LeNet, a residual net, a MobileNet-style net) were written by
Keras 3 itself with the float output Keras computed for a seeded input (``regressions.lib.zoo.keras_models``
reproduces them). The IR must compute Keras's output; compiled int8 for nv_small and nv_full and run on the
golden model it must stay within int8 accuracy of it. Malformed files are one-line errors naming the layer."""
from __future__ import annotations

import json
from pathlib import Path

import h5py
import numpy as np
import pytest

from compiler.driver import compile_graph, random_inputs
from compiler.float_exec import run_float
from compiler.frontend import keras_h5, load_model
from runtime.executor import Network
from tests.compiler.helpers import one_line_error

FIXTURES = Path(__file__).parent / "fixtures" / "keras"
NAMES = ("lenet", "resnet", "mobilenet", "padnet")


def fixture(name: str):
    data = np.load(FIXTURES / f"{name}.npz")
    return FIXTURES / f"{name}.h5", data["x"], data["y"]


def nchw(x: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(x.transpose(0, 3, 1, 2)) if x.ndim == 4 else x


@pytest.mark.parametrize("name", NAMES)
def test_float_graph_computes_what_keras_computed(name: str) -> None:
    path, x, want = fixture(name)
    g = load_model(path)
    assert g.inputs and g.shapes[g.inputs[0]] == (1, *nchw(x).shape[1:])
    got = run_float(g, {g.inputs[0]: nchw(x)})[g.outputs[0]]
    np.testing.assert_allclose(got.reshape(want.shape), want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("precision,config,floor", [("int8", "nv_small", 0.99), ("int8", "nv_full", 0.99),
                                                    ("fp16", "nv_full", 0.9999)])
@pytest.mark.parametrize("name", NAMES)
def test_compiled_network_matches_keras(name: str, precision: str, config: str, floor: float) -> None:
    path, x, want = fixture(name)
    g = keras_h5.load(path)
    ld, lowered, _ = compile_graph(g, config, calib_inputs=random_inputs(g, 16, seed=1), precision=precision)
    cpu = {n.op for n in lowered.nodes if n.op.startswith("cpu.")}
    # only what NVDLA has no engine for: softmax, and tanh without nv_small's SDP LUT
    assert cpu <= {"cpu.Softmax", "cpu.Tanh"} and ("cpu.Tanh" not in cpu or config == "nv_small"), cpu
    net = Network(ld)
    got = net.run({net.inputs[0]: nchw(x)})[net.outputs[0]].reshape(want.shape)
    cos = float((got * want).sum() / np.linalg.norm(got) / np.linalg.norm(want))
    assert cos >= floor, cos


def test_flatten_order_and_same_padding_are_tensorflows() -> None:
    """LeNet's Dense reads a flattened 5x5x16 cube: its rows are permuted from (h, w, c) to the IR's (c, h, w);
    'same' pads the odd pixel at the end (a 5x5 kernel on 28: 2 and 2; stride 2 on 16: 0 before, 1 after)."""
    assert keras_h5.same_pads((28, 28), (5, 5), (1, 1)) == (2, 2, 2, 2)
    assert keras_h5.same_pads((16, 16), (3, 3), (2, 2)) == (0, 0, 1, 1)
    assert keras_h5.same_pads((16, 15), (1, 1), (2, 2)) == (0, 0, 0, 0)
    g = keras_h5.load(FIXTURES / "lenet.h5")
    gemm = next(n for n in g.nodes if n.op == "Gemm")
    assert g.shapes[gemm.inputs[1]] == (120, 400)


# ---- errors --------------------------------------------------------------------------------------------------
def _rewrite(tmp_path: Path, name: str, edit) -> Path:
    """A copy of a fixture with its model_config JSON edited."""
    src, _, _ = fixture(name)
    dst = tmp_path / f"{name}.h5"
    dst.write_bytes(src.read_bytes())
    with h5py.File(dst, "r+") as f:
        cfg = json.loads(f.attrs["model_config"])
        edit(cfg)
        f.attrs["model_config"] = json.dumps(cfg)
    return dst


def _layer(cfg: dict, cls: str) -> dict:
    return next(spec for spec in cfg["config"]["layers"] if spec["class_name"] == cls)


def err(path: Path) -> str:
    return one_line_error(load_model, path)


def test_unsupported_layer_names_the_layer(tmp_path: Path) -> None:
    def edit(cfg):
        _layer(cfg, "Dropout")["class_name"] = "UpSampling2D"
    msg = err(_rewrite(tmp_path, "lenet", edit))
    assert "layer 'dropout' (UpSampling2D): unsupported Keras layer" in msg


def test_channels_first_and_unknown_activation_are_refused(tmp_path: Path) -> None:
    def first(cfg):
        _layer(cfg, "Conv2D")["config"]["data_format"] = "channels_first"
    assert "data_format 'channels_first' is not supported" in err(_rewrite(tmp_path, "lenet", first))

    def act(cfg):
        _layer(cfg, "Conv2D")["config"]["activation"] = "gelu"
    assert "unsupported activation 'gelu'" in err(_rewrite(tmp_path, "lenet", act))


def test_weights_only_and_non_hdf5_files(tmp_path: Path) -> None:
    w = tmp_path / "weights.h5"
    with h5py.File(w, "w") as f:
        f.create_dataset("conv/kernel", data=np.zeros((3, 3, 1, 2), np.float32))
    assert err(w) == f"{w}: no model_config: a weights-only file (save the whole model, model.save)"
    junk = tmp_path / "junk.h5"
    junk.write_bytes(b"not hdf5 at all")
    assert err(junk).startswith(f"{junk}: not a readable HDF5 file")
    cut = tmp_path / "cut.h5"
    cut.write_bytes((FIXTURES / "resnet.h5").read_bytes()[:5000])
    assert err(cut).startswith(f"{cut}: ")


def test_missing_and_non_finite_weights_name_the_layer(tmp_path: Path) -> None:
    src, _, _ = fixture("lenet")
    bad = tmp_path / "nan.h5"
    bad.write_bytes(src.read_bytes())
    with h5py.File(bad, "r+") as f:
        group = f["model_weights/dense"]
        names = [n.decode() if isinstance(n, bytes) else str(n) for n in group.attrs["weight_names"]]
        name = next(n for n in names if n.endswith("bias"))
        data = np.array(group[name])
        data[3] = np.nan
        group[name][...] = data
    assert "layer 'dense' (Dense): weight" in err(bad) and "NaN" in err(bad)
    with h5py.File(bad, "r+") as f:
        del f["model_weights/dense"].attrs["weight_names"]
    assert "layer 'dense' (Dense): the file holds no 'kernel' weight" in err(bad)


def test_zero_padding_folds_into_its_reader_or_is_refused(tmp_path: Path) -> None:
    """padnet's ZeroPadding2D layers become their readers' padding (no CPU op); a max pool over zero padding of
    possibly negative values, or any other reader, is refused (the IR has no pad op)."""
    g = keras_h5.load(FIXTURES / "padnet.h5")
    assert "ZeroPadding2D" not in {n.op for n in g.nodes}
    conv = next(n for n in g.nodes if n.op == "Conv")
    assert conv.attrs["pads"] == (3, 3, 3, 3)
    avg = next(n for n in g.nodes if n.op == "AveragePool")
    assert avg.attrs["divisor_pads"] == (1, 1, 1, 1)  # the padded zeros count, as in Keras

    def linear(cfg):
        spec = _layer(cfg, "ReLU")  # the ReLU before the max pool's padding
        spec["class_name"], spec["config"] = "Activation", {"name": spec["name"], "activation": "linear"}
    assert "max pooling over a ZeroPadding2D of values that may be negative" in err(_rewrite(tmp_path, "padnet",
                                                                                              linear))

    def flatten(cfg):
        spec = _layer(cfg, "DepthwiseConv2D")
        spec["class_name"], spec["config"] = "Flatten", {"name": spec["name"]}
    assert "reads a ZeroPadding2D output: only convolutions and pooling" in err(_rewrite(tmp_path, "padnet",
                                                                                         flatten))
