"""SDP fp16 path (PROC_PRECISION=FP16, nv_full): register programs on ``golden.Dla`` checked against numpy's
IEEE math where the cmod agrees with it (normal values), hand-computed cmod corners where it does not,
the independent fp16 reference on fixed random layers, the counters, the on-the-fly ports, and the
precision legality rules."""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from golden import Dla, fp
from golden.config import NV_FULL, NV_SMALL
from golden.engines import OpContext
from golden.engines import sdp as sdp_engine
from golden.engines import sdp_lut
from golden.errors import ConfigError, UnsupportedError
from golden.lut import LutRegisters
from regressions.fuzz.fp16_sdp import reference_output
from regressions.lib.programs import fp16 as P
from regressions.lib.reference import sdp_fp16 as ref

ATOM = NV_FULL.atom_elements("fp16")


def f16(values) -> np.ndarray:
    return np.asarray(values, dtype=np.float16).view(np.uint16).astype(np.int64)


def run(layer: P.SdpFp16Layer, hw=NV_FULL) -> tuple[np.ndarray, Dla]:
    """Run the layer's program; the (padded C, H, W) output (fp16 bits or int16 values) and the Dla."""
    dla = Dla(hw)
    raw = P.program_sdp_fp16(hw, layer).run(dla)
    c, h, w = layer.x.shape
    out = np.frombuffer(raw, dtype="<u2" if layer.params.out == "fp16" else "<i2").astype(np.int64)
    surfaces = -(-c // ATOM)
    return out.reshape(surfaces, h, w, ATOM).transpose(0, 3, 1, 2).reshape(surfaces * ATOM, h, w), dla


def status(dla: Dla, unit: str, reg: str) -> int:
    return dla.read(f"{unit}.{reg}")


def cube(values, c: int | None = None) -> np.ndarray:
    v = np.asarray(values, dtype=np.int64).reshape(-1)
    return v.reshape(len(v) if c is None else c, 1, -1)


# ---- pass-through, conversions, padding lanes, counters ------------------------------------------------
def test_bypass_round_trips_every_finite_fp16_and_counts_nan_inf() -> None:
    bits = np.arange(0, 1 << 16, 37, dtype=np.int64)[:16 * 110].reshape(16, 10, 11)
    out, dla = run(P.SdpFp16Layer(bits, ref.Fp16Params()))
    finite = (bits & 0x7C00) != 0x7C00
    nan = ((bits & 0x7C00) == 0x7C00) & ((bits & 0x3FF) != 0)
    inf = (bits & 0x7FFF) == 0x7C00
    np.testing.assert_array_equal(out[finite], bits[finite])
    np.testing.assert_array_equal(out[nan], bits[nan])  # NaN payloads survive fp16 -> fp32 -> fp16
    np.testing.assert_array_equal(out[inf], (bits[inf] & 0x8000) | 0x7BFF)  # Inf reads as the largest finite
    assert status(dla, "SDP_RDMA", "D_STATUS_NAN_INPUT_NUM") == np.count_nonzero(nan)
    assert status(dla, "SDP_RDMA", "D_STATUS_INF_INPUT_NUM") == np.count_nonzero(inf)
    assert status(dla, "SDP", "D_STATUS_NAN_OUTPUT_NUM") == np.count_nonzero(nan)
    assert status(dla, "SDP", "D_PERF_OUT_SATURATION") == np.count_nonzero((out & 0x7FFF) == 0x7BFF)


def test_padding_lanes_are_computed_and_written() -> None:
    x = cube(f16([1.5, -2.0, 3.25]), 3)
    p = ref.Fp16Params(x1=ref.Fp16XParams(bypass=False, alu_bypass=False, alu_operand=int(f16(1.0))))
    out, _ = run(P.SdpFp16Layer(x, p))
    assert out.shape == (ATOM, 1, 1)
    np.testing.assert_array_equal(out[:3, 0, 0], f16([2.5, -1.0, 4.25]))
    np.testing.assert_array_equal(out[3:, 0, 0], f16([1.0] * (ATOM - 3)))  # 0 + 1 in the padding lanes


def test_nan_to_zero_flushes_input_and_operands() -> None:
    x = cube([0x7E00, 0xFC01, 0x3C00, 0x7C00], 4)
    op = cube([0x3C00, 0x3C00, 0x7E01, 0x3C00], 4)
    stage = ref.Fp16XParams(bypass=False, alu_bypass=False, alu_algo=ref.ALU_SUM, alu_operand=op)
    out, _ = run(P.SdpFp16Layer(x, ref.Fp16Params(x1=stage, nan_to_zero=True)))
    # NaN inputs -> +0, +1 = 1; the NaN operand -> +0; Inf input is 65504 (+1 rounds back to 65504).
    np.testing.assert_array_equal(out[:4, 0, 0], [0x3C00, 0x3C00, 0x3C00, 0x7BFF])
    out, _ = run(P.SdpFp16Layer(x, ref.Fp16Params(x1=stage, nan_to_zero=False)))
    np.testing.assert_array_equal(out[:4, 0, 0], [0x7E00, 0xFC01, 0x7E01, 0x7BFF])  # NaN a, then NaN b, wins


# ---- X stages against IEEE numpy (normal values) --------------------------------------------------------
@pytest.mark.parametrize("algo", [ref.ALU_MAX, ref.ALU_MIN, ref.ALU_SUM])
def test_x_alu_mul_relu_match_ieee_on_normal_values(algo: int) -> None:
    rng = np.random.default_rng(algo)
    x = f16(rng.uniform(-8, 8, (20, 3, 4)))
    alu = f16(rng.uniform(-8, 8, (20, 3, 4)))
    mul = f16(rng.uniform(-4, 4, (20, 3, 4)))  # one DMA per stage: both MEM operands per element
    p = ref.Fp16Params(x1=ref.Fp16XParams(bypass=False, alu_bypass=False, alu_algo=algo, alu_operand=alu,
                                          mul_bypass=False, mul_operand=mul, relu_bypass=False))
    out, _ = run(P.SdpFp16Layer(x, p))
    xv, av = x.astype(np.uint16).view(np.float16).astype(np.float32), alu.astype(np.uint16).view(np.float16).astype(np.float32)
    a = {ref.ALU_MAX: np.maximum, ref.ALU_MIN: np.minimum, ref.ALU_SUM: np.add}[algo](xv, av)
    m = a * mul.astype(np.uint16).view(np.float16).astype(np.float32)
    want = np.maximum(m, np.float32(0)).astype(np.float16).view(np.uint16)  # ReLU turns -0 into +0 as well
    np.testing.assert_array_equal(out[:20], want)


def test_prelu_passes_positive_data_and_scales_negative() -> None:
    x = cube(f16([3.0, -3.0, 0.0, -0.0]), 4)
    p = ref.Fp16Params(x1=ref.Fp16XParams(bypass=False, mul_bypass=False, mul_prelu=True, mul_operand=int(f16(0.25))))
    out, _ = run(P.SdpFp16Layer(x, p))
    np.testing.assert_array_equal(out[:4, 0, 0], f16([3.0, -0.75, 0.0, -0.0]))  # -0 · 0.25 = -0 (sign xor)


def test_x_alu_algo_3_is_the_fp_eql() -> None:
    """In fp16 the X ALU's algo 3 is EQL (FpAlu is shared with Y): 1 (the fp32 bit pattern) where the
    operand differs, 0 where it is equal, unlike the integer X ALU where 3 is SUM."""
    cfg = sdp_engine.XConfig(name="BS", bypass=False, alu_bypass=False, alu_algo=3, alu_mem=True, alu_shift=0,
                             alu_operand=0, mul_bypass=True, mul_prelu=False, mul_mem=False, mul_shift=0,
                             mul_operand=0, relu_bypass=True)
    x = fp.fp16_to_fp32(f16([1.0, 2.0, -0.0])).astype(np.int64)
    got = sdp_engine.x_stage_fp(x, cfg, f16([1.0, 3.0, 0.0]), 0, nan_to_zero=False)
    np.testing.assert_array_equal(got, [0, 1, 1])  # -0 and +0 are different patterns


def test_exact_cancellation_keeps_the_larger_operands_sign() -> None:
    x = cube(f16([-1.0, 1.0, -2.5, 2.5]), 4)
    p = ref.Fp16Params(x1=ref.Fp16XParams(bypass=False, alu_bypass=False, alu_operand=x ^ 0x8000))
    out, _ = run(P.SdpFp16Layer(x, p))
    np.testing.assert_array_equal(out[:4, 0, 0], [0x8000, 0x0000, 0x8000, 0x0000])  # IEEE would give +0 everywhere


# ---- Y stage and the LUT --------------------------------------------------------------------------------
def test_y_reg_operands_are_fp32_words_and_mem_operands_fp16() -> None:
    x = cube(f16([1.0, -3.0, 0.5, 100.0]), 4)
    y = ref.Fp16YParams(bypass=False, mul_bypass=False, mul_operand=0x40400000,  # 3.0 as an fp32 word
                        alu_bypass=False, alu_algo=ref.ALU_MAX, alu_operand=cube(f16([4.0, -20.0, 0.0, 0.0]), 4))
    out, _ = run(P.SdpFp16Layer(x, ref.Fp16Params(y=y)))
    np.testing.assert_array_equal(out[:4, 0, 0], f16([4.0, -9.0, 1.5, 300.0]))


def test_y_mul_saturates_instead_of_overflowing() -> None:
    x = cube(f16([60000.0, -60000.0]), 2)
    y = ref.Fp16YParams(bypass=False, mul_bypass=False, mul_operand=0x7F000000)  # 2^127
    out, dla = run(P.SdpFp16Layer(x, ref.Fp16Params(y=y)))
    np.testing.assert_array_equal(out[:2, 0, 0], [0x7BFF, 0xFBFF])
    assert status(dla, "SDP", "D_PERF_OUT_SATURATION") == 2


def _linear_lut(**kw) -> LutRegisters:
    """LO: entry i = i (fp16), start 0, select 0: a hit interpolates back to x for 0 < x < 256."""
    lo = tuple(int(v) for v in f16(np.arange(257)))
    base = dict(lo_table=lo, le_table=(0,) * 65, le_function="linear", le_start=0x7F7FFFFF, lo_start=0,
                le_index_select=0, lo_index_select=0, uflow_priority=1, oflow_priority=1, hybrid_priority=1)
    base.update(kw)
    return LutRegisters(**base)


def test_lut_linear_hit_interpolates_in_fp17() -> None:
    x = cube(f16([0.5, 1.25, 7.75, 200.5, 255.5]), 5)
    y = ref.Fp16YParams(bypass=False, lut_bypass=False)
    out, dla = run(P.SdpFp16Layer(x, ref.Fp16Params(y=y, lut=_linear_lut())))
    np.testing.assert_array_equal(out[:5, 0, 0], x[:, 0, 0])
    assert status(dla, "SDP", "D_PERF_LUT_LO_HIT") == 5 and status(dla, "SDP", "D_PERF_LUT_LE_HIT") == 0
    # 11 padding lanes are x = +0: x - start = 0 underflows both tables.
    assert status(dla, "SDP", "D_PERF_LUT_UFLOW") == ATOM - 5


def test_lut_underflow_and_overflow_extrapolate_with_fp16_slopes() -> None:
    x = cube(f16([-2.0, 300.0]), 2)
    lut = _linear_lut(lo_end=0x43800000, lo_slope_uflow_scale=int(f16(0.5)), lo_slope_oflow_scale=int(f16(2.0)))
    y = ref.Fp16YParams(bypass=False, lut_bypass=False)
    out, dla = run(P.SdpFp16Layer(x, ref.Fp16Params(y=y, lut=lut)))
    # uflow: LO[0] + (x - start)·0.5 = -1; oflow: LO[256] + (x - 256)·2 = 344.
    np.testing.assert_array_equal(out[:2, 0, 0], f16([-1.0, 344.0]))
    assert status(dla, "SDP", "D_PERF_LUT_OFLOW") == 1


def test_lut_exponent_mode_indexes_by_the_exponent_and_adds_the_fp_bias() -> None:
    # LE exponent: start 0, offset -2: x in [2^k, 2^(k+1)) -> index k + 2; entry i = i.
    le = tuple(int(v) for v in f16(np.arange(65)))
    lut = _linear_lut(le_function="exp", le_table=le, le_start=0, le_index_offset=-2, lo_start=0x7F7FFFFF,
                      uflow_priority=0, hybrid_priority=0, le_slope_uflow_scale=int(f16(1.0)))
    y = ref.Fp16YParams(bypass=False, lut_bypass=False)
    x = cube(f16([1.0, 1.5, 4.0, 0.125]), 4)
    out, _ = run(P.SdpFp16Layer(x, ref.Fp16Params(y=y, lut=lut)))
    # 1.0 -> 2; 1.5 -> 2 + 0.5·(3-2); 4 -> 4; 0.125 = 2^-3 < 2^-2 underflows: LE[0] + (x - (0 + 2^-2))·1.
    np.testing.assert_array_equal(out[:4, 0, 0], f16([2.0, 2.5, 4.0, -0.125]))


# ---- independent reference on fixed random layers -------------------------------------------------------
@pytest.mark.parametrize("seed", range(4))
def test_random_layers_equal_the_fp16_reference(seed: int) -> None:
    rng = np.random.default_rng(seed)
    shape = (int(rng.integers(1, 33)), 2, 3)

    def vals(s):
        return f16(rng.uniform(-4, 4, s) * np.exp2(rng.integers(-3, 3, s)))

    x = vals(shape)
    flat = x.reshape(-1)  # a view: every 7th element becomes a special pattern
    specials = np.array([0x7E00, 0xFC00, 0x8000, 0x0001, 0x7BFF])
    flat[::7] = specials[np.arange(flat[::7].size) % specials.size]
    x1 = ref.Fp16XParams(bypass=False, alu_bypass=False, alu_algo=seed % 4, alu_operand=vals(shape),
                         mul_bypass=False, mul_prelu=bool(seed % 2), mul_operand=vals(shape), relu_bypass=seed < 2)
    x2 = ref.Fp16XParams(bypass=False, alu_bypass=False, alu_operand=int(vals(1)[0]))
    lut = _linear_lut(lo_index_select=-4, le_function="exp", le_start=int(fp.bits_of_f32(-8.0)),
                      le_table=tuple(int(v) for v in vals(65)), le_index_offset=-3, hybrid_priority=seed % 2,
                      lo_slope_uflow_scale=int(f16(0.5)), lo_slope_oflow_scale=int(f16(-0.25)), le_slope_oflow_scale=int(f16(1.5)))
    y = ref.Fp16YParams(bypass=False, mul_bypass=False, mul_operand=vals(shape), alu_bypass=False,
                        alu_algo=seed % 3, alu_operand=int(fp.bits_of_f32(0.75)), lut_bypass=seed == 3)
    params = ref.Fp16Params(x1=x1, x2=x2, y=y, lut=lut, nan_to_zero=seed == 1, out="int16" if seed == 2 else "fp16")
    layer = P.SdpFp16Layer(x, params)
    out, _ = run(layer)
    np.testing.assert_array_equal(out, reference_output(NV_FULL, layer))


# ---- on the fly and mixed precisions --------------------------------------------------------------------
def _views(layer: P.SdpFp16Layer, **sdp_fields: int) -> tuple[Dla, dict]:
    """Registers of the layer's program in a Dla (enables left out), with SDP D_FEATURE_MODE_CFG edits."""
    dla = Dla(NV_FULL)
    prog = P.program_sdp_fp16(NV_FULL, layer)
    for name, value in prog.writes:
        if not name.endswith("D_OP_ENABLE_0"):
            dla.write_reg(dla.map.resolve(name)[0], value)
    if sdp_fields:
        dla.write("SDP.D_FEATURE_MODE_CFG", **sdp_fields)
    return dla, {u: dla.units[u].view(0) for u in ("SDP", "SDP_RDMA")}


def test_flying_fp32_input_from_cacc_and_fp16_cube_to_pdp() -> None:
    x = np.zeros((ATOM, 1, 2), dtype=np.int64)
    stage = ref.Fp16XParams(bypass=False, mul_bypass=False, mul_operand=int(f16(2.0)))
    dla, views = _views(P.SdpFp16Layer(x, ref.Fp16Params(x1=stage), counters=False), FLYING_MODE=1, OUTPUT_DST=1)
    acc = np.full((ATOM, 1, 2), 1.5, dtype=np.float32)
    acc[0, 0, 0], acc[1, 0, 0] = 1e30, np.float32(2.0**-20)
    ctx = OpContext(hw=NV_FULL, mem=dla.mem, regs=views, flying_input=acc)
    out = sdp_engine.run(ctx)
    assert out.dtype == np.float16 and out.shape == (ATOM, 1, 2)
    np.testing.assert_array_equal(out.view(np.uint16)[:2, 0, 0], [0x7BFF, int(f16(2.0**-19))])
    np.testing.assert_array_equal(out.astype(np.float32)[2:], 3.0)
    with pytest.raises(UnsupportedError, match="FP32"):
        sdp_engine.run(replace(ctx, flying_input=acc.astype(np.float64)))


def test_int16_processing_with_fp16_output_and_fp16_with_int16_output() -> None:
    # fp16 -> INT16: Fp32ToFp16 then Fp16ToInt16 (round half away, saturate, NaN -> -32768).
    x = cube([int(f16(2.5)), int(f16(-2.5)), int(f16(40000.0)), 0x7E00], 4)
    out, _ = run(P.SdpFp16Layer(x, ref.Fp16Params(out="int16")))
    np.testing.assert_array_equal(out[:4, 0, 0], [3, -3, 32767, -32768])
    # INT16 -> FP16: the 17-bit CVT result through Int17ToFp16.
    cvt = sdp_engine.OutCvt(offset=0, scale=3, shift=1)
    half, sat = sdp_engine.output_cvt_to_fp16(np.array([5, -50000, 1 << 20, 2049 * 2]), cvt)
    np.testing.assert_array_equal(half, [int(f16(8.0)), 0xFBFF, 0x7BFF, int(f16(6148.0))])
    assert sat == 2


def test_fp16_legality() -> None:
    x = cube(f16([1.0]), 1)
    layer = P.SdpFp16Layer(x, ref.Fp16Params())
    with pytest.raises(UnsupportedError, match="FP16"):
        P.program_sdp_fp16(NV_FULL, layer).run(Dla(NV_SMALL.derive(feature_types=("int8",))))
    prog = P.program_sdp_fp16(NV_FULL, layer)
    # SDP_RDMA reading INT16 for an FP16 datapath is a mixed precision.
    prog.writes = [(n, (v & ~0xC) | 0x4) if n == "NVDLA_SDP_RDMA.D_FEATURE_MODE_CFG_0" else (n, v) for n, v in prog.writes]
    with pytest.raises(UnsupportedError, match="mixed"):
        prog.run(Dla(NV_FULL))
    # An fp16 NRDMA operand must be 2 bytes (cmod assertion).
    stage = ref.Fp16XParams(bypass=False, alu_bypass=False, alu_operand=cube(f16([1.0]), 1))
    prog = P.program_sdp_fp16(NV_FULL, P.SdpFp16Layer(x, ref.Fp16Params(x2=stage)))
    prog.writes = [(n, v & ~0x8) if n == "NVDLA_SDP_RDMA.D_NRDMA_CFG_0" else (n, v) for n, v in prog.writes]
    with pytest.raises(ConfigError, match="NRDMA_DATA_SIZE"):
        prog.run(Dla(NV_FULL))


def test_int8_path_is_untouched_by_nan_to_zero() -> None:
    """NAN_TO_ZERO only acts in fp16: an int8 pass-through with the bit set is unchanged."""
    from golden.layout import CubeLayout, read_cube, write_cube

    dla = Dla(NV_FULL)
    lay = CubeLayout(32, 1, 1, 32, 32, 32, 1)
    x = np.arange(-16, 16).reshape(32, 1, 1)
    write_cube(dla.mem.space(1), 0x1000, lay, x)
    for unit in ("SDP", "SDP_RDMA"):
        for reg, v in (("D_DATA_CUBE_WIDTH", 0), ("D_DATA_CUBE_HEIGHT", 0), ("D_DATA_CUBE_CHANNEL", 31)):
            dla.write(f"{unit}.{reg}", v)
    dla.write("SDP_RDMA.D_FEATURE_MODE_CFG", 0)
    dla.write("SDP_RDMA.D_SRC_BASE_ADDR_LOW", 0x1000)
    dla.write("SDP_RDMA.D_SRC_LINE_STRIDE", 32)
    dla.write("SDP_RDMA.D_SRC_SURFACE_STRIDE", 32)
    dla.write("SDP_RDMA.D_SRC_DMA_CFG", 1)
    for reg in ("D_BRDMA_CFG", "D_NRDMA_CFG", "D_ERDMA_CFG"):
        dla.write(f"SDP_RDMA.{reg}", 1)
    dla.write("SDP.D_FEATURE_MODE_CFG", NAN_TO_ZERO=1)
    dla.write("SDP.D_DATA_FORMAT", 0)
    for reg in ("D_DP_BS_CFG", "D_DP_BN_CFG", "D_DP_EW_CFG"):
        dla.write(f"SDP.{reg}", 1)
    dla.write("SDP.D_CVT_SCALE", 1)
    dla.write("SDP.D_DST_BASE_ADDR_LOW", 0x2000)
    dla.write("SDP.D_DST_LINE_STRIDE", 32)
    dla.write("SDP.D_DST_SURFACE_STRIDE", 32)
    dla.write("SDP.D_DST_DMA_CFG", 1)
    dla.write("SDP_RDMA.D_OP_ENABLE", 1)
    dla.write("SDP.D_OP_ENABLE", 1)
    np.testing.assert_array_equal(read_cube(dla.mem.space(1), 0x2000, lay), x)


# ---- corners of the LUT weights, EQL counters and the half-beat rule -----------------------------------
def test_lut_hit_on_an_entry_point_returns_the_entry() -> None:
    """A hit whose 35-bit fraction is 0 (x − START a whole multiple of 2^SELECT) weights y0 by FP17 1.0 and
    y1 by 0 (cmod ``sdp_y_inp.cpp``), so the output is the table entry itself, bit for bit."""
    x = cube(f16([1.0, 2.0, 7.0, 100.0, 255.0]), 5)
    lo = [int(v) for v in f16(np.arange(257) * 0.75 - 3.0)]  # LO[i] = 0.75·i − 3: exact fp16 values
    lut = _linear_lut(lo_table=tuple(lo))
    out, dla = run(P.SdpFp16Layer(x, ref.Fp16Params(y=ref.Fp16YParams(bypass=False, lut_bypass=False), lut=lut)))
    np.testing.assert_array_equal(out[:5, 0, 0], f16([-2.25, -1.5, 2.25, 72.0, 188.25]))
    assert status(dla, "SDP", "D_PERF_LUT_LO_HIT") == 5


def test_eql_mode_fp16_counters_see_the_low_half_of_the_compare_result() -> None:
    """EQL compare mode writes nothing; the fp16 output counters see the low 16 bits of each lane's result
    (0 equal, 1 unequal, sdp_hls_wrapper.cpp): neither is a NaN nor ±65504, so both counters stay 0 while
    D_STATUS reports the inequality."""
    x = cube(f16([1.0, -2.0, 3.0, 4.0]), 4)
    y = ref.Fp16YParams(bypass=False, alu_bypass=False, alu_algo=ref.ALU_EQL, alu_operand=cube(f16([1.0, 2.0, 3.0, 5.0]), 4))
    prog = P.program_sdp_fp16(NV_FULL, P.SdpFp16Layer(x, ref.Fp16Params(y=y)))
    dla = Dla(NV_FULL)
    dla.mem.write(prog.output[0], b"\x5A" * prog.output[1])
    assert prog.run(dla) == b"\x5A" * prog.output[1]
    assert status(dla, "SDP", "D_STATUS") & 1 == 1
    assert status(dla, "SDP", "D_STATUS_NAN_OUTPUT_NUM") == 0
    assert status(dla, "SDP", "D_PERF_OUT_SATURATION") == 0


def test_half_beat_hang_refuses_only_per_kernel_single_component_operands() -> None:
    """nv_full's RTL never finishes an fp16 X operand of one 2-byte component per channel over an odd
    number >= 11 of atoms (``HwConfig.sdp_brdma_fp16_half_beat_hang``, measured per kernel); golden
    refuses exactly that. The same single ALU component per element streams whole cubes and is computed."""
    c = 11 * ATOM
    x = cube(f16(np.arange(c) % 64 - 32.0), c)
    per_element = cube(f16(np.arange(c) % 8 * 0.5), c)
    stage = ref.Fp16XParams(bypass=False, alu_bypass=False, alu_algo=ref.ALU_SUM, alu_operand=per_element)
    out, _ = run(P.SdpFp16Layer(x, ref.Fp16Params(x1=stage)))
    np.testing.assert_array_equal(out[:, 0, 0], f16(np.arange(c) % 64 - 32.0 + np.arange(c) % 8 * 0.5))
    per_kernel = replace(stage, alu_operand=per_element.reshape(-1))
    with pytest.raises(ConfigError, match="BRDMA_DATA_USE.*never finishes"):
        run(P.SdpFp16Layer(x, ref.Fp16Params(x1=per_kernel)))


def test_lut_offset_underflows_on_a_nan_but_not_on_inf() -> None:
    """The fp index stage underflows x − START when it is negative, zero or a NaN (cmod ``sdp_y_idx.cpp``),
    and nothing else: +Inf is a number there, whose exponent field the linear index reads as −128, a hit at
    entry 0. So the least NaN (mantissa 1) extrapolates and stays that NaN, +Inf returns LO[0]; the
    independent reference agrees. (An Inf reaches the LUT from the Y ALU, e.g. a SUM with an fp32 REG
    operand of +Inf.)"""
    lut = _linear_lut(le_function=1, lo_slope_uflow_scale=int(f16(1.0)))
    x = [0x7F800000, 0x7F800001]  # +Inf, NaN
    out, stats = sdp_lut.lut_lookup_fp(np.array(x), lut, np.array(lut.le_table), np.array(lut.lo_table))
    assert out.tolist() == [0, 0x7F800001] == [ref.lut_lookup(v, lut) for v in x]
    assert (stats.uflow, stats.lo_hit) == (1, 1)


def test_eql_mode_int16_output_counts_no_saturated_lanes() -> None:
    """EQL compare mode on the fp16 datapath with an INT16 output: nothing is written, and the cmod's
    fp16-output saturation count (lanes reading as ±65504) does not apply to an int16 output, so with
    PERF_SAT_EN set D_PERF_OUT_SATURATION still reads 0 lanes while D_STATUS reports the inequality."""
    x = cube(f16([65504.0, -65504.0, 3.0, 4.0]), 4)
    y = ref.Fp16YParams(bypass=False, alu_bypass=False, alu_algo=ref.ALU_EQL, alu_operand=cube(f16([1.0, 2.0, 3.0, 5.0]), 4))
    prog = P.program_sdp_fp16(NV_FULL, P.SdpFp16Layer(x, ref.Fp16Params(y=y, out="int16")))
    dla = Dla(NV_FULL)
    prog.run(dla)
    assert status(dla, "SDP", "D_STATUS") & 1 == 1
    assert status(dla, "SDP", "D_PERF_OUT_SATURATION") == 0
