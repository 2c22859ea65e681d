"""BDMA in the golden model: queue/launch semantics, the copy, CV-SRAM, errors, and the nvdlav1 sanity traces
replayed by hand (NVDLA_NOTES §2 BDMA, §4 BDMA)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from golden import ConfigError, Dla, UnsupportedError, get_config
from golden.dma import Traffic
from golden.engines import load_engines
from golden.regs import UNITS

TRACES = Path("/work/shared/nvdla/traces/nv_full")
SRC, DST = 0x8000_0000, 0x8100_0000


@pytest.fixture
def dla():
    return Dla(get_config("nv_full"))


def program(dla, *, src=SRC, dst=DST, line=0, lines=1, surfs=1, src_line=0, dst_line=0, src_surf=0,
            dst_surf=0, src_ram=1, dst_ram=1, enqueue=True):
    """Write one transfer's CFG_* registers (sizes are counts; addresses and strides bytes)."""
    w = dla.write
    w("NVDLA_BDMA.CFG_SRC_ADDR_LOW_0", src & 0xFFFFFFFF)
    w("NVDLA_BDMA.CFG_SRC_ADDR_HIGH_0", src >> 32)
    w("NVDLA_BDMA.CFG_DST_ADDR_LOW_0", dst & 0xFFFFFFFF)
    w("NVDLA_BDMA.CFG_DST_ADDR_HIGH_0", dst >> 32)
    w("NVDLA_BDMA.CFG_LINE_0", SIZE=line)
    w("NVDLA_BDMA.CFG_LINE_REPEAT_0", NUMBER=lines - 1)
    w("NVDLA_BDMA.CFG_SURF_REPEAT_0", NUMBER=surfs - 1)
    w("NVDLA_BDMA.CFG_SRC_LINE_0", src_line)
    w("NVDLA_BDMA.CFG_DST_LINE_0", dst_line)
    w("NVDLA_BDMA.CFG_SRC_SURF_0", src_surf)
    w("NVDLA_BDMA.CFG_DST_SURF_0", dst_surf)
    w("NVDLA_BDMA.CFG_CMD_0", SRC_RAM_TYPE=src_ram, DST_RAM_TYPE=dst_ram)
    if enqueue:
        w("NVDLA_BDMA.CFG_OP_0", EN=1)


def random_bytes(n, seed=0):
    return np.random.default_rng(seed).integers(0, 256, n, dtype=np.uint8)


def test_registration_comes_from_the_register_table():
    eng = load_engines()["BDMA"]
    glb = UNITS["GLB"].register("S_INTR_STATUS")
    assert eng.units == ("BDMA",) and eng.rdma is None
    assert eng.done_bits == (("BDMA", glb.field("BDMA_DONE_STATUS0").lsb),)
    assert glb.field("BDMA_DONE_STATUS1").lsb == eng.done_bits[0][1] + 1
    assert eng.queue.enqueue == "CFG_OP" and eng.queue.launches == ("CFG_LAUNCH0", "CFG_LAUNCH1")
    assert eng.queue.depth == UNITS["BDMA"].register("STATUS").field("FREE_SLOT").reset == 20


def test_strided_copy_with_gaps_kept(dla):
    """2 surfaces x 3 lines of 64 bytes, source and destination with different padding."""
    src = random_bytes(0x1000, 1)
    dla.mem.dram.write(SRC, src)
    garbage = random_bytes(0x1000, 2)
    dla.mem.dram.write(DST, garbage)
    program(dla, line=1, lines=3, surfs=2, src_line=96, src_surf=0x200, dst_line=64, dst_surf=0x100)
    dla.write("NVDLA_BDMA.CFG_LAUNCH0_0", GRP0_LAUNCH=1)
    expect = garbage.copy()
    for s in range(2):
        for l in range(3):
            expect[s * 0x100 + l * 64:][:64] = src[s * 0x200 + l * 96:][:64]
    assert np.array_equal(dla.mem.dram.read(DST, 0x1000), expect)
    assert dla.read("NVDLA_GLB.S_INTR_STATUS_0") == 1 << 6


def test_queue_status_groups_and_done_bits(dla):
    dla.mem.dram.write(SRC, random_bytes(0x400, 3))
    assert dla.read("NVDLA_BDMA.STATUS_0") == UNITS["BDMA"].register("STATUS").reset  # 20 free, idle
    program(dla, dst=DST)
    program(dla, src=SRC + 0x20, dst=DST + 0x20)
    status = UNITS["BDMA"].register("STATUS").decode(dla.read("NVDLA_BDMA.STATUS_0"))
    assert status == {"FREE_SLOT": 18, "IDLE": 0, "GRP0_BUSY": 0, "GRP1_BUSY": 0}
    assert not dla.mem.dram.read(DST, 0x40).any(), "queued transfers must wait for a launch"
    dla.write("NVDLA_BDMA.CFG_LAUNCH1_0", GRP1_LAUNCH=1)
    assert dla.read("NVDLA_GLB.S_INTR_STATUS_0") == 1 << 7  # group 1 only
    assert np.array_equal(dla.mem.dram.read(DST, 0x40), dla.mem.dram.read(SRC, 0x40))
    assert dla.read("NVDLA_BDMA.STATUS_0") == UNITS["BDMA"].register("STATUS").reset
    for grp in (0, 1):  # the model never stalls: its stall counters stay 0
        for way in ("READ", "WRITE"):
            assert dla.read(f"NVDLA_BDMA.STATUS_GRP{grp}_{way}_STALL_0") == 0
    assert dla.read("NVDLA_BDMA.CFG_LAUNCH1_0") == 1 and dla.read("NVDLA_BDMA.CFG_OP_0") == 1  # RTL keeps them
    assert dla.history[-2:] == [(("BDMA",), {"BDMA": 1})] * 2
    program(dla, src=SRC + 0x40, dst=DST + 0x40)
    dla.write("NVDLA_BDMA.CFG_LAUNCH0_0", GRP0_LAUNCH=1)
    assert dla.read("NVDLA_GLB.S_INTR_STATUS_0") == (1 << 7) | (1 << 6)


def test_op_en_zero_and_launch_zero_do_nothing(dla):
    program(dla, enqueue=False)
    dla.write("NVDLA_BDMA.CFG_OP_0", EN=0)
    dla.write("NVDLA_BDMA.CFG_LAUNCH0_0", GRP0_LAUNCH=0)
    assert dla.read("NVDLA_BDMA.STATUS_0") & 0xFF == 20
    assert dla.read("NVDLA_GLB.S_INTR_STATUS_0") == 0


def test_sequential_transfers_in_a_group_chain(dla):
    """Transfers of one group run in queue order: the second reads what the first wrote."""
    data = random_bytes(0x40, 4)
    dla.mem.dram.write(SRC, data)
    program(dla, src=SRC, dst=DST, line=1)
    program(dla, src=DST, dst=DST + 0x1000, line=1)
    dla.write("NVDLA_BDMA.CFG_LAUNCH0_0", GRP0_LAUNCH=1)
    assert np.array_equal(dla.mem.dram.read(DST + 0x1000, 0x40), data)


def test_cvsram_both_directions_and_high_addresses(dla):
    data = random_bytes(0x100, 5)
    dla.mem.dram.write(0x1_2000_0000, data)
    program(dla, src=0x1_2000_0000, dst=0x5000_0000, line=7, src_ram=1, dst_ram=0)
    program(dla, src=0x5000_0000, dst=0x5000_1000, line=7, src_ram=0, dst_ram=0)
    program(dla, src=0x5000_1000, dst=0x2_0000_0000, line=7, src_ram=0, dst_ram=1)
    dla.write("NVDLA_BDMA.CFG_LAUNCH0_0", GRP0_LAUNCH=1)
    assert np.array_equal(dla.mem.cvsram.read(0x5000_1000, 0x100), data)
    assert np.array_equal(dla.mem.dram.read(0x2_0000_0000, 0x100), data)
    assert not dla.mem.dram.read(0x5000_0000, 0x100).any(), "CV-SRAM writes must not land in DRAM"


def test_low_address_bits_are_ignored(dla):
    """Address and stride fields are [31:5]: the low five bits of a written word are dropped."""
    data = random_bytes(0x40, 6)
    dla.mem.dram.write(SRC, data)
    program(dla, src=SRC | 0x1F, dst=DST | 0x10, line=0, lines=2, src_line=0x20 | 7, dst_line=0x20 | 3)
    assert dla.read("NVDLA_BDMA.CFG_SRC_ADDR_LOW_0") == SRC
    dla.write("NVDLA_BDMA.CFG_LAUNCH0_0", GRP0_LAUNCH=1)
    assert np.array_equal(dla.mem.dram.read(DST, 0x40), data)


def test_overlapping_destination_lines_keep_the_later_line(dla):
    dla.mem.dram.write(SRC, random_bytes(0x100, 7))
    program(dla, line=1, lines=3, src_line=0x40, dst_line=0x20)  # 64-byte lines, 32-byte destination stride
    dla.write("NVDLA_BDMA.CFG_LAUNCH0_0", GRP0_LAUNCH=1)
    src = dla.mem.dram.read(SRC, 0xC0)
    got = dla.mem.dram.read(DST, 0x80)
    assert np.array_equal(got[:0x20], src[:0x20])
    assert np.array_equal(got[0x20:0x40], src[0x40:0x60])
    assert np.array_equal(got[0x40:0x80], src[0x80:0xC0])



@pytest.mark.parametrize("layout", [
    dict(line=1, lines=3, surfs=2, src_line=96, src_surf=0x200, dst_line=64, dst_surf=0x100),  # gaps between lines
    dict(line=1, lines=3, src_line=0x40, dst_line=0x20),  # destination lines overlapping each other
])
def test_profiled_traffic_is_the_bytes_the_lines_move(dla, layout):
    """With profiling on, a BDMA copy counts what its DMA moves: every line read once and written once,
    (LINE.SIZE+1)*32 bytes each, not the gaps between lines (nor the bytes kept there), and the write side
    reads nothing."""
    dla.traffic = Traffic()
    dla.mem.dram.write(SRC, random_bytes(0x1000, 8))
    program(dla, **layout)
    dla.write("NVDLA_BDMA.CFG_LAUNCH0_0", GRP0_LAUNCH=1)
    moved = layout.get("surfs", 1) * layout["lines"] * (layout["line"] + 1) * 32
    assert dla.traffic.snapshot() == ({"BDMA": moved}, {"BDMA": moved})


def test_errors(dla):
    with pytest.raises(ConfigError, match=r"BDMA\.CFG_LAUNCH0\.GRP0_LAUNCH"):
        dla.write("NVDLA_BDMA.CFG_LAUNCH0_0", GRP0_LAUNCH=1)
    program(dla, enqueue=False)
    for _ in range(20):
        dla.write("NVDLA_BDMA.CFG_OP_0", EN=1)
    with pytest.raises(ConfigError, match=r"BDMA\.CFG_OP\.EN.*20 slots"):
        dla.write("NVDLA_BDMA.CFG_OP_0", EN=1)
    fresh = Dla(get_config("nv_full"))
    program(fresh, src=SRC, dst=SRC + 0x20, line=1)  # 64-byte line onto its own second half
    with pytest.raises(ConfigError, match=r"BDMA\.CFG_DST_ADDR_LOW\.V32.*overlaps"):
        fresh.write("NVDLA_BDMA.CFG_LAUNCH0_0", GRP0_LAUNCH=1)
    other = Dla(get_config("nv_full"))
    program(other, src=SRC, dst=SRC + 0x20, line=1, src_ram=1, dst_ram=0)  # other memory: legal
    other.write("NVDLA_BDMA.CFG_LAUNCH0_0", GRP0_LAUNCH=1)


def test_absent_on_configs_without_bdma():
    small = Dla(get_config("nv_small"))
    with pytest.raises(UnsupportedError, match="BDMA"):
        small.write("NVDLA_BDMA.CFG_OP_0", 1)
    no_cv = Dla(get_config("nv_full").derive(secondary_memif=False))
    program(no_cv, dst_ram=0)
    with pytest.raises(UnsupportedError, match=r"BDMA\.CFG_CMD\.DST_RAM_TYPE selects CV-SRAM") as err:
        no_cv.write("NVDLA_BDMA.CFG_LAUNCH0_0", GRP0_LAUNCH=1)
    assert err.value.unit == "CVIF"


# ---- the nvdlav1 sanity traces, replayed by hand ------------------------------------------------------------
def _payload(path: Path) -> bytes:
    """Bytes of a ``sample_surf.dat``: every ``0xNN`` token after the ``Key = value`` header."""
    out = bytearray()
    for line in path.read_text().splitlines():
        if line.startswith("0x"):
            out.extend(int(tok, 16) for tok in line.split())
    return bytes(out)


def replay_txn(dla: Dla, trace: Path) -> tuple[list[str], int]:
    """Play ``input.txn`` on ``dla``: (failed read_reg checks, the load_mem base). Addresses below
    0x8000_0000 are CV-SRAM (the nvdlav1 testbench window the *_cvsram traces load into)."""
    failures: list[str] = []
    base = None
    for raw in (trace / "input.txn").read_text().splitlines():
        line = raw.split("#", 1)[0].split()
        if not line:
            continue
        op, args = line[0], line[1:]
        if op == "load_mem":
            base, size = int(args[0], 16), int(args[1], 16)
            space = dla.mem.cvsram if base < 0x8000_0000 else dla.mem.dram
            space.write(base, _payload(trace / args[2])[:size])
        elif op == "write_reg":
            dla.write_reg((int(args[0], 16) & 0xFFFF) << 2, int(args[1], 16))
        elif op == "read_reg":
            addr, mask, want = ((int(a, 16)) for a in args)
            got = dla.read_reg((addr & 0xFFFF) << 2)
            if got & mask != want & mask:
                failures.append(f"{raw.strip()}: read {got:#x}")
        elif op == "wait":
            assert dla.interrupt or dla.intr_status, "wait with no operation complete"
        else:
            raise AssertionError(f"unexpected txn command {op}")
    return failures, base


@pytest.mark.parametrize("name", ["sanity1", "sanity2", "sanity1_cvsram", "sanity2_cvsram"])
def test_nvdlav1_sanity_traces(name):
    trace = TRACES / name
    if not trace.is_dir():
        pytest.skip(f"{trace} not present")
    dla = Dla(get_config("nv_full"))
    failures, base = replay_txn(dla, trace)
    assert failures == []
    assert dla.intr_status == 1 << 6  # BDMA_DONE_STATUS0 only
    # The traces copy 8 lines of 256 bytes (line stride 0x100) from base to base + 0x100_0000.
    space = dla.mem.cvsram if name.endswith("_cvsram") else dla.mem.dram
    src = space.read(base, 0x800)
    assert src.any()
    assert np.array_equal(space.read(base + 0x100_0000, 0x800), src)
    assert not space.read(base + 0x100_0800, 0x800).any()
    other = dla.mem.dram if name.endswith("_cvsram") else dla.mem.cvsram
    assert other.allocated_bytes() == 0
