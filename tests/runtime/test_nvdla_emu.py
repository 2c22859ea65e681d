"""EMU1 (CPU emulator) tasks of NVDLA loadables: softmax and power computed as NVDLA's Emulator.cpp does
(binary32 arithmetic, half rounding to nearest with ties away from zero, int8 saturation), checked against
a plain-float reference written here; the descriptor layouts; EMU tasks ordered with DLA tasks; and one-line
errors for malformed descriptors."""
from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from golden.config import get_config
from regressions.lib.nvdla_loadables import emu_and_pool_expected, emu_and_pool_loadable
from runtime.golden_target import GoldenTarget
from runtime.nvdla import emulator as emu
from runtime.nvdla import fbs
from runtime.nvdla.emulator import EmuBufferDesc, EmuOp
from runtime.nvdla.run import NvdlaNetwork, NvdlaRunError
from runtime.nvdla.writer import LoadableBuilder

FULL = get_config("nv_full")
SMALL = get_config("nv_small")
F32 = np.float32


# ---- reference (plain Python floats, binary32 through numpy scalars) ----------------------------------------
def ref_half(v: float) -> int:
    """binary16 bits of the binary32 value ``v``, rounded to nearest with ties away from zero."""
    a = abs(float(F32(v)))
    sign = 0x8000 if math.copysign(1.0, float(F32(v))) < 0 else 0
    if a >= 65520.0:
        return sign | 0x7C00
    even = float(np.float16(a))  # numpy: nearest, ties to even
    if even == a:
        return sign | int(np.float16(a).view(np.uint16))
    lo = even if even < a else float(np.nextafter(np.float16(even), np.float16(0)))
    with np.errstate(over="ignore"):  # above 65504 comes inf
        hi = float(np.nextafter(np.float16(lo), np.float16(np.inf)))
    pick = hi if a - lo >= hi - a else lo
    return sign | int(np.float16(pick).view(np.uint16))


def from_half(bits: int) -> float:
    return float(np.uint16(bits).view(np.float16))


def ref_exp(x: float) -> float:
    return float(F32(math.exp(x))) if x < 89 else math.inf


def ref_softmax(xs: list[float]) -> list[float]:
    """max, in-order binary32 sum of exp(x - max), then exp(x - max) / sum, all binary32."""
    m = max(xs)
    es = [ref_exp(float(F32(F32(x) - F32(m)))) for x in xs]
    total = F32(0.0)
    for e in es:
        total = F32(total + F32(e))
    return [float(F32(F32(e) / total)) for e in es]


def ref_power(x: float, power: float, scale: float, shift: float) -> float:
    base = float(F32(F32(shift) + F32(F32(scale) * F32(x))))
    try:
        y = math.pow(base, float(F32(power)))
    except ValueError:  # negative base, fractional power
        return math.nan
    except OverflowError:
        return math.inf
    return float(F32(y)) if abs(y) < 3.5e38 else math.copysign(math.inf, y)


def ref_saturate(y: float) -> int:
    return 0 if math.isnan(y) else int(max(-128.0, min(127.0, y)))


def feature_offset(c: int, h: int, w: int, line: int, surf: int, bpe: int, per_atom: int) -> int:
    """Byte offset of element (c, h, w) of an NVDLA feature cube: atoms of ``per_atom`` channels."""
    return (c // per_atom) * surf + h * line + w * per_atom * bpe + (c % per_atom) * bpe


# ---- loadables ----------------------------------------------------------------------------------------
def _tensor(name: str, size: int, c: int, h: int = 1, w: int = 1, data_type: int = 2) -> fbs.TensorDesc:
    return fbs.TensorDesc(name=name, id=0, mem_id=0, size=size, data_type=data_type, c=c, h=h, w=w,
                          strides=[2 if data_type == 2 else 1, 32 * w, 32 * w * h, 0, 0, 0, 0, 0])


def _emu_only(op: EmuOp, src_bytes: bytes, src: dict, dst: dict, *, dst_fill: bytes | None = None,
              legacy: bool = False, dst_size: int | None = None) -> bytes:
    """A loadable with one EMU task: ``op`` from a buffer holding ``src_bytes`` to an output buffer."""
    b = LoadableBuilder(legacy=legacy)
    s = b.buffer("src", max(len(src_bytes), 4), src_bytes)
    size = dst_size or len(src_bytes)
    t = b.buffer("dst", size, dst_fill if dst_fill is not None else b"\xAA" * size)
    b.emu_task([(op, EmuBufferDesc(s, **src), EmuBufferDesc(t, **dst))])
    b.output(t, _tensor("out", size, 1))
    return b.build()


def _run(blob: bytes, hw=FULL, layout: str = "auto"):
    return NvdlaNetwork(fbs.parse(blob), layout=layout).run(GoldenTarget(hw), hw=hw)


def _f16(values) -> bytes:
    return np.asarray(values, dtype=np.float16).tobytes()


def _vec(fmt: int, c: int) -> dict:
    """A 1x1xC vector: one 32-byte atom per surface."""
    return dict(format=fmt, width=1, height=1, channel=c, line_stride=32, surf_stride=32, size=32 * -(-c // 16))


# ---- layouts --------------------------------------------------------------------------------------------
def test_descriptor_sizes_and_offsets_follow_emu_interface_h():
    cur, old = emu.LAYOUTS[False], emu.LAYOUTS[True]
    assert (cur["power"].size, cur["softmax"].size, emu.op_container_size(False)) == (24, 16, 24)
    assert (old["power"].size, old["softmax"].size, emu.op_container_size(True)) == (16, 4, 16)
    assert cur["network"].size == old["network"].size == 256
    assert cur["buffer"].size == old["buffer"].size == 256 and emu.BUFFER_CONTAINER_SIZE == 512
    op = EmuOp(emu.EMU_OP_POWER, power=2.0, scale=3.0, shift=4.0, input_scale_factor=0.5, output_scale_factor=0.25)
    raw = op.encode(False)
    assert len(raw) == 24 and raw[1:4] == b"\0\0\0"  # common op desc is not packed: 3 padding bytes
    assert np.frombuffer(raw[4:24], "<f4").tolist() == [0.5, 0.25, 2.0, 3.0, 4.0]
    raw = op.encode(True)
    assert len(raw) == 16 and np.frombuffer(raw[1:13], "<f4").tolist() == [2.0, 3.0, 4.0]
    assert EmuOp(emu.EMU_OP_SOFTMAX, axis=7).encode(False)[12] == 7
    assert EmuOp(emu.EMU_OP_SOFTMAX, axis=7).encode(True)[1] == 7
    buf = EmuBufferDesc(address_index=-1, size=5, format=3, width=6, height=7, channel=8, line_stride=9,
                        surf_stride=10, address_offset=11)
    raw = buf.encode(False)
    assert len(raw) == 256 and raw[26:] == bytes(230)
    assert np.frombuffer(raw[0:2], "<i2")[0] == -1 and np.frombuffer(raw[2:10], "<u4").tolist() == [11, 5]
    assert np.frombuffer(raw[10:18], "<u2").tolist() == [3, 6, 7, 8]
    assert np.frombuffer(raw[18:26], "<u4").tolist() == [9, 10]
    legacy = dataclasses.replace(buf, address_offset=0)
    raw = legacy.encode(True)
    assert np.frombuffer(raw[2:6], "<u4")[0] == 5 and np.frombuffer(raw[14:22], "<u4").tolist() == [9, 10]
    for lg in (False, True):
        assert EmuBufferDesc.decode(legacy.encode(lg), 0, lg) == legacy
        assert EmuOp.decode(op.encode(lg), 0, lg).power == 2.0
    with pytest.raises(emu.EmulatorError, match="addressIndexOffset"):
        buf.encode(True)


def test_half_conversion_rounds_ties_away_from_zero():
    x = np.array([1 + 2**-11, -(1 + 2**-11), 1 + 3 * 2**-11, 2**-25, 65519.0, 65520.0, 2**-24 * 1.5, 0.1, -0.0],
                 dtype=np.float32)
    assert emu.half_bits(x).tolist() == [ref_half(v) for v in x]
    assert emu.half_bits(x)[:2].tolist() == [0x3C01, 0xBC01]  # numpy's ties-to-even would give 0x3C00
    rng = np.random.default_rng(0)
    y = (rng.standard_normal(20000) * rng.choice([1e-6, 1e-3, 1, 1e3], 20000)).astype(np.float32)
    assert emu.half_bits(y).tolist() == [ref_half(v) for v in y]


# ---- softmax ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("c", [10, 40])
def test_fp16_softmax_matches_the_reference(c):
    rng = np.random.default_rng(c)
    x = (rng.standard_normal(c) * 3).astype(np.float16)
    x[3] = x.max() + 4  # one dominant class
    size = 32 * -(-c // 16)
    result = _run(_emu_only(EmuOp(emu.EMU_OP_SOFTMAX, axis=1), _f16(x).ljust(size, b"\0"), _vec(emu.FORMAT_FF16, c),
                            _vec(emu.FORMAT_FF16, c)))
    out = result.outputs[0].data
    want = [ref_half(v) for v in ref_softmax([float(v) for v in x])]
    assert np.frombuffer(out[:2 * c], "<u2").tolist() == want
    assert out[2 * c:] == b"\xAA" * (size - 2 * c)  # nothing past the C elements is written
    assert result.tasks[0].stats.ops == {"EMU_SOFTMAX": 1}
    probs = [from_half(h) for h in want]
    assert abs(sum(probs) - 1) < 0.01 and int(np.argmax(probs)) == 3


def test_int8_softmax_scales_in_and_out():
    x = np.array([-128, -5, 0, 7, 100, 127, 30, -60], dtype=np.int8)
    s_in, s_out = 0.05, 1 / 127
    op = EmuOp(emu.EMU_OP_SOFTMAX, input_scale_factor=s_in, output_scale_factor=s_out)
    fmt = dict(format=emu.FORMAT_INT8, width=1, height=1, channel=8, line_stride=32, surf_stride=32)
    out = _run(_emu_only(op, x.tobytes().ljust(32, b"\0"), fmt, fmt)).outputs[0].data
    halves = [from_half(ref_half(float(F32(F32(int(v)) * F32(s_in))))) for v in x]
    q = [from_half(ref_half(p)) for p in ref_softmax(halves)]
    want = [ref_saturate(float(F32(F32(v) / F32(s_out)))) for v in q]
    assert np.frombuffer(out[:8], np.int8).tolist() == want
    assert max(want) == want[5] > 0 and out[8:] == b"\xAA" * 24


# ---- power ------------------------------------------------------------------------------------------------
def _cube_bytes(values: np.ndarray, line: int, surf: int, bpe: int, per_atom: int, size: int,
                fill: int = 0x55) -> bytes:
    buf = bytearray([fill]) * size
    raw = values.tobytes()
    c, h, w = values.shape
    for ci in range(c):
        for hi in range(h):
            for wi in range(w):
                at = feature_offset(ci, hi, wi, line, surf, bpe, per_atom)
                k = ((ci * h + hi) * w + wi) * bpe
                buf[at:at + bpe] = raw[k:k + bpe]
    return bytes(buf)


def _read_cube(buf: bytes, shape, line, surf, bpe, per_atom, dtype) -> np.ndarray:
    c, h, w = shape
    out = np.zeros(shape, dtype=dtype)
    for ci in range(c):
        for hi in range(h):
            for wi in range(w):
                at = feature_offset(ci, hi, wi, line, surf, bpe, per_atom)
                out[ci, hi, wi] = np.frombuffer(buf[at:at + bpe], dtype=dtype)[0]
    return out


def test_fp16_power_follows_each_cube_strides():
    c, h, w = 20, 3, 5  # two channel surfaces, padded lines and surfaces
    rng = np.random.default_rng(1)
    x = (rng.standard_normal((c, h, w)) * 2).astype(np.float16)
    sl, ss, dl, ds = 6 * 32, 4 * 6 * 32, 5 * 32, 3 * 5 * 32
    src = _cube_bytes(x, sl, ss, 2, 16, 2 * ss)
    op = EmuOp(emu.EMU_OP_POWER, power=2.0, scale=2**-11, shift=1.0)
    blob = _emu_only(op, src, dict(format=emu.FORMAT_FF16, width=w, height=h, channel=c, line_stride=sl,
                                   surf_stride=ss),
                     dict(format=emu.FORMAT_FF16, width=w, height=h, channel=c, line_stride=dl, surf_stride=ds),
                     dst_size=2 * ds, dst_fill=b"\x33" * (2 * ds))
    out = _run(blob).outputs[0].data
    got = _read_cube(out, (c, h, w), dl, ds, 2, 16, np.uint16)
    want = np.array([ref_half(ref_power(float(v), 2.0, 2**-11, 1.0)) for v in x.reshape(-1)]).reshape(c, h, w)
    assert np.array_equal(got, want)
    touched = {feature_offset(ci, hi, wi, dl, ds, 2, 16) + k for ci in range(c) for hi in range(h)
               for wi in range(w) for k in (0, 1)}
    assert all(out[i] == 0x33 for i in range(len(out)) if i not in touched)  # padding left alone


def test_fp16_power_results_on_a_tie_round_away_from_zero():
    x = np.array([1.0, -1.0 - 2**-10, 3.0, 0.0], dtype=np.float16)  # shift + x = +-(1 + 2^-11): ties
    op = EmuOp(emu.EMU_OP_POWER, power=1.0, scale=1.0, shift=2**-11)
    out = _run(_emu_only(op, _f16(x).ljust(32, b"\0"), _vec(emu.FORMAT_FF16, 4), _vec(emu.FORMAT_FF16, 4)))
    assert np.frombuffer(out.outputs[0].data[:8], "<u2").tolist() == [0x3C01, 0xBC01, 0x4200, 0x1000]


@pytest.mark.parametrize("fmt,per_atom", [(emu.FORMAT_INT8, 32), (emu.FORMAT_INT8_8, 8)])
def test_int8_power_saturates_and_truncates(fmt, per_atom):
    c, h, w = 12, 2, 3
    rng = np.random.default_rng(fmt)
    x = rng.integers(-128, 128, (c, h, w)).astype(np.int8)
    line, surf = w * per_atom, w * per_atom * h
    size = surf * -(-c // per_atom)
    op = EmuOp(emu.EMU_OP_POWER, power=0.5, scale=1.5, shift=2.0, input_scale_factor=0.1, output_scale_factor=0.02)
    cube = dict(format=fmt, width=w, height=h, channel=c, line_stride=line, surf_stride=surf)
    out = _run(_emu_only(op, _cube_bytes(x, line, surf, 1, per_atom, size), cube, cube)).outputs[0].data
    got = _read_cube(out, (c, h, w), line, surf, 1, per_atom, np.int8)

    def one(v: int) -> int:
        xs = float(F32(F32(int(v)) * F32(0.1)))
        return ref_saturate(float(F32(F32(ref_power(xs, 0.5, 1.5, 2.0)) / F32(0.02))))

    want = np.vectorize(one)(x).astype(np.int8)
    assert np.array_equal(got, want)
    assert (want == 127).any() and (want == 0).any()  # saturated, and NaN (negative base) -> 0


# ---- legacy layout (NVDLA's published regression loadables) ----------------------------------------------
def test_legacy_layout_runs_fp16_as_format_2():
    x = np.array([0.5, -1.0, 2.0, 0.25], dtype=np.float16)
    fmt = dict(format=emu.LEGACY_FORMAT_FF16, width=1, height=1, channel=4, line_stride=32, surf_stride=32)
    blob = _emu_only(EmuOp(emu.EMU_OP_SOFTMAX), _f16(x).ljust(32, b"\0"), fmt, fmt, legacy=True)
    ld = fbs.parse(blob)
    ops_blob = next(b for b in ld.blobs if b.interface == fbs.IF_EMU1 and b.sub_interface == 3)
    assert len(ops_blob.data) == 16  # legacy op container
    out = _run(blob).outputs[0].data  # the DLA blobs' 0.10 version selects the legacy layout
    assert np.frombuffer(out[:8], "<u2").tolist() == [ref_half(v) for v in ref_softmax([float(v) for v in x])]
    current = {**fmt, "format": emu.FORMAT_FF16}
    with pytest.raises(NvdlaRunError, match=r"op 0 \(SOFTMAX\): src_data.format = 3: the legacy emulator supports "
                                            r"FP16 \(2\) only"):
        _run(_emu_only(EmuOp(emu.EMU_OP_SOFTMAX), _f16(x).ljust(32, b"\0"), current, current, legacy=True))


def test_legacy_layout_runs_one_op_per_task():
    b = LoadableBuilder(legacy=True)
    s = b.buffer("s", 32, bytes(32))
    fmt = dict(format=emu.LEGACY_FORMAT_FF16, channel=1, line_stride=32, surf_stride=32)
    op = (EmuOp(emu.EMU_OP_POWER), EmuBufferDesc(s, **fmt), EmuBufferDesc(s, **fmt))
    b.emu_task([op, op])
    with pytest.raises(NvdlaRunError, match=r"task 0 \(EMU\): network descriptor: num_operations = 2"):
        _run(b.build())


# ---- EMU and DLA tasks in submit order --------------------------------------------------------------------
@pytest.mark.parametrize("before_dla", [True, False])
def test_emu_tasks_run_in_submit_order_with_dla_tasks(before_dla):
    """The EMU task and the DLA task run in submit order; the second sees the first one's result."""
    rng = np.random.default_rng(5)
    x = rng.integers(-40, 40, (8, 4, 4)).astype(np.int8)
    blob = emu_and_pool_loadable(x, before_dla)
    ld = fbs.parse(blob)
    kinds = [t.interface for t in ld.tasks]
    assert kinds == ([fbs.IF_EMU1, fbs.IF_DLA1] if before_dla else [fbs.IF_DLA1, fbs.IF_EMU1])
    assert [s.task_id for s in ld.submits] == [[0], [1]]
    result = NvdlaNetwork(ld).run(GoldenTarget(SMALL), hw=SMALL)

    want = emu_and_pool_expected(x, before_dla)
    got = np.frombuffer(result.outputs[0].data[:32], np.int8).reshape(2, 2, 8).transpose(2, 0, 1)
    assert np.array_equal(got, want)
    assert [sorted(t.stats.ops) for t in result.tasks] == (
        [["EMU_POWER"], ["PDP"]] if before_dla else [["PDP"], ["EMU_POWER"]])


# ---- malformed descriptors --------------------------------------------------------------------------------
F16_VEC = _vec(emu.FORMAT_FF16, 4)


@pytest.mark.parametrize("op,src,dst,message", [
    (EmuOp(5), F16_VEC, F16_VEC, r"op 0: op_type 5 is neither POWER \(0\) nor SOFTMAX \(1\)"),
    (EmuOp(emu.EMU_OP_POWER), F16_VEC, {**F16_VEC, "format": emu.FORMAT_INT8},
     r"op 0 \(POWER\): src_data.format = 3 but dst_data.format = 0"),
    (EmuOp(emu.EMU_OP_SOFTMAX), {**F16_VEC, "format": emu.FORMAT_UINT16}, F16_VEC,
     r"op 0 \(SOFTMAX\): src_data.format = 5 \(UINT16\)"),
    (EmuOp(emu.EMU_OP_SOFTMAX), F16_VEC, {**F16_VEC, "channel": 3},
     r"dst_data.channel = 3 but src_data.channel = 4"),
    (EmuOp(emu.EMU_OP_POWER), {**F16_VEC, "channel": 40}, F16_VEC,
     r"op 0 \(POWER\): src_data: .* reaches byte 80, past the 64 bytes of address 5"),
    (EmuOp(emu.EMU_OP_POWER), F16_VEC, {**F16_VEC, "address_offset": 4096},
     r"dst_data.addressIndexOffset = 4096 is past the end of address 6"),
    (EmuOp(emu.EMU_OP_SOFTMAX), F16_VEC, {**F16_VEC, "address_offset": 60},
     r"dst_data: .* reaches byte 8, past the 4 bytes of address 6 from offset 60"),
])
def test_malformed_descriptors_are_one_line_errors(op, src, dst, message):
    blob = _emu_only(op, bytes(64), src, dst)
    with pytest.raises(NvdlaRunError, match=message) as info:
        _run(blob)
    assert "\n" not in str(info.value) and str(info.value).startswith("loadable: task 0 (EMU): ")


def test_bad_address_indices_are_named():
    b = LoadableBuilder()
    s = b.buffer("s", 64, bytes(64))
    sram = b.buffer("sram", 64, cvsram=True)
    b.emu_task([(EmuOp(emu.EMU_OP_POWER), EmuBufferDesc(s, **F16_VEC), EmuBufferDesc(99, **F16_VEC))])
    b.emu_task([(EmuOp(emu.EMU_OP_POWER), EmuBufferDesc(sram, **F16_VEC), EmuBufferDesc(s, **F16_VEC))])
    ld = fbs.parse(b.build())
    with pytest.raises(NvdlaRunError, match=r"task 0 \(EMU\): op 0 \(POWER\): dst_data.addressIndex = 99 is outside "
                                            r"the task's address list \(9 entries\)"):
        NvdlaNetwork(ld).run(GoldenTarget(FULL), hw=FULL)
    ld.submits = ld.submits[1:]
    with pytest.raises(NvdlaRunError, match=r"task 1 \(EMU\): op 0 \(POWER\): src_data.addressIndex = 6 is CV-SRAM"):
        NvdlaNetwork(ld).run(GoldenTarget(FULL), hw=FULL)


def test_network_descriptor_indices_are_checked():
    blob = _emu_only(EmuOp(emu.EMU_OP_SOFTMAX), bytes(32), F16_VEC, F16_VEC)
    ld = fbs.parse(blob)
    net = next(b for b in ld.blobs if b.interface == fbs.IF_EMU1 and b.sub_interface == 1)
    net.data = emu.EmuNetworkDesc(40, 8, 1).encode()
    with pytest.raises(NvdlaRunError, match=r"operation_desc_index for 1 ops = 40 is outside"):
        NvdlaNetwork(ld).run(GoldenTarget(FULL), hw=FULL)
    net.data = emu.EmuNetworkDesc(7, 8, 3).encode()
    with pytest.raises(NvdlaRunError, match=r"operation_desc_index for 3 ops = 7: 72 bytes needed, the memory has 24"):
        NvdlaNetwork(ld).run(GoldenTarget(FULL), hw=FULL)
