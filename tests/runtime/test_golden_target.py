"""The golden target makes hardware time visible as NVDLA's nvdlav1 traces expect: done bits appear one at a
time in hardware order, only while software waits or polls (wait, check one bit, clear all, read 0, wait
again), and the CBUF flush after reset is still running until software polls it."""
from __future__ import annotations

import asyncio

import numpy as np
import pytest

from golden import get_config
from regressions.lib import programs
from runtime.golden_target import GoldenTarget
from runtime.target import InterruptTimeout

HW = get_config("nv_small")
CDMA_DAT, CDMA_WT, CACC, SDP = 1 << 16, 1 << 18, 1 << 20, 1 << 0
ALL = CDMA_DAT | CDMA_WT | CACC | SDP


def started_conv() -> tuple[GoldenTarget, int]:
    rng = np.random.default_rng(0)
    layer = programs.ConvLayer(x=rng.integers(-8, 8, (8, 4, 4)), w=rng.integers(-8, 8, (8, 8, 3, 3)))
    program = programs.program_conv(HW, layer)
    target = GoldenTarget(HW)

    async def run() -> None:
        for addr, data in program.memory:
            await target.write_mem(addr, data)
        for name, value in program.writes:
            await target.write_reg(target.dla.map.resolve(name)[0], value)

    asyncio.run(run())
    return target, target.dla.map.address("GLB", "S_INTR_STATUS")


def test_done_bits_show_one_at_a_time_and_clearing_all_releases_the_next() -> None:
    target, status = started_conv()
    assert target.dla.intr_status & ALL == ALL  # the model itself finished everything
    seen = []

    async def service() -> None:
        for _ in range(4):
            got = await target.wait_interrupt(ALL, 1000)
            seen.append(got)
            assert await target.read_reg(status) & ALL == got
            await target.write_reg(status, 0xFFFFFFFF)  # clear everything, as the nvdlav1 traces do

    asyncio.run(service())
    assert seen == [CDMA_DAT, CDMA_WT, CACC, SDP]
    assert asyncio.run(target.read_reg(status)) & ALL == 0


def test_waiting_for_a_later_bit_lets_the_earlier_ones_happen() -> None:
    target, status = started_conv()
    got = asyncio.run(target.wait_interrupt(SDP, 1000))
    assert got == SDP
    assert asyncio.run(target.read_reg(status)) & ALL == ALL


def test_nothing_shows_until_software_waits_or_polls() -> None:
    """Right after the enable, and right after a clear-all, S_INTR_STATUS reads 0 (hardware is still busy);
    each further read in a row (a poll) shows the next bit; any other access in between is not a poll."""
    target, status = started_conv()
    cdma = target.dla.map.address("CDMA", "D_OP_ENABLE")

    async def script() -> list[int]:
        reads = [await target.read_reg(status) & ALL]  # right after the enable
        reads.append(await target.read_reg(status) & ALL)  # polled: CDMA data load done
        await target.read_reg(cdma)
        reads.append(await target.read_reg(status) & ALL)  # not a poll: nothing new
        await target.write_reg(status, 0xFFFFFFFF)
        reads.append(await target.read_reg(status) & ALL)  # after clear-all: 0 again
        reads.append(await target.read_reg(status) & ALL)  # polled: the weight load
        reads.append(await target.wait_interrupt(SDP, 1000))
        return reads

    assert asyncio.run(script()) == [0, CDMA_DAT, CDMA_DAT, 0, CDMA_WT, SDP]


def test_cbuf_flush_runs_until_polled_or_waited_for() -> None:
    async def reads(target: GoldenTarget, wait_first: bool) -> list[int]:
        flush = target.dla.map.address("CDMA", "S_CBUF_FLUSH_STATUS")
        if wait_first:
            with pytest.raises(InterruptTimeout):
                await target.wait_interrupt(ALL, 1000)
        out = [await target.read_reg(flush)]
        await target.write_reg(flush, 0)  # read-only: the write changes nothing, and is not a poll
        out += [await target.read_reg(flush), await target.read_reg(flush), await target.read_reg(flush)]
        return out

    assert asyncio.run(reads(GoldenTarget(HW), False)) == [0, 0, 1, 1]
    assert asyncio.run(reads(GoldenTarget(HW), True)) == [1, 1, 1, 1]
