"""Batched direct convolution (``golden.engines.conv_batch``): each batch equals its own unbatched
convolution, SDP writes batch b at ``b * D_DST_BATCH_STRIDE``, MEM operands serve every batch, and the batch
rules (units agree, strides, CBUF, CACC/SDP pairing, memory-only output) raise naming the field."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from golden import Dla, get_config
from golden.errors import ConfigError, UnsupportedError
from golden.regs import UNITS
from regressions.lib import programs
from regressions.lib.programs import image as programs_image
from regressions.lib.programs.image import BatchConvLayer

HW = get_config("nv_full")


def layer(n: int = 3, seed: int = 0, **kw) -> BatchConvLayer:
    rng = np.random.default_rng(seed)
    c, h, w, k = kw.pop("c", 40), kw.pop("h", 5), kw.pop("w", 6), kw.pop("k", 35)
    base = dict(xs=rng.integers(-128, 128, (n, c, h, w)), w=rng.integers(-20, 20, (k, c, 3, 2)), stride=(1, 2),
                pad=(1, 1), pad_value=-3, clip_truncate=5, out_cvt=(7, 3, 4), src_gap=32, dst_gap=96)
    return BatchConvLayer(**{**base, **kw})


def patched(program: programs.LayerTest, **changes: dict) -> programs.LayerTest:
    """A copy of ``program`` with fields of some register words changed (``CDMA__D_BATCH_STRIDE=dict(...)``)."""
    writes = list(program.writes)
    for key, fields in changes.items():
        unit, name = key.split("__")
        reg = UNITS[unit].register(name)
        for i, (full, value) in enumerate(writes):
            if full == reg.full_name:
                for f, v in fields.items():
                    value = (value & ~reg.field(f).mask) | reg.field(f).encode(v)
                writes[i] = (full, value)
    return program.with_writes(writes)


def unbatched(lay: BatchConvLayer, b: int) -> bytes:
    """Batch b alone, as a plain direct convolution program."""
    conv = programs.ConvLayer(x=lay.xs[b], w=lay.w, stride=lay.stride, dilation=lay.dilation, pad=lay.pad,
                              pad_value=lay.pad_value, out_hw=lay.out_hw, clip_truncate=lay.clip_truncate,
                              cvt=lay.cvt, out_cvt=lay.out_cvt)
    return programs.program_conv(HW, conv).run(Dla(HW))


def test_each_batch_equals_its_unbatched_convolution_at_its_stride():
    lay = layer(n=4)
    program = programs_image.program_batch_conv(HW, lay)
    dla = Dla(HW)
    got = program.run(dla)
    _, dst_stride = lay.batch_strides(HW)
    assert dst_stride % 32 == 0 and dst_stride % 64 != 0  # batches start on and off 64-byte boundaries
    for b in range(4):
        alone = unbatched(lay, b)
        assert got[b * dst_stride : b * dst_stride + len(alone)] == alone
        if b < 3:  # the gap up to the next batch is never written
            assert not any(got[b * dst_stride + len(alone) : (b + 1) * dst_stride])
    assert len(set(got[b * dst_stride : b * dst_stride + 64] for b in range(4))) == 4
    assert dla.intr_status & 1 and dla.history[-1][0] == ("CONV", "SDP")


def test_saturation_counts_add_up_over_batches():
    lay = layer(n=3, clip_truncate=0, out_cvt=(0, 1, 0))
    dla = Dla(HW)
    programs_image.program_batch_conv(HW, lay).run(dla)
    per_batch = []
    for b in range(3):
        d = Dla(HW)
        conv = programs.ConvLayer(x=lay.xs[b], w=lay.w, stride=lay.stride, pad=lay.pad, pad_value=lay.pad_value,
                                  clip_truncate=0)
        programs.program_conv(HW, conv).run(d)
        per_batch.append(d.read("NVDLA_CACC.D_OUT_SATURATION_0"))
    assert dla.read("NVDLA_CACC.D_OUT_SATURATION_0") == sum(per_batch)


def test_memory_operands_serve_every_batch():
    from regressions.lib.reference import sdp as ref_sdp

    lay = layer(n=2, k=9)
    oh, ow = lay.output_hw()
    rng = np.random.default_rng(5)
    x1 = ref_sdp.SdpXParams(bypass=False, alu_bypass=False, alu_algo=2,
                            alu_operand=rng.integers(-300, 300, (9, oh, ow)),
                            mul_bypass=False, mul_operand=rng.integers(-50, 50, (9, oh, ow)), mul_shift=3,
                            relu_bypass=False)
    params = ref_sdp.SdpParams(x1=x1, cvt_offset=0, cvt_scale=1, cvt_shift=2)
    got = programs_image.program_batch_conv(HW, dataclasses.replace(lay, sdp=params)).run(Dla(HW))
    _, dst_stride = lay.batch_strides(HW)
    for b in range(2):
        single = dataclasses.replace(lay, xs=lay.xs[b : b + 1], sdp=params)
        alone = programs_image.program_batch_conv(HW, single)
        # One batch through the same registers (BATCHES=0) is the plain unbatched path.
        assert dict(alone.writes)["NVDLA_CDMA.D_BATCH_NUMBER_0"] == 0
        want = alone.run(Dla(HW))
        assert got[b * dst_stride : b * dst_stride + len(want)] == want


@pytest.mark.parametrize("change,where", [
    ({"CSC__D_BATCH_NUMBER": dict(BATCHES=1)}, "CSC.D_BATCH_NUMBER.BATCHES"),
    ({"CACC__D_BATCH_NUMBER": dict(BATCHES=3)}, "CACC.D_BATCH_NUMBER.BATCHES"),
    ({"SDP__D_FEATURE_MODE_CFG": dict(BATCH_NUMBER=1)}, "SDP.D_FEATURE_MODE_CFG.BATCH_NUMBER"),
    ({"CDMA__D_BATCH_STRIDE": dict(BATCH_STRIDE=64)}, "CDMA.D_BATCH_STRIDE.BATCH_STRIDE"),
    ({"SDP__D_DST_BATCH_STRIDE": dict(DST_BATCH_STRIDE=32)}, "SDP.D_DST_BATCH_STRIDE.DST_BATCH_STRIDE"),
])
def test_illegal_batch_programs_name_the_field(change, where):
    program = patched(programs_image.program_batch_conv(HW, layer()), **change)
    with pytest.raises(ConfigError) as info:
        program.run(Dla(HW))
    assert info.value.where == where


def test_batches_must_fit_the_cbuf_data_banks():
    lay = layer(n=2, c=256, h=30, w=30, k=2)
    program = programs_image.program_batch_conv(HW, lay)
    program.run(Dla(HW))  # the builder sized DATA_BANK for both batches
    banks = dict(program.writes)["NVDLA_CDMA.D_BANK_0"] & 0x1F
    assert banks >= 1
    small = patched(program, CDMA__D_BANK=dict(DATA_BANK=banks - 1), CSC__D_BANK=dict(DATA_BANK=banks - 1))
    with pytest.raises(ConfigError, match="CDMA.D_BANK.DATA_BANK"):
        small.run(Dla(HW))


def test_cacc_and_sdp_must_pair_atoms_alike():
    program = programs_image.program_batch_conv(HW, layer())
    moved = [(n, v + 32 if n == "NVDLA_CACC.D_DATAOUT_ADDR_0" else v) for n, v in program.writes]
    with pytest.raises(UnsupportedError) as info:
        program.with_writes(moved).run(Dla(HW))
    assert info.value.unit == "CACC"
    moved = [(n, v + 64 if n == "NVDLA_CACC.D_DATAOUT_ADDR_0" else v) for n, v in program.writes]
    program.with_writes(moved).run(Dla(HW))  # same alignment: fine


@pytest.mark.parametrize("config", ["nv_small", "nv_large"])
def test_configs_without_batch_mode_refuse(config):
    hw = get_config(config)
    lay = layer(n=2, c=8, k=4)
    program = programs_image.program_batch_conv(HW, lay)
    with pytest.raises(UnsupportedError) as info:
        program.with_writes(program.writes).run(Dla(hw))
    assert info.value.unit == "CDMA" and "batch" in str(info.value)


def sdp_context(**fields) -> "object":
    from golden.engines import OpContext
    from golden.regs import RegView

    reg = UNITS["SDP"].register("D_FEATURE_MODE_CFG")
    flying = np.zeros((2, HW.atom_elements(), 1, 1), dtype=np.int64)
    return OpContext(hw=HW, mem=Dla(HW).mem, regs={"SDP": RegView(UNITS["SDP"], {reg.offset: reg.encode(**fields)})},
                     flying_input=flying)


def test_standalone_batched_sdp_is_not_modelled():
    from golden.engines import conv_batch

    with pytest.raises(UnsupportedError, match="memory"):
        conv_batch.sdp_batches(sdp_context(FLYING_MODE=0, BATCH_NUMBER=1), lambda c: None)


def test_batched_sdp_output_goes_to_memory_only():
    from golden.engines import conv_batch

    with pytest.raises(ConfigError) as info:
        conv_batch.sdp_batches(sdp_context(FLYING_MODE=1, OUTPUT_DST=1, BATCH_NUMBER=1), lambda c: None)
    assert info.value.where == "SDP.D_FEATURE_MODE_CFG.OUTPUT_DST"
    with pytest.raises(ConfigError, match="CACC delivers"):
        conv_batch.sdp_batches(sdp_context(FLYING_MODE=1, BATCH_NUMBER=2), lambda c: None)


# ---- precision-dependent sizes, odd line strides, the smallest batches, EW modes -------------------------------
def int16_batched(xs: np.ndarray, w: np.ndarray, dst_surface_gap: int = 0) -> tuple[programs.LayerTest, int]:
    """A batched int16 convolution of ``xs`` (N, C, H, W): the compiler's 16-bit single-batch program with the
    batch registers added as ``emit_batch_conv`` adds them (CDMA/CSC/CACC BATCHES, both batch strides, SDP
    BATCH_NUMBER) and CACC's output address/line stride programmed like SDP's. ``dst_surface_gap`` bytes are
    left between SDP's output surfaces. Returns the program and its output batch stride."""
    from regressions.lib.programs import DST_BASE, SRC_BASE
    from regressions.lib.programs.conv_wide import WideConvLayer, atom16, pack16, program_conv_wide

    n = xs.shape[0]
    p = program_conv_wide(HW, WideConvLayer(x=xs[0], w=w, precision="int16"))
    words = dict(p.writes)
    src = [pack16(x, atom16(HW)) for x in xs]
    src_stride = -(-len(src[0]) // 64) * 64
    surf = words["NVDLA_SDP.D_DST_SURFACE_STRIDE_0"] + dst_surface_gap
    dst_stride = -(-(-(-w.shape[0] // atom16(HW)) * surf) // 64) * 64
    p.memory = [(SRC_BASE + b * src_stride, src[b]) for b in range(n)] + [m for m in p.memory if m[0] != SRC_BASE]
    p.output = (DST_BASE, n * dst_stride)
    batch = [(f"NVDLA_{u}.D_BATCH_NUMBER_0", n - 1) for u in ("CDMA", "CSC", "CACC")] + [
        ("NVDLA_CDMA.D_BATCH_STRIDE_0", src_stride), ("NVDLA_SDP.D_DST_BATCH_STRIDE_0", dst_stride),
        ("NVDLA_CACC.D_DATAOUT_ADDR_0", DST_BASE),
        ("NVDLA_CACC.D_LINE_STRIDE_0", words["NVDLA_SDP.D_DST_LINE_STRIDE_0"])]
    mode = UNITS["SDP"].register("D_FEATURE_MODE_CFG")
    writes = []
    for name, value in p.writes:
        if name == mode.full_name:
            value |= mode.field("BATCH_NUMBER").encode(n - 1)
        elif name == "NVDLA_SDP.D_DST_SURFACE_STRIDE_0":
            value = surf
        elif name.endswith(".D_OP_ENABLE_0") and batch:
            writes, batch = writes + batch, []
        writes.append((name, value))
    return p.with_writes(writes), dst_stride


def int16_layer(n: int = 2, c: int = 24, k: int = 20, seed: int = 11) -> tuple[np.ndarray, np.ndarray]:
    """int16 batches whose C and K (above 16) take two 16-channel surfaces, one 32-channel int8 atom."""
    rng = np.random.default_rng(seed)
    return rng.integers(-3000, 3000, (n, c, 3, 4)), rng.integers(-300, 300, (k, c, 2, 2))


def test_int16_batches_each_equal_their_unbatched_convolution():
    """Batch mode is not int8-only: int16 batches (two 16-channel surfaces each) are their own convolutions."""
    from regressions.lib.programs.conv_wide import WideConvLayer, program_conv_wide

    xs, w = int16_layer()
    program, dst_stride = int16_batched(xs, w)
    got = program.run(Dla(HW))
    for b in range(2):
        alone = program_conv_wide(HW, WideConvLayer(x=xs[b], w=w, precision="int16")).run(Dla(HW))
        assert got[b * dst_stride : b * dst_stride + len(alone)] == alone
    assert any(got[dst_stride : dst_stride + 64])


def test_int16_input_batch_stride_counts_16_channel_surfaces():
    """BATCH_STRIDE may not be below SURF_STRIDE * surfaces (cmod FAIL), surfaces counted in the input's own
    atoms: 24 int16 channels are two 16-channel surfaces, so one surface of stride overlaps the batches."""
    xs, w = int16_layer()
    program, _ = int16_batched(xs, w)
    surf = dict(program.writes)["NVDLA_CDMA.D_SURF_STRIDE_0"]
    with pytest.raises(ConfigError) as info:
        patched(program, CDMA__D_BATCH_STRIDE=dict(BATCH_STRIDE=surf)).run(Dla(HW))
    assert info.value.where == "CDMA.D_BATCH_STRIDE.BATCH_STRIDE"
    patched(program, CDMA__D_BATCH_STRIDE=dict(BATCH_STRIDE=2 * surf)).run(Dla(HW))  # two surfaces: legal


def test_int16_output_pairing_is_checked_on_every_16_channel_surface():
    """CACC counts output lines on through its surfaces; SDP starts each surface at its SURFACE_STRIDE. With
    int16 output 20 kernels are two surfaces: a 32-byte gap before the second one puts its lines off the 64-byte
    phase CACC pairs them in (refused), a 64-byte gap keeps it (legal)."""
    xs, w = int16_layer()
    with pytest.raises(UnsupportedError) as info:
        int16_batched(xs, w, dst_surface_gap=32)[0].run(Dla(HW))
    assert info.value.unit == "CACC"
    int16_batched(xs, w, dst_surface_gap=64)[0].run(Dla(HW))


def test_int16_output_of_16_kernels_is_one_surface_whatever_its_stride() -> None:
    """SDP writes int16 output in 16-channel atoms (32 bytes / 2): 16 kernels are one output surface, so
    DST_SURFACE_STRIDE addresses nothing and may equal the batch stride; the batches still land apart and
    each equals its unbatched convolution."""
    from regressions.lib.programs.conv_wide import WideConvLayer, program_conv_wide

    xs, w = int16_layer(k=16)
    program, dst_stride = int16_batched(xs, w)
    program = program.with_writes([(n, dst_stride if n == "NVDLA_SDP.D_DST_SURFACE_STRIDE_0" else v)
                                   for n, v in program.writes])
    got = program.run(Dla(HW))
    for b in range(2):
        alone = program_conv_wide(HW, WideConvLayer(x=xs[b], w=w, precision="int16")).run(Dla(HW))
        assert got[b * dst_stride : b * dst_stride + len(alone)] == alone


def test_odd_output_width_batches_pair_lines_alike():
    """Output lines of 3 atoms (96 bytes) alternate between 64-byte aligned and not, for CACC's line count and
    SDP's line stride alike: a legal batched program whose batches equal their unbatched convolutions."""
    lay = layer(n=2, w=5, k=9)
    assert lay.output_hw()[1] == 3
    got = programs_image.program_batch_conv(HW, lay).run(Dla(HW))
    _, dst_stride = lay.batch_strides(HW)
    for b in range(2):
        alone = unbatched(lay, b)
        assert got[b * dst_stride : b * dst_stride + len(alone)] == alone


def test_two_batches_of_one_line_may_not_overlap():
    """The smallest batched output, two batches of one line on one surface, still needs DST_BATCH_STRIDE to
    keep the lines apart: 32 bytes is below a 4-atom line."""
    lay = layer(n=2, c=8, h=1, k=9)
    assert lay.output_hw() == (1, 4)
    program = programs_image.program_batch_conv(HW, lay)
    program.run(Dla(HW))
    with pytest.raises(ConfigError) as info:
        patched(program, SDP__D_DST_BATCH_STRIDE=dict(DST_BATCH_STRIDE=32)).run(Dla(HW))
    assert info.value.where == "SDP.D_DST_BATCH_STRIDE.DST_BATCH_STRIDE"


def test_batched_sdp_refuses_only_an_active_eql_compare():
    """The cmod asserts EW EQL mode off in batch mode; an EW stage whose ALU is bypassed (ALGO left at EQL)
    compares nothing and is legal: with the multiplier bypassed too it leaves the output unchanged."""
    lay = layer(n=2, k=9)
    program = programs_image.program_batch_conv(HW, lay)
    want = program.run(Dla(HW))
    eql = dict(EW_BYPASS=0, EW_ALU_BYPASS=0, EW_ALU_ALGO=3, EW_MUL_BYPASS=1, EW_LUT_BYPASS=1)
    with pytest.raises(ConfigError) as info:
        patched(program, SDP__D_DP_EW_CFG=eql).run(Dla(HW))
    assert info.value.where == "SDP.D_DP_EW_CFG.EW_ALU_ALGO"
    assert patched(program, SDP__D_DP_EW_CFG=dict(eql, EW_ALU_BYPASS=1)).run(Dla(HW)) == want


@pytest.mark.parametrize("k,w", [(1, 6), (9, 2)], ids=["one-kernel", "two-atom-lines"])
def test_pairing_is_checked_for_one_kernel_and_for_two_atom_lines(k: int, w: int) -> None:
    """The CACC/SDP pairing rule holds for every batched output with lines of more than one atom: a single
    kernel (CHANNEL = 0, still one surface) and lines of exactly two atoms (the pair itself) are refused when
    CACC's line start is 32 bytes off SDP's 64-byte phase."""
    lay = layer(n=2, k=k, w=w)
    assert lay.output_hw()[1] == (4 if w == 6 else 2)
    program = programs_image.program_batch_conv(HW, lay)
    program.run(Dla(HW))
    moved = [(n, v + 32 if n == "NVDLA_CACC.D_DATAOUT_ADDR_0" else v) for n, v in program.writes]
    with pytest.raises(UnsupportedError) as info:
        program.with_writes(moved).run(Dla(HW))
    assert info.value.unit == "CACC"


def test_pairing_checks_the_second_int8_surface_of_33_kernels() -> None:
    """33 int8 kernels are two 32-channel output surfaces: moving only SDP's second surface 32 bytes off its
    64-byte phase (DST_SURFACE_STRIDE + 32) breaks the pairing CACC counts on, and is refused."""
    lay = layer(n=2, k=33)
    program = programs_image.program_batch_conv(HW, lay)
    program.run(Dla(HW))
    surf = dict(program.writes)["NVDLA_SDP.D_DST_SURFACE_STRIDE_0"]
    batch = dict(program.writes)["NVDLA_SDP.D_DST_BATCH_STRIDE_0"]
    assert surf % 64 == 0 and batch >= 2 * (surf + 32)
    with pytest.raises(UnsupportedError) as info:
        patched(program, SDP__D_DST_SURFACE_STRIDE=dict(DST_SURFACE_STRIDE=surf + 32)).run(Dla(HW))
    assert info.value.unit == "CACC"


def test_int8_output_of_20_kernels_is_one_surface_whatever_its_stride() -> None:
    """SDP writes int8 output in 32-channel atoms: 20 kernels are one output surface, so DST_SURFACE_STRIDE
    addresses nothing and may be off the 64-byte phase (here the batch stride, 32 mod 64); each batch still
    equals its unbatched convolution."""
    lay = layer(n=2, k=20)
    program = programs_image.program_batch_conv(HW, lay)
    _, dst_stride = lay.batch_strides(HW)
    assert dst_stride % 64 == 32
    program = program.with_writes([(n, dst_stride if n == "NVDLA_SDP.D_DST_SURFACE_STRIDE_0" else v)
                                   for n, v in program.writes])
    got = program.run(Dla(HW))
    for b in range(2):
        alone = unbatched(lay, b)
        assert got[b * dst_stride : b * dst_stride + len(alone)] == alone
