"""Functional coverage: bins over each engine's configuration space, sampled from every operation the
golden model completes, merged over pytest workers and regression units.

Each engine is one ``register(ENGINE, *coverpoints)`` call at the bottom of this module; a coverpoint is
a name, its bins and a sampler reading the operation's registers (``op.field("PDP.D_OPERATION_MODE_CFG
.POOLING_METHOD")``) or the status the engines reported (LUT path counters, saturation). Small factories
(``enum``, ``flag``, ``bucket``, ``counter``, ``counters``) declare the usual shapes, so the tables stay data.

Sampling: ``install()`` adds an observer to ``golden.dla.OP_OBSERVERS``; after each operation it samples
every engine of the on-the-fly chain (CONV -> SDP -> PDP samples all three) with the consumer-group
registers the operation ran with. Only completed operations are seen, so modes the model rejects
(configurations the model refuses with UnsupportedError) can never be hit; such bins are declared
``ignore`` and listed apart, outside the totals, so the report shows the hole without failing on it.
Counters the hardware only counts when asked (SDP ``D_PERF_ENABLE.PERF_SAT_EN`` / ``PERF_LUT_EN``) are
sampled only when reported.

Files: ``dump(path)`` writes this process's counts with every bin definition (so a worker that never ran
an engine still contributes its totals); ``merge(paths)`` sums them; ``summarize(run_dir)`` merges every
``run_dir/**/coverage/func-*.json`` and the RTL coverage under ``run_dir/**/coverage/rtl``.
"""
from __future__ import annotations

import json
import threading
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Mapping

from golden import dla as golden_dla
from golden.config import HwConfig
from golden.regs import RegView
from golden.registry import Registry

#: Schema of the per-worker files.
FORMAT = "dla-functional-coverage/1"
#: Where ``summarize`` finds worker files, and RTL coverage directories, below a run directory.
FUNC_GLOB = "**/coverage/func-*.json"
RTL_DIR_GLOB = "**/coverage/rtl"

Sample = Callable[["Op"], "str | Iterable[str] | None"]


@dataclass(frozen=True)
class Op:
    """One completed operation, as the observer hook reports it."""

    chain: tuple[str, ...]
    views: Mapping[str, RegView]
    reported: Mapping[tuple[str, str], int]
    #: The hardware config of the ``Dla`` that ran it, when known (the hook does not pass it).
    hw: HwConfig | None = None

    def field(self, path: str) -> int:
        """``"UNIT.REGISTER.FIELD"`` of the consumer group the operation ran with."""
        unit, register, name = path.split(".")
        return getattr(getattr(self.views[unit], register), name)


@dataclass(frozen=True)
class Coverpoint:
    name: str
    bins: tuple[str, ...]
    #: The bin (or bins) the operation hits; None when the coverpoint does not apply to it.
    sample: Sample
    #: Bins the golden model cannot complete (it raises UnsupportedError first): listed, not counted.
    ignore: tuple[str, ...] = ()

    def names(self, bins: Iterable[str] | None = None) -> list[str]:
        return [f"{self.name}:{b}" for b in (self.bins if bins is None else bins)]


# ---- coverpoint factories ----------------------------------------------------------------------------------
def _when(sample: Sample, when: Callable[[Op], bool] | None) -> Sample:
    return sample if when is None else (lambda op: sample(op) if when(op) else None)


def custom(name: str, bins: Iterable[str], sample: Sample, *, when: Callable[[Op], bool] | None = None,
           ignore: Iterable[str] = ()) -> Coverpoint:
    return Coverpoint(name, tuple(bins), _when(sample, when), tuple(ignore))


def enum(name: str, path: str, labels: Mapping[int, str], *, when: Callable[[Op], bool] | None = None,
         ignore: Iterable[str] = ()) -> Coverpoint:
    """One bin per field value (several values may share a label); reserved values are not sampled."""
    return custom(name, dict.fromkeys(labels.values()), lambda op: labels.get(op.field(path)), when=when,
                  ignore=ignore)


def flag(name: str, path: str, off: str = "off", on: str = "on", *,
         when: Callable[[Op], bool] | None = None) -> Coverpoint:
    return enum(name, path, {0: off, 1: on}, when=when)


def bucket(name: str, value: Callable[[Op], int], table: Mapping[str, int | range], other: str | None = None, *,
           when: Callable[[Op], bool] | None = None) -> Coverpoint:
    """Bins of a derived integer: each label matches a value or a range; the rest go to ``other``."""
    def sample(op: Op) -> str | None:
        v = value(op)
        for label, match in table.items():
            if v == match if isinstance(match, int) else v in match:
                return label
        return other

    return custom(name, (*table, *((other,) if other else ())), sample, when=when)


def counter(name: str, unit: str, register: str) -> Coverpoint:
    """A status counter the engine reported: ``none`` or ``hit`` (not sampled when it was not reported)."""
    def sample(op: Op) -> str | None:
        v = op.reported.get((unit, register))
        return None if v is None else ("hit" if v else "none")

    return custom(name, ("none", "hit"), sample)


def counters(name: str, unit: str, registers: Mapping[str, str]) -> Coverpoint:
    """One bin per reported counter that is non-zero (an operation may hit several)."""
    def sample(op: Op) -> list[str] | None:
        values = {label: op.reported.get((unit, reg)) for label, reg in registers.items()}
        if all(v is None for v in values.values()):
            return None
        return [label for label, v in values.items() if v]

    return custom(name, registers, sample)


def field_plus_one(path: str) -> Callable[[Op], int]:
    """Sizes, strides and dilations are stored minus one."""
    return lambda op: op.field(path) + 1


# ---- the registry -----------------------------------------------------------------------------------------
COVERPOINTS: Registry[tuple[Coverpoint, ...]] = Registry("engine coverage")


def register(engine: str, *points: Coverpoint) -> None:
    names = [n for cp in points for n in cp.names()]
    dupes = sorted(n for n, k in Counter(names).items() if k > 1)
    if dupes:
        raise ValueError(f"{engine}: duplicate bins {dupes}")
    COVERPOINTS.add(engine, points)


def definitions() -> dict[str, dict[str, list[str]]]:
    """Every engine's bins (``"coverpoint:bin"``) and its ignored bins, in declaration order."""
    return {
        engine: {"bins": [n for cp in points for n in cp.names()],
                 "ignored": [n for cp in points for n in cp.names(cp.ignore)]}
        for engine, points in COVERPOINTS.items()
    }


# ---- sampling -----------------------------------------------------------------------------------------------
class Coverage:
    """Hit counts of one sampling session, itself the ``OP_OBSERVERS`` callback. A process samples into
    ``SESSION``; tests use their own so they never disturb a regression's counts."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: dict[str, Counter] = {}
        self._ops: Counter = Counter()
        self._errors: dict[str, Counter] = {}

    def __call__(self, hw: HwConfig, chain: tuple[str, ...], views: Mapping[str, RegView],
                 reported: Mapping[tuple[str, str], int]) -> None:
        self.observe(chain, views, reported, hw)

    def observe(self, chain: tuple[str, ...], views: Mapping[str, RegView],
                reported: Mapping[tuple[str, str], int], hw: HwConfig | None = None) -> None:
        """Sample one operation. A sampler that fails is counted as an error of its coverpoint, never
        raised: coverage must not change what a test sees."""
        op = Op(tuple(chain), views, reported, hw)
        hits: list[tuple[str, str]] = []
        errors: list[tuple[str, str]] = []
        for engine in op.chain:
            for cp in COVERPOINTS.get(engine, ()):
                try:
                    got = cp.sample(op)
                except Exception as exc:  # noqa: BLE001 - reported in the summary
                    errors.append((engine, f"{cp.name}: {type(exc).__name__}: {exc}"))
                    continue
                for b in [got] if isinstance(got, str) else (got or ()):
                    if b in cp.bins:
                        hits.append((engine, f"{cp.name}:{b}"))
                    else:
                        errors.append((engine, f"{cp.name}: sampled undeclared bin {b!r}"))
        with self._lock:
            self._ops.update(op.chain)
            for engine, name in hits:
                self._counts.setdefault(engine, Counter())[name] += 1
            for engine, message in errors:
                self._errors.setdefault(engine, Counter())[message] += 1

    def reset(self) -> None:
        with self._lock:
            self._counts.clear()
            self._ops.clear()
            self._errors.clear()

    def snapshot(self) -> dict:
        """The counts with every bin definition: the content of a worker file."""
        with self._lock:
            engines = {
                engine: {**spec, "counts": dict(self._counts.get(engine, {})), "ops": self._ops[engine],
                         "errors": dict(self._errors.get(engine, {}))}
                for engine, spec in definitions().items()
            }
        return {"format": FORMAT, "engines": engines}

    def dump(self, path: Path) -> None:
        """Write ``snapshot()`` to ``path`` (a reader never sees a partial file)."""
        from tb.results import write_json

        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        write_json(path, self.snapshot())


#: This process's session: what ``install`` samples into and ``dump`` writes.
SESSION = Coverage()


def install(coverage: Coverage = SESSION) -> None:
    """Sample every operation of every ``Dla`` in this process from now on (idempotent)."""
    if not any(obs is coverage for obs in golden_dla.OP_OBSERVERS):
        golden_dla.OP_OBSERVERS.append(coverage)


def uninstall(coverage: Coverage = SESSION) -> None:
    golden_dla.OP_OBSERVERS[:] = [obs for obs in golden_dla.OP_OBSERVERS if obs is not coverage]


def dump(path: Path, coverage: Coverage = SESSION) -> None:
    """Write this process's bin hit counts (and the bin definitions) as JSON, atomically."""
    coverage.dump(path)


# ---- merging -------------------------------------------------------------------------------------------------
def _accumulate(merged: dict[str, dict], engines: Mapping[str, dict]) -> None:
    for engine, spec in engines.items():
        m = merged.setdefault(engine, {"bins": {}, "ignored": {}, "counts": Counter(), "ops": 0, "errors": Counter()})
        m["bins"].update(dict.fromkeys(spec["bins"]))
        m["ignored"].update(dict.fromkeys(spec["ignored"]))
        m["counts"].update(spec["counts"])
        m["ops"] += spec["ops"]
        m["errors"].update(spec["errors"])


def merge(paths: Iterable[Path]) -> dict:
    """Sum worker files into ``{engine: {"bins": total, "hit": n, "uncovered": [...], "counts": {bin: n},
    "ignored": [...], "ops": n, "errors": {message: n}}}``. Bins are the union of the files' definitions
    and this process's (so an engine no worker ran shows every bin uncovered); ignored bins are counted in
    ``counts`` but not in ``bins``/``hit``/``uncovered``."""
    merged: dict[str, dict] = {}
    _accumulate(merged, {e: {**spec, "counts": {}, "ops": 0, "errors": {}} for e, spec in definitions().items()})
    for path in paths:
        doc = json.loads(Path(path).read_text())
        if doc.get("format") != FORMAT:
            raise ValueError(f"{path}: functional coverage format {doc.get('format')!r}, expected {FORMAT}")
        _accumulate(merged, doc["engines"])
    out = {}
    for engine, m in merged.items():
        counted = [b for b in m["bins"] if b not in m["ignored"]]
        out[engine] = {
            "bins": len(counted),
            "hit": sum(1 for b in counted if m["counts"][b]),
            "uncovered": [b for b in counted if not m["counts"][b]],
            "counts": {b: m["counts"][b] for b in m["bins"]},
            "ignored": list(m["ignored"]),
            "ops": m["ops"],
            "errors": dict(m["errors"]),
        }
    return out


def summarize(run_dir: Path) -> dict:
    """Functional coverage merged over ``run_dir/**/coverage/func-*.json`` and RTL coverage merged over
    ``run_dir/**/coverage/rtl/*.dat`` (into ``run_dir/coverage/rtl-merged``)."""
    from regressions.coverage import rtl

    run_dir = Path(run_dir)
    files = sorted(run_dir.glob(FUNC_GLOB))
    rtl_dirs = sorted(d for d in run_dir.glob(RTL_DIR_GLOB) if d.is_dir())
    return {
        "functional": merge(files),
        "functional_files": len(files),
        "rtl": rtl.summarize(rtl_dirs, out=run_dir / "coverage" / "rtl-merged"),
    }


# ---- the bins ------------------------------------------------------------------------------------------------
PRECISIONS = {0: "int8", 1: "int16", 2: "fp16"}

def _pixel_group(op: Op) -> str:
    """PIXEL_FORMAT families with their own unpacking: one 8/10/12/16-bit lane, four 16-bit lanes, four
    8-bit lanes (RGBA/YUV orders, X variants), packed 10-bit, semi-planar Y + UV planes."""
    f = op.field("CDMA.D_DATAIN_FORMAT.PIXEL_FORMAT")
    if f <= 5:
        return "single_lane"
    if f <= 11:
        return "16bit_x4"
    if f <= 19 or f in (26, 27):
        return "8bit_x4"
    if f <= 25:
        return "10bit_packed"
    return "semi_planar"


def _pixel(op: Op) -> bool:
    return op.field("CDMA.D_DATAIN_FORMAT.DATAIN_FORMAT") == 1
#: Operand sources of an SDP ALU/MUL: the register, or SDP_RDMA per channel (kernel) or per element.
SOURCES = ("reg", "per_kernel", "per_element")
RDMA_OF_STAGE = {"BS": "B", "BN": "N", "EW": "E"}
LUT_PATHS = {"le_hit": "D_PERF_LUT_LE_HIT", "lo_hit": "D_PERF_LUT_LO_HIT", "uflow": "D_PERF_LUT_UFLOW",
             "oflow": "D_PERF_LUT_OFLOW", "hybrid": "D_PERF_LUT_HYBRID"}
CONV_KERNELS = {"1": 1, "3": 3, "5": 5, "7": 7}
PDP_KERNELS = {"1": 1, "2": 2, "3": 3, "4-5": range(4, 6), "6-7": range(6, 8), "8": 8}
STRIDES = {"1": 1, "2": 2}


def _conv_padding(op: Op) -> str:
    """Any side padded: left/top from CSC, right/bottom implied by the output size (how far the last
    window reaches beyond the input)."""
    pads = [op.field("CSC.D_ZERO_PADDING.PAD_LEFT"), op.field("CSC.D_ZERO_PADDING.PAD_TOP")]
    for axis, xy, before in (("WIDTH", "X", pads[0]), ("HEIGHT", "Y", pads[1])):
        size = op.field(f"CDMA.D_DATAIN_SIZE_0.DATAIN_{axis}") + 1
        out = op.field(f"CSC.D_DATAOUT_SIZE_0.DATAOUT_{axis}") + 1
        kernel = op.field(f"CSC.D_WEIGHT_SIZE_EXT_0.WEIGHT_{axis}_EXT") + 1
        stride = op.field(f"CSC.D_CONV_STRIDE_EXT.CONV_{xy}_STRIDE_EXT") + 1
        dilation = op.field(f"CSC.D_DILATION_EXT.{xy}_DILATION_EXT") + 1
        pads.append((out - 1) * stride + (kernel - 1) * dilation + 1 - size - before)  # right, bottom
    return "some" if max(pads) > 0 else "none"


def _conv_channels(op: Op) -> str | None:
    """Whether the last surface of the input is partly filled (channels not a multiple of the atom)."""
    if op.hw is None:
        return None
    channels = op.field("CDMA.D_DATAIN_SIZE_1.DATAIN_CHANNEL") + 1
    return "partial_atom" if channels % op.hw.atom_elements("int8") else "full_atoms"


def _sdp_output(op: Op) -> str | None:
    if "PDP" in op.chain:
        return "pdp_flying"
    eql = (not op.field("SDP.D_DP_EW_CFG.EW_BYPASS") and not op.field("SDP.D_DP_EW_CFG.EW_ALU_BYPASS")
           and op.field("SDP.D_DP_EW_CFG.EW_ALU_ALGO") == 3)
    return None if eql else "memory"  # EQL mode writes nothing (ew_alu:eql covers it)


def _sdp_stage(stage: str) -> tuple[Coverpoint, ...]:
    """The coverpoints of one SDP sub-unit: BS (X1), BN (X2) or EW (Y)."""
    s, cfg, rdma = stage.lower(), f"SDP.D_DP_{stage}_CFG.{stage}", RDMA_OF_STAGE[stage]
    algos = {0: "max", 1: "min", 2: "sum", 3: "eql" if stage == "EW" else "sum"}  # X stages: 3 acts as SUM

    def on(op: Op) -> bool:
        return not op.field(f"{cfg}_BYPASS")

    def unit_on(unit: str) -> Callable[[Op], bool]:
        return lambda op: on(op) and not op.field(f"{cfg}_{unit}_BYPASS")

    def source(unit: str) -> Sample:
        def sample(op: Op) -> str:
            if not op.field(f"SDP.D_DP_{stage}_{unit}_CFG.{stage}_{unit}_SRC"):
                return "reg"
            return "per_element" if op.field(f"SDP_RDMA.D_{rdma}RDMA_CFG.{rdma}RDMA_DATA_MODE") else "per_kernel"
        return sample

    def alu(op: Op) -> str:
        return "bypass" if op.field(f"{cfg}_ALU_BYPASS") else algos[op.field(f"{cfg}_ALU_ALGO")]

    def mul(op: Op) -> str:
        return "bypass" if op.field(f"{cfg}_MUL_BYPASS") else ("prelu" if op.field(f"{cfg}_MUL_PRELU") else "mul")

    def mem(unit: str) -> Callable[[Op], bool]:
        return lambda op: unit_on(unit)(op) and source(unit)(op) != "reg"

    points = [
        flag(s, f"{cfg}_BYPASS", off="active", on="bypass"),
        custom(f"{s}_alu", ("bypass", *dict.fromkeys(algos.values())), alu, when=on),
        custom(f"{s}_alu_src", SOURCES, source("ALU"), when=unit_on("ALU")),
        custom(f"{s}_mul", ("bypass", "mul", "prelu"), mul, when=on),
        custom(f"{s}_mul_src", SOURCES, source("MUL"), when=unit_on("MUL")),
    ]
    if stage == "EW":
        points += [
            flag("ew_alu_cvt", "SDP.D_DP_EW_ALU_CFG.EW_ALU_CVT_BYPASS", off="convert", on="bypass", when=mem("ALU")),
            flag("ew_mul_cvt", "SDP.D_DP_EW_MUL_CFG.EW_MUL_CVT_BYPASS", off="convert", on="bypass", when=mem("MUL")),
            flag("ew_lut", f"{cfg}_LUT_BYPASS", off="used", on="bypass", when=on),
        ]
    else:
        points.append(flag(f"{s}_relu", f"{cfg}_RELU_BYPASS", off="relu", on="bypass", when=on))
    return tuple(points)


def _sdp_lut_used(op: Op) -> bool:
    return not op.field("SDP.D_DP_EW_CFG.EW_BYPASS") and not op.field("SDP.D_DP_EW_CFG.EW_LUT_BYPASS")


def _pdp_padded(op: Op) -> bool:
    return op.views["PDP"].word("D_POOLING_PADDING_CFG") != 0


def _pdp_pad_value(op: Op) -> str:
    """Average pooling adds PAD_VALUE_nX for n padded taps (max/min ignore padding)."""
    values = (op.views["PDP"].word(f"D_POOLING_PADDING_VALUE_{n}_CFG") for n in range(1, 8))
    return "nonzero" if any(values) else "zero"


register(
    "CONV",
    enum("format", "CDMA.D_DATAIN_FORMAT.DATAIN_FORMAT", {0: "feature", 1: "pixel"}),
    enum("precision", "CDMA.D_MISC_CFG.PROC_PRECISION", PRECISIONS),
    enum("conv_mode", "CDMA.D_MISC_CFG.CONV_MODE", {0: "direct", 1: "winograd"}),
    enum("weight_format", "CDMA.D_WEIGHT_FORMAT.WEIGHT_FORMAT", {0: "uncompressed", 1: "compressed"}),
    bucket("batches", field_plus_one("CDMA.D_BATCH_NUMBER.BATCHES"), {"1": 1}, ">1"),
    custom("pixel_format", ("single_lane", "16bit_x4", "8bit_x4", "10bit_packed", "semi_planar"), _pixel_group,
           when=_pixel),
    flag("pixel_mean", "CDMA.D_MEAN_FORMAT.MEAN_FORMAT", when=_pixel),
    flag("pixel_signed", "CDMA.D_DATAIN_FORMAT.PIXEL_SIGN_OVERRIDE", when=_pixel),
    bucket("kernel_w", field_plus_one("CSC.D_WEIGHT_SIZE_EXT_0.WEIGHT_WIDTH_EXT"), CONV_KERNELS, "other"),
    bucket("kernel_h", field_plus_one("CSC.D_WEIGHT_SIZE_EXT_0.WEIGHT_HEIGHT_EXT"), CONV_KERNELS, "other"),
    bucket("stride_x", field_plus_one("CSC.D_CONV_STRIDE_EXT.CONV_X_STRIDE_EXT"), STRIDES, ">2"),
    bucket("stride_y", field_plus_one("CSC.D_CONV_STRIDE_EXT.CONV_Y_STRIDE_EXT"), STRIDES, ">2"),
    bucket("dilation_x", field_plus_one("CSC.D_DILATION_EXT.X_DILATION_EXT"), {"1": 1}, ">1"),
    bucket("dilation_y", field_plus_one("CSC.D_DILATION_EXT.Y_DILATION_EXT"), {"1": 1}, ">1"),
    custom("padding", ("none", "some"), _conv_padding),
    custom("pad_value", ("zero", "nonzero"),
           lambda op: "nonzero" if op.field("CSC.D_ZERO_PADDING_VALUE.PAD_VALUE") & 0xFF else "zero",
           when=lambda op: _conv_padding(op) == "some"),
    custom("channels", ("full_atoms", "partial_atom"), _conv_channels),
    flag("input_cvt", "CDMA.D_CVT_CFG.CVT_EN"),
    flag("data_reuse", "CDMA.D_MISC_CFG.DATA_REUSE"),
    flag("weight_reuse", "CDMA.D_MISC_CFG.WEIGHT_REUSE"),
    flag("skip_data_rls", "CDMA.D_MISC_CFG.SKIP_DATA_RLS"),
    flag("skip_weight_rls", "CDMA.D_MISC_CFG.SKIP_WEIGHT_RLS"),
    bucket("clip_truncate", lambda op: op.field("CACC.D_CLIP_CFG.CLIP_TRUNCATE"), {"0": 0}, ">0"),
    counter("saturation", "CACC", "D_OUT_SATURATION"),
    custom("output", ("sdp_to_memory", "sdp_to_pdp"),
           lambda op: "sdp_to_pdp" if "PDP" in op.chain else "sdp_to_memory"),
)

register(
    "SDP",
    enum("precision", "SDP.D_DATA_FORMAT.PROC_PRECISION", PRECISIONS),
    custom("input", ("memory", "conv_flying"), lambda op: "conv_flying" if "CONV" in op.chain else "memory"),
    custom("output", ("memory", "pdp_flying"), _sdp_output),
    *_sdp_stage("BS"),
    *_sdp_stage("BN"),
    *_sdp_stage("EW"),
    enum("lut_le_function", "SDP.S_LUT_CFG.LUT_LE_FUNCTION", {0: "exponent", 1: "linear"}, when=_sdp_lut_used),
    counters("lut_paths", "SDP", LUT_PATHS),
    counter("saturation", "SDP", "D_PERF_OUT_SATURATION"),
)

register(
    "PDP",
    enum("precision", "PDP.D_DATA_FORMAT.INPUT_DATA", PRECISIONS),
    enum("method", "PDP.D_OPERATION_MODE_CFG.POOLING_METHOD", {0: "avg", 1: "max", 2: "min"}),
    bucket("kernel_w", field_plus_one("PDP.D_POOLING_KERNEL_CFG.KERNEL_WIDTH"), PDP_KERNELS),
    bucket("kernel_h", field_plus_one("PDP.D_POOLING_KERNEL_CFG.KERNEL_HEIGHT"), PDP_KERNELS),
    bucket("stride_w", field_plus_one("PDP.D_POOLING_KERNEL_CFG.KERNEL_STRIDE_WIDTH"), STRIDES, ">2"),
    bucket("stride_h", field_plus_one("PDP.D_POOLING_KERNEL_CFG.KERNEL_STRIDE_HEIGHT"), STRIDES, ">2"),
    custom("padding", ("none", "some"), lambda op: "some" if _pdp_padded(op) else "none"),
    custom("avg_pad_value", ("zero", "nonzero"), _pdp_pad_value,
           when=lambda op: _pdp_padded(op) and op.field("PDP.D_OPERATION_MODE_CFG.POOLING_METHOD") == 0),
    bucket("split", field_plus_one("PDP.D_OPERATION_MODE_CFG.SPLIT_NUM"), {"none": 1, "2": 2}, ">2"),
    custom("input", ("memory", "sdp_flying"), lambda op: "sdp_flying" if "SDP" in op.chain else "memory"),
)

register(
    "CDP",
    enum("precision", "CDP.D_DATA_FORMAT.INPUT_DATA_TYPE", PRECISIONS),
    enum("normalz_len", "CDP.D_LRN_CFG.NORMALZ_LEN", {0: "3", 1: "5", 2: "7", 3: "9"}),
    flag("sqsum", "CDP.D_FUNC_BYPASS.SQSUM_BYPASS", off="on", on="bypass"),
    flag("mul", "CDP.D_FUNC_BYPASS.MUL_BYPASS", off="on", on="bypass"),
    enum("lut_le_function", "CDP.S_LUT_CFG.LUT_LE_FUNCTION", {0: "exponent", 1: "linear"}),
    counters("lut_paths", "CDP", LUT_PATHS),
    counter("saturation", "CDP", "D_OUT_SATURATION"),
)

register(
    "BDMA",
    enum("src_ram", "BDMA.CFG_CMD.SRC_RAM_TYPE", {0: "cvsram", 1: "dram"}),
    enum("dst_ram", "BDMA.CFG_CMD.DST_RAM_TYPE", {0: "cvsram", 1: "dram"}),
    bucket("line_atoms", field_plus_one("BDMA.CFG_LINE.SIZE"), {"1": 1, "2-8": range(2, 9)}, ">8"),
    bucket("lines", field_plus_one("BDMA.CFG_LINE_REPEAT.NUMBER"), {"1": 1}, ">1"),
    bucket("surfaces", field_plus_one("BDMA.CFG_SURF_REPEAT.NUMBER"), {"1": 1}, ">1"),
)


def _rubik_mode(mode: int) -> Callable[[Op], bool]:
    return lambda op: op.field("RBK.D_MISC_CFG.RUBIK_MODE") == mode


def _rubik_channels(op: Op) -> str:
    """Split and merge fill a partial last surface (zero lanes / fewer planes); contract copies atoms whole."""
    per_atom = 32 if op.field("RBK.D_MISC_CFG.IN_PRECISION") == 0 else 16
    field = "DATAOUT_SIZE_1.DATAOUT_CHANNEL" if _rubik_mode(1)(op) else "DATAIN_SIZE_1.DATAIN_CHANNEL"
    return "partial_atom" if (op.field(f"RBK.D_{field}") + 1) % per_atom else "full_atoms"


register(
    "RUBIK",
    enum("mode", "RBK.D_MISC_CFG.RUBIK_MODE", {0: "contract", 1: "split", 2: "merge"}),
    enum("precision", "RBK.D_MISC_CFG.IN_PRECISION", PRECISIONS),
    enum("src_ram", "RBK.D_DAIN_RAM_TYPE.DATAIN_RAM_TYPE", {0: "cvsram", 1: "dram"}),
    enum("dst_ram", "RBK.D_DAOUT_RAM_TYPE.DATAOUT_RAM_TYPE", {0: "cvsram", 1: "dram"}),
    # the cmod writes contract lines whole up to x stride 8, in 8x8 (column, phase) blocks above it
    bucket("stride_x", field_plus_one("RBK.D_DECONV_STRIDE.DECONV_X_STRIDE"), {"1": 1, "2-8": range(2, 9)}, ">8",
           when=_rubik_mode(0)),
    bucket("stride_y", field_plus_one("RBK.D_DECONV_STRIDE.DECONV_Y_STRIDE"), {"1": 1}, ">1", when=_rubik_mode(0)),
    # split and merge move lines in chunks of 64 elements
    bucket("width", field_plus_one("RBK.D_DATAIN_SIZE_0.DATAIN_WIDTH"), {"1-64": range(1, 65)}, ">64",
           when=lambda op: not _rubik_mode(0)(op)),
    custom("channels", ("full_atoms", "partial_atom"), _rubik_channels, when=lambda op: not _rubik_mode(0)(op)),
)
