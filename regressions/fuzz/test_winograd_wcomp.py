"""The Winograd and compressed-weight fuzz properties on each preset that has the feature: golden through the
register program equals the reference math bit for bit (``regressions.fuzz.winograd_wcomp``).

Derandomized by default; ``FUZZ_SEED=S`` draws from that seed instead. ``DLA_FUZZ_EXAMPLES`` (default 100)
scales the example counts like ``test_engines.py`` (the default file takes about 30 s on one core). Every
failure saved in ``regressions/found`` runs first, as an ``@example``.
"""
from __future__ import annotations


import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

from golden import PRESETS, ConfigError, Dla, UnsupportedError, get_config
from regressions.fuzz import serialize, winograd_wcomp
from regressions.fuzz.properties import PROPERTIES, Property
from regressions.fuzz.testing import property_test, scaled
from regressions.lib.strategies.conv_winograd import WcompExample

pytestmark = pytest.mark.reference

#: Examples per preset at the default scale.
BASE_EXAMPLES = {"conv_winograd": 50, "conv_wcomp": 40}

PAIRS = [(prop, config) for prop in winograd_wcomp.WINOGRAD_WCOMP_PROPERTIES for config in prop.configs]



@pytest.mark.parametrize("prop,config", PAIRS, ids=[f"{p.name}-{c}" for p, c in PAIRS])
def test_golden_equals_reference(prop: Property, config: str) -> None:
    property_test(prop, config, scaled(BASE_EXAMPLES[prop.name]))()


def test_properties_are_registered_on_the_presets_with_the_feature() -> None:
    assert {p.name for p in winograd_wcomp.WINOGRAD_WCOMP_PROPERTIES} == {"conv_winograd", "conv_wcomp"}
    for prop in winograd_wcomp.WINOGRAD_WCOMP_PROPERTIES:
        assert PROPERTIES[prop.name] is prop and prop.program is not None and not prop.rtl
    assert winograd_wcomp.CONV_WINOGRAD.configs == tuple(n for n, hw in PRESETS.items() if hw.winograd)
    assert winograd_wcomp.CONV_WCOMP.configs == tuple(n for n, hw in PRESETS.items() if hw.weight_compression)
    assert "nv_full" in winograd_wcomp.CONV_WINOGRAD.configs and "nv_small" not in winograd_wcomp.CONV_WCOMP.configs


def _example(config: str, prop: Property, index: int = 3):
    """A drawn example (derandomized) of ``prop`` on ``config``."""
    hw = get_config(config)
    drawn = []

    @settings(max_examples=index + 1, derandomize=True, database=None, deadline=None,
              suppress_health_check=list(HealthCheck))
    @given(example=prop.strategy(hw))
    def grab(example) -> None:
        drawn.append(example)

    grab()
    return hw, drawn[-1]


@pytest.mark.parametrize("prop", winograd_wcomp.WINOGRAD_WCOMP_PROPERTIES, ids=lambda p: p.name)
def test_examples_round_trip_through_json_and_replay(prop: Property) -> None:
    """A saved example reads back equal and its program reproduces the reference's bytes."""
    hw, example = _example("nv_full", prop)
    back = serialize.from_json(serialize.to_json(example))
    assert serialize.same(back, example)
    program, want = prop.program(hw, back)
    assert program.run(Dla(hw)) == want


def test_a_wrong_reference_is_caught() -> None:
    """The check compares real bytes: a corrupted weight changes the output and is reported. The example is the
    first drawn whose output the corruption reaches (which examples a derandomized draw gives can depend on what
    ran before in the process, and an output saturated to one value everywhere hides any corruption)."""
    for index in range(5, 30):
        hw, ex = _example("nv_full", winograd_wcomp.CONV_WINOGRAD, index)
        program, want, shape = winograd_wcomp.build_winograd(hw, ex)
        ex.u[0] = -ex.u[0] - 1  # a whole kernel inverted
        got = winograd_wcomp.build_winograd(hw, ex)[0].run(Dla(hw))
        if got != want:
            break
    assert got != want, "no drawn example's output shows a corrupted kernel"
    assert "differs from the reference" in winograd_wcomp.describe(got, want, shape, hw.atom_elements(ex.precision))


def test_compressed_program_on_a_config_without_the_feature_is_refused() -> None:
    hw_full, ex = _example("nv_full", winograd_wcomp.CONV_WCOMP, 2)
    program, _, _ = winograd_wcomp.build_wcomp(hw_full, ex)
    hw = get_config("nv_large")  # master's nv_large: neither compression nor Winograd
    if ex.wg is not None:
        with pytest.raises(UnsupportedError, match="Winograd"):
            program.run(Dla(hw))
    else:
        with pytest.raises(UnsupportedError, match="compression") as info:
            program.run(Dla(hw))
        assert info.value.unit == "CDMA"


def test_wcomp_keep_flags_store_zeros_and_still_decompress() -> None:
    """Storing every zero explicitly (all WMB bits set) gives the same output as dropping them."""
    hw, ex = _example("nv_full", winograd_wcomp.CONV_WCOMP, 4)
    n = (ex.wg.u.size if ex.wg is not None else ex.dc.w.size)
    dense = WcompExample(dc=ex.dc, wg=ex.wg, keep=np.ones(n, dtype=np.int64))
    p1, want1, _ = winograd_wcomp.build_wcomp(hw, ex)
    p2, want2, _ = winograd_wcomp.build_wcomp(hw, dense)
    assert want1 == want2
    assert p1.run(Dla(hw)) == p2.run(Dla(hw)) == want1
    words = dict(p2.writes)
    assert words["NVDLA_CDMA.D_WMB_BYTES_0"] == -(-n // 1024) * 128
    with pytest.raises(ConfigError, match="WMB_BYTES"):
        bad = dict(words)
        bad["NVDLA_CSC.D_WMB_BYTES_0"] = words["NVDLA_CDMA.D_WMB_BYTES_0"] + 128
        p2.writes = [(name, bad.get(name, value)) for name, value in p2.writes]
        p2.run(Dla(hw))
