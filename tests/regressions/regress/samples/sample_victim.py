"""A test that waits to be killed, for the regression runner's own signal tests (DLA_REGRESS_SAMPLES=1): it
writes its worker's process id to ``$DLA_REGRESS_VICTIM_PID``, then sleeps."""
import os
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(os.environ.get("DLA_REGRESS_SAMPLES") != "1", reason="regress runner sample")


@pytest.mark.parametrize("i", range(3))
def test_quick(i):
    pass


def test_victim():
    path = os.environ.get("DLA_REGRESS_VICTIM_PID")
    if path:
        Path(path + ".tmp").write_text(str(os.getpid()))
        os.replace(path + ".tmp", path)
    time.sleep(120)
