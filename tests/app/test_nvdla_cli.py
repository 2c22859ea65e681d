"""`dla run FILE.nvdla --config NAME --dimg DIR`: DIMG output and one-line errors for bad loadables."""
from __future__ import annotations

import hashlib
import struct
from pathlib import Path

import numpy as np
import pytest

from app.cli import main
from regressions.lib.nvdla_loadables import independent_pools, maxpool2
from runtime.nvdla import fbs
from runtime.nvdla.dimg import decode_dimg


@pytest.fixture
def x():
    return np.random.default_rng(11).integers(-128, 128, size=(8, 8, 8), dtype=np.int8)


@pytest.fixture
def nvdla(tmp_path, x) -> Path:
    path = tmp_path / "pool.nvdla"
    path.write_bytes(independent_pools([x]))
    return path


def _one_line(err: str, *needles: str) -> None:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("dla: "), err
    assert "Traceback" not in err
    for n in needles:
        assert n in lines[0], lines[0]


def _pool_loadable(x: np.ndarray) -> bytes:
    from runtime.nvdla import descriptors as d
    from runtime.nvdla.writer import LoadableBuilder
    from regressions.lib.nvdla_loadables import add_output, feature_cube, pack_feature, pool_2x2_op

    c, h, w = x.shape
    b = LoadableBuilder()
    src = b.buffer("src", feature_cube(0, c, h, w).size, pack_feature(x))
    dst = b.buffer("dst", feature_cube(0, c, h // 2, w // 2).size)
    b.op(d.OP_PDP, pool_2x2_op(), d.PdpSurfaceDesc(src_data=feature_cube(src, c, h, w), dst_data=feature_cube(dst, c, h // 2, w // 2)))
    add_output(b, dst, "pool", c, h // 2, w // 2)
    return b.build()


def _x32_dimg_data(y: np.ndarray, line: int, surf: int) -> bytes:
    """What NVDLA's runtime dumps: c, y, x order, element (c, y, x) read at
    (c // 32) * surf + y * line + x * 32 + c % 32 of the buffer, whose real layout has 8-channel atoms."""
    c, h, w = y.shape
    raw = np.zeros(surf * -(-c // 8), dtype=np.int8)
    for ch in range(c):
        raw[(ch // 8) * surf + np.arange(h)[:, None] * line + np.arange(w)[None, :] * 8 + ch % 8] = y[ch]
    return bytes(int(raw[(ch // 32) * surf + yy * line + xx * 32 + ch % 32]) & 0xFF
                 for ch in range(c) for yy in range(h) for xx in range(w))


def test_run_writes_nvdla_dimg(tmp_path, capsys):
    x = np.random.default_rng(12).integers(-128, 128, size=(32, 8, 8), dtype=np.int8)
    path = tmp_path / "pool32.nvdla"
    path.write_bytes(_pool_loadable(x))
    out = tmp_path / "dimg"
    assert main(["run", str(path), "--config", "nv_small", "--dimg", str(out), "--profile"]) == 0
    text = capsys.readouterr().out
    assert "1 operation(s), current descriptors" in text and "PDP 1 (max 1 in flight)" in text
    assert sorted(p.name for p in out.iterdir()) == ["o_000000.dimg"]
    blob = (out / "o_000000.dimg").read_bytes()
    assert f"dimg md5 {hashlib.md5(blob).hexdigest()}" in text
    head = decode_dimg(blob)
    assert blob[:8] == b"DIMG" + struct.pack("<I", 0) and len(blob) == 36 + 32 * 4 * 4
    assert (head["format"], head["width"], head["height"], head["channel"]) == (40, 4, 4, 32)
    assert (head["line_stride"], head["surface_stride"], head["size"]) == (32, 128, 512)
    assert head["data"] == _x32_dimg_data(maxpool2(x), 32, 128)


def test_nvdla_interleave_past_the_buffer_is_refused_native_is_not(nvdla, x, tmp_path, capsys):
    """8 channels on nv_small: NVDLA's 32-channel interleave addresses past the 128-byte buffer, which
    NVDLA's runtime refuses; --dimg-format native dumps the real 8-channel layout."""
    out = tmp_path / "dimg"
    assert main(["run", str(nvdla), "--config", "nv_small", "--dimg", str(out)]) == 2
    _one_line(capsys.readouterr().err, "past the 128-byte buffer", "--dimg-format native")
    assert not out.exists()
    assert main(["run", str(nvdla), "--config", "nv_small", "--dimg", str(out), "--dimg-format", "native"]) == 0
    head = decode_dimg((out / "o_000000.dimg").read_bytes())
    assert head["format"] == 41  # D_F8_CxHWx_x8_I
    assert head["data"] == maxpool2(x).astype(np.int8).tobytes()


@pytest.mark.parametrize("damage, needle", [
    (lambda b: b[:200], "truncated or corrupt"),
    (lambda b: b"\x10" + b[1:], "outside"),
    (lambda b: b"NOTAFLATBUFFER", "too short"),
])
def test_damaged_loadables_are_one_line_errors(nvdla, tmp_path, capsys, damage, needle):
    bad = tmp_path / "bad.nvdla"
    bad.write_bytes(damage(nvdla.read_bytes()))
    out = tmp_path / "dimg"
    assert main(["run", str(bad), "--config", "nv_small", "--dimg", str(out)]) == 2
    _one_line(capsys.readouterr().err, str(bad))
    assert not out.exists()


def test_wrong_schema_version(nvdla, tmp_path, capsys):
    ld = fbs.parse(nvdla.read_bytes())
    ld.version = fbs.Version(0, 6, 0)
    bad = tmp_path / "old.nvdla"
    bad.write_bytes(fbs.build(ld))
    assert main(["run", str(bad), "--config", "nv_small", "--dimg", str(tmp_path / "d")]) == 2
    _one_line(capsys.readouterr().err, "loadable version 0.6.0", "0.7.x")
    assert not (tmp_path / "d").exists()


def test_dangling_address_index(nvdla, tmp_path, capsys):
    ld = fbs.parse(nvdla.read_bytes())
    ld.tasks[0].address_list[6] = 77
    bad = tmp_path / "dangling.nvdla"
    bad.write_bytes(fbs.build(ld))
    assert main(["run", str(bad), "--config", "nv_small", "--dimg", str(tmp_path / "d")]) == 2
    _one_line(capsys.readouterr().err, "address_list[6] = 77 does not exist")


def test_nvdla_options_are_checked(nvdla, tmp_path, capsys):
    assert main(["run", str(nvdla), "--dimg", str(tmp_path / "d")]) == 2
    _one_line(capsys.readouterr().err, "give --config")
    assert main(["run", str(nvdla), "--config", "nv_small", "--input", str(tmp_path / "x.npy")]) == 2
    _one_line(capsys.readouterr().err, "x.npy")  # (inputs are taken: tests/runtime/test_nvdla_export.py)
    assert main(["run", str(tmp_path / "missing.nvdla"), "--config", "nv_small"]) == 2
    _one_line(capsys.readouterr().err, "missing.nvdla")


def test_simulator_options_need_a_simulator_target(nvdla, capsys):
    assert main(["run", str(nvdla), "--config", "nv_small", "--timeout-cycles", "5", "--fallback", "golden"]) == 2
    _one_line(capsys.readouterr().err, "--timeout-cycles, --fallback only apply to --target")
