"""Compressed conv weights (WEIGHT_FORMAT=COMPRESSED): decompression against hand values and a loop written
here, compressed programs against their uncompressed twins (direct and Winograd convolution, int8 and int16),
and the legality rules of WMB_BYTES / WEIGHT_BYTES / WGS / banks."""
from __future__ import annotations

import numpy as np
import pytest

from golden import ConfigError, Dla, UnsupportedError, get_config
from golden.engines import conv_wcomp as wc
from golden.memory import Memory
from golden.regs import UNITS, RegView
from regressions.fuzz.engines import build_conv
from regressions.lib import programs
from regressions.lib.programs import winograd as pw

NV_FULL = get_config("nv_full")
WMB, STREAM, WGS = 0x9000_0000, 0x9100_0000, 0x9200_0000


# ---- a compressor written here ------------------------------------------------------------------------------------
def compress_loop(values: list[int], size: int, group_elements: int, keep=()) -> tuple[bytes, bytes, bytes]:
    """(WMB, stream, WGS), each padded as the hardware fetches it (128, 128, 32 bytes)."""
    bits, stream, sizes = bytearray(-(-len(values) // 1024) * 128), bytearray(), []
    for i, v in enumerate(values):
        if i % group_elements == 0:
            sizes.append(0)
        if v or i in keep:
            bits[i // 8] |= 1 << (i % 8)
            stream += (v & ((1 << (8 * size)) - 1)).to_bytes(size, "little")
            sizes[-1] += size
    wgs = b"".join(n.to_bytes(4, "little") for n in sizes)
    return bytes(bits), bytes(stream) + bytes(-len(stream) % 128), wgs + bytes(-len(wgs) % 32)


def regs_for(hw, *, wmb_bytes: int, weight_bytes: int, data_bank: int = 0, weight_bank: int = 1,
             csc_wmb_bytes: int | None = None, csc_format: int = 1) -> dict[str, RegView]:
    """CDMA and CSC views of a compressed weight fetch at WMB/STREAM/WGS."""
    words = {
        "CDMA": {"D_WEIGHT_FORMAT": 1, "D_WEIGHT_RAM_TYPE": 1, "D_WEIGHT_ADDR_LOW": STREAM, "D_WGS_ADDR_LOW": WGS,
                 "D_WMB_ADDR_LOW": WMB, "D_WMB_BYTES": wmb_bytes, "D_WEIGHT_BYTES": weight_bytes,
                 "D_BANK": UNITS["CDMA"].register("D_BANK").encode(DATA_BANK=data_bank, WEIGHT_BANK=weight_bank)},
        "CSC": {"D_WEIGHT_FORMAT": csc_format, "D_WMB_BYTES": wmb_bytes if csc_wmb_bytes is None else csc_wmb_bytes},
    }
    return {u: RegView(UNITS[u], {UNITS[u].register(n).offset: v for n, v in w.items()}) for u, w in words.items()}


def load(mem: Memory, wmb: bytes, stream: bytes, wgs: bytes) -> None:
    for addr, data in ((WMB, wmb), (STREAM, stream), (WGS, wgs)):
        mem.write(addr, data)


# ---- decompression ------------------------------------------------------------------------------------------------
def test_decompress_bit_order_and_element_size():
    wmb = np.array([0b0000_0101, 0b1000_0000], dtype=np.uint8)  # elements 0, 2 and 15 stored
    stream = np.array([7, 0xFD, 0x40], dtype=np.uint8)
    out = wc.decompress(wmb, stream, 16, 1)
    assert out.view(np.int8).tolist() == [7, 0, -3] + [0] * 12 + [0x40]
    stream16 = np.frombuffer(np.array([0x1234, -2, 5], dtype="<i2").tobytes(), np.uint8)
    out16 = wc.decompress(wmb, stream16, 16, 2).view("<i2")
    assert out16.tolist() == [0x1234, 0, -2] + [0] * 12 + [5]
    with pytest.raises(ValueError, match="stream"):
        wc.decompress(wmb, stream[:2], 16, 1)
    # 16-bit elements: a stream of two elements (4 bytes) is short of the three the mask keeps
    with pytest.raises(ValueError, match="holds 2 elements, the mask keeps 3"):
        wc.decompress(wmb, stream16[:4], 16, 2)


@pytest.mark.parametrize("size", [1, 2])
def test_decompress_matches_a_loop(size):
    rng = np.random.default_rng(size)
    n = 3000
    wmb = rng.integers(0, 256, -(-n // 8), dtype=np.uint8)
    kept = int(np.unpackbits(wmb, bitorder="little")[:n].sum())
    stream = rng.integers(0, 256, kept * size + 40, dtype=np.uint8)
    want, pos = bytearray(), 0
    for i in range(n):
        if (int(wmb[i // 8]) >> (i % 8)) & 1:
            want += bytes(stream[pos: pos + size])
            pos += size
        else:
            want += bytes(size)
    assert wc.decompress(wmb, stream, n, size).tobytes() == bytes(want)


def test_read_weights_round_trip_and_groups():
    """33 int8 kernels (two groups) of 100 elements: the stream decompresses to the original weights."""
    rng = np.random.default_rng(7)
    values = [int(v) if rng.random() < 0.4 else 0 for v in rng.integers(-128, 128, 33 * 100)]
    wmb, stream, wgs = compress_loop(values, 1, 32 * 100, keep={5, 3299})
    mem = Memory()
    load(mem, wmb, stream, wgs)
    raw = wc.read_weights(NV_FULL, mem, regs_for(NV_FULL, wmb_bytes=len(wmb), weight_bytes=len(stream)),
                          33, 100, "int8")
    assert raw.view(np.int8).tolist() == values


# ---- legality ----------------------------------------------------------------------------------------------------
def _case(kernels=33, per_kernel=100, size=1, seed=3):
    rng = np.random.default_rng(seed)
    lim = 1 << (8 * size - 1)
    values = [int(v) if rng.random() < 0.5 else 0 for v in rng.integers(-lim, lim, kernels * per_kernel)]
    group = (32 if size == 1 else 16) * per_kernel
    return values, compress_loop(values, size, group)


@pytest.mark.parametrize("change, where", [
    (dict(wmb_bytes=-128), "CDMA.D_WMB_BYTES.WMB_BYTES"),
    (dict(wmb_bytes=+128), "CDMA.D_WMB_BYTES.WMB_BYTES"),
    (dict(wmb_bytes=+4), "CDMA.D_WMB_BYTES.WMB_BYTES"),
    (dict(csc_wmb_bytes=+128), "CSC.D_WMB_BYTES.WMB_BYTES"),
    (dict(weight_bytes=+128), "CDMA.D_WEIGHT_BYTES.WEIGHT_BYTES"),
    (dict(weight_bytes=-128), "CDMA.D_WEIGHT_BYTES.WEIGHT_BYTES"),
    (dict(weight_bytes=+64), "CDMA.D_WEIGHT_BYTES.WEIGHT_BYTES"),
    (dict(weight_bank=14), "CDMA.D_BANK.WEIGHT_BANK"),
    (dict(csc_format=0), "CSC.D_WEIGHT_FORMAT.WEIGHT_FORMAT"),
])
def test_register_sizes_must_match_what_the_csc_reads(change, where):
    values, (wmb, stream, wgs) = _case()
    mem = Memory()
    load(mem, wmb, stream, wgs)
    kw = dict(wmb_bytes=len(wmb), weight_bytes=len(stream))
    for key, delta in change.items():
        kw[key] = kw.get(key, len(wmb) if key == "csc_wmb_bytes" else 0) + delta
    with pytest.raises(ConfigError) as info:
        wc.read_weights(NV_FULL, mem, regs_for(NV_FULL, **kw), 33, 100, "int8")
    assert info.value.where == where


def test_an_empty_mask_has_no_stream_to_fetch():
    mem = Memory()
    wmb = bytes(512)
    load(mem, wmb, bytes(128), bytes(32))
    with pytest.raises(ConfigError, match="keeps no weight"):
        wc.read_weights(NV_FULL, mem, regs_for(NV_FULL, wmb_bytes=len(wmb), weight_bytes=128), 33, 100, "int8")


def test_wgs_may_not_promise_more_than_the_stream_nor_less_than_a_group_spans():
    values, (wmb, stream, wgs) = _case(kernels=40, per_kernel=60)
    sizes = [int.from_bytes(wgs[i: i + 4], "little") for i in (0, 4)]
    assert sizes[0] > 128 and sum(sizes) <= len(stream)
    regs = regs_for(NV_FULL, wmb_bytes=len(wmb), weight_bytes=len(stream))

    def fetch(group_sizes):
        mem = Memory()
        load(mem, wmb, stream, b"".join(n.to_bytes(4, "little") for n in group_sizes) + bytes(24))
        return wc.read_weights(NV_FULL, mem, regs, 40, 60, "int8")

    assert fetch(sizes).view(np.int8).tolist() == values
    # Understated inside the same 128-byte entry: the CDMA hands the group over at the same entry.
    end = sizes[0]
    d = (end - 1) % 128  # still ends in the same entry: the CDMA hands the group over at the same point
    assert d > 0
    assert fetch([end - d, sizes[1] + d]).view(np.int8).tolist() == values
    with pytest.raises(ConfigError, match="understates kernel group 0") as info:
        short = (end - 1) // 128 * 128 - 1  # group 0 handed over one entry before its last
        fetch([short, sizes[1] + end - short])
    assert info.value.where == "CDMA.D_WGS_ADDR_LOW.WGS_ADDR_LOW"
    with pytest.raises(ConfigError, match="never hands kernel group 1"):
        fetch([sizes[0], len(stream) - sizes[0] + 1])


def test_a_kernel_group_mask_larger_than_the_wmb_bank_is_unsupported():
    mem = Memory()
    n = 256 * 1024  # one kernel of 256 WMB entries of bits
    wmb = b"\x01" + bytes(n // 8 - 1)
    load(mem, wmb, bytes([9]) + bytes(127), bytes(32))
    with pytest.raises(UnsupportedError, match="WMB entries"):
        wc.read_weights(NV_FULL, mem, regs_for(NV_FULL, wmb_bytes=len(wmb), weight_bytes=128), 1, n, "int8")


@pytest.mark.parametrize("entries", [254, 255])
def test_a_kernel_group_mask_may_fill_the_wmb_bank_but_one_256_byte_refill(entries: int) -> None:
    """The CDMA refills the 256-entry WMB bank in 256-byte (two-entry) requests while a group is in use: a
    group whose mask leaves room for one such request (254 entries) is modelled and decompresses exactly; one
    entry more (255) would need the refill flow control, which is not modelled, and is refused."""
    per_kernel = entries * wc.ENTRY_BITS // 32  # one group of 32 int8 kernels spans exactly ``entries`` entries
    values = [0] * (32 * per_kernel)
    for i in range(0, len(values), 1021):
        values[i] = i % 251 - 125 or 1
    wmb, stream, wgs = compress_loop(values, 1, 32 * per_kernel)
    assert len(wmb) == entries * wc.ENTRY_BYTES
    mem = Memory()
    load(mem, wmb, stream, wgs)
    regs = regs_for(NV_FULL, wmb_bytes=len(wmb), weight_bytes=len(stream))
    if entries <= 254:
        raw = wc.read_weights(NV_FULL, mem, regs, 32, per_kernel, "int8")
        assert raw.view(np.int8).tolist() == values
    else:
        with pytest.raises(UnsupportedError, match=f"spans {entries} WMB entries"):
            wc.read_weights(NV_FULL, mem, regs, 32, per_kernel, "int8")


def test_the_cdma_takes_one_wgs_word_per_kernel_group_only():
    """33 int8 kernels are two groups of atomic K: two WGS words. Whatever follows them in memory (the rest of
    their 32-byte atom, the next table) is no group's size and cannot make the WGS promise too much."""
    values, (wmb, stream, wgs) = _case()
    mem = Memory()
    load(mem, wmb, stream, wgs[:8] + b"\xff" * 24 + b"\xff" * 4096)
    raw = wc.read_weights(NV_FULL, mem, regs_for(NV_FULL, wmb_bytes=len(wmb), weight_bytes=len(stream)),
                          33, 100, "int8")
    assert raw.view(np.int8).tolist() == values


def test_a_large_mask_in_small_groups_is_supported():
    """The WMB-bank limit is per kernel group: 128 kernels of 32x7x7 int8 weights are a 196-entry mask, but
    each 32-kernel group spans only 49 entries, so the whole mask streams through the bank group by group."""
    per_kernel = 32 * 7 * 7
    values = [0] * (128 * per_kernel)
    for i in range(0, len(values), 997):
        values[i] = i % 200 - 100 or 1
    wmb, stream, wgs = compress_loop(values, 1, 32 * per_kernel)
    assert len(wmb) // wc.ENTRY_BYTES == 196
    mem = Memory()
    load(mem, wmb, stream, wgs)
    raw = wc.read_weights(NV_FULL, mem, regs_for(NV_FULL, wmb_bytes=len(wmb), weight_bytes=len(stream)),
                          128, per_kernel, "int8")
    assert raw.view(np.int8).tolist() == values


@pytest.mark.parametrize("kept", [[3299], list(range(3299 - 127 * 25, 3300, 25))], ids=["last-only", "one-entry"])
def test_kept_count_is_the_number_of_mask_bits(kept):
    """WEIGHT_BYTES is the kept elements in whole 128-byte entries: a mask keeping only the last element has a
    one-entry stream; 128 kept int8 elements (the last one among them) fill exactly one entry."""
    values = [0] * 3300
    for n, i in enumerate(kept):
        values[i] = (n % 250) - 125 or 7
    wmb, stream, wgs = compress_loop(values, 1, 32 * 100)
    assert len(stream) == 128
    mem = Memory()
    load(mem, wmb, stream, wgs)
    raw = wc.read_weights(NV_FULL, mem, regs_for(NV_FULL, wmb_bytes=len(wmb), weight_bytes=128), 33, 100, "int8")
    assert raw.view(np.int8).tolist() == values
    with pytest.raises(ConfigError) as info:
        wc.read_weights(NV_FULL, mem, regs_for(NV_FULL, wmb_bytes=len(wmb), weight_bytes=256), 33, 100, "int8")
    assert info.value.where == "CDMA.D_WEIGHT_BYTES.WEIGHT_BYTES"


def test_configs_without_compression_refuse_it():
    for name in ("nv_small", "nv_large"):
        hw = get_config(name)
        assert not hw.weight_compression
        with pytest.raises(UnsupportedError, match="compression") as info:
            wc.read_weights(hw, Memory(), regs_for(hw, wmb_bytes=128, weight_bytes=128), 1, 8, "int8")
        assert info.value.unit == "CDMA"


# ---- whole programs ------------------------------------------------------------------------------------------------
def _winograd_layer(precision: str, seed: int) -> pw.WinogradLayer:
    """Two input surfaces (the padding lanes of the second included), kernels past one group, 60% zeros."""
    rng = np.random.default_rng(seed)
    bits = 8 if precision == "int8" else 16
    atom = NV_FULL.atom_elements(precision)
    k = 35 if precision == "int8" else 19
    u = rng.integers(-(1 << (bits - 1)), 1 << (bits - 1), (k, 2 * atom, 4, 4))
    u[rng.random(u.shape) < 0.6] = 0
    return pw.WinogradLayer(x=rng.integers(-100, 100, (atom + 3, 6, 7)), u=u, out_hw=(4, 4), pad=(1, 1, 1, 0),
                            pra_truncate=1, clip_truncate=10, precision=precision, pad_value=3)


@pytest.mark.parametrize("precision", ["int8", "int16"])
def test_compressed_winograd_program_equals_the_uncompressed_one(precision):
    lay = _winograd_layer(precision, 1)
    plain = pw.program_winograd(NV_FULL, lay)
    want = plain.run(Dla(NV_FULL))
    assert want == pw.program_winograd(NV_FULL, lay).run(Dla(NV_FULL))
    packed = pw.program_winograd(NV_FULL, lay)
    comp = pw.compress_weights(NV_FULL, packed, pw.weight_stream(NV_FULL, lay), kernels=lay.u.shape[0],
                               precision=precision)
    assert len(comp.stream) < len(pw.weight_stream(NV_FULL, lay))  # really compressed
    assert packed.run(Dla(NV_FULL)) == want
    # The mask is what the data path follows: dropping one stored weight shifts the stream (or leaves its last
    # entry unread, which the CSC refuses).
    first = next(i for i, b in enumerate(comp.wmb) if b)
    packed.memory = [(a, d if a != pw.WMB_BASE else d[:first] + bytes([d[first] & (d[first] - 1)]) + d[first + 1:])
                     for a, d in packed.memory]
    try:
        out = packed.run(Dla(NV_FULL))
    except ConfigError as exc:
        assert exc.where == "CDMA.D_WEIGHT_BYTES.WEIGHT_BYTES"
    else:
        assert out != want


def test_compressed_direct_conv_equals_the_uncompressed_one():
    rng = np.random.default_rng(5)
    w = rng.integers(-128, 128, (40, 70, 3, 2))
    w[rng.random(w.shape) < 0.7] = 0
    layer = programs.ConvLayer(x=rng.integers(-128, 128, (70, 5, 6)), w=w, pad=(1, 0), clip_truncate=4)
    program, want, _ = build_conv(NV_FULL, layer)
    assert program.run(Dla(NV_FULL)) == want
    program, _, _ = build_conv(NV_FULL, layer)
    from compiler.codegen.pack import pack_dc_weights

    raw = pack_dc_weights(w, NV_FULL)[: w.size]
    comp = pw.compress_weights(NV_FULL, program, raw, kernels=40, precision="int8")
    words = dict(program.writes)
    assert words["NVDLA_CDMA.D_WEIGHT_FORMAT_0"] == 1 and words["NVDLA_CDMA.D_WEIGHT_BYTES_0"] == len(comp.stream)
    assert program.run(Dla(NV_FULL)) == want
