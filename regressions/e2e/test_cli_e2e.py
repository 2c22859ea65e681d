"""``dla compile`` / ``dla run`` / ``dla trace`` end to end with the real compiler: emitted traces replay
to the very bytes ``dla run`` produced, and bad models/loadables/inputs fail with one line and exit 2,
leaving nothing at ``-o`` / ``--output``."""
from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from app.cli import main as dla
from loadable.format import read_loadable
from regressions.lib.zoo import ZOO
from regressions.lib.zoo.to_caffe import to_caffe
from runtime.executor import place_regions, tensor_layout


def _logits_model() -> onnx.ModelProto:
    """LeNet without its final Softmax, so the network output is a DLA tensor."""
    m = ZOO["lenet"](0)
    soft = [n for n in m.graph.node if n.op_type == "Softmax"][0]
    m.graph.node.remove(soft)
    out = m.graph.output[0]
    out.name = soft.input[0]
    return m


@pytest.fixture()
def lenet_logits(tmp_path):
    path = tmp_path / "lenet_logits.onnx"
    onnx.save(_logits_model(), path)
    x = np.random.default_rng(3).standard_normal((1, 1, 28, 28)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    return path, tmp_path / "x.npy"


@pytest.mark.parametrize("config", ["nv_small", "nv_full"])
def test_run_equals_trace_replay(lenet_logits, tmp_path, config, capsys) -> None:
    model, x = lenet_logits
    out, traces = tmp_path / "net.dla", tmp_path / "traces"
    assert dla(["compile", str(model), "--config", config, "-o", str(out), "--calib-random", "8",
                "--emit-trace", str(traces), "--input", str(x)]) == 0
    assert dla(["run", str(out), "--input", str(x), "--output", str(tmp_path / "y.npy")]) == 0
    y = np.load(tmp_path / "y.npy")
    capsys.readouterr()
    # Every task's trace passes (its check_crc compares the bytes the run produced).
    assert dla(["trace", str(traces)]) == 0
    summary = capsys.readouterr().out
    ld = read_loadable(out)
    n_dla = sum(1 for t in ld.tasks if t.WhichOneof("kind") == "dla")
    assert f"{n_dla} passed, 0 failed" in summary
    # And explicitly: replay the last trace on a fresh golden model and read the output tensor's bytes.
    from golden.config import get_config
    from golden.layout import read_cube
    from golden.regs import register_map
    from runtime.golden_target import GoldenTarget
    from runtime.player import play
    from runtime.trace import parse_cfg
    import asyncio

    cfgs = sorted(traces.rglob("*.cfg"))
    hw = get_config(config)
    target = GoldenTarget(hw)
    asyncio.run(play(parse_cfg(cfgs[-1], register_map(hw.address_map)), target))
    t = {t.name: t for t in ld.tensors}[ld.outputs[0]]
    q = read_cube(target.dla.mem.dram, place_regions(ld.regions).address(t.region, t.offset),
                  tensor_layout(t))[:t.channels]
    assert np.array_equal(y.reshape(-1), (q.reshape(-1) * np.float32(t.scale)).astype(np.float32))


def _expect_user_error(argv, capsys, *needles: str) -> str:
    rc = dla(argv)
    err = capsys.readouterr().err.strip()
    assert rc == 2, err
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    for needle in needles:
        assert needle in err, err
    return err


def test_bad_models_fail_cleanly(tmp_path, capsys) -> None:
    out = tmp_path / "out.dla"
    good = ZOO["lenet"](0)
    raw = good.SerializeToString()
    (tmp_path / "trunc.onnx").write_bytes(raw[: len(raw) // 3])
    _expect_user_error(["compile", str(tmp_path / "trunc.onnx"), "--config", "nv_small", "-o", str(out)], capsys,
                       "trunc.onnx")
    # Unsupported op: names the node and the op.
    g = helper.make_graph([helper.make_node("Resize", ["data", "", "sc"], ["y"], name="up")], "g",
                          [helper.make_tensor_value_info("data", TensorProto.FLOAT, [1, 3, 8, 8])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3, 16, 16])],
                          [helper.make_tensor("sc", TensorProto.FLOAT, [4], [1, 1, 2, 2])])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), tmp_path / "resize.onnx")
    _expect_user_error(["compile", str(tmp_path / "resize.onnx"), "--config", "nv_small", "-o", str(out)], capsys,
                       "up", "Resize")
    # Caffe: a truncated prototxt and a truncated caffemodel.
    proto, model = to_caffe(good)
    (tmp_path / "deploy.prototxt").write_text(proto)
    (tmp_path / "net.caffemodel").write_bytes(model[: len(model) // 2])
    (tmp_path / "cut.prototxt").write_text(proto[: len(proto) // 2])
    _expect_user_error(["compile", str(tmp_path / "cut.prototxt"), "--config", "nv_small", "-o", str(out)], capsys,
                       "cut.prototxt")
    _expect_user_error(["compile", str(tmp_path / "deploy.prototxt"), "--weights", str(tmp_path / "net.caffemodel"),
                        "--config", "nv_small", "-o", str(out)], capsys, "net.caffemodel")
    # Shape mismatch inside the model: names the layer.
    g = helper.make_graph([helper.make_node("Add", ["data", "other"], ["y"], name="badd")], "g",
                          [helper.make_tensor_value_info("data", TensorProto.FLOAT, [1, 3, 8, 8]),
                           helper.make_tensor_value_info("other", TensorProto.FLOAT, [1, 4, 8, 8])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3, 8, 8])])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), tmp_path / "mismatch.onnx")
    _expect_user_error(["compile", str(tmp_path / "mismatch.onnx"), "--config", "nv_small", "-o", str(out)], capsys,
                       "badd")
    assert not out.exists()


def test_bad_loadable_and_input_fail_cleanly(lenet_logits, tmp_path, capsys) -> None:
    model, x = lenet_logits
    out = tmp_path / "net.dla"
    assert dla(["compile", str(model), "--config", "nv_small", "-o", str(out), "--calib-random", "2"]) == 0
    raw = out.read_bytes()
    (tmp_path / "cut.dla").write_bytes(raw[:-10])
    y = tmp_path / "y.npy"
    _expect_user_error(["run", str(tmp_path / "cut.dla"), "--input", str(x), "--output", str(y)], capsys, "cut.dla")
    np.save(tmp_path / "wrong.npy", np.zeros((1, 3, 28, 28), np.float32))
    _expect_user_error(["run", str(out), "--input", str(tmp_path / "wrong.npy"), "--output", str(y)], capsys, "data")
    assert not y.exists()


def test_calibration_sources_and_quant_modes(lenet_logits, tmp_path, capsys) -> None:
    """--calib-images (.npy files), --calib-table (NVDLA-style JSON) and --quant per-kernel all compile and
    run; a table entry sets that tensor's scale exactly."""
    import json

    model, x = lenet_logits
    images = tmp_path / "calib"
    images.mkdir()
    rng = np.random.default_rng(0)
    for i in range(3):
        np.save(images / f"{i}.npy", rng.standard_normal((1, 28, 28)).astype(np.float32))
    table = tmp_path / "calib.json"
    table.write_text(json.dumps({"data": {"scale": 0.05}, "conv1": {"min": -3.0, "max": 6.35}}))
    for extra in (["--calib-images", str(images)], ["--calib-table", str(table)], ["--quant", "per-kernel"]):
        out = tmp_path / "net.dla"
        assert dla(["compile", str(model), "--config", "nv_small", "-o", str(out)] + extra) == 0, extra
        assert dla(["run", str(out), "--input", str(x)]) == 0
        ld = read_loadable(out)
        assert ld.quantization == ("per-kernel" if "--quant" in extra else "per-filter")
        if "--calib-table" in extra:
            assert abs({t.name: t for t in ld.tensors}["data"].scale - 0.05) < 1e-7
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    _expect_user_error(["compile", str(model), "--config", "nv_small", "-o", str(tmp_path / "x.dla"),
                        "--calib-table", str(bad)], capsys, "bad.json")
