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
    marker = os.environ.get("DLA_REGRESS_SLOW_DONE")
    if marker:  # the runner's Ctrl-C test checks that this never happens: the interrupt did not wait for us
        open(marker, "w").close()
