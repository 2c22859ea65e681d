"""Issue 5 round trip: every single-op nv_small trace of PDP, CDP, SDP and CONV, re-expressed as kmd
descriptors, written by our NVDLA-format writer (both dla_data_cube layouts), read back and executed by
the firmware model on the golden target, leaves exactly the bytes NVDLA's trace expects (its CRCs)."""
from __future__ import annotations

import functools
import zlib
from pathlib import Path

import pytest

from conftest import nvdla_traces_root
from golden.config import get_config
from golden.regs import register_map
from regressions.nvdla.from_trace import INVERSES, NotExpressible, convert
from runtime.golden_target import GoldenTarget
from runtime.nvdla import fbs
from runtime.nvdla.run import NvdlaNetwork
from runtime.suite import NA, run_trace
from runtime.trace import find_traces, parse_cfg

pytestmark = pytest.mark.conformance

PREFIXES = {"pdp_": "PDP", "cdp_": "CDP", "sdp_": "SDP", "dc_": "CONV"}
#: the unit whose enable identifies the engine's op, where it is not the engine's name
_UNIT = {"CONV": "CACC"}
#: traces per engine that must be expressible as descriptors (the nv_small conformance set): all PDP and CDP
#: traces; all SDP traces but sdp_3x3x33_bn_int8_reg_2 (BN with both PReLU and ReLU: one ``act`` cannot say
#: that); all conv traces whose data NVDLA ships (dc_32x26x76_6x3x76x270_int8_0 lacks its weight file)
MIN_EXPRESSIBLE = {"PDP": 15, "CDP": 23, "SDP": 22, "CONV": 12}


def _cases() -> list[Path]:
    root = Path(__file__).resolve().parents[2].parent / "shared" / "nvdla" / "traces" / "nv_small"
    return [c for c in find_traces(root) if c.parent.name.startswith(tuple(PREFIXES))] if root.is_dir() else []


@functools.lru_cache(maxsize=None)
def _config(cfg: Path) -> str:
    """nv_small, or, for NVDLA's nv_small traces that need SDP units nv_small lacks (EW, LUT), nv_small_256_full:
    the same traces NVDLA's conformance suite runs there (regressions/conformance/test_nvdla_traces.py)."""
    out = run_trace(str(cfg), "nv_small")
    return "nv_small_256_full" if out.status == NA and out.detail.startswith("needs SDP") else "nv_small"


def _missing(cfg: Path) -> list[Path]:
    return parse_cfg(cfg, register_map(get_config("nv_small").address_map)).missing_files()


def _run(cfg: Path, legacy: bool) -> tuple[list[int], list[int], fbs.NvdlaLoadable]:
    hw = get_config(_config(cfg))
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
    if _UNIT.get(engine, engine) not in INVERSES:
        pytest.skip(f"no descriptor inverse for {engine} yet")
    if _missing(cfg):
        pytest.skip(f"NVDLA's data file {_missing(cfg)[0].name} is absent")
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
    """The skips above are the exception (MIN_EXPRESSIBLE says which)."""
    if not _cases():
        pytest.skip(f"no NVDLA traces under {nvdla_traces_root(pytestconfig)}")
    counts: dict[str, int] = {}
    for cfg in _cases():
        engine = PREFIXES[next(p for p in PREFIXES if cfg.parent.name.startswith(p))]
        if _UNIT.get(engine, engine) not in INVERSES or _missing(cfg):
            continue
        try:
            convert(cfg, get_config(_config(cfg)))
        except NotExpressible:
            continue
        counts[engine] = counts.get(engine, 0) + 1
    for engine, n in MIN_EXPRESSIBLE.items():
        assert counts.get(engine, 0) >= n, (engine, counts)


#: (trace, engine unit, what to break in the ops its inverse returns): each must make the trace not expressible
_BROKEN = [
    ("sdp_3x3x33_bs_bn_int8_0", "SDP", "x1 truncate", lambda ops: ops[0].op.x1_op.__setattr__("truncate", 3)),
    ("sdp_5x24x18_bs_int8_mem_0", "SDP", "x1 per-kernel", lambda ops: ops[0].op.x1_op.__setattr__("mode", 1)),
    ("sdp_pdp_32x16x32_pass_through_int8_0", "SDP", "fused PDP kernel",
     lambda ops: ops[1].op.__setattr__("pool_width", 1)),
    ("dc_6x8x192_3x3x192x32_int8_0", "CACC", "conv dilation", lambda ops: ops[0].op.__setattr__("dilation_x", 2)),
    ("dc_6x8x192_3x3x192x32_int8_0", "CACC", "fused SDP scale",
     lambda ops: ops[1].op.out_cvt.__setattr__("scale", ops[1].op.out_cvt.scale + 1)),
]


@pytest.mark.parametrize("name, unit, what, breaks", _BROKEN, ids=[b[2] for b in _BROKEN])
def test_the_forward_check_catches_a_wrong_descriptor(name, unit, what, breaks, monkeypatch) -> None:
    """The irrelevance rules must not hide a descriptor field that matters: break one, and the trace is no
    longer expressible."""
    cfg = next((c for c in _cases() if c.parent.name == name), None)
    if cfg is None:
        pytest.skip(f"no NVDLA trace {name}")
    inverse = INVERSES[unit]

    def broken(regs, writes):
        ops = inverse(regs, writes)
        breaks(ops)
        return ops

    convert(cfg, get_config(_config(cfg)))  # expressible as it is
    monkeypatch.setitem(INVERSES, unit, broken)
    with pytest.raises(NotExpressible):
        convert(cfg, get_config(_config(cfg)))
