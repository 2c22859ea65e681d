"""TFLite models for the TFLite frontend's tests, written with LiteRT's own flatbuffer schema (the object API of
``ai_edge_litert.schema_py_generated``, not the ``tflite`` reader the frontend uses) and quantized by Google's
``ai-edge-quantizer``, so neither the file layout nor the int8 arithmetic comes from the code under test.

- ``lenet``, ``resnet`` and ``mobilenet`` are float32 models, NHWC, with seeded He-scaled weights; LiteRT's
  interpreter runs them for the float reference.
- ``quantize(model, samples)`` is the full-integer int8 model of a float one: per-channel symmetric weights,
  per-tensor activations, symmetric (zero point 0) by default as the DLA's int8 needs, or asymmetric (the
  quantizer's default recipe) to see the refusal.

``python -m regressions.lib.zoo.tflite_models DIR`` writes them all (float and int8) for use with ``dla compile``.
"""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Callable, Iterable

import numpy as np

FLOAT32 = 0
INT32 = 2
#: TFLite's fused activations (ActivationFunctionType).
NONE, RELU, RELU6 = 0, 1, 3
SAME, VALID = 0, 1


def _schema():
    from ai_edge_litert import schema_py_generated as fb

    return fb


class Writer:
    """One subgraph being built: tensors (with their NHWC shapes), buffers and operators."""

    def __init__(self, seed: int = 0) -> None:
        fb = _schema()
        self.fb = fb
        self.rng = np.random.default_rng(seed)
        self.model = fb.ModelT()
        self.model.version = 3
        self.model.description = "dla-coverify test model"
        self.model.buffers = [fb.BufferT()]  # buffer 0: the empty buffer of every activation tensor
        self.model.operatorCodes = []
        self.sg = fb.SubGraphT()
        self.sg.tensors, self.sg.operators, self.sg.inputs, self.sg.outputs = [], [], [], []
        self.sg.name = "main"
        self.shapes: list[tuple[int, ...]] = []
        self._codes: dict[int, int] = {}

    # ---- tensors and operators -------------------------------------------------------------------------------
    def tensor(self, name: str, shape: Iterable[int], data: np.ndarray | None = None, dtype: int = FLOAT32) -> int:
        fb = self.fb
        t = fb.TensorT()
        t.name = name
        t.shape = [int(d) for d in shape]
        t.type = dtype
        t.buffer = 0
        if data is not None:
            b = fb.BufferT()
            b.data = np.frombuffer(np.ascontiguousarray(data).tobytes(), dtype=np.uint8)
            self.model.buffers.append(b)
            t.buffer = len(self.model.buffers) - 1
        self.sg.tensors.append(t)
        self.shapes.append(tuple(t.shape))
        return len(self.sg.tensors) - 1

    def const(self, name: str, value: np.ndarray) -> int:
        value = np.asarray(value)
        dtype = INT32 if value.dtype == np.int32 else FLOAT32
        return self.tensor(name, value.shape, value.astype(np.int32 if dtype == INT32 else np.float32), dtype)

    def op(self, code: int, inputs: list[int], out_shape: Iterable[int], name: str,
           options: tuple[int, object] | None = None) -> int:
        fb = self.fb
        if code not in self._codes:
            oc = fb.OperatorCodeT()
            oc.builtinCode = code
            oc.deprecatedBuiltinCode = min(code, 127)
            oc.version = 1
            self.model.operatorCodes.append(oc)
            self._codes[code] = len(self.model.operatorCodes) - 1
        y = self.tensor(name, out_shape)
        o = fb.OperatorT()
        o.opcodeIndex = self._codes[code]
        o.inputs, o.outputs = list(inputs), [y]
        if options is not None:
            o.builtinOptionsType, o.builtinOptions = options
        self.sg.operators.append(o)
        return y

    def weights(self, shape: tuple[int, ...], fan_in: int) -> np.ndarray:
        return (self.rng.standard_normal(shape) * np.sqrt(2.0 / fan_in)).astype(np.float32)

    def bias(self, n: int) -> np.ndarray:
        return (self.rng.standard_normal(n) * 0.1).astype(np.float32)

    # ---- layers (NHWC) -------------------------------------------------------------------------------------
    @staticmethod
    def _out(size: int, k: int, s: int, padding: int) -> int:
        return -(-size // s) if padding == SAME else (size - k) // s + 1

    def conv(self, x: int, filters: int, k: int, stride: int = 1, padding: int = SAME, act: int = RELU,
             name: str = "conv") -> int:
        fb = self.fb
        n, h, w, c = self.shapes[x]
        wt = self.const(f"{name}/kernel", self.weights((filters, k, k, c), k * k * c))  # OHWI
        b = self.const(f"{name}/bias", self.bias(filters))
        opt = fb.Conv2DOptionsT()
        opt.padding, opt.strideH, opt.strideW, opt.fusedActivationFunction = padding, stride, stride, act
        opt.dilationHFactor = opt.dilationWFactor = 1
        shape = (n, self._out(h, k, stride, padding), self._out(w, k, stride, padding), filters)
        return self.op(fb.BuiltinOperator.CONV_2D, [x, wt, b], shape, name, (fb.BuiltinOptions.Conv2DOptions, opt))

    def depthwise(self, x: int, k: int = 3, stride: int = 1, padding: int = SAME, act: int = RELU6,
                  name: str = "dw") -> int:
        fb = self.fb
        n, h, w, c = self.shapes[x]
        wt = self.const(f"{name}/kernel", self.weights((1, k, k, c), k * k))  # 1HWC
        b = self.const(f"{name}/bias", self.bias(c))
        opt = fb.DepthwiseConv2DOptionsT()
        opt.padding, opt.strideH, opt.strideW, opt.fusedActivationFunction = padding, stride, stride, act
        opt.depthMultiplier = 1
        opt.dilationHFactor = opt.dilationWFactor = 1
        shape = (n, self._out(h, k, stride, padding), self._out(w, k, stride, padding), c)
        return self.op(fb.BuiltinOperator.DEPTHWISE_CONV_2D, [x, wt, b], shape, name,
                       (fb.BuiltinOptions.DepthwiseConv2DOptions, opt))

    def dense(self, x: int, units: int, act: int = NONE, name: str = "fc") -> int:
        fb = self.fb
        n, features = self.shapes[x][0], int(np.prod(self.shapes[x][1:]))
        wt = self.const(f"{name}/kernel", self.weights((units, features), features))  # (out, in)
        b = self.const(f"{name}/bias", self.bias(units))
        opt = fb.FullyConnectedOptionsT()
        opt.fusedActivationFunction = act
        return self.op(fb.BuiltinOperator.FULLY_CONNECTED, [x, wt, b], (n, units), name,
                       (fb.BuiltinOptions.FullyConnectedOptions, opt))

    def pool(self, x: int, k: int, stride: int, kind: str = "max", padding: int = VALID, name: str = "pool") -> int:
        fb = self.fb
        n, h, w, c = self.shapes[x]
        opt = fb.Pool2DOptionsT()
        opt.padding, opt.strideH, opt.strideW, opt.filterHeight, opt.filterWidth = padding, stride, stride, k, k
        code = fb.BuiltinOperator.MAX_POOL_2D if kind == "max" else fb.BuiltinOperator.AVERAGE_POOL_2D
        shape = (n, self._out(h, k, stride, padding), self._out(w, k, stride, padding), c)
        return self.op(code, [x], shape, name, (fb.BuiltinOptions.Pool2DOptions, opt))

    def add(self, a: int, b: int, act: int = NONE, name: str = "add") -> int:
        fb = self.fb
        opt = fb.AddOptionsT()
        opt.fusedActivationFunction = act
        return self.op(fb.BuiltinOperator.ADD, [a, b], self.shapes[a], name, (fb.BuiltinOptions.AddOptions, opt))

    def concat(self, xs: list[int], name: str = "concat") -> int:
        fb = self.fb
        opt = fb.ConcatenationOptionsT()
        opt.axis = 3
        shape = (*self.shapes[xs[0]][:3], sum(self.shapes[x][3] for x in xs))
        return self.op(fb.BuiltinOperator.CONCATENATION, xs, shape, name,
                       (fb.BuiltinOptions.ConcatenationOptions, opt))

    def pad(self, x: int, pads: tuple[int, int, int, int], name: str = "pad") -> int:
        """Zero padding (top, left, bottom, right) as TensorFlow writes before a stride-2 conv."""
        fb = self.fb
        t, l, b, r = pads
        p = self.const(f"{name}/paddings", np.array([[0, 0], [t, b], [l, r], [0, 0]], dtype=np.int32))
        n, h, w, c = self.shapes[x]
        return self.op(fb.BuiltinOperator.PAD, [x, p], (n, h + t + b, w + l + r, c), name,
                       (fb.BuiltinOptions.PadOptions, fb.PadOptionsT()))

    def mean(self, x: int, name: str = "gap") -> int:
        """Global average pooling as TensorFlow lowers it: MEAN over H and W, not keeping them."""
        fb = self.fb
        axes = self.const(f"{name}/axes", np.array([1, 2], dtype=np.int32))
        opt = fb.ReducerOptionsT()
        opt.keepDims = False
        n, _, _, c = self.shapes[x]
        return self.op(fb.BuiltinOperator.MEAN, [x, axes], (n, c), name, (fb.BuiltinOptions.ReducerOptions, opt))

    def reshape(self, x: int, shape: tuple[int, ...], name: str = "flatten") -> int:
        fb = self.fb
        s = self.const(f"{name}/shape", np.array(shape, dtype=np.int32))
        opt = fb.ReshapeOptionsT()
        opt.newShape = list(shape)
        return self.op(fb.BuiltinOperator.RESHAPE, [x, s], shape, name, (fb.BuiltinOptions.ReshapeOptions, opt))

    def softmax(self, x: int, name: str = "prob") -> int:
        fb = self.fb
        opt = fb.SoftmaxOptionsT()
        opt.beta = 1.0
        return self.op(fb.BuiltinOperator.SOFTMAX, [x], self.shapes[x], name, (fb.BuiltinOptions.SoftmaxOptions, opt))

    def unary(self, code_name: str, x: int, name: str) -> int:
        return self.op(getattr(self.fb.BuiltinOperator, code_name), [x], self.shapes[x], name)

    # ---- the model -----------------------------------------------------------------------------------------
    def finish(self, inputs: list[int], outputs: list[int]) -> bytes:
        from ai_edge_litert.tools import flatbuffer_utils

        fb = self.fb
        self.sg.inputs, self.sg.outputs = list(inputs), list(outputs)
        self.model.subgraphs = [self.sg]
        sig = fb.SignatureDefT()
        sig.signatureKey = "serving_default"
        sig.subgraphIndex = 0
        sig.inputs, sig.outputs = [], []
        for where, ids in ((sig.inputs, inputs), (sig.outputs, outputs)):
            for i in ids:
                m = fb.TensorMapT()
                m.name = self.sg.tensors[i].name
                m.tensorIndex = i
                where.append(m)
        self.model.signatureDefs = [sig]
        return bytes(flatbuffer_utils.convert_object_to_bytearray(self.model))


# ---- the networks ---------------------------------------------------------------------------------------------
def lenet(seed: int = 0) -> bytes:
    """LeNet-5 on 28x28x1: conv-relu-maxpool twice, the cube flattened in TFLite's (h, w, c) order, three FCs."""
    m = Writer(seed)
    x = m.tensor("input", (1, 28, 28, 1))
    y = m.conv(x, 6, 5, padding=SAME, name="conv1")
    y = m.pool(y, 2, 2, name="pool1")
    y = m.conv(y, 16, 5, padding=VALID, name="conv2")
    y = m.pool(y, 2, 2, name="pool2")
    y = m.reshape(y, (1, 5 * 5 * 16))
    y = m.dense(y, 120, RELU, name="fc1")
    y = m.dense(y, 84, RELU, name="fc2")
    y = m.dense(y, 10, name="logits")
    return m.finish([x], [y])


def resnet(seed: int = 0) -> bytes:
    """A residual net on 32x32x3: a stem, an identity block and a stride-2 projection block (ADD with a fused
    ReLU), global average pooling as MEAN, a dense head."""
    m = Writer(seed)
    x = m.tensor("input", (1, 32, 32, 3))
    y = m.conv(x, 16, 3, name="stem")
    y = m.pool(y, 3, 2, padding=SAME, name="stem_pool")
    r = m.conv(y, 16, 3, name="b1_conv1")
    r = m.conv(r, 16, 3, act=NONE, name="b1_conv2")
    y = m.add(y, r, RELU, name="b1_add")
    r = m.conv(y, 32, 3, stride=2, name="b2_conv1")
    r = m.conv(r, 32, 3, act=NONE, name="b2_conv2")
    s = m.conv(y, 32, 1, stride=2, act=NONE, name="b2_proj")
    y = m.add(s, r, RELU, name="b2_add")
    y = m.mean(y)
    y = m.dense(y, 10, name="logits")
    return m.finish([x], [y])


def mobilenet(seed: int = 0) -> bytes:
    """A MobileNet-style net on 32x32x3: conv-ReLU6, depthwise/pointwise pairs, an explicit PAD before a
    stride-2 VALID depthwise (as TensorFlow's MobileNet v2 writes it), a concatenation, average pooling."""
    m = Writer(seed)
    x = m.tensor("input", (1, 32, 32, 3))
    y = m.conv(x, 16, 3, stride=2, act=RELU6, name="stem")
    y = m.depthwise(y, name="dw1")
    y = m.conv(y, 24, 1, act=RELU6, name="pw1")
    p = m.pad(y, (0, 0, 1, 1), name="pad2")
    y = m.depthwise(p, stride=2, padding=VALID, name="dw2")
    a = m.conv(y, 16, 1, act=RELU6, name="pw2a")
    b = m.conv(y, 16, 1, act=RELU6, name="pw2b")
    y = m.concat([a, b], name="cat")
    y = m.pool(y, 2, 2, kind="avg", name="avgpool")
    y = m.mean(y)
    y = m.dense(y, 10, name="logits")
    return m.finish([x], [y])


MODELS: dict[str, Callable[[int], bytes]] = {"lenet": lenet, "resnet": resnet, "mobilenet": mobilenet}


def input_shape(model: bytes) -> tuple[int, ...]:
    return tuple(interpreter(model).get_input_details()[0]["shape"])


def interpreter(model: bytes):
    from ai_edge_litert.interpreter import Interpreter

    it = Interpreter(model_content=model, num_threads=1)
    it.allocate_tensors()
    return it


def run(model: bytes, xs: np.ndarray) -> np.ndarray:
    """LiteRT's outputs for a batch of float NHWC inputs, one invocation each. An int8 model's int8 input is
    the float rounded to its scale; its int8 output is returned as is (steps, not dequantized)."""
    it = interpreter(model)
    d_in, d_out = it.get_input_details()[0], it.get_output_details()[0]
    outs = []
    for x in xs:
        x = x[None]
        if d_in["dtype"] == np.int8:
            s, z = d_in["quantization"]
            x = np.clip(np.rint(x / s) + z, -128, 127).astype(np.int8)
        it.set_tensor(d_in["index"], x)
        it.invoke()
        outs.append(it.get_tensor(d_out["index"]).copy())
    return np.concatenate(outs)


def io_scales(model: bytes) -> tuple[float, float]:
    """An int8 model's input and output scales."""
    it = interpreter(model)
    return float(it.get_input_details()[0]["quantization"][0]), float(it.get_output_details()[0]["quantization"][0])


def samples(shape: tuple[int, ...], n: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((n, *shape[1:])).astype(np.float32)


def quantize(model: bytes, n_samples: int = 16, *, symmetric: bool = True, seed: int = 0) -> bytes:
    """Full-integer int8 (a8w8) by ai-edge-quantizer: per-channel symmetric int8 weights, per-tensor int8
    activations calibrated by min/max on ``n_samples`` random inputs; ``symmetric`` activations have zero
    point 0."""
    from ai_edge_quantizer import quantizer as aeq

    recipe = [{
        "regex": ".*", "operation": "*", "algorithm_key": "min_max_uniform_quantize",
        "op_config": {
            "activation_tensor_config": {"num_bits": 8, "symmetric": symmetric, "granularity": "TENSORWISE",
                                         "dtype": "INT"},
            "weight_tensor_config": {"num_bits": 8, "symmetric": True, "granularity": "CHANNELWISE",
                                     "dtype": "INT"},
            "compute_precision": "INTEGER", "explicit_dequantize": False, "skip_checks": False,
            "min_weight_elements": 0}}]
    q = aeq.Quantizer(bytearray(model), recipe)
    name = interpreter(model).get_input_details()[0]["name"]
    xs = samples(input_shape(model), n_samples, seed)
    result = q.calibrate({"serving_default": [{name: x[None]} for x in xs]}, num_threads=1)
    return bytes(q.quantize(result).quantized_model)


def main(argv: list[str]) -> int:
    out = Path(argv[0] if argv else "tflite_models")
    out.mkdir(parents=True, exist_ok=True)
    for name, build in MODELS.items():
        model = build(0)
        (out / f"{name}.tflite").write_bytes(model)
        (out / f"{name}_int8.tflite").write_bytes(quantize(model))
        print(f"wrote {out / name}.tflite and {name}_int8.tflite")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
