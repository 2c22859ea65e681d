"""PDP pools large cubes one surface and band of output rows at a time (bounded memory); the blocks must be
bit-exact with one pass: outputs, fp16 NaN/Inf counters, split widths, top/bottom padding, bands that share
input rows (kernel > stride) and skip them (stride > kernel), and in-place cubes (one pass, never blocks)."""
from __future__ import annotations

import numpy as np
import pytest

import golden.engines.pdp as pdp_engine
from golden.config import NV_SMALL
from golden.engines.pdp import AVERAGE, MAX, MIN
from tests.golden import test_pdp, test_pdp_wide
from tests.golden.test_pdp import CMOD

RNG = np.random.default_rng(15)
#: Cases: (kernel (kw, kh), stride (sw, sh), pads (left, top, right, bottom), method, height, width).
CASES = [
    ((2, 2), (2, 2), (0, 0, 0, 0), MAX, 16, 12),
    ((3, 3), (1, 1), (1, 1, 1, 1), AVERAGE, 13, 9),  # bands share two input rows
    ((3, 4), (2, 3), (1, 2, 1, 1), AVERAGE, 17, 11),
    ((1, 2), (1, 5), (0, 0, 0, 0), MIN, 21, 7),  # stride above the kernel: rows no window reads
    ((8, 8), (8, 8), (0, 0, 0, 0), AVERAGE, 24, 16),
]


@pytest.fixture
def blocks(monkeypatch):
    """Counts the block runs, so a test knows the block path ran (and did not fall back to one pass)."""
    runs = []
    real = pdp_engine._run_in_blocks

    def counted(*args, **kw):
        result = real(*args, **kw)
        runs.append(result is not None)
        return result

    monkeypatch.setattr(pdp_engine, "_run_in_blocks", counted)
    return runs


def one_pass_and_blocks(monkeypatch, run):
    """``run()`` with blocks off, then with blocks of a few elements (bands of one or two output rows)."""
    monkeypatch.setattr(pdp_engine, "CHUNK_ELEMENTS", 1 << 40)
    whole = run()
    monkeypatch.setattr(pdp_engine, "CHUNK_ELEMENTS", 17)
    return whole, run()


@pytest.mark.parametrize("hw", [NV_SMALL, CMOD], ids=["rtl_average", "cmod_average"])
@pytest.mark.parametrize("kernel, stride, pads, method, height, width", CASES)
def test_int8_blocks_equal_one_pass(monkeypatch, blocks, hw, kernel, stride, pads, method, height, width):
    x = RNG.integers(-128, 128, size=(24, height, width))
    pad_values = tuple(int(v) for v in RNG.integers(-20, 20, size=7))
    whole, parts = one_pass_and_blocks(monkeypatch, lambda: test_pdp.run_pdp(
        x, channels=19, kernel=kernel, stride=stride, pads=pads, method=method, pad_values=pad_values, hw=hw))
    assert np.array_equal(whole, parts)
    assert blocks == [True]


def test_split_width_in_blocks_equals_one_pass(monkeypatch, blocks):
    x = RNG.integers(-128, 128, size=(8, 9, 17))
    kw = dict(kernel=(3, 3), stride=(2, 2), pads=(0, 1, 0, 0), method=MAX, split=(2, (9, 1, 8), (4, 1, 4)))
    whole, parts = one_pass_and_blocks(monkeypatch, lambda: test_pdp.run_pdp(x, **kw))
    assert np.array_equal(whole, parts)
    assert blocks == [True]


def test_fp16_blocks_count_every_nan_and_inf_once(monkeypatch, blocks):
    x = (RNG.standard_normal((16, 11, 10)) * 8).astype(np.float16).view(np.uint16).astype(np.int64)
    x[0, 0, 3] = 0x7C00  # Inf in the column the second split re-reads
    x[3, 5, 0] = x[7, 6, 9] = 0x7E00  # NaNs in rows two bands share
    kw = dict(kernel=(3, 3), stride=(2, 1), pads=(1, 1, 1, 1), method=AVERAGE, recip=(0x7555, 0x7555),
              split=(3, (4, 2, 4), (2, 1, 2)))

    def run():
        out, dla = test_pdp_wide.run_pdp(x, "fp16", **kw)
        return out, [dla.read(f"PDP.D_{r}_NUM") for r in ("NAN_INPUT", "INF_INPUT", "NAN_OUTPUT")]

    (whole, counts_whole), (parts, counts_parts) = one_pass_and_blocks(monkeypatch, run)
    assert np.array_equal(whole, parts)
    assert counts_whole == counts_parts and counts_whole[1] == 2
    assert blocks == [True]


def test_in_place_pooling_is_one_pass(monkeypatch, blocks):
    """Output over the input: blocks would overwrite rows not read yet, so the engine reads everything first."""
    x = RNG.integers(-128, 128, size=(8, 8, 8))
    monkeypatch.setattr(test_pdp, "DST", test_pdp.SRC)
    whole, parts = one_pass_and_blocks(monkeypatch, lambda: test_pdp.run_pdp(x, kernel=(2, 2), stride=(2, 2)))
    assert np.array_equal(whole, parts)
    assert blocks == [False]


def test_blocks_start_above_chunk_elements_of_the_whole_cube(monkeypatch, blocks):
    """The block path bounds memory by the input cube's element count, padded channels x height x width: a
    cube of exactly CHUNK_ELEMENTS is pooled in one pass, one element more in blocks, and both give the 2x2
    maxima of the cube."""
    x = RNG.integers(-128, 128, size=(24, 16, 12))
    want = x.reshape(24, 8, 2, 6, 2).max(axis=(2, 4))
    outs = []
    for limit in (x.size, x.size - 1):
        monkeypatch.setattr(pdp_engine, "CHUNK_ELEMENTS", limit)
        outs.append(test_pdp.run_pdp(x, channels=19, kernel=(2, 2), stride=(2, 2)))
        assert np.array_equal(outs[-1][:19], want[:19])
    assert np.array_equal(outs[0], outs[1])
    assert blocks == [True]  # the limit itself: one pass (no block run); one below: blocks
