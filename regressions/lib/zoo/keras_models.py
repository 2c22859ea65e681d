"""Keras models for the ``.h5`` frontend's tests, and the script that writes them as fixtures.

``python -m regressions.lib.zoo.keras_models DIR`` (needs the ``frontends`` extra: Keras 3 with the JAX
backend) builds LeNet, a residual net and a MobileNet-style net with seeded weights and BatchNorm statistics,
saves each as ``DIR/<name>.h5`` with Keras's own ``model.save``, and writes ``DIR/<name>.npz`` holding a
seeded input batch (NHWC) and Keras's float output for it: the reference the frontend is checked against
without Keras installed (``tests/compiler/test_keras_frontend.py``). Running it again reproduces the files.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any, Callable

import numpy as np

SAMPLES = 4


def _keras() -> Any:
    os.environ.setdefault("KERAS_BACKEND", "jax")
    import keras

    keras.utils.set_random_seed(7)
    return keras


def lenet(keras: Any) -> Any:
    """LeNet-5 as Keras's examples write it: same-padded conv, max and average pooling, Dense stack, tanh,
    softmax, Dropout."""
    L = keras.layers
    inp = keras.Input((28, 28, 1))
    x = L.Conv2D(6, 5, padding="same", activation="relu")(inp)
    x = L.MaxPooling2D(2)(x)
    x = L.Conv2D(16, 5, activation="relu")(x)
    x = L.AveragePooling2D(2)(x)
    x = L.Flatten()(x)
    x = L.Dense(120, activation="relu")(x)
    x = L.Dropout(0.5)(x)
    x = L.Dense(84, activation="tanh")(x)
    return keras.Model(inp, L.Dense(10, activation="softmax")(x), name="lenet")


def resnet(keras: Any) -> Any:
    """Residual blocks (identity and strided 1x1 projection shortcuts, BN without conv bias, ReLU layers),
    a channel Concatenate with a same-padded max pool, global average pool, Dense."""
    L = keras.layers
    inp = keras.Input((16, 16, 3))
    x = L.ReLU()(L.BatchNormalization()(L.Conv2D(16, 3, strides=2, padding="same", use_bias=False)(inp)))
    y = L.Activation("relu")(L.BatchNormalization()(L.Conv2D(16, 3, padding="same")(x)))
    y = L.BatchNormalization()(L.Conv2D(16, 3, padding="same")(y))
    x = L.ReLU()(L.Add()([x, y]))
    s = L.Conv2D(32, 1, strides=2)(x)
    y = L.Conv2D(32, 3, strides=2, padding="same", activation="relu")(x)
    x = L.ReLU()(L.Add()([s, L.Conv2D(32, 3, padding="same")(y)]))
    x = L.Concatenate()([x, L.MaxPooling2D(3, strides=1, padding="same")(x)])
    return keras.Model(inp, L.Dense(10)(L.GlobalAveragePooling2D()(x)), name="resnet")


def mobilenet(keras: Any) -> Any:
    """MobileNet-style Sequential model: depthwise (multiplier 1 and 2) + pointwise pairs with BN and ReLU6,
    a same-padded average pool (TensorFlow divides edge windows by their in-image count), Dense."""
    L = keras.layers
    return keras.Sequential([
        keras.Input((32, 32, 3)), L.Conv2D(16, 3, strides=2, padding="same"), L.BatchNormalization(), L.ReLU(6.0),
        L.DepthwiseConv2D(3, padding="same"), L.BatchNormalization(), L.ReLU(6.0),
        L.Conv2D(32, 1), L.BatchNormalization(), L.ReLU(6.0),
        L.DepthwiseConv2D(3, strides=2, padding="same", depth_multiplier=2), L.BatchNormalization(), L.ReLU(6.0),
        L.Conv2D(48, 1, activation="relu6"), L.AveragePooling2D(3, strides=2, padding="same"),
        L.GlobalAveragePooling2D(), L.Dense(10)], name="mobilenet")


def padnet(keras: Any) -> Any:
    """The ZeroPadding2D patterns of keras.applications: ResNet50's stem (pad 3, 7x7/2 valid conv, BN, ReLU,
    pad 1, 3x3/2 max pool) and MobileNet's asymmetric pad before a strided depthwise conv, then an average
    pool over zero padding, global pooling, Dense."""
    L = keras.layers
    inp = keras.Input((32, 32, 3))
    x = L.Conv2D(8, 7, strides=2, use_bias=False)(L.ZeroPadding2D(3)(inp))
    x = L.ReLU()(L.BatchNormalization()(x))
    x = L.MaxPooling2D(3, strides=2)(L.ZeroPadding2D(1)(x))
    x = L.DepthwiseConv2D(3, strides=2)(L.ZeroPadding2D(((0, 1), (0, 1)))(x))
    x = L.AveragePooling2D(3, strides=1)(L.ZeroPadding2D(1)(L.ReLU()(x)))
    return keras.Model(inp, L.Dense(10)(L.GlobalAveragePooling2D()(x)), name="padnet")


MODELS: dict[str, Callable[[Any], Any]] = {"lenet": lenet, "resnet": resnet, "mobilenet": mobilenet,
                                           "padnet": padnet}


def build(name: str, seed: int = 0) -> tuple[Any, np.ndarray, np.ndarray]:
    """(Keras model with seeded BatchNorm statistics, an NHWC input batch, Keras's float output)."""
    keras = _keras()
    model = MODELS[name](keras)
    rng = np.random.default_rng(seed)
    for layer in model.layers:
        if isinstance(layer, keras.layers.BatchNormalization):
            gamma, beta, mean, var = layer.get_weights()
            layer.set_weights([rng.uniform(0.5, 1.5, gamma.shape), rng.normal(0, 0.1, beta.shape),
                               rng.normal(0, 0.2, mean.shape), rng.uniform(0.5, 2.0, var.shape)])
    x = rng.standard_normal((SAMPLES, *model.inputs[0].shape[1:])).astype(np.float32)
    return model, x, np.asarray(model.predict(x, verbose=0))


def write(directory: Path) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    out = []
    for name in MODELS:
        model, x, y = build(name)
        model.save(directory / f"{name}.h5")
        np.savez(directory / f"{name}.npz", x=x, y=y)
        out.append(directory / f"{name}.h5")
    return out


if __name__ == "__main__":
    for p in write(Path(sys.argv[1] if len(sys.argv) > 1 else "tests/compiler/fixtures/keras")):
        print(p)
