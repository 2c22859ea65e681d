"""The PDP engine (rtl/engines/dla_pdp.v) against golden.Dla, bit for bit, on rtl/NV_nvdla under
Icarus (tb/vectors/tb_nvdla.v with its random-latency AXI memory that checks the AXI rules), through
``regressions.lib.golden_verdict.GoldenVectors``.

Each case is a sequence of pooling layers built by ``regressions.lib.programs.program_pdp`` (directed
edge cases + random legal configurations: MAX/MIN/AVERAGE, kernels 1..8, strides 1..16, padding
with raw 19-bit PAD_VALUE words, random reciprocals, several surfaces with padding lanes, line and
surface strides with gaps, split-width mode), played back to back with alternating ping-pong
groups. The golden model runs the same register writes; the whole output region (every lane of
every surface) plus a guard band behind it is compared after every layer. Configs: nv_small
(64-bit bus, atom 8), nv_medium_512 (128-bit bus, atom 16, 64-bit addresses with HIGH words) and
nv_full (512-bit bus, atom 32: two atoms per beat, 32-byte address unit, full address map).

``DLA_PDP_RANDOM=N`` adds N random layers per config (default 6); ``DLA_PDP_SEED`` changes the seed.
"""
from __future__ import annotations

import os
import random
import shutil
from dataclasses import dataclass

import numpy as np
import pytest

from golden import Dla, get_config
from golden.config import HwConfig
from golden.engines.pdp import pooled_size
from golden.errors import ConfigError
from golden.regs import UNITS
from regressions.lib.golden_verdict import GoldenVectors
from regressions.lib.programs import PoolLayer, LayerTest, program_pdp
from tb.duts import BUILTIN_DUT, dut_config
from tb.vectors import sim

pytestmark = pytest.mark.skipif(shutil.which("iverilog") is None, reason="iverilog not installed")

GUARD = 64  # bytes behind the output region that must stay untouched
TB_MEM = 1 << 20  # tb_nvdla.v memory (address bits [19:0])
PDP_DONE_BIT = 4


@dataclass
class Case:
    layer: PoolLayer
    split: tuple[int, int, int, int] | None = None  # (count, first_out, mid_out, last_out)
    #: atoms added to the packed (src line, src surface, dst line, dst surface) strides
    gaps: tuple[int, int, int, int] = (0, 0, 0, 0)


def _reg_value(unit: str, register: str, **fields: int) -> tuple[str, int]:
    reg = UNITS[unit].register(register)
    return reg.full_name, reg.encode(**fields)


def split_widths(layer: PoolLayer, count: int, first_out: int, mid_out: int, last_out: int) -> tuple[int, int, int]:
    """Input widths (first, mid, last) of a consistent split (golden.engines.pdp.splits)."""
    (_, kw), (_, sw), (_, pl, _, pr) = layer.kernel, layer.stride, layer.pad
    overlap = kw - sw
    first_in = (first_out - 1) * sw + kw - pl
    mid_in = mid_out * sw
    last_in = (last_out - 1) * sw + kw - pr - overlap
    return first_in, mid_in, last_in


def pack_strided(x: np.ndarray, atom: int, line: int, surf: int) -> bytes:
    """(C, H, W) int8 values in NVDLA feature layout with the given strides (gaps zero)."""
    c, h, w = x.shape
    surfaces = -(-c // atom)
    buf = np.zeros(((surfaces - 1) * surf + (h - 1) * line + w * atom,), dtype=np.uint8)
    lanes = np.zeros((surfaces * atom, h, w), dtype=np.int64)
    lanes[:c] = x
    for s in range(surfaces):
        for y in range(h):
            row = lanes[s * atom : (s + 1) * atom, y, :].T.astype(np.int8).view(np.uint8).ravel()
            buf[s * surf + y * line : s * surf + y * line + w * atom] = row
    return buf.tobytes()


def build_program(hw: HwConfig, case: Case, group: int, src: int, dst: int) -> LayerTest:
    """program_pdp with our addresses and strides, the ping-pong group and (optionally) split-width
    mode."""
    prog = program_pdp(hw, case.layer)
    atom = hw.atom_elements()
    c, h, w = case.layer.x.shape
    oh, ow = case.layer.out_hw()
    gl, gs, dl, ds = (g * atom for g in case.gaps)
    src_line, dst_line = w * atom + gl, ow * atom + dl
    src_surf, dst_surf = h * src_line + gs, oh * dst_line + ds
    writes = []
    names = {_reg_value(u, "S_POINTER")[0]: group for u in ("PDP", "PDP_RDMA")}
    for unit in ("PDP", "PDP_RDMA"):
        names[_reg_value(unit, "D_SRC_BASE_ADDR_LOW")[0]] = src & 0xFFFF_FFFF
        names[_reg_value(unit, "D_SRC_LINE_STRIDE")[0]] = src_line
        names[_reg_value(unit, "D_SRC_SURFACE_STRIDE")[0]] = src_surf
    names[_reg_value("PDP", "D_DST_BASE_ADDR_LOW")[0]] = dst & 0xFFFF_FFFF
    names[_reg_value("PDP", "D_DST_LINE_STRIDE")[0]] = dst_line
    names[_reg_value("PDP", "D_DST_SURFACE_STRIDE")[0]] = dst_surf
    enables = []
    for name, value in prog.writes:
        if name.endswith(".D_OP_ENABLE_0"):
            enables.append((name, value))
            continue
        writes.append((name, names.get(name, value)))
    writes.append((_reg_value("PDP_RDMA", "D_SRC_BASE_ADDR_HIGH")[0], src >> 32))
    writes.append((_reg_value("PDP", "D_DST_BASE_ADDR_HIGH")[0], dst >> 32))
    if case.split is None:  # the group may hold an earlier layer's split setting
        writes.append(_reg_value("PDP_RDMA", "D_OPERATION_MODE_CFG", SPLIT_NUM=0))
    else:
        count, fo, mo, lo = case.split
        fi, mi, li = split_widths(case.layer, *case.split)
        method = {"avg": 0, "max": 1, "min": 2}[case.layer.method]
        writes.append(_reg_value("PDP", "D_OPERATION_MODE_CFG", POOLING_METHOD=method, FLYING_MODE=1,
                                 SPLIT_NUM=count - 1))
        writes.append(_reg_value("PDP_RDMA", "D_OPERATION_MODE_CFG", SPLIT_NUM=count - 1))
        for unit in ("PDP", "PDP_RDMA"):
            writes.append(_reg_value(unit, "D_PARTIAL_WIDTH_IN", PARTIAL_WIDTH_IN_FIRST=fi - 1,
                                     PARTIAL_WIDTH_IN_MID=mi - 1, PARTIAL_WIDTH_IN_LAST=li - 1))
        writes.append(_reg_value("PDP", "D_PARTIAL_WIDTH_OUT", PARTIAL_WIDTH_OUT_FIRST=fo - 1,
                                 PARTIAL_WIDTH_OUT_MID=mo - 1, PARTIAL_WIDTH_OUT_LAST=lo - 1))
    prog.writes = writes + enables
    prog.memory = [(src, pack_strided(case.layer.x, atom, src_line, src_surf))]
    prog.output = (dst, -(-c // atom) * dst_surf)
    return prog


def estimate_cycles(hw: HwConfig, layer: PoolLayer) -> int:
    c, _, _ = layer.x.shape
    oh, ow = layer.out_hw()
    kh, kw = layer.kernel
    surfaces = -(-c // hw.atom_elements())
    return surfaces * oh * ow * kh * (6 + kw) + 1000


class Sequence:
    """Layers played back to back on one golden.Dla and one vector file."""

    def __init__(self, hw: HwConfig, rng: random.Random) -> None:
        self.hw = hw
        self.rng = rng
        self.golden = GoldenVectors(hw, tb_address=lambda addr: addr % TB_MEM)
        self.vec = self.golden.vec
        self.count = 0
        self.atom = hw.atom_elements()
        self.wide = hw.primary_memif_width // 8 > self.atom  # several atoms per bus beat
        self.addr64 = hw.mem_address_width > 32

    def _mem(self, addr: int, data: bytes) -> None:
        assert len(data) % 8 == 0 and addr % 8 == 0
        self.golden.load(addr, data)

    def add(self, case: Case) -> None:
        i = self.count
        self.count += 1
        group = i % 2
        slot = i % 6
        # 128 KiB of the 1 MiB memory per layer: input first, output at +96 KiB; shift by whole atoms
        # so that several-atom beats also start and end mid-beat
        src = slot * 0x2_0000 + self.atom * self.rng.randrange(0, 4 if self.wide else 1)
        dst = slot * 0x2_0000 + 0x1_8000 + self.atom * self.rng.randrange(0, 4 if self.wide else 1)
        if self.addr64 and i % 2:
            src += 1 << 32
            dst += 2 << 32
        prog = build_program(self.hw, case, group, src, dst)
        out_addr, out_size = prog.output
        assert len(prog.memory[0][1]) <= 0x1_8000 and out_size + GUARD <= 0x8000
        # fill destination (+ guard) with a pattern, the input with the cube
        lo, hi = out_addr - out_addr % 8, out_addr + out_size + GUARD
        hi += -hi % 8
        pattern = bytes(self.rng.getrandbits(8) for _ in range(hi - lo))
        self._mem(lo, pattern)
        src_addr, data = prog.memory[0]
        data = data + bytes(-len(data) % 8)
        self._mem(src_addr, data)
        self.golden.play(prog.writes, nposted=lambda name: name.endswith("PDP.D_OP_ENABLE_0"))
        bit = 1 << (PDP_DONE_BIT + group)
        assert self.golden.dla.intr_status & bit, "golden did not run the layer"
        status = self.golden.dla.map.address("GLB", "S_INTR_STATUS")
        wait = estimate_cycles(self.hw, case.layer)
        if wait > 15000:
            self.vec.idle(wait - 15000)
        self.vec.wait_intr(1)
        self.vec.read(status, bit)
        self.golden.expect_memory(lo, hi - lo)
        self.golden.write(status, bit, nposted=True)
        self.vec.wait_intr(0)


# ---- layers -----------------------------------------------------------------------------------------
def cube(rng: random.Random, c: int, h: int, w: int) -> np.ndarray:
    return np.array([rng.randint(-128, 127) for _ in range(c * h * w)], dtype=np.int64).reshape(c, h, w)


def directed(hw: HwConfig, rng: random.Random) -> list[Case]:
    a = hw.atom_elements()
    quirk = (0x100, 0x7FF00, 0x4FF, 0x3FE00, 0x7FFFF, 0x12345, 0x5A5A5)  # bits above the sign survive
    return [
        # AVERAGE 3x3 s1 with padding on every side, PAD_VALUE quirks, 2 surfaces + padding lanes
        Case(PoolLayer(cube(rng, a + 3, 5, 6), "avg", (3, 3), (1, 1), (1, 2, 2, 1), quirk)),
        # AVERAGE 8x8 with pads of 7: windows with 1..7 padded columns and rows use every PAD_VALUE;
        # the values (all different) have / lack each sign bit (7/8/9/9/10/10/10), some bits 16..18
        Case(PoolLayer(cube(rng, a, 9, 10), "avg", (8, 8), (1, 1), (7, 7, 7, 7),
                       (0x70080, 0x100, 0x50200, 0x2FF, 0x400, 0x60513, 0x7C5))),
        Case(PoolLayer(cube(rng, 1, 3, 4), "avg", (8, 7), (1, 2), (7, 6, 7, 5),
                       (0x40, 0x30080, 0x100, 0x1A0, 0x70200, 0x2F0, 0x3FF))),
        # MAX 8x8 kernel, stride 3, pads up to 7
        Case(PoolLayer(cube(rng, 5, 9, 10), "max", (8, 8), (3, 3), (7, 1, 2, 7))),
        # MIN 2x5, stride larger than the kernel (columns skipped)
        Case(PoolLayer(cube(rng, a, 7, 13), "min", (2, 5), (4, 7), (1, 0, 0, 2))),
        # AVERAGE with random reciprocals (negative sums, rounding ties), stride 16
        Case(PoolLayer(cube(rng, 2 * a, 6, 19), "avg", (4, 3), (2, 16), (3, 2, 0, 2),
                       tuple(rng.getrandbits(19) for _ in range(7)), recip_w=0x1FFFF, recip_h=0x0AAAB)),
        # 1x1 kernel (copy), 1x1 cube
        Case(PoolLayer(cube(rng, 3, 1, 1), "avg", (1, 1), (1, 1))),
        # strides with gaps between lines and surfaces, on both sides
        Case(PoolLayer(cube(rng, 2 * a + 5, 6, 7), "max", (3, 2), (2, 2), (1, 1, 1, 0)), gaps=(3, 5, 1, 2)),
        # split-width mode: 3 splits with overlapping windows, 4 splits with skipped columns
        split_case(rng, a + 1, 4, "max", (3, 3), (2, 2), (1, 1, 0, 1), (3, 2, 2, 3)),
        split_case(rng, 2, 5, "avg", (2, 2), (1, 3), (1, 1, 1, 1), (4, 3, 2, 2), quirk),
    ]


def split_case(rng: random.Random, c: int, h: int, method: str, kernel, stride, pad, split,
               pad_values=(0,) * 7) -> Case:
    """A split-width layer whose cube width is what the split widths add up to."""
    probe = PoolLayer(np.zeros((1, 1, 1)), method, kernel, stride, pad)
    first_in, mid_in, last_in = split_widths(probe, *split)
    w = first_in + (split[0] - 2) * mid_in + last_in
    return Case(PoolLayer(cube(rng, c, h, w), method, kernel, stride, pad, pad_values), split=split)


def random_case(hw: HwConfig, rng: random.Random) -> Case:
    a = hw.atom_elements()
    while True:
        kh, kw = rng.randint(1, 8), rng.randint(1, 8)
        sh = rng.randint(1, 16) if rng.random() < 0.15 else rng.randint(1, kh + 1)
        sw = rng.randint(1, 16) if rng.random() < 0.15 else rng.randint(1, kw + 1)
        pt, pb = rng.randint(0, min(kh - 1, 7)), rng.randint(0, min(kh - 1, 7))
        pl, pr = rng.randint(0, min(kw - 1, 7)), rng.randint(0, min(kw - 1, 7))
        h = rng.randint(max(1, kh - pt - pb), 12)
        w = rng.randint(max(1, kw - pl - pr), 14)
        c = rng.randint(1, 3 * a)
        method = rng.choice(("avg", "max", "min"))
        pads = tuple(rng.getrandbits(19) if rng.random() < 0.5 else rng.randint(-128, 127) & 0x7FFFF
                     for _ in range(7))
        rw = rng.getrandbits(17) if rng.random() < 0.3 else None
        rh = rng.getrandbits(17) if rng.random() < 0.3 else None
        layer = PoolLayer(cube(rng, c, h, w), method, (kh, kw), (sh, sw), (pt, pl, pb, pr), pads, rw, rh)
        gaps = tuple(rng.randint(0, 3) for _ in range(4)) if rng.random() < 0.3 else (0, 0, 0, 0)
        if pooled_size(h, kh, sh, pt, pb) < 1 or pooled_size(w, kw, sw, pl, pr) < 1:
            continue
        case = Case(layer, gaps=gaps)
        if _accepted(hw, case):
            return case


def _accepted(hw: HwConfig, case: Case) -> bool:
    try:
        dla = Dla(hw)
        build_program(hw, case, 0, 0x1000, 0x9000).run(dla)
    except ConfigError:
        return False
    return True


def cases(hw: HwConfig, seed: int) -> list[Case]:
    rng = random.Random(seed)
    out = directed(hw, rng)
    for case in out:
        assert _accepted(hw, case), case
    out += [random_case(hw, rng) for _ in range(int(os.environ.get("DLA_PDP_RANDOM", "6")))]
    return out


def run_sequence(tmp_path, hw: HwConfig, seed: int) -> str:
    rng = random.Random(seed + 1)
    seq = Sequence(hw, rng)
    for case in cases(hw, seed):
        seq.add(case)
    cfg = sim.config_dir(tmp_path, hw)
    build, vvp = sim.icarus_build(tmp_path, cfg, {}, extra=[sim.TB])
    assert build.returncode == 0, build.stderr + build.stdout
    vectors = seq.vec.save(tmp_path / "pdp.hex")
    assert len(seq.vec.steps) < 16384, "too many steps for tb_nvdla.v"
    result = sim.icarus_run(vvp, vectors, seed=seed, timeout=300)
    assert "TB PASS" in result.stdout, result.stdout[-4000:] + result.stderr[-2000:]
    return result.stdout


@pytest.mark.parametrize("config", ["nv_small", "nv_medium_512", "nv_full"])
def test_pdp_matches_golden(tmp_path, config):
    seed = int(os.environ.get("DLA_PDP_SEED", "1"))
    out = run_sequence(tmp_path, dut_config(BUILTIN_DUT, get_config(config)), seed)  # rtl/: the cmod's AVERAGE
    assert "TB STATS" in out
