"""Register-file semantics of golden.Dla, with stand-in engines so only the Dla is under test."""
from __future__ import annotations

import re

import pytest

from conftest import DEFAULT_SHARED
from golden import ConfigError, Dla, RegisterError, UnsupportedError, get_config
from golden.dla import cfgrom_values
from golden.dma import CONV_UNITS
from golden.engines import Engine


def recording_engine(name, units, rdma=None, done=(), source=None, sink=None, needs_rdma=True, log=None):
    def run(ctx):
        log.append((name, {u: int(ctx.regs[u].D_OP_ENABLE) for u in units}, ctx.flying_input))
        return f"{name}-out" if sink else None

    return Engine(
        name=name, units=units, rdma=rdma, done_bits=done, run=run,
        source=lambda regs: source, sink=lambda regs: sink, rdma_needed=lambda regs: needs_rdma,
    )


@pytest.fixture
def dla():
    return Dla(get_config("nv_small"))


def test_producer_selects_the_group_and_s_registers_go_to_both(dla):
    dla.write("NVDLA_PDP.S_POINTER_0", 1)
    dla.write("NVDLA_PDP.D_DATA_CUBE_IN_WIDTH_0", 7)
    assert dla.read("NVDLA_PDP.D_DATA_CUBE_IN_WIDTH_0") == 7
    dla.write("NVDLA_PDP.S_POINTER_0", 0)
    assert dla.read("NVDLA_PDP.D_DATA_CUBE_IN_WIDTH_0") == 0
    assert dla.read("NVDLA_PDP.S_POINTER_0") == 0
    dla.write("NVDLA_SDP.S_LUT_INFO_0", 0x30201)
    dla.write("NVDLA_SDP.S_POINTER_0", 1)
    assert dla.read("NVDLA_SDP.S_LUT_INFO_0") == 0x30201


def test_op_enable_fires_completes_toggles_consumer_and_raises_group_bit(dla):
    log = []
    dla.engines = {"PDP": recording_engine("PDP", ("PDP",), rdma="PDP_RDMA", done=(("PDP", 4),), log=log)}
    dla.write("NVDLA_PDP_RDMA.D_OP_ENABLE_0", 1)
    assert not log, "PDP must wait for its own OP_EN"
    dla.write("NVDLA_PDP.D_OP_ENABLE_0", 1)
    assert len(log) == 1
    assert dla.read("NVDLA_PDP.S_POINTER_0") == 0x10000  # consumer moved to group 1
    assert dla.read("NVDLA_PDP.D_OP_ENABLE_0") == 0
    assert dla.read("NVDLA_GLB.S_INTR_STATUS_0") == 1 << 4
    # second operation in group 1 raises the group-1 bit
    dla.write("NVDLA_PDP.S_POINTER_0", 1)
    dla.write("NVDLA_PDP_RDMA.S_POINTER_0", 1)
    dla.write("NVDLA_PDP_RDMA.D_OP_ENABLE_0", 1)
    dla.write("NVDLA_PDP.D_OP_ENABLE_0", 1)
    assert dla.read("NVDLA_GLB.S_INTR_STATUS_0") == (1 << 4) | (1 << 5)


def test_interrupt_status_is_write_one_to_clear_and_mask_gates_the_line(dla):
    dla.write("NVDLA_GLB.S_INTR_SET_0", 0x11)
    assert dla.read("NVDLA_GLB.S_INTR_STATUS_0") == 0x11
    dla.write("NVDLA_GLB.S_INTR_MASK_0", 0x3F03FC)  # the traces' mask: only SDP unmasked
    assert dla.interrupt  # bit 0 unmasked
    dla.write("NVDLA_GLB.S_INTR_STATUS_0", 0x1)
    assert dla.read("NVDLA_GLB.S_INTR_STATUS_0") == 0x10
    assert not dla.interrupt  # bit 4 is masked, its status stays
    dla.write("NVDLA_GLB.S_INTR_STATUS_0", 0x10)
    assert dla.read("NVDLA_GLB.S_INTR_STATUS_0") == 0


def test_writing_an_enabled_group_is_a_config_error(dla):
    dla.engines = {}
    dla.write("NVDLA_PDP.D_OP_ENABLE_0", 1)
    with pytest.raises(ConfigError, match="PDP.D_DATA_CUBE_IN_WIDTH"):
        dla.write("NVDLA_PDP.D_DATA_CUBE_IN_WIDTH_0", 3)
    assert dla.read("NVDLA_PDP.S_STATUS_0") == 1  # group 0 RUNNING (armed, consumer)


def test_on_the_fly_chain_fires_only_when_every_part_is_armed(dla):
    log = []
    dla.engines = {
        "CONV": recording_engine("CONV", CONV_UNITS, done=(("CACC", 20),), sink="SDP", log=log),
        "SDP": recording_engine("SDP", ("SDP",), rdma="SDP_RDMA", done=(("SDP", 0),), source="CONV",
                                needs_rdma=False, log=log),
    }
    dla.write("NVDLA_SDP.D_OP_ENABLE_0", 1)
    for unit in CONV_UNITS[::-1][:-1]:
        dla.write(f"NVDLA_{unit}.D_OP_ENABLE_0", 1)
        assert not log
    dla.write("NVDLA_CDMA.D_OP_ENABLE_0", 1)
    assert [e[0] for e in log] == ["CONV", "SDP"]
    assert log[1][2] == "CONV-out"  # data handed over on the fly
    assert dla.read("NVDLA_GLB.S_INTR_STATUS_0") == (1 << 20) | 1
    assert all(dla.read(f"NVDLA_{u}.S_POINTER_0") == 0x10000 for u in CONV_UNITS + ("SDP",))
    assert dla.read("NVDLA_SDP_RDMA.S_POINTER_0") == 0  # not needed, not consumed


def test_rdma_is_awaited_when_needed(dla):
    log = []
    dla.engines = {"CDP": recording_engine("CDP", ("CDP",), rdma="CDP_RDMA", done=(("CDP", 2),), log=log)}
    dla.write("NVDLA_CDP.D_OP_ENABLE_0", 1)
    assert not log
    dla.write("NVDLA_CDP_RDMA.D_OP_ENABLE_0", 1)
    assert log and dla.read("NVDLA_CDP_RDMA.S_POINTER_0") == 0x10000


def test_lut_access_writes_auto_increment(dla):
    dla.write("NVDLA_SDP.S_LUT_ACCESS_CFG_0", LUT_ADDR=2, LUT_TABLE_ID=1, LUT_ACCESS_TYPE=1)
    for v in (0x1234, 0xFFFF, 0x8000):
        dla.write("NVDLA_SDP.S_LUT_ACCESS_DATA_0", v)
    lo = dla.units["SDP"].lut["LO"]
    assert list(lo[2:5]) == [0x1234, -1, -0x8000]
    dla.write("NVDLA_SDP.S_LUT_ACCESS_CFG_0", LUT_ADDR=3, LUT_TABLE_ID=1, LUT_ACCESS_TYPE=0)
    assert dla.read("NVDLA_SDP.S_LUT_ACCESS_DATA_0") == 0xFFFF


def test_cfgrom_equals_nvdla_nv_small_rom_word_for_word():
    """Every CFGROM word golden reads for nv_small (unit descriptors, sizes, data types, capabilities) equals
    NVDLA's own nv_small ROM (``NV_NVDLA_CFGROM_rom.v`` of the shared RTL: its read mux, offset -> value), so
    software probing the ROM sees the same machine on golden as on NVDLA's RTL."""
    from golden.regs import UNITS

    rom_v = DEFAULT_SHARED / "rtl" / "nv_small" / "vmod" / "nvdla" / "cfgrom" / "NV_NVDLA_CFGROM_rom.v"
    if not rom_v.is_file():
        pytest.skip(f"no nv_small RTL at {rom_v}")
    rom = {int(a, 16): int(v, 16) for a, v in
           re.findall(r"\(32'h([0-9a-f]+) & 32'h00000fff\): reg_rd_data = 32'h([0-9a-f]+)", rom_v.read_text())}
    dla = Dla(get_config("nv_small"))
    words = UNITS["CFGROM"].registers
    assert sum(r.name.endswith("_DESC") for r in words) >= 14 and len(rom) >= len(words)
    got = {r.name: dla.read(f"NVDLA_CFGROM.{r.name}_0") for r in words}
    assert got == {r.name: rom[r.offset] for r in words}


def test_cfgrom_memory_interface_words_place_their_fields():
    """CIF_BASE_WIDTH is the primary memory interface in bytes (field [7:0]); CIF_BASE_MEM_ADDR_WIDTH holds the
    address width in bits in field [31:5], so its word is width << 5 (NVDLA's nv_small ROM: 32 -> 0x400)."""
    small, large = Dla(get_config("nv_small")), Dla(get_config("nv_large"))
    assert small.read("NVDLA_CFGROM.CFGROM_CIF_BASE_WIDTH_0") == 64 // 8
    assert small.read("NVDLA_CFGROM.CFGROM_CIF_BASE_MEM_ADDR_WIDTH_0") == 32 << 5
    assert large.read("NVDLA_CFGROM.CFGROM_CIF_BASE_WIDTH_0") == 256 // 8
    assert large.read("NVDLA_CFGROM.CFGROM_CIF_BASE_MEM_ADDR_WIDTH_0") == 64 << 5


def test_cfgrom_describes_the_config():
    small, wide = Dla(get_config("nv_small")), Dla(get_config("nv_small_256"))
    assert small.read("NVDLA_CFGROM.CFGROM_CDMA_BASE_ATOMIC_C_0") == 8
    assert wide.read("NVDLA_CFGROM.CFGROM_CDMA_BASE_ATOMIC_C_0") == 32
    assert small.read("NVDLA_CFGROM.CFGROM_PDP_DESC_0") != 0
    assert small.read("NVDLA_CFGROM.CFGROM_SDP_CAP_COMPAT_0") == 0x18
    full256 = Dla(get_config("nv_small_256_full"))
    assert full256.read("NVDLA_CFGROM.CFGROM_SDP_CAP_COMPAT_0") & 0x60 == 0x60
    no_cdp = Dla(get_config("nv_small").derive(cdp=False))
    assert no_cdp.read("NVDLA_CFGROM.CFGROM_CDP_DESC_0") == 0


def test_absent_units_and_unmapped_addresses(dla):
    with pytest.raises(UnsupportedError, match="BDMA"):
        dla.write("NVDLA_BDMA.CFG_OP_0", 1)
    with pytest.raises(RegisterError, match="0x9ffc"):
        dla.write_reg(0x9FFC, 1)
    assert dla.read("NVDLA_CDMA.S_CBUF_FLUSH_STATUS_0") == 1


def test_status_reads_running_for_the_consumer_and_pending_for_the_other_group(dla: Dla) -> None:
    """S_STATUS holds STATUS_0 in [1:0] and STATUS_1 in [17:16]: 0 IDLE (OP_EN clear), 1 RUNNING (armed and the
    consumer), 2 PENDING (armed, waiting for the consumer to come round), as NVDLA's ``dp2reg_status_*``."""
    dla.engines = {}  # nothing runs: armed groups stay armed
    dla.write("NVDLA_PDP.S_POINTER_0", 1)
    dla.write("NVDLA_PDP.D_OP_ENABLE_0", 1)
    assert dla.read("NVDLA_PDP.S_STATUS_0") == 2 << 16  # group 1 armed, consumer still 0
    dla.write("NVDLA_PDP.S_POINTER_0", 0)
    dla.write("NVDLA_PDP.D_OP_ENABLE_0", 1)
    assert dla.read("NVDLA_PDP.S_STATUS_0") == 1 | (2 << 16)


def test_cfgrom_words_follow_the_config_without_a_dla() -> None:
    """``cfgrom_values`` fills each unit's words from the config, not the RDL resets: nv_small_256's CDMA
    atomic C is 32 and its CBUF banks 32 bytes wide; SDP_CAP_COMPAT has one bit per SDP sub-unit (X1 0x8,
    X2 0x10, Y 0x20, LUT 0x40), so Y alone on nv_small adds exactly 0x20 to its 0x18 and LUT alone 0x40."""
    wide = cfgrom_values(get_config("nv_small_256"))
    assert wide["CFGROM_CDMA_BASE_ATOMIC_C"] == 32
    assert wide["CFGROM_CBUF_BASE_CBUF_BANK_WIDTH"] == 32
    small = get_config("nv_small")
    assert cfgrom_values(small.derive(sdp_ew=True))["CFGROM_SDP_CAP_COMPAT"] == 0x38
    assert cfgrom_values(small.derive(sdp_lut=True))["CFGROM_SDP_CAP_COMPAT"] == 0x58
