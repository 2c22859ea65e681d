"""Fuzz properties of the byte movers, RUBIK and BDMA: through their register programs, the golden engines
move exactly the bytes the plain-loop references (``regressions.lib.reference.rubik`` / ``.bdma``) move, on
every preset that has the engine.

- "rubik": one contract/split/merge operation (``strategies.rubik``); when the reference finds the
  operation illegal (``problems``), golden must refuse it with a ConfigError naming that RBK field.
- "bdma": groups of transfers launched in order (``strategies.bdma``); a transfer whose destination
  overlaps its own source (``overlaps``) must be refused at its launch.

Both memories start with random bytes around every window an example touches and are compared whole
over those ranges afterwards, so stray writes and lost gap bytes show. The examples are not one DRAM
program (they use CV-SRAM too), so there is no trace ``program`` for them.
"""
from __future__ import annotations

import dataclasses
import re
from typing import Any

import numpy as np

from golden import ConfigError, Dla
from golden.config import HwConfig
from golden.regs import UNITS
from regressions.fuzz.properties import Property, register
from regressions.lib.reference import bdma as ref_bdma
from regressions.lib.reference import rubik as ref_rubik
from regressions.lib.strategies import configs_with
from regressions.lib.strategies.bdma import BdmaExample, bdma_examples
from regressions.lib.strategies.rubik import RubikExample, rubik_examples

#: Bytes of random data before and after each touched range (and compared there too).
MARGIN = 256
Memories = dict[int, dict[int, int]]
Ranges = list[tuple[int, int]]


# ---- register programs --------------------------------------------------------------------------------------
def _word(unit: str, register_: str, **fields: int) -> tuple[str, int]:
    reg = UNITS[unit].register(register_)
    return reg.full_name, reg.encode(**fields)


def _split_address(unit: str, name: str, addr: int) -> list[tuple[str, int]]:
    low, high = UNITS[unit].register(f"{name}_LOW"), UNITS[unit].register(f"{name}_HIGH")
    return [(low.full_name, addr & 0xFFFF_FFFF), (high.full_name, addr >> 32)]


def rubik_writes(op: ref_rubik.RubikOp) -> list[tuple[str, int]]:
    """RBK register writes of one operation in group 0, ending with D_OP_ENABLE."""
    w = [
        _word("RBK", "D_MISC_CFG", RUBIK_MODE=op.mode, IN_PRECISION=op.precision),
        _word("RBK", "D_DAIN_RAM_TYPE", DATAIN_RAM_TYPE=op.src_ram),
        _word("RBK", "D_DATAIN_SIZE_0", DATAIN_WIDTH=op.width - 1, DATAIN_HEIGHT=op.height - 1),
        _word("RBK", "D_DATAIN_SIZE_1", DATAIN_CHANNEL=op.in_channels - 1),
        *_split_address("RBK", "D_DAIN_ADDR", op.src),
        ("NVDLA_RBK.D_DAIN_LINE_STRIDE_0", op.src_line),
        ("NVDLA_RBK.D_DAIN_SURF_STRIDE_0", op.src_surf),
        ("NVDLA_RBK.D_DAIN_PLANAR_STRIDE_0", op.src_planar),
        _word("RBK", "D_DAOUT_RAM_TYPE", DATAOUT_RAM_TYPE=op.dst_ram),
        _word("RBK", "D_DATAOUT_SIZE_1", DATAOUT_CHANNEL=op.out_channels - 1),
        *_split_address("RBK", "D_DAOUT_ADDR", op.dst),
        ("NVDLA_RBK.D_DAOUT_LINE_STRIDE_0", op.dst_line),
        ("NVDLA_RBK.D_CONTRACT_STRIDE_0_0", op.contract_stride_0),
        ("NVDLA_RBK.D_CONTRACT_STRIDE_1_0", op.contract_stride_1),
        ("NVDLA_RBK.D_DAOUT_SURF_STRIDE_0", op.dst_surf),
        ("NVDLA_RBK.D_DAOUT_PLANAR_STRIDE_0", op.dst_planar),
        _word("RBK", "D_DECONV_STRIDE", DECONV_X_STRIDE=op.stride_x - 1, DECONV_Y_STRIDE=op.stride_y - 1),
        _word("RBK", "D_OP_ENABLE", OP_EN=1),
    ]
    return w


def bdma_writes(t: ref_bdma.BdmaTransfer) -> list[tuple[str, int]]:
    """BDMA CFG_* writes queueing one transfer (CFG_OP.EN last)."""
    return [
        *_split_address("BDMA", "CFG_SRC_ADDR", t.src),
        *_split_address("BDMA", "CFG_DST_ADDR", t.dst),
        _word("BDMA", "CFG_LINE", SIZE=t.line_size),
        _word("BDMA", "CFG_CMD", SRC_RAM_TYPE=t.src_ram, DST_RAM_TYPE=t.dst_ram),
        _word("BDMA", "CFG_LINE_REPEAT", NUMBER=t.line_repeat),
        ("NVDLA_BDMA.CFG_SRC_LINE_0", t.src_line),
        ("NVDLA_BDMA.CFG_DST_LINE_0", t.dst_line),
        _word("BDMA", "CFG_SURF_REPEAT", NUMBER=t.surf_repeat),
        ("NVDLA_BDMA.CFG_SRC_SURF_0", t.src_surf),
        ("NVDLA_BDMA.CFG_DST_SURF_0", t.dst_surf),
        _word("BDMA", "CFG_OP", EN=1),
    ]


def play(dla: Dla, writes: list[tuple[str, int]]) -> None:
    for name, value in writes:
        addr, _ = dla.map.resolve(name)
        dla.write_reg(addr, value)


# ---- memories ----------------------------------------------------------------------------------------------
def fill(dla: Dla, ranges: Ranges, seed: int) -> Memories:
    """Random bytes over every range (widened by MARGIN) of both memories, in the Dla and in byte maps."""
    rng = np.random.default_rng(seed)
    ref: Memories = {ref_rubik.MC: {}, ref_rubik.CV: {}}
    for ram in (ref_rubik.MC, ref_rubik.CV):
        for lo, hi in widen(ranges):
            data = rng.integers(0, 256, hi - lo, dtype=np.uint8)
            dla.mem.space(ram).write(lo, data)
            ref[ram].update(zip(range(lo, hi), data.tolist()))
    return ref


def widen(ranges: Ranges) -> Ranges:
    return [(max(0, lo - MARGIN), hi + MARGIN) for lo, hi in ranges]


def assert_same(dla: Dla, ref: Memories, ranges: Ranges) -> None:
    """Golden's memories equal the reference's over every (widened) range; names the first differing byte."""
    for ram in (ref_rubik.MC, ref_rubik.CV):
        mem = ref[ram]
        for lo, hi in widen(ranges):
            want = np.fromiter((mem.get(a, 0) for a in range(lo, hi)), dtype=np.uint8, count=hi - lo)
            got = dla.mem.space(ram).read(lo, hi - lo)
            if not np.array_equal(got, want):
                bad = np.flatnonzero(got != want)
                raise AssertionError(f"{len(bad)} byte(s) differ in ram {ram}; first at {lo + int(bad[0]):#x}: "
                                     f"golden {got[bad[0]]:#04x}, reference {want[bad[0]]:#04x}")


def _raises_config_error(action, field: str) -> None:
    try:
        action()
    except ConfigError as exc:
        if not re.search(rf"\.{field}\b", exc.where):
            raise AssertionError(f"golden refused the example for {exc.where}, the reference for {field}") from None
        return
    raise AssertionError(f"the reference finds {field} illegal, golden accepted it")


# ---- RUBIK -------------------------------------------------------------------------------------------------
def rubik_ranges(op: ref_rubik.RubikOp) -> Ranges:
    reads = ref_rubik.read_atoms(op)
    written = [dst for dst, _ in ref_rubik.writes(op)]
    return [(min(reads), max(reads) + ref_rubik.ATOM), (min(written), max(written) + 1)]


def check_rubik(hw: HwConfig, example: RubikExample) -> None:
    op = example.op
    dla = Dla(hw)
    ranges = rubik_ranges(op)
    ref = fill(dla, ranges, example.seed)
    problems = ref_rubik.problems(op)
    if problems:
        _raises_config_error(lambda: play(dla, rubik_writes(op)), problems[0])
        return
    play(dla, rubik_writes(op))
    ref_rubik.rubik(ref, op)
    status = dla.read("NVDLA_GLB.S_INTR_STATUS_0")
    if status != 1 << UNITS["GLB"].register("S_INTR_STATUS").field("RUBIK_DONE_STATUS0").lsb:
        raise AssertionError(f"GLB.S_INTR_STATUS is {status:#x} after one RUBIK operation in group 0")
    assert_same(dla, ref, ranges)


# ---- BDMA --------------------------------------------------------------------------------------------------
def bdma_ranges(example: BdmaExample) -> Ranges:
    out = []
    for _, transfers in example.groups:
        for t in transfers:
            for side in ("src", "dst"):
                starts = t.line_addresses(side)
                out.append((min(starts), max(starts) + t.line_bytes))
    return out


def check_bdma(hw: HwConfig, example: BdmaExample) -> None:
    dla = Dla(hw)
    ranges = bdma_ranges(example)
    ref = fill(dla, ranges, example.seed)
    done = 0
    for group, transfers in example.groups:
        for t in transfers:
            play(dla, bdma_writes(t))
        launch = lambda g=group: dla.write(f"NVDLA_BDMA.CFG_LAUNCH{g}_0", 1)  # noqa: E731
        if any(ref_bdma.overlaps(t) for t in transfers):
            _raises_config_error(launch, "V32")
            return
        launch()
        ref_bdma.bdma_copy(ref, list(transfers))
        done |= 1 << (UNITS["GLB"].register("S_INTR_STATUS").field("BDMA_DONE_STATUS0").lsb + group)
        status = dla.read("NVDLA_GLB.S_INTR_STATUS_0")
        if status != done:
            raise AssertionError(f"GLB.S_INTR_STATUS is {status:#x} after launching group {group}, expected {done:#x}")
    assert_same(dla, ref, ranges)


# ---- JSON ------------------------------------------------------------------------------------------------
TYPES: dict[str, type] = {cls.__name__: cls for cls in (RubikExample, ref_rubik.RubikOp, BdmaExample,
                                                        ref_bdma.BdmaTransfer)}


def to_json(value: Any) -> Any:
    """JSON form of an example: dataclasses as objects with their class under "type", tuples as lists."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        if TYPES.get(type(value).__name__) is not type(value):
            raise ValueError(f"{type(value).__name__} is not a RUBIK/BDMA example class")
        return {"type": type(value).__name__,
                **{f.name: to_json(getattr(value, f.name)) for f in dataclasses.fields(value)}}
    if isinstance(value, (list, tuple)):
        return [to_json(v) for v in value]
    if isinstance(value, (bool, int)):
        return value
    raise ValueError(f"cannot write {type(value).__name__} {value!r} as JSON")


def from_json(data: Any) -> Any:
    if isinstance(data, dict):
        cls = TYPES.get(data.get("type"))  # type: ignore[arg-type]
        if cls is None:
            raise ValueError(f"unknown example type {data.get('type')!r}")
        return cls(**{k: from_json(v) for k, v in data.items() if k != "type"})
    if isinstance(data, list):
        return tuple(from_json(v) for v in data)
    return data


# ---- registrations ---------------------------------------------------------------------------------------
RUBIK = register(Property(
    name="rubik", engine="RUBIK", configs=configs_with(lambda hw: hw.rubik), strategy=rubik_examples,
    check=check_rubik, to_json=to_json, from_json=from_json,
))
BDMA = register(Property(
    name="bdma", engine="BDMA", configs=configs_with(lambda hw: hw.bdma), strategy=bdma_examples,
    check=check_bdma, to_json=to_json, from_json=from_json,
))
#: This module's properties (the registry also holds other modules').
MOVER_PROPERTIES = (RUBIK, BDMA)

__all__ = ["RUBIK", "BDMA", "MOVER_PROPERTIES", "check_rubik", "check_bdma", "rubik_writes", "bdma_writes"]
