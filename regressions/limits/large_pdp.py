"""The largest legal PDP cube in bounded memory: 2048x2048x64 int8 (256 MiB), 2x2/2 max pooling in two
width splits, checked surface by surface against plain numpy. Run as a module it prints the peak RSS; the
regression test runs it in a child under an address-space limit (one pass over the cube took 6.2 GB)."""
from __future__ import annotations

import resource
import sys
import time

import numpy as np

from golden.config import NV_SMALL
from golden.dla import Dla
from golden.engines.pdp import MAX

SRC, DST = 0x8000_0000, 0xA000_0000
CHANNELS, HEIGHT, WIDTH = 64, 2048, 2048
SPLIT_WIDTH = 1024  # PARTIAL_WIDTH_IN fields hold 10 bits: 2048 columns need two splits


def surface(index: int, atom: int) -> np.ndarray:
    """Input surface ``index`` as (H, W, atom) int8, regenerated from its seed (never the whole cube)."""
    raw = np.random.default_rng(index).integers(0, 256, size=HEIGHT * WIDTH * atom, dtype=np.uint8)
    return raw.view(np.int8).reshape(HEIGHT, WIDTH, atom)


def program(dla: Dla, atom: int) -> None:
    """PDP_RDMA + PDP registers of the pooling, split in two halves of the width (no overlap at 2x2/2)."""
    oh, ow = HEIGHT // 2, WIDTH // 2
    for unit in ("PDP", "PDP_RDMA"):
        dla.write(f"{unit}.D_DATA_CUBE_IN_WIDTH", WIDTH - 1)
        dla.write(f"{unit}.D_DATA_CUBE_IN_HEIGHT", HEIGHT - 1)
        dla.write(f"{unit}.D_DATA_CUBE_IN_CHANNEL", CHANNELS - 1)
    dla.write("PDP_RDMA.D_SRC_BASE_ADDR_LOW", SRC)
    dla.write("PDP_RDMA.D_SRC_LINE_STRIDE", WIDTH * atom)
    dla.write("PDP_RDMA.D_SRC_SURFACE_STRIDE", HEIGHT * WIDTH * atom)
    dla.write("PDP_RDMA.D_SRC_RAM_CFG", SRC_RAM_TYPE=1)
    dla.write("PDP_RDMA.D_FLYING_MODE", FLYING_MODE=1)
    dla.write("PDP_RDMA.D_OPERATION_MODE_CFG", SPLIT_NUM=1)
    dla.write("PDP_RDMA.D_POOLING_KERNEL_CFG", KERNEL_WIDTH=1, KERNEL_STRIDE_WIDTH=1)
    dla.write("PDP.D_DATA_CUBE_OUT_WIDTH", ow - 1)
    dla.write("PDP.D_DATA_CUBE_OUT_HEIGHT", oh - 1)
    dla.write("PDP.D_DATA_CUBE_OUT_CHANNEL", CHANNELS - 1)
    dla.write("PDP.D_OPERATION_MODE_CFG", POOLING_METHOD=MAX, FLYING_MODE=1, SPLIT_NUM=1)
    dla.write("PDP.D_POOLING_KERNEL_CFG", KERNEL_WIDTH=1, KERNEL_HEIGHT=1, KERNEL_STRIDE_WIDTH=1,
              KERNEL_STRIDE_HEIGHT=1)
    half_in, half_out = SPLIT_WIDTH - 1, SPLIT_WIDTH // 2 - 1
    for unit in ("PDP", "PDP_RDMA"):
        dla.write(f"{unit}.D_PARTIAL_WIDTH_IN", half_in | (half_in << 10) | (half_in << 20))
    dla.write("PDP.D_PARTIAL_WIDTH_OUT", half_out | (half_out << 10) | (half_out << 20))
    dla.write("PDP.D_DST_BASE_ADDR_LOW", DST)
    dla.write("PDP.D_DST_LINE_STRIDE", ow * atom)
    dla.write("PDP.D_DST_SURFACE_STRIDE", oh * ow * atom)
    dla.write("PDP.D_DST_RAM_CFG", DST_RAM_TYPE=1)


def main() -> int:
    atom = NV_SMALL.atom_elements()
    surfaces = CHANNELS // atom
    dla = Dla(NV_SMALL)
    for s in range(surfaces):
        dla.mem.dram.write(SRC + s * HEIGHT * WIDTH * atom, surface(s, atom))
    program(dla, atom)
    start = time.perf_counter()
    dla.write("PDP_RDMA.D_OP_ENABLE", 1)
    dla.write("PDP.D_OP_ENABLE", 1)
    seconds = time.perf_counter() - start
    if not dla.intr_status & (1 << 4):
        print("PDP did not complete", file=sys.stderr)
        return 1
    oh, ow = HEIGHT // 2, WIDTH // 2
    for s in range(surfaces):
        want = surface(s, atom).reshape(oh, 2, ow, 2, atom).max(axis=(1, 3))
        got = dla.mem.dram.read(DST + s * oh * ow * atom, oh * ow * atom).view(np.int8).reshape(oh, ow, atom)
        if not np.array_equal(want, got):
            print(f"surface {s} differs from the reference", file=sys.stderr)
            return 1
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss >> 10
    print(f"ok: {CHANNELS}x{HEIGHT}x{WIDTH} int8 pooled in {seconds:.1f} s, peak RSS {peak} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
