"""Sample failures for the regression runner's own tests (DLA_REGRESS_SAMPLES=1)."""
import os

import pytest

pytestmark = pytest.mark.skipif(os.environ.get("DLA_REGRESS_SAMPLES") != "1", reason="regress runner sample")


def test_fails(tmp_path):
    log = tmp_path / "sim.log"
    log.write_text("simulator output\n")
    print(f"some captured output; full log: {log}")
    assert 1 + 1 == 3, "arithmetic is off"


def test_crashes_its_worker():
    if os.environ.get("SAMPLE_FIXED") != "1":
        os._exit(3)
