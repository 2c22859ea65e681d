"""The one output writer, on real files: device nodes, FIFOs, symlinks, folders, inputs, failing writes."""
from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from dlaio import OutputError, check_output, input_files, publish_dir, write_atomic

ROOT = os.geteuid() == 0


def _dev_full_twin(path: Path) -> Path:
    """A character device node like /dev/full (major 1, minor 7): writes to it fail with ENOSPC."""
    if not ROOT:
        pytest.skip("making a device node needs root")
    os.mknod(path, stat.S_IFCHR | 0o666, os.makedev(1, 7))
    return path


def _no_temp_left(folder: Path) -> None:
    assert not [p.name for p in folder.iterdir() if p.name.startswith(".")]


def test_new_file_written_whole(tmp_path):
    out = tmp_path / "sub" / "y.bin"
    assert write_atomic(out, b"abc") == out
    assert out.read_bytes() == b"abc"
    _no_temp_left(out.parent)


def test_text_and_writer_function(tmp_path):
    write_atomic(tmp_path / "a.txt", "héllo")
    write_atomic(tmp_path / "b.bin", lambda f: f.write(b"\x00\x01"))
    assert (tmp_path / "a.txt").read_text() == "héllo"
    assert (tmp_path / "b.bin").read_bytes() == b"\x00\x01"


def test_device_node_survives(tmp_path):
    dev = _dev_full_twin(tmp_path / "full")
    with pytest.raises(OutputError) as err:
        write_atomic(dev, b"data")
    assert str(err.value) == f"cannot write {dev}: it is a device, not a regular file"
    st = os.lstat(dev)
    assert stat.S_ISCHR(st.st_mode) and st.st_rdev == os.makedev(1, 7)
    _no_temp_left(tmp_path)


def test_fifo_refused_without_blocking(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    with pytest.raises(OutputError, match="it is a FIFO"):  # opening it for writing would block forever
        write_atomic(fifo, b"data")
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


def test_socket_refused(tmp_path):
    import socket

    path = tmp_path / "s"
    with socket.socket(socket.AF_UNIX) as s:
        s.bind(str(path))
        with pytest.raises(OutputError, match="it is a socket"):
            check_output(path)


def test_directory_where_a_file_is_expected(tmp_path):
    (tmp_path / "d").mkdir()
    with pytest.raises(OutputError, match="it is a directory, not a regular file"):
        write_atomic(tmp_path / "d", b"x")
    assert (tmp_path / "d").is_dir()


def test_file_where_a_folder_is_expected(tmp_path):
    (tmp_path / "f").write_text("keep")
    with pytest.raises(OutputError, match="it is a regular file, not a folder"):
        publish_dir(tmp_path / "f", {"a.txt": b"x"})
    assert (tmp_path / "f").read_text() == "keep"


def test_symlink_survives_and_its_target_is_written(tmp_path):
    real = tmp_path / "real.bin"
    real.write_bytes(b"old")
    link = tmp_path / "link.bin"
    link.symlink_to(real.name)
    assert write_atomic(link, b"new") == real
    assert link.is_symlink() and os.readlink(link) == real.name
    assert real.read_bytes() == b"new"


def test_dangling_symlink_refused(tmp_path):
    link = tmp_path / "link.bin"
    link.symlink_to("nowhere/made.bin")
    with pytest.raises(OutputError, match=r"link\.bin: it is a dangling symlink \(to nowhere/made\.bin\)"):
        write_atomic(link, b"x")
    assert link.is_symlink() and sorted(p.name for p in tmp_path.iterdir()) == ["link.bin"]


def test_symlink_to_a_device_refused(tmp_path):
    dev = _dev_full_twin(tmp_path / "full")
    link = tmp_path / "out.npy"
    link.symlink_to(dev)
    with pytest.raises(OutputError, match=r"out\.npy: it is a device"):
        write_atomic(link, b"x")
    assert link.is_symlink() and stat.S_ISCHR(os.lstat(dev).st_mode)


def test_symlink_loop_refused(tmp_path):
    (tmp_path / "a").symlink_to("b")
    (tmp_path / "b").symlink_to("a")
    with pytest.raises(OutputError, match="cannot follow the symlink"):
        write_atomic(tmp_path / "a", b"x")


def test_output_that_is_an_input_refused(tmp_path):
    model = tmp_path / "m.onnx"
    model.write_bytes(b"model")
    with pytest.raises(OutputError, match="it is an input of this command; refusing"):
        write_atomic(model, b"loadable", inputs=[model])
    assert model.read_bytes() == b"model"


def test_hard_link_and_symlink_to_an_input_refused(tmp_path):
    x = tmp_path / "x.npy"
    x.write_bytes(b"input")
    os.link(x, tmp_path / "hard.npy")
    (tmp_path / "soft.npy").symlink_to(x)
    for alias in ("hard.npy", "soft.npy"):
        with pytest.raises(OutputError, match=rf"{alias}: it is an input of this command \({x}\)"):
            write_atomic(tmp_path / alias, b"y", inputs=[x])
    assert x.read_bytes() == b"input"


def test_folder_holding_an_input_refused(tmp_path):
    x = tmp_path / "in" / "deep" / "x.npy"
    x.parent.mkdir(parents=True)
    x.write_bytes(b"input")
    with pytest.raises(OutputError, match=r"the folder holds .*x\.npy, an input of this command"):
        publish_dir(tmp_path / "in", {"x.npy": b"clobber"}, inputs=[x])
    assert x.read_bytes() == b"input"
    publish_dir(tmp_path / "elsewhere", {"y.f32": b"ok"}, inputs=[x])  # a folder beside it is fine


def test_missing_inputs_are_ignored(tmp_path):
    write_atomic(tmp_path / "y", b"x", inputs=[tmp_path / "nope", None])


def test_unwritable_parent_refused(tmp_path):
    with pytest.raises(OutputError, match=r"^cannot write /proc/no/such/out\.json: cannot create its folder"):
        write_atomic("/proc/no/such/out.json", b"x")  # even root cannot make folders in /proc
    (tmp_path / "file").write_text("")
    with pytest.raises(OutputError, match="is a regular file, not a folder"):
        check_output(tmp_path / "file" / "out.json")


def test_failing_write_keeps_the_old_file_and_leaves_no_temp(tmp_path):
    out = tmp_path / "report.json"
    out.write_text("old report")

    def half_then_fail(f):
        f.write(b"half")
        raise OSError(28, "No space left on device")

    with pytest.raises(OutputError) as err:
        write_atomic(out, half_then_fail)
    assert str(err.value) == f"cannot write {out}: No space left on device"  # the user's path, not a temp
    assert out.read_text() == "old report"
    _no_temp_left(tmp_path)


def test_non_os_error_of_the_writer_propagates_and_cleans_up(tmp_path):
    def broken(f):
        raise ValueError("bad data")

    with pytest.raises(ValueError):
        write_atomic(tmp_path / "y", broken)
    assert list(tmp_path.iterdir()) == []


def test_existing_mode_is_kept(tmp_path):
    out = tmp_path / "y"
    out.write_bytes(b"old")
    out.chmod(0o640)
    write_atomic(out, b"new")
    assert stat.S_IMODE(out.stat().st_mode) == 0o640
    fresh = tmp_path / "fresh"
    write_atomic(fresh, b"x")
    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE(fresh.stat().st_mode) == 0o666 & ~umask  # as open() would, not mkstemp's 0o600


def test_publish_new_folder_at_once(tmp_path):
    out = tmp_path / "dump"
    assert publish_dir(out, {"a.f32": b"1", "index.json": b"{}"}) == out
    assert sorted(p.name for p in out.iterdir()) == ["a.f32", "index.json"]
    _no_temp_left(tmp_path)


def test_publish_into_existing_folder_replaces_entries_only(tmp_path):
    out = tmp_path / "traces"
    (out / "nv_small" / "task_old").mkdir(parents=True)
    (out / "keep.txt").write_text("mine")

    def fill(stage: Path) -> None:
        (stage / "nv_small" / "task_new").mkdir(parents=True)
        (stage / "nv_small" / "task_new" / "t.cfg").write_text("cfg")

    publish_dir(out, fill)
    assert [p.name for p in (out / "nv_small").iterdir()] == ["task_new"]  # the sub-folder replaced whole
    assert (out / "keep.txt").read_text() == "mine"
    _no_temp_left(out)


def test_publish_refuses_a_device_inside_the_folder_before_moving_anything(tmp_path):
    out = tmp_path / "dimg"
    out.mkdir()
    dev = _dev_full_twin(out / "o_000001.dimg")
    with pytest.raises(OutputError, match=r"o_000001\.dimg: it is a device"):
        publish_dir(out, {"o_000000.dimg": b"a", "o_000001.dimg": b"b"})
    assert not (out / "o_000000.dimg").exists()
    assert stat.S_ISCHR(os.lstat(dev).st_mode)
    _no_temp_left(out)


def test_publish_through_a_symlink_to_a_folder(tmp_path):
    real = tmp_path / "real"
    real.mkdir()
    link = tmp_path / "link"
    link.symlink_to(real)
    publish_dir(link, {"a": b"1"})
    assert link.is_symlink() and (real / "a").read_bytes() == b"1"


def test_input_files_lists_folders(tmp_path):
    (tmp_path / "t" / "sub").mkdir(parents=True)
    (tmp_path / "t" / "a.cfg").write_text("")
    (tmp_path / "t" / "sub" / "b.dat").write_text("")
    assert sorted(p.name for p in input_files([tmp_path / "t"])) == ["a.cfg", "b.dat"]


def test_publish_refuses_an_entry_that_is_a_hard_link_of_an_input(tmp_path):
    x = tmp_path / "x.npy"
    x.write_bytes(b"input")
    out = tmp_path / "dump"
    out.mkdir()
    os.link(x, out / "a.f32")
    with pytest.raises(OutputError, match=r"a\.f32: it is an input of this command"):
        publish_dir(out, {"a.f32": b"clobber"}, inputs=(p for p in [x]))  # a one-shot iterable is enough
    assert x.read_bytes() == b"input"
