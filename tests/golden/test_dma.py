"""``golden.dma``: how DMA registers become memory accesses (64-bit addresses from HIGH/LOW pairs, stride
legality) and the profiling traffic counters, which must count what the engines' DMAs move and nothing else."""
from __future__ import annotations

import numpy as np
import pytest

from golden.config import get_config
from golden.dma import CountedMemory, Traffic, check_fits, dma_address, space_for
from golden.errors import ConfigError, UnsupportedError
from golden.layout import CubeLayout, read_cube, write_cube
from golden.memory import Memory
from golden.regs import UNITS, RegView

SMALL, FULL = get_config("nv_small"), get_config("nv_full")


def _pdp(**words: int) -> RegView:
    """A PDP register group holding the given whole words (by register name)."""
    unit = UNITS["PDP"]
    return RegView(unit, {unit.register(name).offset: value for name, value in words.items()})


def test_base_address_is_high_word_then_low_word() -> None:
    """``D_SRC_BASE_ADDR_HIGH`` holds address bits [63:32], ``_LOW`` bits [31:0]; on nv_full the address unit is
    32 bytes (fields [31:5]), so the low five bits of LOW are ignored."""
    view = _pdp(D_SRC_BASE_ADDR_HIGH=0x1, D_SRC_BASE_ADDR_LOW=0x8000_005F)
    assert dma_address(SMALL, view, "D_SRC_BASE_ADDR") == 0x1_8000_005F
    assert dma_address(FULL, view, "D_SRC_BASE_ADDR") == 0x1_8000_0040
    assert dma_address(SMALL, _pdp(D_SRC_BASE_ADDR_HIGH=0xFFFF_FFFF), "D_SRC_BASE_ADDR") == 0xFFFF_FFFF << 32


def test_a_single_line_needs_no_line_stride() -> None:
    """The line stride steps from one line to the next: a cube one line high never uses it, so any value
    (0 included) is legal there; from two lines on, a stride below one line of atoms overlaps them."""
    one_line = CubeLayout(channels=16, height=1, width=4, line_stride=0, surf_stride=32, atom=8)
    check_fits(one_line, _pdp(), "SRC")
    with pytest.raises(ConfigError, match=r"PDP\.D_SRC_LINE_STRIDE\.SRC_LINE_STRIDE: 16 bytes is less than one line"):
        check_fits(CubeLayout(16, 2, 4, 16, 256, 8), _pdp(), "SRC")


def test_surfaces_may_interleave_lines_but_not_overlap() -> None:
    """Surfaces interleaved between lines (surface stride one line, line stride two) share no byte and are
    legal; half a line of surface stride makes atoms of two surfaces coincide."""
    check_fits(CubeLayout(16, 3, 4, 64, 32, 8), _pdp(), "SRC")
    check_fits(CubeLayout(16, 3, 4, 32, 96, 8), _pdp(), "SRC")  # surfaces one after the other, packed
    with pytest.raises(ConfigError, match=r"D_SRC_SURFACE_STRIDE\.SRC_SURFACE_STRIDE: 16 bytes makes the 2 surfaces"):
        check_fits(CubeLayout(16, 3, 4, 64, 16, 8), _pdp(), "SRC")


def test_traffic_counts_reads_and_writes_apart() -> None:
    """A write counts written bytes only, a read read bytes only, under the engine of the space."""
    traffic = Traffic()
    space = CountedMemory(Memory(), traffic, "PDP").space(1)
    space.write(0x100, bytes(48))
    assert traffic.snapshot() == ({}, {"PDP": 48})
    space.read(0x100, 16)
    assert traffic.snapshot() == ({"PDP": 16}, {"PDP": 48})


def test_unbound_accesses_count_under_the_running_operation() -> None:
    """An access made through no engine (an RTL's AXI port) counts under ``Traffic.engine``, the operation the
    runtime is running, and under "other" when none is set; an engine-bound access under its engine."""
    traffic = Traffic()
    traffic.count(None, read=8)
    traffic.engine = "BDMA"
    traffic.count(None, written=32)
    traffic.count("SDP", read=4)
    traffic.engine = None
    traffic.count("PDP", written=2)
    assert traffic.snapshot() == ({"other": 8, "SDP": 4}, {"BDMA": 32, "PDP": 2})


def test_a_counted_cube_access_counts_the_cube_bytes_not_its_span() -> None:
    """Profiling counts what a DMA moves: the cube's atoms (padded C x H x W x bytes), not the gaps a line
    stride leaves between its lines, and a cube write reads nothing."""
    layout = CubeLayout(channels=16, height=3, width=2, line_stride=64, surf_stride=256, atom=8)
    cube_bytes = 16 * 3 * 2
    assert layout.span() > cube_bytes
    traffic = Traffic()
    mem = Memory()
    space = CountedMemory(mem, traffic, "SDP").space(1)
    data = np.arange(16 * 3 * 2).reshape(16, 3, 2) - 48
    write_cube(space, 0x1000, layout, data)
    assert traffic.snapshot() == ({}, {"SDP": cube_bytes})
    assert (read_cube(space, 0x1000, layout) == data).all()
    assert traffic.snapshot() == ({"SDP": cube_bytes}, {"SDP": cube_bytes})
    assert (read_cube(mem.dram, 0x1000, layout) == data).all()  # the same bytes landed in memory


def test_ram_type_0_is_cv_sram_and_needs_a_secondary_memory_interface() -> None:
    """RAM_TYPE 0 selects CV-SRAM (1 primary DRAM): on nv_full it is the secondary memory, on nv_small, which has
    no CVIF, it is refused naming the unit the config lacks rather than read as DRAM."""
    mem = Memory()
    assert space_for(FULL, mem, 0, "PDP.D_SRC_RAM_TYPE") is mem.cvsram
    assert space_for(SMALL, mem, 1, "PDP.D_SRC_RAM_TYPE") is mem.dram
    with pytest.raises(UnsupportedError, match=r"D_SRC_RAM_TYPE selects CV-SRAM, which nv_small does not have") as e:
        space_for(SMALL, mem, 0, "PDP.D_SRC_RAM_TYPE")
    assert e.value.unit == "CVIF"


def test_a_counted_memory_defaults_to_dram_like_memory() -> None:
    """An engine sees ``CountedMemory`` in place of ``Memory`` when traffic is counted; ``space()`` without a
    RAM_TYPE is the primary DRAM for both, so counting never moves an access to another memory."""
    mem = Memory()
    CountedMemory(mem, Traffic(), "BDMA").space().write(0x40, b"\x5a")
    assert mem.read(0x40, 1)[0] == 0x5A and mem.cvsram.allocated_bytes() == 0


def test_traffic_since_a_snapshot_is_the_bytes_moved_after_it() -> None:
    """The runtime charges each operation ``since(snapshot)``: per engine, bytes moved after the snapshot, an
    engine new since then in full, and engines that moved nothing left out."""
    traffic = Traffic()
    traffic.count("PDP", read=10, written=3)
    traffic.count("SDP", read=7)
    before = traffic.snapshot()
    traffic.count("PDP", read=6)
    traffic.count("CDP", written=4)
    assert traffic.since(before) == ({"PDP": 6}, {"CDP": 4})
    assert traffic.since(traffic.snapshot()) == ({}, {})
