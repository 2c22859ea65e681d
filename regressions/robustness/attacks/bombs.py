"""Memory bombs: small files that declare huge sizes (a 4 GiB fill, a 2^62-byte region, a cube of 256 MiB,
a calibration of 10^8 samples). The promise: refused from the declared size (one line naming what asked
for it) or run within bounded memory, never an allocation that takes the machine down."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from regressions.robustness.attack import Attack, Scenario
from regressions.robustness.attacks.common import (compile_cmd, data_name, nvdla_cmd, pdp_trace, replace_line,
                                                   run_cmd, sub, trace_cfg, with_compile_files, with_run_files)
from regressions.robustness.material import Material, pdp_nvdla_loadable

FAMILY = "memory bombs"
OUT_FILL = "mem_init(pri_mem, 0x80000000, 0x1e6c0, ALL_ZERO);"
CHECK = "check_crc(sync_id_0, 1, 0x80000000, 0x1e6c0, 0x388f5f72);"


def _trace(edit, names_of=lambda rel: (trace_cfg(rel),), exits=frozenset({1, 2}), quick=False, name="", **kw):
    def setup(workdir: Path, material: Material) -> Scenario:
        rel = pdp_trace(workdir, material, edit, **kw)
        return Scenario(["trace", str(rel), "--json", "report.json"], names=names_of(rel), fail_names=("t:",),
                        reports=(Path("report.json"),))
    return Attack(name, FAMILY, setup, exits, quick=quick)


def _zero_fill_4g(text: str) -> str:
    """4 GiB of zeros above the trace's memory and the right CRC over them: a valid trace that a sparse
    memory plays without allocating the 4 GiB."""
    from golden.crc import crc32_zeros

    fill = "mem_init(pri_mem, 0x100000000, 0x100000000, ALL_ZERO);"
    check = f"check_crc(sync_id_0, 1, 0x100000000, 0x100000000, {crc32_zeros(0, 1 << 32):#010x});"
    return text.replace(OUT_FILL, f"{OUT_FILL}\n{fill}").replace(CHECK, f"{CHECK}\n{check}")


def _one_fill_4g(text: str) -> str:
    return text.replace(OUT_FILL, "mem_init(pri_mem, 0x80000000, 0x100000000, ALL_ONE);")


def _cfg_is_dev_zero() -> Attack:
    def setup(workdir: Path, material: Material) -> Scenario:
        rel = pdp_trace(workdir, material)
        cfg = workdir / trace_cfg(rel)
        cfg.unlink()
        cfg.symlink_to("/dev/zero")
        return Scenario(["trace", trace_cfg(rel), "--config", "nv_small"], names=(trace_cfg(rel),))
    return Attack(".cfg is a symlink to /dev/zero", FAMILY, setup, frozenset({1, 2}), quick=True)


def _sparse_dat(text_data: bool) -> Attack:
    def setup(workdir: Path, material: Material) -> Scenario:
        rel = pdp_trace(workdir, material)
        dat = workdir / rel / data_name(material)
        dat.unlink()
        with open(dat, "wb") as f:
            if text_data:  # a valid first record, then a gigabyte of nothing
                f.write(b"{\n{offset:0x0, size:4, payload:0x01 0x02 0x03 0x04} ,\n")
            f.truncate(1 << 30)
        return Scenario(["trace", str(rel)], names=(data_name(material),), fail_names=("t:",))
    what = "after a valid record" if text_data else "of zeros"
    return Attack(f".dat sparse 1 GiB {what}", FAMILY, setup, frozenset({1, 2}))


def _pdp_cube(text: str) -> str:
    """2048x2048x64 int8 in and out: 256 MiB each, strides to match."""
    for unit in ("NVDLA_PDP", "NVDLA_PDP_RDMA"):
        for reg, value in (("D_DATA_CUBE_IN_WIDTH_0", 0x7ff), ("D_DATA_CUBE_IN_HEIGHT_0", 0x7ff),
                           ("D_DATA_CUBE_IN_CHANNEL_0", 0x3f), ("D_SRC_LINE_STRIDE_0", 2048 * 32),
                           ("D_SRC_SURFACE_STRIDE_0", 2048 * 2048 * 32)):
            text = replace_line(f"{unit}.{reg},", f"reg_write({unit}.{reg}, {value:#x});")(text)
    for reg, value in (("D_DATA_CUBE_OUT_WIDTH_0", 0x3ff), ("D_DATA_CUBE_OUT_HEIGHT_0", 0x3ff),
                       ("D_DATA_CUBE_OUT_CHANNEL_0", 0x3f), ("D_DST_LINE_STRIDE_0", 1024 * 32),
                       ("D_DST_SURFACE_STRIDE_0", 1024 * 1024 * 32)):
        text = replace_line(f"NVDLA_PDP.{reg},", f"reg_write(NVDLA_PDP.{reg}, {value:#x});")(text)
    return text


def _calib_random() -> Attack:
    def setup(workdir: Path, material: Material) -> Scenario:
        with_compile_files(workdir, material)
        argv = compile_cmd("out.dla")
        argv[argv.index("--calib-random") + 1] = "100000000"
        return Scenario(argv, names=("--calib-random",))
    return Attack("--calib-random 100000000", FAMILY, setup, frozenset({0, 2}))


def _onnx_gemm(declared_only: bool) -> Attack:
    """A Gemm whose weight declares 65536x65536 floats (16 GiB) with no data, or an input of 1x65536."""
    def setup(workdir: Path, material: Material) -> Scenario:
        import onnx
        from onnx import TensorProto, helper

        n = 65536
        w = onnx.TensorProto(name="W", data_type=TensorProto.FLOAT, dims=[n, n])
        if not declared_only:
            w = helper.make_tensor("W", TensorProto.FLOAT, [n, 16], np.zeros(n * 16, np.float32).tobytes(), raw=True)
        k = n if declared_only else 16
        graph = helper.make_graph(
            [helper.make_node("Gemm", ["x", "W"], ["y"])], "gemm_bomb",
            [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, n])],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, k])], [w])
        onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), workdir / "gemm.onnx")
        return Scenario(compile_cmd("out.dla", model="gemm.onnx"), names=("gemm.onnx",))
    what = "weight declares 65536x65536 with no data" if declared_only else "65536-wide input, 4 MiB weight"
    return Attack(f"huge Gemm ONNX: {what}", FAMILY, setup, frozenset({2}) if declared_only else frozenset({0, 2}))


def _huge_conv_input() -> Attack:
    def setup(workdir: Path, material: Material) -> Scenario:
        import onnx
        from onnx import TensorProto, helper

        w = helper.make_tensor("W", TensorProto.FLOAT, [8, 8, 1, 1], np.ones(64, np.float32).tobytes(), raw=True)
        graph = helper.make_graph(
            [helper.make_node("Conv", ["x", "W"], ["y"])], "conv_bomb",
            [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, 65536, 65536])],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8, 65536, 65536])], [w])
        onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), workdir / "conv.onnx")
        return Scenario(compile_cmd("out.dla", model="conv.onnx"), names=("conv.onnx",))
    return Attack("ONNX Conv on a 8x65536x65536 input (32 GiB activations)", FAMILY, setup)


def _huge_region(kind: str, command: str) -> Attack:
    def setup(workdir: Path, material: Material) -> Scenario:
        from loadable import loadable_pb2 as pb
        from loadable.format import decode_loadable, encode_loadable

        msg = decode_loadable((material.root / "poolnet.dla").read_bytes(), validate=False)
        region = next(r for r in msg.regions if pb.Region.Kind.Name(r.kind) == kind)
        region.size = 1 << 62
        (workdir / "bomb.dla").write_bytes(encode_loadable(msg))
        material.copy("x.npy", workdir)
        argv = ["inspect", "bomb.dla"] if command == "inspect" else ["run", "bomb.dla", "--input", "x.npy"]
        return Scenario(argv, names=("bomb.dla",))
    return Attack(f"dla {command}: loadable {kind} region of 2^62 bytes", FAMILY, setup,
                  frozenset({0, 2}) if command == "inspect" else frozenset({2}), quick=kind == "SCRATCH",
                  line_optional=command == "inspect")


def _nvdla_huge(what: str, exits: frozenset[int] = frozenset({2}), **sizes) -> Attack:
    def setup(workdir: Path, material: Material) -> Scenario:
        (workdir / "bomb.nvdla").write_bytes(pdp_nvdla_loadable(**sizes))
        return Scenario(nvdla_cmd(loadable="bomb.nvdla"), names=("bomb.nvdla",))
    return Attack(f"NVDLA loadable declares a {what} of 2^40 bytes", FAMILY, setup, exits, line_optional=0 in exits)


def _max_memory_small() -> Attack:
    def setup(workdir: Path, material: Material) -> Scenario:
        with_run_files(workdir, material)
        return Scenario(run_cmd("--max-memory", "4K"), names=())
    return Attack("dla run --max-memory 4K on a real loadable", FAMILY, setup)


def attacks() -> list[Attack]:
    big = lambda s: s.replace(OUT_FILL, "mem_init(pri_mem, 0x80000000, 0x10000000000, ALL_ZERO);")  # noqa: E731
    return [
        _trace(_zero_fill_4g, name="mem_init 0x100000000 ALL_ZERO + check_crc over it", exits=frozenset({0}), quick=True),
        _trace(_one_fill_4g, name="mem_init 0x100000000 ALL_ONE (a fill that must allocate)"),
        _trace(big, name="mem_init 2^40 ALL_ZERO"),
        _trace(sub("check_crc(sync_id_0, 1, 0x80000000, 0x1e6c0,", "check_crc(sync_id_0, 1, 0x0, 0xffffffffffffffff,"),
               name="check_crc over 2^64 - 1 bytes"),
        _trace(_pdp_cube, name="2048x2048x64 PDP cube trace (NVDLA pads/kernel kept: refused by the PDP output-size rule)",
               exits=frozenset({0, 1, 2})),
        _cfg_is_dev_zero(),
        _sparse_dat(False),
        _sparse_dat(True),
        _calib_random(),
        _onnx_gemm(True),
        _onnx_gemm(False),
        _huge_conv_input(),
        _huge_region("SCRATCH", "run"),
        _huge_region("OUTPUT", "run"),
        _huge_region("WEIGHTS", "run"),
        _huge_region("SCRATCH", "inspect"),
        _nvdla_huge("memory entry", src_size=1 << 40),
        _nvdla_huge("address entry", frozenset({0, 2}), address_size=1 << 40),  # unused by a PDP-only network
        _nvdla_huge("output tensor", tensor_size=1 << 40),
        _max_memory_small(),
    ]
