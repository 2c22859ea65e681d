"""tools/gen_rtl_headers.py: the committed generated RTL files are current, the register macros
match golden.regs, and the per-build config header carries every preset's sizes and CFGROM."""
from __future__ import annotations

import re

import pytest

from golden.config import PRESETS, get_config
from golden.dla import cfgrom_values
from golden.regs import UNIT_BASES, UNITS
from tb import rtl_headers as gen

_DEFINE = re.compile(r"^`define[ \t]+(\w+)(?:[ \t]+(.*?))?[ \t]*$", re.M)


def defines(text: str) -> dict[str, str]:
    return {m.group(1): (m.group(2) or "") for m in _DEFINE.finditer(text)}


def verilog_int(literal: str) -> int:
    m = re.fullmatch(r"(?:(\d+)')?([hdb])?([0-9a-fA-F_]+)", literal.strip())
    assert m, literal
    base = {"h": 16, "d": 10, "b": 2, None: 10}[m.group(2)]
    return int(m.group(3).replace("_", ""), base)


def test_committed_generated_files_are_current():
    for name, text in gen.generated_files().items():
        path = gen.GENERATED / name
        assert path.exists(), f"{path} missing: run python tools/gen_rtl_headers.py"
        assert path.read_text() == text, f"{path} is stale: run python tools/gen_rtl_headers.py"
    assert gen.main(["--check"]) == 0


def test_register_macros_match_golden_regs():
    d = defines((gen.GENERATED / gen.REGS_HEADER).read_text())
    assert d["NVDLA_PDP_D_POOLING_KERNEL_CFG_OFFSET"] == "12'h034"
    assert d["NVDLA_PDP_D_POOLING_KERNEL_CFG_KERNEL_WIDTH_LSB"] == "0"
    for uname, unit in UNITS.items():
        for kind, bases in UNIT_BASES.items():
            if uname in bases:
                assert verilog_int(d[f"NVDLA_{uname}_BASE_{kind.upper()}"]) == bases[uname]
        for reg in unit.registers:
            m = f"NVDLA_{uname}_{reg.name}"
            assert verilog_int(d[f"{m}_OFFSET"]) == reg.offset
            assert verilog_int(d[f"{m}_WORD"]) == reg.offset // 4
            assert verilog_int(d[f"{m}_RESET"]) == reg.reset
            assert verilog_int(d[f"{m}_MASK"]) == reg.read_mask
            for kind, bases in UNIT_BASES.items():
                if uname in bases:
                    assert verilog_int(d[f"{m}_ADDR_{kind.upper()}"]) == bases[uname] + reg.offset
            for f in reg.fields:
                assert int(d[f"{m}_{f.name}_LSB"]) == f.lsb
                assert int(d[f"{m}_{f.name}_MSB"]) == f.msb
                assert int(d[f"{m}_{f.name}_WIDTH"]) == f.width
                word = reg.offset // 4
                assert d[f"{m}_{f.name}_VEC"] == f"{32 * word + f.msb}:{32 * word + f.lsb}"
                for item, value in f.enum.items():
                    assert verilog_int(d[f"{m}_{f.name}_{item}"]) == value
    assert d["NVDLA_DONE_BIT_PDP"] == "4" and d["NVDLA_DONE_BIT_SDP"] == "0"


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_config_header_of_every_preset(name):
    hw = get_config(name)
    d = defines(gen.render_config_defines(hw))
    assert d["DLA_CONFIG_NAME"] == f'"{name}"'
    assert int(d["DLA_MEMIF_WIDTH"]) == hw.primary_memif_width
    assert int(d["DLA_MEMIF_BYTES"]) == hw.primary_memif_width // 8
    assert 1 << int(d["DLA_MEMIF_BYTES_LOG2"]) == hw.primary_memif_width // 8
    assert int(d["DLA_MEM_ADDR_WIDTH"]) == hw.mem_address_width
    assert int(d["DLA_ATOM_BYTES"]) == hw.memory_atomic_size
    assert int(d["DLA_MAC_ATOMIC_C"]) == hw.mac_atomic_c
    assert int(d["DLA_MAC_ATOMIC_K"]) == hw.mac_atomic_k
    assert 1 <= int(d["DLA_AXI_MAX_BURST"]) <= 16
    assert f"DLA_ADDRESS_MAP_{hw.address_map.upper()}" in d
    bases = UNIT_BASES[hw.address_map]
    has = {k[len("DLA_HAS_"):] for k in d if k.startswith("DLA_HAS_")}
    assert has == {u for u in hw.units if u in bases}
    for unit in has:
        assert verilog_int(d[f"DLA_{unit}_BASE"]) == bases[unit]
        assert verilog_int(d[f"DLA_{unit}_UNIT_ID"]) == bases[unit] >> 12
    engines = {k[len("DLA_ENGINE_"):] for k in d if k.startswith("DLA_ENGINE_")}
    assert engines == {"SDP"} | ({"PDP"} if hw.pdp else set())
    if "CFGROM" in has:
        rom = gen.rtl_cfgrom_values(hw)
        for reg in UNITS["CFGROM"].registers:
            assert verilog_int(d[f"DLA_{reg.name}"]) == rom[reg.name]


def test_cfgrom_advertises_only_what_the_rtl_implements():
    hw = get_config("nv_small")
    golden, rtl = cfgrom_values(hw), gen.rtl_cfgrom_values(hw)
    differs = {name for name in golden if golden[name] != rtl[name]}
    assert differs == {f"CFGROM_{b}_DESC" for b in ("CDMA", "CBUF", "CSC", "CMAC_A", "CMAC_B", "CACC", "CDP_RDMA", "CDP")} | {
        "CFGROM_PDP_CAP_INCOMPAT"}  # our PDP takes no on-the-fly input from SDP
    for block in ("GLB", "CIF", "SDP", "SDP_RDMA", "PDP", "PDP_RDMA"):
        assert rtl[f"CFGROM_{block}_DESC"] != 0


def test_cfgrom_advertises_int8_only_on_a_config_with_int16_and_fp16():
    """Our SDP and PDP compute int8 only; nv_full has int16 and fp16 (its map has no CFGROM, but the words
    are what our RTL declares to the testbench)."""
    hw = get_config("nv_full")
    assert cfgrom_values(hw)["CFGROM_SDP_BASE_FEATURE_TYPES"] == 0x130
    rom = gen.rtl_cfgrom_values(hw)
    assert rom["CFGROM_SDP_BASE_FEATURE_TYPES"] == rom["CFGROM_PDP_BASE_FEATURE_TYPES"] == 0x10


def test_cfgrom_does_not_advertise_sdp_ew_or_lut():
    """Our SDP has no Y (EW) stage or LUT yet, even where the config has them."""
    hw = get_config("nv_small_256_full")
    assert cfgrom_values(hw)["CFGROM_SDP_CAP_COMPAT"] & 0x60 == 0x60
    assert gen.rtl_cfgrom_values(hw)["CFGROM_SDP_CAP_COMPAT"] & 0x60 == 0


def test_cli_writes_the_config_header(tmp_path):
    assert gen.main(["--config", "nv_small", "--out", str(tmp_path)]) == 0
    text = (tmp_path / gen.CONFIG_HEADER).read_text()
    assert text == gen.render_config_defines(get_config("nv_small"))
    assert "`define DLA_MEMIF_WIDTH 64" in text
