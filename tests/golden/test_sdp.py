"""SDP engine: each pipeline rule on tiny cubes, against hand values and plain-loop Python references."""
from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np
import pytest

from golden.config import NV_SMALL, NV_SMALL_256_FULL, HwConfig
from golden.engines import ENGINES, OpContext
from golden.engines import sdp as sdp_engine
from golden.arith import rha
from golden.engines.sdp_lut import lut_lookup, lut_lookup_fp
from golden.errors import ConfigError, UnsupportedError
from golden.layout import CubeLayout, read_cube, write_cube
from golden.lut import LutRegisters
from golden.memory import Memory
from golden.regs import UNITS, RegView

ALGO = {"MAX": 0, "MIN": 1, "SUM": 2, "EQL": 3}
SRC, DST, OPERAND_BASE = 0x1000, 0x100000, {"BS": 0x200000, "BN": 0x300000, "EW": 0x400000}
DMA_PREFIX = {"BS": "B", "BN": "N", "EW": "E"}


# ---------------------------------------------------------------------------------------------------
# Plain-Python references (one element at a time, Python ints)
# ---------------------------------------------------------------------------------------------------
def ref_rha(v: int, s: int) -> int:
    if s == 0:
        return v
    q, r = divmod(abs(v), 1 << s)
    q += 2 * r >= (1 << s)
    return q if v >= 0 else -q


def ref_sat(v: int, bits: int) -> int:
    return max(-(1 << (bits - 1)), min((1 << (bits - 1)) - 1, v))


def ref_wrap(v: int, bits: int) -> int:
    v &= (1 << bits) - 1
    return v - (1 << bits) if v >> (bits - 1) else v


def ref_x(x: int, cfg: sdp_engine.XConfig, alu_op: int, mul_op: int) -> int:
    if cfg.bypass:
        return x
    v = x
    if not cfg.alu_bypass:
        op = ref_sat(alu_op << cfg.alu_shift, 32)
        v = max(v, op) if cfg.alu_algo == 0 else min(v, op) if cfg.alu_algo == 1 else v + op
    if cfg.mul_bypass:
        v = ref_sat(ref_rha(v, cfg.mul_shift), 32)
    elif cfg.mul_prelu and v >= 0:
        v = ref_wrap(v, 32)
    else:
        v = ref_sat(ref_rha(v * mul_op, cfg.mul_shift), 32)
    return v if cfg.relu_bypass else max(v, 0)


def ref_cvt(v: int, cvt: sdp_engine.OperandCvt) -> int:
    return v if cvt.bypass else ref_sat(ref_rha((v - cvt.offset) * cvt.scale, cvt.truncate), 32)


def ref_y_core(x: int, y: sdp_engine.YConfig, alu_op: int, mul_op: int) -> int:
    v = x
    if not y.mul_bypass:
        v = v if (y.mul_prelu and v >= 0) else ref_sat(ref_rha(v * mul_op, y.truncate), 32)
    if not y.alu_bypass:
        a = y.alu_algo
        v = max(v, alu_op) if a == 0 else min(v, alu_op) if a == 1 else int(v != alu_op) if a == 3 else ref_sat(v + alu_op, 32)
    return v


def ref_table_index(x: int, start: int, exponent: bool, offset: int, select: int, depth: int):
    """(index, fraction, uflow, oflow) of one table, straight from the cmod's sdp_y_idx.cpp."""
    if x <= start:
        return 0, 0, True, False
    d = x - start
    if exponent:
        e = d.bit_length() - 1
        if e < offset:
            return 0, 0, True, False
        if e - offset >= depth - 1:
            return depth - 1, 0, False, True
        return e - offset, (d - (1 << e)) << (35 - e), False, False
    q = min(d >> select if select >= 0 else d << -select, 511)
    if q >= depth - 1:
        return depth - 1, 0, False, True
    if select < 0:
        return q, 0, False, False
    val = d & ((1 << select) - 1)
    if val >= 1 << 31 and depth == 65:  # LE holds it in a signed 32-bit variable, then widens to 35 bits
        val += (1 << 35) - (1 << 32)
    frac = (val << (35 - select)) % (1 << 35) if select <= 35 else val >> (select - 35)
    return q, frac, False, False


def ref_lut(x: int, c: LutRegisters, le: list[int], lo: list[int]) -> int:
    li = ref_table_index(x, c.le_start, c.le_function == 0, c.le_index_offset, c.le_index_select, 65)
    oi = ref_table_index(x, c.lo_start, False, 0, c.lo_index_select, 257)
    le_hit, lo_hit = not (li[2] or li[3]), not (oi[2] or oi[3])
    if li[2] and oi[2]:
        use_lo = c.uflow_priority
    elif li[3] and oi[3]:
        use_lo = c.oflow_priority
    elif le_hit == lo_hit:
        use_lo = c.hybrid_priority
    else:
        use_lo = lo_hit
    idx, frac, uflow, oflow = oi if use_lo else li
    table = lo if use_lo else le
    if not (uflow or oflow):
        return ref_sat(ref_rha(table[idx] * ((1 << 35) - frac) + table[idx + 1] * frac, 35), 32)
    if use_lo:
        point, scale, shift = (c.lo_end, c.lo_slope_oflow_scale, c.lo_slope_oflow_shift) if oflow else (c.lo_start, c.lo_slope_uflow_scale, c.lo_slope_uflow_shift)
        bias = 0
    else:
        point, scale, shift = (c.le_end, c.le_slope_oflow_scale, c.le_slope_oflow_shift) if oflow else (c.le_start, c.le_slope_uflow_scale, c.le_slope_uflow_shift)
        bias = (1 << c.le_index_offset) if (uflow and c.le_function == 0 and 0 < c.le_index_offset < 32) else 0
    v = (x - (bias + point)) * scale
    slope = ref_sat(v << -shift if shift < 0 else ref_rha(v, shift), 32)
    return ref_sat(table[idx] + slope, 32)


def ref_out_cvt(v: int, offset: int, scale: int, shift: int) -> int:
    return ref_sat(ref_sat(ref_rha((v - offset) * scale, shift), 17), 8)


# ---------------------------------------------------------------------------------------------------
# Register views and a tiny SDP operation
# ---------------------------------------------------------------------------------------------------
def _words(unit: str, regs: dict[str, dict | int]) -> dict[int, int]:
    words = {}
    for name, value in regs.items():
        reg = UNITS[unit].register(name)
        words[reg.offset] = reg.encode(**value) if isinstance(value, dict) else value & 0xFFFFFFFF
    return words


def x_regs(name: str, *, alu: str | None = None, alu_src: int = 0, alu_shift: int = 0, alu_op: int = 0,
           mul_op: int | None = None, mul_src: int = 0, mul_shift: int = 0, prelu: bool = False,
           relu: bool = False) -> dict[str, dict]:
    """Registers of an enabled X stage (BS or BN); ``alu=None`` / ``mul_op=None`` bypass ALU / MUL."""
    return {
        f"D_DP_{name}_CFG": {
            f"{name}_BYPASS": 0, f"{name}_ALU_BYPASS": int(alu is None), f"{name}_ALU_ALGO": ALGO.get(alu or "MAX"),
            f"{name}_MUL_BYPASS": int(mul_op is None), f"{name}_MUL_PRELU": int(prelu), f"{name}_RELU_BYPASS": int(not relu),
        },
        f"D_DP_{name}_ALU_CFG": {f"{name}_ALU_SRC": alu_src, f"{name}_ALU_SHIFT_VALUE": alu_shift},
        f"D_DP_{name}_ALU_SRC_VALUE": {f"{name}_ALU_OPERAND": alu_op},
        f"D_DP_{name}_MUL_CFG": {f"{name}_MUL_SRC": mul_src, f"{name}_MUL_SHIFT_VALUE": mul_shift},
        f"D_DP_{name}_MUL_SRC_VALUE": {f"{name}_MUL_OPERAND": mul_op or 0},
    }


def ew_regs(*, alu: str | None = None, alu_src: int = 0, alu_op: int = 0, alu_cvt: tuple[int, int, int] | None = None,
            mul_op: int | None = None, mul_src: int = 0, mul_cvt: tuple[int, int, int] | None = None,
            truncate: int = 0, prelu: bool = False, lut: bool = False) -> dict[str, dict]:
    """Registers of an enabled Y stage; a CVT tuple is (offset, scale, truncate), None bypasses it."""
    regs: dict[str, dict] = {
        "D_DP_EW_CFG": {
            "EW_BYPASS": 0, "EW_ALU_BYPASS": int(alu is None), "EW_ALU_ALGO": ALGO.get(alu or "MAX"),
            "EW_MUL_BYPASS": int(mul_op is None), "EW_MUL_PRELU": int(prelu), "EW_LUT_BYPASS": int(not lut),
        },
        "D_DP_EW_ALU_CFG": {"EW_ALU_SRC": alu_src, "EW_ALU_CVT_BYPASS": int(alu_cvt is None)},
        "D_DP_EW_ALU_SRC_VALUE": {"EW_ALU_OPERAND": alu_op},
        "D_DP_EW_MUL_CFG": {"EW_MUL_SRC": mul_src, "EW_MUL_CVT_BYPASS": int(mul_cvt is None)},
        "D_DP_EW_MUL_SRC_VALUE": {"EW_MUL_OPERAND": mul_op or 0},
        "D_DP_EW_TRUNCATE_VALUE": {"EW_TRUNCATE": truncate},
    }
    for kind, cvt in (("ALU", alu_cvt), ("MUL", mul_cvt)):
        off, scale, trunc = cvt or (0, 0, 0)
        regs[f"D_DP_EW_{kind}_CVT_OFFSET_VALUE"] = {f"EW_{kind}_CVT_OFFSET": off}
        regs[f"D_DP_EW_{kind}_CVT_SCALE_VALUE"] = {f"EW_{kind}_CVT_SCALE": scale}
        regs[f"D_DP_EW_{kind}_CVT_TRUNCATE_VALUE"] = {f"EW_{kind}_CVT_TRUNCATE": trunc}
    return regs


def lut_regs(c: LutRegisters) -> dict[str, dict]:
    return {
        "S_LUT_CFG": {"LUT_LE_FUNCTION": c.le_function, "LUT_UFLOW_PRIORITY": c.uflow_priority,
                      "LUT_OFLOW_PRIORITY": c.oflow_priority, "LUT_HYBRID_PRIORITY": c.hybrid_priority},
        "S_LUT_INFO": {"LUT_LE_INDEX_OFFSET": c.le_index_offset, "LUT_LE_INDEX_SELECT": c.le_index_select,
                       "LUT_LO_INDEX_SELECT": c.lo_index_select},
        "S_LUT_LE_START": {"LUT_LE_START": c.le_start}, "S_LUT_LE_END": {"LUT_LE_END": c.le_end},
        "S_LUT_LO_START": {"LUT_LO_START": c.lo_start}, "S_LUT_LO_END": {"LUT_LO_END": c.lo_end},
        "S_LUT_LE_SLOPE_SCALE": {"LUT_LE_SLOPE_UFLOW_SCALE": c.le_slope_uflow_scale, "LUT_LE_SLOPE_OFLOW_SCALE": c.le_slope_oflow_scale},
        "S_LUT_LE_SLOPE_SHIFT": {"LUT_LE_SLOPE_UFLOW_SHIFT": c.le_slope_uflow_shift, "LUT_LE_SLOPE_OFLOW_SHIFT": c.le_slope_oflow_shift},
        "S_LUT_LO_SLOPE_SCALE": {"LUT_LO_SLOPE_UFLOW_SCALE": c.lo_slope_uflow_scale, "LUT_LO_SLOPE_OFLOW_SCALE": c.lo_slope_oflow_scale},
        "S_LUT_LO_SLOPE_SHIFT": {"LUT_LO_SLOPE_UFLOW_SHIFT": c.lo_slope_uflow_shift, "LUT_LO_SLOPE_OFLOW_SHIFT": c.lo_slope_oflow_shift},
    }


def lut_config(**kw: int) -> LutRegisters:
    base = dict(le_function=1, uflow_priority=0, oflow_priority=0, hybrid_priority=0, le_index_offset=0,
                le_index_select=0, lo_index_select=0, le_start=0, le_end=0, lo_start=0, lo_end=0,
                le_slope_uflow_scale=0, le_slope_oflow_scale=0, le_slope_uflow_shift=0, le_slope_oflow_shift=0,
                lo_slope_uflow_scale=0, lo_slope_oflow_scale=0, lo_slope_uflow_shift=0, lo_slope_oflow_shift=0)
    base.update(kw)
    return LutRegisters(**base)


@dataclass
class SdpOp:
    """A tiny SDP operation: packed input at SRC, packed output at DST, every stage bypassed."""

    channels: int
    height: int
    width: int
    hw: HwConfig = NV_SMALL
    sdp: dict = field(default_factory=dict)
    rdma: dict = field(default_factory=dict)
    mem: Memory = field(default_factory=Memory)
    lut: dict = field(default_factory=dict)
    flying_input: np.ndarray | None = None

    def __post_init__(self) -> None:
        cube = {"D_DATA_CUBE_WIDTH": self.width - 1, "D_DATA_CUBE_HEIGHT": self.height - 1,
                "D_DATA_CUBE_CHANNEL": self.channels - 1}
        self.sdp = {
            **cube, "D_DST_BASE_ADDR_LOW": DST, "D_DST_LINE_STRIDE": self.line, "D_DST_SURFACE_STRIDE": self.surf,
            "D_DST_DMA_CFG": 1, "D_FEATURE_MODE_CFG": 0, "D_DATA_FORMAT": 0, "D_CVT_SCALE": 1,
            "D_DP_BS_CFG": {"BS_BYPASS": 1}, "D_DP_BN_CFG": {"BN_BYPASS": 1}, "D_DP_EW_CFG": {"EW_BYPASS": 1},
            **self.sdp,
        }
        self.rdma = {
            **cube, "D_SRC_BASE_ADDR_LOW": SRC, "D_SRC_LINE_STRIDE": self.line, "D_SRC_SURFACE_STRIDE": self.surf,
            "D_SRC_DMA_CFG": 1, "D_FEATURE_MODE_CFG": 0,
            "D_BRDMA_CFG": {"BRDMA_DISABLE": 1}, "D_NRDMA_CFG": {"NRDMA_DISABLE": 1}, "D_ERDMA_CFG": {"ERDMA_DISABLE": 1},
            **self.rdma,
        }

    @property
    def atom(self) -> int:
        return self.hw.atom_elements()

    @property
    def c_pad(self) -> int:
        return -(-self.channels // self.atom) * self.atom

    @property
    def line(self) -> int:
        return self.width * self.atom

    @property
    def surf(self) -> int:
        return self.height * self.line

    def layout(self, bpe: int = 1) -> CubeLayout:
        return CubeLayout(self.channels, self.height, self.width, self.line * bpe, self.surf * bpe, self.atom, bpe)

    def set_input(self, x: np.ndarray) -> None:
        write_cube(self.mem.dram, SRC, self.layout(), x)

    def set_operands(self, stage: str, use: str, components: list[np.ndarray], size: int, per_element: bool) -> None:
        """Place MEM operands (ALU first when ``use`` is BOTH) and program the stage's operand DMA."""
        assert len(components) == (2 if use == "BOTH" else 1)
        p = f"{DMA_PREFIX[stage]}RDMA"
        bpe = size * len(components)
        vals = [np.asarray(c, dtype=np.int64) for c in components]
        raw = np.concatenate(
            [np.stack([(v >> (8 * b)) & 0xFF for b in range(size)], axis=-1) for v in vals], axis=-1
        ).astype(np.uint8)
        if per_element:
            lay = self.layout(bpe)
            self.mem.dram.scatter(OPERAND_BASE[stage], lay.byte_offsets(), raw)
        else:
            self.mem.dram.write(OPERAND_BASE[stage], raw.reshape(-1))
        self.rdma[f"D_{p}_CFG"] = {f"{p}_DISABLE": 0, f"{p}_DATA_USE": use,
                                   f"{p}_DATA_SIZE": size - 1, f"{p}_DATA_MODE": int(per_element), f"{p}_RAM_TYPE": 1}
        self.rdma[f"D_{stage}_BASE_ADDR_LOW"] = OPERAND_BASE[stage]
        self.rdma[f"D_{stage}_LINE_STRIDE"] = self.line * bpe
        self.rdma[f"D_{stage}_SURFACE_STRIDE"] = self.surf * bpe

    def context(self) -> OpContext:
        views = {"SDP": RegView(UNITS["SDP"], _words("SDP", self.sdp)),
                 "SDP_RDMA": RegView(UNITS["SDP_RDMA"], _words("SDP_RDMA", self.rdma))}
        return OpContext(hw=self.hw, mem=self.mem, regs=views, lut={"SDP": self.lut}, flying_input=self.flying_input)

    def run(self) -> tuple[np.ndarray | None, OpContext]:
        ctx = self.context()
        return sdp_engine.run(ctx), ctx

    def output(self) -> np.ndarray:
        return read_cube(self.mem.dram, DST, self.layout())


def random_input(op: SdpOp, rng: np.random.Generator) -> np.ndarray:
    x = rng.integers(-128, 128, size=(op.c_pad, op.height, op.width))
    op.set_input(x)
    return x


def expect(x: np.ndarray, fn) -> np.ndarray:
    out = np.zeros_like(x)
    for idx in np.ndindex(x.shape):
        out[idx] = fn(int(x[idx]), idx)
    return out


# ---------------------------------------------------------------------------------------------------
# Registration and hooks
# ---------------------------------------------------------------------------------------------------
def test_engine_registered() -> None:
    eng = ENGINES["SDP"]
    assert eng.units == ("SDP",) and eng.rdma == "SDP_RDMA" and eng.done_bits == (("SDP", 0),)
    assert eng.lut_units == ("SDP",)


def test_hooks_source_sink_rdma_needed() -> None:
    op = SdpOp(8, 1, 1)
    views = op.context().regs
    assert sdp_engine.source(views) is None and sdp_engine.sink(views) is None
    assert sdp_engine.rdma_needed(views)
    op = SdpOp(8, 1, 1, sdp={"D_FEATURE_MODE_CFG": {"FLYING_MODE": 1, "OUTPUT_DST": 1}})
    views = op.context().regs
    assert sdp_engine.source(views) == "CONV" and sdp_engine.sink(views) == "PDP"
    assert not sdp_engine.rdma_needed(views)
    op.sdp.update(x_regs("BN", mul_op=1, mul_src=1))
    assert sdp_engine.rdma_needed(op.context().regs)
    op.sdp.update(x_regs("BN", mul_op=1, mul_src=1) | {"D_DP_BN_CFG": {"BN_BYPASS": 1}})
    assert not sdp_engine.rdma_needed(op.context().regs)


# ---------------------------------------------------------------------------------------------------
# X stages (BS / BN)
# ---------------------------------------------------------------------------------------------------
def test_bypass_everything_copies_input_including_padding_lanes() -> None:
    op = SdpOp(3, 2, 2)  # 3 channels -> 8 lanes on nv_small
    x = random_input(op, np.random.default_rng(0))
    assert op.run()[0] is None
    np.testing.assert_array_equal(op.output(), x)


@pytest.mark.parametrize("algo", ["MAX", "MIN", "SUM"])
def test_x_alu_modes_with_shifted_reg_operand(algo: str) -> None:
    op = SdpOp(8, 2, 3, sdp=x_regs("BS", alu=algo, alu_op=-3, alu_shift=2))
    x = random_input(op, np.random.default_rng(1))
    op.run()
    f = {"MAX": max, "MIN": min, "SUM": lambda a, b: a + b}[algo]
    np.testing.assert_array_equal(op.output(), expect(x, lambda v, _: ref_sat(f(v, -12), 8)))


def test_x_alu_operand_shift_saturates_to_32_bits() -> None:
    cfg = sdp_engine.XConfig.from_view(SdpOp(8, 1, 1, sdp=x_regs("BS", alu="SUM", alu_op=5, alu_shift=63)).context().regs["SDP"], "BS")
    out = sdp_engine.x_stage(np.array([0, -1]), cfg, cfg.alu_operand, cfg.mul_operand)
    np.testing.assert_array_equal(out, [2**31 - 1, 2**31 - 2])


def test_x_mul_with_prelu_and_truncation() -> None:
    # x < 0: x·(-5) then rha by 2 (ties away from zero); x >= 0 passes unshifted.
    op = SdpOp(8, 1, 2, sdp=x_regs("BS", mul_op=-5, mul_shift=2, prelu=True))
    x = np.zeros((8, 1, 2), dtype=np.int64)
    x[:, 0, 0] = [-1, -2, -3, -10, 0, 1, 7, 127]
    x[:, 0, 1] = [-128, -127, -6, -7, 100, 5, 2, 3]
    op.set_input(x)
    op.run()
    hand = np.array([[1, 3, 4, 13, 0, 1, 7, 127], [127, 127, 8, 9, 100, 5, 2, 3]]).T  # 160 -> sat8 127
    np.testing.assert_array_equal(op.output()[:, 0, :], hand)


def test_truncation_applies_when_mul_is_bypassed() -> None:
    op = SdpOp(8, 1, 1, sdp=x_regs("BN", alu="SUM", alu_op=1, mul_shift=1))
    x = np.array([-4, -3, -2, -1, 0, 1, 2, 3]).reshape(8, 1, 1)
    op.set_input(x)
    op.run()
    # (x+1)/2 rounded half away from zero: -3/2 -> -2, -1/2 -> -1, 1/2 -> 1, 3/2 -> 2
    np.testing.assert_array_equal(op.output().reshape(-1), [-2, -1, -1, 0, 1, 1, 2, 2])


def test_relu() -> None:
    op = SdpOp(8, 1, 1, sdp=x_regs("BS", relu=True))
    x = np.array([-128, -1, 0, 1, 5, -7, 127, -50]).reshape(8, 1, 1)
    op.set_input(x)
    op.run()
    np.testing.assert_array_equal(op.output().reshape(-1), [0, 0, 0, 1, 5, 0, 127, 0])


def test_prelu_pass_through_keeps_low_32_bits_of_a_33_bit_sum() -> None:
    op = SdpOp(8, 1, 1, sdp=x_regs("BS", alu="SUM", alu_op=0x4000, alu_shift=17, mul_op=3, prelu=True))
    cfg = sdp_engine.XConfig.from_view(op.context().regs["SDP"], "BS")
    x = np.array([2**31 - 1, 2**30, -2**31])
    out = sdp_engine.x_stage(x, cfg, cfg.alu_operand, cfg.mul_operand)
    # The operand 0x4000 << 17 = 2^31 saturates to 2^31 − 1. Sums 2^32 − 2 and 3·2^30 − 1 are positive
    # 33-bit values: they pass PReLU and keep their low 32 bits. −2^31 + 2^31 − 1 = −1 is multiplied by 3.
    np.testing.assert_array_equal(out, [-2, -2**30 - 1, -3])
    assert out.tolist() == [ref_x(int(v), cfg, cfg.alu_operand, cfg.mul_operand) for v in x]


def test_x1_then_x2_chain_matches_reference() -> None:
    rng = np.random.default_rng(2)
    op = SdpOp(10, 2, 3, sdp={**x_regs("BS", alu="MAX", alu_op=-20, mul_op=300, mul_shift=4, relu=True),
                              **x_regs("BN", alu="SUM", alu_op=-7, alu_shift=3, mul_op=-2, mul_shift=1, prelu=True)})
    x = random_input(op, rng)
    op.run()
    regs = op.context().regs["SDP"]
    x1, x2 = sdp_engine.XConfig.from_view(regs, "BS"), sdp_engine.XConfig.from_view(regs, "BN")

    def f(v: int, _: tuple) -> int:
        v = ref_x(v, x1, x1.alu_operand, x1.mul_operand)
        return ref_sat(ref_x(v, x2, x2.alu_operand, x2.mul_operand), 8)

    np.testing.assert_array_equal(op.output(), expect(x, f))


# ---------------------------------------------------------------------------------------------------
# MEM operands
# ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("per_element", [False, True])
@pytest.mark.parametrize("size", [1, 2])
@pytest.mark.parametrize("use", ["ALU", "MUL", "BOTH"])
def test_mem_operands(per_element: bool, size: int, use: str) -> None:
    rng = np.random.default_rng(3)
    lo, hi = (-128, 128) if size == 1 else (-32768, 32768)
    op = SdpOp(9, 2, 2, sdp=x_regs("BS", alu="SUM" if use != "MUL" else None, alu_src=1, alu_op=999,
                                  mul_op=7 if use != "ALU" else None, mul_src=1, mul_shift=6))
    x = random_input(op, rng)
    shape = (op.c_pad, op.height, op.width) if per_element else (op.c_pad,)
    comps = [rng.integers(lo, hi, size=shape) for _ in range(2 if use == "BOTH" else 1)]
    op.set_operands("BS", use, comps, size, per_element)
    op.run()
    cfg = sdp_engine.XConfig.from_view(op.context().regs["SDP"], "BS")
    alu = comps[0] if use != "MUL" else None
    mul = comps[-1] if use != "ALU" else None

    def pick(a: np.ndarray | None, idx: tuple) -> int:
        if a is None:
            return 0
        return int(a[idx] if per_element else a[idx[0]])

    np.testing.assert_array_equal(op.output(), expect(x, lambda v, i: ref_sat(ref_x(v, cfg, pick(alu, i), pick(mul, i)), 8)))


def test_mem_operand_needs_enabled_dma() -> None:
    op = SdpOp(8, 1, 1, sdp=x_regs("BS", alu="SUM", alu_src=1))
    with pytest.raises(ConfigError, match="SDP_RDMA.D_BRDMA_CFG.BRDMA_DISABLE"):
        op.run()


def test_mem_operand_needs_matching_data_use() -> None:
    op = SdpOp(8, 1, 1, sdp=x_regs("BN", mul_op=1, mul_src=1))
    op.set_operands("BN", "ALU", [np.zeros(8)], 1, False)  # the DMA delivers ALU data only
    with pytest.raises(ConfigError, match="NRDMA_DATA_USE"):
        op.run()


# ---------------------------------------------------------------------------------------------------
# Y stage (EW) and the LUT
# ---------------------------------------------------------------------------------------------------
def test_ew_is_unsupported_on_nv_small() -> None:
    op = SdpOp(8, 1, 1, sdp=ew_regs(alu="SUM", alu_op=1))
    with pytest.raises(UnsupportedError) as err:
        op.run()
    assert err.value.unit == "SDP_EW"


def test_lut_is_unsupported_without_lut_unit() -> None:
    op = SdpOp(8, 1, 1, hw=NV_SMALL_256_FULL.derive(sdp_lut=False), sdp=ew_regs(lut=True))
    with pytest.raises(UnsupportedError) as err:
        op.run()
    assert err.value.unit == "SDP_LUT"


def test_bs_is_unsupported_without_bs_unit() -> None:
    op = SdpOp(8, 1, 1, hw=NV_SMALL.derive(sdp_bs=False), sdp=x_regs("BS", relu=True))
    with pytest.raises(UnsupportedError) as err:
        op.run()
    assert err.value.unit == "SDP_BS"


def test_bn_is_unsupported_without_bn_unit() -> None:
    """A configuration without SDP's X2 (BN) unit refuses an operation that enables it (BN_BYPASS=0), and
    only such an operation: with BN bypassed, the same hardware runs an X1 ReLU."""
    hw = NV_SMALL.derive(sdp_bn=False)
    op = SdpOp(8, 1, 1, hw=hw, sdp=x_regs("BN", relu=True))
    with pytest.raises(UnsupportedError) as err:
        op.run()
    assert err.value.unit == "SDP_BN"
    SdpOp(8, 1, 1, hw=hw, sdp=x_regs("BS", relu=True)).run()


def test_int16_precision_is_unsupported() -> None:
    op = SdpOp(8, 1, 1, sdp={"D_DATA_FORMAT": {"PROC_PRECISION": "INT16", "OUT_PRECISION": "INT16"}})
    with pytest.raises(UnsupportedError) as err:
        op.run()
    assert err.value.unit == "INT16"


def test_ew_mul_is_exact_at_64_bits() -> None:
    op = SdpOp(8, 1, 1, hw=NV_SMALL_256_FULL, sdp=ew_regs(mul_op=-2**31, truncate=62))
    y = sdp_engine.YConfig.from_view(op.context().regs["SDP"])
    x = np.array([-2**31, 2**31 - 1, -1, 3])
    out = sdp_engine.y_core(x, y, y.alu_operand, y.mul_operand)
    # (−2^31)·(−2^31) = 2^62 -> 1; (2^31−1)·(−2^31) / 2^62 = −1 + 2^−31 -> −1; ±3·2^31 / 2^62 -> 0
    np.testing.assert_array_equal(out, [1, -1, 0, 0])
    y2 = replace(y, truncate=1023)
    np.testing.assert_array_equal(sdp_engine.y_core(x, y2, 0, -2**31), [0, 0, 0, 0])
    y3 = replace(y, truncate=30)
    np.testing.assert_array_equal(sdp_engine.y_core(x, y3, 0, -2**31), [2**31 - 1, -2**31, 2, -6])


def test_rha_matches_python_for_wide_values() -> None:
    vals = [2**62, -2**62, 2**62 - 1, -(2**61) - 1, 3, -3, 0]
    for s in (0, 1, 2, 61, 62, 63, 64, 200, 1023):
        np.testing.assert_array_equal(rha(np.array(vals), s), [ref_rha(v, s) for v in vals])


@pytest.mark.parametrize("seed", range(6))
def test_ew_mul_alu_with_mem_operands_and_cvt(seed: int) -> None:
    rng = np.random.default_rng(10 + seed)
    per_element = bool(seed % 2)
    algo = ["MAX", "MIN", "SUM", "SUM", "MAX", "MIN"][seed]
    op = SdpOp(12, 2, 2, hw=NV_SMALL_256_FULL, sdp={
        **x_regs("BS", mul_op=int(rng.integers(-3000, 3000)), mul_shift=3),
        **ew_regs(alu=algo, alu_src=1, alu_cvt=(int(rng.integers(-500, 500)), int(rng.integers(-300, 300)), int(rng.integers(0, 8))),
                  mul_op=0, mul_src=1, mul_cvt=None if seed < 3 else (int(rng.integers(-50, 50)), int(rng.integers(-200, 200)), 2),
                  truncate=int(rng.integers(0, 12)), prelu=seed in (1, 4)),
        "D_CVT_SCALE": int(rng.integers(1, 4)), "D_CVT_SHIFT": int(rng.integers(0, 6)), "D_CVT_OFFSET": int(rng.integers(-100, 100)),
    })
    x = random_input(op, rng)
    shape = (op.c_pad, op.height, op.width) if per_element else (op.c_pad,)
    alu_mem, mul_mem = rng.integers(-32768, 32768, size=shape), rng.integers(-32768, 32768, size=shape)
    op.set_operands("EW", "BOTH", [alu_mem, mul_mem], 2, per_element)
    op.run()
    regs = op.context().regs["SDP"]
    x1, y, cvt = sdp_engine.XConfig.from_view(regs, "BS"), sdp_engine.YConfig.from_view(regs), sdp_engine.OutCvt.from_view(regs)

    def f(v: int, i: tuple) -> int:
        j = i if per_element else (i[0],)
        v = ref_x(v, x1, 0, x1.mul_operand)
        v = ref_y_core(v, y, ref_cvt(int(alu_mem[j]), y.alu_cvt), ref_cvt(int(mul_mem[j]), y.mul_cvt))
        return ref_out_cvt(v, cvt.offset, cvt.scale, cvt.shift)

    np.testing.assert_array_equal(op.output(), expect(x, f))


LE_T = [10 * i for i in range(65)]
LO_T = [-3 * i for i in range(257)]


def lookup(x: list[int], cfg: LutRegisters) -> list[int]:
    out, _ = lut_lookup(np.array(x), cfg, np.array(LE_T) & 0xFFFF, np.array(LO_T) & 0xFFFF)
    return out.tolist()


def test_lut_linear_hit_interpolates() -> None:
    # LE linear, start 0, 4 per entry: x=5 -> entry 1, fraction 1/4: 10·0.75 + 20·0.25 = 12.5 -> 13.
    cfg = lut_config(le_index_select=2, lo_start=1000, hybrid_priority=0)
    assert lookup([5, 4, 6, 7], cfg) == [13, 10, 15, 18]  # 17.5 -> 18 (ties away from zero)


def test_lut_exponent_hit_interpolates() -> None:
    # LE exponent, start 0, offset 0: x=6 -> log2 = 2 -> entry 2, fraction (6-4)/4 = 1/2 -> 25.
    cfg = lut_config(le_function=0, lo_start=1000)
    assert lookup([6, 1, 2, 3, 12], cfg) == [25, 0, 10, 15, 35]


def test_lut_exponent_underflow_uses_bias() -> None:
    # offset 2: x - start < 4 underflows; the slope is applied to x − (2^2 + start).
    cfg = lut_config(le_function=0, le_index_offset=2, le_start=0, le_slope_uflow_scale=3, le_slope_uflow_shift=1, lo_start=1000)
    # x=-3: (−3 − 4)·3 = −21 -> rha(−21, 1) = −11 ; x=2 (log2 1 < 2): (2−4)·3 = −6 -> −3
    assert lookup([-3, 2], cfg) == [-11, -3]


def test_lut_overflow_extrapolates_from_last_entry() -> None:
    cfg = lut_config(le_index_select=0, le_end=100, le_slope_oflow_scale=-5, le_slope_oflow_shift=-2, lo_start=1000)
    # x=200: index 200 >= 64 -> LE[64] = 640, slope (200 − 100)·(−5) << 2 = −2000
    assert lookup([200], cfg) == [640 - 2000]


def test_lut_negative_select_shifts_left_and_saturates_index() -> None:
    cfg = lut_config(le_index_select=-3, lo_start=10**6)
    # index = x << 3: x=2 -> 16 (fraction 0) ; x=8 -> 64 -> overflow -> LE[64] + 0·slope
    assert lookup([2, 7, 8], cfg) == [160, 560, 640]


@pytest.mark.parametrize(
    "x, cfg, expected",
    [
        # both underflow -> UFLOW_PRIORITY picks LO: LO[0] + (x − lo_start)·1
        (-5, lut_config(le_start=0, lo_start=0, uflow_priority=1, lo_slope_uflow_scale=1, le_slope_uflow_scale=2), -5),
        (-5, lut_config(le_start=0, lo_start=0, uflow_priority=0, lo_slope_uflow_scale=1, le_slope_uflow_scale=2), -10),
        # both overflow -> OFLOW_PRIORITY
        (10**6, lut_config(le_end=10**6 - 1, lo_end=10**6 - 2, oflow_priority=1, lo_slope_oflow_scale=1), -768 + 2),
        (10**6, lut_config(le_end=10**6 - 1, lo_end=10**6 - 2, oflow_priority=0, le_slope_oflow_scale=1), 640 + 1),
        # both hit -> HYBRID_PRIORITY
        (3, lut_config(hybrid_priority=1), -9),
        (3, lut_config(hybrid_priority=0), 30),
        # LE underflows while LO overflows -> HYBRID_PRIORITY, flags of the chosen table
        (300, lut_config(le_start=400, lo_start=0, hybrid_priority=0, le_slope_uflow_scale=1), -100),
        (300, lut_config(le_start=400, lo_start=0, hybrid_priority=1, lo_slope_oflow_scale=1, lo_end=299), -768 + 1),
        # only one table hits -> that table, whatever the priorities
        (3, lut_config(le_start=5, uflow_priority=0, hybrid_priority=0), -9),
        (3, lut_config(lo_start=5, uflow_priority=1, hybrid_priority=1), 30),
    ],
)
def test_lut_priority_rules(x: int, cfg: LutRegisters, expected: int) -> None:
    assert lookup([x], cfg) == [expected] == [ref_lut(x, cfg, LE_T, LO_T)]


def test_lut_stats() -> None:
    cfg = lut_config(le_start=0, lo_start=100)
    _, stats = lut_lookup(np.array([-1, 5, 150, 10**6]), cfg, np.array(LE_T), np.array(LO_T))
    # -1: both uflow; 5: LE hit, LO uflow; 150: LE oflow, LO hit; 10^6: both oflow
    assert (stats.uflow, stats.oflow, stats.hybrid, stats.le_hit, stats.lo_hit) == (1, 1, 2, 1, 1)


@pytest.mark.parametrize("seed", range(40))
def test_lut_matches_reference_on_random_configs(seed: int) -> None:
    rng = np.random.default_rng(100 + seed)
    le = rng.integers(-32768, 32768, size=65).tolist()
    lo = rng.integers(-32768, 32768, size=257).tolist()
    s32 = lambda: int(rng.integers(-2**31, 2**31))  # noqa: E731
    start = int(rng.integers(-2**31, 2**31 - 2**20))
    cfg = lut_config(
        le_function=int(rng.integers(0, 2)), uflow_priority=int(rng.integers(0, 2)), oflow_priority=int(rng.integers(0, 2)),
        hybrid_priority=int(rng.integers(0, 2)), le_index_offset=int(rng.integers(-40, 40)),
        le_index_select=int(rng.integers(-8, 40)), lo_index_select=int(rng.integers(-8, 40)),
        le_start=start if seed % 2 else s32(), le_end=s32(), lo_start=start + int(rng.integers(0, 2**16)), lo_end=s32(),
        le_slope_uflow_scale=int(rng.integers(-32768, 32768)), le_slope_oflow_scale=int(rng.integers(-32768, 32768)),
        le_slope_uflow_shift=int(rng.integers(-16, 16)), le_slope_oflow_shift=int(rng.integers(-16, 16)),
        lo_slope_uflow_scale=int(rng.integers(-32768, 32768)), lo_slope_oflow_scale=int(rng.integers(-32768, 32768)),
        lo_slope_uflow_shift=int(rng.integers(-16, 16)), lo_slope_oflow_shift=int(rng.integers(-16, 16)),
    )
    x = np.concatenate([rng.integers(-2**31, 2**31, size=200), start + rng.integers(-2**10, 2**24, size=200)])
    x = np.clip(x, -2**31, 2**31 - 1)
    out, _ = lut_lookup(x, cfg, np.array(le) & 0xFFFF, np.array(lo))
    assert out.tolist() == [ref_lut(int(v), cfg, le, lo) for v in x]


def test_lut_through_the_engine() -> None:
    cfg = lut_config(le_index_select=2, lo_start=1000, le_slope_uflow_scale=1)
    op = SdpOp(8, 1, 2, hw=NV_SMALL_256_FULL, sdp={**ew_regs(lut=True), **lut_regs(cfg)},
               lut={"LE": np.array(LE_T) & 0xFFFF, "LO": np.array(LO_T) & 0xFFFF})
    x = np.arange(16).reshape(8, 1, 2) - 4
    op.set_input(x)
    op.sdp["D_PERF_ENABLE"] = {"PERF_LUT_EN": 1}
    _, ctx = op.run()
    np.testing.assert_array_equal(op.output(), expect(x, lambda v, _: ref_sat(ref_lut(v, cfg, LE_T, LO_T), 8)))
    assert ctx.status[("SDP", "D_PERF_LUT_UFLOW")] == 5  # x <= 0


# ---------------------------------------------------------------------------------------------------
# Output CVT, EQL mode, on-the-fly paths, illegal configurations
# ---------------------------------------------------------------------------------------------------
def test_output_cvt_saturates_to_int8_and_counts_17_bit_saturation() -> None:
    op = SdpOp(8, 1, 1, sdp={"D_CVT_OFFSET": -10, "D_CVT_SCALE": 30000, "D_CVT_SHIFT": 4,
                             "D_PERF_ENABLE": {"PERF_SAT_EN": 1}})
    x = np.array([-128, -11, -10, -9, 0, 1, 127, 2]).reshape(8, 1, 1)
    op.set_input(x)
    _, ctx = op.run()
    # (x + 10)·30000 / 16: −221250, −1875, 0, 1875, 18750, 20625, 256875, 22500
    hand = [-128, -128, 0, 127, 127, 127, 127, 127]
    np.testing.assert_array_equal(op.output().reshape(-1), hand)
    assert ctx.status[("SDP", "D_PERF_OUT_SATURATION")] == 2  # −221250 and 256875 exceed 17 bits
    assert [ref_out_cvt(int(v), -10, 30000, 4) for v in x.reshape(-1)] == hand


def test_output_cvt_17_bit_saturation_count() -> None:
    v, t = sdp_engine.output_cvt(np.array([2**20, -(2**20), 65535, 100]), sdp_engine.OutCvt(0, 1, 0))
    assert v.tolist() == [127, -128, 127, 100] and t == 2


def test_eql_mode_writes_nothing_and_reports_unequal() -> None:
    op = SdpOp(8, 1, 1, hw=NV_SMALL_256_FULL, sdp=ew_regs(alu="EQL", alu_op=5))
    op.set_input(np.full((8, 1, 1), 5))
    op.mem.dram.write(DST, bytes([0xAA] * 8))
    out, ctx = op.run()
    assert out is None and ctx.status[("SDP", "D_STATUS")] == 0
    assert op.mem.dram.read_bytes(DST, 8) == bytes([0xAA] * 8)
    x = np.full((8, 1, 1), 5)
    x[7] = 4  # a padding lane counts too
    op.set_input(x)
    _, ctx = op.run()
    assert ctx.status[("SDP", "D_STATUS")] == 1


def test_eql_mode_needs_identity_output_cvt() -> None:
    op = SdpOp(8, 1, 1, hw=NV_SMALL_256_FULL, sdp={**ew_regs(alu="EQL"), "D_CVT_SCALE": 2})
    with pytest.raises(ConfigError, match="SDP.D_CVT_SCALE.CVT_SCALE"):
        op.run()


def test_flying_input_from_cacc_and_output_to_pdp() -> None:
    flying = np.array([2**31 - 1, -2**31, 1000, -1000, 5, -5, 0, 300]).reshape(8, 1, 1)
    op = SdpOp(8, 1, 1, sdp={"D_FEATURE_MODE_CFG": {"FLYING_MODE": 1, "OUTPUT_DST": 1},
                             **x_regs("BS", alu="SUM", alu_op=-1, mul_shift=2)}, flying_input=flying)
    op.rdma = {}  # SDP_RDMA is not needed
    out, _ = op.run()
    assert out is not None and out.shape == (8, 1, 1)
    np.testing.assert_array_equal(out.reshape(-1), [127, -128, 127, -128, 1, -2, 0, 75])
    assert not op.mem.dram.read(DST, 8).any()


def test_flying_input_shape_must_match_cube() -> None:
    op = SdpOp(8, 2, 1, sdp={"D_FEATURE_MODE_CFG": {"FLYING_MODE": 1}}, flying_input=np.zeros((8, 1, 1)))
    with pytest.raises(ConfigError, match="SDP.D_DATA_CUBE_CHANNEL"):
        op.run()


def test_overlapping_destination_lines_are_illegal() -> None:
    op = SdpOp(8, 2, 2, sdp={"D_DST_LINE_STRIDE": 8})  # a line of 2 atoms is 16 bytes
    random_input(op, np.random.default_rng(4))
    with pytest.raises(ConfigError, match="SDP.D_DST_LINE_STRIDE.DST_LINE_STRIDE"):
        op.run()


def test_interleaved_surfaces_are_legal() -> None:
    # Surfaces interleaved between lines: surf stride one line, line stride two lines.
    op = SdpOp(16, 2, 2, sdp={"D_DST_LINE_STRIDE": 32, "D_DST_SURFACE_STRIDE": 16})
    x = random_input(op, np.random.default_rng(5))
    op.run()
    np.testing.assert_array_equal(read_cube(op.mem.dram, DST, CubeLayout(16, 2, 2, 32, 16, 8)), x)


def test_rdma_cube_must_match_sdp_cube() -> None:
    op = SdpOp(8, 2, 2, rdma={"D_DATA_CUBE_WIDTH": 0})
    with pytest.raises(ConfigError, match="SDP_RDMA.D_DATA_CUBE_WIDTH.WIDTH"):
        op.run()


def test_one_by_one_cube_needs_packed_surfaces() -> None:
    op = SdpOp(16, 1, 1, sdp={"D_DST_SURFACE_STRIDE": 64})
    with pytest.raises(ConfigError, match="SDP.D_DST_SURFACE_STRIDE"):
        op.run()


def test_cv_sram_is_unsupported_on_nv_small() -> None:
    op = SdpOp(8, 1, 1, sdp={"D_DST_DMA_CFG": 0})
    with pytest.raises(UnsupportedError) as err:
        op.run()
    assert err.value.unit == "CVIF"


def test_le_linear_fraction_keeps_cmod_sign_extension_bits() -> None:
    # select 33, x − start = 2^31: index 0. LO's fraction is 2^31·2^2 (1/4); the cmod's LE holds the masked
    # value in a signed 32-bit variable, so its fraction gains bit 34: 2^33 + 2^34 (3/4).
    cfg = lut_config(le_index_select=33, lo_index_select=33, le_start=-2**31, lo_start=-2**31)
    assert lookup([0], cfg) == [8]  # 10·3/4 = 7.5
    assert lookup([0], replace(cfg, hybrid_priority=1)) == [-1]  # −3·1/4 = −0.75


def test_flying_mode_ignores_rdma_input_precision() -> None:
    op = SdpOp(8, 1, 1, sdp={"D_FEATURE_MODE_CFG": {"FLYING_MODE": 1}, **x_regs("BS", alu="SUM", alu_src=1)},
               rdma={"D_FEATURE_MODE_CFG": {"FLYING_MODE": 1, "IN_PRECISION": "INT16"}},
               flying_input=np.arange(8).reshape(8, 1, 1))
    op.set_operands("BS", "ALU", [np.arange(8) * 10], 1, False)
    op.run()
    np.testing.assert_array_equal(op.output().reshape(-1), np.arange(8) * 11)


# ---------------------------------------------------------------------------------------------------
# Saturation and boundary corners (each pins one NVDLA rule at its edge)
# ---------------------------------------------------------------------------------------------------
def test_ew_alu_sum_saturates_to_32_bits() -> None:
    """The Y ALU's SUM is ``sat32(x + op)`` (NVDLA_NOTES §4 Y core), unlike X's 33-bit SUM: a sum one past
    either end of int32 clamps, a sum inside it is exact."""
    op = SdpOp(8, 1, 1, hw=NV_SMALL_256_FULL, sdp=ew_regs(alu="SUM"))
    y = sdp_engine.YConfig.from_view(op.context().regs["SDP"])
    x = np.array([2**31 - 1, -2**31, 2**31 - 1, -2**31, -5])
    alu = np.array([1, -1, 2**31 - 1, -2**31, 3])
    out = sdp_engine.y_core(x, y, alu, 0)
    np.testing.assert_array_equal(out, [2**31 - 1, -2**31, 2**31 - 1, -2**31, -2])
    assert out.tolist() == [ref_y_core(int(v), y, int(a), 0) for v, a in zip(x, alu)]


def test_flying_input_is_read_as_32_bit_twos_complement_words() -> None:
    """CACC hands SDP 32-bit words: raw words delivered as unsigned values (0x80000000 .. 0xFFFFFFFF in an
    int64 cube) are negative int32 values, exactly like the same values delivered sign-extended."""
    words = np.array([0xFFFFFFFF, 0x80000000, 0xFFFFFF80, 0x7FFFFFFF, 5, 0xFFFFFFFB, 0, 0xFFFFFFFE])
    op = SdpOp(8, 1, 1, sdp={"D_FEATURE_MODE_CFG": {"FLYING_MODE": 1, "OUTPUT_DST": 1}},
               flying_input=words.reshape(8, 1, 1).astype(np.int64))
    op.rdma = {}
    out, _ = op.run()
    np.testing.assert_array_equal(out.reshape(-1), [-1, -128, -128, 127, 5, -5, 0, -2])
    signed = SdpOp(8, 1, 1, sdp=op.sdp, flying_input=np.array([ref_wrap(int(w), 32) for w in words]).reshape(8, 1, 1))
    signed.rdma = {}
    np.testing.assert_array_equal(signed.run()[0], out)


@pytest.mark.parametrize("mode, extra", [
    ({"FLYING_MODE": 1, "WINOGRAD": 1, "OUTPUT_DST": 1}, {}),  # Winograd order to PDP
    ({"FLYING_MODE": 1, "WINOGRAD": 1}, ew_regs(alu="EQL")),  # Winograd order in EQL (quiet) mode
])
def test_winograd_output_goes_only_to_memory_outside_eql_mode(mode: dict, extra: dict) -> None:
    """The cmod asserts a Winograd-order SDP writes memory: neither the PDP port nor EQL compare mode
    (which writes nothing) is allowed, each refused on its own."""
    op = SdpOp(8, 1, 1, hw=NV_SMALL_256_FULL, sdp={"D_FEATURE_MODE_CFG": mode, **extra},
               flying_input=np.zeros((8, 1, 1), dtype=np.int64))
    op.rdma = {}
    with pytest.raises(ConfigError, match="SDP.D_FEATURE_MODE_CFG.WINOGRAD"):
        op.run()


def test_lut_exponent_index_64_is_the_overflow_boundary() -> None:
    """LE exponent mode: index = floor(log2(x − start)) − OFFSET; 64 (the last entry's own point) already
    overflows and extrapolates from LE_END, 63 still interpolates between LE[63] and LE[64]. OFFSET −33
    puts log2 = 31 (x − start = 2^31, the largest offset a 32-bit x can have) at index 64."""
    cfg = lut_config(le_function=0, le_index_offset=-33, le_start=-2**31, le_end=-10, le_slope_oflow_scale=1,
                     lo_start=2**31 - 1, hybrid_priority=0)  # LO underflows everywhere: LE decides
    # x = 0: index 64 -> LE[64] + (0 − (−10))·1 = 650; x = −1: index 63, fraction 1 − 2^−30 -> 640 after rounding
    assert lookup([0, -1], cfg) == [650, 640] == [ref_lut(v, cfg, LE_T, LO_T) for v in (0, -1)]
    _, stats = lut_lookup(np.array([0, -1]), cfg, np.array(LE_T), np.array(LO_T))
    assert (stats.oflow, stats.le_hit) == (1, 1)


def test_le_linear_sign_extension_bits_shift_down_with_a_select_above_35() -> None:
    """LE linear with INDEX_SELECT > 35: the fraction is the cmod's signed 32-bit ``le_data_f`` widened to
    35 bits (bits 32..34 copies of bit 31) and then shifted right by SELECT − 35, so an offset x − START >=
    2^31 keeps those three high bits: 2^31 widens to 2^35 − 2^31, halved (SELECT 36) to a weight of 15/32."""
    cfg = lut_config(le_index_select=36, lo_index_select=36, le_start=-2**31, lo_start=2**31 - 1)
    # LO underflows everywhere (x <= its START) and LE hits at index 0, so LE decides (HYBRID picks LE).
    # x = 0: offset 2^31 -> 10·15/32 = 4.69 -> 5; x = 2^31 − 1: offset 2^32 − 1 -> weight (2^34 − 1)/2^35 -> 5;
    # x = −1: offset 2^31 − 1 has no sign bit -> weight (2^30 − 1)/2^35 -> 0.31 -> 0.
    xs = [0, 2**31 - 1, -1]
    assert lookup(xs, cfg) == [5, 5, 0] == [ref_lut(v, cfg, LE_T, LO_T) for v in xs]


def test_surfaces_of_one_line_overlapping_blame_the_surface_stride() -> None:
    """With a cube one line high, DST_LINE_STRIDE is never used (no second line per surface), so written
    lines that overlap can only come from DST_SURFACE_STRIDE: the error names that field, whatever value
    the unused line stride holds."""
    op = SdpOp(16, 1, 2, sdp={"D_DST_LINE_STRIDE": 8, "D_DST_SURFACE_STRIDE": 8})  # a line is 16 bytes
    random_input(op, np.random.default_rng(6))
    with pytest.raises(ConfigError, match="SDP.D_DST_SURFACE_STRIDE.DST_SURFACE_STRIDE"):
        op.run()


def test_fp16_lut_hit_on_an_entry_point_is_the_entry_itself() -> None:
    """fp16 LUT (cmod ``sdp_y_inp.cpp``): a hit with a 35-bit fraction of 0 (x − START a whole multiple of
    2^SELECT) weights y0 by FP17 1.0 and y1 by 0, so the fp32 output is the fp16 table entry, exactly.
    LO linear with START 0.0 and SELECT 0 puts x = i at entry i; LE starts at the largest float, so it
    underflows everywhere and LO (the table that hits) decides."""
    lo = tuple(int(v) for v in np.asarray(np.arange(257) * 0.75 - 3.0, dtype=np.float16).view(np.uint16))
    cfg = LutRegisters(lo_table=lo, le_function="linear", le_start=0x7F7FFFFF)
    x = np.asarray([1.0, 2.0, 7.0, 100.0, 255.0], dtype=np.float32).view(np.uint32).astype(np.int64)
    out, stats = lut_lookup_fp(x, cfg, None, np.array(lo))
    expect = np.asarray([-2.25, -1.5, 2.25, 72.0, 188.25], dtype=np.float32).view(np.uint32)  # 0.75·i − 3
    np.testing.assert_array_equal(out, expect)
    assert stats.lo_hit == 5 and stats.uflow == stats.oflow == 0
