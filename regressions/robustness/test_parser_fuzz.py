"""Every reader survives mutated real files: accepted, or refused with our one-line error naming the file.

``ROBUSTNESS_EXAMPLES`` (default 1000; the regress levels set it) is the total over all formats, split evenly.
Derandomized unless ``FUZZ_SEED`` is set. Crashes found and fixed stay fixed as the explicit reproducers at
the end of this file.
"""
from __future__ import annotations

import hashlib
import io
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import pytest
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

from golden import budget
from regressions.robustness import mutate, throughput
from regressions.robustness.formats import (FORMATS, MAX_MEMORY, Crash, Format, Seed, loadable_container, check,
                                            materialise)
from loadable.format import LoadableError

TOTAL_EXAMPLES = int(os.environ.get("ROBUSTNESS_EXAMPLES", "1000"))
PER_FORMAT = max(1, TOTAL_EXAMPLES // len(FORMATS))
FUZZ_SEED = os.environ.get("FUZZ_SEED", "").strip()


@dataclass(frozen=True)
class Case:
    """A mutated file; prints as seed + size + digest, not as megabytes of bytes."""

    seed: Seed
    data: bytes

    def __repr__(self) -> str:
        digest = hashlib.sha1(self.data).hexdigest()[:10]
        return f"Case({self.seed.label!r}, {len(self.data)} bytes, sha1 {digest})"


@pytest.fixture(scope="session")
def seed_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("robustness-seeds")


@pytest.fixture(autouse=True)
def memory_budget():
    """Mutated sizes are checked against a small budget instead of the default half of the RAM."""
    budget.set_max_memory(MAX_MEMORY)
    yield
    budget.set_max_memory(None)


_SEEDS: dict[str, list[Seed]] = {}


def seeds_of(fmt: Format, seed_dir: Path) -> list[Seed]:
    if fmt.name not in _SEEDS:
        try:
            _SEEDS[fmt.name] = fmt.seeds(seed_dir)
        except FileNotFoundError as exc:
            pytest.skip(f"{fmt.name}: seed files not found ({exc.filename}; set NVDLA_TRACES)")
    if not _SEEDS[fmt.name]:
        pytest.skip(f"{fmt.name}: no seed files (NVDLA traces not found; set NVDLA_TRACES)")
    return _SEEDS[fmt.name]


def run_case(fmt: Format, case: Case, directory: Path, *, timed: bool = True) -> str | None:
    """Write and parse one mutated file (timed for the throughput summary). ``directory`` is reused by every
    example of a seed; a crashing input is copied out (with its companions' links) and the copy named."""
    start = time.perf_counter()
    path = materialise(directory, fmt, case.seed, case.data)
    try:
        message = check(fmt, path)
    except Exception as exc:
        kept = directory.parent / f"crash-{hashlib.sha1(case.data).hexdigest()[:10]}"
        shutil.copytree(directory, kept, symlinks=True, dirs_exist_ok=True)
        if isinstance(exc, Crash):
            raise Crash(f"{exc} -- input kept in {kept}") from exc
        raise Crash(f"{fmt.name} ({case!r}): {type(exc).__name__}: {exc} -- input kept in {kept}") from exc
    if timed:
        throughput.record(fmt.name, time.perf_counter() - start, message is not None)
    return message


def cases(seeds: list[Seed], fmt: Format) -> st.SearchStrategy[tuple[int, Case]]:
    """(seed index, mutated file): each seed's mutation strategy is built once, not per example."""
    per_seed = [fmt.mutations(s) for s in seeds]

    @st.composite
    def build(draw) -> tuple[int, Case]:
        i = draw(st.integers(0, len(seeds) - 1))
        return i, Case(seeds[i], draw(per_seed[i]))

    return build()


@pytest.mark.parametrize("name", list(FORMATS))
def test_reader_survives_mutations(name: str, seed_dir: Path, tmp_path: Path, record_property) -> None:
    fmt = FORMATS[name]
    seeds = seeds_of(fmt, seed_dir)

    @settings(max_examples=PER_FORMAT, deadline=None, database=None, derandomize=not FUZZ_SEED,
              suppress_health_check=list(HealthCheck))
    @given(case=cases(seeds, fmt))
    def mutated(case: tuple[int, Case]) -> None:
        index, example = case
        run_case(fmt, example, tmp_path / f"seed{index}")

    if FUZZ_SEED:
        mutated = seed(int(FUZZ_SEED, 0))(mutated)
    start = time.perf_counter()
    try:
        mutated()
    finally:
        throughput.record_wall(name, time.perf_counter() - start)
        rate = throughput.RATES.get(name, throughput.Rate())
        record_property("examples", rate.examples)  # in the JUnit XML, so the figure survives xdist and regress
        record_property("examples_per_second", round(rate.per_second, 1))


def test_seed_files_are_accepted(seed_dir: Path, tmp_path: Path) -> None:
    """The unmutated seeds parse: otherwise every mutation would be refused for the seed's own sake."""
    for fmt in FORMATS.values():
        seeds = _SEEDS.get(fmt.name) or fmt.seeds(seed_dir)
        for i, s in enumerate(seeds):
            assert run_case(fmt, Case(s, s.data), tmp_path / f"{fmt.name}{i}", timed=False) is None, (fmt.name, s.label)


def test_structured_loadable_mutations_reach_the_checks(seed_dir: Path, tmp_path: Path) -> None:
    """Payload mutations are re-wrapped with a valid header, so the reader gets past the crc to protobuf
    decoding and check_loadable (byte noise alone would almost always stop at "corrupted")."""
    from loadable.format import decode_loadable

    fmt = FORMATS["loadable"]
    loadable = seeds_of(fmt, seed_dir)[0]
    payloads = mutate.mutated_message(loadable.message).map(lambda m: loadable_container(m.SerializeToString(), 1))
    stopped_by_header: list[str] = []

    @settings(max_examples=50, deadline=None, database=None, derandomize=True,
              suppress_health_check=list(HealthCheck))
    @given(data=payloads)
    def decode(data: bytes) -> None:
        try:
            decode_loadable(data, "net.dla")
        except LoadableError as exc:
            if any(w in str(exc) for w in ("corrupted", "truncated", "bad magic", "trailing bytes")):
                stopped_by_header.append(str(exc))

    decode()
    assert not stopped_by_header, stopped_by_header[:3]


# ---- crashes found by the fuzzer (and the report of issue 15), fixed: the smallest input of each ------------
def _onnx_initializer_dims(seed: Seed) -> bytes:
    """An initializer whose dims disagree with its data (numpy's reshape used to escape the ONNX frontend)."""
    import onnx

    m = onnx.ModelProto()
    m.CopyFrom(seed.message)
    del m.graph.initializer[0].dims[:]
    m.graph.initializer[0].dims.append(1)
    return m.SerializeToString()


def _npy_declaring(shape: tuple[int, ...]) -> bytes:
    """A .npy header declaring ``shape`` (float32) and no data."""
    import numpy as np

    buf = io.BytesIO()
    np.lib.format.write_array_header_1_0(buf, {"descr": "<f4", "fortran_order": False, "shape": shape})
    return buf.getvalue()


def _npz_bad_crc(seed: Seed) -> bytes:
    """A .npz whose member data no longer matches its crc (zipfile.BadZipFile used to escape)."""
    import numpy as np

    buf = io.BytesIO()
    np.savez(buf, data=np.zeros(16, np.float32))
    data = bytearray(buf.getvalue())
    data[data.index(b"\x93NUMPY") + 130] ^= 0xFF
    return bytes(data)


def _onnx_input_dim(seed: Seed) -> bytes:
    """An input dimension of 2^63 - 1: numpy's int64 shape arithmetic used to wrap it into a negative layer size."""
    import onnx

    m = onnx.ModelProto()
    m.CopyFrom(seed.message)
    m.graph.input[0].type.tensor_type.shape.dim[3].dim_value = (1 << 63) - 1
    return m.SerializeToString()


@dataclass(frozen=True)
class Reproducer:
    id: str
    format: str
    #: The seed's bytes -> the crashing input.
    make: Callable[[Seed], bytes]
    #: What the one-line error must say; None: the input is valid and must be accepted.
    expect: str | None
    #: Label of the seed ``make`` starts from (default: the format's first seed).
    seed: str = ""


REPRODUCERS = [
    Reproducer("cfg-invalid-utf8", "cfg", lambda s: b"reg_write(NVDLA_CDP.S_POINTER_0, 0);\n\xff\n", "not text"),
    Reproducer("dat-invalid-utf8", "dat", lambda s: b"{\n{offset:0x0, size:1, payload:0x\xff1} ,\n}\n", "not text"),
    Reproducer("txn-invalid-utf8", "txn", lambda s: b"wait\n\xc0\xaf\n", "not text"),
    Reproducer("plusargs-invalid-utf8", "plusargs", lambda s: b"+continue_on_fail \xed\xa0\x80\n", "not text"),
    Reproducer("dat-offset-beyond-int64", "dat", lambda s: b"{offset:0x10000000000000000, size:1, payload:0x01}",
               "beyond 2^40"),
    Reproducer("dat-byte-beyond-int64", "dat", lambda s: b"{offset:0x0, size:1, payload:0x10000000000000000}",
               "out of range"),
    Reproducer("dat-decimal-leading-zero", "dat", lambda s: b"{offset:0777, size:1, payload:0x01}", None),
    Reproducer("cfg-data-name-nul", "cfg", lambda s: b'mem_load(pri_mem, 0x0, "in\x00put.dat");\n', "null byte"),
    Reproducer("cfg-data-name-too-long", "cfg", lambda s: b'mem_load(pri_mem, 0x0, "' + b"9" * 400 + b'.dat");\n',
               "File name too long"),
    Reproducer("txn-data-name-too-long", "txn", lambda s: b"load_mem 0x80000000 0x10 " + b"9" * 400 + b".dat\n",
               "File name too long"),
    Reproducer("onnx-initializer-dims", "onnx", _onnx_initializer_dims, "initializer"),
    Reproducer("onnx-input-dim-int64-max", "onnx", _onnx_input_dim, "exceeds the memory budget"),
    Reproducer("prototxt-input-dim-int64-max", "prototxt",
               lambda s: s.data.replace(b"dim: 28", b"dim: 0x7fffffffffffffff", 1), "exceeds the memory budget",
               seed="zoo/lenet.prototxt (random weights)"),
    Reproducer("prototxt-conv-pad-int32-max", "prototxt",
               lambda s: s.data.replace(b"convolution_param {", b"convolution_param {\n    pad: 2147483647", 1),
               "exceeds the memory budget", seed="zoo/lenet.prototxt"),
    Reproducer("npz-bad-crc", "array", _npz_bad_crc, "not a .npy/.npz array (BadZipFile"),
    Reproducer("npy-declares-a-terabyte", "array", lambda s: _npy_declaring((1 << 38,)), "exceeds the memory budget"),
    Reproducer("calib-scale-not-a-number", "calib_table", lambda s: b'{"data": {"scale": "abc"}}', "must be numbers"),
    Reproducer("calib-scale-infinite", "calib_table", lambda s: b'{"data": {"min": -1e999}}', "must be finite"),
]


@pytest.mark.parametrize("repro", REPRODUCERS, ids=lambda r: r.id)
def test_fixed_crash_stays_fixed(repro: Reproducer, seed_dir: Path, tmp_path: Path) -> None:
    fmt = FORMATS[repro.format]
    seed_file = next(s for s in seeds_of(fmt, seed_dir) if s.label == repro.seed or not repro.seed)
    message = run_case(fmt, Case(seed_file, repro.make(seed_file)), tmp_path / "case", timed=False)
    if repro.expect is None:
        assert message is None
    else:
        assert message is not None and repro.expect in message, message


# ---- the same inputs through the dla CLI: exit 2, the file named, no traceback, no "internal error" ----------
def _argv(repro: str, path: Path, seed_dir: Path) -> list[str]:
    """The dla command that reads the reproducer's file (models and loadables it needs come from the seeds)."""
    def seed_file(fmt: str, name: str) -> str:
        out = path.parent / name
        out.write_bytes(seeds_of(FORMATS[fmt], seed_dir)[0].data)
        return str(out)

    return {
        "cfg-invalid-utf8": lambda: ["trace", str(path), "--config", "nv_small", "-j", "1", "-q"],
        "txn-invalid-utf8": lambda: ["trace", str(path), "--config", "nv_full", "-j", "1", "-q"],
        "plusargs-invalid-utf8": lambda: ["trace", str(path.parent / "input.txn"), "--config", "nv_full", "-j", "1",
                                          "-q"],
        "onnx-initializer-dims": lambda: ["compile", str(path), "--config", "nv_small", "-o", str(path.parent / "o.dla")],
        "npz-bad-crc": lambda: ["run", seed_file("loadable", "seed.dla"), "--input", str(path)],
        "calib-scale-not-a-number": lambda: ["compile", seed_file("onnx", "seed.onnx"), "--config", "nv_small",
                                             "--calib-table", str(path), "-o", str(path.parent / "o.dla")],
    }[repro]()


@pytest.mark.parametrize("repro", [r for r in REPRODUCERS if r.id in ("cfg-invalid-utf8", "txn-invalid-utf8",
                                   "plusargs-invalid-utf8", "onnx-initializer-dims", "npz-bad-crc",
                                   "calib-scale-not-a-number")], ids=lambda r: r.id)
def test_cli_refuses_in_one_line(repro: Reproducer, seed_dir: Path, tmp_path: Path,
                                 capsys: pytest.CaptureFixture[str]) -> None:
    from app.cli import main

    fmt = FORMATS[repro.format]
    seed_file = seeds_of(fmt, seed_dir)[0]
    path = materialise(tmp_path / "case", fmt, seed_file, repro.make(seed_file))
    rc = main(_argv(repro.id, path, seed_dir))
    out, err = capsys.readouterr()
    assert rc == 2, out + err
    assert path.name in err, err
    assert "Traceback" not in out + err and "internal error" not in out + err, out + err
