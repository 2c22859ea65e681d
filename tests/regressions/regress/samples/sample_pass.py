"""Sample tests for the regression runner's own tests (run only through them: DLA_REGRESS_SAMPLES=1)."""
import os

import pytest

pytestmark = pytest.mark.skipif(os.environ.get("DLA_REGRESS_SAMPLES") != "1", reason="regress runner sample")


@pytest.mark.parametrize("x", ["a", "b"])
def test_param(x):
    assert x in "ab"


def test_seed_is_the_runs():
    assert os.environ["FUZZ_SEED"] == os.environ["EXPECT_SEED"]


def test_skipped():
    pytest.skip("not applicable here")
