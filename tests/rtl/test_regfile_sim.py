"""The RTL register file against golden.Dla: every register's reset value, masks, ping-pong groups,
S_POINTER, writes to armed groups, GLB interrupt status/set/mask and the dla_intr line, the LUT
access port, CFGROM, absent units and holes — one CSB sequence, expected values from the golden
model, played on rtl/NV_nvdla under Icarus by tb/vectors/tb_nvdla.v."""
from __future__ import annotations

import random
import shutil

import pytest

from golden import Dla, get_config
from golden.config import HwConfig
from golden.dla import LUT_DEPTH
from golden.engines import load_engines
from golden.errors import ConfigError, RegisterError, UnsupportedError
from golden.regs import UNIT_WINDOW, UNITS, Register, register_map
from tb.vectors import Vectors, sim

pytestmark = pytest.mark.skipif(shutil.which("iverilog") is None, reason="iverilog not installed")

#: Units whose OP_EN may fire an engine in golden.Dla (the first core unit of every engine): the
#: register test never arms them, so the golden model only ever checks register semantics.
FIRING_UNITS = frozenset(engine.units[0] for engine in load_engines().values())
#: Registers whose bit 0 queues or launches an operation of a command-queue engine (BDMA's CFG_OP,
#: CFG_LAUNCH0/1): random transfers of up to gigabytes are not a register-semantics test.
KICK_REGISTERS = frozenset((engine.units[0], name) for engine in load_engines().values() if engine.queue
                           for name in (engine.queue.enqueue, *engine.queue.launches))
#: Status words a command-queue engine computes (BDMA STATUS, stall counters). Our RTL has no BDMA and
#: holds them as plain registers at their reset value, so the test reads them but does not write them.
QUEUE_STATUS = frozenset((engine.units[0], name) for engine in load_engines().values() if engine.queue
                         for name in engine.queue.status(0))


class GoldenMirror:
    """Applies each CSB step to golden.Dla and records it with the answer the RTL must give."""

    def __init__(self, hw: HwConfig, vec: Vectors) -> None:
        self.hw = hw
        self.dla = Dla(hw)
        self.map = register_map(hw.address_map)
        self.cfgrom = sim.gen.rtl_cfgrom_values(hw)
        self.vec = vec

    def write(self, addr: int, value: int, nposted: bool = False) -> None:
        try:
            self.dla.write_reg(addr, value)
        except (ConfigError, RegisterError, UnsupportedError):
            pass  # an illegal write (armed group, absent unit, hole): the RTL drops it
        self.vec.write(addr, value, nposted)

    def expected(self, addr: int) -> int:
        reg = self.map.lookup(addr)
        if reg is not None and reg.unit == "CFGROM" and "CFGROM" in self.hw.units:
            return self.cfgrom[reg.name]
        try:
            return self.dla.read_reg(addr)
        except RegisterError:
            return 0  # holes read 0

    def read(self, addr: int) -> None:
        self.vec.read(addr, self.expected(addr))

    def check_intr(self) -> None:
        self.vec.idle(3)  # the line is registered one cycle after the status
        self.vec.check_intr(int(self.dla.interrupt))


def legal_value(reg: Register, value: int) -> int:
    """A random word made safe for the register test: no OP_EN on units that fire engines (nor BDMA's
    queue/launch bits), LUT
    addresses inside the selected table (golden.Dla raises on accesses past the end)."""
    if (reg.name == "D_OP_ENABLE" and reg.unit in FIRING_UNITS) or (reg.unit, reg.name) in KICK_REGISTERS:
        value &= ~1
    if reg.name == "S_LUT_ACCESS_CFG":
        table = "LO" if reg.field("LUT_TABLE_ID").decode(value) else "LE"
        addr = reg.field("LUT_ADDR").decode(value) % LUT_DEPTH[table]
        value = (value & ~reg.field("LUT_ADDR").mask) | reg.field("LUT_ADDR").encode(addr)
    return value


def random_word(rng: random.Random) -> int:
    return rng.choice([0, 1, 0xFFFF_FFFF, rng.getrandbits(32), rng.getrandbits(32), rng.getrandbits(8)])


def register_program(hw: HwConfig, rng: random.Random, random_steps: int) -> Vectors:
    vec = Vectors()
    g = GoldenMirror(hw, vec)
    regs = [(addr, reg) for addr, reg in g.map.registers()]
    present = [(a, r) for a, r in regs if r.unit in hw.units]
    pingpong = [u for u in g.map.bases if u in hw.units and UNITS[u].op_enable_offset is not None]

    # 1. reset values of every register of the map (absent units read 0)
    for addr, _ in regs:
        g.read(addr)
    # 2. every register written and read back, in both groups, posted and non-posted
    for group in (0, 1):
        for unit in pingpong:
            g.write(g.map.address(unit, "S_POINTER"), group)
        for i, (addr, reg) in enumerate(present):
            if (reg.unit, reg.name) not in QUEUE_STATUS:
                g.write(addr, legal_value(reg, random_word(rng)), nposted=bool(i % 2))
        for addr, _ in present:
            g.read(addr)
    for unit in pingpong:
        g.write(g.map.address(unit, "S_POINTER"), 0)
    for addr, _ in present:
        g.read(addr)
    # 3. LUT access port: write runs (saturating at the end of a table), read runs
    for unit in ("SDP", "CDP"):
        if unit not in hw.units:
            continue
        cfg_addr, cfg = g.map.resolve(f"{unit}.S_LUT_ACCESS_CFG")
        data_addr, _ = g.map.resolve(f"{unit}.S_LUT_ACCESS_DATA")
        for table, depth in LUT_DEPTH.items():
            start = depth - 6
            g.write(cfg_addr, cfg.encode(LUT_ADDR=start, LUT_TABLE_ID=table, LUT_ACCESS_TYPE="WRITE"))
            for _ in range(8):
                g.write(data_addr, rng.getrandbits(32))
            g.read(data_addr)  # write mode: the last data word
            g.write(cfg_addr, cfg.encode(LUT_ADDR=start - 2, LUT_TABLE_ID=table, LUT_ACCESS_TYPE="READ"))
            for _ in range(10):
                g.read(data_addr)
            g.read(cfg_addr)
    # 4. GLB interrupts: set, mask, write-1-to-clear, the line
    status = g.map.address("GLB", "S_INTR_STATUS")
    mask = g.map.address("GLB", "S_INTR_MASK")
    setr = g.map.address("GLB", "S_INTR_SET")
    for value in (0x11, 0x3F03FC, 0, 0x3):
        g.write(setr, value)
        g.check_intr()
        g.read(status)
        g.write(mask, rng.choice([0x3F03FC, 0x3F03FF, 0]))
        g.check_intr()
        g.write(status, rng.getrandbits(22))
        g.check_intr()
        g.read(status)
    g.write(status, 0x3F03FF)
    g.write(mask, 0)
    # 5. random mix: registers of every unit, holes, pointer flips, interrupt registers
    windows = [u for u in g.map.bases if u in hw.units]
    for _ in range(random_steps):
        kind = rng.random()
        if kind < 0.75:
            addr, reg = rng.choice(regs)
            if rng.random() < 0.5 and (reg.unit, reg.name) not in QUEUE_STATUS:
                g.write(addr, legal_value(reg, random_word(rng)), nposted=rng.random() < 0.3)
            else:
                g.read(addr)
        elif kind < 0.85:
            unit = rng.choice(windows)
            offsets = {r.offset for r in UNITS[unit].registers}
            off = rng.randrange(0, UNIT_WINDOW, 4)
            if off in offsets:
                continue
            addr = g.map.base(unit) + off
            if rng.random() < 0.5:
                g.write(addr, rng.getrandbits(32))
            else:
                g.read(addr)
        elif kind < 0.95:
            unit = rng.choice(pingpong)
            g.write(g.map.address(unit, "S_POINTER"), rng.getrandbits(32))
            g.read(g.map.address(unit, "S_POINTER"))
        else:
            g.write(rng.choice([setr, status, mask]), rng.getrandbits(22))
            g.check_intr()
    # 6. everything once more
    for addr, _ in regs:
        g.read(addr)
    g.check_intr()
    return vec


@pytest.mark.parametrize("config", ["nv_small", "nv_full"])
def test_register_file_matches_golden(tmp_path, config):
    hw = get_config(config)
    rng = random.Random(20240 + len(config))
    vec = register_program(hw, rng, random_steps=2500)
    cfg = sim.config_dir(tmp_path, hw)
    build, vvp = sim.icarus_build(tmp_path, cfg, {}, extra=[sim.TB])
    assert build.returncode == 0, build.stderr + build.stdout
    result = sim.icarus_run(vvp, vec.save(tmp_path / "regs.hex"), seed=3)
    assert "TB PASS" in result.stdout, result.stdout[-4000:] + result.stderr[-2000:]
