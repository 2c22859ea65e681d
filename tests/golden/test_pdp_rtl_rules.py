"""PDP rules read off NVDLA's nv_small RTL (docs/golden-semantics.md, PDP): the AVERAGE datapath widths,
the flush count after the last input column/row, and a PDP after one that left input rows unread.
Expected values are computed here by hand from the RTL's signal widths."""
from __future__ import annotations

import numpy as np
import pytest

from compiler.codegen.pdp import used_geometry
from compiler.hwparams import PdpParams
from golden.config import NV_FULL, NV_SMALL
from golden.dla import Dla
from golden.engines.pdp import AVERAGE, MAX, flush_counts, rtl_round
from golden.errors import ConfigError
from regressions.lib import programs
from tests.golden.test_pdp import ATOM, CMOD, run_pdp


def test_nv_small_defaults_to_the_rtl_datapath_and_nv_full_to_the_cmod():
    assert NV_SMALL.pdp_average == "nv_small_rtl" and NV_FULL.pdp_average == "cmod"


def test_rtl_round_cuts_positive_results_one_bit_short():
    # 11-bit result: 1500 (positive, >= 1024) keeps only its low 10 bits; -1500 keeps 11 bits (wraps to 548).
    assert int(rtl_round(np.int64(1500 << 16), 31, 11)) == 1500 - 1024
    assert int(rtl_round(np.int64(-1500 << 16), 31, 11)) == -1500 + 2048
    # Rounding half away from zero, as in range: 2.5 -> 3, -2.5 -> -3, -2.25 -> -2.
    assert [int(rtl_round(np.int64(v), 28, 8)) for v in (0x28000, -0x28000, -0x24000)] == [3, -3, -2]


def test_average_pad_values_keep_11_and_14_bits():
    """3x3 around one pixel: one real row with 2 padded columns adds PAD_2X[10:0] into 11 bits; 2 padded rows
    add (PAD_2X * 3)[13:0]; the sum is stored without scaling (reciprocals 1.0), cut to 8 bits."""
    x = np.zeros((ATOM, 1, 1), dtype=np.int64)
    x[0, 0, 0] = 8
    p2 = 1000
    got = run_pdp(x, kernel=(3, 3), pads=(1, 1, 1, 1), method=AVERAGE, pad_values=(0, p2, 0, 0, 0, 0, 0),
                  recip=(0x10000, 0x10000))
    row = (8 + p2) % 2048 - 2048 * ((8 + p2) % 2048 >= 1024)  # 1008 -> -1040 in 11 bits
    vert = (3 * p2) % 16384  # 3000, positive in 14 bits
    total = row + vert  # 1960: > 1023, so the positive 11-bit stage keeps 1960 - 1024 = 936, then 8 bits: 936 % 128
    assert got[0, 0, 0] == (total % 1024) % 128
    cmod = run_pdp(x, kernel=(3, 3), pads=(1, 1, 1, 1), method=AVERAGE, pad_values=(0, p2, 0, 0, 0, 0, 0),
                   recip=(0x10000, 0x10000), hw=CMOD)
    assert cmod[0, 0, 0] == ((8 + p2 + 3 * p2) + 128) % 256 - 128


def test_average_in_range_is_the_cmod_rule():
    rng = np.random.default_rng(3)
    x = rng.integers(-128, 128, (ATOM, 6, 7))
    pv = tuple((n * -77) & 0x7FFFF for n in range(1, 8))
    kw = dict(kernel=(3, 2), stride=(2, 1), pads=(2, 1, 2, 1), method=AVERAGE, pad_values=pv)
    assert np.array_equal(run_pdp(x, **kw), run_pdp(x, hw=CMOD, **kw))


@pytest.mark.parametrize("args,want", [
    ((7, 4, 2, 0, 2), (1, 0)),  # pad right 2, the last window uses 1: the RTL flushes one output too many
    ((7, 4, 2, 0, 1), (0, 0)), ((7, 4, 2, 0, 3), (1, 1)),  # the padding is used up
    ((7, 5, 2, 0, 3), (1, 1)),  # one pad unused, but floor(3/2) == floor(2/2)
    ((7, 8, 2, 0, 4), (0, 1)),  # short input (7 < 8), 3 of 4 pad rows used: flushes none, hangs
])
def test_flush_counts(args, want):
    assert flush_counts(*args) == want


def test_unused_right_padding_is_refused():
    x = np.zeros((ATOM, 2, 7), dtype=np.int64)
    with pytest.raises(ConfigError, match=r"PDP\.D_POOLING_PADDING_CFG\.PAD_RIGHT"):
        run_pdp(x, kernel=(4, 1), stride=(2, 1), pads=(0, 0, 2, 0), method=MAX)
    run_pdp(x, kernel=(4, 1), stride=(2, 1), pads=(0, 0, 3, 0), method=MAX)  # used up: legal


def test_unused_bottom_padding_of_a_short_input_is_refused():
    x = np.zeros((ATOM, 7, 1), dtype=np.int64)
    with pytest.raises(ConfigError, match=r"PDP\.D_POOLING_PADDING_CFG\.PAD_BOTTOM"):
        run_pdp(x, kernel=(1, 8), stride=(1, 2), pads=(0, 0, 0, 4), method=MAX)
    # cal2d flushing too many rows is harmless (measured): a taller input with an unused pad row is legal
    run_pdp(np.zeros((ATOM, 6, 3), dtype=np.int64), kernel=(2, 3), stride=(1, 2), pads=(0, 0, 0, 2), method=MAX)


def _pool(seed: int, h: int, kernel=(2, 4), stride=(3, 3), w: int = 16) -> programs.PoolLayer:
    x = np.random.default_rng(seed).integers(-128, 128, (8, h, w))
    return programs.PoolLayer(x, "max", kernel, stride)


def test_pdp_after_unread_rows_is_refused_naming_the_earlier_op():
    dla = Dla(NV_SMALL)
    programs.program_pdp(NV_SMALL, _pool(0, 3), crop=False).run(dla)  # row 2 is in no window: fine alone
    second = programs.program_pdp(NV_SMALL, _pool(1, 2, (1, 1), (1, 1), 2))
    second.writes = [(n, 1 if n.endswith("S_POINTER_0") else v) for n, v in second.writes]  # the next group
    with pytest.raises(ConfigError, match=r"PDP\.D_DATA_CUBE_IN_HEIGHT\.CUBE_IN_HEIGHT.*operation #0 \(PDP group 0, "
                                          r"1 of 3 input rows unread\)"):
        second.run(dla)


def test_compiler_reads_only_the_rows_and_pads_its_windows_use():
    prm = PdpParams("avg", (2, 2), (3, 3), (0, 0, 0, 0), (0,) * 7, 0x8000, 0x8000)
    assert used_geometry(3, 16, 1, 5, prm) == (2, 0, 0)  # avgpool k2 s3 on height 3: row 2 dropped
    prm = PdpParams("max", (1, 4), (1, 2), (0, 0, 0, 2), (0,) * 7, 0x4000, 0x10000)
    assert used_geometry(2, 7, 2, 3, prm) == (2, 0, 1)  # 1 of the 2 right pad columns used
    dla = Dla(NV_SMALL)
    for group in (0, 1):  # the compiled k2 s3 pooling twice: legal now
        p = programs.program_pdp(NV_SMALL, _pool(group, 3))
        p.writes = [(n, group if n.endswith("S_POINTER_0") else v) for n, v in p.writes]
        p.run(dla)
    assert dla.pdp_unread_rows is None


def test_average_with_top_padding_and_unread_rows_is_refused():
    x = np.zeros((ATOM, 3, 6), dtype=np.int64)
    with pytest.raises(ConfigError, match=r"PDP\.D_DATA_CUBE_IN_HEIGHT\.CUBE_IN_HEIGHT"):
        run_pdp(x, kernel=(2, 5), stride=(3, 3), pads=(0, 3, 0, 0), method=AVERAGE)
    run_pdp(x, kernel=(2, 5), stride=(3, 3), pads=(0, 3, 0, 0), method=MAX)  # max: right alone
    run_pdp(x[:, :2], kernel=(2, 5), stride=(3, 3), pads=(0, 3, 0, 0), method=AVERAGE)  # cropped: legal
