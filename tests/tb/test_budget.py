"""Hang budgets (``tb.budget``): scaled with the work the registers describe, with a floor, a cap and
``--timeout-cycles`` overriding them."""
from __future__ import annotations

from pathlib import Path

import pytest

from golden.config import get_config
from golden.regs import register_map
from runtime.trace import RegWrite, Trace
from tb.budget import CAP_CYCLES, FLOOR_CYCLES, MARGIN, OpWork, op_budget, ops_work, trace_budget
from tb.results import BenchSettings

HW = get_config("nv_small")
RM = register_map(HW.address_map)
TRACES = Path(__file__).resolve().parents[3] / "shared" / "nvdla" / "traces" / "nv_small"


def _writes(unit: str, **regs: int) -> list[tuple[int, int]]:
    """(address, value) writes of ``regs`` then the unit's D_OP_ENABLE."""
    out = [(RM.address(unit, name), value) for name, value in regs.items()]
    return out + [(RM.address(unit, "D_OP_ENABLE"), 1)]


def _pdp(w: int, h: int, c: int) -> list[tuple[int, int]]:
    return _writes("PDP", D_DATA_CUBE_IN_WIDTH=w - 1, D_DATA_CUBE_IN_HEIGHT=h - 1, D_DATA_CUBE_IN_CHANNEL=c - 1,
                   D_DATA_CUBE_OUT_WIDTH=w // 2 - 1, D_DATA_CUBE_OUT_HEIGHT=h // 2 - 1, D_DATA_CUBE_OUT_CHANNEL=c - 1)


def _conv(kernels: int, hw_dims: int = 8, c: int = 16) -> list[tuple[int, int]]:
    word = RM.unit("CSC").register
    return _writes(
        "CSC",
        D_DATAIN_SIZE_EXT_0=word("D_DATAIN_SIZE_EXT_0").encode(DATAIN_WIDTH_EXT=hw_dims - 1, DATAIN_HEIGHT_EXT=hw_dims - 1),
        D_DATAIN_SIZE_EXT_1=c - 1,
        D_WEIGHT_SIZE_EXT_0=word("D_WEIGHT_SIZE_EXT_0").encode(WEIGHT_WIDTH_EXT=2, WEIGHT_HEIGHT_EXT=2),
        D_WEIGHT_SIZE_EXT_1=word("D_WEIGHT_SIZE_EXT_1").encode(WEIGHT_CHANNEL_EXT=c - 1, WEIGHT_KERNEL=kernels - 1),
        D_WEIGHT_BYTES=9 * c * kernels,
        D_DATAOUT_SIZE_0=word("D_DATAOUT_SIZE_0").encode(DATAOUT_WIDTH=hw_dims - 3, DATAOUT_HEIGHT=hw_dims - 3),
        D_DATAOUT_SIZE_1=kernels - 1,
    )


def test_pdp_work_is_its_cubes_padded_to_memory_atoms():
    (work,) = ops_work(_pdp(8, 8, 3), RM, HW)  # 3 channels occupy one 8-byte atom per element
    assert work == OpWork("PDP", 8 * 8 * 8 + 4 * 4 * 8)


def test_conv_work_counts_weights_and_macs():
    (work,) = ops_work(_conv(32), RM, HW)
    assert work.unit == "CSC" and work.weight_bytes == 9 * 16 * 32 and work.macs == 6 * 6 * 32 * 9 * 16
    # more kernels: more MACs and weights, a bigger budget; more MACs per cycle: a smaller one
    assert op_budget(work, HW) < op_budget(ops_work(_conv(256, 32, 64), RM, HW)[0], HW)
    wide = HW.derive(mac_atomic_c=HW.mac_atomic_c * 4, mac_atomic_k=HW.mac_atomic_k * 4)
    big = OpWork("CSC", macs=10**9)
    assert op_budget(big, wide) < op_budget(big, HW)


def test_budget_scales_with_work_between_floor_and_cap():
    small, large = ops_work(_pdp(4, 4, 8), RM, HW)[0], ops_work(_pdp(256, 256, 64), RM, HW)[0]
    assert FLOOR_CYCLES <= op_budget(small, HW) < op_budget(large, HW) < CAP_CYCLES
    assert op_budget(OpWork("X"), HW) == FLOOR_CYCLES
    assert op_budget(OpWork("CSC", macs=10**13), HW) == CAP_CYCLES
    assert op_budget(large, HW) >= MARGIN * large.expected_cycles(HW)  # the margin is there
    assert op_budget(large, HW, scale=3) > op_budget(large, HW)


def test_values_last_written_before_each_enable_decide():
    writes = _pdp(8, 8, 8) + _pdp(16, 16, 8)
    first, second = ops_work(writes, RM, HW)
    assert second.data_bytes == 4 * first.data_bytes
    assert ops_work(writes[:-1], RM, HW) == [first]  # no enable, no operation


def test_trace_budget_and_timeout_override():
    trace = Trace(path=Path("t.cfg"), name="t", commands=[RegWrite(i, "x", a, v) for i, (a, v) in enumerate(_pdp(64, 64, 64))])
    budget = trace_budget(trace, HW)
    assert budget > FLOOR_CYCLES
    from tb.bench import budget_cycles

    assert budget_cycles(trace, HW, BenchSettings()) == budget
    assert budget_cycles(trace, HW, BenchSettings(timeout_cycles=1234)) == 1234


@pytest.mark.skipif(not TRACES.is_dir(), reason="no NVDLA nv_small traces")
def test_nvdla_traces_get_budgets_by_their_work():
    from runtime.txn import parse_trace

    def budget(name: str) -> int:
        cfg = TRACES / name / f"{name}.cfg"
        return trace_budget(parse_trace(cfg, RM, name=name), HW)

    pdp, conv = budget("pdp_8x8x64_2x2_ave_int8_0"), budget("dc_32x26x76_6x3x76x270_int8_0")
    assert FLOOR_CYCLES < pdp < 1_000_000 < conv <= CAP_CYCLES
