"""rtl/engines/dla_sdp.v against the golden model: random SDP layers (X1/X2 with register and memory
operands, per kernel and per element, 1- and 2-byte, DATA_USE ALU/MUL/BOTH, PReLU, ReLU, output CVT,
D_PERF_OUT_SATURATION) run on rtl/NV_nvdla under Icarus with tb/vectors/tb_nvdla.v (random-latency
AXI memory that checks the AXI rules), through ``regressions.lib.golden_verdict.GoldenVectors``.

Each layer is built by ``regressions.lib.programs.program_sdp`` and then moved into the testbench's 1 MiB
memory window: bases get random byte offsets (unaligned to the bus where the address unit allows
it) and feature / per-element strides get random padding, so lines and surfaces are separate DMA
segments with gaps. Per-kernel operand DMAs get garbage strides (they must be ignored). The same
steps (memory image, register writes, interrupt clear) drive one ``golden.Dla``; after each layer
the whole destination span (gaps included, pre-filled with a pattern) must match it byte for byte,
as must GLB.S_INTR_STATUS and SDP.D_PERF_OUT_SATURATION. Layers alternate between the two register
groups and run back to back in one simulation per config.
"""
from __future__ import annotations

import random
import shutil
from dataclasses import dataclass

import numpy as np
import pytest

from compiler.codegen.pack import strides
from golden import ConfigError, UnsupportedError, get_config
from golden.config import HwConfig
from golden.dla import Dla
from golden.layout import CubeLayout
from regressions.lib.golden_verdict import GoldenVectors
from regressions.lib.programs import LayerTest, SdpLayer, program_sdp
from regressions.lib.reference.sdp import SdpParams, SdpXParams
from tb.vectors import sim
from tb.vectors import Vectors

pytestmark = pytest.mark.skipif(shutil.which("iverilog") is None, reason="iverilog not installed")

#: Where layers live: the testbench memory is 1 MiB (address bits [19:0]); with 64-bit addresses the
#: window sits above 4 GiB (the testbench itself only decodes bits [19:0]).
WINDOW = {32: 0x8000_0000, 64: 0x3_8000_0000}
REGION = {"src": 0x0_0000, "BS": 0x4_0000, "BN": 0x8_0000, "dst": 0xC_0000}
STAGES = (("x1", "BS", "B"), ("x2", "BN", "N"))


# ---------------------------------------------------------------------------------------------------
# random layers
# ---------------------------------------------------------------------------------------------------
def _operand(rng: random.Random, kind: str, shape: tuple[int, int, int], nbytes: int):
    lo, hi = (-128, 127) if nbytes == 1 else (-32768, 32767)
    if rng.random() < 0.5:  # mostly small values, so that results do not all saturate
        lo, hi = max(lo, -40), min(hi, 40)
    if kind == "reg":
        return rng.randint(-32768, 32767) if rng.random() < 0.3 else rng.randint(-300, 300)
    c, h, w = shape
    size = (c,) if kind == "kernel" else (c, h, w)
    return np.array([rng.randint(lo, hi) for _ in range(int(np.prod(size)))], dtype=np.int64).reshape(size)


def _x_stage(rng: random.Random, shape, nbytes: int, force_mem: str | None) -> SdpXParams:
    if force_mem is None and rng.random() < 0.15:
        return SdpXParams(bypass=True)
    mode = force_mem or rng.choice(["kernel", "element"])  # one DMA per stage: one mode
    alu_kind = rng.choice(["reg", mode, mode]) if force_mem is None else mode
    mul_kind = rng.choice(["reg", mode]) if force_mem is None else rng.choice([mode, "reg"])
    return SdpXParams(
        bypass=False,
        alu_bypass=rng.random() < 0.2,
        alu_algo=rng.randint(0, 3),
        alu_operand=_operand(rng, alu_kind, shape, nbytes),
        alu_shift=rng.choice([0, 0, 1, 3, 7, rng.randint(0, 20), rng.randint(0, 63)]),
        mul_bypass=rng.random() < 0.25,
        mul_prelu=rng.random() < 0.3,
        mul_operand=_operand(rng, mul_kind, shape, nbytes),
        mul_shift=rng.choice([0, 2, 5, 9, rng.randint(0, 24), rng.randint(0, 63)]),
        relu_bypass=rng.random() < 0.6,
    )


def random_layer(rng: random.Random, hw: HwConfig, force: str | None = None) -> SdpLayer:
    atom = hw.atom_elements()
    c = rng.choice([1, atom - 1, atom, atom + 3, 2 * atom + 1, rng.randint(1, 3 * atom)])
    h, w = rng.randint(1, 5), rng.randint(1, 7)
    x = np.array([rng.randint(-128, 127) for _ in range(c * h * w)], dtype=np.int64).reshape(c, h, w)
    nbytes = rng.choice([1, 2])
    params = SdpParams(
        x1=_x_stage(rng, (c, h, w), nbytes, force),
        x2=_x_stage(rng, (c, h, w), nbytes, None),
        cvt_offset=rng.choice([0, rng.randint(-200, 200), rng.randint(-(1 << 31), (1 << 31) - 1)]),
        cvt_scale=rng.choice([1, 1, rng.randint(-300, 300), rng.randint(-32768, 32767)]),
        cvt_shift=rng.choice([0, 0, rng.randint(0, 12), rng.randint(0, 63)]),
    )
    return SdpLayer(x=x, params=params, operand_bytes=nbytes)


# ---------------------------------------------------------------------------------------------------
# moving a program into the testbench window
# ---------------------------------------------------------------------------------------------------
@dataclass
class Placed:
    program: LayerTest
    image: list[tuple[int, bytes]]  # memory to load (8-byte aligned chunks)
    dst: tuple[int, int]  # (aligned start, length) of the destination span to compare


def _relayout(data: bytes, layout_old: CubeLayout, layout_new: CubeLayout) -> bytearray:
    src = np.frombuffer(data, dtype=np.uint8)
    out = np.zeros(layout_new.span(), dtype=np.uint8)
    out[layout_new.byte_offsets().reshape(-1)] = src[layout_old.byte_offsets().reshape(-1)]
    return bytearray(out.tobytes())


def _aligned(base: int, data: bytes | bytearray, fill: int | None, rng: random.Random) -> tuple[int, bytes]:
    """``data`` at ``base`` widened to 8-byte words (new bytes: random, or ``fill``)."""
    start, end = base & ~7, -(-(base + len(data)) // 8) * 8
    buf = bytearray(rng.getrandbits(8) if fill is None else fill for _ in range(end - start))
    buf[base - start : base - start + len(data)] = data
    return start, bytes(buf)


def place(hw: HwConfig, layer: SdpLayer, group: int, rng: random.Random, perf_sat: bool) -> Placed:
    prog = program_sdp(hw, layer)
    atom = hw.atom_elements()
    c, h, w = layer.x.shape
    unit = hw.address_unit
    over: dict[str, int] = {}
    image: list[tuple[int, bytes]] = []

    def base(region: str) -> int:
        off = rng.choice([0, 0, rng.randrange(0, 64)]) if unit == 1 else 0
        return WINDOW[hw.mem_address_width] + REGION[region] + 0x100 + (off // unit) * unit

    def pad(n: int) -> int:
        extra = rng.choice([0, 0, rng.randrange(1, 48)])
        return n + -(-extra // unit) * unit if unit > 1 else n + extra

    # golden: a 1x1 cube of several surfaces must be packed (surface stride = one atom)
    packed_only = h == 1 and w == 1 and c > atom

    def layout(bpe: int) -> tuple[int, int, int, int]:
        line0, surf0 = strides(c, h, w, atom, bpe)
        if packed_only:
            return line0, surf0, line0, surf0
        line = pad(line0)
        return line0, surf0, line, pad(line * h)

    def feature(region: str, data: bytes, bpe: int, prefix: str, unit_name: str) -> None:
        line0, surf0, line, surf = layout(bpe)
        b = base(region)
        new = _relayout(data, CubeLayout(c, h, w, line0, surf0, atom, bpe), CubeLayout(c, h, w, line, surf, atom, bpe))
        image.append(_aligned(b, new, None, rng))
        over[f"{unit_name}.D_{prefix}_BASE_ADDR_LOW"] = b & 0xFFFF_FFFF
        over[f"{unit_name}.D_{prefix}_BASE_ADDR_HIGH"] = b >> 32
        over[f"{unit_name}.D_{prefix}_LINE_STRIDE"] = line
        over[f"{unit_name}.D_{prefix}_SURFACE_STRIDE"] = surf

    mem = list(prog.memory)
    feature("src", mem.pop(0)[1], 1, "SRC", "SDP_RDMA")
    for stage, prefix, _ in STAGES:
        st = getattr(layer.params, stage)
        kinds = [np.ndim(op) for op, used in ((st.alu_operand, not st.alu_bypass), (st.mul_operand, not st.mul_bypass))
                 if used and np.ndim(op) > 0]
        if st.bypass or not kinds:
            continue
        data = mem.pop(0)[1]
        comps = len(kinds)
        if kinds[0] == 3:  # per element
            feature(prefix, data, comps * layer.operand_bytes, prefix, "SDP_RDMA")
        else:  # per kernel: strides are ignored
            b = base(prefix)
            image.append(_aligned(b, data, None, rng))
            over[f"SDP_RDMA.D_{prefix}_BASE_ADDR_LOW"] = b & 0xFFFF_FFFF
            over[f"SDP_RDMA.D_{prefix}_BASE_ADDR_HIGH"] = b >> 32
            over[f"SDP_RDMA.D_{prefix}_LINE_STRIDE"] = rng.getrandbits(32) & ~(unit - 1)
            over[f"SDP_RDMA.D_{prefix}_SURFACE_STRIDE"] = rng.getrandbits(32) & ~(unit - 1)
    assert not mem

    # destination: strided, pre-filled with a pattern that must survive in the gaps
    _, _, line, surf = layout(1)
    b = base("dst")
    span = CubeLayout(c, h, w, line, surf, atom).span()
    dst = _aligned(b, bytes(span), 0xA5, rng)
    image.append(dst)
    over.update({"SDP.D_DST_BASE_ADDR_LOW": b & 0xFFFF_FFFF, "SDP.D_DST_BASE_ADDR_HIGH": b >> 32,
                 "SDP.D_DST_LINE_STRIDE": line, "SDP.D_DST_SURFACE_STRIDE": surf,
                 "SDP_RDMA.S_POINTER": group, "SDP.S_POINTER": group})

    writes = []
    for name, value in prog.writes:
        key = name[len("NVDLA_"):-2]
        if key == "SDP_RDMA.D_OP_ENABLE":
            writes.append(("NVDLA_SDP.D_PERF_ENABLE_0", int(perf_sat) << 2))
        writes.append((name, over.pop(key, value)))
    for key in [k for k in over if k.endswith("_HIGH")]:  # program_sdp writes only the low halves
        value = over.pop(key)
        writes.insert(-2, (f"NVDLA_{key}_0", value))
    assert not over, over
    prog.writes = writes
    return Placed(prog, image, (dst[0], len(dst[1])))


# ---------------------------------------------------------------------------------------------------
# vectors + golden, side by side
# ---------------------------------------------------------------------------------------------------
def build_run(hw: HwConfig, layers: list[SdpLayer], rng: random.Random) -> tuple[Vectors, list[str]]:
    golden = GoldenVectors(hw)
    vec = golden.vec
    notes = []
    status_addr, _ = golden.dla.map.resolve("GLB.S_INTR_STATUS")
    sat_addr, _ = golden.dla.map.resolve("SDP.D_PERF_OUT_SATURATION")
    for i, layer in enumerate(layers):
        group = i % 2
        placed = place(hw, layer, group, rng, perf_sat=rng.random() < 0.7)
        for addr, data in placed.image:
            golden.load(addr, data)
        golden.play(placed.program.writes)
        assert golden.dla.read_reg(status_addr), f"layer {i}: golden did not complete"
        vec.wait_intr(1)
        status = golden.expect_reg(status_addr)
        golden.expect_reg(sat_addr)
        golden.write(status_addr, status, nposted=True)
        vec.wait_intr(0)
        golden.expect_memory(*placed.dst)
        p = layer.params
        notes.append(f"{layer.x.shape} bytes={layer.operand_bytes} x1={_describe(p.x1)} x2={_describe(p.x2)}")
    return vec, notes


def _describe(st: SdpXParams) -> str:
    if st.bypass:
        return "bypass"
    kind = {0: "reg", 1: "kernel", 3: "element"}
    alu = "-" if st.alu_bypass else f"{['max', 'min', 'sum', 'sum3'][st.alu_algo]}:{kind[np.ndim(st.alu_operand)]}"
    mul = "-" if st.mul_bypass else f"{'prelu' if st.mul_prelu else 'mul'}:{kind[np.ndim(st.mul_operand)]}"
    return f"{alu}/{mul}"


def directed_layers(hw: HwConfig, rng: random.Random) -> list[SdpLayer]:
    """Corners random layers rarely hit: PReLU passing a 33-bit SUM that wrapped (X1 positive
    overflow, X2 negative), operand shifts that saturate, a 1x1 cube of several (packed) surfaces with
    per-element BOTH operands, per-kernel 2-byte BOTH operands."""
    atom = hw.atom_elements()

    def cube(c, h, w):
        return np.array([rng.randint(-128, 127) for _ in range(c * h * w)], dtype=np.int64).reshape(c, h, w)

    def elem(c, h, w, lo, hi):
        return np.array([rng.randint(lo, hi) for _ in range(c * h * w)], dtype=np.int64).reshape(c, h, w)

    c, h, w = atom + 2, 3, 4
    wrap = SdpLayer(
        x=cube(c, h, w), operand_bytes=2,
        params=SdpParams(
            x1=SdpXParams(bypass=False, alu_bypass=False, alu_algo=2, alu_operand=32767, alu_shift=20,
                          mul_bypass=False, mul_prelu=True, mul_operand=elem(c, h, w, -9, 9), mul_shift=3),
            x2=SdpXParams(bypass=False, alu_bypass=False, alu_algo=3, alu_operand=-32768, alu_shift=40,
                          mul_bypass=False, mul_prelu=True, mul_operand=-3, mul_shift=1, relu_bypass=True),
            cvt_offset=-5, cvt_scale=3, cvt_shift=26))
    c = 3 * atom + 2
    packed = SdpLayer(
        x=cube(c, 1, 1), operand_bytes=1,
        params=SdpParams(
            x1=SdpXParams(bypass=False, alu_bypass=False, alu_algo=0, alu_operand=elem(c, 1, 1, -128, 127),
                          mul_bypass=False, mul_operand=elem(c, 1, 1, -128, 127), mul_shift=2),
            x2=SdpXParams(bypass=False, alu_bypass=False, alu_algo=1, alu_operand=elem(c, 1, 1, -50, 50)[:, 0, 0],
                          alu_shift=2, mul_bypass=False, mul_operand=elem(c, 1, 1, -300, 300)[:, 0, 0],
                          relu_bypass=False),
            cvt_offset=7, cvt_scale=-2, cvt_shift=1))
    return [wrap, packed]


def legal_layers(hw: HwConfig, rng: random.Random, count: int, forced: list[str | None]) -> list[SdpLayer]:
    """Random layers the golden model accepts (it raises on illegal combinations)."""
    out = []
    while len(out) < count:
        layer = random_layer(rng, hw, forced[len(out) % len(forced)])
        try:
            program_sdp(hw, layer).run(Dla(hw))
        except (ConfigError, UnsupportedError):
            continue
        out.append(layer)
    return out


def _simulate(tmp_path, hw: HwConfig, vec: Vectors, seed: int, notes: list[str]) -> str:
    cfg = sim.config_dir(tmp_path, hw)
    build, vvp = sim.icarus_build(tmp_path, cfg, {}, extra=[sim.TB])
    assert build.returncode == 0, build.stderr + build.stdout
    result = sim.icarus_run(vvp, vec.save(tmp_path / "sdp.hex"), seed=seed, timeout=300)
    assert "TB PASS" in result.stdout, "\n".join(notes) + "\n" + result.stdout[-4000:] + result.stderr[-2000:]
    return result.stdout


# nv_small: 8-lane atoms in 64-bit beats, byte addresses (unaligned bases); nv_medium_512: 16-lane
# atoms, 128-bit beats, 4-beat bursts, 64-bit addresses; nv_full: 32-lane atoms in 512-bit beats
# (half-beat atoms), 32-byte address units, the full address map; nv_large: 32-lane atoms, 256-bit beats.
CASES = {"nv_small": (20, 1), "nv_medium_512": (5, 2), "nv_large": (3, 4), "nv_full": (3, 3)}


@pytest.mark.parametrize("config", list(CASES))
def test_sdp_random_layers_match_golden(tmp_path, config):
    hw = get_config(config)
    count, seed = CASES[config]
    rng = random.Random(1000 + seed)
    layers = legal_layers(hw, rng, count, [None, "kernel", "element"])
    if config == "nv_small":
        layers[1:1] = directed_layers(hw, rng)
    vec, notes = build_run(hw, layers, rng)
    assert len(vec.steps) < 16000
    out = _simulate(tmp_path, hw, vec, seed, notes)
    print("\n".join(notes))
    print([line for line in out.splitlines() if line.startswith("TB STATS")])
