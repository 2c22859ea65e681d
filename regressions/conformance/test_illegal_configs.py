"""Illegal register configurations, made by altering one register of a real NVDLA trace: the model
must raise ConfigError naming UNIT.REGISTER.FIELD, and `dla trace` must report that trace as ERROR and
go on with the others."""
from __future__ import annotations

import re
import shutil

import pytest

from app.cli import main
from runtime.trace import find_traces


def first_trace(root, prefix: str, needs: str):
    suite = root / "nv_small"
    for cfg in find_traces(suite) if suite.is_dir() else []:
        if cfg.parent.name.startswith(prefix) and needs in cfg.read_text():
            return cfg
    pytest.skip(f"no {prefix}* trace under {suite}")


def altered_copy(tmp_path, cfg, register: str, value: int, name: str):
    dst = tmp_path / "nv_small" / name
    shutil.copytree(cfg.parent, dst)
    text = (dst / f"{cfg.stem}.cfg").read_text()
    new, n = re.subn(rf"(reg_write\({re.escape(register)},\s*)[^)]*\)", rf"\g<1>{value:#x})", text)
    assert n, f"{register} not written by {cfg.name}"
    (dst / f"{cfg.stem}.cfg").unlink()
    (dst / f"{name}.cfg").write_text(new)
    return dst


@pytest.mark.parametrize(
    "register,value,where",
    [
        ("NVDLA_PDP.D_POOLING_KERNEL_CFG_0", 0x808, "PDP.D_POOLING_KERNEL_CFG.KERNEL_WIDTH"),  # 9x9 kernel
        ("NVDLA_PDP_RDMA.D_SRC_LINE_STRIDE_0", 0x0, "PDP_RDMA.D_SRC_LINE_STRIDE.SRC_LINE_STRIDE"),
        ("NVDLA_PDP_RDMA.D_SRC_SURFACE_STRIDE_0", 0x8, "PDP_RDMA.D_SRC_SURFACE_STRIDE.SRC_SURFACE_STRIDE"),
    ],
)
def test_illegal_pdp_config_is_an_error_naming_the_field(traces_root, tmp_path, capsys, register, value, where):
    cfg = first_trace(traces_root, "pdp_", register)
    altered_copy(tmp_path, cfg, register, value, "a_illegal")
    shutil.copytree(cfg.parent, tmp_path / "nv_small" / "b_legal")  # still runs after the error
    rc = main(["trace", str(tmp_path / "nv_small")])
    out = capsys.readouterr().out.splitlines()
    assert rc == 1
    assert out[0].startswith("ERROR a_illegal: ConfigError: ") and where in out[0], out[0]
    assert out[1].startswith("PASS  b_legal")
    assert out[-1] == "1 passed, 1 failed, 0 skipped"


def test_illegal_conv_stride_is_an_error_naming_the_field(traces_root, tmp_path, capsys):
    cfg = first_trace(traces_root, "dc_", "NVDLA_CDMA.D_SURF_STRIDE_0")
    altered_copy(tmp_path, cfg, "NVDLA_CDMA.D_SURF_STRIDE_0", 0x0, "a_illegal")
    assert main(["trace", str(tmp_path / "nv_small")]) == 1
    line = capsys.readouterr().out.splitlines()[0]
    assert line.startswith("ERROR a_illegal: ConfigError: CDMA.D_SURF_STRIDE.SURF_STRIDE"), line
