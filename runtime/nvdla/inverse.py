"""Register values -> kmd descriptors: the inverse of NVDLA's firmware programmer, per engine.

An engine op's final register values (from a trace, or from a compiled loadable's register program) are
mapped back onto the kmd descriptors (``dla_*_op_desc``, ``dla_*_surface_desc``, ``dla_lut_param``) by a
per-engine *inverse* (``INVERSES``; SDP and CONV in ``inverse_sdp_conv``). Whether the descriptors really say
what the registers say is then decided by the forward direction (``check_expressible``): the firmware
programmer is run on them and every register it writes must get the same value, and every other register
set must be one the firmware leaves alone without effect (reset value, or a register listed in ``IGNORED``
with the reason). Fields that cannot change the result only in some configurations (a bypassed SDP stage,
a disabled operand DMA) are ``Irrelevant`` rules, checked on the values themselves; their bits are compared
in neither direction. The units the firmware enables must be the units the registers enable. Register
programs that fail this are *not expressible* as descriptors (e.g. PDP reciprocals other than the
firmware's table).

An op may be a chain of engines fused on the fly (conv -> SDP -> PDP): the inverse of the first engine
returns the ops of the chain, each later one ``fused_to`` its producer (``register_inverse(..., fuses=...)``
names the engines a chain may contain).

Used by ``regressions.nvdla.from_trace`` (NVDLA traces as loadables) and ``runtime.nvdla.export`` (compiled
networks as loadables).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from golden.config import HwConfig
from runtime.nvdla import descriptors as d
from runtime.nvdla.engines import FirmwareStep, Group, programmer_of
from golden.regs import RegisterMap

__all__ = ["NotExpressible", "Inverse", "Regs", "INVERSES", "IGNORED", "Irrelevant", "register_inverse",
           "register_irrelevant", "check_expressible", "engine_of", "ENGINE_UNIT", "invert"]


#: registers the firmware never writes whose value cannot change the result
IGNORED = {
    "D_CYA": "debug/chicken bits",
    "D_PERF_ENABLE": "performance counters",
    "PDP_RDMA.D_FLYING_MODE": "not written by the firmware; enabling the RDMA is what makes it fetch",
    "D_NAN_FLUSH_TO_ZERO": "floating point only",
    "S_INTR_MASK": "interrupt line mask",
    "S_POINTER": "group selection, done by the firmware itself",
    "PDP.D_SRC_BASE_ADDR_LOW": "the PDP core reads no memory; its RDMA fetches the input",
    "PDP.D_SRC_BASE_ADDR_HIGH": "the PDP core reads no memory; its RDMA fetches the input",
    "PDP_RDMA.D_POOLING_PADDING_CFG": "the RDMA's copy of the left padding only shapes the fetch; the golden "
                                      "model pools from the core's PAD_LEFT",
    "CACC.D_DATAOUT_ADDR": "CACC has no memory port: its output goes to SDP on the fly, never to this address",
    "CACC.D_LINE_STRIDE": "CACC has no memory port: the stride of a cube it never writes",
    "CACC.D_SURF_STRIDE": "CACC has no memory port: the stride of a cube it never writes",
    "CACC.D_DATAOUT_MAP": "CACC has no memory port: the packing of a cube it never writes",
}


@dataclass(frozen=True)
class Irrelevant:
    """``fields`` of UNIT's ``names`` (None: the whole register) cannot change the result while ``when`` holds
    for the trace's register values; ``reason`` says why (one line)."""

    unit: str
    names: tuple[str, ...]
    fields: tuple[str, ...] | None
    when: Callable[["Regs"], bool]
    reason: str


#: conditional irrelevance, per (unit, register name); engines' inverse modules add theirs
RULES: dict[tuple[str, str], list[Irrelevant]] = {}


def register_irrelevant(*rules: Irrelevant) -> None:
    for rule in rules:
        for name in rule.names:
            RULES.setdefault((rule.unit, name), []).append(rule)


register_irrelevant(Irrelevant("PDP", ("D_RECIP_KERNEL_WIDTH", "D_RECIP_KERNEL_HEIGHT"), None,
                               lambda r: r.f("PDP", "D_OPERATION_MODE_CFG", "POOLING_METHOD") != 0,
                               "reciprocals scale averages only"))


def _irrelevant(unit: str, name: str) -> bool:
    """Registers whose value cannot change the result, whatever the configuration."""
    return name in IGNORED or f"{unit}.{name}" in IGNORED


def _ignored_bits(unit: str, name: str, regs: "Regs") -> int:
    """The bits of UNIT.NAME that cannot change this trace's result (IGNORED, or a rule that applies)."""
    reg = regs.regmap.unit(unit).register(name)
    if _irrelevant(unit, name):
        return reg.write_mask
    bits = 0
    for rule in RULES.get((unit, name), ()):
        if rule.when(regs):
            bits |= reg.write_mask if rule.fields is None else sum(reg.field(f).mask for f in rule.fields)
    return bits


class NotExpressible(Exception):
    """The trace means something the kmd descriptors cannot say (one line: the register and values)."""


class Regs:
    """Final register values of a trace, by unit and name (reset values where never written)."""

    def __init__(self, regmap: RegisterMap, values: dict[tuple[str, str], int], hw: HwConfig | None = None) -> None:
        self.regmap, self.values, self.hw = regmap, values, hw

    def word(self, unit: str, name: str) -> int:
        v = self.values.get((unit, name))
        return self.regmap.unit(unit).register(name).reset if v is None else v

    def f(self, unit: str, name: str, fld: str, signed: bool = False) -> int:
        field_ = self.regmap.unit(unit).register(name).field(fld)
        w = self.word(unit, name)
        return field_.decode_signed(w) if signed else field_.decode(w)

    def addr(self, unit: str, low: str, high: str) -> int:
        return (self.word(unit, high) << 32) | self.word(unit, low)


@dataclass
class Inverse:
    """What an inverse returns: descriptors with cube addresses still absolute (``cubes``)."""

    op_type: int
    op: d.Struct
    surface: d.Struct
    cubes: dict[str, int]  # surface cube member -> absolute bus address
    lut: d.Struct | None = None
    #: index (in the list the inverse returns) of the op this one consumes on the fly (conv -> SDP -> PDP)
    fused_to: int | None = None


def _sign(v: int, bits: int) -> int:
    v &= (1 << bits) - 1
    return v - (1 << bits) if v >> (bits - 1) else v


# ---- PDP -------------------------------------------------------------------------------------------------
def _ram(r: Regs, unit: str, reg: str, fld: str) -> int:
    return d.MEM_MC if r.f(unit, reg, fld) == 1 else d.MEM_CV


def _pdp(r: Regs) -> Inverse:
    on_fly = r.f("PDP", "D_OPERATION_MODE_CFG", "FLYING_MODE") == 0
    src = d.DataCube(type=d.MEM_HW if on_fly else _ram(r, "PDP_RDMA", "D_SRC_RAM_CFG", "SRC_RAM_TYPE"),
                     width=r.word("PDP", "D_DATA_CUBE_IN_WIDTH") + 1, height=r.word("PDP", "D_DATA_CUBE_IN_HEIGHT") + 1,
                     channel=r.word("PDP", "D_DATA_CUBE_IN_CHANNEL") + 1,
                     line_stride=r.word("PDP_RDMA", "D_SRC_LINE_STRIDE"),
                     surf_stride=r.word("PDP_RDMA", "D_SRC_SURFACE_STRIDE"))
    dst = d.DataCube(type=_ram(r, "PDP", "D_DST_RAM_CFG", "DST_RAM_TYPE"),
                     width=r.word("PDP", "D_DATA_CUBE_OUT_WIDTH") + 1,
                     height=r.word("PDP", "D_DATA_CUBE_OUT_HEIGHT") + 1,
                     channel=r.word("PDP", "D_DATA_CUBE_OUT_CHANNEL") + 1,
                     line_stride=r.word("PDP", "D_DST_LINE_STRIDE"), surf_stride=r.word("PDP", "D_DST_SURFACE_STRIDE"))
    for c in (src, dst):
        c.size = c.surf_stride * -(-c.channel // 8) if c.type != d.MEM_HW else 0
    op = d.PdpOpDesc(
        partial_in_width_first=r.f("PDP", "D_PARTIAL_WIDTH_IN", "PARTIAL_WIDTH_IN_FIRST") + 1,
        partial_in_width_mid=r.f("PDP", "D_PARTIAL_WIDTH_IN", "PARTIAL_WIDTH_IN_MID") + 1,
        partial_in_width_last=r.f("PDP", "D_PARTIAL_WIDTH_IN", "PARTIAL_WIDTH_IN_LAST") + 1,
        partial_width_first=r.f("PDP", "D_PARTIAL_WIDTH_OUT", "PARTIAL_WIDTH_OUT_FIRST") + 1,
        partial_width_mid=r.f("PDP", "D_PARTIAL_WIDTH_OUT", "PARTIAL_WIDTH_OUT_MID") + 1,
        partial_width_last=r.f("PDP", "D_PARTIAL_WIDTH_OUT", "PARTIAL_WIDTH_OUT_LAST") + 1,
        split_num=r.f("PDP", "D_OPERATION_MODE_CFG", "SPLIT_NUM") + 1,
        pool_mode=r.f("PDP", "D_OPERATION_MODE_CFG", "POOLING_METHOD"),
        pool_width=r.f("PDP", "D_POOLING_KERNEL_CFG", "KERNEL_WIDTH"),
        pool_height=r.f("PDP", "D_POOLING_KERNEL_CFG", "KERNEL_HEIGHT"),
        stride_x=r.f("PDP", "D_POOLING_KERNEL_CFG", "KERNEL_STRIDE_WIDTH") + 1,
        stride_y=r.f("PDP", "D_POOLING_KERNEL_CFG", "KERNEL_STRIDE_HEIGHT") + 1,
        pad_left=r.f("PDP", "D_POOLING_PADDING_CFG", "PAD_LEFT"), pad_right=r.f("PDP", "D_POOLING_PADDING_CFG", "PAD_RIGHT"),
        pad_top=r.f("PDP", "D_POOLING_PADDING_CFG", "PAD_TOP"),
        pad_bottom=r.f("PDP", "D_POOLING_PADDING_CFG", "PAD_BOTTOM"),
        precision=r.f("PDP", "D_DATA_FORMAT", "INPUT_DATA"),
        padding_value=[_sign(r.word("PDP", f"D_POOLING_PADDING_VALUE_{i}_CFG"), 19) for i in range(1, 8)])
    cubes = {"dst_data": r.addr("PDP", "D_DST_BASE_ADDR_LOW", "D_DST_BASE_ADDR_HIGH")}
    if not on_fly:
        cubes["src_data"] = r.addr("PDP_RDMA", "D_SRC_BASE_ADDR_LOW", "D_SRC_BASE_ADDR_HIGH")
    return Inverse(d.OP_PDP, op, d.PdpSurfaceDesc(src_data=src, dst_data=dst), cubes)


# ---- CDP -------------------------------------------------------------------------------------------------
def lut_from_registers(r: Regs, unit: str, writes: list[tuple[str, str, int]]) -> d.Struct:
    """Replay the S_LUT_ACCESS port (table select + auto-incrementing data writes) and read S_LUT_*."""
    tables = {0: [0] * 65, 1: [0] * 257}
    table, index = 0, 0
    regmap = r.regmap
    cfg = regmap.unit(unit).register("S_LUT_ACCESS_CFG")
    for u, name, value in writes:
        if u != unit:
            continue
        if name == "S_LUT_ACCESS_CFG":
            table, index = cfg.field("LUT_TABLE_ID").decode(value), cfg.field("LUT_ADDR").decode(value)
        elif name == "S_LUT_ACCESS_DATA":
            if index < len(tables[table]):
                tables[table][index] = _sign(value, 16)
            index += 1
    wide = unit == "CDP"

    def reg64(name: str) -> int:
        return r.addr(unit, f"S_LUT_{name}_LOW", f"S_LUT_{name}_HIGH") if wide else r.word(unit, f"S_LUT_{name}")

    method = r.f(unit, "S_LUT_CFG", "LUT_LE_FUNCTION")
    le_off = r.f(unit, "S_LUT_INFO", "LUT_LE_INDEX_OFFSET") if method == 0 else r.f(unit, "S_LUT_INFO", "LUT_LE_INDEX_SELECT")
    lut = d.LutParam(
        linear_exp_table=tables[0], linear_only_table=tables[1],
        linear_exp_offset=d.LutOffset(value=_sign(le_off, 8)),
        linear_only_offset=d.LutOffset(value=_sign(r.f(unit, "S_LUT_INFO", "LUT_LO_INDEX_SELECT"), 8)),
        linear_exp_start=reg64("LE_START"), linear_exp_end=reg64("LE_END"),
        linear_only_start=reg64("LO_START"), linear_only_end=reg64("LO_END"),
        linear_exp_underflow_slope=d.LutSlope(scale=r.f(unit, "S_LUT_LE_SLOPE_SCALE", "LUT_LE_SLOPE_UFLOW_SCALE", True),
                                              shifter=r.f(unit, "S_LUT_LE_SLOPE_SHIFT", "LUT_LE_SLOPE_UFLOW_SHIFT", True)),
        linear_exp_overflow_slope=d.LutSlope(scale=r.f(unit, "S_LUT_LE_SLOPE_SCALE", "LUT_LE_SLOPE_OFLOW_SCALE", True),
                                             shifter=r.f(unit, "S_LUT_LE_SLOPE_SHIFT", "LUT_LE_SLOPE_OFLOW_SHIFT", True)),
        linear_only_underflow_slope=d.LutSlope(scale=r.f(unit, "S_LUT_LO_SLOPE_SCALE", "LUT_LO_SLOPE_UFLOW_SCALE", True),
                                               shifter=r.f(unit, "S_LUT_LO_SLOPE_SHIFT", "LUT_LO_SLOPE_UFLOW_SHIFT", True)),
        linear_only_overflow_slope=d.LutSlope(scale=r.f(unit, "S_LUT_LO_SLOPE_SCALE", "LUT_LO_SLOPE_OFLOW_SCALE", True),
                                              shifter=r.f(unit, "S_LUT_LO_SLOPE_SHIFT", "LUT_LO_SLOPE_OFLOW_SHIFT", True)),
        hybrid_priority=r.f(unit, "S_LUT_CFG", "LUT_HYBRID_PRIORITY"),
        underflow_priority=r.f(unit, "S_LUT_CFG", "LUT_UFLOW_PRIORITY"),
        overflow_priority=r.f(unit, "S_LUT_CFG", "LUT_OFLOW_PRIORITY"), method=method)
    return lut


def _cdp(r: Regs, writes: list[tuple[str, str, int]]) -> Inverse:
    src = d.DataCube(type=_ram(r, "CDP_RDMA", "D_SRC_DMA_CFG", "SRC_RAM_TYPE"),
                     width=r.word("CDP_RDMA", "D_DATA_CUBE_WIDTH") + 1, height=r.word("CDP_RDMA", "D_DATA_CUBE_HEIGHT") + 1,
                     channel=r.word("CDP_RDMA", "D_DATA_CUBE_CHANNEL") + 1,
                     line_stride=r.word("CDP_RDMA", "D_SRC_LINE_STRIDE"),
                     surf_stride=r.word("CDP_RDMA", "D_SRC_SURFACE_STRIDE"))
    dst = d.DataCube(type=_ram(r, "CDP", "D_DST_DMA_CFG", "DST_RAM_TYPE"), width=src.width, height=src.height,
                     channel=src.channel, line_stride=r.word("CDP", "D_DST_LINE_STRIDE"),
                     surf_stride=r.word("CDP", "D_DST_SURFACE_STRIDE"))
    precision = r.f("CDP", "D_DATA_FORMAT", "INPUT_DATA_TYPE")
    op = d.CdpOpDesc(
        in_precision=precision, out_precision=precision, lut_index=0,
        in_cvt=d.CvtParam(scale=_sign(r.word("CDP", "D_DATIN_SCALE"), 16), truncate=r.word("CDP", "D_DATIN_SHIFTER"),
                          enable=1, offset=_sign(r.word("CDP", "D_DATIN_OFFSET"), 16)),
        out_cvt=d.CvtParam(scale=_sign(r.word("CDP", "D_DATOUT_SCALE"), 16), truncate=r.word("CDP", "D_DATOUT_SHIFTER"),
                           enable=1, offset=_sign(r.word("CDP", "D_DATOUT_OFFSET"), 32)),
        local_size=(r.f("CDP", "D_LRN_CFG", "NORMALZ_LEN") + 1) * 2 + 1,
        bypass_sqsum=r.f("CDP", "D_FUNC_BYPASS", "SQSUM_BYPASS"), bypass_out_mul=r.f("CDP", "D_FUNC_BYPASS", "MUL_BYPASS"))
    cubes = {"src_data": r.addr("CDP_RDMA", "D_SRC_BASE_ADDR_LOW", "D_SRC_BASE_ADDR_HIGH"),
             "dst_data": r.addr("CDP", "D_DST_BASE_ADDR_LOW", "D_DST_BASE_ADDR_HIGH")}
    return Inverse(d.OP_CDP, op, d.CdpSurfaceDesc(src_data=src, dst_data=dst), cubes, lut_from_registers(r, "CDP", writes))


#: engine (the unit whose D_OP_ENABLE starts the op) -> inverse(regs, writes): its op, or its op followed by
#: the ops fused to it on the fly (each ``fused_to`` an earlier one)
INVERSES: dict[str, Callable[[Regs, list], Inverse | list[Inverse]]] = {
    "PDP": lambda r, w: _pdp(r),
    "CDP": _cdp,
}
#: engine -> the other engines its inverse may return fused to it (a trace enabling both is one chain)
FUSES: dict[str, tuple[str, ...]] = {}
#: the engine unit of each op type
ENGINE_UNIT = {d.OP_CONV: "CACC", d.OP_SDP: "SDP", d.OP_PDP: "PDP", d.OP_CDP: "CDP"}


def register_inverse(unit: str, inverse: Callable[[Regs, list], Inverse | list[Inverse]], *,
                     fuses: tuple[str, ...] = ()) -> None:
    INVERSES[unit] = inverse
    FUSES[unit] = fuses



# ---- checks ----------------------------------------------------------------------------------------------
def check_expressible(invs: list[Inverse], regs: Regs, values: dict, hw: HwConfig, engine: str) -> None:
    """FirmwareStep the descriptors forward and compare with the trace (see the module docstring)."""
    addresses = [addr for inv in invs for addr in inv.cubes.values()]

    def address_of(index: int, offset: int) -> int:  # index i = the i-th cube of the ops' ``cubes``
        return addresses[index] + offset

    fw_regs: dict[tuple[str, str], int] = {}
    fw_enabled: set[str] = set()
    first = 0
    for n, inv in enumerate(invs):
        e = programmer_of(inv.op_type)
        surface = inv.surface.replace()
        for i, name in enumerate(inv.cubes):
            cube = getattr(surface, name).replace()
            cube.address = first + i
            setattr(surface, name, cube)
        first += len(inv.cubes)
        p = FirmwareStep(regs.regmap, hw, address_of, lambda i, lut=inv.lut: lut, f"{engine} op {n} ({e.name})")
        g = Group(id=0, rdma_id=0, index=n, op=inv.op, surface=surface, rdma_needed=e.rdma_needed(inv.op, surface))
        e.program(p, g)
        e.enable(p, g)
        for unit, name, value in p.writes:
            fw_regs[(unit, name)] = value
            if name == "D_OP_ENABLE" and value & 1:
                fw_enabled.add(unit)
    trace_enabled = {u for (u, n), v in values.items() if n == "D_OP_ENABLE" and v & 1}
    for unit in sorted(trace_enabled ^ fw_enabled):
        raise NotExpressible(f"{unit}.D_OP_ENABLE: the trace {'enables' if unit in trace_enabled else 'leaves'} it, "
                             f"the descriptors {'do not' if unit in trace_enabled else 'enable it'}")
    for (unit, name), value in fw_regs.items():
        if name in ("S_LUT_ACCESS_DATA", "S_LUT_ACCESS_CFG", "D_OP_ENABLE"):
            continue
        reg = regs.regmap.unit(unit).register(name)
        mask = reg.write_mask & ~_ignored_bits(unit, name, regs)
        if name == "S_LUT_INFO":  # a LUT in exponent mode has no LE index select, in linear mode no offset
            unused = "LUT_LE_INDEX_SELECT" if regs.f(unit, "S_LUT_CFG", "LUT_LE_FUNCTION") == 0 else "LUT_LE_INDEX_OFFSET"
            mask &= ~reg.field(unused).mask
        want = regs.word(unit, name) & mask
        if value & mask != want:
            diff = [f"{f.name} {f.decode(want)} vs {f.decode(value & mask)}" for f in reg.fields
                    if f.mask & mask and f.decode(want) != f.decode(value & mask)] if len(reg.fields) > 1 else []
            raise NotExpressible(f"{unit}.{name}: the trace sets {want:#x}, the descriptors program {value & mask:#x}"
                                 + (f" ({', '.join(diff)})" if diff else ""))
    for (unit, name), value in values.items():
        if (unit, name) in fw_regs or unit == "GLB":
            continue
        if not name.startswith("D_") or name in ("D_OP_ENABLE",):
            continue
        reg = regs.regmap.unit(unit).register(name)
        mask = reg.write_mask & ~_ignored_bits(unit, name, regs)
        if value & mask != reg.reset & mask:
            raise NotExpressible(f"{unit}.{name} = {value:#x}: the firmware never writes it (reset {reg.reset:#x})")


def engine_of(values: dict, writes: list) -> str:
    """The engine whose inverse takes the trace: the one enabled engine not fused to another enabled one."""
    enabled = [u for u, n, v in writes if n == "D_OP_ENABLE" and v & 1 and u in INVERSES]
    units = set(enabled)
    heads = [u for u in units if not any(u in FUSES.get(o, ()) for o in units - {u})]
    if len(heads) != 1 or len(enabled) != len(units) or not units <= {heads[0], *FUSES.get(heads[0], ())}:
        raise NotExpressible(f"not a single-op trace of {', '.join(INVERSES)} "
                             f"({len(enabled)} enables of {', '.join(sorted(units)) or 'no supported engine'})")
    return heads[0]



def invert(values: dict[tuple[str, str], int], writes: list[tuple[str, str, int]], regmap: RegisterMap,
           hw: HwConfig) -> tuple[str, list[Inverse]]:
    """The ops (a chain fused on the fly) one op's final register ``values`` (and its ``writes``, in order,
    for the LUT port) mean, checked forward: (engine, ops). Raises NotExpressible."""
    engine = engine_of(values, writes)
    regs = Regs(regmap, values, hw)
    result = INVERSES[engine](regs, writes)
    invs = result if isinstance(result, list) else [result]
    enabled = {u for u, n, v in writes if n == "D_OP_ENABLE" and v & 1 and u in INVERSES}
    if {ENGINE_UNIT[inv.op_type] for inv in invs} != enabled:
        raise NotExpressible(f"the program enables {', '.join(sorted(enabled))}, but only "
                             f"{', '.join(d.OP_NAMES[i.op_type] for i in invs)} are fused to {engine}")
    check_expressible(invs, regs, values, hw, engine)
    return engine, invs

from runtime.nvdla import inverse_sdp_conv  # noqa: E402,F401  (registers the SDP and CONV inverses)
