"""Every engine fuzz property on each of its presets: golden through its register program equals the
reference math bit for bit (``regressions.fuzz.engines``).

Derandomized by default, so a run is repeatable; ``FUZZ_SEED=S`` draws from that seed instead.
``DLA_FUZZ_EXAMPLES`` (default 100) scales the example counts: it is the count of the cheap properties
(sdp, pdp) per preset, the slower ones run proportionally fewer (the default file takes about 40 s on one
core). Every failure saved in ``regressions/found`` runs first, as an ``@example``.
"""
from __future__ import annotations


import pytest

from golden import PRESETS, get_config
from regressions.fuzz import engines
from regressions.fuzz.properties import PROPERTIES, Property
from regressions.fuzz.testing import property_test, scaled

pytestmark = pytest.mark.reference

#: Examples per preset at the default scale: about 1-2 s per (property, preset).
BASE_EXAMPLES = {"sdp": 200, "pdp": 200, "sdp_y": 100, "conv": 60, "cdp": 60}

PAIRS = [(prop, config) for prop in engines.ENGINE_PROPERTIES for config in prop.configs]



@pytest.mark.parametrize("prop,config", PAIRS, ids=[f"{p.name}-{c}" for p, c in PAIRS])
def test_golden_equals_reference(prop: Property, config: str) -> None:
    property_test(prop, config, scaled(BASE_EXAMPLES.get(prop.name, 30)))()


def test_every_engine_property_is_registered_with_its_program() -> None:
    names = {p.name for p in engines.ENGINE_PROPERTIES}
    assert names == {"conv", "sdp", "sdp_y", "pdp", "cdp"}
    for prop in engines.ENGINE_PROPERTIES:
        assert PROPERTIES[prop.name] is prop
        assert prop.program is not None
        assert ("rtl" in prop.duts) == (prop.name in ("sdp", "pdp"))
        assert ("nvdla-nv_small" in prop.duts) == (prop.name in ("conv", "sdp", "pdp", "cdp"))
        assert set(prop.configs) <= set(PRESETS)
    assert all(get_config(c).sdp_ew for c in engines.SDP_Y.configs)


def test_pdp_split_mode_is_programmed_and_checked_by_golden() -> None:
    """The split registers reach golden (which validates them): a consistent split equals the unsplit
    reference, a split whose widths do not tile the cube is refused."""
    import dataclasses

    import numpy as np

    from golden import ConfigError, Dla
    from golden.regs import UNITS
    from regressions.lib import programs
    from regressions.lib.strategies.pdp import PdpExample, PdpSplit

    hw = get_config("nv_small")
    x = np.arange(-40, 40).reshape(2, 4, 10) % 97
    # kernel 3, stride 2, pad left 1 / right 1: 10 columns pool to 5 outputs, split 2 + 1 + 2.
    layer = programs.PoolLayer(x, "max", (1, 3), (1, 2), (0, 1, 0, 1))
    assert layer.out_hw() == (4, 5)
    split = PdpSplit(3, (4, 2, 4), (2, 1, 2))
    assert (split.width, split.out_width) == (10, 5)
    program, _ = engines.PDP.program(hw, PdpExample(layer, split))
    words = dict(program.writes)
    for unit in ("PDP", "PDP_RDMA"):
        mode = UNITS[unit].register("D_OPERATION_MODE_CFG")
        assert mode.field("SPLIT_NUM").decode(words[mode.full_name]) == 2
    engines.PDP.check(hw, PdpExample(layer, split))
    bad = dataclasses.replace(split, in_widths=(3, 2, 5))
    with pytest.raises(ConfigError, match="PARTIAL_WIDTH"):
        engines.PDP.program(hw, PdpExample(layer, bad))[0].run(Dla(hw))
