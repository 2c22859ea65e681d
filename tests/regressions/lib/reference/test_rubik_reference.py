"""The plain-loop RUBIK reference (``regressions/lib/reference/rubik.py``) on small cases worked out by hand:
contract, split and merge, and the register problems it finds. Golden against it is the suite
``regressions/golden/test_rubik_reference.py``."""
from __future__ import annotations

import pytest

from regressions.lib.reference.rubik import CONTRACT, CV, MC, MERGE, SPLIT, RubikOp, problems, rubik

pytestmark = pytest.mark.reference

A, B = 0x8000_0000, 0x8100_0000


def memories(data: dict[int, int] | None = None) -> dict[int, dict[int, int]]:
    return {MC: dict(data or {}), CV: {}}


# ---- the reference on hand-worked cases --------------------------------------------------------------------
def test_reference_contract_by_hand():
    """sx=2, sy=1, one int8 surface, 2x1 input: output line = in0[w0], in1[w0], in0[w1], in1[w1]."""
    op = RubikOp(mode=CONTRACT, precision=0, width=2, height=1, in_channels=64, out_channels=32, src=A, dst=B,
                 src_line=64, src_surf=64, contract_stride_0=64, dst_line=128, stride_x=2)
    src = {A + atom * 32 + b: atom * 10 + (b % 3) for atom in range(4) for b in range(32)}
    mem = memories(src)
    rubik(mem, op)
    got = [mem[MC][B + k * 32 + 5] for k in range(4)]
    assert got == [0 * 10 + 2, 2 * 10 + 2, 1 * 10 + 2, 3 * 10 + 2]  # byte 5: 5 % 3 = 2
    assert len([a for a in mem[MC] if a >= B]) == 4 * 32


def test_reference_split_and_merge_by_hand():
    """int16 split of 2 channels, width 3: plane lines of 6 data bytes then 26 zeros; merging them back
    gives the channels and zero lanes."""
    cube = {A + x * 32 + lane: (x * 32 + lane) % 251 + 1 for x in range(3) for lane in range(32)}
    op = RubikOp(mode=SPLIT, precision=1, width=3, height=1, in_channels=2, out_channels=2, src=A, dst=B,
                 src_line=96, dst_planar=64)
    mem = memories(cube)
    rubik(mem, op)
    plane1 = [mem[MC].get(B + 64 + b, 0) for b in range(32)]
    assert plane1[:6] == [cube[A + x * 32 + 2 + k] for x in range(3) for k in range(2)] and plane1[6:] == [0] * 26
    back = RubikOp(mode=MERGE, precision=1, width=3, height=1, in_channels=2, out_channels=2, src=B, dst=A + 0x1000,
                   src_planar=64)
    rubik(mem, back)
    for x in range(3):
        atom = [mem[MC][A + 0x1000 + x * 32 + b] for b in range(32)]
        assert atom[:4] == [cube[A + x * 32 + b] for b in range(4)] and atom[4:] == [0] * 28


def test_reference_problems():
    base = dict(precision=0, width=2, height=1, in_channels=1, out_channels=1, src=A, dst=B)
    assert problems(RubikOp(mode=CONTRACT, src_surf=32, contract_stride_0=64, **base)) == ["CONTRACT_STRIDE_0"]
    assert problems(RubikOp(mode=SPLIT, **{**base, "out_channels": 33})) == ["DATAOUT_CHANNEL"]
    assert problems(RubikOp(mode=SPLIT, **{**base, "dst": A + 32})) == ["DAOUT_ADDR_LOW"]
    assert problems(RubikOp(mode=SPLIT, dst_ram=CV, **{**base, "dst": A + 32})) == []
