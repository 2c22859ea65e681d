"""The byte-mover fuzz properties ("rubik", "bdma") on each preset that has the engine: golden through its
register program moves exactly the bytes the plain-loop reference moves, and refuses exactly the examples
the reference finds illegal (``regressions.fuzz.rubik_bdma``).

Derandomized by default, so a run is repeatable; ``FUZZ_SEED=S`` draws from that seed instead.
``DLA_FUZZ_EXAMPLES`` (default 100) scales the example counts (the default file takes about 12 s on one
idle core).
Every failure saved in ``regressions/found`` runs first, as an ``@example``.
"""
from __future__ import annotations

import json

import pytest

from golden import ConfigError, Dla, PRESETS, get_config
from regressions.fuzz import rubik_bdma
from regressions.fuzz.properties import Property, load
from regressions.fuzz.testing import property_test, scaled
from regressions.lib.reference.bdma import BdmaTransfer
from regressions.lib.reference.rubik import SPLIT, RubikOp
from regressions.lib.strategies.bdma import BdmaExample
from regressions.lib.strategies.rubik import RubikExample

pytestmark = pytest.mark.reference

#: Examples per preset at the default scale (a few milliseconds each).
BASE_EXAMPLES = {"rubik": 2500, "bdma": 1200}

PAIRS = [(prop, config) for prop in rubik_bdma.MOVER_PROPERTIES for config in prop.configs]



@pytest.mark.parametrize("prop,config", PAIRS, ids=[f"{p.name}-{c}" for p, c in PAIRS])
def test_golden_equals_reference(prop: Property, config: str) -> None:
    property_test(prop, config, scaled(BASE_EXAMPLES[prop.name]))()


def test_properties_are_registered_on_the_presets_with_the_engine() -> None:
    props = load()
    assert props["rubik"] is rubik_bdma.RUBIK and props["bdma"] is rubik_bdma.BDMA
    assert rubik_bdma.RUBIK.configs == tuple(n for n, hw in PRESETS.items() if hw.rubik) == ("nv_full",)
    assert rubik_bdma.BDMA.configs == tuple(n for n, hw in PRESETS.items() if hw.bdma) == ("nv_full",)
    assert all(p.program is None and not p.rtl for p in rubik_bdma.MOVER_PROPERTIES)


def test_examples_round_trip_through_json() -> None:
    op = RubikOp(mode=SPLIT, precision=2, width=3, height=2, in_channels=5, out_channels=5, src=0x8000_0000,
                 dst=0x1_0000_0000, src_line=96, dst_planar=64, src_ram=0)
    t = BdmaTransfer(src=0x8000_0000, dst=0x8100_0000, line_size=1, line_repeat=2, surf_repeat=0, src_line=64,
                     dst_line=96, src_surf=0, dst_surf=0, dst_ram=0)
    for prop, example in ((rubik_bdma.RUBIK, RubikExample(op, 7)),
                          (rubik_bdma.BDMA, BdmaExample(((1, (t, t)), (0, (t,))), 9))):
        back = prop.from_json(json.loads(json.dumps(prop.to_json(example))))
        assert back == example and type(back) is type(example)
    with pytest.raises(ValueError, match="unknown example type"):
        rubik_bdma.from_json({"type": "Nope"})


def test_a_wrong_golden_is_caught(monkeypatch) -> None:
    """The checks compare real bytes: a RUBIK that drops the split's zero padding, or a BDMA that copies one
    byte less per line, fails its property."""
    import golden.engines.bdma as gbdma
    import golden.engines.rubik as grubik

    hw = get_config("nv_full")
    op = RubikOp(mode=SPLIT, precision=0, width=3, height=1, in_channels=1, out_channels=1, src=0x8000_0000,
                 dst=0x8800_0000, src_line=96, dst_planar=32)
    rubik_bdma.check_rubik(hw, RubikExample(op, 1))
    real_split = grubik.MODES[SPLIT]

    def unpadded(op_, src):
        moves = real_split(op_, src)
        moves.data[:, 3:] = 0xAA  # bytes past the 3 elements must be zeros
        return moves

    monkeypatch.setitem(grubik.MODES, SPLIT, unpadded)
    with pytest.raises(AssertionError, match="byte"):
        rubik_bdma.check_rubik(hw, RubikExample(op, 1))

    t = BdmaTransfer(src=0x8000_0000, dst=0x8100_0000, line_size=0, line_repeat=0, surf_repeat=0, src_line=0,
                     dst_line=0, src_surf=0, dst_surf=0)
    rubik_bdma.check_bdma(hw, BdmaExample(((0, (t,)),), 2))
    real_read = gbdma.read_lines
    monkeypatch.setattr(gbdma, "read_lines", lambda space, tr: _short(real_read(space, tr)))
    with pytest.raises(AssertionError, match="byte"):
        rubik_bdma.check_bdma(hw, BdmaExample(((0, (t,)),), 2))


def _short(lines):
    lines = lines.copy()
    lines[:, -1] = ~lines[:, -1]
    return lines


def test_an_illegal_example_must_be_refused() -> None:
    """When the reference finds an example illegal, golden accepting it is a failure (and refusing it for
    the same field is a pass)."""
    hw = get_config("nv_full")
    overlap = RubikOp(mode=SPLIT, precision=0, width=2, height=1, in_channels=1, out_channels=1,
                      src=0x8000_0000, dst=0x8000_0020, src_line=64, dst_planar=32)
    rubik_bdma.check_rubik(hw, RubikExample(overlap, 3))
    with pytest.raises(ConfigError):
        rubik_bdma.play(Dla(hw), rubik_bdma.rubik_writes(overlap))
    with pytest.raises(AssertionError, match="golden accepted it"):
        rubik_bdma._raises_config_error(lambda: None, "DAOUT_ADDR_LOW")


def test_rubik_coverage_bins_are_sampled() -> None:
    """The RUBIK coverpoints read real operations: a wide-stride int16 contract and an fp16 split of a partial
    surface hit their bins, and no sampler errs."""
    from regressions.coverage import functional

    session = functional.Coverage()
    functional.install(session)
    try:
        hw = get_config("nv_full")
        contract = RubikOp(mode=0, precision=1, width=2, height=1, in_channels=1, out_channels=16, src=0x8000_0000,
                           dst=0x8800_0000, src_line=64, src_surf=64, contract_stride_0=64, dst_line=640,
                           stride_x=10, stride_y=2, dst_ram=0)
        split = RubikOp(mode=SPLIT, precision=2, width=70, height=1, in_channels=5, out_channels=5, src=0x8000_0000,
                        dst=0x8800_0000, src_line=70 * 32, dst_planar=160)
        for op in (contract, split):
            rubik_bdma.check_rubik(hw, RubikExample(op, 0))
    finally:
        functional.uninstall(session)
    snap = session.snapshot()["engines"]["RUBIK"]
    counts = snap["counts"]
    for hit in ("mode:contract", "precision:int16", "stride_x:>8", "stride_y:>1", "dst_ram:cvsram", "mode:split",
                "precision:fp16", "width:>64", "channels:partial_atom", "dst_ram:dram"):
        assert counts.get(hit) == 1, hit
    assert counts["src_ram:dram"] == 2
    assert "width:1-64" not in counts  # width and channels are not sampled for contract
    assert not snap.get("errors")
