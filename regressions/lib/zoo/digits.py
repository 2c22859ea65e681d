"""A small CNN trained at test time on scikit-learn's bundled 8x8 digits, exported to ONNX.

Random networks only show that int8 tracks float; a trained one shows the compiled network still *classifies*:
its float accuracy is the bar the int8 result is held to. Training is plain numpy (im2col convolutions, manual
backprop, Adam) so it needs no framework and no download, and it is seeded, so every run gives the same model.

Network (opset 13, input "data" 1x1x8x8 in [0, 1]): conv3x3x16 pad 1 + relu -> maxpool 2 -> conv3x3x32 pad 1 +
relu -> flatten -> Gemm 10 (logits).
"""
from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import onnx
from numpy.lib.stride_tricks import sliding_window_view
from onnx import TensorProto, helper, numpy_helper

EPOCHS = 30
BATCH = 32
LEARNING_RATE = 3e-3


@dataclass
class DigitsModel:
    model: onnx.ModelProto
    x_test: np.ndarray  # float32 (N, 1, 8, 8) in [0, 1]
    y_test: np.ndarray  # int64 (N,)
    float_accuracy: float  # of the exported ONNX model on the test split (reference evaluator)
    train_seconds: float  # wall clock
    train_cpu_seconds: float  # process CPU time: what the budget is about, robust to a busy machine


# ---- layers (NHWC inside, so im2col rows are pixels and columns are (C, kh, kw) like ONNX weights) -----
def _im2col(x: np.ndarray) -> np.ndarray:
    """(N, H, W, C) -> (N*H*W, C*3*3) patches of the 1-padded input, columns in ONNX weight order."""
    n, h, w, c = x.shape
    xp = np.pad(x, ((0, 0), (1, 1), (1, 1), (0, 0)))
    return sliding_window_view(xp, (3, 3), axis=(1, 2)).reshape(n * h * w, c * 9)


def _col2im(cols: np.ndarray, shape: tuple[int, int, int, int]) -> np.ndarray:
    """Adjoint of ``_im2col``: scatter-add patch gradients back onto the (N, H, W, C) input."""
    n, h, w, c = shape
    patches = cols.reshape(n, h, w, c, 3, 3)
    xp = np.zeros((n, h + 2, w + 2, c))
    for i in range(3):  # nine shifted, fully vectorized adds
        for j in range(3):
            xp[:, i : i + h, j : j + w, :] += patches[..., i, j]
    return xp[:, 1:-1, 1:-1, :]


def _forward(p: dict[str, np.ndarray], x: np.ndarray) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """Logits and the intermediates backprop needs; x is (N, 8, 8, 1)."""
    n = x.shape[0]
    cols1 = _im2col(x)
    a1 = np.maximum(cols1 @ p["W1"].reshape(16, -1).T + p["b1"], 0.0).reshape(n, 8, 8, 16)
    pooled = a1.reshape(n, 4, 2, 4, 2, 16).max(axis=(2, 4))
    cols2 = _im2col(pooled)
    a2 = np.maximum(cols2 @ p["W2"].reshape(32, -1).T + p["b2"], 0.0).reshape(n, 4, 4, 32)
    flat = a2.transpose(0, 3, 1, 2).reshape(n, -1)  # ONNX Flatten of NCHW
    logits = flat @ p["W3"].T + p["b3"]
    return logits, dict(cols1=cols1, a1=a1, pooled=pooled, cols2=cols2, a2=a2, flat=flat)


def _gradients(p: dict[str, np.ndarray], x: np.ndarray, y: np.ndarray) -> dict[str, np.ndarray]:
    """Softmax cross-entropy gradients of every parameter, by hand."""
    n = x.shape[0]
    logits, c = _forward(p, x)
    prob = np.exp(logits - logits.max(axis=1, keepdims=True))
    prob /= prob.sum(axis=1, keepdims=True)
    d_logits = prob
    d_logits[np.arange(n), y] -= 1.0
    d_logits /= n
    g = {"W3": d_logits.T @ c["flat"], "b3": d_logits.sum(axis=0)}
    d_a2 = (d_logits @ p["W3"]).reshape(n, 32, 4, 4).transpose(0, 2, 3, 1) * (c["a2"] > 0)
    d2 = d_a2.reshape(-1, 32)
    g["W2"] = (d2.T @ c["cols2"]).reshape(p["W2"].shape)
    g["b2"] = d2.sum(axis=0)
    d_pooled = _col2im(d2 @ p["W2"].reshape(32, -1), c["pooled"].shape)
    a1 = c["a1"].reshape(n, 4, 2, 4, 2, 16)
    winner = a1 == c["pooled"][:, :, None, :, None, :]
    d_a1 = (winner * d_pooled[:, :, None, :, None, :]).reshape(n, 8, 8, 16) * (c["a1"] > 0)
    d1 = d_a1.reshape(-1, 16)
    g["W1"] = (d1.T @ c["cols1"]).reshape(p["W1"].shape)
    g["b1"] = d1.sum(axis=0)
    return g


def _export(p: dict[str, np.ndarray]) -> onnx.ModelProto:
    inits = [numpy_helper.from_array(v.astype(np.float32), k) for k, v in p.items()]
    nodes = [
        helper.make_node("Conv", ["data", "W1", "b1"], ["conv1"], name="conv1", kernel_shape=[3, 3], pads=[1] * 4),
        helper.make_node("Relu", ["conv1"], ["relu1"], name="relu1"),
        helper.make_node("MaxPool", ["relu1"], ["pool1"], name="pool1", kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Conv", ["pool1", "W2", "b2"], ["conv2"], name="conv2", kernel_shape=[3, 3], pads=[1] * 4),
        helper.make_node("Relu", ["conv2"], ["relu2"], name="relu2"),
        helper.make_node("Flatten", ["relu2"], ["flatten"], name="flatten", axis=1),
        helper.make_node("Gemm", ["flatten", "W3", "b3"], ["logits"], name="fc", transB=1),
    ]
    graph = helper.make_graph(nodes, "digits", [helper.make_tensor_value_info("data", TensorProto.FLOAT, [1, 1, 8, 8])],
                              [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, 10])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], producer_name="dla-coverify zoo")
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def train_digits(seed: int = 0) -> DigitsModel:
    """Train on a seeded 75/25 split of ``load_digits`` and return the ONNX model with its test split."""
    from onnx.reference import ReferenceEvaluator
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    start, cpu_start = time.perf_counter(), time.process_time()
    digits = load_digits()
    x = (digits.images / 16.0).astype(np.float64)
    x_tr, x_te, y_tr, y_te = train_test_split(x, digits.target, test_size=0.25, random_state=seed,
                                              stratify=digits.target)
    rng = np.random.default_rng(seed)

    def he(*shape: int) -> np.ndarray:
        return rng.standard_normal(shape) * np.sqrt(2.0 / np.prod(shape[1:]))

    p = {"W1": he(16, 1, 3, 3), "b1": np.zeros(16), "W2": he(32, 16, 3, 3), "b2": np.zeros(32),
         "W3": he(10, 512) * 0.5, "b3": np.zeros(10)}
    m = {k: np.zeros_like(v) for k, v in p.items()}
    v2 = {k: np.zeros_like(v) for k, v in p.items()}
    xs = x_tr[..., None]  # NHWC
    step = 0
    for _ in range(EPOCHS):
        order = rng.permutation(len(xs))
        for i in range(0, len(xs), BATCH):
            idx = order[i : i + BATCH]
            g = _gradients(p, xs[idx], y_tr[idx])
            step += 1
            for k in p:  # Adam
                m[k] = 0.9 * m[k] + 0.1 * g[k]
                v2[k] = 0.999 * v2[k] + 0.001 * g[k] ** 2
                p[k] -= LEARNING_RATE * (m[k] / (1 - 0.9**step)) / (np.sqrt(v2[k] / (1 - 0.999**step)) + 1e-8)
    model = _export(p)
    x_test = x_te[:, None].astype(np.float32)
    logits = ReferenceEvaluator(model).run(None, {"data": x_test})[0]
    accuracy = float((logits.argmax(axis=1) == y_te).mean())
    return DigitsModel(model, x_test, y_te.astype(np.int64), accuracy, time.perf_counter() - start,
                       time.process_time() - cpu_start)
