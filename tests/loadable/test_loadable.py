"""The loadable container: header checks, atomic writes and semantic validation, each error one line
naming the file."""
from __future__ import annotations

import struct
import zlib
from pathlib import Path
from typing import Callable

import pytest

from dlaio import OutputError
from loadable import loadable_pb2 as pb
from loadable.format import (
    HEADER, LOADABLE_VERSION, MAGIC, LoadableError, encode_loadable, read_loadable, write_loadable,
)
from tests.runtime.test_executor import pool_loadable, sdp_loadable


def read_error(path: Path) -> str:
    with pytest.raises(LoadableError) as err:
        read_loadable(path)
    text = str(err.value)
    assert "\n" not in text and text.startswith(f"{path}: ")
    return err.value.msg


def test_round_trip_sets_version_and_header(tmp_path):
    path = tmp_path / "net.dla"
    msg = pool_loadable()
    write_loadable(path, msg)
    raw = path.read_bytes()
    magic, major, length, crc = HEADER.unpack_from(raw)
    assert (magic, major, length) == (MAGIC, LOADABLE_VERSION[0], len(raw) - HEADER.size)
    assert crc == zlib.crc32(raw[HEADER.size:])
    back = read_loadable(path)
    assert (back.version_major, back.version_minor) == LOADABLE_VERSION
    msg.version_major, msg.version_minor = LOADABLE_VERSION
    assert back == msg
    assert [p.name for p in tmp_path.iterdir()] == ["net.dla"]  # no temp file left


def test_invalid_message_is_not_written_and_the_old_file_survives(tmp_path):
    path = tmp_path / "net.dla"
    write_loadable(path, sdp_loadable())
    before = path.read_bytes()
    bad = sdp_loadable()
    bad.hw_config = "nv_tiny"
    with pytest.raises(LoadableError, match="unknown hardware config 'nv_tiny'"):
        write_loadable(path, bad)
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["net.dla"]


def test_write_creates_a_missing_directory_and_refuses_one_that_cannot_be(tmp_path):
    write_loadable(tmp_path / "new" / "net.dla", sdp_loadable())
    assert [p.name for p in (tmp_path / "new").iterdir()] == ["net.dla"]
    (tmp_path / "file").write_text("")
    with pytest.raises(OutputError, match=r"file/net\.dla: .*is a regular file, not a folder"):
        write_loadable(tmp_path / "file" / "net.dla", sdp_loadable())
    assert (tmp_path / "file").read_text() == ""


@pytest.fixture
def good(tmp_path) -> Path:
    path = tmp_path / "net.dla"
    write_loadable(path, pool_loadable())
    return path


def test_missing_file(tmp_path):
    assert read_error(tmp_path / "absent.dla") == "no such file"


def test_directory_is_not_a_loadable(tmp_path):
    assert "is a directory" in read_error(tmp_path)


def test_bad_magic(good):
    raw = bytearray(good.read_bytes())
    raw[0] ^= 0xFF
    good.write_bytes(bytes(raw))
    assert read_error(good) == "not a loadable (bad magic)"


def test_onnx_file_is_not_a_loadable(tmp_path):
    path = tmp_path / "model.onnx"
    path.write_bytes(b"\x08\x07\x12\x07pytorch")
    assert read_error(path) == "not a loadable (bad magic)"


def test_other_major_version(good):
    raw = bytearray(good.read_bytes())
    struct.pack_into("<I", raw, 8, LOADABLE_VERSION[0] + 1)
    good.write_bytes(bytes(raw))
    msg = read_error(good)
    assert msg.startswith(f"loadable format version {LOADABLE_VERSION[0] + 1}, this runtime reads version 1")


def test_truncated_by_one_byte(good):
    good.write_bytes(good.read_bytes()[:-1])
    assert read_error(good).startswith("truncated: header says")


def test_truncated_inside_the_header(good):
    good.write_bytes(good.read_bytes()[:10])
    assert read_error(good).startswith("truncated: 10 bytes")


def test_trailing_bytes(good):
    good.write_bytes(good.read_bytes() + b"\0")
    assert read_error(good).startswith("trailing bytes")


def test_flipped_payload_byte_fails_the_crc(good):
    raw = bytearray(good.read_bytes())
    raw[HEADER.size + 20] ^= 0x01
    good.write_bytes(bytes(raw))
    assert read_error(good).startswith("corrupted: payload crc")


def test_payload_that_is_not_protobuf(tmp_path):
    payload = b"\xff\xff\xff\xff"
    path = tmp_path / "garbage.dla"
    path.write_bytes(HEADER.pack(MAGIC, LOADABLE_VERSION[0], len(payload), zlib.crc32(payload)) + payload)
    assert read_error(path).startswith("cannot decode the loadable")


def test_payload_version_disagrees_with_header(tmp_path):
    msg = pool_loadable()
    msg.version_major = 7
    payload = msg.SerializeToString()
    path = tmp_path / "mixed.dla"
    path.write_bytes(HEADER.pack(MAGIC, LOADABLE_VERSION[0], len(payload), zlib.crc32(payload)) + payload)
    assert read_error(path) == "header version 1 but payload version 7"


def _op(msg: pb.Loadable, task: int = 0) -> pb.DlaOp:
    return msg.tasks[task].dla.ops[0]


def _reloc_write(msg: pb.Loadable) -> pb.RegWrite:
    return next(w for w in _op(msg).writes if w.HasField("reloc"))


#: (mutation of the pool loadable, expected message)
SEMANTIC_CASES: list[tuple[str, Callable[[pb.Loadable], None], str]] = [
    ("unknown config", lambda m: setattr(m, "hw_config", "nv_huge"), "unknown hardware config 'nv_huge'"),
    ("duplicate region", lambda m: setattr(m.regions[1], "id", 0), "region id 0 ('scratch') is used twice"),
    ("tensor region", lambda m: setattr(m.tensors[1], "region", 9), "tensor 'p1': region 9 does not exist"),
    ("tensor outside", lambda m: setattr(m.tensors[2], "offset", 8),
     "tensor 'y': ends at byte 72 of region 2 ('output'), whose size is 64"),
    ("tensor too big", lambda m: setattr(m.tensors[0], "surface_stride", 600),
     "tensor 'x': ends at byte 1200 of region 0 ('input'), whose size is 1024"),
    ("bad fold", lambda m: m.tensors[0].shape.__setitem__(3, 9),
     "tensor 'x': shape (1, 12, 8, 9) does not fold to the cube 12x8x8"),
    ("zero scale", lambda m: setattr(m.tensors[0], "scale", 0.0), "tensor 'x': scale 0.0 must be > 0"),
    ("line stride", lambda m: setattr(m.tensors[0], "line_stride", 8),
     "tensor 'x': line stride 8 is below a line of 64 bytes"),
    ("duplicate tensor", lambda m: setattr(m.tensors[1], "name", "x"), "tensor 'x' is defined twice"),
    ("reloc region", lambda m: setattr(_reloc_write(m).reloc, "region", 42),
     "task 0 ('pool1') op 'pool1': NVDLA_PDP_RDMA.D_SRC_BASE_ADDR_LOW_0 relocates against region 42, "
     "which does not exist"),
    ("reloc offset", lambda m: setattr(_reloc_write(m).reloc, "offset", 1024),
     "task 0 ('pool1') op 'pool1': NVDLA_PDP_RDMA.D_SRC_BASE_ADDR_LOW_0 points at offset 1024 of region 0 "
     "('input'), whose size is 1024"),
    ("forward dep", lambda m: m.tasks[0].deps.append(1),
     "task 0 ('pool1'): depends on task 1, which does not come before it"),
    ("self dep", lambda m: m.tasks[1].deps.append(1),
     "task 1 ('pool2'): depends on task 1, which does not come before it"),
    ("duplicate task", lambda m: setattr(m.tasks[2], "id", 0), "task 0 ('softmax'): id used twice"),
    ("cpu input", lambda m: m.tasks[2].cpu.inputs.append("nope"),
     "task 2 ('softmax'): tensor 'nope' does not exist"),
    ("op input", lambda m: _op(m, 1).inputs.append("ghost"), "task 1 ('pool2') op 'pool2': tensor 'ghost' does not exist"),
    ("network input", lambda m: m.inputs.append("z"), "network input: tensor 'z' does not exist"),
    ("network output", lambda m: m.outputs.append("w"), "network output: tensor 'w' does not exist"),
    ("no inputs", lambda m: m.ClearField("inputs"), "no network inputs"),
    ("bad register", lambda m: setattr(_op(m).writes[3], "addr", 0xFFFF0),
     "task 0 ('pool1') op 'pool1': no register at CSB address 0xffff0"),
    ("no interrupt", lambda m: setattr(_op(m), "interrupt_mask", 0),
     "task 0 ('pool1') op 'pool1': no interrupt_mask, so its completion cannot be awaited"),
    ("content on scratch", lambda m: setattr(m.regions[1], "content", b"\1"),
     "region 1 ('scratch'): only WEIGHTS regions carry content"),
    ("alignment", lambda m: setattr(m.regions[1], "alignment", 48), "region 1 ('scratch'): alignment 48 is not a power"),
    ("empty task", lambda m: m.tasks.add(id=9, name="void"), "task 9 ('void'): neither a DLA nor a CPU task"),
]


@pytest.mark.parametrize("mutate, expected", [c[1:] for c in SEMANTIC_CASES], ids=[c[0] for c in SEMANTIC_CASES])
def test_semantic_validation(tmp_path, mutate, expected):
    msg = pool_loadable()
    mutate(msg)
    path = tmp_path / "bad.dla"
    write_loadable(path, msg, validate=False)
    assert read_error(path).startswith(expected)


def test_weights_content_longer_than_region(tmp_path):
    msg = sdp_loadable()
    msg.regions[0].size = 4
    path = tmp_path / "w.dla"
    path.write_bytes(encode_loadable(msg))
    assert read_error(path) == "region 5 ('weights'): content of 32 bytes exceeds its size 4"
