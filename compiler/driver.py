"""``compile_model``: model file -> loadable, through the pass pipeline.

canonicalize -> fold_shuffle -> fold_affine -> pad_channels -> split_channels -> split_pools -> calibrate -> equalize_concats -> lower -> quantize -> partition -> split_conv -> memplan -> emit
"""
from __future__ import annotations

import json
import math
import time
from pathlib import Path
from typing import Callable

import numpy as np

from compiler.calib_range import METHODS
from compiler.errors import CompileError
from compiler.frontend import load_model
from compiler import model_scales
from compiler.ir import Graph
from compiler.passes import PRECISIONS, CompileContext, PassManager
from compiler.passes.calibrate import calibrate
from compiler.passes.canonicalize import canonicalize
from compiler.passes.equalize_concats import equalize_concats
from compiler.passes.fold_affine import fold_affine
from compiler.passes.pad_channels import pad_channels
from compiler.passes.fold_shuffle import fold_shuffle
from compiler.passes.split_channels import split_channels
from compiler.passes.split_pools import split_pools
from compiler.passes.lower import lower
from compiler.passes.memplan import memplan
from compiler.passes.partition import partition
from compiler.passes.quantize import quantize
from compiler.passes.fp16 import fp16_params
from compiler.passes.mixed import assign_precisions, check_overrides, mixed_params
from compiler.passes.split_conv import split_conv
from compiler.passes.fuse_pdp import fuse_pdp
from compiler.passes.winograd import winograd
from golden.budget import MemoryBudgetError, check_size
from golden.config import PRESETS, get_config

DEFAULT_CALIB_RANDOM = 32
#: Bytes per value of the float reference run calibration keeps for every tensor (float64).
FLOAT_BYTES = 8
#: Python objects of one calibration sample (a dict, array headers), besides its data.
SAMPLE_OVERHEAD = 512
QUANT_MODES = ("per-kernel", "per-filter")
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".pgm", ".ppm", ".bmp")

PIPELINE = [
    ("canonicalize", canonicalize),
    ("fold_shuffle", fold_shuffle),
    ("fold_affine", fold_affine),
    ("pad_channels", pad_channels),
    ("split_channels", split_channels),
    ("split_pools", split_pools),
    ("calibrate", calibrate),
    ("equalize_concats", equalize_concats),
    ("lower", lower),
    ("winograd", winograd),
    ("quantize", quantize),
    ("partition", partition),
    ("split_conv", split_conv),
    ("fuse_pdp", fuse_pdp),
    ("memplan", memplan),
]


#: The passes that calibrate and quantize, and what replaces them in a 16-bit float network.
CALIBRATION_PASSES = ("calibrate", "equalize_concats")


def pipeline(precision: str, mixed: bool = False) -> list:
    """The passes for ``precision``: int8 as ``PIPELINE``; fp16 without calibration, its parameters from
    ``passes.fp16`` instead of ``quantize``. ``mixed`` (``--precision-overrides``): calibrated, each op's
    precision assigned after lowering and its parameters built in that precision (``passes.mixed``)."""
    if mixed:
        out = []
        for name, fn in PIPELINE:
            out.append((name, mixed_params) if name == "quantize" else (name, fn))
            if name == "lower":
                out.append(("precisions", assign_precisions))
        return out
    if precision == "int8":
        return PIPELINE
    if precision == "int16":  # calibrated as int8, 16-bit scales
        return PIPELINE
    if precision == "fp16":
        return [(name, fp16_params) if name == "quantize" else (name, fn) for name, fn in PIPELINE
                if name not in CALIBRATION_PASSES]
    raise CompileError("", f"--precision {precision}: unknown")


def default_precision(hw) -> str:
    """int8 where the config has it (calibrated, the smallest), else fp16 (NVDLA's compiler default)."""
    return "int8" if hw.supports("int8") else "fp16"


def _elements(shape) -> int:
    n = 1
    for d in shape:
        n *= int(d)
    return n


def check_model_sizes(g: Graph) -> None:
    """Every tensor and weight of ``g``, and one float run over all of them (what calibration keeps), within
    the memory budget: a model declaring a 20000x20000 layer is refused naming the tensor, before its
    activations are allocated."""
    total = 0
    try:
        for t, shape in g.shapes.items():
            nbytes = check_size(f"tensor {t!r} {list(shape)} (float64)", _elements(shape) * FLOAT_BYTES)
            total = check_size("the float run of all tensors (calibration)", total + nbytes)
        for t, value in g.consts.items():
            nbytes = check_size(f"weight {t!r} {list(value.shape)} (float64)", value.size * FLOAT_BYTES)
            total = check_size("the float run of all tensors and weights (calibration)", total + nbytes)
    except MemoryBudgetError as exc:
        raise CompileError(g.source, str(exc)) from None


def check_calibration(g: Graph, samples: int, option: str) -> None:
    """``samples`` calibration inputs (each kept until calibration ends) within the memory budget."""
    per = sum(_elements(g.shapes[t]) * 4 + SAMPLE_OVERHEAD for t in g.inputs)
    try:
        check_size(f"{option}: {samples} samples of {per} bytes", samples * per)
    except MemoryBudgetError as exc:
        raise CompileError(g.source, str(exc)) from None


def random_inputs(g: Graph, n: int, seed: int = 0) -> list[dict[str, np.ndarray]]:
    """N(0, 1) samples of every network input (batch 1)."""
    rng = np.random.default_rng(seed)
    return [{t: rng.standard_normal(g.shapes[t]).astype(np.float32) for t in g.inputs} for _ in range(n)]


def image_inputs(g: Graph, directory: Path) -> list[dict[str, np.ndarray]]:
    """Calibration samples from a directory: ``.npy`` arrays of the input shape (or a batch of them) and
    images (resized to the input, scaled to [0, 1]); single-input networks only."""
    if not directory.is_dir():
        raise CompileError(str(directory), "--calib-images: not a directory")
    if len(g.inputs) != 1:
        raise CompileError(str(directory), "--calib-images needs a network with one input")
    name = g.inputs[0]
    shape = g.shapes[name]
    files = [f for f in sorted(directory.iterdir()) if f.suffix == ".npy" or f.suffix.lower() in IMAGE_SUFFIXES]
    check_calibration(g, len(files), f"--calib-images {directory}")  # a .npy batch counts once: bounded by its file
    feeds = []
    for f in files:
        if f.suffix == ".npy":
            try:
                a = np.load(f).astype(np.float32)
            except (ValueError, OSError) as exc:
                raise CompileError(str(f), f"not a numpy array ({exc})") from None
            if a.shape == tuple(shape[1:]):
                a = a[None]
            if a.shape[1:] != tuple(shape[1:]):
                raise CompileError(str(f), f"shape {list(a.shape)} does not match input {name!r} {list(shape)}")
            feeds += [{name: a[i:i + 1]} for i in range(a.shape[0])]
        elif f.suffix.lower() in IMAGE_SUFFIXES:
            try:
                from PIL import Image
            except ImportError:
                raise CompileError(str(f), "reading images needs Pillow (pip install Pillow)") from None
            try:
                img = Image.open(f).convert("L" if shape[1] == 1 else "RGB").resize((shape[3], shape[2]))
            except OSError as exc:
                raise CompileError(str(f), f"not a readable image ({exc})") from None
            a = np.asarray(img, dtype=np.float32) / 255.0
            a = a[None, None] if a.ndim == 2 else a.transpose(2, 0, 1)[None]
            feeds.append({name: a})
    if not feeds:
        raise CompileError(str(directory), "--calib-images: no .npy or image files")
    return feeds


def read_calib_table(path: Path) -> dict[str, float]:
    """NVDLA-style calibration table: {"tensor": {"scale": s} or {"min": a, "max": b}, ...} -> abs max (the
    range min/max give when one is non-zero, else 127 x scale)."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise CompileError(str(path), f"not a JSON calibration table ({exc})") from None
    if not isinstance(data, dict):
        raise CompileError(str(path), "calibration table must be a JSON object of tensor entries")
    amax = {}
    for t, e in data.items():
        if not isinstance(e, dict):
            raise CompileError(str(path), f"entry {t!r} is not an object")
        try:
            span = max(abs(float(e.get("min", 0.0))), abs(float(e.get("max", 0.0))))
            if span > 0 or ("scale" not in e and ("min" in e or "max" in e)):
                amax[t] = span  # the range itself (exact: a written table reads back unchanged)
            elif "scale" in e:  # NVDLA's tables give the scale, min = max = 0
                amax[t] = float(e["scale"]) * 127.0
            else:
                raise CompileError(str(path), f"entry {t!r} has neither scale nor min/max")
        except (TypeError, ValueError, OverflowError):  # "scale": "abc", [1], null, 1e999 as an int
            raise CompileError(str(path), f"entry {t!r}: scale, min and max must be numbers") from None
        if not math.isfinite(amax[t]):
            raise CompileError(str(path), f"entry {t!r}: scale, min and max must be finite (got {amax[t]})")
    return amax


def calib_table_json(amax: dict[str, float]) -> dict[str, dict[str, float]]:
    """Ranges as NVDLA's JSON calibration table (what its compiler's ``--calibtable`` reads, and
    ``read_calib_table``): per tensor the int8 scale (range / 127), the range as min/max, offset 0."""
    return {t: {"scale": float(a) / 127.0, "min": -float(a), "max": float(a), "offset": 0}
            for t, a in sorted(amax.items())}


def compile_graph(g: Graph, hw_name: str, *, calib_inputs: list[dict] | None = None, calib_table: dict | None = None,
                  quant: str = "per-filter", calib_method: str = "minmax", dump_passes: Path | None = None,
                  log: Callable[[str], None] = lambda m: None,
                  progress: Callable[[str], None] = lambda m: None,
                  histograms: bool = False,
                  observe: Callable[[str, Graph], None] | None = None,
                  precision: str | None = None, firmware_pdp: bool = False,
                  profile: str | None = None,
                  precision_overrides: dict[str, str] | None = None) -> tuple[object, Graph, CompileContext]:
    """Compile an IR graph; returns (Loadable proto, lowered graph, context). Tests use the graph and the
    context (scales, plan) to replay single layers. ``histograms`` keeps every tensor's calibration histogram
    in the context (for ``compiler.quant_report``) even when the method does not need them. ``observe`` is
    called with (pass name, graph) after every pass. ``precision`` (None: ``default_precision``) is the
    networks' data type on the DLA. ``firmware_pdp``: for NVDLA's firmware (``--format nvdla``), averages
    take its reciprocal table. ``profile`` names the optional optimisations (``compiler.profiles``).
    ``precision_overrides`` ({layer: "int16" | "fp16"}) mixes the two 16-bit types (``passes.mixed``)."""
    from compiler.emit import emit_loadable
    from compiler.profiles import get_profile

    if quant not in QUANT_MODES:
        raise CompileError("", f"--quant must be one of {', '.join(QUANT_MODES)}")
    try:
        hw = get_config(hw_name)
    except (KeyError, ValueError):
        raise CompileError("", f"unknown hardware config {hw_name!r} (known: {', '.join(sorted(PRESETS))})") from None
    if calib_method not in METHODS:
        raise CompileError("", f"--calib-method must be one of {', '.join(METHODS)}")
    precision = precision or default_precision(hw)
    if precision not in PRECISIONS:
        raise CompileError("", f"--precision must be one of {', '.join(PRECISIONS)}")
    if not (hw.supports(precision)):
        have = ", ".join(p for p in PRECISIONS if hw.supports(p))
        raise CompileError("", f"--precision {precision}: {hw.name} has no {precision} datapath (it has {have})")
    if precision_overrides:
        check_overrides(precision_overrides, precision)
    if precision != "int8" and g.quant_scales:
        raise CompileError(g.source, f"--precision {precision}: the model is quantized to int8 (its QuantizeLinear "
                                     "or QLinear ops); compile it in int8")
    model_scales.propagate(g)
    model_ranges = {t: 127.0 * s for t, s in g.quant_scales.items()}  # a pre-quantized model's scales
    if g.range_hints:  # (a table the user gives wins)
        log(f"{len(g.range_hints)} tensors have asymmetric int8 quantization: their ranges calibrate a symmetric "
            f"network, which is close to the model's int8 arithmetic but not bit-comparable with it")
        calib_table = {**g.range_hints, **(calib_table or {})}
    ctx = CompileContext(hw=hw, quant=quant, calib_method=calib_method, log=log, progress=progress, precision=precision,
                         amax={**model_ranges, **(calib_table or {})}, keep_histograms=histograms,
                         fixed_scales=set(model_ranges) - set(calib_table or {}), firmware_pdp=firmware_pdp,
                         profile=get_profile(profile), overrides=dict(precision_overrides or {}))
    if precision != "fp16" or ctx.overrides:
        ctx.calib_inputs = calib_inputs if calib_inputs is not None else random_inputs(g, DEFAULT_CALIB_RANDOM)
    pm = PassManager(pipeline(precision, bool(ctx.overrides)), dump_passes, observe)
    g = pm.run(g, ctx)
    ld = emit_loadable(g, ctx, source=g.source)
    return ld, g, ctx


def compile_model(model: Path, *, weights: Path | None = None, config: str, calib_images: Path | None = None,
                  calib_random: int | None = None, calib_table: Path | None = None, quant: str = "per-filter",
                  calib_method: str = "minmax", dump_passes: Path | None = None, log: Callable[[str], None] = print,
                  progress: Callable[[str], None] = lambda m: None, quant_report: list | None = None,
                  calibration: dict | None = None, precision: str | None = None, firmware_pdp: bool = False,
                  profile: str | None = None, precision_overrides: dict[str, str] | None = None):
    """Compile a Caffe or ONNX model for a hardware preset; raises CompileError on bad input. ``progress``
    hears what is being done ("loading the model", "pass 3/9: quantize") for a status line. A ``quant_report``
    list receives the per-layer quantization report (``compiler.quant_report``), worst layer first; a
    ``calibration`` dict the calibration table (``calib_table_json``) that compiles the same loadable."""
    t0 = time.perf_counter()
    progress(f"loading {model}")
    g = load_model(model, weights)
    log(f"loaded {model} ({len(g.nodes)} layers) in {time.perf_counter() - t0:.2f} s")
    check_model_sizes(g)
    feeds = None
    table = None
    if calib_images is not None:
        feeds = image_inputs(g, Path(calib_images))
    elif calib_random is not None:
        if calib_random < 1:
            raise CompileError("", "--calib-random needs a positive number of samples")
        check_calibration(g, calib_random, f"--calib-random {calib_random}")
        feeds = random_inputs(g, calib_random)
    if calib_table is not None:
        table = read_calib_table(Path(calib_table))
        if feeds is None:
            feeds = random_inputs(g, 8)  # for tensors the table does not name
    ld, lowered, ctx = compile_graph(g, config, calib_inputs=feeds, calib_table=table, quant=quant,
                                     calib_method=calib_method, dump_passes=dump_passes, log=log, progress=progress,
                                     histograms=quant_report is not None, precision=precision,
                                     firmware_pdp=firmware_pdp, profile=profile,
                                     **({"precision_overrides": precision_overrides} if precision_overrides else {}))
    if calibration is not None:
        calibration.update(calib_table_json(ctx.calibrated))
    if quant_report is not None:
        from compiler.quant_report import quant_report as report

        quant_report.extend(report(lowered, ctx))
    log(f"compiled for {config} in {time.perf_counter() - t0:.2f} s")
    return ld
