"""Profile of a network run (``dla run --profile``, ``Network.run(..., profile=Profile())``).

Per operation the executor records the wall time, the simulated cycles (on an RTL target, whose testbench
sets ``Profile.clock``), which engines it started (from the units its register program enables, so the
count is the same on every target) and the bytes each engine's DMA read and wrote. Bytes are counted where
memory is accessed: inside the golden model by ``golden.dma.Traffic`` (per engine of an on-the-fly chain),
on RTL at the AXI memory ports (per operation, labelled with its engines). Targets that count nothing
(a user's own Target) report ``None``. ``tasks()`` sums the operations of each task over the samples;
``table()`` is the compact text form, ``to_dict()`` the JSON form.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Callable

from golden.dma import Traffic

__all__ = ["OpProfile", "Profile", "TaskProfile", "target_label", "traffic_of"]


@dataclass
class OpProfile:
    """One DLA operation (or one CPU task) of one sample."""

    sample: int
    task: int
    task_name: str
    op: str
    kind: str  # "dla" or "cpu"
    target: str
    engines: tuple[str, ...]
    seconds: float
    cycles: int | None = None
    #: Bytes per engine; None when the target does not count them.
    read: dict[str, int] | None = None
    written: dict[str, int] | None = None


@dataclass
class TaskProfile:
    """A task's operations summed over the samples."""

    task: int
    name: str
    kind: str
    targets: list[str]
    samples: int
    seconds: float
    cycles: int | None
    ops: dict[str, int] = field(default_factory=dict)
    read: dict[str, int] | None = None
    written: dict[str, int] | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _add(into: dict[str, int] | None, more: dict[str, int] | None) -> dict[str, int] | None:
    if into is None or more is None:
        return None
    for k, v in more.items():
        into[k] = into.get(k, 0) + v
    return into


def traffic_of(target: Any, enable: bool = False) -> Traffic | None:
    """The byte counters of a target: a golden target's ``Dla.traffic`` (created when ``enable``), or the
    ``traffic`` attribute an RTL target carries; None when the target counts nothing."""
    dla = getattr(target, "dla", None)
    if dla is not None and hasattr(dla, "traffic"):
        if dla.traffic is None and enable:
            dla.traffic = Traffic()
        return dla.traffic
    return getattr(target, "traffic", None)


def target_label(target: Any) -> str:
    return str(getattr(target, "name", None) or type(target).__name__)


class Profile:
    """Operation records of one or more runs; ``clock`` returns the simulated cycle count (RTL only)."""

    def __init__(self) -> None:
        self.ops: list[OpProfile] = []
        self.clock: Callable[[], int] | None = None

    def add(self, op: OpProfile) -> None:
        self.ops.append(op)

    def extend(self, other: Profile) -> None:
        self.ops.extend(other.ops)

    # ---- views ------------------------------------------------------------------------------------
    def tasks(self) -> list[TaskProfile]:
        """One entry per task, in the order tasks first ran; per-engine operation counts and bytes summed
        over operations and samples (bytes None if any operation was not counted)."""
        out: dict[int, TaskProfile] = {}
        samples: dict[int, set[int]] = {}
        for op in self.ops:
            t = out.get(op.task)
            if t is None:
                t = out[op.task] = TaskProfile(op.task, op.task_name, op.kind, [], 0, 0.0, 0, {}, {}, {})
                samples[op.task] = set()
            samples[op.task].add(op.sample)
            if op.target not in t.targets:
                t.targets.append(op.target)
            t.seconds += op.seconds
            t.cycles = None if t.cycles is None or op.cycles is None else t.cycles + op.cycles
            for e in op.engines:
                t.ops[e] = t.ops.get(e, 0) + 1
            t.read = _add(t.read, op.read)
            t.written = _add(t.written, op.written)
        for task_id, t in out.items():
            t.samples = len(samples[task_id])
        return list(out.values())

    def totals(self) -> dict[str, Any]:
        tasks = self.tasks()
        cycles = [t.cycles for t in tasks if t.cycles is not None]
        read: dict[str, int] = {}
        written: dict[str, int] = {}
        ops: dict[str, int] = {}
        for t in tasks:
            _add(read, t.read or {})
            _add(written, t.written or {})
            _add(ops, t.ops)
        return {"seconds": sum(t.seconds for t in tasks), "cycles": sum(cycles) if cycles else None,
                "ops": ops, "read": read, "written": written}

    def to_dict(self) -> dict[str, Any]:
        return {"tasks": [t.to_dict() for t in self.tasks()], "total": self.totals(),
                "ops": [asdict(op) for op in self.ops]}

    @classmethod
    def from_dict(cls, doc: dict[str, Any]) -> Profile:
        """The inverse of ``to_dict`` (only ``ops`` is read; the rest is derived)."""
        p = cls()
        for d in doc.get("ops", []):
            p.add(OpProfile(**dict(d, engines=tuple(d["engines"]))))
        return p

    def table(self) -> str:
        """Compact text: one row per task and engine (wall ms, simulated cycles, ops, bytes read/written)."""
        head = ("task", "name", "target", "wall ms", "cycles", "engine", "ops", "read B", "written B")
        rows: list[tuple[str, ...]] = []

        def num(v: int | None) -> str:
            return "-" if v is None else f"{v:,}"

        for t in self.tasks():
            first = True
            for engine in t.ops or {"-": 0}:
                task_cols = (str(t.task), t.name, "+".join(t.targets), f"{t.seconds * 1e3:.1f}", num(t.cycles)) \
                    if first else ("",) * 5
                read = None if t.read is None else t.read.get(engine, 0)
                written = None if t.written is None else t.written.get(engine, 0)
                if t.kind == "cpu":
                    read = written = None
                rows.append((*task_cols, engine, str(t.ops.get(engine, 0)), num(read), num(written)))
                first = False
        total = self.totals()
        rows.append(("total", "", "", f"{total['seconds'] * 1e3:.1f}", num(total["cycles"]), "",
                     str(sum(total["ops"].values())), num(sum(total["read"].values())),
                     num(sum(total["written"].values()))))
        widths = [max(len(r[i]) for r in (head, *rows)) for i in range(len(head))]
        left = {1, 2, 5}

        def fmt(r: tuple[str, ...]) -> str:
            cells = (c.ljust(w) if i in left else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths)))
            return "  ".join(cells).rstrip()

        samples = max((t.samples for t in self.tasks()), default=0)
        title = f"profile ({samples} sample{'' if samples == 1 else 's'}; bytes are DMA reads/writes per engine)"
        return "\n".join([title, fmt(head), *(fmt(r) for r in rows)])
