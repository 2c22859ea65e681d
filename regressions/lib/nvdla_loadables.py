"""NVDLA loadables built by hand (``runtime.nvdla.writer.LoadableBuilder``) whose answers are known without
the compiler: nv_small pools, an EMU task around a DLA task. The firmware model's unit tests run them on
golden; the RTL suites run the same bytes on the RTL."""
from __future__ import annotations

import numpy as np

from runtime.nvdla import descriptors as d
from runtime.nvdla import emulator as emu
from runtime.nvdla import fbs
from runtime.nvdla.emulator import EmuBufferDesc, EmuOp
from runtime.nvdla.writer import LoadableBuilder

ATOM = 8  # nv_small channels per surface


def feature_cube(address: int, c: int, h: int, w: int) -> d.DataCube:
    """A packed int8 (C, H, W) cube at ``address`` (a buffer index before the builder places it)."""
    line = w * ATOM
    surf = line * h
    return d.DataCube(address=address, width=w, height=h, channel=c, line_stride=line, surf_stride=surf,
                      size=surf * -(-c // ATOM))


def pack_feature(x: np.ndarray) -> bytes:
    """(C, H, W) int8 -> NVDLA feature layout with 8-channel surfaces."""
    c, h, w = x.shape
    s = -(-c // ATOM)
    lanes = np.zeros((s * ATOM, h, w), dtype=np.int8)
    lanes[:c] = x
    return lanes.reshape(s, ATOM, h, w).transpose(0, 2, 3, 1).tobytes()


def maxpool2(x: np.ndarray) -> np.ndarray:
    """What ``pool_2x2_op`` computes, in numpy: the expected answer."""
    c, h, w = x.shape
    return x.reshape(c, h // 2, 2, w // 2, 2).max(axis=(2, 4))


def pool_2x2_op() -> d.PdpOpDesc:
    """PDP max pool, 2x2 kernel, stride 2 (the descriptor's sizes are minus one)."""
    return d.PdpOpDesc(split_num=1, pool_mode=1, pool_width=1, pool_height=1, stride_x=2, stride_y=2)


def add_output(b: LoadableBuilder, index: int, name: str, c: int, h: int, w: int) -> None:
    """Declare buffer ``index`` as the network output ``name``, a packed (C, H, W) cube."""
    cube = feature_cube(index, c, h, w)
    b.output(index, fbs.TensorDesc(name=name, id=0, mem_id=0, size=cube.size, c=c, h=h, w=w,
                                   strides=[1, cube.line_stride, cube.surf_stride, 0, 0, 0, 0, 0]))


def independent_pools(images: list[np.ndarray], legacy: bool = False) -> bytes:
    """One 2x2 max pool per 8x8x8 image, none depending on another: the firmware may run two per engine."""
    b = LoadableBuilder(legacy=legacy)
    for i, x in enumerate(images):
        src = b.buffer(f"src{i}", 512, pack_feature(x))
        dst = b.buffer(f"dst{i}", 128)
        surface = d.PdpSurfaceDesc(src_data=feature_cube(src, 8, 8, 8), dst_data=feature_cube(dst, 8, 4, 4))
        b.op(d.OP_PDP, pool_2x2_op(), surface)
        add_output(b, dst, f"pool{i}", 8, 4, 4)
    return b.build()


def _pdp_pool(b: LoadableBuilder, src: int, dst: int) -> None:
    def cube(index: int, hw: int) -> d.DataCube:
        return d.DataCube(address=index, width=hw, height=hw, channel=8, line_stride=hw * 8, surf_stride=hw * hw * 8,
                          size=hw * hw * 8)

    b.op(d.OP_PDP, pool_2x2_op(), d.PdpSurfaceDesc(src_data=cube(src, 4), dst_data=cube(dst, 2)))


def emu_and_pool_loadable(x: np.ndarray, before_dla: bool) -> bytes:
    """power(x) = 2x + 1 on a 4x4x8 int8 cube (EMU task) and a 2x2 max pool (DLA task), in either order on
    nv_small (8-channel atoms: INT8_8); output "out" is the 2x2x8 result. Also run on RTL
    (``regressions/rtl/test_rtl_nvdla.py``)."""
    b = LoadableBuilder()
    a = b.buffer("a", 128, x.transpose(1, 2, 0).tobytes())  # one 8-channel surface: HWC
    m = b.buffer("m", 128)
    z = b.buffer("z", 32)
    op = EmuOp(emu.EMU_OP_POWER, power=1.0, scale=2.0, shift=1.0)
    if before_dla:
        hw, src, dst = 4, a, m
        _pdp_pool(b, m, z)
    else:
        hw, src, dst = 2, z, m
        _pdp_pool(b, a, z)
    cube = dict(format=emu.FORMAT_INT8_8, width=hw, height=hw, channel=8, line_stride=hw * 8, surf_stride=hw * hw * 8)
    b.emu_task([(op, EmuBufferDesc(src, **cube), EmuBufferDesc(dst, **cube))], before_dla=before_dla)
    out_index = z if before_dla else m
    b.output(out_index, fbs.TensorDesc(name="out", id=0, mem_id=0, size=32, c=8, h=2, w=2,
                                       strides=[1, 16, 32, 0, 0, 0, 0, 0]))
    return b.build()


def emu_and_pool_expected(x: np.ndarray, before_dla: bool) -> np.ndarray:
    """The answer of ``emu_and_pool_loadable(x, before_dla)``, (8, 2, 2)."""
    def pool(v: np.ndarray) -> np.ndarray:
        return v.reshape(8, 2, 2, 2, 2).max(axis=(2, 4))

    return pool(2 * x.astype(int) + 1) if before_dla else 2 * pool(x).astype(int) + 1  # |2x + 1| < 128
