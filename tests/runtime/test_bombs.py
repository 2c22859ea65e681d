"""Memory bombs: tiny inputs that declare gigabytes. Each runs the real ``dla`` in a child under a 4 GiB
address-space limit and must end in one line naming the file:line, field or tensor, exit 2, with a peak RSS
far below what was asked for. Durations are printed (``-s``), never asserted."""
from __future__ import annotations

import os
import re
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from golden.config import NV_SMALL
from golden.crc import crc32_zeros
from golden.lut import LutRegisters
from loadable.format import encode_loadable
from regressions.lib.childrun import Child, run_dla
from regressions.lib.programs import LrnLayer, program_cdp
from runtime.nvdla import fbs
from tests.runtime.test_executor import pool_loadable
from tests.runtime.test_nvdla_loadable import _pdp_loadable

#: The peak RSS every refused bomb must stay under (the interpreter with numpy and onnx is ~100 MB).
RSS_LIMIT = 500 << 20
BUDGET_LINE = "exceeds the memory budget of"


def refused(child: Child, *message: str) -> str:
    """The child exited 2 with one line holding every part of ``message``, within RSS_LIMIT; returns it."""
    print(f"\n  refused in {child.seconds:.2f} s, peak RSS {child.max_rss >> 20} MiB")
    assert child.returncode == 2, (child.returncode, child.stdout, child.stderr)
    lines = child.error_lines()
    assert len(lines) == 1 and "Traceback" not in child.stderr, child.stderr
    for part in message:
        assert part in lines[0], (part, lines[0])
    assert child.max_rss < RSS_LIMIT, child.max_rss
    return lines[0]


def trace_dir(tmp_path: Path, lines: list[str], name: str = "bomb") -> Path:
    d = tmp_path / "nv_small" / name
    d.mkdir(parents=True)
    (d / f"{name}.cfg").write_text("\n".join(lines) + "\n")
    return d


# ---- traces ----------------------------------------------------------------------------------------------
FOUR_GIB_INIT = "mem_init(pri_mem, 0x80000000, 0x100000000, {fill});"
FOUR_GIB_CRC = "check_crc(NONE, pri_mem, 0x80000000, 0x100000000, {crc:#010x});"


def test_four_gib_zero_init_and_crc_cost_nothing(tmp_path):
    """NVDLA semantics kept: 4 GiB of zeros initialised and CRC-checked in a few MB (within a 64 MiB budget),
    and the CRC is right."""
    d = trace_dir(tmp_path, [FOUR_GIB_INIT.format(fill="ALL_ZERO"), FOUR_GIB_CRC.format(crc=crc32_zeros(0, 1 << 32))])
    child = run_dla("trace", "--max-memory", "64M", str(d))
    print(f"\n  4 GiB zero init + crc: {child.seconds:.2f} s, peak RSS {child.max_rss >> 20} MiB")
    assert child.returncode == 0, child.stdout + child.stderr
    assert "1 passed" in child.stdout
    assert child.max_rss < RSS_LIMIT


def test_four_gib_mem_init_over_the_budget_names_the_line(tmp_path):
    d = trace_dir(tmp_path, [FOUR_GIB_INIT.format(fill="ALL_ONE"), FOUR_GIB_CRC.format(crc=0)])
    refused(run_dla("trace", "--max-memory", "1G", str(d)),
            f"{d / 'bomb.cfg'}:1: mem_init size: 4 GiB {BUDGET_LINE} 1 GiB")


def test_default_budget_follows_the_address_space_limit(tmp_path):
    """No --max-memory: under the children's 4 GiB RLIMIT_AS the budget is 2 GiB, so a 4 GiB fill is refused
    by name instead of dying of MemoryError."""
    d = trace_dir(tmp_path, [FOUR_GIB_INIT.format(fill="ALL_ONE"), FOUR_GIB_CRC.format(crc=0)])
    refused(run_dla("trace", str(d)), f"bomb.cfg:1: mem_init size: 4 GiB {BUDGET_LINE} 2 GiB")


def test_pages_written_while_playing_count_against_the_budget(tmp_path):
    """Each mem_init fits, together they do not: the player names the line that would exceed the budget."""
    d = trace_dir(tmp_path, [f"mem_init(pri_mem, {0x80000000 + i * 0x6000000:#x}, 0x6000000, ALL_ONE);"
                             for i in range(3)] + ["check_crc(NONE, pri_mem, 0x80000000, 0x10, 0x0);"])
    refused(run_dla("trace", "--max-memory", "256M", str(d)),
            "bomb.cfg:3: pri_mem write at 0x8c000000 (memory in use): 288 MiB", BUDGET_LINE)


@pytest.mark.parametrize("line, message", [
    ("mem_init(pri_mem, -16, 0x100, ALL_ZERO);", "bomb.cfg:1: mem_init base -16 is negative"),
    ("check_crc(NONE, pri_mem, 0x80000000, -1, 0x0);", "bomb.cfg:1: check_crc size -1 is negative"),
    ("mem_init(pri_mem, 0x0, 0x10000000000, ALL_ZERO);", "bomb.cfg:1: mem_init size 0x10000000000 is beyond 2^40"),
    ("check_file(NONE, pri_mem, 0x20000000000, 4, \"x.dat\");", "bomb.cfg:1: check_file base 0x20000000000 is beyond"),
])
def test_negative_and_absurd_extents_are_format_errors(tmp_path, line, message):
    refused(run_dla("trace", str(trace_dir(tmp_path, [line]))), message)


def test_trace_that_is_a_link_to_dev_zero(tmp_path):
    d = tmp_path / "nv_small" / "bomb"
    d.mkdir(parents=True)
    os.symlink("/dev/zero", d / "bomb.cfg")
    refused(run_dla("trace", str(d)), "bomb.cfg:0: trace is a device, not a regular file")
    refused(run_dla("trace", "--config", "nv_small", str(d / "bomb.cfg")), "trace is a device, not a regular file")


def test_sparse_one_gib_data_file(tmp_path):
    d = trace_dir(tmp_path, ['mem_load(pri_mem, 0x80000000, "big.dat");',
                             "check_crc(NONE, pri_mem, 0x80000000, 0x10, 0x0);"])
    with open(d / "big.dat", "wb") as f:
        f.truncate(1 << 30)
    refused(run_dla("trace", "--max-memory", "1G", str(d)), "big.dat:0: parsing data file of 1 GiB", BUDGET_LINE)


def test_txn_load_mem_size_over_the_budget(tmp_path):
    d = tmp_path / "nv_full" / "bomb"
    d.mkdir(parents=True)
    (d / "input.txn").write_text("load_mem 0x80000000 0x100000000 data.dat\n")
    (d / "data.dat").write_text("0x00\n")
    refused(run_dla("trace", "--max-memory", "1G", str(d)), f"input.txn:1: load_mem size: 4 GiB {BUDGET_LINE}")


def test_max_memory_reaches_the_worker_processes(tmp_path):
    """With -j the budget travels to the workers (DLA_MAX_MEMORY): both traces refused, one line each."""
    for name in ("one", "two"):
        trace_dir(tmp_path, [FOUR_GIB_INIT.format(fill="ALL_ONE")], name)
    child = run_dla("trace", "-j", "2", "--max-memory", "1G", str(tmp_path / "nv_small"))
    print(f"\n  -j 2: {child.seconds:.2f} s")
    assert child.returncode == 2, child.stdout + child.stderr
    assert child.stderr.count(f"mem_init size: 4 GiB {BUDGET_LINE} 1 GiB") == 2, child.stderr


# ---- loadables ----------------------------------------------------------------------------------------------
def test_loadable_region_of_two_to_the_62_bytes(tmp_path):
    msg = pool_loadable()
    msg.regions[1].size = 1 << 62
    path = tmp_path / "bomb.dla"
    path.write_bytes(encode_loadable(msg))
    x = tmp_path / "x.npy"
    np.save(x, np.zeros((1, 12, 8, 8), dtype=np.float32))
    refused(run_dla("run", str(path), "--input", str(x)),
            f"{path}: regions[1].size (region 1 'scratch'): 4,194,304 TiB {BUDGET_LINE}")


def test_loadable_regions_whose_sum_exceeds_the_budget(tmp_path):
    msg = pool_loadable()
    for r in msg.regions:
        r.size = 600 << 20
    path = tmp_path / "bomb.dla"
    path.write_bytes(encode_loadable(msg))
    x = tmp_path / "x.npy"
    np.save(x, np.zeros((1, 12, 8, 8), dtype=np.float32))
    refused(run_dla("run", str(path), "--input", str(x), "--max-memory", "1G"),
            f"{path}: sum of regions[0..1].size: 1.17 GiB")


def test_nvdla_loadable_memory_of_a_terabyte(tmp_path):
    ld = fbs.parse(_pdp_loadable())
    ld.memories[1].size = 1 << 40
    path = tmp_path / "bomb.nvdla"
    path.write_bytes(fbs.build(ld))
    refused(run_dla("run", str(path), "--config", "nv_small"), f"memory_list[1].size (memory {ld.memories[1].id}): 1 TiB")


# ---- the compiler -----------------------------------------------------------------------------------------------
def test_calib_random_of_a_hundred_million(tmp_path):
    model = tmp_path / "tiny.prototxt"
    model.write_text('name: "tiny"\ninput: "data"\ninput_shape { dim: 1 dim: 4 dim: 1 dim: 1 }\n'
                     'layer { name: "fc" type: "InnerProduct" bottom: "data" top: "fc" '
                     'inner_product_param { num_output: 4 } }\n')
    refused(run_dla("compile", str(model), "--config", "nv_small", "-o", str(tmp_path / "o.dla"),
                    "--calib-random", "100000000", "--max-memory", "4G"),
            f"{model}: --calib-random 100000000: 100000000 samples of 528 bytes: 49.2 GiB {BUDGET_LINE}")
    assert not (tmp_path / "o.dla").exists()


def test_onnx_gemm_of_20000_by_20000(tmp_path):
    """A 180-byte model: ConstantOfShape makes the 20000x20000 weights of a Gemm."""
    shape = helper.make_node("Constant", [], ["s"], value=numpy_helper.from_array(np.array([20000, 20000], np.int64)))
    weights = helper.make_node("ConstantOfShape", ["s"], ["B"], value=numpy_helper.from_array(np.array([0.5], np.float32)))
    graph = helper.make_graph([shape, weights, helper.make_node("Gemm", ["x", "B"], ["y"])], "bomb",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 20000])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 20000])])
    model = tmp_path / "gemm.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), model)
    refused(run_dla("compile", str(model), "--config", "nv_small", "-o", str(tmp_path / "o.dla"), "--max-memory", "1G"),
            f"{model}: layer 'ConstantOfShape_1' (ConstantOfShape): constant of shape [20000, 20000] (float64): 2.98 GiB")


def test_caffe_inner_product_of_20000_by_20000(tmp_path):
    """Without a caffemodel the frontend draws random weights: refused before drawing 3 GB of them."""
    model = tmp_path / "fc.prototxt"
    model.write_text('name: "bomb"\ninput: "data"\ninput_shape { dim: 1 dim: 20000 dim: 1 dim: 1 }\n'
                     'layer { name: "fc" type: "InnerProduct" bottom: "data" top: "fc" '
                     'inner_product_param { num_output: 20000 } }\n')
    refused(run_dla("compile", str(model), "--config", "nv_small", "-o", str(tmp_path / "o.dla"), "--max-memory", "1G"),
            f"{model}: layer 'fc' (InnerProduct): random weights [20000, 20000], bias [20000]: 2.98 GiB")


def test_model_input_of_a_terabyte(tmp_path):
    model = tmp_path / "wide.prototxt"
    model.write_text('name: "wide"\ninput: "data"\ninput_shape { dim: 1 dim: 3 dim: 300000 dim: 300000 }\n'
                     'layer { name: "relu" type: "ReLU" bottom: "data" top: "out" }\n')
    refused(run_dla("compile", str(model), "--config", "nv_small", "-o", str(tmp_path / "o.dla")),
            f"{model}: input 'data' [1, 3, 300000, 300000] (float32): 1,006 GiB {BUDGET_LINE}")


def test_bad_max_memory_is_a_usage_error():
    child = run_dla("trace", "--max-memory", "lots", "x")
    assert child.returncode == 2 and "'lots' is not a size" in child.stderr


def test_registers_declaring_an_8192_cubed_cube(tmp_path):
    """A CDP program whose registers declare an 8192x8192x8192 cube: refused at the write that starts it."""
    program = program_cdp(NV_SMALL, LrnLayer(np.zeros((8, 4, 4), dtype=np.int8), LutRegisters()))
    cfg = program.write_trace(tmp_path / "nv_small" / "cube", "cube", 0)
    lines = [re.sub(r"(D_DATA_CUBE_(WIDTH|HEIGHT|CHANNEL)_0, )0x[0-9a-f]+", r"\g<1>0x1fff", ln) for ln in
             cfg.read_text().splitlines()]
    lines = [re.sub(r"(LINE_STRIDE_0, )0x[0-9a-f]+", r"\g<1>0x10000", ln) for ln in lines]
    lines = [re.sub(r"(SURFACE_STRIDE_0, )0x[0-9a-f]+", r"\g<1>0x20000000", ln) for ln in lines]
    cfg.write_text("\n".join(lines) + "\n")
    start = 1 + next(i for i, ln in enumerate(lines) if ln.startswith("reg_write(NVDLA_CDP.D_OP_ENABLE_0"))
    refused(run_dla("trace", "--max-memory", "2G", str(cfg.parent)),
            f"cube.cfg:{start}: feature cube 8192x8192x8192 as int64 offsets and values: 8 TiB {BUDGET_LINE}")
