"""Two-convolution programs that probe what the CBUF keeps between operations (``golden.cbuf``).

Each case runs convolution A (ping-pong group 0), optionally zeroes memory, then convolution B (group 1) with
the same ``D_BANK`` split, so whatever A leaves in the CBUF reaches B. Cases cover the legal uses (weight and
data reuse after SKIP_*_RLS, kept weights released by a non-reusing successor, partial data release) and the
programs the golden model refuses (weights fetched but not consumed, data slices over-released). As a trace,
a legal case checks golden's CRCs; a refused case checks the CRCs each operation gives *alone*, which is what a
model without CBUF state would predict, so NVDLA's RTL must FAIL it: that is the evidence the refusal is right.
"""
from __future__ import annotations

import zlib
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from golden.config import HwConfig
from golden.dla import Dla
from golden.errors import ConfigError
from regressions.lib.programs import SRC_BASE, WEIGHT_BASE, ConvLayer, program_conv

SKIP_WEIGHT_RLS, WEIGHT_REUSE, SKIP_DATA_RLS, DATA_REUSE = 1 << 28, 1 << 20, 1 << 24, 1 << 16
#: Where operation B's buffers live: away from A's, so A's output is checked intact.
B_SHIFT = 0x10_0000


@dataclass(frozen=True)
class ConvOp:
    layer: ConvLayer
    #: Register words replaced in CDMA and CSC (e.g. ``{"D_MISC_CFG": SKIP_DATA_RLS}``).
    overrides: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class CbufCase:
    name: str
    a: ConvOp
    b: ConvOp
    #: (offset from B's base, size) ranges of B's buffers zeroed after A: input at SRC, weights at WEIGHT.
    clobber: tuple[tuple[int, int], ...] = ()


@dataclass
class _Op:
    writes: list[tuple[str, int]]
    memory: list[tuple[int, bytes]]
    output: tuple[int, int]


def _op(hw: HwConfig, op: ConvOp, group: int, shift: int) -> _Op:
    p = program_conv(hw, op.layer)
    moved = {"NVDLA_CDMA.D_DAIN_ADDR_LOW_0", "NVDLA_CDMA.D_WEIGHT_ADDR_LOW_0", "NVDLA_SDP.D_DST_BASE_ADDR_LOW_0",
             "NVDLA_CACC.D_DATAOUT_ADDR_0"}
    writes = []
    for name, value in p.writes:
        unit, reg = name.split(".")
        reg = reg.removesuffix("_0")
        if reg == "S_POINTER":
            value = group
        elif name in moved:
            value += shift
        if unit in ("NVDLA_CDMA", "NVDLA_CSC") and reg in op.overrides:
            value = op.overrides[reg]
        writes.append((name, value))
    return _Op(writes, [(a + shift, d) for a, d in p.memory], (p.output[0] + shift, p.output[1]))


def _crc_alone(hw: HwConfig, op: _Op) -> int:
    dla = Dla(hw)
    for addr, data in op.memory:
        dla.mem.write(addr, data)
    for name, value in op.writes:
        dla.write_reg(dla.map.resolve(name)[0], 0 if name.endswith("S_POINTER_0") else value)
    return zlib.crc32(dla.mem.dram.read_bytes(*op.output))


def write_case(hw: HwConfig, case: CbufCase, directory: Path) -> tuple[Path, str | None]:
    """Write ``case`` as an NVDLA trace in ``directory/<name>/``; returns (its .cfg, golden's refusal or None).
    Expected CRCs: golden's for the sequence, or each operation's alone when golden refuses the sequence."""
    a, b = _op(hw, case.a, 0, 0), _op(hw, case.b, 1, B_SHIFT)
    clobber = [(B_SHIFT + off, size) for off, size in case.clobber]
    dla = Dla(hw)
    for addr, data in a.memory + b.memory:
        dla.mem.write(addr, data)
    refusal, crcs = None, []
    try:
        for op, zero in ((a, ()), (b, clobber)):
            for addr, size in zero:
                dla.mem.write(addr, bytes(size))
            for name, value in op.writes:
                dla.write_reg(dla.map.resolve(name)[0], value)
            crcs.append(zlib.crc32(dla.mem.dram.read_bytes(*op.output)))
    except ConfigError as exc:
        refusal, crcs = str(exc), [_crc_alone(hw, a), _crc_alone(hw, b)]

    from runtime.trace import write_dat

    out = directory / case.name
    out.mkdir(parents=True, exist_ok=True)
    lines = [f"// {case.name}: CBUF state between two convolutions (regressions/lib/programs/cbuf.py)"]
    for i, (addr, data) in enumerate(a.memory + b.memory):
        write_dat(out / f"{case.name}_{i}.dat", data)
        lines.append(f'mem_load(pri_mem, {addr:#x}, "{case.name}_{i}.dat");')
    for i, (op, zero, intr) in enumerate(((a, (), "SDP_0"), (b, clobber, "SDP_1"))):
        lines += [f"mem_init(pri_mem, {addr:#x}, {size:#x}, ALL_ZERO);" for addr, size in zero]
        lines += [f"reg_write({name}, {value:#x});" for name, value in op.writes]
        lines.append(f"intr_notify({intr}, op_{i});")
        lines.append(f"check_crc(op_{i}, pri_mem, {op.output[0]:#x}, {op.output[1]:#x}, {crcs[i]:#010x});")
    cfg = out / f"{case.name}.cfg"
    cfg.write_text("\n".join(lines) + "\n")
    return cfg, refusal


def _layer(seed: int, c: int = 20, h: int = 6, w: int = 6, k: int = 10, r: int = 3) -> ConvLayer:
    rng = np.random.default_rng(seed)
    return ConvLayer(x=rng.integers(-20, 20, (c, h, w)), w=rng.integers(-20, 20, (k, c, r, r)), out_cvt=(0, 1, 6))


def cases() -> list[CbufCase]:
    """The CBUF cases: legal ones first, then the two golden refuses."""
    a, b, one_line = _layer(1), _layer(2), _layer(3, h=1, r=1)
    same = ConvLayer(x=a.x, w=a.w, out_cvt=(0, 1, 5))
    data_of_a = ConvLayer(x=a.x, w=b.w, out_cvt=(0, 1, 6))
    weights_of_a = ConvLayer(x=b.x, w=a.w, out_cvt=(0, 1, 6))
    input_, weights = (SRC_BASE, 0x1000), (WEIGHT_BASE, 0x2000)
    over_fetch = -(-10 * 20 * 9 // 128) * 128 + 128  # the kernels span 225 entries of 8 bytes; fetch 256
    return [
        CbufCase("reuse_data_and_weights", ConvOp(a, {"D_MISC_CFG": SKIP_DATA_RLS | SKIP_WEIGHT_RLS}),
                 ConvOp(same, {"D_MISC_CFG": DATA_REUSE | WEIGHT_REUSE}), (input_, weights)),
        CbufCase("reuse_data", ConvOp(a, {"D_MISC_CFG": SKIP_DATA_RLS}),
                 ConvOp(data_of_a, {"D_MISC_CFG": DATA_REUSE}), (input_,)),
        CbufCase("reuse_weights", ConvOp(a, {"D_MISC_CFG": SKIP_WEIGHT_RLS}),
                 ConvOp(weights_of_a, {"D_MISC_CFG": WEIGHT_REUSE}), (weights,)),
        CbufCase("kept_not_reused", ConvOp(a, {"D_MISC_CFG": SKIP_DATA_RLS | SKIP_WEIGHT_RLS}), ConvOp(b)),
        CbufCase("partial_data_release", ConvOp(a, {"D_RELEASE": 1}), ConvOp(b)),
        CbufCase("refused_weights_over_fetched", ConvOp(a, {"D_WEIGHT_BYTES": over_fetch}), ConvOp(b)),
        CbufCase("refused_data_over_released", ConvOp(one_line, {"D_RELEASE": 1}), ConvOp(b)),
    ]
