"""Which engines a trace needs, and which a DUT has (from its CFGROM).

A trace needs every unit it starts (a ``D_OP_ENABLE`` write with OP_EN=1, or BDMA's launch), every
unit whose completion it awaits (``intr_notify``), and, for an SDP operation, the SDP sub-units its
config does not bypass (X1 = BS, X2 = BN, Y = EW, and the LUT inside Y), and each data type other than int8
that a started unit's precision fields select (``"SDP:int16"``, ``"CDMA:fp16"``).

A DUT has a unit when its CFGROM descriptor ``CFGROM_<UNIT>_DESC`` is non-zero (NVDLA's ROM lists every
unit it implements; an absent unit reads 0), an SDP sub-unit when its ``SDP_CAP_COMPAT`` bit is set, and a
data type when the unit's ``CFGROM_<UNIT>_BASE_FEATURE_TYPES`` has its bit. An address map without a CFGROM
(nvdlav1's) tells nothing: a user's DUT is assumed to have everything, our own RTL declares the CFGROM words
it would have (``BenchSettings.declared_cfgrom``).
A trace that needs anything the DUT lacks is not applicable (N/A), never passed.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Awaitable, Callable, Iterable

from golden.config import HwConfig
from golden.dla import CFGROM_PDP_NO_SDP_FLYING, CFGROM_SDP_CAPS, CFGROM_TYPE_BITS, cfgrom_values
from golden.regs import RegisterMap, register_map
from runtime.trace import Cmd, IntrNotify, RegWrite

#: intr_notify source -> the unit whose completion raises it.
INTR_SOURCE_UNITS = {
    "SDP": "SDP", "CDP": "CDP", "PDP": "PDP", "BDMA": "BDMA", "RUBIK": "RBK", "RBK": "RBK",
    "CDMA_DAT": "CDMA", "CDMA_WT": "CDMA", "CACC": "CACC",
}
#: SDP sub-units with their config register and bypass field (SDP_LUT sits inside EW).
SDP_FEATURES = {
    "SDP_BS": ("D_DP_BS_CFG", "BS_BYPASS"),
    "SDP_BN": ("D_DP_BN_CFG", "BN_BYPASS"),
    "SDP_EW": ("D_DP_EW_CFG", "EW_BYPASS"),
}
#: Units that start on a write other than D_OP_ENABLE (BDMA queues with CFG_OP.EN, runs on CFG_LAUNCHn).
_LAUNCH_REGISTERS = {("BDMA", "CFG_LAUNCH0"), ("BDMA", "CFG_LAUNCH1"), ("BDMA", "CFG_OP")}
#: CFGROM words that must match the trace's hardware config (sizes the traces' layouts depend on).
COMPARED_WORDS = (
    "CFGROM_CDMA_BASE_ATOMIC_C", "CFGROM_CDMA_BASE_ATOMIC_K", "CFGROM_CDMA_BASE_ATOMIC_M",
    "CFGROM_CDMA_BASE_CBUF_BANK_NUM", "CFGROM_CDMA_BASE_CBUF_BANK_WIDTH", "CFGROM_CDMA_BASE_CBUF_BANK_DEPTH",
)


#: Pseudo-engine: SDP feeding PDP on the fly (absent when PDP_CAP_INCOMPAT has CFGROM_PDP_NO_SDP_FLYING).
SDP_PDP_FLYING = "SDP->PDP on-the-fly"


def required_engines(commands: Iterable[Cmd], regmap: RegisterMap) -> list[str]:
    """Units (CFGROM names) and SDP sub-units (``SDP_BS``, ``SDP_BN``, ``SDP_EW``, ``SDP_LUT``) a trace's
    commands need, in the order it first needs them. SDP sub-units are judged from the register values written
    last before each SDP enable (the registers' reset values bypass every sub-unit)."""
    needed: list[str] = []
    last: dict[int, int] = {}

    def need(name: str) -> None:
        if name not in needed:
            needed.append(name)

    def field_of(unit: str, reg: str, fld: str) -> int:
        r = regmap.unit(unit).register(reg)
        addr = regmap.address(unit, reg)
        return r.field(fld).decode(last.get(addr, r.reset))

    for cmd in commands:
        if isinstance(cmd, RegWrite):
            last[cmd.addr] = cmd.value
            reg = regmap.lookup(cmd.addr)
            if reg is None:
                continue
            starts = (reg.name == "D_OP_ENABLE" and cmd.value & 1) or (
                (reg.unit, reg.name) in _LAUNCH_REGISTERS and cmd.value & 1)
            if not starts:
                continue
            need(reg.unit)
            for dtype in _precisions(regmap, reg.unit, last):
                need(f"{reg.unit}:{dtype}")
            if reg.unit == "SDP":
                for feature, (cfg, bypass) in SDP_FEATURES.items():
                    if field_of("SDP", cfg, bypass) == 0:
                        need(feature)
                if field_of("SDP", "D_DP_EW_CFG", "EW_BYPASS") == 0 and \
                        field_of("SDP", "D_DP_EW_CFG", "EW_LUT_BYPASS") == 0:
                    need("SDP_LUT")
                if field_of("SDP", "D_FEATURE_MODE_CFG", "OUTPUT_DST") == 1:
                    need(SDP_PDP_FLYING)
            if reg.unit == "PDP" and field_of("PDP", "D_OPERATION_MODE_CFG", "FLYING_MODE") == 0:
                need(SDP_PDP_FLYING)
        elif isinstance(cmd, IntrNotify):
            source = cmd.source.rsplit("_", 1)[0]
            if source in INTR_SOURCE_UNITS:
                need(INTR_SOURCE_UNITS[source])
    return needed


def _precisions(regmap: RegisterMap, unit: str, last: dict[int, int]) -> list[str]:
    """Data types other than int8 that ``unit``'s precision fields (those with an INT16/FP16 enum) select,
    from the register values written last. Only written registers count: several reset to int16 (CDMA,
    CSC, CACC, CDP), and a trace relying on that would be unusual enough to fail rather than be skipped."""
    out: list[str] = []
    for reg in regmap.unit(unit).registers:
        if regmap.address(unit, reg.name) not in last:
            continue
        for fld in reg.fields:
            enum = getattr(fld, "enum", None) or {}
            if "INT16" not in enum or "FP16" not in enum:
                continue
            value = fld.decode(last[regmap.address(unit, reg.name)])
            dtype = {enum["INT16"]: "int16", enum["FP16"]: "fp16"}.get(value)
            if dtype and dtype not in out:
                out.append(dtype)
    return out


@dataclass(frozen=True)
class DutCapabilities:
    """What a DUT's CFGROM advertises."""

    units: frozenset[str]
    sdp_features: frozenset[str]
    words: dict[str, int] = field(default_factory=dict)
    #: False when the address map has no CFGROM (nv_full): nothing is known, everything is assumed.
    probed: bool = True

    @classmethod
    def unknown(cls) -> DutCapabilities:
        return cls(frozenset(), frozenset(), {}, probed=False)

    def has(self, engine: str) -> bool:
        if not self.probed:
            return True
        if engine in SDP_FEATURES or engine == "SDP_LUT":
            return engine in self.sdp_features
        if ":" in engine:  # "UNIT:dtype": the unit's FEATURE_TYPES word, when the ROM has one
            unit, dtype = engine.split(":")
            types = self.words.get(f"CFGROM_{unit}_BASE_FEATURE_TYPES")
            return types is None or bool(types & CFGROM_TYPE_BITS[dtype])
        if engine == SDP_PDP_FLYING:
            return "PDP" in self.units and not self.words.get("CFGROM_PDP_CAP_INCOMPAT", 0) & CFGROM_PDP_NO_SDP_FLYING
        return engine in self.units

    def missing(self, required: list[str]) -> list[str]:
        """Required engines the DUT lacks, core units first (``PDP`` before ``PDP_RDMA``)."""
        lacking = [e for e in required if not self.has(e)]
        return sorted(lacking, key=lambda e: (":" in e, e.endswith("_RDMA"), required.index(e)))

    def mismatches(self, hw: HwConfig) -> list[str]:
        """CFGROM sizes that differ from ``hw`` (only words the DUT fills in, of units it has)."""
        if not self.probed:
            return []
        expected = cfgrom_values(hw)
        out = []
        for name in COMPARED_WORDS:
            got = self.words.get(name)
            if got and name in expected and got != expected[name]:
                out.append(f"CFGROM {name[len('CFGROM_'):]} is {got}, {hw.name} has {expected[name]}")
        return out

    def describe(self) -> str:
        if not self.probed:
            return "no CFGROM in this address map"
        sub = ", ".join(sorted(self.sdp_features))
        return f"units {', '.join(sorted(self.units)) or 'none'}; SDP features {sub or 'none'}"


def not_applicable(missing: list[str]) -> str:
    """The N/A detail for missing engines: ``engine X not in DUT`` (naming the others too)."""
    text = f"engine {missing[0]} not in DUT"
    if len(missing) > 1:
        text += f" (nor {', '.join(missing[1:])})"
    return text


def cfgrom_words_to_probe(regmap: RegisterMap) -> list[str]:
    """CFGROM registers worth reading: every unit descriptor, SDP capabilities, and compared sizes."""
    names = [r.name for r in regmap.unit("CFGROM").registers]
    wanted = [n for n in names if n.endswith("_DESC")]
    wanted += [n for n in names if n.endswith("_BASE_FEATURE_TYPES")]
    wanted += [n for n in ("CFGROM_SDP_CAP_COMPAT", "CFGROM_PDP_CAP_INCOMPAT", *COMPARED_WORDS) if n in names]
    return wanted


async def probe_cfgrom(read_reg: Callable[[int], Awaitable[int]], address_map: str,
                       declared: dict[str, int] | None = None) -> DutCapabilities:
    """Read the DUT's CFGROM over CSB; without a CFGROM in the address map, the ``declared`` words (our
    RTL's) or, for a DUT that declares none, ``unknown``."""
    regmap = register_map(address_map)
    if "CFGROM" not in regmap.bases:
        return capabilities_from_words(declared) if declared else DutCapabilities.unknown()
    words = {}
    for name in cfgrom_words_to_probe(regmap):
        words[name] = await read_reg(regmap.address("CFGROM", name))
    return capabilities_from_words(words)


def capabilities_from_words(words: dict[str, int]) -> DutCapabilities:
    """What CFGROM words (read, or declared by our RTL) advertise."""
    units = {name[len("CFGROM_"):-len("_DESC")] for name, v in words.items() if name.endswith("_DESC") and v}
    caps = words.get("CFGROM_SDP_CAP_COMPAT", 0)
    features = {f"SDP_{attr[len('sdp_'):].upper()}" for attr, bit in CFGROM_SDP_CAPS.items() if caps & bit}
    return DutCapabilities(frozenset(units), frozenset(features), words)
