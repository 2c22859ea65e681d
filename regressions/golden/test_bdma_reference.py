"""Golden BDMA against the plain-loop reference (``regressions/lib/reference/bdma.py``) on nv_full: random line
sizes, repeats, strides (zero, overlapping and padded), RAM types, addresses above 4 GiB, several
transfers per group and both groups. Transfers are placed with source and destination apart; a second
property puts them in one window and checks the golden model rejects exactly the overlapping ones."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from golden import ConfigError, Dla, get_config
from regressions.lib.reference.bdma import CV, MC, BdmaTransfer, bdma_copy, overlaps

pytestmark = pytest.mark.reference

SETTINGS = settings(max_examples=60, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

#: Windows transfers live in: sources in SRC_WINDOWS, destinations in DST_WINDOWS (either memory).
SRC_WINDOWS = (0x8000_0000, 0x1_0000_0000)
DST_WINDOWS = (0x8100_0000, 0x2_4000_0000)
#: Bytes of each window compared after the run (largest extent: offset + span < 0x2000).
WINDOW = 0x2000


@st.composite
def transfers(draw, src_base=None, dst_base=None) -> BdmaTransfer:
    a32 = lambda hi: st.integers(0, hi).map(lambda k: 32 * k)  # noqa: E731 - multiples of 32 bytes
    line_size = draw(st.integers(0, 3))
    return BdmaTransfer(
        src=(draw(st.sampled_from(SRC_WINDOWS)) if src_base is None else src_base) + draw(a32(32)),
        dst=(draw(st.sampled_from(DST_WINDOWS)) if dst_base is None else dst_base) + draw(a32(32)),
        line_size=line_size,
        line_repeat=draw(st.integers(0, 4)),
        surf_repeat=draw(st.integers(0, 3)),
        src_line=draw(a32(8)),
        dst_line=draw(a32(8)),
        src_surf=draw(a32(40)),
        dst_surf=draw(a32(40)),
        src_ram=draw(st.sampled_from((MC, CV))),
        dst_ram=draw(st.sampled_from((MC, CV))),
    )


def program(dla: Dla, t: BdmaTransfer) -> None:
    w = dla.write
    w("NVDLA_BDMA.CFG_SRC_ADDR_LOW_0", t.src & 0xFFFFFFFF)
    w("NVDLA_BDMA.CFG_SRC_ADDR_HIGH_0", t.src >> 32)
    w("NVDLA_BDMA.CFG_DST_ADDR_LOW_0", t.dst & 0xFFFFFFFF)
    w("NVDLA_BDMA.CFG_DST_ADDR_HIGH_0", t.dst >> 32)
    w("NVDLA_BDMA.CFG_LINE_0", SIZE=t.line_size)
    w("NVDLA_BDMA.CFG_LINE_REPEAT_0", NUMBER=t.line_repeat)
    w("NVDLA_BDMA.CFG_SURF_REPEAT_0", NUMBER=t.surf_repeat)
    w("NVDLA_BDMA.CFG_SRC_LINE_0", t.src_line)
    w("NVDLA_BDMA.CFG_DST_LINE_0", t.dst_line)
    w("NVDLA_BDMA.CFG_SRC_SURF_0", t.src_surf)
    w("NVDLA_BDMA.CFG_DST_SURF_0", t.dst_surf)
    w("NVDLA_BDMA.CFG_CMD_0", SRC_RAM_TYPE=t.src_ram, DST_RAM_TYPE=t.dst_ram)
    w("NVDLA_BDMA.CFG_OP_0", EN=1)


def fill(dla: Dla, windows, seed: int) -> dict[int, dict[int, int]]:
    """Random bytes in every window of both memories, in the Dla and in reference byte maps."""
    rng = np.random.default_rng(seed)
    ref: dict[int, dict[int, int]] = {MC: {}, CV: {}}
    for ram in (MC, CV):
        for base in windows:
            data = rng.integers(0, 256, WINDOW, dtype=np.uint8)
            dla.mem.space(ram).write(base, data)
            ref[ram].update(zip(range(base, base + WINDOW), data.tolist()))
    return ref


def assert_same(dla: Dla, ref: dict[int, dict[int, int]], windows) -> None:
    for ram in (MC, CV):
        for base in windows:
            want = np.array([ref[ram].get(a, 0) for a in range(base, base + WINDOW)], dtype=np.uint8)
            got = dla.mem.space(ram).read(base, WINDOW)
            if not np.array_equal(got, want):
                bad = int(np.flatnonzero(got != want)[0])
                pytest.fail(f"ram {ram} byte {base + bad:#x}: golden {got[bad]:#x}, reference {want[bad]:#x}")


@SETTINGS
@given(groups=st.lists(st.tuples(st.sampled_from((0, 1)), st.lists(transfers(), min_size=1, max_size=3)),
                       min_size=1, max_size=2),
       seed=st.integers(0, 2**32 - 1))
def test_golden_matches_reference_copy(groups, seed):
    hw = get_config("nv_full")
    dla = Dla(hw)
    windows = SRC_WINDOWS + DST_WINDOWS
    ref = fill(dla, windows, seed)
    expected_intr = 0
    for group, group_transfers in groups:
        for t in group_transfers:
            program(dla, t)
        free = dla.read("NVDLA_BDMA.STATUS_0") & 0xFF
        assert free == 20 - len(group_transfers)
        dla.write(f"NVDLA_BDMA.CFG_LAUNCH{group}_0", 1)
        bdma_copy(ref, group_transfers)
        expected_intr |= 1 << (6 + group)
        assert dla.read("NVDLA_GLB.S_INTR_STATUS_0") == expected_intr
        assert dla.read("NVDLA_BDMA.STATUS_0") & 0x1FF == 0x100 | 20  # idle, all slots free
    assert_same(dla, ref, windows)


@SETTINGS
@given(t=transfers(src_base=0x8000_0000, dst_base=0x8000_0000), seed=st.integers(0, 2**32 - 1))
def test_overlap_is_rejected_exactly(t, seed):
    """Source and destination in one window: golden raises ConfigError iff the reference finds a
    destination byte among the source bytes in the same memory; otherwise the copies agree."""
    dla = Dla(get_config("nv_full"))
    windows = (0x8000_0000,)
    ref = fill(dla, windows, seed)
    program(dla, t)
    event("overlapping" if overlaps(t) else "disjoint")
    if overlaps(t):
        with pytest.raises(ConfigError, match=r"BDMA\.CFG_DST_ADDR_LOW\.V32"):
            dla.write("NVDLA_BDMA.CFG_LAUNCH0_0", 1)
        return
    dla.write("NVDLA_BDMA.CFG_LAUNCH0_0", 1)
    bdma_copy(ref, [t])
    assert_same(dla, ref, windows)
