"""Ping-pong register groups, decided once: at run time, from the target's state.

Every NVDLA unit with a D_OP_ENABLE has two register groups. ``S_POINTER.PRODUCER`` selects the group the
CPU programs, ``S_POINTER.CONSUMER`` the group the unit runs next, and the unit toggles its CONSUMER when an
operation it ran completes. An operation therefore takes, per unit, the group the unit's previous
operation did not, and waits for that group's done bit (``golden.intr``: group 1 is the bit above group 0).

The compiler does not pick groups: its register programs write ``S_POINTER`` and name done bits for "this
operation's group", and ``Groups`` (one per target) turns them into concrete ones as the operations start.
Loadables written before that (``Loadable.pingpong == COMPILER``) carry groups a freshly reset DLA would
use (0, 1, 0, ... per unit); on them ``Groups`` swaps the groups of every unit whose CONSUMER differed from
a reset DLA's when the run started. NVDLA's firmware model (``runtime.nvdla.firmware``) keeps its own
policy (NVDLA's ``utils_get_free_group``) over the same register primitives.
"""
from __future__ import annotations

from typing import Collection, Mapping, Protocol

from golden.intr import INTR_SOURCES
from loadable import loadable_pb2 as pb

__all__ = ["Groups", "consumer", "group_bit", "producer", "symbolic"]


class _RegisterPort(Protocol):
    async def read_reg(self, addr: int) -> int: ...

    async def write_reg(self, addr: int, value: int) -> None: ...


def producer(word: int) -> int:
    """The group the CPU programs: ``S_POINTER.PRODUCER`` (bit 0)."""
    return word & 1


def consumer(word: int) -> int:
    """The group the unit runs next: ``S_POINTER.CONSUMER`` (bit 16)."""
    return (word >> 16) & 1


def group_bit(bit: int, group: int) -> int:
    """GLB.S_INTR_STATUS bit of a done in ``group``, from the pair's group-0 ``bit`` (or, XORed, a bit of one
    group moved to the other)."""
    return bit ^ group


def symbolic(msg: pb.Loadable) -> bool:
    """Whether the loadable leaves groups to the runtime (S_POINTER and done bits mean "this op's group")."""
    return msg.pingpong == pb.Loadable.RUNTIME


class Groups:
    """The ping-pong groups of one target while it runs one loadable's operations.

    ``next[unit]`` is the group the unit's next operation takes: its CONSUMER when the run starts, toggled
    each time an operation on this target starts the unit. ``start`` holds the CONSUMER groups the run
    started from, which is all a loadable with compiler-assigned groups needs (it is rebased by them)."""

    def __init__(self, runtime_assigned: bool) -> None:
        self.runtime_assigned = runtime_assigned
        self.start: dict[str, int] = {}
        self.next: dict[str, int] = {}

    async def read(self, target: _RegisterPort, pointers: Mapping[int, str],
                   units: Collection[str] | None = None) -> None:
        """Take each unit's CONSUMER from its ``S_POINTER`` (address -> unit in ``pointers``; only ``units``
        if given: a DUT need not answer for units it lacks) and point PRODUCER at it, as a reset DLA has."""
        for addr, unit in pointers.items():
            if units is not None and unit not in units:
                continue
            word = await target.read_reg(addr)
            self.start[unit] = self.next[unit] = consumer(word)
            if producer(word) != consumer(word):
                await target.write_reg(addr, consumer(word))

    def pointer(self, unit: str, value: int) -> int:
        """The concrete ``S_POINTER`` word an operation writes for ``unit``."""
        if self.runtime_assigned:
            return self.next.get(unit, 0)
        return value ^ self.start.get(unit, 0)

    def done_bits(self, mask: int) -> list[int]:
        """The GLB.S_INTR_STATUS bits an operation with ``interrupt_mask`` waits for, in the groups it took."""
        bits = []
        for bit in range(32):
            if mask >> bit & 1:
                source = INTR_SOURCES.get(bit & ~1)
                if source is None:
                    bits.append(bit)
                elif self.runtime_assigned:
                    bits.append(group_bit(bit, self.next.get(source[1], 0)))
                else:
                    bits.append(group_bit(bit, self.start.get(source[1], 0)))
        return bits

    def started(self, units: Collection[str]) -> None:
        """An operation on this target started ``units``: their next operation takes the other group."""
        if self.runtime_assigned:
            for unit in units:
                self.next[unit] = self.next.get(unit, 0) ^ 1

    def ran_elsewhere(self, units: Collection[str]) -> None:
        """Another target sharing the network ran an operation of ``units``. Runtime-assigned groups follow
        only this target's own operations; compiler-assigned ones counted it, so this target's rebase moves."""
        if not self.runtime_assigned:
            for unit in units:
                self.start[unit] = self.start.get(unit, 0) ^ 1
