"""Every file `dla` writes goes through the one output writer (dlaio): end to end on real files.

A /dev/full twin (a device node made in tmp_path), a FIFO, a symlink, a directory, and the command's own
inputs as outputs: each refused before any work starts with one line naming the user's path and exit 2,
the thing at the path unchanged. A real compile of the zoo's poolnet gives the loadable and the traces."""
from __future__ import annotations

import hashlib
import os
import stat
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest

from app.cli import main
from regressions.lib.zoo.models import poolnet

ROOT = Path(__file__).resolve().parents[2]
DLA = [sys.executable, "-m", "app.cli"]


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> dict[str, Path]:
    """poolnet compiled for nv_small, an input for it, and its traces (``traces/nv_small/task_*``)."""
    d = tmp_path_factory.mktemp("built")
    onnx.save(poolnet(), d / "poolnet.onnx")
    np.save(d / "x.npy", np.random.default_rng(5).normal(0, 1, (1, 16, 16, 16)).astype(np.float32))
    assert main(["compile", str(d / "poolnet.onnx"), "--config", "nv_small", "-o", str(d / "poolnet.dla"),
                 "--calib-random", "2", "--emit-trace", str(d / "traces"), "--input", str(d / "x.npy")]) == 0
    cfgs = sorted((d / "traces").rglob("*.cfg"))
    dats = sorted((d / "traces").rglob("*.dat"))
    assert cfgs and dats
    return {"dir": d, "model": d / "poolnet.onnx", "x": d / "x.npy", "dla": d / "poolnet.dla",
            "traces": d / "traces", "cfg": cfgs[0], "dat": dats[0]}


@pytest.fixture
def work(built, tmp_path, monkeypatch) -> dict[str, Path]:
    """Private copies of the built files (each test may try to clobber them), cwd = tmp_path."""
    import shutil

    monkeypatch.chdir(tmp_path)
    for name in ("poolnet.onnx", "x.npy", "poolnet.dla"):
        shutil.copy(built["dir"] / name, tmp_path / name)
    shutil.copytree(built["traces"], tmp_path / "traces")
    rel = lambda p: tmp_path / "traces" / p.relative_to(built["traces"])  # noqa: E731
    return {"model": tmp_path / "poolnet.onnx", "x": tmp_path / "x.npy", "dla": tmp_path / "poolnet.dla",
            "traces": tmp_path / "traces", "cfg": rel(built["cfg"]), "dat": rel(built["dat"])}


def dev_full_twin(path: Path) -> Path:
    """A character device like /dev/full (1, 7): what `--output /dev/full` used to turn into a file."""
    if os.geteuid() != 0:
        pytest.skip("making a device node needs root")
    os.mknod(path, stat.S_IFCHR | 0o666, os.makedev(1, 7))
    return path


def is_dev_full_twin(path: Path) -> bool:
    st = os.lstat(path)
    return stat.S_ISCHR(st.st_mode) and st.st_rdev == os.makedev(1, 7)


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def one_line(err: str, *needles: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("dla"), err
    assert "Traceback" not in err
    for n in needles:
        assert n in lines[0], lines[0]
    return lines[0]


def no_temp_files(folder: Path) -> None:
    assert not [p for p in folder.rglob(".*")], list(folder.rglob(".*"))


def run_args(w, *more: str) -> list[str]:
    return ["run", str(w["dla"]), "--input", str(w["x"]), *more]


# ---- dla run --------------------------------------------------------------------------------------------
def test_run_output_onto_a_device_is_refused_before_running(work, tmp_path, capsys):
    dev = dev_full_twin(tmp_path / "full")
    assert main(run_args(work, "--output", str(dev))) == 2
    out, err = capsys.readouterr()
    one_line(err, f"dla: --output {dev}: it is a device, not a regular file")
    assert "Ran " not in out  # refused before the run, not after it
    assert is_dev_full_twin(dev)


def test_run_output_through_a_symlink_writes_its_target(work, tmp_path, capsys):
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "y.npy").write_bytes(b"last run")
    link = tmp_path / "y.npy"
    link.symlink_to("results/y.npy")
    assert main(run_args(work, "--output", str(link))) == 0
    assert link.is_symlink() and os.readlink(link) == "results/y.npy"
    assert np.load(tmp_path / "results" / "y.npy").shape == (1, 16, 4, 4)
    dangling = tmp_path / "z.npy"
    dangling.symlink_to("nowhere/z.npy")  # written through, it would create nowhere/z.npy: refused like cp does
    capsys.readouterr()
    assert main(run_args(work, "--output", str(dangling))) == 2
    one_line(capsys.readouterr().err, f"--output {dangling}: it is a dangling symlink (to nowhere/z.npy)")
    assert not (tmp_path / "nowhere").exists()


def test_run_output_onto_a_fifo_is_refused_without_blocking(work, tmp_path):
    fifo = tmp_path / "y.npy"
    os.mkfifo(fifo)
    # A subprocess with a timeout: opening the FIFO for writing would block forever with no reader.
    proc = subprocess.run([*DLA, *run_args(work, "--output", str(fifo))], capture_output=True, text=True,
                          cwd=ROOT, timeout=300)
    assert proc.returncode == 2
    one_line(proc.stderr, f"dla: --output {fifo}: it is a FIFO, not a regular file")
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


def test_run_output_onto_a_directory_is_refused(work, tmp_path, capsys):
    (tmp_path / "out").mkdir()
    assert main(run_args(work, "--output", str(tmp_path / "out"))) == 2
    one_line(capsys.readouterr().err, "out: it is a directory, not a regular file")


@pytest.mark.parametrize("target", ["dla", "x"])
def test_run_output_onto_its_own_loadable_or_input_is_refused(work, capsys, target):
    before = digest(work[target])
    assert main(run_args(work, "--output", str(work[target]))) == 2
    one_line(capsys.readouterr().err, f"--output {work[target]}: it is an input of this command")
    assert digest(work[target]) == before


def test_run_output_onto_a_hard_link_of_its_input_is_refused(work, tmp_path, capsys):
    os.link(work["x"], tmp_path / "alias.npy")
    before = digest(work["x"])
    assert main(run_args(work, "--output", "alias.npy")) == 2
    one_line(capsys.readouterr().err, "--output alias.npy: it is an input of this command")
    assert digest(work["x"]) == before


def test_run_rawdump_onto_the_folder_holding_the_input_is_refused(work, tmp_path, capsys):
    before = sorted(p.name for p in tmp_path.iterdir())
    assert main(run_args(work, "--rawdump", str(tmp_path))) == 2
    one_line(capsys.readouterr().err, f"--rawdump {tmp_path}: the folder holds", "an input of this command")
    assert sorted(p.name for p in tmp_path.iterdir()) == before


def test_run_rawdump_entry_that_is_a_device_survives(work, tmp_path, capsys):
    dump = tmp_path / "dump"
    dump.mkdir()
    dev = dev_full_twin(dump / "index.json")
    assert main(run_args(work, "--rawdump", str(dump))) == 2
    one_line(capsys.readouterr().err, f"{dump / 'index.json'}: it is a device")
    assert is_dev_full_twin(dev) and [p.name for p in dump.iterdir()] == ["index.json"]


def test_run_output_write_failure_keeps_the_old_file(work, tmp_path, capsys, monkeypatch):
    out = tmp_path / "y.npy"
    out.write_bytes(b"previous results")

    def disk_full(fd):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", disk_full)
    assert main(run_args(work, "--output", str(out))) == 2
    one_line(capsys.readouterr().err, f"dla: cannot write {out}: No space left on device")
    assert out.read_bytes() == b"previous results"
    no_temp_files(tmp_path)


# ---- dla compile -----------------------------------------------------------------------------------------
def test_compile_output_onto_its_model_is_refused(work, capsys):
    before = digest(work["model"])
    assert main(["compile", str(work["model"]), "--config", "nv_small", "-o", str(work["model"]),
                 "--calib-random", "2"]) == 2
    out, err = capsys.readouterr()
    one_line(err, f"dla: -o {work['model']}: it is an input of this command")
    assert "Compiled" not in out
    assert digest(work["model"]) == before


def test_compile_output_onto_its_trace_input_is_refused(work, capsys):
    before = digest(work["x"])
    assert main(["compile", str(work["model"]), "--config", "nv_small", "-o", str(work["x"]), "--calib-random",
                 "2", "--emit-trace", "t", "--input", str(work["x"])]) == 2
    one_line(capsys.readouterr().err, f"-o {work['x']}: it is an input of this command")
    assert digest(work["x"]) == before and not Path("t").exists()


def test_compile_output_onto_a_device_is_refused(work, tmp_path, capsys):
    dev = dev_full_twin(tmp_path / "full")
    assert main(["compile", str(work["model"]), "--config", "nv_small", "-o", str(dev), "--calib-random", "2"]) == 2
    one_line(capsys.readouterr().err, f"-o {dev}: it is a device")
    assert is_dev_full_twin(dev)


def test_compile_emit_trace_into_the_folder_holding_the_model_is_refused(work, tmp_path, capsys):
    before = sorted(p.name for p in tmp_path.iterdir())
    assert main(["compile", str(work["model"]), "--config", "nv_small", "-o", "out.dla", "--calib-random", "2",
                 "--emit-trace", ".", "--input", str(work["x"])]) == 2
    one_line(capsys.readouterr().err, "--emit-trace .: the folder holds")
    assert sorted(p.name for p in tmp_path.iterdir()) == before


def test_compile_dump_passes_written_and_refused_onto_a_file(work, tmp_path, capsys):
    assert main(["compile", str(work["model"]), "--config", "nv_small", "-o", "out.dla", "--calib-random", "2",
                 "--dump-passes", "passes"]) == 0
    dumps = sorted(p.name for p in (tmp_path / "passes").iterdir())
    assert dumps[0] == "00_input.txt" and len(dumps) > 2
    capsys.readouterr()
    assert main(["compile", str(work["model"]), "--config", "nv_small", "-o", "out2.dla", "--calib-random", "2",
                 "--dump-passes", str(work["x"])]) == 2
    one_line(capsys.readouterr().err, f"--dump-passes {work['x']}: it is a regular file, not a folder")
    assert not Path("out2.dla").exists()


# ---- dla trace -------------------------------------------------------------------------------------------
def test_trace_json_onto_a_trace_cfg_is_refused(work, capsys):
    before = digest(work["cfg"])
    assert main(["trace", str(work["traces"]), "--json", str(work["cfg"])]) == 2
    out, err = capsys.readouterr()
    one_line(err, f"--json {work['cfg']}: it is an input of this command")
    assert "PASS" not in out  # refused before any trace ran
    assert digest(work["cfg"]) == before


def test_trace_junit_onto_a_trace_dat_is_refused(work, capsys):
    before = digest(work["dat"])
    assert main(["trace", str(work["traces"]), "--junit", str(work["dat"])]) == 2
    one_line(capsys.readouterr().err, f"--junit {work['dat']}: it is an input of this command")
    assert digest(work["dat"]) == before


def test_trace_reports_onto_a_device_or_a_directory_fail_before_the_run(work, tmp_path, capsys):
    dev = dev_full_twin(tmp_path / "full")
    assert main(["trace", str(work["traces"]), "--json", str(dev)]) == 2
    out, err = capsys.readouterr()
    one_line(err, f"dla trace: --json {dev}: it is a device, not a regular file")
    assert out == "" and is_dev_full_twin(dev)
    (tmp_path / "reports").mkdir()
    assert main(["trace", str(work["traces"]), "--junit", "reports/"]) == 2
    out, err = capsys.readouterr()
    one_line(err, "--junit reports/: it is a directory")
    assert out == ""


def test_trace_reports_through_symlinks(work, tmp_path, capsys):
    (tmp_path / "r").mkdir()
    (tmp_path / "r" / "real.json").write_text("{}")
    (tmp_path / "r" / "real.xml").write_text("<old/>")
    Path("r.json").symlink_to("r/real.json")
    Path("r.xml").symlink_to("r/real.xml")
    assert main(["trace", str(work["traces"]), "--json", "r.json", "--junit", "r.xml"]) == 0
    assert Path("r.json").is_symlink() and '"summary"' in (tmp_path / "r" / "real.json").read_text()
    assert "<testsuite" in (tmp_path / "r" / "real.xml").read_text()


def test_trace_report_that_cannot_be_written_at_the_end(work, tmp_path, capsys, monkeypatch):
    old = tmp_path / "r.json"
    old.write_text("old report")

    def disk_full(fd):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", disk_full)
    assert main(["trace", str(work["traces"]), "--json", str(old)]) == 2
    out, err = capsys.readouterr()
    assert out.strip().splitlines()[-1].endswith("0 failed, 0 skipped")  # the summary is still printed
    one_line(err, f"dla: cannot write report {old}: No space left on device")
    assert old.read_text() == "old report"
    no_temp_files(tmp_path)


# ---- dla run on an NVDLA loadable: --dimg ---------------------------------------------------------------
def test_dimg_folder_holding_the_loadable_and_a_device_entry_are_refused(tmp_path, capsys):
    from tests.app.test_nvdla_cli import _pool_loadable

    x = np.random.default_rng(12).integers(-128, 128, size=(32, 8, 8), dtype=np.int8)
    nvdla = tmp_path / "pool.nvdla"
    nvdla.write_bytes(_pool_loadable(x))
    assert main(["run", str(nvdla), "--config", "nv_small", "--dimg", str(tmp_path)]) == 2
    one_line(capsys.readouterr().err, f"--dimg {tmp_path}: the folder holds")
    out = tmp_path / "dimg"
    out.mkdir()
    dev = dev_full_twin(out / "o_000000.dimg")
    assert main(["run", str(nvdla), "--config", "nv_small", "--dimg", str(out)]) == 2
    one_line(capsys.readouterr().err, "o_000000.dimg: it is a device")
    assert is_dev_full_twin(dev) and [p.name for p in out.iterdir()] == ["o_000000.dimg"]
