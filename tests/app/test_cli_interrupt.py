"""Ctrl-C and SIGTERM during ``dla run`` and ``dla compile``: one line ``dla: interrupted``, exit 130 / 143,
and the run stops at once - not after the whole batch, which is where asyncio.run's own Ctrl-C handling
(cancel the task at its next suspension) let it stop."""
from __future__ import annotations

import os
import signal
from pathlib import Path

import numpy as np
import pytest

from app.cli import main
from loadable.format import write_loadable
from runtime import executor
from tests.app.test_cli_compile_run import stub_compiler  # noqa: F401 - a fixture
from tests.runtime.test_executor import C, H, W, pool_loadable

SAMPLES = 500


@pytest.mark.parametrize("sig, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_run_stops_at_the_sample_it_was_in(tmp_path: Path, monkeypatch, capsys, sig, code) -> None:
    loadable = tmp_path / "pools.dla"
    write_loadable(loadable, pool_loadable())
    np.save(tmp_path / "x.npy", np.zeros((SAMPLES, C, H, W), dtype=np.float32))
    finished: list[int] = []
    one_sample = executor._Execution.run

    async def counted(self, *args, **kwargs):
        out = await one_sample(self, *args, **kwargs)
        finished.append(1)
        if len(finished) == 1:
            os.kill(os.getpid(), sig)  # handled in this (the main) thread at its next bytecode
        return out

    monkeypatch.setattr(executor._Execution, "run", counted)
    out = tmp_path / "y.npz"
    before = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
    rc = main(["run", str(loadable), "--input", str(tmp_path / "x.npy"), "--output", str(out)])
    assert rc == code
    assert capsys.readouterr().err.strip() == "dla: interrupted"
    assert len(finished) < 5  # of 500: the signal stopped the batch where it was
    assert not out.exists() and not list(tmp_path.glob("*.tmp*"))
    # the handlers put back as they were (what an earlier test in this worker left need not be the default)
    assert (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)) == before


@pytest.mark.parametrize("sig, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_compile_interrupted_is_one_line(stub_compiler, tmp_path: Path, capsys, sig, code) -> None:  # noqa: F811
    def compiling():
        os.kill(os.getpid(), sig)
        return pool_loadable()

    stub_compiler.result = compiling
    model = tmp_path / "m.onnx"
    model.write_bytes(b"stub")
    rc = main(["compile", str(model), "--config", "nv_small", "-o", str(tmp_path / "o.dla")])
    assert rc == code
    assert capsys.readouterr().err.strip() == "dla: interrupted"
    assert not (tmp_path / "o.dla").exists()
