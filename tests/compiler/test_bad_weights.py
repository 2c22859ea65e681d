"""NaN/Inf weights are refused where they are read, with one line naming the tensor (an ONNX initializer or
Constant, a Caffe layer's blob), before numpy warnings and a misleading quantization error about the bias."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from compiler.errors import CompileError
from compiler.frontend import load_model
from compiler.frontend.weights import non_finite
from compiler.proto import caffe_pb2 as pb

ROOT = Path(__file__).resolve().parents[2]
BAD = {"nan": np.nan, "inf": np.inf, "-inf": -np.inf}


def conv_model(path: Path, weight: np.ndarray, bias: np.ndarray, as_constant: bool = False) -> Path:
    inits = [numpy_helper.from_array(bias, "conv1.bias")]
    nodes = [helper.make_node("Conv", ["x", "conv1.weight", "conv1.bias"], ["y"], kernel_shape=[3, 3], name="conv1")]
    if as_constant:
        nodes.insert(0, helper.make_node("Constant", [], ["conv1.weight"], name="wconst",
                                         value=numpy_helper.from_array(weight)))
    else:
        inits.append(numpy_helper.from_array(weight, "conv1.weight"))
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 6, 6])], inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)
    return path


def dla(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "app.cli", *args], capture_output=True, text=True, cwd=ROOT,
                          timeout=300)


@pytest.mark.parametrize("kind", sorted(BAD))
def test_onnx_initializer_with_nan_or_inf_is_one_line_naming_it(tmp_path, kind):
    w = np.ones((4, 3, 3, 3), np.float32)
    w[1, 2, 0, 1] = BAD[kind]
    model = conv_model(tmp_path / "m.onnx", w, np.zeros(4, np.float32))
    out = tmp_path / "m.dla"
    p = dla("compile", str(model), "--config", "nv_small", "--calib-random", "2", "-o", str(out))
    assert p.returncode == 2 and p.stdout == ""
    assert p.stderr == (f"dla: {model}: initializer 'conv1.weight' holds 1 NaN/Inf value (first {BAD[kind]} at "
                        "index [1, 2, 0, 1]); weights must be finite float32 numbers\n")
    assert not out.exists()


def test_onnx_bias_and_constant_node_are_checked_too(tmp_path):
    bias = np.array([0, np.nan, np.nan, 0], np.float32)
    with pytest.raises(CompileError, match=r"initializer 'conv1.bias' holds 2 NaN/Inf values \(first nan at index \[1\]\)"):
        load_model(conv_model(tmp_path / "b.onnx", np.ones((4, 3, 3, 3), np.float32), bias))
    w = np.full((4, 3, 3, 3), np.inf, np.float32)
    with pytest.raises(CompileError, match=r"layer 'wconst' \(Constant\): constant 'conv1.weight' holds 108 NaN/Inf"):
        load_model(conv_model(tmp_path / "c.onnx", w, np.zeros(4, np.float32), as_constant=True))


def test_float64_beyond_float32_is_inf_as_a_weight():
    assert non_finite(np.array([1.0, 1e300])) == ("holds 1 NaN/Inf value (first 1e+300 at index [1]); weights must "
                                                  "be finite float32 numbers")
    assert non_finite(np.array([1.0, -3.0e38], np.float64)) is None
    assert non_finite(np.array([1, 2], np.int64)) is None and non_finite(np.float32(np.nan)) is not None


CAFFE = """name: "small"
input: "data"
input_shape { dim: 1 dim: 3 dim: 8 dim: 8 }
layer { name: "conv1" type: "Convolution" bottom: "data" top: "conv1"
  convolution_param { num_output: 4 kernel_size: 3 } }
"""


def blob(a: np.ndarray) -> pb.BlobProto:
    b = pb.BlobProto()
    b.shape.dim.extend(a.shape)
    b.data.extend(np.asarray(a, np.float32).ravel().tolist())
    return b


@pytest.mark.parametrize("which, what", [(0, "weights"), (1, "bias")])
def test_caffe_blob_with_nan_is_one_line_naming_layer_and_blob(tmp_path, which, what):
    blobs = [np.ones((4, 3, 3, 3)), np.zeros(4)]
    blobs[which].reshape(-1)[2] = np.nan
    net = pb.NetParameter()
    net.layer.add(name="conv1", type="Convolution").blobs.extend(blob(b) for b in blobs)
    proto, weights = tmp_path / "m.prototxt", tmp_path / "m.caffemodel"
    proto.write_text(CAFFE)
    weights.write_bytes(net.SerializeToString())
    out = tmp_path / "m.dla"
    p = dla("compile", str(proto), "--weights", str(weights), "--config", "nv_small", "-o", str(out))
    assert p.returncode == 2 and p.stdout == "" and not out.exists()
    assert p.stderr.startswith(f"dla: {proto}: layer 'conv1' (Convolution): blob {which} ({what}) in {weights} "
                               "holds 1 NaN/Inf value (first nan at index [2]);"), p.stderr
    assert len(p.stderr.splitlines()) == 1 and "Warning" not in p.stderr


def conv_bn_model(path: Path, gamma: np.ndarray, var: np.ndarray) -> Path:
    inits = [numpy_helper.from_array(np.ones((4, 3, 3, 3), np.float32), "w"), numpy_helper.from_array(gamma, "g"),
             numpy_helper.from_array(np.zeros(4, np.float32), "b"), numpy_helper.from_array(np.zeros(4, np.float32), "m"),
             numpy_helper.from_array(var, "v")]
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], kernel_shape=[3, 3], name="conv1"),
             helper.make_node("BatchNormalization", ["c", "g", "b", "m", "v"], ["y"], name="bn1")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 6, 6])], inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)
    return path


def test_negative_variance_is_named_not_a_bias_overflow(tmp_path):
    """sqrt of a negative variance was a NaN that surfaced as 'bias does not fit a 16-bit operand'."""
    model = conv_bn_model(tmp_path / "bn.onnx", np.ones(4, np.float32), np.array([1, -2, 1, 1], np.float32))
    p = dla("compile", str(model), "--config", "nv_small", "--calib-random", "2", "-o", str(tmp_path / "bn.dla"))
    assert p.returncode == 2 and "Warning" not in p.stderr
    assert p.stderr == (f"dla: {model}: layer 'bn1' (BatchNormalization): var 'v' is -2 at channel 1: var + epsilon "
                        "(1e-05) must be > 0 (a variance is never negative)\n")


def test_caffe_negative_variance_is_named(tmp_path):
    net = pb.NetParameter()
    net.layer.add(name="bn").blobs.extend([blob(np.zeros(2)), blob(np.array([1.0, -3.0])), blob(np.array([1.0]))])
    proto, weights = tmp_path / "bn.prototxt", tmp_path / "bn.caffemodel"
    proto.write_text('input: "x" input_shape { dim: 1 dim: 2 dim: 3 dim: 3 }\n'
                     'layer { name: "bn" type: "BatchNorm" bottom: "x" top: "y" }\n')
    weights.write_bytes(net.SerializeToString())
    with pytest.raises(CompileError, match=r"layer 'bn' \(BatchNorm\): blob 1 \(variance\) is -3 at channel 1"):
        load_model(proto, weights)


def test_bn_scale_that_overflows_float32_is_named(tmp_path):
    """Finite in the file, infinite once folded: 3e38 / sqrt(1e-5) is beyond float32's max."""
    model = conv_bn_model(tmp_path / "big.onnx", np.full(4, 3e38, np.float32), np.zeros(4, np.float32))
    p = dla("compile", str(model), "--config", "nv_small", "--calib-random", "2", "-o", str(tmp_path / "big.dla"))
    assert p.returncode == 2 and p.stderr == (
        f"dla: {model}: layer 'bn1' (BatchNormalization): folded weight 'bn1_scale' holds 4 NaN/Inf values (first "
        "inf at index [0]); weights must be finite float32 numbers\n")


def test_folding_bn_into_a_conv_that_overflows_float32_is_named(tmp_path):
    """Conv weights 1e30 times a BN scale of 1e15: each finite, their product is not."""
    model = conv_bn_model(tmp_path / "big.onnx", np.full(4, 1e15, np.float32), np.ones(4, np.float32))
    m = onnx.load(model)
    m.graph.initializer[0].CopyFrom(numpy_helper.from_array(np.full((4, 3, 3, 3), 1e30, np.float32), "w"))
    onnx.save(m, model)
    p = dla("compile", str(model), "--config", "nv_small", "--calib-random", "2", "-o", str(tmp_path / "big.dla"))
    assert p.returncode == 2 and p.stderr == (f"dla: {model}: layer 'conv1' (Conv): folding 'bn1' into its weights "
                                              "overflows float32 (|value| up to 1e+45)\n")


def test_quantize_names_non_finite_parameters_whatever_made_them():
    """The backstop behind the frontends and folding: a layer's NaN weights or affine terms are named."""
    from compiler.ir import Node
    from compiler.passes.quantize import _non_finite_parameters
    from compiler.postops import Affine

    conv = Node("c", "dla.conv", ["x"], ["y"], {"weight": np.ones((2, 1, 1, 1)), "post": [
        Affine(scale=np.ones(2), bias=np.array([0.0, np.nan]))]})
    assert _non_finite_parameters(conv) == "NaN or Inf in its bias of post-op 0 after folding (float32 overflow?)"
    conv.attrs["post"][0] = Affine(scale=np.ones(2), bias=np.zeros(2))
    assert _non_finite_parameters(conv) is None
