"""CBUF state across convolutions (golden/cbuf.py): what NVDLA's RTL keeps between operations with the same
bank split, and the programs it computes differently from two independent convolutions."""
from __future__ import annotations

import numpy as np
import pytest

from compiler.codegen import conv as codegen_conv
from golden.config import get_config
from golden.dla import Dla
from golden.errors import ConfigError, UnsupportedError
from regressions.lib.programs import WEIGHT_BASE, ConvLayer, LayerTest, program_conv

HW = get_config("nv_small")


def _layer(seed: int, c: int = 20, h: int = 6, w: int = 6, k: int = 10, r: int = 3) -> ConvLayer:
    rng = np.random.default_rng(seed)
    return ConvLayer(x=rng.integers(-20, 20, (c, h, w)), w=rng.integers(-20, 20, (k, c, r, r)),
                     out_cvt=(0, 1, 6))


def _program(layer: ConvLayer, group: int = 0, **overrides: int) -> LayerTest:
    """The layer's program in ping-pong ``group``, with register words replaced (``CDMA_D_MISC_CFG=...``
    sets that register in every conv unit that has it, for the CSC too)."""
    p = program_conv(HW, layer)
    writes = []
    for name, value in p.writes:
        reg = name.split(".")[1].removesuffix("_0")
        if reg == "S_POINTER":
            value = group
        for key, v in overrides.items():
            if reg == key and name.split(".")[0] in ("NVDLA_CDMA", "NVDLA_CSC"):
                value = v
        writes.append((name, value))
    p.writes = writes
    return p


def _alone(layer: ConvLayer) -> bytes:
    return program_conv(Dla(HW), layer)


def _in_sequence(first: LayerTest, second: LayerTest, clobber=None) -> bytes:
    """Run ``first`` then ``second`` on one Dla; ``clobber(dla)`` runs after the second's memory image is
    loaded, just before its registers are written."""
    dla = Dla(HW)
    first.run(dla)
    for addr, data in second.memory:
        dla.mem.write(addr, data)
    if clobber is not None:
        clobber(dla)
    return LayerTest(second.regs, [], second.output).run(dla)


SKIP_WEIGHT_RLS, WEIGHT_REUSE, SKIP_DATA_RLS, DATA_REUSE = 1 << 28, 1 << 20, 1 << 24, 1 << 16


def test_exact_weight_fetch_carries_nothing_over() -> None:
    a, b = _layer(1), _layer(2)
    assert _in_sequence(_program(a), _program(b, 1)) == _alone(b)


def test_weight_entries_fetched_but_not_consumed_are_refused_with_the_same_split() -> None:
    """LeNet's fc1#0 on NVDLA's RTL: conv2 fetched 11 entries more than its kernels span, so fc1#0's CSC read
    them as its first weights and every output differed. Golden names the register and the earlier op."""
    a, b = _layer(1), _layer(2)
    used = 10 * 20 * 3 * 3
    over = _program(a, D_WEIGHT_BYTES=-(-used // 128) * 128 + 128)
    with pytest.raises(ConfigError, match=r"CDMA\.D_BANK\.WEIGHT_BANK: \d+ weight entries operation #0"):
        _in_sequence(over, _program(b, 1))


def test_a_new_bank_split_flushes_the_cbuf() -> None:
    a, b = _layer(1), _layer(2)
    over = _program(a, D_WEIGHT_BYTES=-(-10 * 20 * 9 // 128) * 128 + 128)
    bank = dict(_program(b, 1).writes)["NVDLA_CDMA.D_BANK_0"]
    other_split = bank - (1 << 16)  # one weight bank fewer
    assert _in_sequence(over, _program(b, 1, D_BANK=other_split)) == _alone(b)


def test_over_release_of_data_slices_is_refused() -> None:
    """RLS_SLICES + 1 greater than the input height (the reset value releases 2 slices) leaves CSC's data
    pointer ahead of CDMA's."""
    a, b = _layer(1, h=1, r=1), _layer(2)
    with pytest.raises(ConfigError, match=r"CSC\.D_RELEASE\.RLS_SLICES: operation #0 \(convolution.*released 1 more"):
        _in_sequence(_program(a, D_RELEASE=1), _program(b, 1))


def test_weight_reuse_reads_the_kept_weights_not_memory() -> None:
    """SKIP_WEIGHT_RLS keeps the weights; WEIGHT_REUSE makes CDMA fetch nothing, so overwriting them in
    memory between the two operations changes nothing."""
    a = _layer(1)
    b = ConvLayer(x=_layer(2).x, w=a.w, out_cvt=a.out_cvt)
    first, second = _program(a, D_MISC_CFG=SKIP_WEIGHT_RLS), _program(b, 1, D_MISC_CFG=WEIGHT_REUSE)

    def clobber(dla: Dla) -> None:
        dla.mem.write(WEIGHT_BASE, bytes(4096))

    assert _in_sequence(first, second, clobber) == _alone(b)
    # Without reuse the zeroed weights are fetched: the result changes, so the test above can fail.
    plain = _program(b, 1)
    assert _in_sequence(_program(a), plain, clobber) != _alone(b)


def test_weights_kept_but_not_reused_are_released_at_the_next_start() -> None:
    a, b = _layer(1), _layer(2)
    assert _in_sequence(_program(a, D_MISC_CFG=SKIP_WEIGHT_RLS), _program(b, 1)) == _alone(b)


def test_data_reuse_reads_the_resident_cube() -> None:
    a = _layer(1)
    b = ConvLayer(x=a.x, w=_layer(2).w, out_cvt=a.out_cvt)
    first, second = _program(a, D_MISC_CFG=SKIP_DATA_RLS), _program(b, 1, D_MISC_CFG=DATA_REUSE)

    def clobber(dla: Dla) -> None:
        dla.mem.write(0x8000_0000, bytes(4096))

    assert _in_sequence(first, second, clobber) == _alone(b)


def test_data_reuse_of_another_shape_is_refused() -> None:
    a, b = _layer(1), _layer(2, w=5)
    with pytest.raises(ConfigError, match=r"CDMA\.D_MISC_CFG\.DATA_REUSE: reuses operation #0 \(convolution.*'s 6x6x20 input"):
        _in_sequence(_program(a, D_MISC_CFG=SKIP_DATA_RLS), _program(b, 1, D_MISC_CFG=DATA_REUSE))


def test_data_reuse_refusal_counts_entries_per_slice_as_the_hardware_does() -> None:
    """D_ENTRY_PER_SLICE.ENTRIES holds entries - 1. On nv_small an entry is one 8-channel int8 atom, so a
    20-channel line takes ceil(20 / 8) = 3 entries per pixel: 18 for the 6-wide resident cube, 15 for a 5-wide
    one; the refusal reports those counts and the 6 slices SKIP_DATA_RLS kept."""
    a, b = _layer(1), _layer(2, w=5)
    with pytest.raises(ConfigError, match=r"6x6x20 input \(18 entries per slice, 6 slices held\) as a 5x6x20 cube "
                                          r"\(15 entries per slice\)"):
        _in_sequence(_program(a, D_MISC_CFG=SKIP_DATA_RLS), _program(b, 1, D_MISC_CFG=DATA_REUSE))


def test_compiler_fetches_exactly_the_entries_the_kernels_span() -> None:
    for hw in (get_config("nv_small"), get_config("nv_full")):
        entry = codegen_conv.cbuf_geometry(hw)[0]
        got = codegen_conv.weight_fetch_bytes(hw, 50, 20, 5, 5)
        assert got % entry == 0 and 0 <= got - 50 * 20 * 25 < entry


def _tiny(seed: int) -> ConvLayer:
    """A one-surface 1x1 convolution: the CBUF rules do not depend on the size, and these tests must stay fast."""
    return _layer(seed, c=8, h=3, w=3, k=8, r=1)


def test_weight_reuse_of_kept_weights_ignores_memory_for_a_small_layer() -> None:
    """WEIGHT_REUSE after SKIP_WEIGHT_RLS (same split): CDMA fetches nothing and CSC reads the uncompressed
    weights the first convolution fetched, so zeroing them in memory in between leaves the result that of the
    kept weights."""
    a = _tiny(1)
    b = ConvLayer(x=_tiny(2).x, w=a.w, out_cvt=a.out_cvt)

    def clobber(dla: Dla) -> None:
        dla.mem.write(WEIGHT_BASE, bytes(1024))

    want = _alone(b)
    assert any(want)  # zero weights would give all-zero output: the comparison below can fail
    first, second = _program(a, D_MISC_CFG=SKIP_WEIGHT_RLS), _program(b, 1, D_MISC_CFG=WEIGHT_REUSE)
    assert _in_sequence(first, second, clobber) == want


def test_data_kept_but_not_reused_is_released_at_the_next_start() -> None:
    """SKIP_DATA_RLS keeps the first convolution's input slices; a next one without DATA_REUSE has CSC release
    them as it starts (``dat_reuse_release`` in NV_NVDLA_CSC_sg.v) and computes on its own fetch, even when its
    cube has the resident one's shape."""
    a, b = _tiny(1), _tiny(2)
    assert not np.array_equal(a.x, b.x)  # (computing on the resident input gives another result)
    assert _in_sequence(_program(a, D_MISC_CFG=SKIP_DATA_RLS), _program(b, 1)) == _alone(b)


def _csc_misc(p: LayerTest, value: int) -> LayerTest:
    """``p`` with CSC's D_MISC_CFG alone changed (``_program``'s overrides write CDMA's too)."""
    p.writes = [(n, value if n == "NVDLA_CSC.D_MISC_CFG_0" else v) for n, v in p.writes]
    return p


@pytest.mark.parametrize("bit", ["DATA_REUSE", "WEIGHT_REUSE", "SKIP_DATA_RLS", "SKIP_WEIGHT_RLS"])
def test_csc_and_cdma_must_agree_on_what_stays_in_the_cbuf(bit: str) -> None:
    """CDMA fetches and CSC releases by their own copies of the reuse/release bits: a program where the two
    differ would leave them disagreeing on the CBUF's content, so it is refused naming CSC's field."""
    mask = {"DATA_REUSE": DATA_REUSE, "WEIGHT_REUSE": WEIGHT_REUSE, "SKIP_DATA_RLS": SKIP_DATA_RLS,
            "SKIP_WEIGHT_RLS": SKIP_WEIGHT_RLS}[bit]
    p = _program(_tiny(1))
    misc = dict(p.writes)["NVDLA_CSC.D_MISC_CFG_0"]
    with pytest.raises(ConfigError, match=rf"CSC\.D_MISC_CFG\.{bit}: CSC says 1, CDMA 0"):
        LayerTest(_csc_misc(p, misc | mask).regs, [], p.output).run(_loaded(p))


def _loaded(p: LayerTest) -> Dla:
    dla = Dla(HW)
    for addr, data in p.memory:
        dla.mem.write(addr, data)
    return dla


def test_data_reuse_with_nothing_kept_fetches_the_input() -> None:
    """DATA_REUSE skips CDMA's fetch only over slices an earlier operation kept (SKIP_DATA_RLS): on a fresh
    CBUF, and after a new bank split flushed it, the convolution computes on its own fetched input."""
    a, b = _tiny(1), _tiny(2)
    assert _program(b, D_MISC_CFG=DATA_REUSE).run(Dla(HW)) == _alone(b)
    bank = dict(_program(b, 1).writes)["NVDLA_CDMA.D_BANK_0"]
    other_split = _program(b, 1, D_MISC_CFG=DATA_REUSE, D_BANK=bank - (1 << 16))
    assert _in_sequence(_program(a, D_MISC_CFG=SKIP_DATA_RLS), other_split) == _alone(b)


def test_weight_reuse_into_compressed_weights_is_not_modelled() -> None:
    """Kept uncompressed weights reused by a convolution declaring compressed ones (WEIGHT_FORMAT 1): what CSC
    would decompress from them is not modelled, so the op is refused instead of computed on guessed data."""
    a = _tiny(1)
    first = _program(a, D_MISC_CFG=SKIP_WEIGHT_RLS)
    second = _program(_tiny(2), 1, D_MISC_CFG=WEIGHT_REUSE)
    writes = second.writes
    writes.insert([n for n, _ in writes].index("NVDLA_CDMA.D_MISC_CFG_0"), ("NVDLA_CDMA.D_WEIGHT_FORMAT_0", 1))
    second.writes = writes
    with pytest.raises(UnsupportedError, match="weight reuse of compressed weights is not modelled"):
        _in_sequence(first, second)
