"""Turns a single-operation NVDLA ``.cfg`` trace into an NVDLA flatbuffer loadable with the same meaning
(the register-to-descriptor inverses and their forward check are ``runtime.nvdla.inverse``).

The trace's final register values are mapped back onto the kmd descriptors (``dla_*_op_desc``,
``dla_*_surface_desc``, ``dla_lut_param``) by a per-engine *inverse*; its memory loads become SET
buffers and its CRC-checked regions OUTPUT buffers. Whether the descriptors really say what the trace
says is then decided by the forward direction: the firmware programmer is run on them and every register
it writes must get the trace's value, and every other register the trace sets must be one the firmware
leaves alone without effect (reset value, or a register listed in ``IGNORED`` with the reason). Fields that
cannot change the result only in some configurations (a bypassed SDP stage, a disabled operand DMA) are
``Irrelevant`` rules, checked on the trace's own values; their bits are compared in neither direction. The
units the firmware enables must be the units the trace enables. Traces that fail this are *not
expressible* as descriptors (e.g. PDP reciprocals other than the firmware's table) and are reported, not run.

A single-op trace may be a chain of engines fused on the fly (conv -> SDP -> PDP): the inverse of the first
engine returns the ops of the chain, each later one ``fused_to`` its producer, and they are checked and
written together (``register_inverse(..., fuses=...)`` names the engines a chain may contain).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from golden.config import HwConfig
from golden.regs import RegisterMap, register_map
from runtime.nvdla import fbs
from runtime.nvdla.inverse import (IGNORED, INVERSES, Inverse, Irrelevant, NotExpressible, invert, register_inverse,
                                   register_irrelevant)
from runtime.nvdla.writer import LoadableBuilder
from runtime.trace import CheckCrc, MemInit, MemLoad, RegWrite, parse_cfg, parse_dat

__all__ = ["NotExpressible", "Converted", "convert", "INVERSES", "IGNORED", "Irrelevant", "register_inverse",
           "register_irrelevant", "Inverse"]


# ---- conversion ------------------------------------------------------------------------------------------
@dataclass
class Converted:
    loadable: bytes
    #: per output, in order: (output memory name, CRC the trace expects)
    crcs: list[int] = field(default_factory=list)
    engine: str = ""


def _registers(trace, regmap: RegisterMap) -> tuple[dict[tuple[str, str], int], list[tuple[str, str, int]]]:
    values, writes = {}, []
    for cmd in trace.commands:
        if isinstance(cmd, RegWrite):
            reg = regmap.lookup(cmd.addr)
            if reg is None:
                continue
            values[(reg.unit, reg.name)] = cmd.value
            writes.append((reg.unit, reg.name, cmd.value))
    return values, writes


def convert(cfg: Path | str, hw: HwConfig, *, legacy: bool = False) -> Converted:
    """The loadable of a single-op trace (raises NotExpressible when it has no descriptor equivalent)."""
    regmap = register_map(hw.address_map)
    trace = parse_cfg(cfg, regmap)
    values, writes = _registers(trace, regmap)
    engine, invs = invert(values, writes, regmap, hw)
    # memory: trace loads become SET buffers; CRC regions become outputs
    b = LoadableBuilder(legacy=legacy)
    regions: list[tuple[int, int, int]] = []  # (start, end, buffer index)
    image: dict[int, bytearray] = {}
    loads = []
    for cmd in trace.commands:
        if isinstance(cmd, MemLoad):
            addrs, data = parse_dat(cmd.file)
            lo, hi = int(addrs.min()), int(addrs.max()) + 1
            buf = np.zeros(hi - lo, dtype=np.uint8)
            buf[addrs - lo] = data
            loads.append((cmd.base + lo, buf.tobytes()))
        elif isinstance(cmd, MemInit):
            loads.append((cmd.base, bytes([cmd.fill]) * cmd.size))
    checks = [c for c in trace.commands if isinstance(c, CheckCrc)]
    spans = sorted([(a, a + len(x)) for a, x in loads] + [(c.base, c.base + c.size) for c in checks]
                   + [(a, a + 1) for inv in invs for a in inv.cubes.values()])
    merged: list[list[int]] = []
    for lo, hi in spans:
        if merged and lo <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], hi)
        else:
            merged.append([lo, hi])
    for lo, hi in merged:
        data = bytearray(hi - lo)
        for a, x in loads:
            if lo <= a < hi:
                data[a - lo:a - lo + len(x)] = x
        index = b.buffer(f"buf_{lo:x}", hi - lo, bytes(data) if any(data) else None)
        regions.append((lo, hi, index))
        image[index] = data

    def locate(addr: int) -> tuple[int, int]:
        for lo, hi, index in regions:
            if lo <= addr < hi:
                return index, addr - lo
        raise AssertionError(addr)

    for inv in invs:
        surface = inv.surface
        for name, addr in inv.cubes.items():
            index, offset = locate(addr)
            cube = getattr(surface, name)
            if legacy:
                lo, hi, _ = next(r for r in regions if r[2] == index)
                cube.address = b.window(index, offset, hi - lo - offset)
            else:
                cube.address, cube.offset = index, offset
        if inv.lut is not None:
            inv.op.lut_index = b.lut(inv.lut)
        b.op(inv.op_type, inv.op, surface, fused_to=inv.fused_to)
    crcs = []
    for c in checks:
        index, offset = locate(c.base)
        view = b.window(index, offset, c.size) if offset else index
        b.output(view, fbs.TensorDesc(name=f"crc_{c.base:x}", id=0, mem_id=0, size=c.size, c=1, h=1, w=c.size,
                                       strides=[1, c.size, c.size, 0, 0, 0, 0, 0]))
        crcs.append(c.crc)
    return Converted(b.build(), crcs, engine)
