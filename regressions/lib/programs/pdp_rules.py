"""PDP rules read off NVDLA's nv_small RTL, as traces (``regressions/rtl/test_nvdla_rtl_pdp_rules.py`` plays them).

Each case is one or two pooling layers (``programs.program_pdp``) played back to back on one DUT. Golden's CRCs
are checked when golden runs the whole case; when golden refuses it (``ConfigError``), each layer's CRC is the
one it has alone (golden's, or the cmod rule of ``regressions.lib.reference.pdp`` when golden refuses the layer
itself), so the RTL must FAIL it to show that the refusal is right.

- ``avg_*``: AVERAGE with raw PAD_VALUE_nX outside n*int8 and reciprocals above 1/kernel: golden's
  ``HwConfig.pdp_average == "nv_small_rtl"`` datapath (``golden.engines.pdp.pool_rtl_average``).
- ``flush_*``: right/bottom padding the last window does not reach (``golden.engines.pdp.flush_counts``).
- ``rows_*``: a PDP leaving input rows below its last window unread, then another PDP
  (``golden.engines.pdp.unread_rows``).
"""
from __future__ import annotations

import re
import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from golden import Dla
from golden.config import HwConfig
from golden.errors import ConfigError
from regressions.lib import programs
from regressions.lib.reference import pdp as ref_pdp

_POINTER = re.compile(r"NVDLA_(\w+)\.S_POINTER_0")
_OP_ENABLE = re.compile(r"NVDLA_(\w+)\.D_OP_ENABLE_0")


@dataclass(frozen=True)
class PdpCase:
    name: str
    layers: tuple[programs.PoolLayer, ...]
    #: what golden must do: "pass" (computes it) or "refuse" (ConfigError)
    expect: str
    #: build with the compiler's emit_pdp cropping (``crop=True``: only the rows and pads the windows use)
    crop: bool = False


def _x(seed: int, c: int, h: int, w: int) -> np.ndarray:
    return np.random.default_rng(seed).integers(-128, 128, (c, h, w))


def _layer(seed: int, chw: tuple[int, int, int], method: str, kernel: tuple[int, int], stride: tuple[int, int],
           pad: tuple[int, int, int, int] = (0, 0, 0, 0), pad_values=(0,) * 7, recip_w=None, recip_h=None):
    return programs.PoolLayer(_x(seed, *chw), method, kernel, stride, pad, tuple(pad_values), recip_w, recip_h)


def cases() -> list[PdpCase]:
    out: list[PdpCase] = []
    # 1. the AVERAGE datapath widths: pad values n*v for v outside int8, raw 19-bit values, big reciprocals.
    for i, (pv, rw, rh) in enumerate([
        ([n * 200 for n in range(1, 8)], None, None),
        ([1000] * 7, None, None),
        ([(n * -200) & 0x7FFFF for n in range(1, 8)], None, None),
        ([0x7F00, 0x1FF, 0x3FF, 0x7FFFF, 0x40000, 0x12345, 0x54321], None, None),
        ([n * 100 for n in range(1, 8)], 0x1FFFF, 0x1C000),
        ([n * 127 for n in range(1, 8)], 0x18000, 0x1FFFF),
    ]):
        out.append(PdpCase(f"avg_{i}", (_layer(i, (8, 4, 4), "avg", (3, 3), (1, 1), (1, 1, 1, 1), pv, rw, rh),), "pass"))
    out.append(PdpCase("avg_big_kernel", (_layer(9, (8, 6, 7), "avg", (5, 4), (1, 2), (2, 3, 2, 3),
                                                 [0x3C00 + n for n in range(7)], 0x1F000, 0x15000),), "pass"))
    # 2. right/bottom padding: (kernel, stride, pads, shape) legal and refused by the flush count.
    geometry = [
        ("right_used_1", (1, 4), (1, 2), (0, 0, 0, 1), (8, 2, 7), "pass"),
        ("right_used_3", (1, 4), (1, 2), (0, 0, 0, 3), (8, 2, 7), "pass"),
        ("right_unused", (1, 4), (1, 2), (0, 0, 0, 2), (8, 2, 7), "refuse"),
        ("right_unused_absorbed", (1, 5), (1, 2), (0, 0, 0, 3), (8, 2, 7), "pass"),  # u=1, floor(3/2)=floor(2/2)
        ("right_unused_s3", (2, 5), (1, 3), (0, 0, 0, 4), (8, 2, 9), "refuse"),
        ("bottom_used_3", (8, 1), (2, 1), (0, 0, 3, 0), (8, 7, 1), "pass"),
        ("bottom_unused_small", (8, 1), (2, 1), (0, 0, 4, 0), (8, 7, 1), "refuse"),
        ("bottom_unused", (3, 2), (2, 1), (0, 0, 2, 0), (8, 6, 3), "pass"),  # cal2d: extra flush harmless
        ("bottom_unused_absorbed", (4, 2), (2, 1), (0, 0, 3, 0), (8, 6, 3), "pass"),
    ]
    for i, (name, kernel, stride, pad, chw, expect) in enumerate(geometry):
        for method in ("max", "avg"):
            pv = [n * 7 for n in range(1, 8)]
            out.append(PdpCase(f"flush_{name}_{method}", (_layer(20 + i, chw, method, kernel, stride, pad, pv),), expect))
    # 3. input rows below the last window, then another PDP.
    nxt = _layer(40, (8, 2, 2), "max", (1, 1), (1, 1))
    # (Widths 1 with a 1x1 window and 8 with 4/3 ran right on the RTL: golden refuses them too, not measured here.)
    for w in (2, 4, 16):
        kw, sw = (4, 3) if w >= 4 else (1, 1)
        first = _layer(41 + w, (8, 3, w), "max", (2, kw), (3, sw))
        out.append(PdpCase(f"rows_unread_w{w}_then_pdp", (first, nxt), "refuse"))
        out.append(PdpCase(f"rows_unread_w{w}_alone", (first,), "pass"))
        out.append(PdpCase(f"rows_cropped_w{w}_then_pdp", (first, nxt), "pass", crop=True))
    out.append(PdpCase("rows_unread_twice", (_layer(50, (8, 3, 16), "max", (2, 4), (3, 3)),) * 2, "refuse"))
    out.append(PdpCase("rows_all_read_then_pdp", (_layer(51, (8, 2, 16), "max", (2, 4), (3, 3)), nxt), "pass"))
    out.append(PdpCase("rows_unread_avg_then_pdp", (_layer(52, (8, 5, 4), "avg", (2, 2), (2, 2)), nxt), "refuse"))
    # AVERAGE with top padding and a row below its last window: wrong alone (found by SDP->PDP fuzzing)
    pv = [0x36e56, 0, 0x36bf, 0x58, 0x11c, 0xed, 0x3cc4]
    top = _layer(7, (24, 3, 6), "avg", (5, 2), (3, 3), (3, 0, 0, 0), pv, 0x8000, 0x3333)
    out.append(PdpCase("rows_unread_avg_top_pad", (top,), "refuse"))
    out.append(PdpCase("rows_cropped_avg_top_pad", (top,), "pass", crop=True))
    # the compiler's avgpool k2 s3 on height 3 (compiler/codegen/pdp.py crops to the rows the windows use)
    avg = _layer(53, (8, 3, 16), "avg", (2, 2), (3, 3))
    out.append(PdpCase("rows_cropped_avg_k2s3_twice", (avg, avg), "pass", crop=True))
    for name, kernel, stride, pad, chw in [("right", (1, 4), (1, 2), (0, 0, 0, 2), (8, 2, 7)),
                                           ("bottom_small", (8, 1), (2, 1), (0, 0, 4, 0), (8, 7, 1))]:
        out.append(PdpCase(f"flush_cropped_{name}", (_layer(54, chw, "avg", kernel, stride, pad, [7] * 7),), "pass",
                           crop=True))
    return out


def _alone(hw: HwConfig, layer: programs.PoolLayer, crop: bool) -> bytes:
    """One layer's output computed alone: golden's, or the cmod rule when golden refuses the layer."""
    program = programs.program_pdp(hw, layer, crop=crop)
    try:
        return program.run(Dla(hw))
    except ConfigError:
        (kh, kw) = layer.kernel
        atom = hw.atom_elements()
        c = layer.x.shape[0]
        x = np.zeros((-(-c // atom) * atom,) + layer.x.shape[1:], dtype=np.int64)
        x[:c] = layer.x
        want = ref_pdp.pool(x, method=layer.method, kernel=layer.kernel, stride=layer.stride, pad=layer.pad,
                            pad_values=layer.pad_values,
                            recip_w=layer.recip_w if layer.recip_w is not None else 0x10000 // kw,
                            recip_h=layer.recip_h if layer.recip_h is not None else 0x10000 // kh,
                            out_hw=layer.out_hw(), average=hw.pdp_average)
        oh, ow = layer.out_hw()
        # packed (surface, line, pixel, lane) bytes, as programs.program_pdp lays the output out
        cube = want.reshape(-1, atom, oh, ow).transpose(0, 2, 3, 1)
        return (cube & 0xFF).astype(np.uint8).tobytes()


def write_case(hw: HwConfig, case: PdpCase, directory: Path) -> tuple[Path, str | None]:
    """Write ``case`` as a trace in ``directory/<name>/``; returns (its .cfg, golden's refusal or None)."""
    from runtime.trace import write_dat

    # Every enabled unit flips its ping-pong group after its operation: step i programs the group reached.
    steps, group = [], {}
    for layer in case.layers:
        program = programs.program_pdp(hw, layer, crop=case.crop)
        writes, enabled = [], []
        for reg, value in program.writes:
            pointer = _POINTER.fullmatch(reg)
            if pointer:
                value = group.get(pointer.group(1), 0)
            enable = _OP_ENABLE.fullmatch(reg)
            if enable and value:
                enabled.append(enable.group(1))
            writes.append((reg, value))
        steps.append((program, writes, group.get("PDP", 0)))
        for u in enabled:
            group[u] = group.get(u, 0) ^ 1
    dla = Dla(hw)
    refusal, outs = None, []
    try:
        for program, writes, _ in steps:
            for addr, data in program.memory:
                dla.mem.write(addr, data)
            for reg, value in writes:
                dla.write_reg(dla.map.resolve(reg)[0], value)
            outs.append(dla.mem.dram.read_bytes(*program.output))
    except ConfigError as exc:
        refusal, outs = str(exc), [_alone(hw, layer, case.crop) for layer in case.layers]
    out = directory / case.name
    out.mkdir(parents=True, exist_ok=True)
    lines = [f"// {case.name}: PDP rule of NVDLA's nv_small RTL (regressions/lib/programs/pdp_rules.py)"]
    for i, (program, writes, pdp_group) in enumerate(steps):
        for k, (addr, data) in enumerate(program.memory):
            write_dat(out / f"{case.name}_{i}_{k}.dat", data)
            lines.append(f'mem_load(pri_mem, {addr:#x}, "{case.name}_{i}_{k}.dat");')
        lines += [f"reg_write({reg}, {value:#x});" for reg, value in writes]
        lines.append(f"intr_notify(PDP_{pdp_group}, op_{i});")
        lines.append(f"check_crc(op_{i}, pri_mem, {program.output[0]:#x}, {program.output[1]:#x}, "
                     f"{zlib.crc32(outs[i]):#010x});")
    cfg = out / f"{case.name}.cfg"
    cfg.write_text("\n".join(lines) + "\n")
    return cfg, refusal
