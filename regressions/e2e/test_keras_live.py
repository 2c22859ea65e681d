"""The Keras frontend against Keras itself (the ``frontends`` extra: Keras 3 with JAX; ``make regress`` installs
it from level nightly). ``make test`` checks the committed fixtures with h5py alone; here Keras runs live:

- it loads each committed fixture and computes the output stored beside it (the fixtures are Keras's own);
- models built now (``regressions.lib.zoo.keras_models``), saved by this Keras, convert to an IR graph that
  computes what this Keras computes.
"""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from compiler.float_exec import run_float
from compiler.frontend import keras_h5
from regressions.lib.zoo import keras_models

os.environ.setdefault("KERAS_BACKEND", "jax")  # (the extra's backend; TensorFlow is not needed)
keras = pytest.importorskip("keras", reason="needs the frontends extra (pip install -e '.[frontends]')")
FIXTURES = Path(__file__).parents[2] / "tests" / "compiler" / "fixtures" / "keras"


def _nchw(x: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(x.transpose(0, 3, 1, 2))


@pytest.mark.parametrize("name", sorted(keras_models.MODELS))
def test_committed_fixture_is_what_keras_computes(name: str) -> None:
    data = np.load(FIXTURES / f"{name}.npz")
    model = keras.saving.load_model(FIXTURES / f"{name}.h5", compile=False)
    np.testing.assert_allclose(model.predict(data["x"], verbose=0), data["y"], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name", sorted(keras_models.MODELS))
def test_a_model_saved_by_this_keras_converts(name: str, tmp_path: Path) -> None:
    model, x, y = keras_models.build(name, seed=3)
    model.save(tmp_path / f"{name}.h5")
    g = keras_h5.load(tmp_path / f"{name}.h5")
    got = run_float(g, {g.inputs[0]: _nchw(x)})[g.outputs[0]]
    np.testing.assert_allclose(got.reshape(y.shape), y, rtol=1e-5, atol=1e-6)
