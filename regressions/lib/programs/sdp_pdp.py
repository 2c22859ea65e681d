"""SDP -> PDP on the fly as one register program: SDP reads a cube (and its X1/X2 operands) from memory and,
with ``D_FEATURE_MODE_CFG.OUTPUT_DST=PDP``, streams its result into the PDP core (``D_OPERATION_MODE_CFG.
FLYING_MODE=ON_FLYING``), which pools it and writes the output; PDP_RDMA stays idle. PDP is enabled before SDP,
the firmware's order (the consumer is armed before its producer starts), and the program waits for PDP's
interrupt. Built from ``programs.program_sdp`` and the compiler's ``emit_pdp``, so the writes are exactly what
those emit, re-targeted.
"""
from __future__ import annotations

from compiler.codegen.pdp import emit_pdp
from golden.program import RegProgram
from compiler.hwparams import PdpParams
from golden.config import HwConfig
from golden.regs import UNITS
from regressions.lib.programs import DST_BASE, PoolLayer, LayerTest, SdpLayer, packed_cube, program_sdp

#: Where SDP's own DMA would write were it not on the fly: away from the output, so a stray write is not
#: mistaken for PDP's result (and shows up in neither CRC).
SDP_DST_BASE = 0x8600_0000


def _set(name_value: tuple[str, int], unit: str, reg: str, **fields: int) -> tuple[str, int]:
    """``name_value`` with ``fields`` of UNIT.REG overwritten (other bits kept)."""
    name, value = name_value
    register = UNITS[unit].register(reg)
    if name != register.full_name:
        return name_value
    for field_name, v in fields.items():
        f = register.field(field_name)
        value = (value & ~f.mask) | f.encode(v)
    return name, value


def program_sdp_pdp(hw: HwConfig, sdp: SdpLayer, pool: PoolLayer) -> LayerTest:
    """``sdp`` then ``pool`` (whose ``x`` only gives the shape, that of ``sdp.x``) on the fly; output: the
    pooled cube at ``DST_BASE``."""
    atom = hw.atom_elements()
    c, h, w = sdp.x.shape
    assert pool.x.shape == sdp.x.shape, (pool.x.shape, sdp.x.shape)
    oh, ow = pool.out_hw()
    (kh, kw) = pool.kernel
    first = program_sdp(hw, sdp)  # memory image and SDP/SDP_RDMA writes, enables last
    sdp_dst = packed_cube(SDP_DST_BASE, c, h, w, atom)
    sdp_writes = []
    for nv in first.writes:
        nv = _set(nv, "SDP", "D_FEATURE_MODE_CFG", OUTPUT_DST=1)
        if nv[0] == UNITS["SDP"].register("D_DST_BASE_ADDR_LOW").full_name:
            nv = (nv[0], sdp_dst.loc & 0xFFFFFFFF)
        sdp_writes.append(nv)
    dst = packed_cube(DST_BASE, c, oh, ow, atom)
    prm = PdpParams(pool.method, pool.kernel, pool.stride, pool.pad, tuple(pool.pad_values),
                    pool.recip_w if pool.recip_w is not None else 0x10000 // kw,
                    pool.recip_h if pool.recip_h is not None else 0x10000 // kh)
    regs = RegProgram(hw)
    emit_pdp(regs, packed_cube(SDP_DST_BASE, c, h, w, atom), dst, prm, crop_rows=False)  # SDP sends every row
    pdp_writes = [_set(nv, "PDP", "D_OPERATION_MODE_CFG", FLYING_MODE=0) for nv in regs.absolute()
                  if not nv[0].startswith("NVDLA_PDP_RDMA.")]
    p = LayerTest(RegProgram.of(hw, pdp_writes + sdp_writes), memory=first.memory, intr="PDP_0")
    p.output = (DST_BASE, -(-c // atom) * dst.surface_stride)
    return p
