"""Functional coverage bins, hit by real register programs on the golden model, and the worker-file merge."""
from __future__ import annotations

import json

import numpy as np
import pytest

from compiler.hwparams import SdpParams, XStage
from golden import Dla, get_config
from golden.dla import OP_OBSERVERS
from golden.engines import load_engines
from golden.lut import LutRegisters
from regressions.coverage import functional
from regressions.coverage.functional import Coverage
from regressions.lib import programs

HW = get_config("nv_small")
ATOM = HW.atom_elements()
#: SDP D_PERF_ENABLE: PERF_LUT_EN | PERF_SAT_EN (the hardware counts only when asked).
SDP_PERF_LUT_SAT = 0b0110


@pytest.fixture
def cov():
    """A private session, so a regression's own counts (``functional.SESSION``) are never touched."""
    session = Coverage()
    functional.install(session)
    yield session
    functional.uninstall(session)


def counts(session: Coverage, engine: str) -> dict[str, int]:
    return session.snapshot()["engines"][engine]["counts"]


def cube(c: int, h: int, w: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(-128, 128, (c, h, w))


def run_sdp(params: SdpParams, x: np.ndarray, perf: int = 0) -> Dla:
    """``program_sdp`` turns the LUT and saturation counters on; ``perf`` replaces its D_PERF_ENABLE."""
    program = programs.program_sdp(HW, programs.SdpLayer(x, params))
    at = [name for name, _ in program.writes].index("NVDLA_SDP.D_PERF_ENABLE_0")
    writes = program.writes
    writes[at] = ("NVDLA_SDP.D_PERF_ENABLE_0", perf)
    program.writes = writes
    dla = Dla(HW)
    program.run(dla)
    return dla


# ---- the declarations ---------------------------------------------------------------------------------------
def test_every_engine_of_the_model_has_coverpoints():
    assert set(functional.COVERPOINTS) == set(load_engines())
    for engine, spec in functional.definitions().items():
        assert len(spec["bins"]) == len(set(spec["bins"])), engine
        assert set(spec["ignored"]) <= set(spec["bins"]), engine


def test_install_is_idempotent():
    session = Coverage()
    try:
        functional.install(session)
        functional.install(session)
        assert sum(obs is session for obs in OP_OBSERVERS) == 1
    finally:
        functional.uninstall(session)
    assert all(obs is not session for obs in OP_OBSERVERS)


# ---- bins hit by real programs ---------------------------------------------------------------------------------
def test_pdp_max_pool_hits_the_max_bin_only(cov):
    programs.program_pdp(HW, programs.PoolLayer(cube(3, 6, 6), "max", (2, 2), (2, 2))).run(Dla(HW))
    pdp = counts(cov, "PDP")
    assert pdp["method:max"] == 1
    assert "method:avg" not in pdp and "method:min" not in pdp
    for hit in ("kernel_w:2", "kernel_h:2", "stride_w:2", "stride_h:2", "padding:none", "split:none", "input:memory"):
        assert pdp[hit] == 1, hit
    assert "avg_pad_value:zero" not in pdp  # only sampled for padded average pooling


def test_padded_average_pool_samples_its_pad_value(cov):
    layer = programs.PoolLayer(cube(8, 5, 7), "avg", (3, 3), (1, 3), pad=(1, 1, 1, 1), pad_values=(5,) * 7)
    programs.program_pdp(HW, layer).run(Dla(HW))
    pdp = counts(cov, "PDP")
    assert pdp["method:avg"] == pdp["padding:some"] == pdp["avg_pad_value:nonzero"] == 1
    assert pdp["kernel_w:3"] == pdp["stride_w:>2"] == pdp["stride_h:1"] == 1


def test_sdp_saturation_bin_follows_the_reported_counter(cov):
    x = cube(8, 3, 4)
    saturating = SdpParams(x1=XStage(bypass=False, mul_bypass=False, mul_operand=1000))  # |x| * 1000 > 2^16
    gentle = SdpParams(x1=XStage(bypass=False, mul_bypass=False, mul_operand=2))
    dla = run_sdp(saturating, x, SDP_PERF_LUT_SAT)
    assert dla.read("NVDLA_SDP.D_PERF_OUT_SATURATION_0") > 0
    assert counts(cov, "SDP")["saturation:hit"] == 1
    assert "saturation:none" not in counts(cov, "SDP")

    cov.reset()
    dla = run_sdp(gentle, x, SDP_PERF_LUT_SAT)
    assert dla.read("NVDLA_SDP.D_PERF_OUT_SATURATION_0") == 0
    assert counts(cov, "SDP")["saturation:none"] == 1
    assert "saturation:hit" not in counts(cov, "SDP")

    cov.reset()  # counters off (PERF_SAT_EN=0): nothing to sample, whatever the data did
    run_sdp(saturating, x)
    sdp = counts(cov, "SDP")
    assert "saturation:hit" not in sdp and "saturation:none" not in sdp
    assert sdp["bs:active"] == sdp["bs_mul:mul"] == sdp["bs_mul_src:reg"] == sdp["input:memory"] == 1


def test_sdp_operand_sources_come_from_sdp_rdma(cov):
    x = cube(8, 3, 4)
    bs = XStage(bypass=False, alu_bypass=False, alu_operand=cube(8, 3, 4, seed=1), relu_bypass=False)
    bn = XStage(bypass=False, mul_bypass=False, mul_operand=np.arange(8), mul_prelu=True)
    run_sdp(SdpParams(x1=bs, x2=bn), x)
    sdp = counts(cov, "SDP")
    assert sdp["bs_alu_src:per_element"] == sdp["bs_alu:sum"] == sdp["bs_mul:bypass"] == sdp["bs_relu:relu"] == 1
    assert sdp["bn_mul_src:per_kernel"] == sdp["bn_mul:prelu"] == sdp["bn_alu:bypass"] == 1
    assert sdp["ew:bypass"] == 1
    assert "bs_mul_src:reg" not in sdp and "bn_alu_src:reg" not in sdp  # bypassed units are not sampled
    assert "ew_alu:bypass" not in sdp  # nor is a bypassed sub-unit


def test_conv_bins_and_the_chain(cov):
    layer = programs.ConvLayer(cube(3, 7, 7), np.random.default_rng(1).integers(-3, 4, (4, 3, 3, 3)),
                               stride=(2, 1), pad=(1, 1))
    programs.program_conv(Dla(HW), layer)
    conv = counts(cov, "CONV")
    for hit in ("format:feature", "precision:int8", "kernel_w:3", "kernel_h:3", "stride_x:1", "stride_y:2",
                "dilation_x:1", "padding:some", "pad_value:zero", "channels:partial_atom", "output:sdp_to_memory",
                "saturation:none"):
        assert conv[hit] == 1, hit
    assert counts(cov, "SDP")["input:conv_flying"] == 1

    cov.reset()
    layer = programs.ConvLayer(cube(ATOM, 9, 9), np.ones((2, ATOM, 5, 1), dtype=np.int64), dilation=(2, 1))
    programs.program_conv(Dla(HW), layer)
    conv = counts(cov, "CONV")
    assert conv["channels:full_atoms"] == conv["kernel_h:5"] == conv["kernel_w:1"] == conv["dilation_y:>1"] == 1
    assert conv["padding:none"] == 1 and "pad_value:zero" not in conv


def test_cdp_lut_paths_are_the_nonzero_perf_counters(cov):
    rng = np.random.default_rng(2)
    lut = LutRegisters(le_table=tuple(int(v) for v in rng.integers(-32768, 32768, 65)),
                       lo_table=tuple(int(v) for v in rng.integers(-32768, 32768, 257)),
                       le_function="linear", le_start=200, le_end=4000, le_index_select=6,
                       lo_start=0, lo_end=20000, lo_index_select=7)
    dla = Dla(HW)
    programs.program_cdp(HW, programs.LrnLayer(cube(16, 4, 4), lut, normalz_len=1)).run(dla)
    cdp = counts(cov, "CDP")
    nonzero = {label for label, reg in functional.LUT_PATHS.items() if dla.read(f"NVDLA_CDP.{reg}_0")}
    assert len(nonzero) >= 2
    assert {b.split(":")[1] for b, n in cdp.items() if b.startswith("lut_paths:") and n} == nonzero
    assert cdp["normalz_len:5"] == cdp["lut_le_function:linear"] == cdp["sqsum:on"] == 1
    expected = "hit" if dla.read("NVDLA_CDP.D_OUT_SATURATION_0") else "none"
    assert cdp[f"saturation:{expected}"] == 1


def test_a_failing_sampler_is_counted_not_raised():
    session = Coverage()
    session.observe(("PDP",), {}, {})  # no register views at all
    pdp = session.snapshot()["engines"]["PDP"]
    assert pdp["ops"] == 1 and set(pdp["counts"]) == {"input:memory"}  # the one bin the chain alone decides
    assert pdp["errors"] and all("KeyError" in message for message in pdp["errors"])


# ---- files and merging --------------------------------------------------------------------------------------------
def test_dump_and_merge_across_two_workers(tmp_path):
    workers = [Coverage(), Coverage()]
    runs = [["max"], ["max", "avg"]]
    for session, methods in zip(workers, runs):
        functional.install(session)
        try:
            for method in methods:
                programs.program_pdp(HW, programs.PoolLayer(cube(3, 4, 4), method, (2, 2), (2, 2))).run(Dla(HW))
        finally:
            functional.uninstall(session)
    paths = [tmp_path / f"unit{i}" / "coverage" / f"func-gw{i}.json" for i in range(2)]
    for session, path in zip(workers, paths):
        functional.dump(path, session)
    assert not list(tmp_path.rglob("*.tmp"))
    assert json.loads(paths[0].read_text())["format"] == functional.FORMAT

    merged = functional.merge(paths)
    pdp = merged["PDP"]
    assert pdp["counts"]["method:max"] == 2 and pdp["counts"]["method:avg"] == 1
    assert pdp["counts"]["method:min"] == 0 and pdp["ops"] == 3
    assert "method:min" in pdp["uncovered"]
    assert "method:max" not in pdp["uncovered"] and "method:avg" not in pdp["uncovered"]
    spec = functional.definitions()["PDP"]
    assert pdp["bins"] == len(spec["bins"]) - len(spec["ignored"])
    assert pdp["hit"] + len(pdp["uncovered"]) == pdp["bins"]
    assert pdp["hit"] == sum(1 for b, n in pdp["counts"].items() if n and b not in pdp["ignored"])
    assert "precision:int16" in pdp["uncovered"]  # int16/fp16 are modelled now: real holes when not hit
    cdp = merged["CDP"]  # no worker ran CDP: every bin is uncovered, totals still known
    assert cdp["ops"] == 0 and cdp["hit"] == 0 and len(cdp["uncovered"]) == cdp["bins"] > 0

    summary = functional.summarize(tmp_path)
    assert summary["functional_files"] == 2
    assert summary["functional"]["PDP"]["counts"] == pdp["counts"]
    assert summary["rtl"]["available"] is False and summary["rtl"]["reason"]


def test_merge_keeps_bins_only_some_files_declare(tmp_path):
    doc = Coverage().snapshot()
    doc["engines"]["PDP"]["bins"].append("method:median")
    doc["engines"]["PDP"]["counts"] = {"method:median": 4}
    path = tmp_path / "func-old.json"
    path.write_text(json.dumps(doc))
    pdp = functional.merge([path])["PDP"]
    assert pdp["counts"]["method:median"] == 4 and "method:median" not in pdp["uncovered"]
    bad = tmp_path / "func-bad.json"
    bad.write_text(json.dumps({"format": "something else"}))
    with pytest.raises(ValueError, match="format"):
        functional.merge([bad])
