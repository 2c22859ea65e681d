"""Random small networks (``regressions.fuzz.networks``): compiled for each preset of the ``network`` fuzz
property, run on the golden target, within the scale-derived quantization bound of onnxruntime's float output.

Derandomized by default, so a run is repeatable; ``FUZZ_SEED=S`` draws from that seed instead.
``DLA_FUZZ_EXAMPLES`` (default 100) scales the example counts as in ``test_engines.py``: 200 networks per
preset at the default (~3 s per preset on one core), the bound's sensitivity test 40 per preset (at least
20). Every failure saved in ``regressions/found/network`` runs first, as an ``@example``.
The bound must also be tight: on the same kind of examples a float reference scaled by 1.25, or one whose
convolutions lost their biases, must fall outside it, and so must a deliberately miscompiled network.
"""
from __future__ import annotations

import json
import os

import numpy as np
import pytest
from hypothesis import HealthCheck, given, seed, settings

pytest.importorskip("onnxruntime")

from compiler.errors import CompileError  # noqa: E402
from golden.config import get_config  # noqa: E402
from regressions.fuzz import found, networks  # noqa: E402
from regressions.fuzz.networks import Layer, NetSpec  # noqa: E402
from regressions.fuzz.properties import load  # noqa: E402

PROPERTIES = load()  # every property: the saved failures of all of them are read
PROPERTY = PROPERTIES["network"]
SCALE = int(os.environ.get("DLA_FUZZ_EXAMPLES", "100")) / 100
FUZZ_SEED = os.environ.get("FUZZ_SEED", "").strip()
EXAMPLES = max(1, round(200 * SCALE))
#: Share of examples on which a deliberately wrong reference must be caught.
MIN_CAUGHT = 0.9


def fuzz_settings(examples: int):
    """Derandomized unless ``FUZZ_SEED`` is set; no example database (runs must not depend on history)."""
    base = settings(max_examples=examples, deadline=None, database=None, derandomize=not FUZZ_SEED,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                           HealthCheck.filter_too_much, HealthCheck.large_base_example])

    def deco(fn):
        fn = base(fn)
        return seed(int(FUZZ_SEED, 0))(fn) if FUZZ_SEED else fn

    return deco


def draw_examples(config: str, count: int) -> list[NetSpec]:
    """``count`` examples of the strategy, one per hypothesis example."""
    hw = get_config(config)
    drawn: list[NetSpec] = []

    @fuzz_settings(count)
    @given(spec=networks.networks(hw))
    def collect(spec: NetSpec) -> None:
        drawn.append(spec)

    collect()
    return drawn


@pytest.mark.parametrize("config", PROPERTY.configs)
def test_compiled_networks_match_float_within_the_bound(config: str) -> None:
    hw = get_config(config)

    @fuzz_settings(EXAMPLES)
    @given(example=PROPERTY.strategy(hw))
    def prop(example: NetSpec) -> None:
        PROPERTY.check(hw, example)

    found.with_found_examples(prop, PROPERTIES, PROPERTY.name, config)()


@pytest.mark.parametrize("config", PROPERTIES["network_profile"].configs)
def test_performance_profile_writes_the_default_bytes(config: str) -> None:
    """Random networks under ``--profile performance`` (int8: compressed weights on nv_full, poolings fed by
    SDP on the fly) equal the default compile byte for byte (``networks.check_profile``)."""
    hw = get_config(config)
    prop_def = PROPERTIES["network_profile"]

    @fuzz_settings(max(1, EXAMPLES // 4))
    @given(example=prop_def.strategy(hw))
    def prop(example: NetSpec) -> None:
        prop_def.check(hw, example)

    found.with_found_examples(prop, PROPERTIES, prop_def.name, config)()


@pytest.mark.parametrize("config", ("nv_small", "nv_full"))
def test_bound_rejects_wrong_references(config: str) -> None:
    """A reference whose outputs are 1.25x, or whose convolutions have no bias, is outside the bound on
    (almost) every example where the right reference is inside it: the bound is tight enough to see a
    wrong scale or shift and a dropped bias, not only gross failures."""
    hw = get_config(config)
    scaled, unbiased = [], []
    for spec in draw_examples(config, max(20, round(40 * SCALE))):
        try:
            ev = networks.evaluate(hw, spec)
        except CompileError:
            continue
        if ev.violations():
            continue  # a compiler bug, reported by the property test
        scaled.append(bool(ev.against(networks.build_model(spec, output_gain=1.25)).violations()))
        if any(layer.op == "conv" and layer.attrs["bias"] for layer in spec.layers):
            unbiased.append(bool(ev.against(networks.build_model(spec, drop_bias=True)).violations()))
    assert len(scaled) >= 10 and len(unbiased) >= 5, (len(scaled), len(unbiased))
    assert np.mean(scaled) >= MIN_CAUGHT, f"1.25x outputs caught on {sum(scaled)}/{len(scaled)} examples"
    assert np.mean(unbiased) >= MIN_CAUGHT, f"dropped biases caught on {sum(unbiased)}/{len(unbiased)} examples"


_CONV3X3 = {"kernel": (3, 3), "stride": (1, 1), "dilation": (1, 1), "pads": (1, 1, 1, 1), "group": 1, "bias": True}
#: Conv-ReLU-Conv with a residual Add and a max-pooling, nothing degenerate.
TYPICAL = NetSpec((3, 12, 12), (
    Layer("conv", (0,), dict(_CONV3X3, k=16, relu=True)),
    Layer("conv", (1,), dict(_CONV3X3, k=16, relu=False)),
    Layer("add", (2, 1), {}),
    Layer("maxpool", (3,), {"kernel": (2, 2), "stride": (2, 2), "pads": (0, 0, 0, 0), "ceil": False}),
), seed=7)


def test_bound_rejects_a_wrong_reference_on_a_typical_network() -> None:
    """The right reference is inside the bound, a 1.25x or bias-less one outside."""
    ev = networks.evaluate(get_config("nv_small"), TYPICAL)
    assert not ev.violations()
    assert ev.sigmas_used("t4") < networks.SIGMAS
    assert ev.against(networks.build_model(TYPICAL, output_gain=1.25)).violations()
    assert ev.against(networks.build_model(TYPICAL, drop_bias=True)).violations()


@pytest.mark.parametrize("bug", ["output shift off by one", "bias dropped", "X1 multiplier shift off by one"])
def test_bound_catches_a_miscompiled_network(monkeypatch, bug: str) -> None:
    """The compiler's SDP parameters deliberately broken (a wrong shift, a dropped bias): the golden output
    of the typical network leaves the bound."""
    from compiler.passes import quantize

    right = quantize.sdp_params

    def broken(*args, **kwargs):
        prm = right(*args, **kwargs)
        if bug == "output shift off by one":
            prm.cvt_shift += 1
        elif bug == "bias dropped":
            prm.x1.alu_bypass = True
        else:
            prm.x1.mul_shift += 1
        return prm

    monkeypatch.setattr(quantize, "sdp_params", broken)
    assert networks.evaluate(get_config("nv_small"), TYPICAL).violations()


def test_examples_round_trip_through_json() -> None:
    for spec in draw_examples("nv_full", 50):
        data = json.loads(json.dumps(PROPERTY.to_json(spec)))
        back = PROPERTY.from_json(data)
        assert back == spec
        assert networks.build_model(back).SerializeToString() == networks.build_model(spec).SerializeToString()


def test_strategy_draws_dags_of_every_op() -> None:
    """The strategy covers every op, merges branches (Add/Concat of two different tensors) and draws
    graphs with several outputs, on the default example budget."""
    drawn = draw_examples("nv_small", 100)
    ops = {layer.op for spec in drawn for layer in spec.layers}
    assert ops == set(networks.OPS)
    merges = [spec for spec in drawn for layer in spec.layers
              if layer.op in ("add", "concat") and len(set(layer.inputs)) > 1]
    assert merges
    assert any(len(networks.output_indices(spec)) > 1 for spec in drawn)
    assert any(layer.attrs.get("group", 1) > 1 for spec in drawn for layer in spec.layers)


# ---- compiler bugs this property found (minimal graphs), kept as regressions ------------------------------------
def _conv1x1(src: int, *, relu: bool, bias: bool, **attrs) -> Layer:
    return Layer("conv", (src,), dict({"k": 1, "kernel": (1, 1), "stride": (1, 1), "dilation": (1, 1),
                                       "pads": (0, 0, 0, 0), "group": 1, "bias": bias, "relu": relu}, **attrs))


def test_bias_after_a_dead_relu() -> None:
    """x (1,1,1,1) -> Relu -> Conv 1x1 (w = -0.234) + Relu, zero on every input -> Conv 1x1 (w 1.54, b -0.884):
    the output is the bias whatever the input. Was: the dead tensor got scale 1e-6/127 and the bias became
    -17644 << 19 accumulator steps, saturating the 32-bit SDP X1 ALU (golden -0.209, float -0.884)."""
    spec = NetSpec((1, 1, 1), (Layer("relu", (0,), {}), _conv1x1(1, relu=True, bias=False),
                               _conv1x1(2, relu=False, bias=True)), seed=21)
    networks.check_network(get_config("nv_small"), spec)


def test_conv_reading_only_padding() -> None:
    """x (1,1,1,1) -> Conv 1x1 (w = -1.40), strides (2, 1), pads (1, 0, 1, 0): every tap is padding, the
    output is 0 on every input. Was refused: its 1e-6/127 output scale overflowed the 16-bit X1 multiplier."""
    spec = NetSpec((1, 1, 1), (_conv1x1(0, relu=False, bias=False, stride=(2, 1), pads=(1, 0, 1, 0)),), seed=22)
    networks.check_network(get_config("nv_small"), spec)
