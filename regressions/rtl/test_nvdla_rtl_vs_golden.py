"""Golden vs NVDLA's own nv_small RTL (Verilator) on hypothesis-drawn operations: byte-identical outputs.

Drawn in the pytest process with the fuzz properties' strategies (``regressions.fuzz.engines``): single
layers of direct CONV (sizes, kernels, strides, dilation, padding, partial atoms, CDMA input CVT, CBUF bank
splits), SDP (X1/X2, REG and MEM operands; nv_small has no EW/LUT), PDP (split width too) and CDP; SDP -> PDP
on the fly (``regressions.lib.programs.sdp_pdp``); and sequences of operations played op after op on one DUT
without reset, so the CBUF state one convolution leaves (banks, reuse, release) meets the next: 2-4 drawn layers
back to back (``sequence_trace``), convolution pairs where the second reuses the input or weights the first kept
in the CBUF (``ReusePair``), and the DLA tasks of compiled random networks (``regressions.fuzz.networks``) with two
or more operations. Each becomes an NVDLA trace
checking the golden model's CRC of every output; all traces of a kind run in ``SIM_WORKERS`` simulations of
one build (STYLE: configs go to the simulator as data).

``DLA_RTL_DIFF_EXAMPLES`` (20 in ``make test``, 200 at level ci) sizes the draws: half of it per single-layer
engine (ci: 400 layers), a quarter each SDP->PDP layers, drawn-layer sequences, reuse pairs and network
sequences (ci: 50 each). Derandomized
unless ``FUZZ_SEED`` is set. A layer that differs is saved under ``regressions/found/<property>/`` by
``regressions.fuzz.found`` (replayed first on later runs); a differing SDP->PDP layer or sequence is saved as
its trace under ``regressions/found/nvdla-rtl/`` (``dla trace DIR --dut nvdla-nv_small`` replays it).
Failures on RTL are not shrunk (every shrink step would be a simulation).
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import tempfile
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import pytest
from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis import strategies as st

from app.targets import register_simulators
from golden import ConfigError, Dla, get_config
from golden.config import HwConfig
from regressions.fuzz import found
from regressions.fuzz.engines import CDP, CONV, PDP, SDP
from regressions.fuzz.properties import PROPERTIES, Property
from regressions.lib.golden_verdict import golden_trace
from regressions.lib.programs import ConvLayer, LayerTest, SdpLayer, program_conv
from regressions.lib.programs.sdp_pdp import program_sdp_pdp
from regressions.lib.reference import sdp as ref_sdp
from regressions.lib.reference.arith import OutsideCmodDomain
from regressions.lib.strategies.pdp import pdp_examples
from regressions.lib.strategies.sdp import _output_cvt, _x_stage
from regressions.rtl.nvdla_rtl import CONFIG, SIM_WORKERS, SIMULATOR, nvdla_rtl_options
from regressions.rtl.nvdla_rtl import no_rtl_coverage  # noqa: F401 (a fixture, used by pytestmark)
from runtime.suite import PASS, Outcome, run_batch

register_simulators()  # run_batch and Network.run find the simulators by name

pytestmark = [pytest.mark.rtl, pytest.mark.usefixtures("no_rtl_coverage")]
EXAMPLES = int(os.environ.get("DLA_RTL_DIFF_EXAMPLES", "20"))
FUZZ_SEED = os.environ.get("FUZZ_SEED", "").strip()
HW = get_config(CONFIG)
#: Single layers per engine, SDP->PDP layers, multi-op sequences.
PER_ENGINE = max(2, EXAMPLES // 2)
FLYING = max(2, EXAMPLES // 4)
SEQUENCES = max(2, EXAMPLES // 4)
#: Random networks drawn at most per wanted sequence (some compile to single-op tasks only).
NETWORKS_PER_SEQUENCE = 3
FOUND_RTL = found.FOUND_DIR / "nvdla-rtl"


def draw(strategy: st.SearchStrategy, count: int, salt: str) -> list[Any]:
    """``count`` examples of ``strategy``, one per hypothesis example (derandomized, or from ``FUZZ_SEED``)."""
    drawn: list[Any] = []

    @settings(max_examples=count, deadline=None, database=None, derandomize=not FUZZ_SEED,
              suppress_health_check=list(HealthCheck), phases=[Phase.generate])
    @given(example=strategy)
    def collect(example: Any) -> None:
        drawn.append(example)

    if FUZZ_SEED:
        digest = hashlib.sha256(f"{FUZZ_SEED}:{salt}".encode()).digest()
        collect = seed(int.from_bytes(digest[:8], "little"))(collect)
    collect()
    return drawn[:count]


@dataclass
class Case:
    """One trace to play: what it came from, and how to save it when the RTL disagrees."""

    name: str
    cfg: Path
    save: Callable[[str], str]
    #: Facts for the report (bank splits of the convolutions in a sequence, ...).
    facts: dict


def run_cases(cases: list[Case], directory: Path) -> list[tuple[Case, Outcome]]:
    jobs = [(str(c.cfg), CONFIG, SIMULATOR) for c in cases]
    options = nvdla_rtl_options(runs_root=str(directory / "runs"))
    outcomes = list(run_batch(SIMULATOR, jobs, workers=SIM_WORKERS, options=options))
    assert len(outcomes) == len(cases)
    return list(zip(cases, outcomes))


def report(pairs: list[tuple[Case, Outcome]], what: str) -> None:
    """Save every disagreement, then fail naming each (with where it was saved)."""
    bad = []
    for case, outcome in pairs:
        if outcome.status != PASS:
            where = case.save(f"{outcome.status} {outcome.detail}")
            bad.append(f"{case.name}: {outcome.status} {outcome.detail} {case.facts or ''} -> {where}")
    assert not bad, f"{len(bad)} of {len(pairs)} {what} differ from golden on NVDLA's RTL:\n" + "\n".join(bad)


# ---- single layers: the engine properties' strategies and programs --------------------------------------------
def layer_cases(prop: Property, examples: list[Any], directory: Path) -> list[Case]:
    cases = []
    for i, example in enumerate(examples):
        try:
            program, _ = prop.program(HW, example)
        except OutsideCmodDomain:  # undefined in the cmod: the reference refuses it, so does the fuzzer
            continue
        name = f"{i:03d}_{prop.name}"
        cfg = golden_trace(HW, program, directory / CONFIG, name)

        def save(error: str, example: Any = example) -> str:
            return str(found.save(prop, CONFIG, example, f"NVDLA RTL differs from golden: {error}",
                                  seed=int(FUZZ_SEED, 0) if FUZZ_SEED else None,
                                  extra={"target": SIMULATOR, "dut": "nvdla-nv_small"}))

        cases.append(Case(name, cfg, save, {}))
    return cases


@pytest.mark.parametrize("prop", [CONV, SDP, PDP, CDP], ids=lambda p: p.name)
def test_single_layers_equal_golden_on_nvdla_rtl(prop: Property, tmp_path: Path) -> None:
    nvdla_rtl_options()  # skip early when the RTL or Verilator is missing
    saved = list(found.examples(PROPERTIES, prop.name, CONFIG))  # earlier failures first
    examples = saved + draw(prop.strategy(HW), PER_ENGINE, prop.name)
    cases = layer_cases(prop, examples, tmp_path)
    assert len(cases) >= PER_ENGINE * 0.9, f"only {len(cases)} of {len(examples)} {prop.name} layers programmable"
    report(run_cases(cases, tmp_path), f"{prop.name} layers")


# ---- SDP -> PDP on the fly ----------------------------------------------------------------------------------
@st.composite
def sdp_pdp_layers(draw_, hw: HwConfig) -> tuple[SdpLayer, Any]:
    """A pooling layer (unsplit, default reciprocals) and an SDP X1/X2 layer of its input's shape feeding it."""
    pool = draw_(pdp_examples(hw, splits=False, recips=False)).layer
    x = pool.x
    size = draw_(st.sampled_from([1, 2]))
    x1, bits = _x_stage(draw_, hw, "BS", x.shape, size, 8)
    x2, bits = _x_stage(draw_, hw, "BN", x.shape, size, bits)
    params = ref_sdp.SdpParams(x1=x1, x2=x2, **_output_cvt(draw_, hw, bits))
    return SdpLayer(x, params, operand_bytes=size), pool


def save_trace(kind: str, cfg: Path, facts: dict, error: str) -> str:
    """Copy a failing trace's folder to ``regressions/found/nvdla-rtl/<kind>-<hash>/nv_small/<name>``."""
    digest = hashlib.sha256(b"".join(p.read_bytes() for p in sorted(cfg.parent.iterdir()))).hexdigest()[:10]
    target = FOUND_RTL / f"{kind}-{digest}" / CONFIG / cfg.parent.name
    if target.exists():
        shutil.rmtree(target)
    shutil.copytree(cfg.parent, target)
    (target.parent.parent / "failure.txt").write_text(json.dumps({"kind": kind, "error": error, **facts},
                                                                 indent=1, default=str) + "\n")
    return str(target)


def test_sdp_to_pdp_on_the_fly_equals_golden_on_nvdla_rtl(tmp_path: Path) -> None:
    nvdla_rtl_options()
    cases = []
    for i, (sdp, pool) in enumerate(draw(sdp_pdp_layers(HW), FLYING, "sdp_pdp")):
        program = program_sdp_pdp(HW, sdp, pool)
        name = f"{i:03d}_sdp_pdp"
        try:
            cfg = golden_trace(HW, program, tmp_path / CONFIG, name)
        except ConfigError:  # a PDP golden says the RTL computes differently (docs/nvdla-rtl-vs-cmod.md P4)
            continue
        facts = {"shape": sdp.x.shape, "pool": (pool.method, pool.kernel, pool.stride, pool.pad)}
        cases.append(Case(name, cfg, lambda e, cfg=cfg, facts=facts: save_trace("sdp_pdp", cfg, facts, e), facts))
    report(run_cases(cases, tmp_path), "SDP->PDP layers")


# ---- sequences of drawn layers: 2-4 single-layer programs back to back, no reset in between ---------------------
_POINTER = re.compile(r"NVDLA_(\w+)\.S_POINTER_0")
_OP_ENABLE = re.compile(r"NVDLA_(\w+)\.D_OP_ENABLE_0")


def layer_sequences(hw: HwConfig) -> st.SearchStrategy[list[tuple[Property, Any]]]:
    """2-4 layers, convolutions three times as likely as each other engine, so consecutive convolutions (with
    the same or different CBUF bank splits, as the conv strategy draws them) are common."""
    one = st.one_of(*(prop.strategy(hw).map(lambda e, prop=prop: (prop, e))
                      for prop in (CONV, CONV, CONV, SDP, PDP, CDP)))
    return st.lists(one, min_size=2, max_size=4)


def sequence_trace(steps: list[tuple[str, LayerTest]], directory: Path, name: str) -> tuple[Path, dict]:
    """One trace playing ``steps`` (name, program) in order on one DUT: each loads its memory image (the
    programs share addresses), programs the ping-pong group its units' CONSUMER pointers have reached (every
    enabled unit flips after its operation), waits for its interrupt and checks golden's CRC of its output
    before the next overwrites it. Golden runs the same writes on one ``Dla``."""
    from runtime.trace import write_dat

    dla = Dla(HW)
    group: dict[str, int] = {}
    lines: list[str] = []
    directory.mkdir(parents=True, exist_ok=True)
    for i, (step, program) in enumerate(steps):
        for k, (addr, data) in enumerate(program.memory):
            dla.mem.write(addr, data)
            write_dat(directory / f"{name}_{i}_{k}.dat", data)
            lines.append(f'mem_load(pri_mem, {addr:#x}, "{name}_{i}_{k}.dat");')
        enabled = []
        for reg, value in program.writes:
            pointer = _POINTER.fullmatch(reg)
            if pointer:
                value = group.get(pointer.group(1), 0)
            enable = _OP_ENABLE.fullmatch(reg)
            if enable and value:
                enabled.append(enable.group(1))
            dla.write_reg(dla.map.resolve(reg)[0], value)
            lines.append(f"reg_write({reg}, {value:#x});")
        unit = program.intr.rsplit("_", 1)[0]
        lines.append(f"intr_notify({unit}_{group.get(unit, 0)}, sync_id_{i});")
        out = dla.mem.dram.read_bytes(*program.output)
        lines.append(f"check_crc(sync_id_{i}, pri_mem, {program.output[0]:#x}, {program.output[1]:#x}, "
                     f"{zlib.crc32(out):#010x});  // {step}")
        for u in enabled:
            group[u] = group.get(u, 0) ^ 1
    cfg = directory / f"{name}.cfg"
    cfg.write_text("\n".join(lines) + "\n")
    facts = sequence_facts(cfg)
    facts["layers"] = [step for step, _ in steps]
    return cfg, facts


def layer_steps(layers: list[tuple[Property, Any]]) -> list[tuple[str, LayerTest]]:
    return [(prop.name, prop.program(HW, example)[0]) for prop, example in layers]


def test_layer_sequences_equal_golden_on_nvdla_rtl(tmp_path: Path) -> None:
    nvdla_rtl_options()
    cases = []
    for i, layers in enumerate(draw(layer_sequences(HW), SEQUENCES, "layer_sequences")):
        name = f"{i:03d}_seq"
        try:
            cfg, facts = sequence_trace(layer_steps(layers), tmp_path / CONFIG / name, name)
        except (OutsideCmodDomain, ConfigError):  # undefined in the cmod; a state golden says the RTL refuses
            continue
        cases.append(Case(name, cfg, lambda e, cfg=cfg, facts=facts: save_trace("layer_sequence", cfg, facts, e),
                          facts))
    assert len(cases) >= SEQUENCES * 0.9, f"only {len(cases)} sequences programmable"
    print(f"{len(cases)} layer sequences; {sum(c.facts['same_bank_convs'] > 0 for c in cases)} with convolutions "
          f"sharing a CBUF bank split, {sum(len(set(c.facts['conv_banks'])) > 1 for c in cases)} with different ones")
    report(run_cases(cases, tmp_path), "layer sequences")


# ---- CBUF reuse: a convolution keeps its input or weights, the next one takes them ------------------------------
@dataclass(frozen=True)
class ReusePair:
    """Two convolutions of one shape: ``first`` keeps its input (``kept="data"``: SKIP_DATA_RLS) or weights
    (``"weights"``: SKIP_WEIGHT_RLS) in the CBUF and ``second``, with new weights or a new input, takes them
    (DATA_REUSE / WEIGHT_REUSE: CDMA fetches nothing, CSC reads what is resident)."""

    first: ConvLayer
    second: ConvLayer
    kept: str


@st.composite
def conv_reuse_pairs(draw_, hw: HwConfig) -> ReusePair:
    from dataclasses import replace

    import numpy as np

    layer = draw_(CONV.strategy(hw))
    kept = draw_(st.sampled_from(["data", "weights"]))
    rng = np.random.default_rng(draw_(st.integers(0, 2**32 - 1)))
    changed = "w" if kept == "data" else "x"
    fresh = rng.integers(-128, 128, size=getattr(layer, changed).shape).astype(getattr(layer, changed).dtype)
    return ReusePair(layer, replace(layer, **{changed: fresh}), kept)


def reuse_steps(pair: ReusePair) -> list[tuple[str, LayerTest]]:
    from compiler.codegen.conv import CbufReuse

    keep = CbufReuse(keep_data=True) if pair.kept == "data" else CbufReuse(keep_weights=True)
    take = CbufReuse(reuse_data=True) if pair.kept == "data" else CbufReuse(reuse_weights=True)
    return [("conv keeps " + pair.kept, program_conv(HW, pair.first, reuse=keep)),
            ("conv reuses " + pair.kept, program_conv(HW, pair.second, reuse=take))]


def test_conv_cbuf_reuse_equals_golden_on_nvdla_rtl(tmp_path: Path) -> None:
    nvdla_rtl_options()
    cases = []
    for i, pair in enumerate(draw(conv_reuse_pairs(HW), SEQUENCES, "conv_reuse")):
        name = f"{i:03d}_reuse_{pair.kept}"
        try:
            cfg, facts = sequence_trace(reuse_steps(pair), tmp_path / CONFIG / name, name)
        except ConfigError:  # golden: the RTL would not compute this pair as written (named register)
            continue
        cases.append(Case(name, cfg, lambda e, cfg=cfg, facts=facts: save_trace("conv_reuse", cfg, facts, e), facts))
    assert len(cases) >= SEQUENCES * 0.9, f"only {len(cases)} of {SEQUENCES} reuse pairs playable"
    report(run_cases(cases, tmp_path), "convolution pairs sharing CBUF data or weights")


# ---- sequences: the multi-op DLA tasks of compiled random networks ------------------------------------------------
_BANK = re.compile(r"reg_write\(NVDLA_CDMA\.D_BANK_0, (0x[0-9a-f]+)\);")
_ENABLE = re.compile(r"reg_write\(NVDLA_(\w+)\.D_OP_ENABLE_0, 0x1\);")


def sequence_facts(cfg: Path) -> dict:
    """Operations of a task trace and its convolutions' CDMA.D_BANK. A convolution enables CDMA (and SDP, on
    the fly behind CACC); every other SDP, PDP or CDP enable is an operation of its own."""
    text = cfg.read_text()
    enables = _ENABLE.findall(text)
    convs = enables.count("CDMA")
    ops = ["CONV"] * convs + [u for u in enables if u in ("PDP", "CDP")] + ["SDP"] * (enables.count("SDP") - convs)
    banks = [int(b, 16) for b in _BANK.findall(text)]
    return {"ops": len(ops), "engines": sorted(ops), "conv_banks": banks,
            "same_bank_convs": len(banks) - len(set(banks))}


def sequence_cases(count: int, directory: Path) -> list[Case]:
    from compiler.driver import compile_graph
    from compiler.errors import CompileError
    from compiler.frontend import onnx as onnx_frontend
    from regressions.fuzz import networks
    from runtime.executor import Network

    cases: list[Case] = []
    for n, spec in enumerate(draw(networks.networks(HW), count * NETWORKS_PER_SEQUENCE, "sequences")):
        calib, x = networks._feeds(spec)
        try:
            msg, _, _ = compile_graph(onnx_frontend.load(networks.build_model(spec)), CONFIG, calib_inputs=calib)
        except CompileError:  # the golden fuzz property reports these; here only runnable networks count
            continue
        for cfg in Network(msg).emit_trace({"x": x}, directory / f"net{n:03d}"):
            facts = sequence_facts(cfg)
            if facts["ops"] < 2:
                continue
            facts["network"] = networks.to_json(spec)
            cases.append(Case(f"net{n:03d}/{cfg.parent.name}", cfg,
                              lambda e, cfg=cfg, facts=facts: save_trace("sequence", cfg, facts, e), facts))
        if len(cases) >= count:
            break
    return cases[:count]


def test_network_sequences_equal_golden_on_nvdla_rtl(tmp_path: Path) -> None:
    nvdla_rtl_options()
    cases = sequence_cases(SEQUENCES, tmp_path)
    assert len(cases) == SEQUENCES, f"only {len(cases)} multi-op tasks drawn"
    ops = [c.facts["ops"] for c in cases]
    print(f"{len(cases)} sequences of {min(ops)}-{max(ops)} ops; "
          f"{sum(c.facts['same_bank_convs'] > 0 for c in cases)} with convolutions sharing a CBUF bank split")
    report(run_cases(cases, tmp_path), "operation sequences")
