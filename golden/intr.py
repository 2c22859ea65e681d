"""Done bits: which GLB.S_INTR_STATUS bit each unit's done sets, read from the register table.

Every NVDLA unit that raises an interrupt owns a pair of fields ``<SOURCE>_DONE_STATUS0/1`` in
GLB.S_INTR_STATUS, one per ping-pong register group (group 1 is the bit above group 0). The golden
engines, the trace format, the compiler and the runtime all take their bits from here, so the register
table stays the one source of truth.
"""
from __future__ import annotations

from golden.regs import UNITS

__all__ = ["DONE_BITS", "INTR_SOURCES", "SOURCE_UNIT", "done_bit", "unit_done_bits"]

_STATUS = UNITS["GLB"].register("S_INTR_STATUS")
_GROUP0 = "_DONE_STATUS0"

#: Interrupt source (the field prefix, as traces' ``intr_notify`` name it) -> its group-0 bit.
DONE_BITS: dict[str, int] = {f.name.removesuffix(_GROUP0): f.lsb for f in _STATUS.fields if f.name.endswith(_GROUP0)}

#: Interrupt source -> the register unit whose ``S_POINTER`` CONSUMER group picks the bit of the pair.
#: The field prefixes are the unit names except where the status register spells them differently:
#: RUBIK is the RBK block, and CDMA raises one done per data and one per weights.
SOURCE_UNIT: dict[str, str] = {
    source: {"RUBIK": "RBK", "CDMA_DAT": "CDMA", "CDMA_WT": "CDMA"}.get(source, source) for source in DONE_BITS
}

#: Group-0 bit -> (interrupt source, ping-pong unit): how a done bit read back is named and flipped.
INTR_SOURCES: dict[int, tuple[str, str]] = {bit: (source, SOURCE_UNIT[source]) for source, bit in DONE_BITS.items()}


def done_bit(source: str) -> int:
    """The group-0 GLB.S_INTR_STATUS bit of an interrupt source (``"SDP"``, ``"CDMA_DAT"``, ...)."""
    return DONE_BITS[source]


def unit_done_bits(*units: str) -> tuple[tuple[str, int], ...]:
    """(unit, group-0 bit) of every done the given register units raise, in status-bit order: what an
    engine's ``done_bits`` declares (CDMA raises two, data and weights)."""
    return tuple((SOURCE_UNIT[s], bit) for s, bit in sorted(DONE_BITS.items(), key=lambda sb: sb[1])
                 if SOURCE_UNIT[s] in units)
