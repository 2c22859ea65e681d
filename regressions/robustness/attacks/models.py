"""Malformed models for `dla compile`: cut and corrupted ONNX files, unknown operators, NaN/Inf weights,
broken prototxt, a caffemodel of another network, a 1000-conv chain, and models that are not files.
The promise: one line naming the model file (and the layer or initializer), exit 2, no output written."""
from __future__ import annotations

from pathlib import Path
from typing import Callable

import numpy as np

from regressions.robustness.attack import Attack, Scenario
from regressions.robustness.attacks.common import compile_cmd, device_twin, fifo
from regressions.robustness.material import Material

FAMILY = "malformed models"
BAD_INPUT = frozenset({2})


def _bytes_model(name: str, make: Callable[[bytes], bytes], filename: str = "m.onnx", quick: bool = False) -> Attack:
    """``m.onnx`` made from poolnet's bytes."""
    def setup(workdir: Path, material: Material) -> Scenario:
        (workdir / filename).write_bytes(make((material.root / "poolnet.onnx").read_bytes()))
        return Scenario(compile_cmd(model=filename), names=(filename,))
    return Attack(f"ONNX {name}", FAMILY, setup, quick=quick)


def _onnx_edit(name: str, edit: Callable[[object], None], also: tuple[str, ...] = (),
               exits: frozenset[int] = BAD_INPUT, quick: bool = False, base: str = "poolnet") -> Attack:
    """A zoo model (poolnet, or lenet for its convolution weights) with ``edit(model)`` applied to its
    ModelProto (no checker run: the file is what a user has)."""
    def setup(workdir: Path, material: Material) -> Scenario:
        import onnx

        model = onnx.load(material.root / f"{base}.onnx")
        edit(model)
        (workdir / "m.onnx").write_bytes(model.SerializeToString())
        return Scenario(compile_cmd(model="m.onnx"), names=("m.onnx", *also))
    return Attack(f"ONNX {name}", FAMILY, setup, exits, quick=quick, line_optional=0 in exits)


def _set_weights(value: float) -> Callable[[object], None]:
    def edit(model) -> None:
        from onnx import numpy_helper

        init = next(i for i in model.graph.initializer if len(i.dims) == 4)
        w = numpy_helper.to_array(init).copy()
        w.flat[3] = value
        init.CopyFrom(numpy_helper.from_array(w, init.name))
    return edit


def _op_type(op: str) -> Callable[[object], None]:
    def edit(model) -> None:
        model.graph.node[0].op_type = op
    return edit


def _undefined_input(model) -> None:
    model.graph.node[0].input[0] = "nowhere"


def _zero_dim(model) -> None:
    model.graph.input[0].type.tensor_type.shape.dim[1].dim_value = 0


def _opset_999(model) -> None:
    model.opset_import[0].version = 999


def _cycle(model) -> None:
    """The first node reads the last node's output."""
    model.graph.node[0].input[0] = model.graph.node[-1].output[0]


def _short_raw_data(model) -> None:
    init = next(i for i in model.graph.initializer if len(i.dims) == 4)
    init.raw_data = init.raw_data[:10]


def _negative_dim(model) -> None:
    init = next(i for i in model.graph.initializer if len(i.dims) == 4)
    init.dims[0] = -8


def _bad_utf8_name(model) -> None:
    model.graph.node[0].name = "conv\udcff".encode("utf-8", "surrogateescape").decode("latin-1")


def _not_a_file(kind: str) -> Attack:
    def setup(workdir: Path, material: Material) -> Scenario:
        path = workdir / "m.onnx"
        if kind == "folder":
            path.mkdir()
        elif kind == "FIFO":
            fifo(path)
        elif kind == "device node":
            device_twin(path)
        else:
            path.symlink_to("/dev/zero")
        return Scenario(compile_cmd(model="m.onnx"), names=("m.onnx",))
    return Attack(f"model is a {kind}", FAMILY, setup, quick=kind == "FIFO")


def _caffe(name: str, prototxt: Callable[[str], str] | None = None, weights: str | None = "poolnet",
           corrupt: Callable[[bytes], bytes] | None = None, names: tuple[str, ...] = ("net.prototxt",),
           exits: frozenset[int] = BAD_INPUT) -> Attack:
    def setup(workdir: Path, material: Material) -> Scenario:
        text = (material.root / "poolnet.prototxt").read_text()
        (workdir / "net.prototxt").write_text(prototxt(text) if prototxt else text)
        more = []
        if weights:
            data = (material.root / f"{weights}.caffemodel").read_bytes()
            (workdir / "net.caffemodel").write_bytes(corrupt(data) if corrupt else data)
            more = ["--weights", "net.caffemodel"]
        return Scenario(compile_cmd("out.dla", *more, model="net.prototxt"), names=names)
    return Attack(f"Caffe {name}", FAMILY, setup, exits)


def _caffe_nan(data: bytes) -> bytes:
    from compiler.proto import caffe_pb2

    net = caffe_pb2.NetParameter()
    net.ParseFromString(data)
    layer = next(layer for layer in (list(net.layer) or list(net.layers)) if layer.blobs)
    layer.blobs[0].data[0] = float("nan")
    return net.SerializeToString()


def _conv_chain(depth: int) -> Attack:
    """A chain of ``depth`` 1x1 convolutions on an 8x8x8 input: deep, not big."""
    def setup(workdir: Path, material: Material) -> Scenario:
        import onnx
        from onnx import TensorProto, helper

        rng = np.random.default_rng(0)
        nodes, inits, x = [], [], "x"
        for i in range(depth):
            w = (np.eye(8, dtype=np.float32) + rng.normal(0, 0.01, (8, 8)).astype(np.float32)).reshape(8, 8, 1, 1)
            inits.append(helper.make_tensor(f"w{i}", TensorProto.FLOAT, w.shape, w.tobytes(), raw=True))
            nodes.append(helper.make_node("Conv", [x, f"w{i}"], [f"c{i}"], name=f"conv{i}"))
            x = f"c{i}"
        graph = helper.make_graph(nodes, "chain", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, 8, 8])],
                                  [helper.make_tensor_value_info(x, TensorProto.FLOAT, [1, 8, 8, 8])], inits)
        onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), workdir / "chain.onnx")
        return Scenario(compile_cmd(model="chain.onnx"), names=("chain.onnx",))
    return Attack(f"ONNX chain of {depth} convolutions", FAMILY, setup, frozenset({0, 2}), line_optional=True)


def _weights_for_onnx() -> Attack:
    def setup(workdir: Path, material: Material) -> Scenario:
        material.copy("poolnet.onnx", workdir)
        material.copy("poolnet.caffemodel", workdir)
        return Scenario(compile_cmd("out.dla", "--weights", "poolnet.caffemodel"), names=("--weights",))
    return Attack("--weights given with an ONNX model", FAMILY, setup, frozenset({0, 2}), line_optional=True)


def attacks() -> list[Attack]:
    rng = np.random.default_rng(7)
    onnx_bytes = [
        _bytes_model("cut in half", lambda b: b[: len(b) // 2], quick=True),
        _bytes_model("of 10 bytes", lambda b: b[:10]),
        _bytes_model("empty file", lambda b: b""),
        _bytes_model("random bytes", lambda b: rng.integers(0, 256, len(b), dtype=np.uint8).tobytes()),
        _bytes_model("with bit flips in its middle",
                     lambda b: bytes(x ^ 0x5A if len(b) // 3 < i < len(b) // 3 + 64 else x for i, x in enumerate(b))),
        _bytes_model("holding prototxt text", lambda b: b'name: "x"\nlayer { name: "a" type: "ReLU" }\n'),
        _bytes_model("under an unknown extension", lambda b: b, filename="m.model"),
    ]
    onnx_edits = [
        _onnx_edit("unknown op FooBar", _op_type("FooBar"), ("FooBar",), quick=True),
        _onnx_edit("unsupported op LSTM", _op_type("LSTM"), ("LSTM",)),
        _onnx_edit("NaN weight", _set_weights(float("nan")), ("conv1_W", "NaN"), quick=True, base="lenet"),
        _onnx_edit("Inf weight", _set_weights(float("inf")), ("conv1_W", "Inf"), base="lenet"),
        _onnx_edit("weight of 3e38 (finite, near float32 max)", _set_weights(3e38), exits=frozenset({0, 2}), base="lenet"),
        _onnx_edit("node reads an undefined tensor", _undefined_input, ("nowhere",)),
        _onnx_edit("input with a zero dimension", _zero_dim),
        _onnx_edit("opset 999", _opset_999, ("999",)),
        _onnx_edit("graph with a cycle", _cycle),
        _onnx_edit("initializer raw_data shorter than its dims", _short_raw_data, ("conv1_W",), base="lenet"),
        _onnx_edit("initializer with a negative dim", _negative_dim, ("conv1_W",), base="lenet"),
        _onnx_edit("node name not UTF-8", _bad_utf8_name, exits=frozenset({0, 2})),
    ]
    caffe = [
        _caffe("prototxt missing a brace", lambda t: t.replace("}", "", 1)),
        _caffe("prototxt with an unknown layer type", lambda t: t.replace('type: "ReLU"', 'type: "Frobnicate"', 1)
               if 'type: "ReLU"' in t else t.replace('type: "Pooling"', 'type: "Frobnicate"', 1), names=("Frobnicate",)),
        _caffe("prototxt not UTF-8", lambda t: t.replace("name:", "name\udcff:", 1).encode("utf-8", "surrogateescape")
               .decode("latin-1")),
        _caffe("caffemodel of another network (lenet)", weights="lenet", names=("net.caffemodel",)),
        _caffe("caffemodel cut in half", corrupt=lambda b: b[: len(b) // 2], names=("net.caffemodel",)),
        _caffe("caffemodel of random bytes", corrupt=lambda b: rng.integers(0, 256, len(b), dtype=np.uint8).tobytes(),
               names=("net.caffemodel",)),
        _caffe("caffemodel with a NaN weight", corrupt=_caffe_nan, names=("NaN",)),
    ]
    odd = [_not_a_file(kind) for kind in ("folder", "FIFO", "device node", "symlink to /dev/zero")]
    return onnx_bytes + onnx_edits + caffe + odd + [_conv_chain(1000), _weights_for_onnx()]
