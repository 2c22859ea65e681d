"""Model frontends: Caffe (prototxt + caffemodel), ONNX, Keras (.h5), PNNX (.param + .bin) and TFLite
(.tflite), each producing a ``compiler.ir.Graph``."""
from __future__ import annotations

import importlib
from pathlib import Path

from compiler.errors import CompileError
from dlaio.inputs import not_a_file
from compiler.ir import Graph

#: File suffix -> (frontend module, what ``weights`` may be for it: None if the file carries its weights).
#: A new frontend is one entry here and a ``load_file(path, weights, seed)`` in its module; Caffe takes the rest.
FRONTENDS: dict[str, tuple[str, str | None]] = {
    ".onnx": ("onnx", None),
    ".h5": ("keras_h5", None),
    ".hdf5": ("keras_h5", None),
    ".param": ("pnnx", "its .bin, when not beside the .param"),
    ".tflite": ("tflite", None),
}


def load_model(path: str | Path, weights: str | Path | None = None, *, seed: int = 0) -> Graph:
    """Dispatch on the file's suffix (``FRONTENDS``); ``.prototxt``/``.pt``/other text -> Caffe (``weights`` is
    the .caffemodel; without it the Caffe frontend fills seeded random weights)."""
    path = Path(path)
    why = not_a_file(path)
    if why:  # a folder, FIFO or device is not "no such file"; a FIFO must not be opened (it would block)
        raise CompileError(str(path), why)
    module, takes = FRONTENDS.get(path.suffix.lower(), ("caffe", "the .caffemodel"))
    if weights is not None and takes is None:
        raise CompileError(str(weights), f"--weights is for Caffe and PNNX models; a {path.suffix} file carries "
                                         f"its weights")
    frontend = importlib.import_module(f"compiler.frontend.{module}")
    return frontend.load_file(path, Path(weights) if weights is not None else None, seed)
