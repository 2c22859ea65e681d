"""The run seed: CI runs are deterministic (a fixed, printed seed) unless ``FUZZ_SEED`` asks otherwise, so a red
CI reproduces and a green one stays green (issue 20)."""
from __future__ import annotations

import pytest

from regressions.regress.__main__ import CI_SEED, run_seed
from regressions.regress.lists import ListError


def test_ci_uses_the_fixed_seed_unless_fuzz_seed_says_otherwise() -> None:
    assert run_seed(None, {"CI": "true"}) == (CI_SEED, "CI: fixed seed, FUZZ_SEED=random explores")
    assert run_seed(None, {"CI": "true", "FUZZ_SEED": "0x10"}) == (16, "FUZZ_SEED")
    assert run_seed(7, {"CI": "true", "FUZZ_SEED": "3"}) == (7, "--seed")
    seeds = {run_seed(None, {"CI": "true", "FUZZ_SEED": "random"})[0] for _ in range(8)}
    assert len(seeds) > 1 and all(0 <= s < 2**32 for s in seeds)


def test_outside_ci_the_seed_is_random() -> None:
    seeds = {run_seed(None, {})[0] for _ in range(8)} | {run_seed(None, {"CI": "false"})[0] for _ in range(8)}
    assert len(seeds) > 2


def test_a_malformed_fuzz_seed_is_one_line() -> None:
    with pytest.raises(ListError, match=r"^FUZZ_SEED='abc': not an integer \(or 'random'\)$"):
        run_seed(None, {"FUZZ_SEED": "abc"})
