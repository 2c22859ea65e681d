"""int16 and fp16 PDP / CDP (nv_full): the int8 emitters' programs in another precision.

PDP and CDP program the same registers in every precision except the data formats: ``D_DATA_FORMAT`` of
the core and RDMA units names the precision, and ``D_NAN_FLUSH_TO_ZERO`` is written before the enables.
Cubes carry 2-byte elements (their strides say so); fp16 pooling takes FP17 reciprocals and pad values.
"""
from __future__ import annotations

from typing import Sequence

from compiler.codegen.cdp import emit_cdp
from compiler.codegen.pdp import emit_pdp
from compiler.codegen.program import PRECISION_CODES, Cube
from compiler.hwparams import PdpParams
from golden.program import RegProgram, RegWrite
from golden.regs import UNITS

#: ``D_DATA_FORMAT`` encodings.
PRECISION = PRECISION_CODES
#: The firmware's 1/kernel reciprocals (``kmd/firmware/pdp.c``): 0.16 fixed point, and FP17 for fp16.
RECIP_INT = (0x10000, 0x8000, 0x5555, 0x4000, 0x3333, 0x2AAA, 0x2492, 0x2000)
RECIP_FP17 = (0x7C00, 0x7800, 0x7555, 0x7400, 0x7266, 0x7155, 0x7092, 0x7000)
#: (unit, register, field) of each data format a 16-bit PDP / CDP operation sets.
PDP_FORMATS = (("PDP", "D_DATA_FORMAT", "INPUT_DATA"), ("PDP_RDMA", "D_DATA_FORMAT", "INPUT_DATA"))
CDP_FORMATS = (("CDP", "D_DATA_FORMAT", "INPUT_DATA_TYPE"), ("CDP_RDMA", "D_DATA_FORMAT", "INPUT_DATA"))


def _in_precision(p: RegProgram, body: RegProgram, formats: Sequence[tuple[str, str, str]], dtype: str,
                  flush: str, nan_to_zero: bool) -> None:
    """Append ``body`` to ``p`` with each format register set to ``dtype`` and ``flush``'s
    D_NAN_FLUSH_TO_ZERO written before the first D_OP_ENABLE."""
    fmt = {(u, r): UNITS[u].register(r).encode(**{f: PRECISION[dtype]}) for u, r, f in formats}
    flushed = False
    for w in body.writes:
        if w.name == "D_OP_ENABLE" and not flushed:
            p.reg(flush, "D_NAN_FLUSH_TO_ZERO", int(nan_to_zero))
            flushed = True
        value = fmt.get((w.unit, w.name))
        p.writes.append(w if value is None else RegWrite(w.register, value, w.reloc))


def emit_pdp_wide(p: RegProgram, src: Cube, dst: Cube, prm: PdpParams, dtype: str, nan_to_zero: bool,
                  flying: bool = False) -> None:
    """A PDP operation from memory (or ``flying``: from SDP) in ``dtype`` ("int16" or "fp16")."""
    body = RegProgram(p.hw, strict=p.strict)
    emit_pdp(body, src, dst, prm, flying=flying)
    _in_precision(p, body, PDP_FORMATS, dtype, "PDP", nan_to_zero)


def emit_cdp_wide(p: RegProgram, src: Cube, dst: Cube, prm, dtype: str, nan_to_zero: bool) -> None:
    """A CDP (LRN) operation in ``dtype``; ``prm`` as ``emit_cdp`` reads it (LUT uploaded through
    S_LUT_ACCESS_*)."""
    body = RegProgram(p.hw, strict=p.strict)
    emit_cdp(body, src, dst, prm)
    _in_precision(p, body, CDP_FORMATS, dtype, "CDP", nan_to_zero)
