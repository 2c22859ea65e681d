"""The loadable executor on hand-built loadables (no compiler): PDP and SDP register programs from
``regressions.lib.programs`` relocated against regions, a CPU task, batches, errors, and emitted traces that
``dla trace`` plays back."""
from __future__ import annotations

import asyncio
from pathlib import Path

import numpy as np
import pytest

from compiler.codegen.pack import pack_feature, strides
from golden.config import get_config
from golden.regs import register_map
from loadable import loadable_pb2 as pb
from regressions.lib.programs import (
    DST_BASE,
    OPERAND_BASE,
    SRC_BASE,
    PoolLayer,
    LayerTest,
    SdpLayer,
    program_pdp,
    program_sdp,
)
from loadable.format import write_loadable
from regressions.lib.reference.sdp import SdpParams, SdpXParams, sdp
from runtime.errors import ExecutionError
from runtime.executor import Network, dequantize, load, quantize
from runtime.golden_target import GoldenTarget

HW = get_config("nv_small")
ATOM = HW.atom_elements()
REGMAP = register_map(HW.address_map)
IN_SCALE, SDP_OUT_SCALE = 0.05, 0.1
C, H, W = 12, 8, 8


# ---- hand-built loadables ----------------------------------------------------------------------------
def dla_op(name: str, program: LayerTest, relocs: dict[int, tuple[int, int]], group: int, done_bit: int,
           inputs: list[str], outputs: list[str], engines: list[str]) -> pb.DlaOp:
    """A LayerTest's writes as a DlaOp: names resolved to addresses, absolute buffer addresses turned into
    relocations ({absolute address: (region, offset)}), S_POINTER set to ``group`` (the ping-pong group a
    fresh DLA uses for this op), waiting for ``done_bit + group``."""
    op = pb.DlaOp(name=name, engines=engines, interrupt_mask=1 << (done_bit + group), inputs=inputs,
                  outputs=outputs, layer=name)
    for reg_name, value in program.writes:
        addr, reg = REGMAP.resolve(reg_name)
        w = op.writes.add(addr=addr, value=value, name=reg.full_name)
        if reg.name == "S_POINTER":
            w.value = group
        elif reg.name.endswith("_ADDR_LOW") and value in relocs:
            region, offset = relocs[value]
            w.value = 0
            w.reloc.region, w.reloc.offset = region, offset
    return op


def feature(msg: pb.Loadable, name: str, shape: tuple[int, ...], region: int, offset: int, scale: float) -> pb.Tensor:
    c, h, w = (shape[1], shape[2], shape[3]) if len(shape) == 4 else (shape[1], 1, 1)
    line, surf = strides(c, h, w, ATOM)
    return msg.tensors.add(name=name, shape=shape, storage=pb.Tensor.FEATURE, dtype=pb.Tensor.INT8, scale=scale,
                           region=region, offset=offset, channels=c, height=h, width=w, line_stride=line,
                           surface_stride=surf, atom=ATOM)


def cube_bytes(c: int, h: int, w: int) -> int:
    return -(-c // ATOM) * strides(c, h, w, ATOM)[1]


def pool_loadable() -> pb.Loadable:
    """x (1,12,8,8) -[task 0: max 2x2/2]-> p1 (scratch) -[task 1: max 2x2/2]-> y (output) -[task 2: CPU
    Softmax]-> prob (host). Task 1 is PDP's second operation, so it runs in ping-pong group 1."""
    msg = pb.Loadable(hw_config="nv_small", model_name="pools", source="hand-built", quantization="per-kernel")
    msg.regions.add(id=0, name="input", kind=pb.Region.INPUT, size=cube_bytes(C, H, W), alignment=32, ram_type=1)
    msg.regions.add(id=1, name="scratch", kind=pb.Region.SCRATCH, size=cube_bytes(C, 4, 4), alignment=32, ram_type=1)
    msg.regions.add(id=2, name="output", kind=pb.Region.OUTPUT, size=cube_bytes(C, 2, 2), alignment=32, ram_type=1)
    feature(msg, "x", (1, C, H, W), 0, 0, IN_SCALE)
    feature(msg, "p1", (1, C, 4, 4), 1, 0, IN_SCALE)
    feature(msg, "y", (1, C, 2, 2), 2, 0, IN_SCALE)
    msg.tensors.add(name="prob", shape=(1, C, 2, 2), storage=pb.Tensor.HOST, dtype=pb.Tensor.FLOAT32)
    for tid, (src, dst, hw_in, group) in enumerate((("x", "p1", (H, W), 0), ("p1", "y", (4, 4), 1))):
        prog = program_pdp(HW, PoolLayer(np.zeros((C, *hw_in), dtype=np.int64), "max", (2, 2), (2, 2)))
        src_region, dst_region = {"x": 0, "p1": 1}[src], {"p1": 1, "y": 2}[dst]
        task = msg.tasks.add(id=tid, name=f"pool{tid + 1}", deps=[tid - 1] if tid else [])
        task.dla.ops.append(dla_op(f"pool{tid + 1}", prog, {SRC_BASE: (src_region, 0), DST_BASE: (dst_region, 0)},
                                   group, 4, [src], [dst], ["PDP_RDMA", "PDP"]))
    cpu = msg.tasks.add(id=2, name="softmax", deps=[1]).cpu
    cpu.op = "Softmax"
    cpu.inputs.append("y")
    cpu.outputs.append("prob")
    cpu.attrs["axis"].i = 1
    msg.inputs.append("x")
    msg.outputs.extend(["y", "prob"])
    msg.plan.peak_bytes = cube_bytes(C, 4, 4)
    msg.plan.unshared_bytes = cube_bytes(C, 4, 4)
    return msg


def sdp_params() -> tuple[SdpParams, np.ndarray]:
    """X1: per-channel multiply by a MEM operand (from the WEIGHTS region) >> 2, then ReLU."""
    mul = (np.arange(C) % 5 + 1).astype(np.int64)
    x1 = SdpXParams(bypass=False, alu_bypass=True, mul_bypass=False, mul_operand=mul, mul_shift=2, relu_bypass=False)
    return SdpParams(x1=x1), mul


def sdp_loadable() -> pb.Loadable:
    params, _ = sdp_params()
    prog = program_sdp(HW, SdpLayer(np.zeros((C, 4, 4), dtype=np.int64), params))
    operand = prog.memory[1][1]
    msg = pb.Loadable(hw_config="nv_small", model_name="sdp", source="hand-built", quantization="per-filter")
    msg.regions.add(id=5, name="weights", kind=pb.Region.WEIGHTS, size=len(operand) + 100, alignment=64,
                    content=operand, ram_type=1)
    msg.regions.add(id=0, name="input", kind=pb.Region.INPUT, size=cube_bytes(C, 4, 4), ram_type=1)
    msg.regions.add(id=1, name="output", kind=pb.Region.OUTPUT, size=cube_bytes(C, 4, 4), ram_type=1)
    feature(msg, "data", (1, C, 4, 4), 0, 0, IN_SCALE)
    feature(msg, "out", (1, C, 4, 4), 1, 0, SDP_OUT_SCALE)
    task = msg.tasks.add(id=0, name="mul_relu")
    task.dla.ops.append(dla_op("mul_relu", prog, {SRC_BASE: (0, 0), DST_BASE: (1, 0), OPERAND_BASE: (5, 0)},
                               0, 0, ["data"], ["out"], ["SDP_RDMA", "SDP"]))
    msg.inputs.append("data")
    msg.outputs.append("out")
    msg.plan.weight_bytes = len(operand)
    return msg


def softmax(x: np.ndarray, axis: int) -> np.ndarray:
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


STUB_KERNELS = {"Softmax": lambda ins, attrs: [softmax(ins[0], attrs["axis"])]}


# ---- independent expectations ------------------------------------------------------------------------
def maxpool2(q: np.ndarray) -> np.ndarray:
    n, c, h, w = q.shape
    return q.reshape(n, c, h // 2, 2, w // 2, 2).max(axis=(3, 5))


def expected_pool(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    q = np.clip(np.rint(x.astype(np.float64) / np.float32(IN_SCALE)), -128, 127).astype(np.int64)
    y = maxpool2(maxpool2(q)).astype(np.float32) * np.float32(IN_SCALE)
    return y, softmax(y, 1)


def expected_sdp(x: np.ndarray) -> np.ndarray:
    params, _ = sdp_params()
    q = np.clip(np.rint(x.astype(np.float64) / np.float32(IN_SCALE)), -128, 127).astype(np.int64)
    return np.stack([sdp(s, params) for s in q]).astype(np.float32) * np.float32(SDP_OUT_SCALE)


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(7)


@pytest.fixture
def pool_file(tmp_path) -> Path:
    path = tmp_path / "pools.dla"
    write_loadable(path, pool_loadable())
    return path


@pytest.fixture
def sdp_file(tmp_path) -> Path:
    path = tmp_path / "sdp.dla"
    write_loadable(path, sdp_loadable())
    return path


# ---- tests ------------------------------------------------------------------------------------------------
def test_quantize_rounds_half_to_even_and_saturates():
    q = quantize(np.array([0.25, 0.75, -0.25, 100.0, -100.0, 0.049]), 0.5)
    assert q.dtype == np.int8 and q.tolist() == [0, 2, 0, 127, -128, 0]
    assert dequantize(q, 0.5).dtype == np.float32


def test_two_pdp_tasks_and_a_cpu_softmax_match_numpy(pool_file, rng):
    net = load(pool_file, kernels=STUB_KERNELS)
    x = rng.normal(0, 2, (1, C, H, W)).astype(np.float32)
    out = net.run(x)
    y, prob = expected_pool(x)
    assert set(out) == {"y", "prob"}
    assert out["y"].dtype == np.float32 and out["y"].shape == (1, C, 2, 2)
    np.testing.assert_array_equal(out["y"], y)
    np.testing.assert_allclose(out["prob"], prob, rtol=1e-6)


def test_feature_layout_matches_pack_feature(rng):
    """The executor's vectorized packing is NVDLA's layout (12 channels = 2 surfaces of 8, lanes 12..15 zero)."""
    net = Network(pool_loadable(), kernels=STUB_KERNELS)
    target = GoldenTarget(HW)
    x = rng.normal(0, 2, (1, C, H, W)).astype(np.float32)
    from runtime.executor import _Execution

    ex = _Execution(net, target, 10**9, None, (0, 1))
    asyncio.run(ex.load_regions())
    target.dla.mem.write(net.placement.base[0], b"\xff" * net.regions[0].size)  # padding lanes must be cleared
    asyncio.run(ex.write_float("x", x, "input"))
    raw = target.dla.mem.dram.read_bytes(net.placement.base[0], net.regions[0].size)
    assert raw == pack_feature(quantize(x[0], IN_SCALE).astype(np.int64), ATOM)


def test_batch_runs_each_sample_and_stacks(pool_file, rng):
    net = load(pool_file, kernels=STUB_KERNELS)
    x = rng.normal(0, 2, (3, C, H, W)).astype(np.float32)
    out = net.run({"x": x})
    y, prob = expected_pool(x)
    assert out["y"].shape == (3, C, 2, 2) and out["prob"].shape == (3, C, 2, 2)
    np.testing.assert_array_equal(out["y"], y)
    np.testing.assert_allclose(out["prob"], prob, rtol=1e-6)


def test_three_d_input_gets_a_batch_axis(pool_file, rng):
    net = load(pool_file, kernels=STUB_KERNELS)
    x = rng.normal(0, 2, (C, H, W)).astype(np.float32)
    np.testing.assert_array_equal(net.run(x)["y"], expected_pool(x[None])[0])


def test_sdp_with_weights_operand_matches_reference(sdp_file, rng):
    net = load(sdp_file)
    x = rng.normal(0, 2, (2, C, 4, 4)).astype(np.float32)
    out = net.run(x)
    np.testing.assert_array_equal(out["out"], expected_sdp(x))
    assert (out["out"] >= 0).all() and out["out"].any()


def test_regions_are_placed_aligned_from_dram_base(sdp_file):
    net = load(sdp_file)
    bases = net.placement.base
    assert bases[5] == 0x8000_0000
    assert bases[0] % 4096 == 0 and bases[0] >= bases[5] + net.regions[5].size
    assert bases[1] % 4096 == 0 and bases[1] >= bases[0] + net.regions[0].size


@pytest.mark.parametrize("bad, msg", [
    ((1, C, H, W + 1), "input 'x': expected shape (N, 12, 8, 8), got (1, 12, 8, 9)"),
    ((C, H), "input 'x': expected shape (N, 12, 8, 8), got (12, 8)"),
    ((2, 1, C, H, W), "input 'x': expected shape (N, 12, 8, 8), got (2, 1, 12, 8, 8)"),
])
def test_wrong_input_shape_names_input_and_shape(pool_file, bad, msg):
    net = load(pool_file, kernels=STUB_KERNELS)
    with pytest.raises(ExecutionError) as err:
        net.run(np.zeros(bad, dtype=np.float32))
    assert str(err.value) == msg


def test_input_name_and_value_errors(pool_file):
    net = load(pool_file, kernels=STUB_KERNELS)
    x = np.zeros((1, C, H, W), dtype=np.float32)
    with pytest.raises(ExecutionError, match="unknown input 'z'"):
        net.run({"x": x, "z": x})
    with pytest.raises(ExecutionError, match="missing input 'x'"):
        net.run({})
    with pytest.raises(ExecutionError, match="NaN or infinite"):
        net.run(np.full((1, C, H, W), np.nan, dtype=np.float32))


def test_missing_cpu_kernel_is_an_execution_error(pool_file):
    net = load(pool_file, kernels={})
    with pytest.raises(ExecutionError, match="no CPU kernel for op 'Softmax'"):
        net.run(np.zeros((1, C, H, W), dtype=np.float32))


def test_kernel_returning_wrong_size_is_reported(pool_file):
    net = load(pool_file, kernels={"Softmax": lambda ins, attrs: [np.zeros(3)]})
    with pytest.raises(ExecutionError, match="tensor 'prob' has shape"):
        net.run(np.zeros((1, C, H, W), dtype=np.float32))


def test_attrs_convert_to_python_values():
    from runtime.cpu_ops import attrs_to_dict

    cpu = pb.CpuTask(op="X")
    cpu.attrs["i"].i = 3
    cpu.attrs["f"].f = 0.5
    cpu.attrs["s"].s = "nearest"
    cpu.attrs["ints"].ints.v.extend([1, 2])
    cpu.attrs["floats"].floats.v.extend([0.25])
    assert attrs_to_dict(cpu.attrs) == {"f": 0.5, "floats": (0.25,), "i": 3, "ints": (1, 2), "s": "nearest"}


def test_progress_is_called_per_task(pool_file):
    net = load(pool_file, kernels=STUB_KERNELS)
    seen = []
    net.run(np.zeros((2, C, H, W), dtype=np.float32), progress=lambda i, n, t: seen.append((i, n, t.name)))
    assert seen == [(1, 6, "pool1"), (2, 6, "pool2"), (3, 6, "softmax"), (4, 6, "pool1"), (5, 6, "pool2"),
                    (6, 6, "softmax")]


def test_reused_target_rebases_ping_pong_groups(pool_file, rng):
    """One Target instance for several runs: the PDP CONSUMER group is where the last run left it (after
    an odd number of operations on a target that ran before), and results stay identical."""
    net = load(pool_file, kernels=STUB_KERNELS)
    target = GoldenTarget(HW)
    x = rng.normal(0, 2, (1, C, H, W)).astype(np.float32)
    first = net.run(x, target=target)
    # one extra PDP operation leaves CONSUMER at 1 (as a network with an odd number of PDP ops would)
    asyncio.run(_one_pdp(net, target))
    assert target.dla.read("PDP.S_POINTER") >> 16 == 1
    second = asyncio.run(net.run_async(x, target=target))
    np.testing.assert_array_equal(first["y"], second["y"])
    np.testing.assert_array_equal(second["y"], expected_pool(x)[0])


async def _one_pdp(net: Network, target: GoldenTarget) -> None:
    from runtime.executor import _Execution

    ex = _Execution(net, target, 10**9, None, (0, 1))
    await ex.rebase_groups()
    await ex.run_dla(net.msg.tasks[0])


def test_run_async_inside_a_loop_and_run_refuses_it(pool_file):
    net = load(pool_file, kernels=STUB_KERNELS)
    x = np.zeros((1, C, H, W), dtype=np.float32)

    async def inside() -> dict[str, np.ndarray]:
        with pytest.raises(ExecutionError, match="await Network.run_async"):
            net.run(x)
        return await net.run_async(x, target=GoldenTarget(HW))

    assert asyncio.run(inside())["y"].shape == (1, C, 2, 2)


def test_target_by_unknown_name(pool_file):
    with pytest.raises(ExecutionError, match="target 'nonesuch' cannot run loadables by name"):
        load(pool_file).run(np.zeros((1, C, H, W), dtype=np.float32), target="nonesuch")


def test_interrupt_that_never_comes_is_an_execution_error(pool_file):
    net = load(pool_file, kernels=STUB_KERNELS)
    net.msg.tasks[0].dla.ops[0].interrupt_mask = 1 << 2  # CDP: never raised by a PDP op
    with pytest.raises(ExecutionError, match=r"task 0 \('pool1'\) op 'pool1': InterruptTimeout"):
        net.run(np.zeros((1, C, H, W), dtype=np.float32))


def test_illegal_register_program_is_an_execution_error(pool_file):
    net = load(pool_file, kernels=STUB_KERNELS)
    out_width = REGMAP.address("PDP", "D_DATA_CUBE_OUT_WIDTH")
    for w in net.msg.tasks[0].dla.ops[0].writes:
        if w.addr == out_width:
            w.value = 6  # 7 columns out of an 8-wide 2x2/2 pooling: the PDP model refuses it
    with pytest.raises(ExecutionError, match=r"task 0 \('pool1'\) op 'pool1': ConfigError: PDP.D_DATA_CUBE_OUT_WIDTH"):
        net.run(np.zeros((1, C, H, W), dtype=np.float32))


def test_default_cpu_kernels_come_from_float_exec(pool_file):
    fe = pytest.importorskip("floatops.kernels")
    if "Softmax" not in fe.KERNELS:
        pytest.skip("float_exec has no Softmax yet")
    x = np.random.default_rng(1).normal(0, 2, (1, C, H, W)).astype(np.float32)
    out = load(pool_file).run(x)
    np.testing.assert_allclose(out["prob"], expected_pool(x)[1], rtol=1e-5, atol=1e-7)


# ---- traces ------------------------------------------------------------------------------------------------
def test_emit_trace_writes_self_contained_traces_that_pass(pool_file, tmp_path, rng, capsys):
    from app.cli import main

    net = load(pool_file, kernels=STUB_KERNELS)
    x = rng.normal(0, 2, (1, C, H, W)).astype(np.float32)
    cfgs = net.emit_trace(x, tmp_path / "traces")
    assert [c.name for c in cfgs] == ["task_000_pool1.cfg", "task_001_pool2.cfg"]
    assert all(c.parent.parent == tmp_path / "traces" / "nv_small" for c in cfgs)
    text = cfgs[1].read_text()
    # the second PDP op ran in group 1; the trace re-bases it to group 0 of a fresh DLA
    assert "reg_write(NVDLA_PDP.S_POINTER_0, 0x0);" in text and "intr_notify(PDP_0, sync_id_0);" in text
    assert "mem_load(pri_mem, " in text and "check_crc(sync_id_0, pri_mem, " in text
    assert not list((tmp_path).glob(".traces*")), "temp folder left behind"
    assert main(["trace", str(tmp_path / "traces"), "-q"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out == ["PASS  task_000_pool1", "PASS  task_001_pool2", "2 passed, 0 failed, 0 skipped"]


def test_emit_trace_with_weights_passes_and_a_corrupted_crc_fails(sdp_file, tmp_path, rng, capsys):
    from app.cli import main

    net = load(sdp_file)
    cfgs = net.emit_trace(rng.normal(0, 2, (1, C, 4, 4)).astype(np.float32), tmp_path / "t")
    assert len(cfgs) == 1 and cfgs[0].read_text().count("mem_load(") == 2  # weights + input
    assert main(["trace", str(tmp_path / "t"), "-q"]) == 0
    cfg = cfgs[0]
    cfg.write_text(cfg.read_text().replace("check_crc(sync_id_0, pri_mem, 0x", "check_crc(sync_id_0, pri_mem, 0x1"))
    capsys.readouterr()
    assert main(["trace", str(tmp_path / "t"), "-q"]) == 1


def test_emit_trace_replaces_old_traces_and_leaves_nothing_on_failure(pool_file, tmp_path, rng):
    net = load(pool_file, kernels=STUB_KERNELS)
    x = rng.normal(0, 2, (1, C, H, W)).astype(np.float32)
    d = tmp_path / "tr"
    net.emit_trace(x, d)
    stale = d / "nv_small" / "task_099_old"
    stale.mkdir()
    net.emit_trace(x, d)
    assert not stale.exists()
    bad = load(pool_file, kernels={})  # the CPU task fails after the DLA tasks ran
    with pytest.raises(ExecutionError):
        bad.emit_trace(x, tmp_path / "never")
    assert not (tmp_path / "never").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pools.dla", "tr"]


def strided_loadable() -> pb.Loadable:
    """v (1, 20) -> CPU Scale2 -> w (1, 20); both folded to 20x1x1 cubes with padded line/surface strides."""
    msg = pb.Loadable(hw_config="nv_small", model_name="fc")
    msg.regions.add(id=0, name="io", kind=pb.Region.SCRATCH, size=1024, ram_type=1)
    for name, off, scale in (("v", 0, 0.02), ("w", 512, 0.04)):
        msg.tensors.add(name=name, shape=(1, 20), storage=pb.Tensor.FEATURE, dtype=pb.Tensor.INT8, scale=scale,
                        region=0, offset=off, channels=20, height=1, width=1, line_stride=16, surface_stride=48,
                        atom=ATOM)
    cpu = msg.tasks.add(id=0, name="scale2").cpu
    cpu.op, cpu.inputs[:], cpu.outputs[:] = "Scale2", ["v"], ["w"]
    msg.inputs.append("v")
    msg.outputs.append("w")
    return msg


def test_folded_2d_tensors_with_padded_strides_round_trip(rng):
    kernels = {"Scale2": lambda ins, attrs: [ins[0] * 2]}
    net = Network(strided_loadable(), kernels=kernels)
    x = rng.uniform(-2, 2, (4, 20)).astype(np.float32)
    out = net.run(x)["w"]
    q = np.clip(np.rint(x.astype(np.float64) / np.float32(0.02)), -128, 127)
    want = np.clip(np.rint(q * np.float32(0.02) * 2 / np.float32(0.04)), -128, 127) * np.float32(0.04)
    assert out.shape == (4, 20)
    np.testing.assert_allclose(out, want.astype(np.float32), rtol=1e-6)


def test_write_feature_keeps_gap_bytes_and_zeroes_padding_lanes():
    from runtime.executor import _Execution

    net = Network(strided_loadable(), kernels={})
    target = GoldenTarget(HW)
    ex = _Execution(net, target, 10**9, None, (0, 1))
    base = net.placement.base[0]
    target.dla.mem.write(base, b"\xab" * 1024)
    asyncio.run(ex.write_feature("v", np.arange(1, 21, dtype=np.int8)))
    raw = np.frombuffer(target.dla.mem.dram.read_bytes(base, 144), dtype=np.uint8)
    surfaces = raw.reshape(3, 48)  # 3 surfaces of 8 lanes, 48 bytes apart
    assert surfaces[0, :8].tolist() == list(range(1, 9)) and surfaces[1, :8].tolist() == list(range(9, 17))
    assert surfaces[2, :8].tolist() == [17, 18, 19, 20, 0, 0, 0, 0]  # padding lanes zero
    assert (surfaces[:, 8:] == 0xAB).all()  # bytes between surfaces untouched
    assert asyncio.run(ex.read_feature("v")).reshape(-1).tolist() == list(range(1, 21))
