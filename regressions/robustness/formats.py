"""One harness per input format: where its seed files come from, how they are mutated, and which real reader
parses the result. The rule every harness checks (``check``): whatever the bytes, the reader either accepts
them or raises one of *our* error types, whose one-line message names the file; anything else (an
IndexError, a UnicodeDecodeError, numpy refusing a shape) is a crash the user would see as "internal error".

NVDLA's traces are read in place from the shared folder (never copied); companion files a reader opens beside
the mutated one (a trace's data files, a prototxt's caffemodel) are symlinked beside it.
Generated seeds (zoo models, a compiled loadable, NVDLA flatbuffer loadables) are built once per session.
"""
from __future__ import annotations

import os
import zlib
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Callable

from google.protobuf.message import Message
from hypothesis import strategies as st

from compiler.errors import CompileError
from golden.config import get_config
from golden.errors import DlaError
from golden.regs import register_map
from loadable.format import LoadableError
from regressions.robustness import mutate
from runtime.inputs import InputError
from runtime.nvdla.run import NvdlaRunError
from runtime.trace import TraceError

#: The error types a reader may raise for a bad file; everything else is a crash. golden's DlaError
#: includes golden.budget.MemoryBudgetError (a declared size above the memory budget).
OUR_ERRORS: tuple[type[BaseException], ...] = (TraceError, CompileError, LoadableError, NvdlaRunError, InputError,
                                               DlaError)
#: Budget the harnesses run under, so a mutated size cannot allocate the machine away.
MAX_MEMORY = 256 << 20


def nvdla_traces() -> Path:
    """NVDLA's trace folders (one per hardware config): ``$NVDLA_TRACES``, else the shared copy."""
    return Path(os.environ.get("NVDLA_TRACES", Path(__file__).resolve().parents[3] / "shared" / "nvdla" / "traces"))


@dataclass(frozen=True)
class Seed:
    """A real file to mutate, plus the files its reader opens beside it (linked into each example)."""

    label: str
    data: bytes = field(repr=False)
    companions: tuple[Path, ...] = field(default=(), repr=False)
    #: The decoded protobuf of ``data`` for structured mutation (None: bytes only).
    message: Message | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class Format:
    name: str
    #: Name the mutated file is written under (readers find companions by name).
    file_name: str
    #: Seed files; given a session scratch directory for seeds that must be generated.
    seeds: Callable[[Path], list[Seed]]
    #: Mutated bytes of one seed.
    mutations: Callable[[Seed], st.SearchStrategy[bytes]]
    #: The real reader, called on the mutated file.
    parse: Callable[[Path], object]


# ---- mutation choices per kind of file ---------------------------------------------------------------------
def text_mutations(seed: Seed) -> st.SearchStrategy[bytes]:
    return mutate.mutated(seed.data, mutate.TEXT_MUTATORS)


def binary_mutations(seed: Seed) -> st.SearchStrategy[bytes]:
    return mutate.mutated(seed.data, mutate.BYTE_MUTATORS)


def proto_mutations(seed: Seed) -> st.SearchStrategy[bytes]:
    """Half byte noise, half structured changes that still decode (so the checks behind decoding run)."""
    assert seed.message is not None
    structured = mutate.mutated_message(seed.message).map(lambda m: m.SerializeToString())
    return st.one_of(binary_mutations(seed), structured)


def prototxt_mutations(seed: Seed) -> st.SearchStrategy[bytes]:
    """Text noise (mostly stopped by the text parser) and structured changes printed back as text, so they
    reach the converter."""
    from google.protobuf import text_format

    assert seed.message is not None
    structured = mutate.mutated_message(seed.message).map(lambda m: text_format.MessageToString(m).encode())
    return st.one_of(text_mutations(seed), structured)


def json_mutations(seed: Seed) -> st.SearchStrategy[bytes]:
    """Text noise and values of the wrong JSON type (a string scale, a list, NaN, 1e999)."""
    import json

    structured = mutate.mutated_json(json.loads(seed.data)).map(lambda doc: json.dumps(doc).encode())
    return st.one_of(text_mutations(seed), structured)


def loadable_container(payload: bytes, major: int) -> bytes:
    """``payload`` in our loadable's header with a matching length and crc (mutations stay past the crc)."""
    from loadable.format import HEADER, MAGIC

    return HEADER.pack(MAGIC, major, len(payload), zlib.crc32(payload)) + payload


def loadable_mutations(seed: Seed) -> st.SearchStrategy[bytes]:
    """Byte noise (mostly stopped by the header's crc) and payload changes re-wrapped with a valid header,
    so they reach protobuf decoding and ``check_loadable``."""
    from loadable.format import LOADABLE_VERSION

    assert seed.message is not None
    payload = seed.message.SerializeToString()
    structured = mutate.mutated_message(seed.message).map(
        lambda m: loadable_container(m.SerializeToString(), LOADABLE_VERSION[0]))
    raw = mutate.mutated(payload, mutate.BYTE_MUTATORS).map(lambda p: loadable_container(p, LOADABLE_VERSION[0]))
    return st.one_of(binary_mutations(seed), structured, structured, raw)


# ---- NVDLA traces ------------------------------------------------------------------------------------------
@lru_cache(maxsize=None)
def _regmap(config: str):
    return register_map(get_config(config).address_map)


def _cfg_seeds(_: Path) -> list[Seed]:
    root = nvdla_traces() / "nv_small"
    return [Seed(f"nv_small/{p.parent.name}/{p.name}", p.read_bytes()) for p in sorted(root.glob("*/*.cfg"))]


def _dat_seeds(_: Path) -> list[Seed]:
    root = nvdla_traces() / "nv_small"
    small = [p for p in sorted(root.glob("*/*.dat")) if p.stat().st_size <= 16 << 10]
    return [Seed(f"nv_small/{p.parent.name}/{p.name}", p.read_bytes()) for p in small]


def _txn_dirs() -> list[Path]:
    return sorted(p.parent for p in (nvdla_traces() / "nv_full").glob("*/input.txn"))


def _txn_seeds(_: Path) -> list[Seed]:
    return [Seed(f"nv_full/{d.name}/input.txn", (d / "input.txn").read_bytes(),
                 tuple(p for p in sorted(d.iterdir()) if p.name != "input.txn")) for d in _txn_dirs()]


def _plusargs_seeds(_: Path) -> list[Seed]:
    return [Seed(f"nv_full/{d.name}/plusargs.txt", (d / "plusargs.txt").read_bytes(),
                 tuple(p for p in sorted(d.iterdir()) if p.name != "plusargs.txt"))
            for d in _txn_dirs() if (d / "plusargs.txt").is_file()]


def _txn_data_seeds(_: Path) -> list[Seed]:
    files = [p for d in _txn_dirs() for p in sorted(d.glob("*.dat")) if p.stat().st_size <= 32 << 10]
    return [Seed(f"nv_full/{p.parent.name}/{p.name}", p.read_bytes()) for p in files]


def _parse_cfg(path: Path) -> object:
    """Parse, then look for the data files as ``dla trace`` does before playing."""
    from runtime.trace import parse_cfg

    trace = parse_cfg(path, _regmap("nv_small"))
    trace.missing_files()
    return trace


def _parse_dat(path: Path) -> object:
    from runtime.trace import parse_dat

    return parse_dat(path)


def _parse_txn(path: Path) -> object:
    from runtime.txn import parse_txn

    trace = parse_txn(path.parent / "input.txn", _regmap("nv_full"))
    trace.missing_files()
    return trace


def _parse_txn_data(path: Path) -> object:
    from runtime.txn import parse_txn_data

    return parse_txn_data(path)


# ---- models: ONNX and Caffe --------------------------------------------------------------------------------
#: Zoo networks used as model seeds: small enough to mutate and parse hundreds of times a second or so.
MODEL_SEEDS = ("poolnet", "lenet")
#: Caffe seeds: (zoo network, legacy V1 ``layers`` form). poolnet's BatchNorm has no V1 form.
CAFFE_SEEDS = (("poolnet", False), ("lenet", False), ("lenet", True))


@lru_cache(maxsize=None)
def _zoo(name: str):
    from regressions.lib.zoo import models

    return getattr(models, name)(0)


def _onnx_seeds(_: Path) -> list[Seed]:
    import onnx

    out = []
    for name in MODEL_SEEDS:
        m = _zoo(name)
        msg = onnx.ModelProto()
        msg.CopyFrom(m)
        out.append(Seed(f"zoo/{name}.onnx", m.SerializeToString(), message=msg))
    return out


@lru_cache(maxsize=None)
def _caffe_files(workdir: Path, name: str, legacy: bool) -> tuple[Path, Path]:
    from regressions.lib.zoo.to_caffe import to_caffe

    text, weights = to_caffe(_zoo(name), legacy=legacy)
    stem = f"{name}_v1" if legacy else name
    prototxt, caffemodel = workdir / f"{stem}.prototxt", workdir / f"{stem}.caffemodel"
    prototxt.write_text(text)
    caffemodel.write_bytes(weights)
    return prototxt, caffemodel


def _prototxt_seeds(workdir: Path) -> list[Seed]:
    from google.protobuf import text_format

    from compiler.proto import caffe_pb2

    out = []
    for name, legacy in CAFFE_SEEDS:
        prototxt, caffemodel = _caffe_files(workdir, name, legacy)
        msg = text_format.Parse(prototxt.read_text(), caffe_pb2.NetParameter())
        out.append(Seed(f"zoo/{prototxt.name}", prototxt.read_bytes(), (caffemodel,), message=msg))
        out.append(Seed(f"zoo/{prototxt.name} (random weights)", prototxt.read_bytes(), message=msg))
    return out


def _caffemodel_seeds(workdir: Path) -> list[Seed]:
    from compiler.proto import caffe_pb2

    out = []
    for name, legacy in CAFFE_SEEDS:
        prototxt, caffemodel = _caffe_files(workdir, name, legacy)
        data = caffemodel.read_bytes()
        msg = caffe_pb2.NetParameter()
        msg.ParseFromString(data)
        out.append(Seed(f"zoo/{caffemodel.name}", data, (prototxt,), message=msg))
    return out


def _parse_onnx(path: Path) -> object:
    from compiler.frontend import load_model

    return load_model(path)


def _parse_caffe(path: Path) -> object:
    from compiler.frontend import load_model

    prototxt = path.with_suffix(".prototxt")
    caffemodel = path.with_suffix(".caffemodel")
    return load_model(prototxt, caffemodel if caffemodel.exists() else None)


# ---- loadables: ours (protobuf) and NVDLA's (flatbuffer) ---------------------------------------------------
def _loadable_seeds(_: Path) -> list[Seed]:
    from compiler.driver import compile_graph
    from compiler.frontend.onnx import load
    from loadable import loadable_pb2
    from loadable.format import HEADER, encode_loadable

    msg, _, _ = compile_graph(load(_zoo("poolnet"), source="poolnet"), "nv_small")
    data = encode_loadable(msg)
    decoded = loadable_pb2.Loadable()
    decoded.ParseFromString(data[HEADER.size:])
    return [Seed("zoo/poolnet.dla (nv_small)", data, message=decoded)]


def _parse_loadable(path: Path) -> object:
    from loadable.format import check_loadable, read_loadable

    msg = read_loadable(path, validate=False)
    check_loadable(msg, path)
    return msg


def _pdp_nvdla_loadable(legacy: bool) -> bytes:
    from runtime.nvdla import descriptors as d
    from runtime.nvdla import fbs
    from runtime.nvdla.writer import LoadableBuilder

    b = LoadableBuilder(legacy=legacy)
    src = b.buffer("src", 512, bytes(range(256)) * 2)
    dst = b.buffer("dst", 128)
    cube = dict(width=8, height=8, channel=8, line_stride=64, surf_stride=512, size=512)
    b.op(d.OP_PDP, d.PdpOpDesc(split_num=1, pool_mode=1, pool_width=1, pool_height=1, stride_x=2, stride_y=2),
         d.PdpSurfaceDesc(src_data=d.DataCube(address=src, **cube),
                          dst_data=d.DataCube(address=dst, width=4, height=4, channel=8, line_stride=32,
                                              surf_stride=128, size=128)))
    b.output(dst, fbs.TensorDesc(name="out", id=0, mem_id=0, size=128, c=8, h=4, w=4,
                                 strides=[1, 32, 128, 0, 0, 0, 0, 0]))
    return b.build()


def _nvdla_seeds(_: Path) -> list[Seed]:
    return [Seed("writer/pdp.nvdla", _pdp_nvdla_loadable(False)),
            Seed("writer/pdp_legacy.nvdla", _pdp_nvdla_loadable(True))]


def _parse_nvdla(path: Path) -> object:
    from runtime.nvdla.run import NvdlaNetwork

    net = NvdlaNetwork.load(path)
    net.place()
    return net


# ---- what dla compile / dla run read besides models and loadables ------------------------------------------
def _array_seeds(workdir: Path) -> list[Seed]:
    import numpy as np

    rng = np.random.default_rng(0)
    x = rng.normal(size=(1, 16, 8, 8)).astype(np.float32)
    npy, npz = workdir / "input.npy", workdir / "inputs.npz"
    np.save(npy, x)
    np.savez(npz, data=x, other=x[:, :4].astype(np.int8))
    np.savez_compressed(workdir / "inputs_z.npz", data=x)
    return [Seed("generated/input.npy", npy.read_bytes()), Seed("generated/inputs.npz", npz.read_bytes()),
            Seed("generated/inputs_z.npz", (workdir / "inputs_z.npz").read_bytes())]


def _calib_table_seeds(_: Path) -> list[Seed]:
    """An NVDLA-style calibration table over poolnet's tensors, both entry forms."""
    import json

    names = [n for node in _zoo("poolnet").graph.node for n in node.output]
    table = {n: ({"scale": 0.02 + i / 100} if i % 2 else {"min": -1.5 - i, "max": 2.0 + i}) for i, n in enumerate(names)}
    return [Seed("generated/poolnet.calib.json", json.dumps(table, indent=1).encode())]


def _parse_array(path: Path) -> object:
    from runtime.inputs import load_array

    return load_array(path)


def _parse_calib_table(path: Path) -> object:
    from compiler.driver import read_calib_table

    return read_calib_table(path)


FORMATS: dict[str, Format] = {f.name: f for f in (
    Format("cfg", "trace.cfg", _cfg_seeds, text_mutations, _parse_cfg),
    Format("dat", "payload.dat", _dat_seeds, text_mutations, _parse_dat),
    Format("txn", "input.txn", _txn_seeds, text_mutations, _parse_txn),
    Format("plusargs", "plusargs.txt", _plusargs_seeds, text_mutations, _parse_txn),
    Format("txn_data", "surface.dat", _txn_data_seeds, text_mutations, _parse_txn_data),
    Format("onnx", "model.onnx", _onnx_seeds, proto_mutations, _parse_onnx),
    Format("prototxt", "net.prototxt", _prototxt_seeds, prototxt_mutations, _parse_caffe),
    Format("caffemodel", "net.caffemodel", _caffemodel_seeds, proto_mutations, _parse_caffe),
    Format("loadable", "net.dla", _loadable_seeds, loadable_mutations, _parse_loadable),
    Format("nvdla", "net.nvdla", _nvdla_seeds, binary_mutations, _parse_nvdla),
    Format("array", "input.npy", _array_seeds, binary_mutations, _parse_array),
    Format("calib_table", "calib.json", _calib_table_seeds, json_mutations, _parse_calib_table),
)}


# ---- one example -------------------------------------------------------------------------------------------
def materialise(directory: Path, fmt: Format, seed: Seed, data: bytes) -> Path:
    """Write the mutated file into ``directory`` beside links to the seed's companions; its path."""
    directory.mkdir(parents=True, exist_ok=True)
    for companion in seed.companions:
        link = directory / _companion_name(fmt, companion)
        if not link.exists():
            link.symlink_to(companion)
    path = directory / fmt.file_name
    path.write_bytes(data)
    return path


def _companion_name(fmt: Format, companion: Path) -> str:
    """Caffe pairs are found by stem (net.prototxt + net.caffemodel); trace companions keep their names."""
    if companion.suffix in (".prototxt", ".caffemodel"):
        return "net" + companion.suffix
    return companion.name


class Crash(AssertionError):
    """A reader let an error escape that is not ours, or ours without naming the file."""


def check(fmt: Format, path: Path) -> str | None:
    """Parse ``path`` with the format's reader: None when accepted, the one-line message when refused with
    one of our errors; raises ``Crash`` (or lets a foreign exception through) otherwise."""
    try:
        fmt.parse(path)
    except OUR_ERRORS as exc:
        message = str(exc)
        names = [p.name for p in path.parent.iterdir()]
        if not any(name in message for name in names):
            raise Crash(f"{fmt.name}: {type(exc).__name__} does not name the file: {message}") from exc
        if "\n" in message.strip():
            raise Crash(f"{fmt.name}: {type(exc).__name__} message is not one line: {message!r}") from exc
        return message
    return None
