"""A slow sample test, interrupted by the regression runner's own tests (DLA_REGRESS_SAMPLES=1)."""
import os
import time

import pytest

pytestmark = pytest.mark.skipif(os.environ.get("DLA_REGRESS_SAMPLES") != "1", reason="regress runner sample")


@pytest.mark.parametrize("i", range(4))
def test_quick(i):
    pass


def test_slow():
    time.sleep(120)
