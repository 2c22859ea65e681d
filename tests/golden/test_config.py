"""Presets against NVDLA's spec files: every macro of spec/defs/<name>.spec must match HwConfig."""
from __future__ import annotations

import re

import pytest

from golden.config import NV_FULL, PRESETS, get_config

SPEC_PRESETS = ["nv_small", "nv_small_256", "nv_small_256_full", "nv_medium_512", "nv_medium_1024_full", "nv_large"]

NUMERIC = {
    "MAC_ATOMIC_C_SIZE": "mac_atomic_c",
    "MAC_ATOMIC_K_SIZE": "mac_atomic_k",
    "MEMORY_ATOMIC_SIZE": "memory_atomic_size",
    "CBUF_BANK_NUMBER": "cbuf_bank_number",
    "CBUF_BANK_WIDTH": "cbuf_bank_width",
    "CBUF_BANK_DEPTH": "cbuf_bank_depth",
    "SDP_BS_THROUGHPUT": "sdp_bs_throughput",
    "SDP_BN_THROUGHPUT": "sdp_bn_throughput",
    "SDP_EW_THROUGHPUT": "sdp_ew_throughput",
    "PDP_THROUGHPUT": "pdp_throughput",
    "CDP_THROUGHPUT": "cdp_throughput",
    "PRIMARY_MEMIF_LATENCY": "primary_memif_latency",
    "SECONDARY_MEMIF_LATENCY": "secondary_memif_latency",
    "PRIMARY_MEMIF_MAX_BURST_LENGTH": "primary_memif_max_burst_length",
    "PRIMARY_MEMIF_WIDTH": "primary_memif_width",
    "SECONDARY_MEMIF_MAX_BURST_LENGTH": "secondary_memif_max_burst_length",
    "SECONDARY_MEMIF_WIDTH": "secondary_memif_width",
    "MEM_ADDRESS_WIDTH": "mem_address_width",
    "NUM_DMA_READ_CLIENTS": "num_dma_read_clients",
    "NUM_DMA_WRITE_CLIENTS": "num_dma_write_clients",
    "MAX_BATCH_SIZE": "max_batch",
}
FLAGS = {
    "WEIGHT_COMPRESSION": "weight_compression",
    "WINOGRAD": "winograd",
    "BATCH": "batch",
    "SECONDARY_MEMIF": "secondary_memif",
    "SDP_LUT": "sdp_lut",
    "SDP_BS": "sdp_bs",
    "SDP_BN": "sdp_bn",
    "SDP_EW": "sdp_ew",
    "BDMA": "bdma",
    "RUBIK": "rubik",
    "RUBIK_CONTRACT": "rubik_contract",
    "RUBIK_RESHAPE": "rubik_reshape",
    "PDP": "pdp",
    "CDP": "cdp",
    "RETIMING": "retiming",
}


def parse_spec(text: str) -> dict[str, str]:
    out = {}
    for m in re.finditer(r"^\s*#define\s+(\w+)", text, re.M):
        macro = m.group(1)
        for key in sorted(list(NUMERIC) + [f + "_" for f in FLAGS], key=len, reverse=True):
            if key in NUMERIC and macro.startswith(key + "_"):
                out[key] = macro[len(key) + 1:]
                break
            if key not in NUMERIC and macro in (key + "ENABLE", key + "DISABLE"):
                out[key[:-1]] = macro[len(key):]
                break
    return out


@pytest.mark.parametrize("name", SPEC_PRESETS)
def test_preset_matches_spec_file(spec_root, name):
    spec = parse_spec((spec_root / "defs" / f"{name}.spec").read_text())
    hw = get_config(name)
    for macro, attr in NUMERIC.items():
        raw = spec[macro]
        expected = 0 if raw == "x" else int(raw)
        if macro == "MAX_BATCH_SIZE" and raw == "x":
            expected = 1
        if macro == "SDP_EW_THROUGHPUT" and not hw.sdp_ew:
            expected = 0
        assert getattr(hw, attr) == expected, f"{name}: {macro}={raw} but {attr}={getattr(hw, attr)}"
    for flag, attr in FLAGS.items():
        assert getattr(hw, attr) == (spec[flag] == "ENABLE"), f"{name}: {flag}_{spec[flag]} vs {attr}"


def test_every_preset_is_self_consistent():
    for hw in PRESETS.values():
        assert hw.cbuf_size == hw.cbuf_bank_number * hw.cbuf_bank_width * hw.cbuf_bank_depth
        assert hw.mac_atomic_c % hw.atom_elements() == 0 or hw.atom_elements() % hw.mac_atomic_c == 0
        assert {"CDMA", "SDP", "GLB"} <= hw.units


def test_nv_full_has_every_type_and_unit():
    assert NV_FULL.feature_types == ("int8", "int16", "fp16")
    assert NV_FULL.address_map == "full" and NV_FULL.address_unit == 32
    assert {"BDMA", "RBK", "CVIF", "PDP", "CDP"} <= NV_FULL.units
    assert NV_FULL.atom_elements("int16") == 16 and NV_FULL.mac_atomic_k_for("fp16") == 16


def test_unknown_preset_lists_the_valid_names():
    with pytest.raises(KeyError, match="nv_small"):
        get_config("nv_tiny")
