"""onnxruntime as the float reference of compiled networks, sized to the process's thread budget.

onnxruntime starts one intra-op thread per core by default; under ``make regress`` each pytest-xdist
worker already has its core, so sessions take ``OMP_NUM_THREADS`` threads when it is set (the runner
sets one per worker).
"""
from __future__ import annotations

import os

import onnx


def session(model: onnx.ModelProto):
    import onnxruntime

    options = onnxruntime.SessionOptions()
    threads = os.environ.get("OMP_NUM_THREADS", "").strip()
    if threads.isdigit() and int(threads) > 0:
        options.intra_op_num_threads = int(threads)
        options.inter_op_num_threads = 1
    return onnxruntime.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
