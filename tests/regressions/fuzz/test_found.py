"""``regressions.fuzz.found``, the store of saved fuzz failures: a failure round-trips, its trace replays and
checks the reference, and it becomes an ``@example`` of its property test. That the repository's saved
failures still pass is the suite ``regressions/fuzz/test_found.py``."""
from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, given, reject, settings

from golden import get_config
from regressions.fuzz import engines, found, serialize
from regressions.fuzz.properties import load
from regressions.lib import programs
from regressions.lib.reference import sdp as ref_sdp
from regressions.lib.reference.arith import OutsideCmodDomain
from runtime.suite import PASS, FAIL, run_trace

PROPS = load()


def rounding_example() -> programs.SdpLayer:
    """The shape of what the injected-bug test finds: output CVT rounding of one odd value."""
    return programs.SdpLayer(np.array([[[89]]]), ref_sdp.SdpParams(cvt_shift=1), operand_bytes=1)


def test_save_writes_json_and_a_trace_checking_the_reference(tmp_path: Path) -> None:
    path = found.save(engines.SDP, "nv_small", rounding_example(), AssertionError("golden 44\nmore"), seed=7,
                      found_dir=tmp_path)
    assert path.parent == tmp_path / "sdp" and path.name.startswith("nv_small-") and path.suffix == ".json"
    data = json.loads(path.read_text())
    assert data["property"] == "sdp" and data["config"] == "nv_small" and data["seed"] == 7
    assert data["error"] == "AssertionError: golden 44"
    assert serialize.same(serialize.from_json(data["example"]), rounding_example())
    # The trace folder sits below a preset folder, so `dla trace <dir>` infers the config.
    cfg = path.with_suffix("") / "nv_small" / "sdp.cfg"
    assert cfg.is_file() and list(cfg.parent.glob("sdp_*.dat"))
    assert run_trace(str(cfg), "nv_small").status == PASS
    from app.cli import main as dla

    assert dla(["trace", str(path.with_suffix("")), "-q"]) == 0
    # Saving the same example again rewrites the same files.
    assert found.save(engines.SDP, "nv_small", rounding_example(), "x", found_dir=tmp_path) == path


def test_a_trace_checks_the_reference_crc_not_golden(tmp_path: Path) -> None:
    """A saved trace fails wherever the output differs from the reference: here the CRC is of a wrong
    expected output, as if golden were the one that is right."""
    def wrong_program(hw, example):
        program, expected = engines.SDP.program(hw, example)
        return program, bytes(b ^ 1 for b in expected)

    prop = dataclasses.replace(engines.SDP, program=wrong_program)
    path = found.save(prop, "nv_small", rounding_example(), "x", found_dir=tmp_path)
    assert run_trace(str(path.with_suffix("") / "nv_small" / "sdp.cfg"), "nv_small").status == FAIL


def test_saved_examples_become_hypothesis_examples(tmp_path: Path) -> None:
    saved = [rounding_example(), programs.SdpLayer(np.zeros((3, 1, 2), dtype=np.int64), ref_sdp.SdpParams())]
    for example in saved:
        found.save(engines.SDP, "nv_small", example, "boom", found_dir=tmp_path)
    found.save(engines.SDP, "nv_large", rounding_example(), "other preset", found_dir=tmp_path)
    seen = []

    @settings(phases=[Phase.explicit], database=None)
    @given(example=engines.SDP.strategy(get_config("nv_small")))
    def test(example) -> None:
        seen.append(example)

    found.with_found_examples(test, PROPS, "sdp", "nv_small", found_dir=tmp_path)()
    assert len(seen) == 2
    assert sorted(serialize.to_json(e)["x"]["array"] for e in seen) == sorted(
        serialize.to_json(e)["x"]["array"] for e in saved)


def test_a_saved_failure_fails_its_property_test(tmp_path: Path) -> None:
    """The replay is real: a saved example that fails makes the property test fail before generation."""
    bad = programs.SdpLayer(np.array([[[1]]]), ref_sdp.SdpParams(cvt_shift=1))
    found.save(engines.SDP, "nv_small", bad, "boom", found_dir=tmp_path)
    hw = get_config("nv_small")

    @settings(phases=[Phase.explicit], database=None)
    @given(example=engines.SDP.strategy(hw))
    def test(example) -> None:
        engines.SDP.check(hw, example)
        assert int(example.x[0, 0, 0]) != 1, "replayed"

    with pytest.raises(AssertionError, match="replayed"):
        found.with_found_examples(test, PROPS, "sdp", "nv_small", found_dir=tmp_path)()


@pytest.mark.parametrize("prop", engines.ENGINE_PROPERTIES, ids=lambda p: p.name)
def test_examples_round_trip_through_json(prop) -> None:
    hw = get_config(prop.configs[-1])

    @settings(max_examples=15, deadline=None, database=None, derandomize=True,
              suppress_health_check=list(HealthCheck))
    @given(example=prop.strategy(hw))
    def test(example) -> None:
        text = json.dumps(prop.to_json(example))
        back = prop.from_json(json.loads(text))
        assert serialize.same(back, example)
        try:
            (program, expected), (again, expected_again) = prop.program(hw, back), prop.program(hw, example)
        except OutsideCmodDomain:
            reject()
        assert program.writes == again.writes and program.memory == again.memory
        assert expected == expected_again

    test()


def test_unreadable_saved_failures_name_their_file(tmp_path: Path) -> None:
    (tmp_path / "sdp").mkdir()
    bad = tmp_path / "sdp" / "nv_small-0.json"
    bad.write_text(json.dumps({"property": "sdp", "config": "nv_small", "example": {"type": "Nope"}}))
    with pytest.raises(found.FoundError, match="nv_small-0.json.*Nope"):
        found.load(PROPS, tmp_path)
    bad.write_text(json.dumps({"property": "no_such_property", "config": "nv_small", "example": {}}))
    with pytest.raises(found.FoundError, match="no_such_property"):
        found.load(PROPS, tmp_path)
