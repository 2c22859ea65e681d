"""``dla compile --format nvdla`` (``runtime.nvdla.export``): compiled networks as NVDLA flatbuffer loadables.

Every zoo network (logits: the softmax is a CPU task NVDLA's loadables cannot hold) compiled for nv_small
and nv_full in int8, and for nv_full in fp16, exported with a sample baked into its input memory and run
by the kmd firmware model on golden, writes exactly the bytes our own loadable writes for that sample.
What the kmd descriptors cannot say is refused naming the operation.
"""
from __future__ import annotations

import functools
from pathlib import Path

import numpy as np
import onnx
import pytest

from compiler.driver import compile_graph, random_inputs
from compiler.errors import CompileError
from compiler.frontend import onnx as onnx_frontend
from golden.config import get_config
from regressions.lib.zoo import models as zoo
from regressions.lib.zoo.imagenet import without_softmax
from runtime.executor import FEATURE_NUMPY, Network
from runtime.nvdla import fbs
from runtime.nvdla.export import NotExpressible, export
from runtime.nvdla.run import NvdlaNetwork
from runtime.suite import TARGETS

NETS = ("lenet", "poolnet", "resnet", "mobilenet", "inception")
CASES = [(n, "nv_small", "int8") for n in NETS] + [(n, "nv_full", "int8") for n in NETS] \
    + [(n, "nv_full", "fp16") for n in NETS]


@functools.lru_cache(maxsize=None)
def compiled(name: str, config: str, precision: str, profile: str = "default"):
    g = onnx_frontend.load(without_softmax(getattr(zoo, name)(0)))
    calib = random_inputs(g, 4, seed=1) if precision != "fp16" else None
    ld, _, _ = compile_graph(g, config, calib_inputs=calib, precision=precision, firmware_pdp=True, profile=profile)
    return ld


def sample(net: Network) -> np.ndarray:
    shape = net.input_shapes()[net.inputs[0]]
    return np.random.default_rng(5).standard_normal(shape).astype(np.float32)


def nvdla_output(blob: bytes, net: Network, config: str) -> np.ndarray:
    """The exported loadable's output, run by the firmware model on golden, as our tensor's elements."""
    hw = get_config(config)
    nv = NvdlaNetwork(fbs.parse(blob))
    result = nv.run(TARGETS["golden"](hw), hw=hw)
    (out,) = result.outputs
    assert all(nv.dimgs(result))  # NVDLA's runtime can dump it (the tensor's data type is the schema's)
    t = net.tensors[net.outputs[0]]
    data = np.frombuffer(out.data, dtype=np.uint8)
    elem = FEATURE_NUMPY[t.dtype]
    off = net.offsets(t)[: t.channels]
    return np.ascontiguousarray(np.stack([data[off + b] for b in range(elem.itemsize)], -1)).view(elem)[..., 0]


@pytest.mark.parametrize("name,config,precision", CASES)
def test_exported_network_writes_what_our_loadable_writes(name: str, config: str, precision: str) -> None:
    ld = compiled(name, config, precision)
    net = Network(ld)
    x = sample(net)
    blob = export(ld, sample={net.inputs[0]: x})
    want = net.run({net.inputs[0]: x}, raw=True)[net.outputs[0]]
    got = nvdla_output(blob, net, config)
    assert got.reshape(-1).tobytes() == np.ascontiguousarray(want).reshape(-1).tobytes()


@pytest.mark.parametrize("name,precision,profile,feature", [
    ("mobilenet", "int8", "performance", "compressed weights"),
    ("resnet", "int16", "performance", "Winograd"),
    ("inception", "int8", "fast-math", "Winograd"),
    ("lenet", "fp16", "performance", "SDP->PDP on the fly"),
    ("poolnet", "int8", "performance", "SDP->PDP on the fly"),
])
def test_exported_optimised_network_writes_what_our_loadable_writes(name: str, precision: str, profile: str,
                                                                    feature: str) -> None:
    """Compressed weights (WMB/WGS memories), Winograd convolutions and SDP -> PDP on the fly (fused
    descriptors) survive the kmd descriptors."""
    from compiler.profiles import optimised_ops

    ld = compiled(name, "nv_full", precision, profile)
    assert optimised_ops(ld)[feature] >= 1
    net = Network(ld)
    x = sample(net)
    blob = export(ld, sample={net.inputs[0]: x})
    want = net.run({net.inputs[0]: x}, raw=True)[net.outputs[0]]
    assert nvdla_output(blob, net, "nv_full").reshape(-1).tobytes() == np.ascontiguousarray(want).reshape(-1).tobytes()


@pytest.mark.parametrize("name", ["lenet", "resnet"])
@pytest.mark.parametrize("config,precision,legacy", [("nv_small", "int8", False), ("nv_full", "int8", False),
                                                     ("nv_full", "fp16", False), ("nv_full", "fp16", True)])
def test_a_final_softmax_becomes_an_emu_task(name: str, config: str, precision: str, legacy: bool) -> None:
    """NVDLA's EMU softmax after the DLA task, on the logits where the DLA wrote them: its output (the logits'
    type) follows our loadable's float softmax within fp16 rounding, or within one int8 step of 1/127 (the
    EMU truncates toward zero)."""
    g = onnx_frontend.load(getattr(zoo, name)(0))
    calib = random_inputs(g, 4, seed=1) if precision != "fp16" else None
    ld, _, _ = compile_graph(g, config, calib_inputs=calib, precision=precision, firmware_pdp=True)
    assert [t.cpu.op for t in ld.tasks if t.WhichOneof("kind") == "cpu"] == ["Softmax"]
    net = Network(ld)
    x = sample(net)
    blob = export(ld, sample={net.inputs[0]: x}, legacy=legacy)
    hw = get_config(config)
    nv = NvdlaNetwork(fbs.parse(blob))
    result = nv.run(TARGETS["golden"](hw), hw=hw)
    assert sum(t.stats.ops.get("EMU_SOFTMAX", 0) for t in result.tasks) == 1
    (out,) = result.outputs
    want = net.run({net.inputs[0]: x})[net.outputs[0]].reshape(-1).astype(np.float64)
    if precision == "fp16":
        got = np.frombuffer(out.data, dtype="<f2")[:want.size].astype(np.float64)
        assert np.all(np.abs(got - want) <= 2.0 ** -11 * want + 1e-7)
    else:
        got = np.frombuffer(out.data, dtype=np.int8)[:want.size].astype(np.float64)
        assert np.all(np.abs(got - 127 * want) < 1 + 1e-9) and np.all(got >= 0)
    assert abs(got.sum() / (1 if precision == "fp16" else 127) - 1) < 0.1


def test_cpu_operations_are_refused_naming_the_task() -> None:
    g = onnx_frontend.load(without_softmax(zoo.inception(0)))  # LRN stays on the CPU in int16
    ld, _, _ = compile_graph(g, "nv_full", calib_inputs=random_inputs(g, 2, seed=1), precision="int16",
                             firmware_pdp=True)
    with pytest.raises(NotExpressible, match=r"task \d+ .*CPU operation LRN \(NVDLA loadables run only DLA tasks"):
        export(ld)
    g = onnx_frontend.load(zoo.lenet(0))  # a final softmax, but int16 logits: the EMU takes fp16 or int8
    ld, _, _ = compile_graph(g, "nv_full", calib_inputs=random_inputs(g, 2, seed=1), precision="int16",
                             firmware_pdp=True)
    with pytest.raises(NotExpressible, match=r"CPU operation Softmax: NVDLA's EMU takes fp16 or int8 cubes"):
        export(ld)


def test_averages_need_the_firmwares_reciprocals() -> None:
    """Without --format nvdla, an average may rescale in its reciprocals: the export names the register; with
    it, the compiler keeps the input's scale and the firmware's 1/kernel table, and an average whose edge
    windows count fewer taps is refused at compile time naming the layer."""
    g = onnx_frontend.load(without_softmax(zoo.poolnet(0)))
    ld, _, _ = compile_graph(g, "nv_small", calib_inputs=random_inputs(g, 4, seed=1))
    with pytest.raises(NotExpressible, match=r"op \d+ .*PDP.D_RECIP_KERNEL_WIDTH"):
        export(ld)
    m = without_softmax(zoo.poolnet(0))
    pool = next(n for n in m.graph.node if n.op_type == "AveragePool")
    del pool.attribute[:]
    pool.attribute.extend([onnx.helper.make_attribute("kernel_shape", [3, 3]),
                           onnx.helper.make_attribute("pads", [1, 1, 1, 1]),
                           onnx.helper.make_attribute("count_include_pad", 0)])
    g = onnx_frontend.load(m)
    with pytest.raises(CompileError, match=r"NVDLA's firmware programs reciprocals 1/kernel only"):
        compile_graph(g, "nv_small", calib_inputs=random_inputs(g, 2, seed=1), firmware_pdp=True)


def test_cli_writes_an_nvdla_loadable_dla_run_takes(tmp_path: Path, capsys) -> None:
    from app.cli import main

    model = tmp_path / "resnet.onnx"
    onnx.save(without_softmax(zoo.resnet(0)), model)
    x = tmp_path / "x.npy"
    np.save(x, np.random.default_rng(5).standard_normal((1, 3, 32, 32)).astype(np.float32))
    out = tmp_path / "resnet.nvdla"
    assert main(["compile", str(model), "--config", "nv_small", "--format", "nvdla", "--input", str(x),
                 "-o", str(out)]) == 0
    assert "an NVDLA loadable for nv_small" in capsys.readouterr().out
    assert main(["run", str(out), "--config", "nv_small", "--dimg", str(tmp_path / "dimg")]) == 0
    assert (tmp_path / "dimg" / "o_000000.dimg").stat().st_size > 0
    # a softmax network: the softmax is an EMU task
    full = tmp_path / "full.onnx"
    onnx.save(zoo.resnet(0), full)
    sm = tmp_path / "softmax.nvdla"
    assert main(["compile", str(full), "--config", "nv_small", "--format", "nvdla", "--input", str(x),
                 "-o", str(sm)]) == 0
    assert main(["run", str(sm), "--config", "nv_small", "--dimg", str(tmp_path / "dimg2")]) == 0
    # a CPU operation with no NVDLA equivalent: one line naming the task, exit 2, nothing written
    inc = tmp_path / "inception.onnx"
    onnx.save(without_softmax(zoo.inception(0)), inc)
    bad = tmp_path / "bad.nvdla"
    capsys.readouterr()
    assert main(["compile", str(inc), "--config", "nv_full", "--precision", "int16", "--format", "nvdla",
                 "-o", str(bad)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--format nvdla: task" in err[0] and "CPU operation LRN" in err[0]
    assert not bad.exists()


@pytest.mark.parametrize("config,precision", [("nv_small", "int8"), ("nv_full", "fp16")])
def test_dla_run_input_replaces_the_sample_the_loadable_carries(config: str, precision: str) -> None:
    """An input given to the NVDLA loadable (its tensor's own element type) runs exactly as the same
    network exported with that input baked in."""
    from runtime.executor import to_feature
    from runtime.nvdla.inputs import with_inputs

    ld = compiled("lenet", config, precision)
    net = Network(ld)
    x1, x2 = sample(net), np.random.default_rng(9).standard_normal(net.input_shapes()[net.inputs[0]])
    t = net.tensors[net.inputs[0]]
    given = to_feature(x2.astype(np.float32), t)  # int8 values, or fp16 values
    blob1, blob2 = export(ld, sample={net.inputs[0]: x1}), export(ld, sample={net.inputs[0]: x2.astype(np.float32)})
    replaced = with_inputs(fbs.parse(blob1), {"": given})
    hw = get_config(config)
    got = NvdlaNetwork(replaced).run(TARGETS["golden"](hw), hw=hw).outputs[0].data
    want = NvdlaNetwork(fbs.parse(blob2)).run(TARGETS["golden"](hw), hw=hw).outputs[0].data
    before = NvdlaNetwork(fbs.parse(blob1)).run(TARGETS["golden"](hw), hw=hw).outputs[0].data
    assert got == want and got != before


def test_dla_run_input_errors_are_one_line(tmp_path: Path, capsys) -> None:
    from app.cli import main

    ld = compiled("lenet", "nv_small", "int8")
    out = tmp_path / "lenet.nvdla"
    out.write_bytes(export(ld))
    shape = Network(ld).input_shapes()[ld.inputs[0]]
    good = tmp_path / "q.npy"
    np.save(good, np.random.default_rng(1).integers(-128, 128, size=shape).astype(np.int8))
    assert main(["run", str(out), "--config", "nv_small", "--input", str(good), "--dimg", str(tmp_path / "d")]) == 0
    capsys.readouterr()
    cases = {"float.npy": (np.zeros(shape, np.float32) + 0.5, "give integers"),
             "shape.npy": (np.zeros((1, 2, 28, 28), np.int8), "shape (1, 2, 28, 28)"),
             "range.npy": (np.full(shape, 300, np.int16), "outside int8")}
    for name, (arr, msg) in cases.items():
        np.save(tmp_path / name, arr)
        assert main(["run", str(out), "--config", "nv_small", "--input", str(tmp_path / name)]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and msg in err[0], err
    assert main(["run", str(out), "--config", "nv_small", "--input", f"nope={good}"]) == 2
    assert "no input tensor named 'nope'" in capsys.readouterr().err


@pytest.mark.parametrize("name,precision,overrides", [("lenet", "fp16", {"conv2": "int16"}),
                                                      ("resnet", "int16", {"conv2": "fp16", "conv6": "fp16"})])
def test_exported_mixed_precision_network_writes_what_our_loadable_writes(name: str, precision: str,
                                                                          overrides: dict) -> None:
    """int16/fp16 converters (CDMA's CVT from int16, SDP's INT16 output of fp16) survive the kmd descriptors."""
    g = onnx_frontend.load(without_softmax(getattr(zoo, name)(0)))
    ld, lowered, _ = compile_graph(g, "nv_full", precision=precision, firmware_pdp=True,
                                   precision_overrides=overrides)
    assert any("convert" in n.attrs for n in lowered.nodes)
    net = Network(ld)
    x = sample(net)
    blob = export(ld, sample={net.inputs[0]: x})
    want = net.run({net.inputs[0]: x}, raw=True)[net.outputs[0]]
    assert nvdla_output(blob, net, "nv_full").reshape(-1).tobytes() == np.ascontiguousarray(want).reshape(-1).tobytes()
