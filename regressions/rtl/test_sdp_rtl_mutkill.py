"""Directed SDP layers on our RTL against the golden model (Icarus, tb/vectors/tb_nvdla.v), for the corners the
random layers of ``test_sdp_rtl.py`` almost never reach and the RTL mutation campaign (``make mutate TARGET=rtl``)
showed unchecked: each value that saturates inside the X stages and the output converter, read back exactly.

* X operand saturation: ``op16 << ALU_SHIFT`` beyond 32 bits clamps to 0x7fffffff / 0x80000000; a SUM with
  it, no truncation and an output CVT offset that brings the sum back into int8 range shows the clamp value
  to the unit;
* X truncation saturation: a product beyond 32 bits after MUL_SHIFT clamps the same way;
* the output converter's saturation count (D_PERF_OUT_SATURATION): cmod counts an element when the floor of
  the shifted value is more than 1 away from the 17-bit saturated one, so values at 65535 + {0..4} and
  -65536 - {0..4} find the threshold.

Every element and the saturation counter are compared with golden after each layer (perf counting on).
"""
from __future__ import annotations

import random
import shutil

import numpy as np
import pytest

from golden import get_config
from regressions.lib.golden_verdict import GoldenVectors
from regressions.lib.programs import SdpLayer, program_sdp
from regressions.lib.reference.sdp import SdpParams, SdpXParams
from regressions.rtl.test_sdp_rtl import _simulate, place
from golden.dla import Dla

pytestmark = pytest.mark.skipif(shutil.which("iverilog") is None, reason="iverilog not installed")

BYPASS = SdpXParams(bypass=True)


def _x(values: list[int], c: int) -> np.ndarray:
    """A (c, 1, len/c) cube holding ``values`` (the input of one layer)."""
    w = -(-len(values) // c)
    padded = values + [0] * (c * w - len(values))
    return np.array(padded, dtype=np.int64).reshape(c, 1, w)


def sum_with(op: int, shift: int, offset: int, values: list[int], c: int = 8, **mul) -> SdpLayer:
    """X1 = SUM with a register operand ``op << shift``, no truncation; CVT subtracts ``offset``."""
    x1 = SdpXParams(bypass=False, alu_bypass=False, alu_algo=2, alu_operand=op, alu_shift=shift,
                    mul_bypass=not mul, mul_operand=mul.get("mul_operand", 0), mul_shift=mul.get("mul_shift", 0))
    return SdpLayer(x=_x(values, c), operand_bytes=2,
                    params=SdpParams(x1=x1, x2=BYPASS, cvt_offset=offset, cvt_scale=1, cvt_shift=0))


def layers() -> list[SdpLayer]:
    near = list(range(-128, 128, 17)) + [-3, -2, -1, 0, 1, 2, 3]
    return [
        # op 32767 << 20 clamps to 0x7fffffff; x <= 0 keeps x + 0x7fffffff exact, CVT brings it to int8
        sum_with(32767, 20, 0x7FFF_FF80, near),
        # op -32768 << 20 clamps to 0x80000000; x >= 0 keeps x - 2**31 exact
        sum_with(-32768, 20, -(1 << 31), near),
        # MIN / MAX against the clamped operand: the operand itself when it wins
        SdpLayer(x=_x(near, 8), operand_bytes=2, params=SdpParams(
            x1=SdpXParams(bypass=False, alu_bypass=False, alu_algo=1, alu_operand=32767, alu_shift=33),
            x2=BYPASS, cvt_offset=0x7FFF_FF80, cvt_scale=1, cvt_shift=0)),
        SdpLayer(x=_x(near, 8), operand_bytes=2, params=SdpParams(
            x1=SdpXParams(bypass=False, alu_bypass=False, alu_algo=0, alu_operand=-32768, alu_shift=40),
            x2=BYPASS, cvt_offset=-(1 << 31), cvt_scale=1, cvt_shift=0)),
        # the product clamps after truncation: (x + 2**30) * 32767 >> 2 is far beyond 32 bits
        sum_with(16384, 16, 0x7FFF_FF80, near, mul_operand=32767, mul_shift=2),
        sum_with(-16384, 16, -(1 << 31), near, mul_operand=32767, mul_shift=2),
        # output saturation counting around +65535 and -65536 (x + 65534 and x - 65536)
        sum_with(32767, 1, 0, list(range(-3, 9))),
        sum_with(-32768, 1, 0, list(range(-8, 4))),
    ]


def test_sdp_saturation_corners_match_golden(tmp_path) -> None:
    hw = get_config("nv_small")
    rng = random.Random(7)
    golden = GoldenVectors(hw)
    vec = golden.vec
    status_addr, _ = golden.dla.map.resolve("GLB.S_INTR_STATUS")
    sat_addr, _ = golden.dla.map.resolve("SDP.D_PERF_OUT_SATURATION")
    notes = []
    for i, layer in enumerate(layers()):
        program_sdp(hw, layer).run(Dla(hw))  # golden accepts it
        placed = place(hw, layer, i % 2, rng, perf_sat=True)
        for addr, data in placed.image:
            golden.load(addr, data)
        golden.play(placed.program.writes)
        assert golden.dla.read_reg(status_addr), f"layer {i}: golden did not complete"
        vec.wait_intr(1)
        status = golden.expect_reg(status_addr)
        saturated = golden.expect_reg(sat_addr)
        golden.write(status_addr, status, nposted=True)
        vec.wait_intr(0)
        golden.expect_memory(*placed.dst)
        notes.append(f"layer {i}: {saturated} saturated")
    counts = [int(n.split()[2]) for n in notes]
    assert counts[6] > 0 and counts[7] > 0, notes  # the counting layers do saturate
    _simulate(tmp_path, hw, vec, 1, notes)
