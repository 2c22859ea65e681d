"""A CNN trained at test time on scikit-learn's digits keeps its accuracy through int8 compilation: the
golden model's accuracy on the held-out set is within 1 point of the float network's."""
from __future__ import annotations

import numpy as np
import pytest

from compiler.driver import compile_graph
from compiler.frontend import onnx as onnx_frontend
from regressions.lib.float_reference import session
from runtime.executor import Network

digits = pytest.importorskip("regressions.lib.zoo.digits")


@pytest.mark.parametrize("config", ["nv_small", "nv_full"])
def test_digits_int8_accuracy_within_one_point(config: str) -> None:
    d = digits.train_digits(0)
    g = onnx_frontend.load(d.model)
    # Calibrate on training-like data: the first 64 held-out images are not used for scoring.
    calib = [{g.inputs[0]: d.x_test[i:i + 1]} for i in range(min(64, len(d.x_test)))]
    ld, _, _ = compile_graph(g, config, calib_inputs=calib)
    x, y = d.x_test[64:], d.y_test[64:]
    out = Network(ld).run({g.inputs[0]: x})
    pred = np.argmax(out[ld.outputs[0]].reshape(len(x), -1), axis=1)
    int8_acc = float(np.mean(pred == y))
    # The float network's accuracy on the same scored images, from onnxruntime.
    sess = session(d.model)
    ref = np.concatenate([sess.run(None, {g.inputs[0]: x[i:i + 1]})[0] for i in range(len(x))])
    float_acc = float(np.mean(np.argmax(ref.reshape(len(x), -1), axis=1) == y))
    print(f"digits on {config}: float {float_acc:.4f}, int8 golden {int8_acc:.4f} ({len(y)} images)")
    assert float_acc >= 0.9
    assert int8_acc >= float_acc - 0.01
