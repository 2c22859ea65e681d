"""Batched direct convolution (``D_BATCH_NUMBER.BATCHES`` > 0) and the SDP's batched write.

What the hardware does (nvdlav1 cmod, the only batch-capable design: ``cmod/cdma/NV_NVDLA_cdma.cpp``
``DirectConvData{Request,Response}SequencerCommon``, ``cmod/csc/NV_NVDLA_csc.cpp``
``SendDataToMacSequencerDirectConvCommon``, ``cmod/cacc/NV_NVDLA_cacc.cpp`` ``SendToSDPCommon``,
``cmod/sdp/NV_NVDLA_sdp.cpp`` ``SdpDataOperationBatch`` / ``WdmaSequenceBatch``):

* **CDMA** fetches batch b of the input cube at ``DAIN_ADDR + b * BATCH_STRIDE`` with the same line and
  surface strides, interleaving the batches' lines in the CBUF; the whole batched input must fit the data
  banks (``H * batches`` slices). ``BATCH_STRIDE`` below ``SURF_STRIDE * surfaces`` is a cmod FAIL.
* **CSC/CMAC** run every output atom for each batch in turn with the same weights: batch b's result is the
  unbatched convolution of batch b's cube (nothing mixes batches).
* **CACC** hands SDP, for each group of one or two output atoms, that group for every batch. It pairs two
  atoms when the output line starts 64-byte aligned at *its* ``D_DATAOUT_ADDR``/``D_LINE_STRIDE``; SDP pairs
  them by the same rule at *its* ``D_DST_*`` addresses. When the two disagree the cmod assigns atoms to the
  wrong batch; the model refuses such programs (UnsupportedError) instead of reproducing the scramble.
* **SDP** (``D_FEATURE_MODE_CFG.BATCH_NUMBER`` = BATCHES) applies the same X1/X2/Y/CVT to every batch (MEM
  operands, per kernel or per element, are read once and shared by all batches) and writes batch b's
  cube at ``D_DST_BASE_ADDR + b * D_DST_BATCH_STRIDE``, same line/surface strides. Batched output goes to
  memory only (cmod assert on ``OUTPUT_DST``); EW EQL mode is asserted off. The cmod's standalone batch
  path (SDP reading its input from memory) re-reads batch 0's lines for every batch and has no batch
  stride, a test hack, so batched SDP is modelled behind CACC only.

So the model runs the unbatched engines once per batch on register views that point at that batch, and
checks the batch-only rules here. Batch mode exists where ``HwConfig.batch`` (nv_full: up to 32).
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from golden.dma import dma_address, dma_bytes
from golden.engines import OpContext
from golden.engines.conv_datapath import cbuf_geometry
from golden.errors import UnsupportedError
from golden.regs import RegView

#: Units whose D_BATCH_NUMBER.BATCHES describe the batch count of the conv pipeline.
BATCH_UNITS = ("CDMA", "CSC", "CACC")
#: Bytes of the SDP write transaction the CACC/SDP atom pairing is aligned to.
_PAIR_ALIGN = 64
#: EW ALU encoding of EQL (NVDLA_SDP.rdl D_DP_EW_CFG.EW_ALU_ALGO).
_EW_EQL = 3
#: Element bytes of a D_MISC_CFG precision code (int8, int16, fp16).
_BPE = {0: 1, 1: 2, 2: 2}

SingleRun = Callable[[OpContext], "np.ndarray | None"]


def with_words(view: RegView, **words: int) -> RegView:
    """A copy of ``view`` with whole register words replaced (``D_BATCH_NUMBER=0``)."""
    values = {reg.offset: view.word(name) for name, reg in view.unit.by_name.items()}
    for name, word in words.items():
        values[view.unit.register(name).offset] = word & 0xFFFFFFFF
    return RegView(view.unit, values)


def _moved(view: RegView, name: str, suffix: str, addr: int) -> dict[str, int]:
    """Words of an address register pair (``<name>_LOW<suffix>``/``_HIGH``) holding byte address ``addr``."""
    return {f"{name}_LOW{suffix}": addr & 0xFFFFFFFF, f"{name}_HIGH{suffix}": addr >> 32}


def _sum_status(into: dict[tuple[str, str], int], status: dict[tuple[str, str], int]) -> None:
    for key, value in status.items():
        into[key] = into.get(key, 0) + value


def batch_count(regs: dict[str, RegView]) -> int:
    """Batches the conv units agree on (ConfigError naming the first that differs from the CDMA)."""
    n = regs["CDMA"].D_BATCH_NUMBER.BATCHES
    for unit in BATCH_UNITS[1:]:
        reg = regs[unit].D_BATCH_NUMBER
        if reg.BATCHES != n:
            raise reg.fail("BATCHES", f"{reg.BATCHES} differs from CDMA.D_BATCH_NUMBER.BATCHES={n}")
    return n + 1


def run(ctx: OpContext, single: SingleRun) -> np.ndarray:
    """The batched convolution: ``single`` (the unbatched conv engine) once per batch; returns the CACC cubes
    stacked as (batches, C_pad, OH, OW) for SDP."""
    hw, regs = ctx.hw, dict(ctx.regs)
    unit = next(u for u in BATCH_UNITS if regs[u].D_BATCH_NUMBER.BATCHES)
    if not hw.batch:
        raise UnsupportedError(unit, f"{unit}.D_BATCH_NUMBER.BATCHES={regs[unit].D_BATCH_NUMBER.BATCHES}: "
                               f"{hw.name} has no batch mode")
    n = batch_count(regs)
    cdma = regs["CDMA"]
    for u in BATCH_UNITS + ("CMAC_A", "CMAC_B"):
        if regs[u].D_MISC_CFG.CONV_MODE:
            raise UnsupportedError(u, "batched Winograd convolution is not modelled")
    if n > hw.max_batch:
        raise cdma.D_BATCH_NUMBER.fail("BATCHES", f"{n} batches exceed {hw.name}'s {hw.max_batch}")
    if "SDP" in regs and regs["SDP"].D_FEATURE_MODE_CFG.BATCH_NUMBER + 1 != n:
        mode = regs["SDP"].D_FEATURE_MODE_CFG
        raise mode.fail("BATCH_NUMBER", f"{mode.BATCH_NUMBER} but the conv pipeline delivers {n} batches "
                        f"(BATCHES={n - 1})")

    bpe = _BPE.get(cdma.D_MISC_CFG.IN_PRECISION, 1)
    atom = hw.memory_atomic_size // bpe
    channels = cdma.D_DATAIN_SIZE_1.DATAIN_CHANNEL + 1
    height = cdma.D_DATAIN_SIZE_0.DATAIN_HEIGHT + 1
    surf = dma_bytes(hw, cdma.D_SURF_STRIDE.SURF_STRIDE)
    stride = dma_bytes(hw, cdma.D_BATCH_STRIDE.BATCH_STRIDE)
    surfaces = -(-channels // atom)
    if stride < surf * surfaces:
        raise cdma.D_BATCH_STRIDE.fail("BATCH_STRIDE", f"{stride} is below SURF_STRIDE * surfaces = "
                                       f"{surf * surfaces} (cmod FAIL)")
    eps = cdma.D_ENTRY_PER_SLICE.ENTRIES + 1
    bank = cdma.D_BANK
    depth = cbuf_geometry(hw, bpe)[1]
    if n * height * eps > (bank.DATA_BANK + 1) * depth:
        raise bank.fail("DATA_BANK", f"{n} batches of {height} lines need {n * height * eps} CBUF entries, "
                        f"{bank.DATA_BANK + 1} banks hold {(bank.DATA_BANK + 1) * depth}")

    base = dma_address(hw, cdma, "D_DAIN_ADDR", "_0")
    cleared = {u: with_words(regs[u], D_BATCH_NUMBER=0) for u in BATCH_UNITS}
    outs = []
    status: dict[tuple[str, str], int] = {}
    for b in range(n):
        views = dict(regs, **cleared)
        views["CDMA"] = with_words(cleared["CDMA"], **_moved(cdma, "D_DAIN_ADDR", "_0", base + b * stride))
        sub = OpContext(hw=hw, mem=ctx.mem, regs=views, lut=ctx.lut)
        outs.append(single(sub))
        _sum_status(status, sub.status)
    for (u, reg), value in status.items():
        ctx.report(u, reg, value)
    return np.stack(outs)


# ---- SDP -------------------------------------------------------------------------------------------------
def _check_pairing(ctx: OpContext, channels: int, height: int, width: int, atom_bytes: int) -> None:
    """CACC and SDP must group output atoms alike (see the module docstring)."""
    if width == 1 or "CACC" not in ctx.regs:
        return
    hw, sdp, cacc = ctx.hw, ctx.regs["SDP"], ctx.regs["CACC"]
    surfaces = -(-channels // (atom_bytes // (2 if sdp.D_DATA_FORMAT.OUT_PRECISION else 1)))
    s = np.arange(surfaces, dtype=np.int64)[:, None]
    h = np.arange(height, dtype=np.int64)[None, :]
    sdp_lines = (dma_address(hw, sdp, "D_DST_BASE_ADDR") + s * dma_bytes(hw, sdp.word("D_DST_SURFACE_STRIDE"))
                 + h * dma_bytes(hw, sdp.word("D_DST_LINE_STRIDE")))
    # CACC counts lines through all surfaces from its own base (``(atoms sent / batches) / width``).
    cacc_lines = (dma_bytes(hw, cacc.D_DATAOUT_ADDR.DATAOUT_ADDR)
                  + (s * height + h) * dma_bytes(hw, cacc.D_LINE_STRIDE.LINE_STRIDE))
    if np.any((sdp_lines % _PAIR_ALIGN == 0) != (cacc_lines % _PAIR_ALIGN == 0)):
        raise UnsupportedError("CACC", "CACC.D_DATAOUT_ADDR/D_LINE_STRIDE and SDP.D_DST_* differ in 64-byte line "
                               "alignment: the cmod pairs batched output atoms differently (batches get mixed)")


def _check_batches_apart(sdp: RegView, ctx: OpContext, n: int, channels: int, height: int, width: int,
                         atom_bytes: int, elements: int) -> None:
    """Lines of different batches must not overlap: the write order would decide the data."""
    hw = ctx.hw
    surfaces = -(-channels // elements)
    b = np.arange(n, dtype=np.int64)[:, None, None]
    s = np.arange(surfaces, dtype=np.int64)[None, :, None]
    h = np.arange(height, dtype=np.int64)[None, None, :]
    starts = np.sort((b * dma_bytes(hw, sdp.word("D_DST_BATCH_STRIDE"))
                      + s * dma_bytes(hw, sdp.word("D_DST_SURFACE_STRIDE"))
                      + h * dma_bytes(hw, sdp.word("D_DST_LINE_STRIDE"))).reshape(-1))
    if starts.size > 1 and int(np.min(np.diff(starts))) < width * atom_bytes:
        raise sdp.D_DST_BATCH_STRIDE.fail("DST_BATCH_STRIDE", f"{dma_bytes(hw, sdp.word('D_DST_BATCH_STRIDE'))} "
                                          f"makes the {n} batches' output lines overlap")


def sdp_batches(ctx: OpContext, single: SingleRun) -> None:
    """SDP with ``D_FEATURE_MODE_CFG.BATCH_NUMBER`` > 0: ``single`` (the unbatched SDP) once per batch of the
    (batches, C, H, W) cube CACC delivers, batch b written ``b * D_DST_BATCH_STRIDE`` further on."""
    hw, sdp = ctx.hw, ctx.regs["SDP"]
    mode = sdp.D_FEATURE_MODE_CFG
    n = mode.BATCH_NUMBER + 1
    if not hw.batch:
        raise UnsupportedError("SDP", f"SDP.D_FEATURE_MODE_CFG.BATCH_NUMBER={n - 1}: {hw.name} has no batch mode")
    if not mode.FLYING_MODE:
        raise UnsupportedError("SDP", "batched SDP reading its input from memory is not modelled (the cmod's "
                               "standalone batch path re-reads batch 0 and has no source batch stride)")
    if mode.WINOGRAD:
        raise UnsupportedError("SDP", "batched Winograd output is not modelled")
    if mode.OUTPUT_DST:
        raise mode.fail("OUTPUT_DST", "batched output goes to memory only (cmod assert)")
    ew = sdp.D_DP_EW_CFG
    if not ew.EW_BYPASS and not ew.EW_ALU_BYPASS and ew.EW_ALU_ALGO == _EW_EQL:
        raise ew.fail("EW_ALU_ALGO", "EQL compare mode writes no batches (cmod assert)")
    x = ctx.flying_input
    if x is None or np.ndim(x) != 4 or np.shape(x)[0] != n:
        got = "nothing" if x is None else f"a {np.shape(x)} cube"
        raise mode.fail("BATCH_NUMBER", f"{n - 1} ({n} batches) but CACC delivers {got}")
    width = sdp.D_DATA_CUBE_WIDTH.WIDTH + 1
    height = sdp.D_DATA_CUBE_HEIGHT.HEIGHT + 1
    channels = sdp.D_DATA_CUBE_CHANNEL.CHANNEL + 1
    out_bpe = 2 if sdp.D_DATA_FORMAT.OUT_PRECISION else 1
    atom_bytes = hw.memory_atomic_size
    _check_pairing(ctx, channels, height, width, atom_bytes)
    _check_batches_apart(sdp, ctx, n, channels, height, width, atom_bytes, atom_bytes // out_bpe)

    base = dma_address(hw, sdp, "D_DST_BASE_ADDR")
    stride = dma_bytes(hw, sdp.word("D_DST_BATCH_STRIDE"))
    batch_mask = sdp.unit.register("D_FEATURE_MODE_CFG").field("BATCH_NUMBER").mask
    cleared = with_words(sdp, D_FEATURE_MODE_CFG=int(mode) & ~batch_mask)
    status: dict[tuple[str, str], int] = {}
    for b in range(n):
        view = with_words(cleared, **_moved(sdp, "D_DST_BASE_ADDR", "", base + b * stride))
        sub = OpContext(hw=hw, mem=ctx.mem, regs=dict(ctx.regs, SDP=view), flying_input=np.asarray(x)[b],
                        lut=ctx.lut)
        single(sub)
        _sum_status(status, sub.status)
    for (u, reg), value in status.items():
        ctx.report(u, reg, value)
    return None
