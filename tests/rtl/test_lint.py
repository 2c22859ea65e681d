"""Our RTL is lint clean under ``verilator --lint-only -Wall`` (documented waivers only), compiles
under Icarus (-g2005), keeps the synthesizable-subset rules, and its top has NVDLA's nv_small
NV_nvdla port list."""
from __future__ import annotations

import json
import re
import shutil

import pytest

from golden.config import PRESETS, get_config
from tb.vectors import sim

VERILATOR = sim.verilator_env()
needs_verilator = pytest.mark.skipif(
    VERILATOR is None or shutil.which("verilator", path=VERILATOR.get("PATH")) is None,
    reason="verilator not available",
)
needs_iverilog = pytest.mark.skipif(shutil.which("iverilog") is None, reason="iverilog not installed")

#: NVDLA nv_small NV_nvdla (vmod/nvdla/top/NV_nvdla.v without the secondary memory port):
#: name -> (direction, width).
NV_SMALL_PORTS = {
    "dla_core_clk": ("INPUT", 1), "dla_csb_clk": ("INPUT", 1), "global_clk_ovr_on": ("INPUT", 1),
    "tmc2slcg_disable_clock_gating": ("INPUT", 1), "dla_reset_rstn": ("INPUT", 1),
    "direct_reset_": ("INPUT", 1), "test_mode": ("INPUT", 1),
    "csb2nvdla_valid": ("INPUT", 1), "csb2nvdla_ready": ("OUTPUT", 1), "csb2nvdla_addr": ("INPUT", 16),
    "csb2nvdla_wdat": ("INPUT", 32), "csb2nvdla_write": ("INPUT", 1), "csb2nvdla_nposted": ("INPUT", 1),
    "nvdla2csb_valid": ("OUTPUT", 1), "nvdla2csb_data": ("OUTPUT", 32), "nvdla2csb_wr_complete": ("OUTPUT", 1),
    "nvdla_core2dbb_aw_awvalid": ("OUTPUT", 1), "nvdla_core2dbb_aw_awready": ("INPUT", 1),
    "nvdla_core2dbb_aw_awid": ("OUTPUT", 8), "nvdla_core2dbb_aw_awlen": ("OUTPUT", 4),
    "nvdla_core2dbb_aw_awaddr": ("OUTPUT", 32),
    "nvdla_core2dbb_w_wvalid": ("OUTPUT", 1), "nvdla_core2dbb_w_wready": ("INPUT", 1),
    "nvdla_core2dbb_w_wdata": ("OUTPUT", 64), "nvdla_core2dbb_w_wstrb": ("OUTPUT", 8),
    "nvdla_core2dbb_w_wlast": ("OUTPUT", 1),
    "nvdla_core2dbb_b_bvalid": ("INPUT", 1), "nvdla_core2dbb_b_bready": ("OUTPUT", 1),
    "nvdla_core2dbb_b_bid": ("INPUT", 8),
    "nvdla_core2dbb_ar_arvalid": ("OUTPUT", 1), "nvdla_core2dbb_ar_arready": ("INPUT", 1),
    "nvdla_core2dbb_ar_arid": ("OUTPUT", 8), "nvdla_core2dbb_ar_arlen": ("OUTPUT", 4),
    "nvdla_core2dbb_ar_araddr": ("OUTPUT", 32),
    "nvdla_core2dbb_r_rvalid": ("INPUT", 1), "nvdla_core2dbb_r_rready": ("OUTPUT", 1),
    "nvdla_core2dbb_r_rid": ("INPUT", 8), "nvdla_core2dbb_r_rlast": ("INPUT", 1),
    "nvdla_core2dbb_r_rdata": ("INPUT", 64),
    "dla_intr": ("OUTPUT", 1),
    **{f"nvdla_pwrbus_ram_{x}_pd": ("INPUT", 32) for x in ("c", "ma", "mb", "p", "o", "a")},
}

LINT_CASES = [(name, {}) for name in sorted(PRESETS)] + [
    ("nv_small", {"DLA_TEST_ENGINE": None}),
    ("nv_small", {"DLA_SDP_PDP_FLYING": None}),
    ("nv_medium_512", {"DLA_TEST_ENGINE": None, "DLA_SDP_PDP_FLYING": None}),
]


def _rtl_files():
    return sorted(p for p in sim.gen.RTL.rglob("*") if p.suffix in (".v", ".vh"))


@needs_verilator
@pytest.mark.parametrize("config,defines", LINT_CASES, ids=lambda x: x if isinstance(x, str) else ",".join(x) or "-")
def test_verilator_lint_wall_clean(tmp_path, config, defines):
    cfg = sim.config_dir(tmp_path, get_config(config))
    result = sim.verilator_lint(cfg, defines, VERILATOR)
    assert result.returncode == 0, result.stderr[-6000:]
    assert "%Warning" not in result.stderr and "%Error" not in result.stderr, result.stderr[-6000:]


@needs_iverilog
@pytest.mark.parametrize("config", ["nv_small", "nv_small_256_full", "nv_medium_512", "nv_full"])
def test_icarus_compiles(tmp_path, config):
    cfg = sim.config_dir(tmp_path, get_config(config))
    for defines in ({}, {"DLA_TEST_ENGINE": None}):
        result, _ = sim.icarus_build(tmp_path, cfg, defines, top=sim.gen.TOPLEVEL)
        assert result.returncode == 0, result.stderr + result.stdout
        assert "warning" not in (result.stderr + result.stdout).lower(), result.stderr + result.stdout


@needs_verilator
def test_top_ports_match_nvdla_nv_small(tmp_path):
    cfg = sim.config_dir(tmp_path, get_config("nv_small"))
    out = tmp_path / "nvdla.json"
    cmd = ["verilator", "--json-only", "--json-only-output", str(out), "--Mdir", str(tmp_path / "obj_dir"),
           "--top-module", sim.gen.TOPLEVEL]
    cmd += sim.include_args("-I", cfg) + [str(p) for p in sim.gen.rtl_sources()]
    result = sim.run(cmd, env=VERILATOR)
    assert result.returncode == 0, result.stderr
    tree = json.loads(out.read_text())
    types: dict[str, dict] = {}

    def collect(node) -> None:  # the data types of the tree, by address
        if isinstance(node, dict):
            if node.get("type") == "TYPETABLE":
                types.update({t["addr"]: t for t in node["typesp"]})
            for value in node.values():
                collect(value)
        elif isinstance(node, list):
            for value in node:
                collect(value)

    collect(tree)
    top = next(m for m in tree["modulesp"] if m.get("name") == sim.gen.TOPLEVEL)
    ports = {}
    for stmt in top["stmtsp"]:
        if stmt.get("type") == "VAR" and stmt.get("direction") in ("INPUT", "OUTPUT", "INOUT"):
            rng = types[stmt["dtypep"]].get("range")
            width = 1 if not rng else int(rng.split(":")[0]) - int(rng.split(":")[1]) + 1
            ports[stmt["name"]] = (stmt["direction"], width)
    assert len(NV_SMALL_PORTS) == 46
    assert ports == NV_SMALL_PORTS


def test_synthesizable_subset_rules():
    """No initial blocks, every clocked process has an asynchronous reset, every lint waiver has a
    reason comment just above it."""
    for path in _rtl_files():
        text = path.read_text()
        code = re.sub(r"//[^\n]*|/\*(?!\s*verilator).*?\*/", "", text, flags=re.S)
        assert not re.search(r"\binitial\b", code), f"{path}: initial block"
        for m in re.finditer(r"always\s*@\s*\(([^)]*)\)", code):
            sens = m.group(1)
            if "posedge" in sens:
                assert "negedge" in sens, f"{path}: clocked process without asynchronous reset: {sens}"
        lines = text.splitlines()
        for i, line in enumerate(lines):
            if "lint_off" in line:
                above = " ".join(lines[max(0, i - 3) : i])
                assert "Waiver" in above, f"{path}:{i + 1}: lint waiver without a reason comment"
