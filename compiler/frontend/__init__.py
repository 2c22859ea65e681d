"""Model frontends: Caffe (prototxt + caffemodel) and ONNX, each producing a ``compiler.ir.Graph``."""
from __future__ import annotations

from pathlib import Path

from compiler.errors import CompileError
from compiler.ir import Graph


def load_model(path: str | Path, weights: str | Path | None = None, *, seed: int = 0) -> Graph:
    """Dispatch on the file: ``.onnx`` -> ONNX; ``.prototxt``/``.pt``/other text -> Caffe (``weights`` is
    the .caffemodel; without it the Caffe frontend fills seeded random weights)."""
    path = Path(path)
    if not path.is_file():
        raise CompileError(str(path), "no such file")
    if path.suffix.lower() == ".onnx":
        from compiler.frontend import onnx as onnx_frontend

        if weights is not None:
            raise CompileError(str(weights), "--weights is for Caffe models; an ONNX file carries its weights")
        return onnx_frontend.load(path)
    from compiler.frontend import caffe

    return caffe.load(path, Path(weights) if weights is not None else None, seed=seed)
