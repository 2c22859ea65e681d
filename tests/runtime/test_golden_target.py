"""The golden target shows an operation's done bits one at a time, in hardware order, as NVDLA's nvdlav1
traces expect (wait, check one bit, clear all, wait again)."""
from __future__ import annotations

import asyncio

import numpy as np

from golden import get_config
from regressions import programs
from runtime.golden_target import GoldenTarget

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
