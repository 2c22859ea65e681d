"""Issue 5 round trip: every single-op nv_small trace of PDP, CDP, SDP and CONV, re-expressed as kmd
descriptors, written by our NVDLA-format writer (both dla_data_cube layouts), read back and executed by
the firmware model on the golden target, leaves exactly the bytes NVDLA's trace expects (its CRCs)."""
from __future__ import annotations

import zlib
from pathlib import Path

import pytest

from conftest import nvdla_traces_root
from golden.config import get_config
from regressions.nvdla.from_trace import INVERSES, NotExpressible, convert
from runtime.golden_target import GoldenTarget
from runtime.nvdla import fbs
from runtime.nvdla.run import NvdlaNetwork
from runtime.trace import find_traces

pytestmark = pytest.mark.conformance

PREFIXES = {"pdp_": "PDP", "cdp_": "CDP", "sdp_": "SDP", "dc_": "CONV"}
#: traces per engine that must be expressible as descriptors (the nv_small conformance set)
MIN_EXPRESSIBLE = {"PDP": 15, "CDP": 23}


def _cases() -> list[Path]:
    root = Path(__file__).resolve().parents[2].parent / "shared" / "nvdla" / "traces" / "nv_small"
    return [c for c in find_traces(root) if c.parent.name.startswith(tuple(PREFIXES))] if root.is_dir() else []


def _run(cfg: Path, legacy: bool) -> tuple[list[int], list[int], fbs.NvdlaLoadable]:
    hw = get_config("nv_small")
    converted = convert(cfg, hw, legacy=legacy)
    ld = fbs.parse(converted.loadable)
    net = NvdlaNetwork(ld, path=cfg.name)
    assert net.legacy == legacy  # detected from the descriptor blobs' firmware version
    result = net.run(GoldenTarget(hw))
    return [zlib.crc32(o.data) for o in result.outputs], converted.crcs, ld


@pytest.mark.parametrize("legacy", [False, True], ids=["current", "legacy"])
@pytest.mark.parametrize("cfg", _cases(), ids=lambda c: c.parent.name)
def test_trace_as_nvdla_loadable(cfg: Path, legacy: bool) -> None:
    engine = PREFIXES[next(p for p in PREFIXES if cfg.parent.name.startswith(p))]
    if engine not in INVERSES:
        pytest.skip(f"no descriptor inverse for {engine} yet")
    try:
        got, want, ld = _run(cfg, legacy)
    except NotExpressible as exc:
        pytest.skip(f"not expressible as kmd descriptors: {exc}")
    assert want, "the trace checks no CRC"
    assert got == want
    # the loadable really is what the writer claims: one DLA task, the descriptor blobs stamped
    assert [t.interface for t in ld.tasks] == [fbs.IF_DLA1]
    assert {b.sub_interface for b in ld.blobs if b.interface == fbs.IF_DLA1} == {1, 2, 3, 4, 5}


def test_enough_traces_are_expressible(pytestconfig) -> None:
    """The skips above are the exception: every PDP and CDP trace has a descriptor equivalent."""
    if not _cases():
        pytest.skip(f"no NVDLA traces under {nvdla_traces_root(pytestconfig)}")
    hw = get_config("nv_small")
    counts: dict[str, int] = {}
    for cfg in _cases():
        engine = PREFIXES[next(p for p in PREFIXES if cfg.parent.name.startswith(p))]
        if engine not in INVERSES:
            continue
        try:
            convert(cfg, hw)
        except NotExpressible:
            continue
        counts[engine] = counts.get(engine, 0) + 1
    for engine, n in MIN_EXPRESSIBLE.items():
        assert counts.get(engine, 0) >= n, (engine, counts)
