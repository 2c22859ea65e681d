"""The register-level DLA: CSB register file with NVDLA semantics, firing engines as the hardware would.

Semantics (NVDLA_NOTES §2):
- Units with ``S_POINTER`` and ``D_OP_ENABLE`` hold two register groups. Writes at or above
  D_OP_ENABLE go to the PRODUCER group; ``S_*`` registers below it are written to both groups; reads
  return the PRODUCER group.
- Writing ``D_OP_ENABLE.OP_EN=1`` arms that group. An engine fires when its core units, its read DMA
  (when its config needs one) and every engine chained with it on the fly are armed in their CONSUMER
  groups. On completion OP_EN clears, CONSUMER toggles and the GLB done bits of that group are raised.
- Writing a group whose OP_EN is set is an error, as it is a FAIL in NVDLA's cmod.
- ``GLB.S_INTR_STATUS`` is write-1-to-clear, ``S_INTR_SET`` sets bits, ``S_INTR_MASK`` only gates the
  interrupt line.

Engines run synchronously inside the ``D_OP_ENABLE`` write that completes their chain, so a status bit
is visible as soon as the write returns.

An engine with a ``CommandQueue`` (BDMA) has no groups: its enqueue register snapshots the unit's
registers into a queue, and a launch register runs the queued operations synchronously as group 0/1.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from golden.cbuf import CbufState
from golden.config import HwConfig
from golden.dma import Traffic
from golden.engines import ENGINES, Engine, OpContext, load_engines
from golden.errors import ConfigError, RegisterError, UnsupportedError
from golden.memory import Memory
from golden.regs import Register, RegView, Unit, register_map

#: LUT depths of the units that hold LUTs (SDP and CDP): LE 65 entries, LO 257 entries.
LUT_DEPTH = {"LE": 65, "LO": 257}
LUT_UNITS = ("SDP", "CDP")

#: CFGROM's units, whose words are named ``CFGROM_<unit>_<key>`` (their ``*_DESC`` words come from the RDL).
_CFGROM_UNITS = ("GLB", "CIF", "CDMA", "CBUF", "CSC", "CMAC_A", "CMAC_B", "CACC", "SDP_RDMA", "SDP", "PDP_RDMA",
                 "PDP", "CDP_RDMA", "CDP")
#: Data type bits of the CFGROM ``*_FEATURE_TYPES``/``*_WEIGHT_TYPES`` words (int8 is 0x10 in NVDLA's ROM).
CFGROM_TYPE_BITS = {"int8": 0x10, "int16": 0x20, "fp16": 0x100}
#: SDP_CAP_COMPAT bits for its sub-units (nv_small's ROM holds 0x18 = X1 + X2).
CFGROM_SDP_CAPS = {"sdp_bs": 0x8, "sdp_bn": 0x10, "sdp_ew": 0x20, "sdp_lut": 0x40}
#: PDP_CAP_INCOMPAT bit of a PDP that cannot take SDP's output on the fly. NVDLA's ROMs leave it 0 (their
#: PDP can); a DUT that sets it gets SDP->PDP traces reported not applicable instead of hanging.
CFGROM_PDP_NO_SDP_FLYING = 0x1

#: Called after every completed operation of every ``Dla`` with (its HwConfig, engine names of the chain,
#: the consumer-group register views, the status registers the engines reported). Regression coverage
#: samples configs here; the list is empty (and costs nothing) otherwise.
OP_OBSERVERS: list = []


def cfgrom_values(hw: HwConfig) -> dict[str, int]:
    """CFGROM words describing ``hw``: the RDL reset values with the config's own sizes and units."""
    regs = {r.name: r for r in register_map("small").unit("CFGROM").registers}
    values = {name: r.reset for name, r in regs.items()}
    present = hw.units | {"CIF", "CBUF"}
    types = sum(CFGROM_TYPE_BITS[t] for t in hw.feature_types)
    wtypes = sum(CFGROM_TYPE_BITS[t] for t in hw.weight_types)
    for name in values:
        parts = name[len("CFGROM_"):]
        for unit in sorted(_CFGROM_UNITS, key=len, reverse=True):
            if parts.startswith(unit + "_"):
                key = parts[len(unit) + 1:]
                break
        else:
            continue
        if key == "DESC" and unit not in present:
            values[name] = 0
        elif key == "BASE_FEATURE_TYPES":
            values[name] = types
        elif key == "BASE_WEIGHT_TYPES":
            values[name] = wtypes
        elif key == "BASE_ATOMIC_C":
            values[name] = hw.mac_atomic_c
        elif key == "BASE_ATOMIC_K":
            values[name] = hw.mac_atomic_k
        elif key == "BASE_ATOMIC_M":
            values[name] = hw.memory_atomic_size
        elif key.endswith("CBUF_BANK_NUM"):
            values[name] = hw.cbuf_bank_number
        elif key.endswith("CBUF_BANK_WIDTH"):
            values[name] = hw.cbuf_bank_width
        elif key.endswith("CBUF_BANK_DEPTH"):
            values[name] = hw.cbuf_bank_depth
        elif key == "MULTI_BATCH_MAX":
            values[name] = hw.max_batch if hw.batch else 0
        elif key == "BASE_WIDTH" and unit == "CIF":
            values[name] = hw.primary_memif_width // 8
        elif key == "BASE_MEM_ADDR_WIDTH":
            values[name] = regs[name].field("CIF_BASE_MEM_ADDR_WIDTH").encode(hw.mem_address_width)  # [31:5]
        elif key == "CAP_COMPAT" and unit == "SDP":
            values[name] = sum(bit for attr, bit in CFGROM_SDP_CAPS.items() if getattr(hw, attr))
        elif key in ("BS_THROUGHPUT", "BN_THROUGHPUT", "EW_THROUGHPUT"):
            values[name] = getattr(hw, f"sdp_{key.lower()}")
        elif key == "BASE_THROUGHPUT":
            values[name] = getattr(hw, f"{unit.lower()}_throughput")
    return values


@dataclass
class UnitState:
    """Register storage and pointers of one unit."""

    unit: Unit
    groups: list[dict[int, int]]
    producer: int = 0
    consumer: int = 0
    lut: dict[str, np.ndarray] = field(default_factory=dict)
    lut_addr: int = 0
    lut_table: str = "LE"
    lut_write: bool = False

    @property
    def pingpong(self) -> bool:
        return self.unit.op_enable_offset is not None

    def armed(self, group: int) -> bool:
        off = self.unit.op_enable_offset
        return off is not None and bool(self.groups[group].get(off, 0) & 1)

    def view(self, group: int | None = None) -> RegView:
        return RegView(self.unit, self.groups[self.consumer if group is None else group])


class Dla:
    """Register-level model of one DLA instance with its memories."""

    def __init__(self, hw: HwConfig, mem: Memory | None = None) -> None:
        self.hw = hw
        self.mem = mem if mem is not None else Memory()
        self.map = register_map(hw.address_map)
        self.engines = dict(load_engines())
        self.units: dict[str, UnitState] = {}
        for name in self.map.bases:
            unit = self.map.unit(name)
            state = UnitState(unit, [{}, {}] if unit.op_enable_offset is not None else [{}])
            if name in LUT_UNITS:
                state.lut = {t: np.zeros(n, dtype=np.int64) for t, n in LUT_DEPTH.items()}
            self.units[name] = state
        self._present = self.hw.units
        self._group_regs: dict[int, tuple[UnitState, Register, int, bool] | None] = {}
        self.intr_status = 0
        self.intr_mask = 0
        self._cfgrom = cfgrom_values(hw) if "CFGROM" in self.map.bases else {}
        #: Completed operations, in order: (engine names of the chain, {unit: group}).
        self.history: list[tuple[tuple[str, ...], dict[str, int]]] = []
        #: Set to count the bytes each engine reads and writes (profiling); None costs nothing.
        self.traffic: Traffic | None = None
        #: What the previous convolution left in the CBUF (ring pointers, kept data and weights).
        self.cbuf = CbufState(hw)
        #: The PDP operation that left input rows below its last window unread (``pdp.unread_rows``), or None:
        #: NVDLA's RTL then runs the next PDP wrong or hangs it, so ``Dla`` refuses that next PDP.
        self.pdp_unread_rows: str | None = None
        #: Operations queued and not yet launched, per unit of an engine with a CommandQueue (BDMA).
        self.queues: dict[str, list[dict[int, int]]] = {
            eng.units[0]: [] for eng in self.engines.values() if eng.queue is not None
        }

    # ---- CSB access -----------------------------------------------------------------------------
    def _register_at(self, addr: int) -> tuple[UnitState, Register]:
        reg = self.map.lookup(addr)
        if reg is None:
            unit = self.map.unit_at(addr)
            where = f"unit {unit}" if unit else "no unit"
            raise RegisterError(f"no register at CSB address {addr:#x} ({where})")
        return self.units[reg.unit], reg

    def _check_present(self, reg: Register) -> None:
        if reg.unit not in self._present:
            raise UnsupportedError(reg.unit, f"{self.hw.name} has no {reg.unit} (register {reg.full_name})")

    @property
    def interrupt(self) -> bool:
        """The level of the DLA interrupt line."""
        return bool(self.intr_status & ~self.intr_mask)

    def _group_register(self, addr: int) -> tuple[UnitState, Register, int, bool] | None:
        """(state, register, stored-bits mask, is D_OP_ENABLE) when ``addr`` is a ping-pong group register of
        a present unit (the bulk of every register program), else None; kept per address."""
        hit = self._group_regs.get(addr)
        if hit is None and addr not in self._group_regs:
            state, reg = self._register_at(addr)
            off = state.unit.op_enable_offset
            grouped = reg.unit in self._present and state.pingpong and reg.offset >= off \
                and reg.name not in ("S_POINTER", "S_STATUS", "S_LUT_ACCESS_CFG", "S_LUT_ACCESS_DATA")
            hit = (state, reg, reg.read_mask, reg.offset == off) if grouped else None
            self._group_regs[addr] = hit
        return hit

    def write_reg(self, addr: int, value: int) -> None:
        """A CSB write of a byte address. May fire engines (synchronously)."""
        fast = self._group_register(addr)
        if fast is not None:  # a ping-pong group register: the general path below, specialised
            state, reg, mask, enable = fast
            stored = value & 0xFFFFFFFF & mask
            if state.armed(state.producer):
                raise ConfigError(
                    f"{reg.unit}.{reg.name}",
                    f"written while group {state.producer} is enabled (D_OP_ENABLE.OP_EN=1)",
                )
            state.groups[state.producer][reg.offset] = stored
            if enable and stored & 1:
                self._fire(reg.unit)
            return
        state, reg = self._register_at(addr)
        self._check_present(reg)
        value &= 0xFFFFFFFF
        unit, name = reg.unit, reg.name
        if unit == "CFGROM":
            return  # read-only ROM
        if unit == "GLB":
            if name == "S_INTR_STATUS":
                self.intr_status &= ~value
            elif name == "S_INTR_SET":
                self.intr_status |= value & reg.read_mask
            elif name == "S_INTR_MASK":
                self.intr_mask = value & reg.read_mask
            else:
                state.groups[0][reg.offset] = value & reg.write_mask
            return
        if name == "S_POINTER" and state.pingpong:
            state.producer = value & 1
            return
        if name == "S_STATUS":
            return  # hardware-owned
        if name == "S_LUT_ACCESS_CFG" and state.lut:
            state.lut_addr = reg.field("LUT_ADDR").decode(value)
            state.lut_table = "LO" if reg.field("LUT_TABLE_ID").decode(value) else "LE"
            state.lut_write = bool(reg.field("LUT_ACCESS_TYPE").decode(value))
        elif name == "S_LUT_ACCESS_DATA" and state.lut:
            self._lut_access(state, value)
        stored = value & reg.read_mask
        if not state.pingpong:
            state.groups[0][reg.offset] = stored
            if unit in self.queues:
                self._queue_write(state, reg, stored)
            return
        if reg.offset < state.unit.op_enable_offset:
            for g in state.groups:
                g[reg.offset] = stored
            return
        group = state.groups[state.producer]
        if state.armed(state.producer):
            raise ConfigError(
                f"{unit}.{name}",
                f"written while group {state.producer} is enabled (D_OP_ENABLE.OP_EN=1)",
            )
        group[reg.offset] = stored
        if reg.offset == state.unit.op_enable_offset and stored & 1:
            self._fire(unit)

    def _lut_access(self, state: UnitState, value: int) -> int:
        table = state.lut[state.lut_table]
        addr = state.lut_addr
        if addr >= table.size:
            raise ConfigError(
                f"{state.unit.name}.S_LUT_ACCESS_CFG.LUT_ADDR",
                f"{addr} is past the end of the {state.lut_table} table ({table.size} entries)",
            )
        old = int(table[addr]) & 0xFFFF
        if state.lut_write:
            v = value & 0xFFFF
            table[addr] = v - 0x10000 if v & 0x8000 else v
        state.lut_addr = min(addr + 1, table.size - 1)
        return old

    def read_reg(self, addr: int) -> int:
        """A CSB read of a byte address."""
        state, reg = self._register_at(addr)
        unit, name = reg.unit, reg.name
        if unit not in self._present:
            return 0
        if unit == "CFGROM":
            return self._cfgrom.get(name, 0)
        if unit == "GLB":
            if name == "S_INTR_STATUS":
                return self.intr_status
            if name == "S_INTR_MASK":
                return self.intr_mask
            if name == "S_INTR_SET":
                return 0
            return state.groups[0].get(reg.offset, reg.reset)
        if name == "S_POINTER" and state.pingpong:
            return state.producer | (state.consumer << 16)
        if name == "S_STATUS" and state.pingpong:
            return self._status(state, 0) | (self._status(state, 1) << 16)
        if name == "S_CBUF_FLUSH_STATUS":
            return 1  # the CBUF is always flushed in the model
        if name == "S_LUT_ACCESS_DATA" and state.lut and not state.lut_write:
            return self._lut_access(state, 0)
        if unit in self.queues:
            status = self._queued_engine(unit).queue.status(len(self.queues[unit]))
            if name in status:
                return status[name] & 0xFFFFFFFF
        group = state.groups[state.producer if state.pingpong else 0]
        return group.get(reg.offset, reg.reset)

    @staticmethod
    def _status(state: UnitState, group: int) -> int:
        if not state.armed(group):
            return 0  # IDLE
        return 1 if group == state.consumer else 2  # RUNNING / PENDING

    # ---- engine firing ----------------------------------------------------------------------------
    def _armed(self, unit: str) -> bool:
        st = self.units.get(unit)
        return st is not None and st.armed(st.consumer)

    def _views(self, engine: Engine) -> dict[str, RegView]:
        return {u: self.units[u].view() for u in engine.all_units if u in self.units}

    def _chain(self, engine: Engine) -> list[Engine] | None:
        """The on-the-fly chain containing ``engine`` if every part of it is armed, else None."""
        head = engine
        seen = {head.name}
        while (src := head.source(self._views(head))) is not None:
            up = self.engines.get(src)
            if up is None:
                raise UnsupportedError(src, f"{engine.name} is fed by {src}, which this model lacks")
            if up.name in seen:
                raise ConfigError(engine.name, "on-the-fly chain loops")
            if not all(self._armed(u) for u in up.units) or up.sink(self._views(up)) != head.name:
                return None
            head = up
            seen.add(head.name)
        chain = [head]
        while (dst := chain[-1].sink(self._views(chain[-1]))) is not None:
            down = self.engines.get(dst)
            if down is None:
                raise UnsupportedError(dst, f"{chain[-1].name} feeds {dst}, which this model lacks")
            if down.name in seen and down is not engine:
                raise ConfigError(engine.name, "on-the-fly chain loops")
            if not all(self._armed(u) for u in down.units) or down.source(self._views(down)) != chain[-1].name:
                return None
            chain.append(down)
        for eng in chain:
            if not all(self._armed(u) for u in eng.units):
                return None
            if eng.rdma and eng.rdma_needed(self._views(eng)) and not self._armed(eng.rdma):
                return None
        return chain

    def _fire(self, armed: str | None = None) -> None:
        """Run every chain whose units are all armed, until nothing more can run. Arming ``armed`` can only
        complete a chain through an engine that owns it, so the first round asks those engines alone; after a
        chain runs (consumer groups toggle) every engine is asked again."""
        engines = list(self.engines.values())
        candidates = engines if armed is None else [e for e in engines if armed in e.all_units]
        progress = True
        while progress:
            progress = False
            for engine in candidates:
                if not all(self._armed(u) for u in engine.units):
                    continue
                chain = self._chain(engine)
                if chain is None:
                    continue
                self._run_chain(chain)
                progress = True
                break
            candidates = engines

    def _run_chain(self, chain: list[Engine]) -> None:
        views: dict[str, RegView] = {}
        for eng in chain:
            views.update(self._views(eng))
        data = None
        reported: dict[tuple[str, str], int] = {}
        cbuf = self.cbuf.begin(views, self.mem) if "CSC" in views else None
        pooling = any(eng.name == "PDP" for eng in chain)
        if pooling and self.pdp_unread_rows is not None:
            raise views["PDP"].D_DATA_CUBE_IN_HEIGHT.fail(
                "CUBE_IN_HEIGHT",
                f"this PDP follows {self.pdp_unread_rows}, which left input rows below its last window unread: "
                "NVDLA's PDP then computes this operation wrong or never finishes it",
            )
        for eng in chain:
            ctx = OpContext(
                hw=self.hw,
                mem=self.mem if self.traffic is None else self.traffic.memory(self.mem, eng.name),
                regs=views,
                flying_input=data,
                lut={u: self.units[u].lut for u in eng.lut_units},
                cbuf=cbuf if "CSC" in eng.units else None,
            )
            data = eng.run(ctx)
            reported.update(ctx.status)
            for (unit, register), value in ctx.status.items():
                st = self.units[unit]
                st.groups[st.consumer][st.unit.register(register).offset] = value
        groups: dict[str, int] = {}
        for eng in chain:
            for unit in eng.all_units:
                st = self.units[unit]
                if not st.armed(st.consumer):
                    continue  # an RDMA the operation did not need
                groups[unit] = st.consumer
            for unit, bit in eng.done_bits:
                self.intr_status |= 1 << (bit + groups.get(unit, self.units[unit].consumer))
        for unit, group in groups.items():
            st = self.units[unit]
            st.groups[group][st.unit.op_enable_offset] = 0
            st.consumer ^= 1
        if cbuf is not None:
            self.cbuf.end(cbuf, f"operation #{len(self.history)} (convolution, CDMA group {groups.get('CDMA', 0)})")
        if pooling:
            from golden.engines.pdp import unread_rows

            rows = unread_rows(views["PDP"])
            self.pdp_unread_rows = None if rows == 0 else (
                f"operation #{len(self.history)} (PDP group {groups.get('PDP', 0)}, {rows} of "
                f"{views['PDP'].D_DATA_CUBE_IN_HEIGHT.CUBE_IN_HEIGHT + 1} input rows unread)")
        self.history.append((tuple(e.name for e in chain), groups))
        for observer in OP_OBSERVERS:
            observer(self.hw, tuple(e.name for e in chain), views, reported)

    # ---- engines with a command queue (BDMA) --------------------------------------------------------
    def _queued_engine(self, unit: str) -> Engine:
        return next(e for e in self.engines.values() if e.queue is not None and e.units[0] == unit)

    def _queue_write(self, state: UnitState, reg: Register, stored: int) -> None:
        """Enqueue or launch on a write of a CommandQueue register with bit 0 set."""
        engine = self._queued_engine(reg.unit)
        q = engine.queue
        if not stored & 1 or (reg.name != q.enqueue and reg.name not in q.launches):
            return
        queue = self.queues[reg.unit]
        where = f"{reg.unit}.{reg.name}.{next(f.name for f in reg.fields if f.lsb == 0)}"
        if reg.name == q.enqueue:
            if len(queue) >= q.depth:
                raise ConfigError(where, f"all {q.depth} slots are queued; the hardware drops the operation")
            queue.append(dict(state.groups[0]))
            return
        group = q.launches.index(reg.name)
        if not queue:
            raise ConfigError(where, f"launches group {group} with no operation queued; the hardware never completes it")
        ops = list(queue)
        queue.clear()
        for words in ops:
            views = {reg.unit: RegView(state.unit, words)}
            ctx = OpContext(
                hw=self.hw,
                mem=self.mem if self.traffic is None else self.traffic.memory(self.mem, engine.name),
                regs=views,
            )
            engine.run(ctx)
            for (unit, register), value in ctx.status.items():
                self.units[unit].groups[0][self.units[unit].unit.register(register).offset] = value
            self.history.append(((engine.name,), {reg.unit: group}))
            for observer in OP_OBSERVERS:
                observer(self.hw, (engine.name,), views, dict(ctx.status))
        for _unit, bit in engine.done_bits:
            self.intr_status |= 1 << (bit + group)

    def pending(self) -> list[str]:
        """Human-readable list of armed units still waiting, for timeout diagnostics."""
        out = []
        for name, st in self.units.items():
            for g in range(len(st.groups)):
                if st.armed(g):
                    out.append(f"{name} group {g}")
        return out

    # ---- convenience for tests and tools ------------------------------------------------------------
    def write(self, name: str, value: int = 0, **fields: int | str) -> None:
        """Write a register by NVDLA name, either a whole word or field values (``KERNEL_WIDTH=2``)."""
        addr, reg = self.map.resolve(name)
        self.write_reg(addr, reg.encode(**fields) if fields else value)

    def read(self, name: str) -> int:
        addr, _ = self.map.resolve(name)
        return self.read_reg(addr)


__all__ = ["Dla", "cfgrom_values", "ENGINES"]
