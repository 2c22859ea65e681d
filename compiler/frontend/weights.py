"""Weights a frontend reads must be finite: shared by the Caffe and ONNX frontends."""
from __future__ import annotations

import numpy as np


def non_finite(values: np.ndarray) -> str | None:
    """Why ``values`` cannot be weights, or None: NaN or Inf entries, including float64 values beyond
    float32 (weights are float32). Without this a NaN only surfaces passes later, as numpy warnings and a
    misleading quantization error about the bias."""
    if not np.issubdtype(values.dtype, np.floating):
        return None
    with np.errstate(over="ignore"):
        bad = ~np.isfinite(values.astype(np.float32, copy=False))
    count = int(np.count_nonzero(bad))
    if not count:
        return None
    first = np.unravel_index(int(np.argmax(bad)), values.shape) if values.ndim else ()
    return (f"holds {count} NaN/Inf value{'s' if count > 1 else ''} (first {values[first]} at index "
            f"{list(map(int, first))}); weights must be finite float32 numbers")
