"""Model zoo for end-to-end regressions: seeded random ONNX CNNs (``ZOO``: name -> build(seed)) and a small CNN
trained on scikit-learn's digits (``regressions.lib.zoo.digits``)."""
from __future__ import annotations

from typing import Callable

import onnx

from regressions.lib.zoo.models import inception, lenet, mobilenet, resnet

ZOO: dict[str, Callable[[int], onnx.ModelProto]] = {
    "lenet": lenet,
    "resnet": resnet,
    "mobilenet": mobilenet,
    "inception": inception,
}

__all__ = ["ZOO"]
