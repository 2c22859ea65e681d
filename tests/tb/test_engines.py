"""Which engines a trace needs, what a CFGROM advertises, and the N/A rule between them."""
from __future__ import annotations

import asyncio

import pytest

from conftest import nvdla_traces_root
from golden.config import get_config
from golden.dla import cfgrom_values
from golden.regs import register_map
from runtime.trace import find_traces, parse_cfg
from tb.engines import SDP_PDP_FLYING, DutCapabilities, not_applicable, probe_cfgrom, required_engines

SMALL = register_map("small")


def caps_of(words: dict[str, int]) -> DutCapabilities:
    """Probe a CFGROM given as {register name: value}, as the testbench does over CSB."""
    by_addr = {SMALL.address("CFGROM", n): v for n, v in words.items()}

    async def read(addr: int) -> int:
        return by_addr.get(addr, 0)

    return asyncio.run(probe_cfgrom(read, "small"))


def trace_of(tmp_path, lines: list[str]):
    cfg = tmp_path / "t.cfg"
    cfg.write_text("\n".join(lines) + "\n")
    return parse_cfg(cfg, SMALL)


def test_enables_and_interrupts_name_the_engines(tmp_path):
    t = trace_of(tmp_path, [
        "reg_write(NVDLA_PDP.D_OPERATION_MODE_CFG_0, 0x10);",  # off-flying: input from memory
        "reg_write(NVDLA_PDP_RDMA.D_OP_ENABLE_0, 0x1);",
        "reg_write(NVDLA_PDP.D_OP_ENABLE_0, 0x1);",
        "reg_write(NVDLA_CDP.D_OP_ENABLE_0, 0x0);",  # written but not started
        "intr_notify(CACC_0, sync_id_0);",
        "check_nothing(sync_id_0);",
    ])
    assert required_engines(t.commands, SMALL) == ["PDP_RDMA", "PDP", "CACC"]


def test_sdp_feeding_pdp_needs_the_on_the_fly_path(tmp_path):
    t = trace_of(tmp_path, [
        "reg_write(NVDLA_SDP.D_DP_BS_CFG_0, 0x1);",
        "reg_write(NVDLA_SDP.D_DP_BN_CFG_0, 0x1);",
        "reg_write(NVDLA_SDP.D_DP_EW_CFG_0, 0x1);",
        "reg_write(NVDLA_SDP.D_FEATURE_MODE_CFG_0, 0x2);",  # OUTPUT_DST = PDP
        "reg_write(NVDLA_PDP.D_OPERATION_MODE_CFG_0, 0x0);",  # ON_FLYING
        "reg_write(NVDLA_PDP.D_OP_ENABLE_0, 0x1);",
        "reg_write(NVDLA_SDP.D_OP_ENABLE_0, 0x1);",
        "check_nothing(0);",
    ])
    assert required_engines(t.commands, SMALL) == ["PDP", SDP_PDP_FLYING, "SDP"]
    rom = {"CFGROM_PDP_DESC": 1, "CFGROM_SDP_DESC": 1}
    with_path = DutCapabilities(frozenset({"PDP", "SDP"}), frozenset(), rom)
    without = DutCapabilities(frozenset({"PDP", "SDP"}), frozenset(), {**rom, "CFGROM_PDP_CAP_INCOMPAT": 1})
    assert with_path.missing(required_engines(t.commands, SMALL)) == []
    assert without.missing(required_engines(t.commands, SMALL)) == [SDP_PDP_FLYING]


def test_sdp_sub_units_follow_the_bypass_bits(tmp_path):
    t = trace_of(tmp_path, [
        "reg_write(NVDLA_SDP.D_DP_BS_CFG_0, 0x0);",  # X1 used
        "reg_write(NVDLA_SDP.D_DP_EW_CFG_0, 0x0);",  # Y used, LUT not bypassed
        "reg_write(NVDLA_SDP.D_OP_ENABLE_0, 0x1);",
        "check_nothing(0);",
    ])
    assert required_engines(t.commands, SMALL) == ["SDP", "SDP_BS", "SDP_EW", "SDP_LUT"]


def test_cfgrom_probe_and_not_applicable_detail():
    hw = get_config("nv_small")
    full = caps_of(cfgrom_values(hw))
    assert {"PDP", "PDP_RDMA", "SDP", "CDP", "CACC"} <= full.units
    assert full.sdp_features == {"SDP_BS", "SDP_BN"}  # nv_small has no EW/LUT
    assert full.missing(["SDP", "SDP_BS", "SDP_EW"]) == ["SDP_EW"]
    words = dict(cfgrom_values(hw), CFGROM_PDP_DESC=0, CFGROM_PDP_RDMA_DESC=0)
    no_pdp = caps_of(words)
    missing = no_pdp.missing(["PDP_RDMA", "PDP"])
    assert missing == ["PDP", "PDP_RDMA"]  # the engine first, then its DMA
    assert not_applicable(missing) == "engine PDP not in DUT (nor PDP_RDMA)"
    assert not_applicable(["CDP"]) == "engine CDP not in DUT"
    assert caps_of({}).units == frozenset()  # a DUT without CFGROM has nothing: every trace is N/A


def test_cfgrom_sizes_must_match_the_trace_config():
    caps = caps_of(cfgrom_values(get_config("nv_small")))
    assert caps.mismatches(get_config("nv_small")) == []
    assert caps.mismatches(get_config("nv_small_256"))[0] == "CFGROM CDMA_BASE_ATOMIC_C is 8, nv_small_256 has 32"
    assert DutCapabilities.unknown().missing(["PDP"]) == []  # no CFGROM in the address map: assume all


def test_nvdla_nv_small_traces_need_only_what_nv_small_has(pytestconfig):
    root = nvdla_traces_root(pytestconfig) / "nv_small"
    if not root.is_dir():
        pytest.skip(f"NVDLA traces not found at {root}")
    caps = caps_of(cfgrom_values(get_config("nv_small")))
    lacking = {}
    for cfg in find_traces(root):
        t = parse_cfg(cfg, SMALL)
        need = required_engines(t.commands, SMALL)
        assert need, f"{t.name} needs no engine?"
        if caps.missing(need):
            lacking[cfg.parent.name] = caps.missing(need)
    # exactly the EW traces, which the golden model also reports N/A on nv_small
    assert lacking and all("_ew" in name and m[0] == "SDP_EW" for name, m in lacking.items())
    assert len(lacking) == 4


def test_precisions_other_than_int8_are_required_per_unit(tmp_path):
    """A started unit whose precision fields say int16/fp16 needs that data type; a CFGROM advertises the
    types of each unit in its FEATURE_TYPES word (int8 0x10, int16 0x20, fp16 0x100)."""
    t = trace_of(tmp_path, [
        "reg_write(NVDLA_SDP.D_DATA_FORMAT_0, 0x5);",  # PROC_PRECISION int16, OUT_PRECISION int16
        "reg_write(NVDLA_SDP.D_OP_ENABLE_0, 0x1);",
        "reg_write(NVDLA_PDP.D_DATA_FORMAT_0, 0x2);",  # INPUT_DATA fp16
        "reg_write(NVDLA_PDP.D_OPERATION_MODE_CFG_0, 0x10);",
        "reg_write(NVDLA_PDP.D_OP_ENABLE_0, 0x1);",
        "reg_write(NVDLA_CDP.D_OP_ENABLE_0, 0x1);",  # D_DATA_FORMAT not written: no type required
        "check_nothing(0);",
    ])
    assert required_engines(t.commands, SMALL) == ["SDP", "SDP:int16", "PDP", "PDP:fp16", "CDP"]
    words = dict(cfgrom_values(get_config("nv_small")))
    int8_only = caps_of(words)
    assert int8_only.missing(required_engines(t.commands, SMALL)) == ["SDP:int16", "PDP:fp16"]
    wide = caps_of({**words, "CFGROM_SDP_BASE_FEATURE_TYPES": 0x30, "CFGROM_PDP_BASE_FEATURE_TYPES": 0x110})
    assert wide.missing(required_engines(t.commands, SMALL)) == []
    no_conv = caps_of({**words, "CFGROM_CDMA_DESC": 0})
    assert not_applicable(no_conv.missing(["SDP:int16", "CDMA"])) == "engine CDMA not in DUT (nor SDP:int16)"


def test_our_rtl_declares_its_cfgrom_where_the_address_map_has_none():
    """nvdlav1's map (nv_full) has no CFGROM: a user's DUT is assumed to have everything, our RTL declares
    the words it would hold, so a conv or int16 trace is N/A on it instead of hanging."""
    from tb.rtl_headers import rtl_cfgrom_values

    hw = get_config("nv_full")

    async def no_reads(addr: int) -> int:
        raise AssertionError("nothing to read without a CFGROM")

    assert asyncio.run(probe_cfgrom(no_reads, "full")) == DutCapabilities.unknown()
    ours = asyncio.run(probe_cfgrom(no_reads, "full", rtl_cfgrom_values(hw)))
    assert ours.missing(["CDMA", "SDP", "SDP:int16", "PDP", "BDMA"]) == ["CDMA", "BDMA", "SDP:int16"]
