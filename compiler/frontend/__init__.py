"""Model frontends: Caffe (prototxt + caffemodel), ONNX and Keras (.h5), each producing a ``compiler.ir.Graph``."""
from __future__ import annotations

from pathlib import Path

from compiler.errors import CompileError
from dlaio.inputs import not_a_file
from compiler.ir import Graph


def load_model(path: str | Path, weights: str | Path | None = None, *, seed: int = 0) -> Graph:
    """Dispatch on the file: ``.onnx`` -> ONNX; ``.h5`` -> Keras; ``.prototxt``/``.pt``/other text -> Caffe (``weights`` is
    the .caffemodel; without it the Caffe frontend fills seeded random weights)."""
    path = Path(path)
    why = not_a_file(path)
    if why:  # a folder, FIFO or device is not "no such file"; a FIFO must not be opened (it would block)
        raise CompileError(str(path), why)
    if path.suffix.lower() in (".h5", ".hdf5"):
        from compiler.frontend import keras_h5

        if weights is not None:
            raise CompileError(str(weights), "--weights is for Caffe models; a Keras .h5 file carries its weights")
        return keras_h5.load(path)
    if path.suffix.lower() == ".onnx":
        from compiler.frontend import onnx as onnx_frontend

        if weights is not None:
            raise CompileError(str(weights), "--weights is for Caffe models; an ONNX file carries its weights")
        return onnx_frontend.load(path)
    from compiler.frontend import caffe

    return caffe.load(path, Path(weights) if weights is not None else None, seed=seed)
