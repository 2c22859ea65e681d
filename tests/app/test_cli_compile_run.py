"""`dla compile`, `dla run`, `dla inspect`: outputs, exit codes, one-line errors, no partial files.

The compiler is replaced by a stub ``compiler.driver`` returning hand-built loadables, so these tests
check the CLI and the runtime, not the compiler."""
from __future__ import annotations

import subprocess
import sys
import types
from pathlib import Path

import numpy as np
import pytest

from app.cli import main
from compiler.errors import CompileError
from loadable.format import read_loadable, write_loadable
from runtime import cpu_ops
from tests.runtime.test_executor import (
    STUB_KERNELS,
    C,
    H,
    W,
    expected_pool,
    expected_sdp,
    pool_loadable,
    sdp_loadable,
)

ROOT = Path(__file__).resolve().parents[2]


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "app.cli", *args], capture_output=True, text=True, cwd=ROOT)


def one_line_error(err: str, start: str) -> None:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(start), err
    assert "Traceback" not in err


@pytest.fixture
def stub_compiler(monkeypatch):
    """A ``compiler.driver`` whose compile_model records its arguments and returns a chosen loadable."""
    calls: list[dict] = []
    module = types.ModuleType("compiler.driver")
    module.result = pool_loadable  # type: ignore[attr-defined]

    def compile_model(model, *, weights, config, calib_images=None, calib_random=None, calib_table=None,
                      quant="per-filter", calib_method="minmax", dump_passes=None, log=print,
                      progress=lambda step: None, quant_report=None, calibration=None, precision=None):
        calls.append(dict(model=model, weights=weights, config=config, calib_images=calib_images,
                          calib_random=calib_random, calib_table=calib_table, quant=quant, dump_passes=dump_passes,
                          calib_method=calib_method, quant_report=quant_report,
                          **({"precision": precision} if precision is not None else {})))
        log("stub: compiling")
        result = module.result()  # type: ignore[attr-defined]
        if isinstance(result, Exception):
            raise result
        return result

    module.compile_model = compile_model  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "compiler.driver", module)
    monkeypatch.setattr(cpu_ops, "default_kernels", lambda: STUB_KERNELS)
    module.calls = calls  # type: ignore[attr-defined]
    return module


@pytest.fixture
def model(tmp_path) -> Path:
    path = tmp_path / "net.onnx"
    path.write_bytes(b"onnx")
    return path


@pytest.fixture
def x_npy(tmp_path) -> Path:
    path = tmp_path / "x.npy"
    np.save(path, np.random.default_rng(3).normal(0, 2, (2, C, H, W)).astype(np.float32))
    return path


def listing(d: Path) -> list[str]:
    return sorted(str(p.relative_to(d)) for p in d.rglob("*"))


# ---- compile -------------------------------------------------------------------------------------------
def test_compile_writes_loadable_and_prints_summary(stub_compiler, model, tmp_path, capsys):
    out = tmp_path / "net.dla"
    rc = main(["compile", str(model), "--config", "nv_small", "-o", str(out), "--calib-random", "4",
               "--quant", "per-kernel", "--calib-method", "percentile", "--dump-passes", str(tmp_path / "passes")])
    text = capsys.readouterr().out
    assert rc == 0
    assert stub_compiler.calls == [dict(model=model, weights=None, config="nv_small", calib_images=None,
                                        calib_random=4, calib_table=None, quant="per-kernel",
                                        dump_passes=tmp_path / "passes", calib_method="percentile",
                                        quant_report=None)]
    assert read_loadable(out).model_name == "pools"
    summary = " ".join(text.split())
    assert "stub: compiling" in text
    assert ("3 tasks (2 DLA, 1 CPU), 2 DLA operations (88 register writes) and 1 CPU operation (Softmax); "
            "0 weight bytes; activations 256 bytes planned peak vs 256 unshared") in summary
    assert f"Wrote {out}." in summary


def test_compile_passes_the_precision_and_its_nvdla_alias(stub_compiler, model, tmp_path):
    for option in ("--precision", "--cprecision"):
        assert main(["compile", str(model), "--config", "nv_full", "-o", str(tmp_path / "n.dla"), option, "fp16"]) == 0
        assert stub_compiler.calls[-1]["precision"] == "fp16"


def test_fp16_with_calibration_options_is_one_line_exit_2(stub_compiler, model, tmp_path, capsys):
    out = tmp_path / "n.dla"
    rc = main(["compile", str(model), "--config", "nv_full", "-o", str(out), "--precision", "fp16",
               "--calib-random", "4"])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and not out.exists() and not stub_compiler.calls
    assert err == "dla: --calib-random: an fp16 network is not calibrated (drop it, or --precision int8)"


def test_compile_with_emit_trace_then_dla_trace_passes(stub_compiler, model, tmp_path, x_npy, capsys):
    out, traces = tmp_path / "net.dla", tmp_path / "traces"
    rc = main(["compile", str(model), "--config", "nv_small", "-o", str(out), "--emit-trace", str(traces),
               "--input", str(x_npy)])
    assert rc == 0 and out.is_file()
    assert "Wrote 2 traces to" in capsys.readouterr().out
    assert main(["trace", str(traces), "-q"]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "2 passed, 0 failed, 0 skipped"


def test_compile_error_is_one_line_and_writes_nothing(stub_compiler, model, tmp_path, x_npy, capsys):
    stub_compiler.result = lambda: CompileError(f"{model}: layer 'fc9' (Gemm)", "weights are missing")
    out = tmp_path / "net.dla"
    rc = main(["compile", str(model), "--config", "nv_small", "-o", str(out), "--emit-trace",
               str(tmp_path / "tr"), "--input", str(x_npy)])
    err = capsys.readouterr().err
    assert rc == 2
    one_line_error(err, f"dla: {model}: layer 'fc9' (Gemm): weights are missing")
    assert listing(tmp_path) == ["net.onnx", "x.npy"]


def test_compile_failing_trace_leaves_no_loadable_and_no_traces(stub_compiler, model, tmp_path, capsys):
    bad = tmp_path / "wrong.npy"
    np.save(bad, np.zeros((1, 3, 8, 8), dtype=np.float32))
    rc = main(["compile", str(model), "--config", "nv_small", "-o", str(tmp_path / "net.dla"), "--emit-trace",
               str(tmp_path / "tr"), "--input", str(bad)])
    assert rc == 2
    one_line_error(capsys.readouterr().err, "dla: input 'x': expected shape (N, 12, 8, 8), got (1, 3, 8, 8)")
    assert listing(tmp_path) == ["net.onnx", "wrong.npy"]


def test_compiler_output_that_fails_validation_is_not_written(stub_compiler, model, tmp_path, capsys):
    """An invalid loadable from the compiler is the compiler's bug (exit 1, asks for a report), not a
    problem with the user's model or with the output path, which is never named."""
    def broken():
        msg = pool_loadable()
        msg.tensors[0].region = 77
        return msg

    stub_compiler.result = broken
    out = tmp_path / "net.dla"
    assert main(["compile", str(model), "--config", "nv_small", "-o", str(out)]) == 1
    err = capsys.readouterr().err
    one_line_error(err, "dla: internal error CompilerBug: the compiler produced an invalid loadable: tensor 'x': "
                        "region 77 does not exist - please report it at ")
    assert str(out) not in err and err.rstrip().endswith("(DLA_DEBUG=1 for the traceback)")
    assert not out.exists()


@pytest.mark.parametrize("extra, message", [
    (["--emit-trace", "T"], "dla: --emit-trace needs --input X.npy"),
    (["--input", "x.npy"], "dla: --input is only used with --emit-trace"),
    (["--weights", "missing.caffemodel"], "dla: missing.caffemodel: no such file or directory"),
    (["--calib-random", "0"], "dla: --calib-random 0: needs a positive number of samples"),
])
def test_compile_argument_errors(stub_compiler, model, tmp_path, capsys, monkeypatch, extra, message):
    monkeypatch.chdir(tmp_path)
    assert main(["compile", str(model), "--config", "nv_small", "-o", "o.dla", *extra]) == 2
    one_line_error(capsys.readouterr().err, message)
    assert not (tmp_path / "o.dla").exists() and not (tmp_path / "T").exists()


def test_compile_missing_model_is_exit_2_without_traceback(tmp_path):
    p = run_cli("compile", str(tmp_path / "none.onnx"), "--config", "nv_small", "-o", str(tmp_path / "o.dla"))
    assert p.returncode == 2
    one_line_error(p.stderr, f"dla: {tmp_path / 'none.onnx'}: no such file or directory")
    assert not (tmp_path / "o.dla").exists()


def test_compile_bad_trace_input_fails_before_compiling(stub_compiler, model, tmp_path, capsys):
    txt = tmp_path / "x.npy"
    txt.write_text("not numpy")
    rc = main(["compile", str(model), "--config", "nv_small", "-o", str(tmp_path / "o.dla"), "--emit-trace",
               str(tmp_path / "tr"), "--input", str(txt)])
    assert rc == 2 and stub_compiler.calls == []
    one_line_error(capsys.readouterr().err, f"dla: {txt}: not a .npy/.npz array")


# ---- run -------------------------------------------------------------------------------------------------
@pytest.fixture
def sdp_file(tmp_path) -> Path:
    path = tmp_path / "sdp.dla"
    write_loadable(path, sdp_loadable())
    return path


@pytest.fixture
def pool_file(tmp_path) -> Path:
    path = tmp_path / "pools.dla"
    write_loadable(path, pool_loadable())
    return path


def test_run_single_output_to_npy_with_topk(sdp_file, tmp_path, capsys):
    x = np.random.default_rng(5).normal(0, 2, (2, C, 4, 4)).astype(np.float32)
    np.save(tmp_path / "in.npy", x)
    out = tmp_path / "sub" / "y.npy"
    rc = main(["run", str(sdp_file), "--input", str(tmp_path / "in.npy"), "--output", str(out), "--topk", "3"])
    text = capsys.readouterr().out.splitlines()
    assert rc == 0
    y = np.load(out)
    expected = expected_sdp(x)
    assert y.dtype == np.float32 and y.shape == (2, C, 4, 4)
    np.testing.assert_array_equal(y, expected)
    assert text[0].startswith(f"Ran {sdp_file} on golden: 2 samples, 1 task in ")
    flat = expected.reshape(2, -1)
    best = np.argsort(-flat[0], kind="stable")[:3]
    assert text[2] == "out[0] top-3: " + ", ".join(f"{j} ({flat[0, j]:.4f})" for j in best)
    assert text[3].startswith("out[1] top-3: ")
    assert [p.name for p in out.parent.iterdir()] == ["y.npy"]


def test_run_several_outputs_to_npz(pool_file, stub_compiler, x_npy, tmp_path, capsys):
    out = tmp_path / "y.npz"
    assert main(["run", str(pool_file), "--input", f"x={x_npy}", "--output", str(out)]) == 0
    y, prob = expected_pool(np.load(x_npy))
    with np.load(out) as z:
        assert sorted(z.files) == ["prob", "y"]
        np.testing.assert_array_equal(z["y"], y)
        np.testing.assert_allclose(z["prob"], prob, rtol=1e-6)


def test_run_several_outputs_refuses_npy_before_running(pool_file, stub_compiler, x_npy, tmp_path, capsys):
    out = tmp_path / "y.npy"
    assert main(["run", str(pool_file), "--input", str(x_npy), "--output", str(out)]) == 2
    one_line_error(capsys.readouterr().err, f"dla: --output {out}: the network has 2 outputs (y, prob); name a .npz")
    assert not out.exists()


@pytest.mark.parametrize("case", ["missing_loadable", "corrupt_loadable", "bad_npy", "missing_npy", "wrong_shape",
                                  "unknown_name", "two_for_one"])
def test_run_errors_are_one_line_exit_2_and_write_nothing(case, pool_file, stub_compiler, x_npy, tmp_path, capsys):
    loadable, inputs = str(pool_file), ["--input", str(x_npy)]
    expected = ""
    if case == "missing_loadable":
        loadable = str(tmp_path / "none.dla")
        expected = f"dla: {loadable}: no such file"
    elif case == "corrupt_loadable":
        pool_file.write_bytes(pool_file.read_bytes()[:-1])
        expected = f"dla: {pool_file}: truncated"
    elif case == "bad_npy":
        (tmp_path / "bad.npy").write_text("hello")
        inputs = ["--input", str(tmp_path / "bad.npy")]
        expected = f"dla: {tmp_path / 'bad.npy'}: not a .npy/.npz array"
    elif case == "missing_npy":
        inputs = ["--input", str(tmp_path / "gone.npy")]
        expected = f"dla: {tmp_path / 'gone.npy'}: no such file"
    elif case == "wrong_shape":
        np.save(tmp_path / "w.npy", np.zeros((2, C, H), dtype=np.float32))
        inputs = ["--input", str(tmp_path / "w.npy")]
        expected = "dla: input 'x': expected shape (N, 12, 8, 8), got (2, 12, 8)"
    elif case == "unknown_name":
        inputs = ["--input", f"image={x_npy}"]
        expected = f"dla: --input image={x_npy}: the network has no input 'image' (inputs: x)"
    elif case == "two_for_one":
        inputs = ["--input", str(x_npy), "--input", str(x_npy)]
        expected = "dla: --input"
    before = listing(tmp_path)
    rc = main(["run", loadable, *inputs, "--output", str(tmp_path / "out.npz")])
    assert rc == 2
    one_line_error(capsys.readouterr().err, expected)
    assert listing(tmp_path) == before


def test_run_subprocess_has_no_traceback(tmp_path, x_npy):
    p = run_cli("run", str(tmp_path / "none.dla"), "--input", str(x_npy))
    assert p.returncode == 2
    one_line_error(p.stderr, f"dla: {tmp_path / 'none.dla'}: no such file")


def test_run_unknown_target(sdp_file, x_npy, capsys):
    assert main(["run", str(sdp_file), "--input", str(x_npy), "--target", "nope"]) == 2
    one_line_error(capsys.readouterr().err, "dla: unknown target 'nope'")


# ---- inspect -------------------------------------------------------------------------------------------
def test_inspect_prints_header_regions_tensors_tasks_and_plan(pool_file, capsys):
    assert main(["inspect", str(pool_file)]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0] == "loadable v1.1  config nv_small  model pools  source hand-built  quantization per-kernel"
    assert "inputs: x (1, 12, 8, 8)" in lines and "outputs: y (1, 12, 2, 2), prob (1, 12, 2, 2)" in lines
    assert any(line.split()[:4] == ["region", "1", "SCRATCH", "256"] for line in lines)
    assert any(line.split()[:4] == ["x", "(1,", "12,", "8,"] and "region 0 (input)+0x0" in line for line in lines)
    assert "      pool2: PDP_RDMA+PDP  44 writes (3 relocated)  intr 0x20  p1 -> y" in lines
    assert "  task 2   CPU  softmax  deps 1  Softmax(axis=1)  y -> prob" in lines
    assert lines[-1].startswith("memory plan: weights 0 bytes, activations peak 256 bytes vs 256 unshared")


def test_inspect_invalid_file_prints_what_it_can_and_exits_2(tmp_path, capsys):
    msg = pool_loadable()
    msg.tasks[1].deps.append(5)
    path = tmp_path / "bad.dla"
    write_loadable(path, msg, validate=False)
    assert main(["inspect", str(path)]) == 2
    captured = capsys.readouterr()
    assert "task 1   DLA  pool2  deps 0,5" in captured.out
    one_line_error(captured.err, f"dla: {path}: task 1 ('pool2'): depends on task 5")


def test_inspect_not_a_loadable(tmp_path, capsys):
    path = tmp_path / "x.dla"
    path.write_text("hello world, this is text")
    assert main(["inspect", str(path)]) == 2
    one_line_error(capsys.readouterr().err, f"dla: {path}: not a loadable (bad magic)")


def test_calibration_table_round_trip_and_nvdla_option_names(tmp_path, capsys):
    """``--calib-table-out`` writes NVDLA's JSON table (scale, min, max, offset per tensor); compiling again
    from it (``--calibtable``, NVDLA's spelling, with ``--configtarget opendla-small``) gives the same loadable
    bytes, the calibration inputs being the same (8 random)."""
    import json

    keras = Path(__file__).parents[1] / "compiler" / "fixtures" / "keras" / "resnet.h5"
    a, b, table = tmp_path / "a.dla", tmp_path / "b.dla", tmp_path / "t.json"
    assert main(["compile", str(keras), "--config", "nv_small", "--calib-random", "8", "-o", str(a),
                 "--calib-table-out", str(table)]) == 0
    entries = json.loads(table.read_text())
    assert entries and all(set(e) == {"scale", "min", "max", "offset"} for e in entries.values())
    assert all(e["max"] == -e["min"] > 0 and abs(e["scale"] * 127 - e["max"]) < 1e-9 * e["max"]
               for e in entries.values())
    assert main(["compile", str(keras), "--configtarget", "opendla-small", "--calibtable", str(table),
                 "-o", str(b), "--quantizationMode", "per-filter"]) == 0
    assert a.read_bytes() == b.read_bytes()
    assert "Wrote the calibration of" in capsys.readouterr().out
    # NVDLA's own tables give only the scale (min = max = 0): the range is 127 x scale
    entries = {t: {"scale": e["scale"], "min": 0, "max": 0, "offset": 0} for t, e in entries.items()}
    table.write_text(json.dumps(entries))
    assert main(["compile", str(keras), "--config", "nv_small", "--calib-table", str(table), "-o", str(b)]) == 0
