"""Mixed precision per layer (``--precision-overrides``, ``compiler.passes.mixed``): int16 and fp16 layers in
one nv_full network, a converting operation at each boundary.

Checked as the single-precision networks are: onnxruntime's float execution of the model (cosine of the
logits, the looser precision's target), and every engine op, converters included, replayed alone on golden
against the plain reference math bit for bit."""
from __future__ import annotations

import json
import re

import numpy as np
import pytest

from compiler.driver import compile_graph
from compiler.errors import CompileError
from compiler.frontend import onnx as onnx_frontend
from compiler.passes.mixed import parse_overrides
from golden.config import get_config
from loadable import loadable_pb2 as pb
from regressions.lib.layer_replay import replay_all
from regressions.lib.zoo import ZOO
from runtime.executor import Network
from tests.compiler.helpers import one_line_error

pytest.importorskip("onnxruntime")
from regressions.lib.float_reference import session  # noqa: E402
from tests.compiler.test_precisions import COSINE, cosine, every_sdp_use, logits  # noqa: E402

DTYPE = {pb.Tensor.INT16: "int16", pb.Tensor.FP16: "fp16"}


def compile_mixed(m, base: str, overrides: dict[str, str]):
    g = onnx_frontend.load(m)
    lines: list[str] = []
    ld, lowered, ctx = compile_graph(g, "nv_full", precision=base, precision_overrides=overrides, log=lines.append)
    return g, ld, lowered, ctx, lines


def check(m, base: str, overrides: dict[str, str], converters: int) -> None:
    g, ld, lowered, ctx, lines = compile_mixed(m, base, overrides)
    ops = [n for n in lowered.nodes if n.op.startswith("dla.")]
    assert sum("convert" in n.attrs for n in ops) == converters
    assert any(f"{converters} converters" in line for line in lines)
    for layer, p in overrides.items():  # the layer's op (engine, CPU or concat) computes in its type, writes it
        (n,) = [n for n in lowered.nodes if layer in n.attrs.get("layers", [])]
        assert n.attrs["precision"] == p
        out = next(t for t in ld.tensors if t.name == n.outputs[0])
        assert DTYPE[out.dtype] == p
    assert {DTYPE[t.dtype] for t in ld.tensors if t.storage == pb.Tensor.FEATURE} == {"int16", "fp16"}
    x = np.random.default_rng(1).standard_normal(g.shapes[g.inputs[0]]).astype(np.float32)
    got = Network(ld).run({g.inputs[0]: x})
    want = dict(zip([o.name for o in m.graph.output], session(m).run(None, {g.inputs[0]: x})))
    for name, y in want.items():
        assert cosine(got[name], y) >= COSINE["int16"], name
    results = replay_all(ld, lowered, get_config("nv_full"))
    assert len(results) == len(ops)
    assert not [(r.name, r.mismatches) for r in results if not r.ok]


@pytest.mark.parametrize("name,base,overrides,converters", [
    ("lenet", "int16", {"conv2": "fp16"}, 2),
    ("lenet", "fp16", {"conv2": "int16", "fc1": "int16"}, 4),
    ("resnet", "int16", {"conv2": "fp16", "conv6": "fp16"}, 4),  # a residual add reads the fp16 branch
    ("resnet", "fp16", {"conv3": "int16", "conv5": "int16"}, 6),  # each block: input, shortcut, output
    ("inception", "fp16", {"conv4": "int16", "conv7": "int16", "norm1": "int16"}, 5),  # concat, LRN on the CPU
    ("mobilenet", "fp16", {"dw2": "int16", "pw2": "int16"}, 2),
])
def test_zoo_networks_mix_int16_and_fp16(name: str, base: str, overrides: dict, converters: int) -> None:
    check(logits(ZOO[name](0)), base, overrides, converters)


@pytest.mark.parametrize("base,overrides", [
    ("fp16", {"Conv_3": "int16", "PRelu_10": "int16", "Concat_8": "int16"}),
    ("int16", {"Conv_0": "fp16", "AveragePool_11": "fp16", "Clip_12": "fp16", "MaxPool_6": "fp16"}),
])
def test_every_engine_program_converts_at_its_boundaries(base: str, overrides: dict) -> None:
    """Converters before and after convs with eltwise operands, SDP (PReLU, a ReLU6 cap), max and average
    pooling and a concat whose inputs come in the other type."""
    m = every_sdp_use()
    _, _, lowered, _, _ = compile_mixed(m, base, overrides)
    assert sum("convert" in n.attrs for n in lowered.nodes) >= 2
    check(m, base, overrides, sum("convert" in n.attrs for n in lowered.nodes))


def test_an_override_takes_the_layers_fused_into_it_along() -> None:
    """conv2's ReLU follows conv2 into fp16 (one operation), unless the ReLU asks for another type."""
    m = logits(ZOO["resnet"](0))
    _, _, lowered, _, _ = compile_mixed(m, "int16", {"conv2": "fp16"})
    (op,) = [n for n in lowered.nodes if "conv2" in n.attrs.get("layers", [])]
    assert op.attrs["layers"] == ["conv2", "relu2"] and op.attrs["precision"] == "fp16"  # (bn2 folded)
    _, _, lowered, _, _ = compile_mixed(m, "int16", {"conv2": "fp16", "relu2": "int16"})
    (op,) = [n for n in lowered.nodes if "relu2" in n.attrs.get("layers", [])]
    assert op.op == "dla.sdp" and op.attrs["precision"] == "int16"


@pytest.mark.parametrize("base,overrides,match", [
    ("int8", {"conv2": "fp16"}, "needs --precision int16 or fp16, not int8"),
    ("int16", {"conv2": "int8"}, "conv2=int8: a layer can be int16 or fp16"),
    ("int16", {"conv9": "fp16"}, "no layer 'conv9' \\(it has conv1, "),
])
def test_bad_overrides_are_one_line_errors(base: str, overrides: dict, match: str) -> None:
    msg = one_line_error(compile_mixed, logits(ZOO["lenet"](0)), base, overrides)
    assert re.search(match, msg), msg


def test_overrides_parse_from_a_list_or_a_json_file(tmp_path) -> None:
    assert parse_overrides("conv1=fp16, fc1 = int16") == {"conv1": "fp16", "fc1": "int16"}
    f = tmp_path / "mix.json"
    f.write_text(json.dumps({"conv1": "fp16"}))
    assert parse_overrides(str(f)) == {"conv1": "fp16"}
    with pytest.raises(CompileError, match="is not layer=precision"):
        parse_overrides("conv1")
    f.write_text("[1, 2]")
    with pytest.raises(CompileError, match="must be an object"):
        parse_overrides(str(f))
    f.write_text("{")
    with pytest.raises(CompileError, match="not JSON"):
        parse_overrides(str(f))


def test_cli_compiles_and_runs_a_mixed_network(tmp_path) -> None:
    """``dla compile --precision fp16 --precision-overrides conv2=int16`` then ``dla run``: the outputs follow
    onnxruntime's; a bad override is one line on stderr, exit 2, nothing written."""
    import subprocess
    import sys
    from pathlib import Path

    import onnx

    root = Path(__file__).resolve().parents[2]
    m = logits(ZOO["lenet"](0))
    model, out, x_npy, y_npy = (tmp_path / n for n in ("lenet.onnx", "lenet.dla", "x.npy", "y.npy"))
    onnx.save(m, model)
    x = np.random.default_rng(2).standard_normal((1, 1, 28, 28)).astype(np.float32)
    np.save(x_npy, x)

    def dla(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "app.cli", *args], capture_output=True, text=True, cwd=root,
                              timeout=600)

    p = dla("compile", str(model), "--config", "nv_full", "--precision", "fp16", "--precision-overrides",
            "conv2=int16", "--calib-random", "4", "-o", str(out))
    assert p.returncode == 0, p.stderr
    assert "mixed precision: " in p.stdout
    p = dla("run", str(out), "--input", str(x_npy), "--output", str(y_npy))
    assert p.returncode == 0, p.stderr
    want = session(m).run(None, {m.graph.input[0].name: x})[0]
    assert cosine(np.load(y_npy), want) >= COSINE["int16"]
    bad = tmp_path / "bad.dla"
    p = dla("compile", str(model), "--config", "nv_full", "--precision", "int8", "--precision-overrides",
            "conv2=fp16", "-o", str(bad))
    assert p.returncode == 2 and not bad.exists()
    assert p.stderr.count("\n") == 1 and "needs --precision int16 or fp16, not int8" in p.stderr
