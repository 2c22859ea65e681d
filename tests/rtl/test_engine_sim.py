"""Engine interface, operation control and the AXI DMA, end to end on rtl/NV_nvdla built with
``DLA_TEST_ENGINE``: the PDP and SDP slots then hold rtl/dla_test_engine.v, which copies
``beats`` bus words from its RDMA unit's D_SRC_BASE_ADDR to its core unit's D_DST_BASE_ADDR with
every byte + 1 (last beat with strobes D_DST_SURFACE_STRIDE[bytes-1:0]) and reports the beat count
into a status register. Checked: firing rules (core + RDMA armed, flying modes never start alone),
completion (OP_EN cleared, consumer toggled, group done bit), queued ping-pong, RUNNING/PENDING
status, status reports into the consumer group, writes to an armed group dropped, interrupt mask,
DMA arbitration between engines, bursts split at 4 KiB, strobes."""
from __future__ import annotations

import random
import shutil

import pytest

from golden import get_config
from golden.config import HwConfig
from golden.regs import register_map
from tb.vectors import MASK64, Vectors, sim

pytestmark = pytest.mark.skipif(shutil.which("iverilog") is None, reason="iverilog not installed")

ENGINES = {  # slot: (core, rdma, beats register of the RDMA, status register the test engine reports)
    "PDP": ("PDP", "PDP_RDMA", "D_DATA_CUBE_IN_WIDTH", "D_PERF_WRITE_STALL"),
    "SDP": ("SDP", "SDP_RDMA", "D_DATA_CUBE_WIDTH", "D_PERF_WDMA_WRITE_STALL"),
}
DONE_BIT = {"PDP": 4, "SDP": 0}


class EngineScenario:
    """Builds the steps and keeps a model of memory and of the consumer pointers."""

    def __init__(self, hw: HwConfig, rng: random.Random) -> None:
        self.hw = hw
        self.rng = rng
        self.map = register_map(hw.address_map)
        self.vec = Vectors()
        self.beat_bytes = hw.primary_memif_width // 8
        self.expected: dict[int, int] = {}  # 8-byte word address -> value

    def a(self, unit: str, reg: str) -> int:
        return self.map.address(unit, reg)

    def write(self, unit: str, reg: str, value: int, nposted: bool = False) -> None:
        self.vec.write(self.a(unit, reg), value, nposted)

    def read(self, unit: str, reg: str, expect: int, mask: int = 0xFFFF_FFFF) -> None:
        self.vec.read(self.a(unit, reg), expect, mask)

    def fill(self, base: int, nbytes: int, value: int | None = None) -> list[int]:
        words = []
        for off in range(0, nbytes, 8):
            word = self.rng.getrandbits(64) if value is None else value
            self.vec.mem_write(base + off, word)
            words.append(word)
        return words

    def configure(self, slot: str, group: int, src: int, dst: int, beats: int, strb: int) -> list[int]:
        """EngineScenario one test-engine operation into ``group`` (producer) of both units; returns the
        destination words expected afterwards. Source and destination are filled in memory."""
        core, rdma, beats_reg, _ = ENGINES[slot]
        nbytes = beats * self.beat_bytes
        data = self.fill(src, nbytes)
        old = self.fill(dst, nbytes, 0xEEEE_EEEE_EEEE_EEEE)
        for unit in (core, rdma):
            self.write(unit, "S_POINTER", group)
        self.write(rdma, "D_SRC_BASE_ADDR_LOW", src & 0xFFFF_FFFF)
        self.write(rdma, "D_SRC_BASE_ADDR_HIGH", src >> 32)
        self.write(rdma, beats_reg, beats - 1)
        self.write(core, "D_DST_BASE_ADDR_LOW", dst & 0xFFFF_FFFF)
        self.write(core, "D_DST_BASE_ADDR_HIGH", dst >> 32)
        self.write(core, "D_DST_SURFACE_STRIDE", strb)
        if slot == "PDP":
            self.write("PDP", "D_OPERATION_MODE_CFG", 1 << 4)  # FLYING_MODE=OFF_FLYING
        else:
            self.write("SDP", "D_FEATURE_MODE_CFG", 0)  # input from memory, output to memory
        out = []
        src_bytes = b"".join(w.to_bytes(8, "little") for w in data)
        old_bytes = b"".join(w.to_bytes(8, "little") for w in old)
        res = bytearray()
        for i, byte in enumerate(src_bytes):
            last_beat = i // self.beat_bytes == beats - 1
            enabled = not last_beat or (strb >> (i % self.beat_bytes)) & 1
            res.append((byte + 1) & 0xFF if enabled else old_bytes[i])
        for off in range(0, nbytes, 8):
            word = int.from_bytes(res[off : off + 8], "little")
            out.append(word)
            self.expected[dst + off] = word
        return out

    def arm(self, slot: str, rdma_first: bool = True) -> None:
        core, rdma, _, _ = ENGINES[slot]
        units = (rdma, core) if rdma_first else (core, rdma)
        self.write(units[0], "D_OP_ENABLE", 1)
        self.write(units[1], "D_OP_ENABLE", 1, nposted=True)

    def check_memory(self) -> None:
        for addr, word in sorted(self.expected.items()):
            self.vec.mem_check(addr, word, MASK64)
        self.expected.clear()


def engine_program(hw: HwConfig, rng: random.Random) -> Vectors:
    p = EngineScenario(hw, rng)
    bb = p.beat_bytes
    full = (1 << bb) - 1
    status = ("GLB", "S_INTR_STATUS")

    # 1. one PDP operation in group 0
    p.vec.check_intr(0)
    p.configure("PDP", 0, 0x8000_1000, 0x8000_8000, beats=8, strb=full >> (bb // 2))
    p.arm("PDP")
    p.vec.wait_intr(1)
    p.read(*status, 1 << 4)
    p.read("PDP", "S_POINTER", 0x1_0000)  # consumer moved to group 1, producer still 0
    p.read("PDP_RDMA", "S_POINTER", 0x1_0000)
    p.read("PDP", "D_OP_ENABLE", 0)
    p.read("PDP_RDMA", "D_OP_ENABLE", 0)
    p.read("PDP", "D_PERF_WRITE_STALL", 8)  # the engine's report landed in group 0
    p.read("PDP", "S_STATUS", 0)
    p.check_memory()
    p.write(*status, 1 << 4, nposted=True)
    p.vec.wait_intr(0)
    p.read(*status, 0)

    # 2. queued ping-pong: group 0 armed first waits (PENDING) behind group 1, then both run
    p.configure("PDP", 0, 0x8000_2000, 0x8000_9000, beats=5, strb=full)
    p.arm("PDP")
    p.read("PDP", "S_STATUS", 0x2)  # group 0 pending, group 1 idle
    p.vec.check_intr(0)
    # group 1 crosses a 4 KiB page on both sides
    p.configure("PDP", 1, 0x8000_3000 - 3 * bb, 0x8000_B000 - 5 * bb, beats=16, strb=1)
    p.arm("PDP", rdma_first=False)
    p.read("PDP", "S_STATUS", 0x1_0002)  # group 1 running, group 0 pending
    p.vec.poll(p.a(*status), (1 << 4) | (1 << 5))
    p.read("PDP", "S_POINTER", 0x1_0001)  # two completions: consumer back to 1; producer 1
    p.read("PDP", "S_STATUS", 0)
    p.read("PDP", "D_PERF_WRITE_STALL", 16)  # group 1 (producer)
    p.write("PDP", "S_POINTER", 0)
    p.read("PDP", "D_PERF_WRITE_STALL", 5)  # group 0
    p.check_memory()
    p.write(*status, 0x3F03FF)
    p.vec.wait_intr(0)

    # 3. PDP and SDP at the same time: the DMA serves both
    p.configure("SDP", 0, 0x8000_4000, 0x8000_C000, beats=12, strb=full)
    p.configure("PDP", 1, 0x8000_5000, 0x8000_D000, beats=16, strb=full)
    p.arm("SDP")
    p.arm("PDP")
    p.vec.poll(p.a(*status), (1 << 0) | (1 << 5))
    p.read("SDP", "S_POINTER", 0x1_0000)
    p.read("SDP_RDMA", "S_POINTER", 0x1_0000)
    p.read("PDP", "S_POINTER", 0x0_0001)
    p.read("SDP", "D_PERF_WDMA_WRITE_STALL", 12)
    p.check_memory()
    p.write(*status, 0x3F03FF)

    # 4. interrupt mask: PDP done is recorded but only SDP bits drive the line (the traces' mask)
    p.write("GLB", "S_INTR_MASK", 0x3F03FC)
    p.configure("PDP", 0, 0x8000_6000, 0x8000_E000, beats=3, strb=full)
    p.arm("PDP")
    p.vec.poll(p.a(*status), 1 << 4)
    p.vec.idle(4)
    p.vec.check_intr(0)
    p.write("GLB", "S_INTR_SET", 1 << 1)
    p.vec.wait_intr(1)
    p.read(*status, (1 << 4) | (1 << 1))
    p.write(*status, 1 << 1)
    p.vec.wait_intr(0)
    p.write(*status, 1 << 4)
    p.write("GLB", "S_INTR_MASK", 0)
    p.check_memory()

    # 5. a write to an armed group is dropped; the operation runs with the armed configuration
    p.configure("PDP", 1, 0x8000_7000, 0x8000_F000, beats=4, strb=full)
    p.fill(0x8000_A000, 4 * bb, 0x5555_5555_5555_5555)
    p.write("PDP", "D_OP_ENABLE", 1)  # core armed, RDMA not yet: waits
    p.write("PDP", "D_DST_BASE_ADDR_LOW", 0x8000_A000)
    p.read("PDP", "D_DST_BASE_ADDR_LOW", 0x8000_F000)
    p.read("PDP", "S_STATUS", 0x1_0000)  # armed consumer group reads RUNNING
    p.vec.idle(50)
    p.read(*status, 0)
    p.write("PDP_RDMA", "D_OP_ENABLE", 1, nposted=True)
    p.vec.wait_intr(1)
    p.read(*status, 1 << 5)
    p.check_memory()
    for off in range(0, 4 * bb, 8):
        p.vec.mem_check(0x8000_A000 + off, 0x5555_5555_5555_5555)  # the dropped address is untouched
    p.write(*status, 1 << 5)

    # 6. operations that never start in this RTL: SDP fed by the conv pipeline, PDP fed by SDP
    p.write("SDP", "S_POINTER", 1)
    p.write("SDP_RDMA", "S_POINTER", 1)
    p.write("SDP", "D_FEATURE_MODE_CFG", 1)  # FLYING_MODE=ON
    p.arm("SDP")
    p.write("PDP", "S_POINTER", 0)
    p.write("PDP_RDMA", "S_POINTER", 0)
    p.write("PDP", "D_OPERATION_MODE_CFG", 0)  # FLYING_MODE=ON_FLYING
    p.arm("PDP")
    p.vec.idle(200)
    p.read(*status, 0)
    p.read("SDP", "S_STATUS", 0x1_0000)
    p.read("PDP", "S_STATUS", 0x1)
    p.vec.check_intr(0)
    return p.vec


def chain_program(hw: HwConfig, rng: random.Random) -> Vectors:
    """With DLA_SDP_PDP_FLYING: SDP (OUTPUT_DST=PDP) and PDP (ON_FLYING) start together."""
    p = EngineScenario(hw, rng)
    full = (1 << p.beat_bytes) - 1
    p.configure("SDP", 0, 0x8000_1000, 0x8000_8000, beats=6, strb=full)
    p.configure("PDP", 0, 0x8000_2000, 0x8000_9000, beats=7, strb=full)
    p.write("SDP", "D_FEATURE_MODE_CFG", 1 << 1)  # OUTPUT_DST=PDP
    p.write("PDP", "D_OPERATION_MODE_CFG", 0)  # ON_FLYING
    p.arm("SDP")
    p.vec.idle(100)
    p.read("GLB", "S_INTR_STATUS", 0)  # waits for PDP
    p.write("PDP", "D_OP_ENABLE", 1)  # PDP_RDMA not needed on the fly
    p.vec.poll(p.a("GLB", "S_INTR_STATUS"), (1 << 0) | (1 << 4))
    p.read("PDP", "S_POINTER", 0x1_0000)
    p.read("PDP_RDMA", "S_POINTER", 0)  # not armed, not consumed
    p.read("SDP_RDMA", "S_POINTER", 0x1_0000)
    p.check_memory()
    return p.vec


def _run(tmp_path, hw: HwConfig, defines: dict[str, str | None], vec: Vectors, seed: int) -> str:
    cfg = sim.config_dir(tmp_path, hw)
    build, vvp = sim.icarus_build(tmp_path, cfg, defines, extra=[sim.TB])
    assert build.returncode == 0, build.stderr + build.stdout
    result = sim.icarus_run(vvp, vec.save(tmp_path / "engine.hex"), seed=seed)
    assert "TB PASS" in result.stdout, result.stdout[-4000:] + result.stderr[-2000:]
    return result.stdout


@pytest.mark.parametrize("config", ["nv_small", "nv_small_256_full", "nv_medium_512"])
def test_engine_interface_and_dma(tmp_path, config):
    """nv_small: 64-bit bus, single-beat bursts; nv_small_256_full: 4-beat bursts;
    nv_medium_512: 128-bit bus, 64-bit addresses, 4-beat bursts."""
    hw = get_config(config)
    vec = engine_program(hw, random.Random(7))
    out = _run(tmp_path, hw, {"DLA_TEST_ENGINE": None}, vec, seed=11)
    assert "max_rd_outstanding=" in out


def test_sdp_to_pdp_on_the_fly_starts_both(tmp_path):
    hw = get_config("nv_small")
    _run(tmp_path, hw, {"DLA_TEST_ENGINE": None, "DLA_SDP_PDP_FLYING": None}, chain_program(hw, random.Random(3)), seed=5)


def test_csb_timing_is_cycle_exact(tmp_path):
    """tb/vectors/tb_csb_timing.v: back-to-back requests, answers exactly 2 cycles after acceptance."""
    hw = get_config("nv_small")
    cfg = sim.config_dir(tmp_path, hw)
    build, vvp = sim.icarus_build(tmp_path, cfg, {}, top="tb_csb_timing", extra=[sim.HERE / "tb_csb_timing.v"])
    assert build.returncode == 0, build.stderr + build.stdout
    result = sim.run(["vvp", "-n", str(vvp)])
    assert "TB PASS" in result.stdout, result.stdout[-3000:]
