"""What stays in the convolution buffer (CBUF) from one convolution to the next, as NVDLA's RTL keeps it.

A convolution engine run by itself (``golden.engines.conv``) is a pure function of registers and memory. The
hardware is not: CDMA writes data and weights into the CBUF as two **ring buffers** (the data banks and the
weight banks) and CSC reads them back from its own read pointers, and neither side forgets between
operations. The rules, from nv_small's RTL (``NV_NVDLA_CDMA_dc.v``/``_wt.v``/``_status.v``,
``NV_NVDLA_CSC_sg.v``/``_dl.v``/``_wl.v``; written out in ``docs/golden-semantics.md``):

* **Bank split.** CDMA and CSC compare ``D_BANK`` with the previous convolution's. Only a change goes
  through the pending/flush handshake that resets both rings (write and read pointers to 0, nothing held).
  After reset the "previous" split is all ones, which no legal split equals, so the first convolution
  always starts clean.
* **Weights.** CDMA writes ``WEIGHT_BYTES`` (whole entries) at its write pointer. CSC reads the weights of
  its kernels as one byte stream from its read pointer and, unless ``SKIP_WEIGHT_RLS``, releases the
  entries that stream spans. Entries fetched but not consumed (``WEIGHT_BYTES`` larger than the kernels'
  bytes rounded up to an entry) stay in the ring, so the next convolution with the same split reads them
  as its first weights: its whole weight stream is shifted. With ``SKIP_WEIGHT_RLS`` the weights stay for
  the next operation: with ``WEIGHT_REUSE`` it fetches nothing and reads them; without, CSC releases them
  when it starts.
* **Data.** CDMA writes ``H x D_ENTRY_PER_SLICE`` entries. At the end CSC releases ``RLS_SLICES + 1`` slices
  (none with ``SKIP_DATA_RLS``); the slices left are released when the next convolution starts unless it
  sets ``DATA_REUSE`` in the same (direct-convolution) mode. ``DATA_REUSE`` after ``SKIP_DATA_RLS`` fetches
  nothing and reads the resident cube.

What this module does with them: a program that hardware computes as plain convolution passes unchanged;
weight or data reuse is computed from what is resident (the earlier operation's fetch, not today's memory);
everything else that would make CSC read something other than this operation's fetch (stale weight entries,
an over-release, a reused cube of another shape, reuse of slices left without ``SKIP_DATA_RLS``) is refused
with a ``ConfigError`` naming the register and the earlier operation. Refusing rather than computing the
shifted result is deliberate: when operations overlap, whether CSC reads a stale or a freshly written entry
depends on timing.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

import numpy as np

from golden.config import HwConfig
from golden.dma import dma_address, ram_space
from golden.engines.conv_datapath import cbuf_geometry
from golden.errors import UnsupportedError
from golden.memory import Memory
from golden.regs import RegView


@dataclass
class _Weights:
    """The weight ring seen from CSC's read pointer: entries held (fetched, not released)."""

    held: int = 0
    #: The bytes of the held entries when an operation kept them for reuse (SKIP_WEIGHT_RLS), else None.
    content: bytes | None = None
    #: Entries the last operation consumed while skipping their release (released when the next one starts
    #: without WEIGHT_REUSE), and whether it skipped.
    skipped: int = 0
    skip: bool = False


@dataclass
class _Data:
    """The data ring from CSC's read pointer: the slices held after the last operation."""

    #: Slices left after the last operation (negative: it released more than it had).
    left: int = 0
    skip: bool = False
    #: The last operation's input cube as CSC read it (C, H, W) and the geometry it was written with;
    #: None when its content is not modelled (pixel input, Winograd, batches, fp16).
    cube: np.ndarray | None = None
    shape: tuple[int, int, int, int] | None = None  # (C, H, W, entries per slice)
    mode: str = ""


@dataclass
class ConvCbuf:
    """One convolution's view of the CBUF, decided when it starts (``CbufState.begin``)."""

    #: Weight bytes CSC reads instead of the fetch from memory (WEIGHT_REUSE), or None.
    weights: bytes | None = None
    #: Input cube (C, H, W) CSC reads instead of the fetch (DATA_REUSE), or None.
    data: np.ndarray | None = None
    #: What ``end`` needs.
    fetched: bytes | None = None
    fetched_entries: int = 0
    consumed_entries: int = 0
    slices: int = 0
    rls_slices: int = 0
    skip_data: bool = False
    skip_weight: bool = False
    mode: str = ""
    shape: tuple[int, int, int, int] | None = None
    #: Set by the engine: the input cube it computed on (direct feature convolution only).
    cube: np.ndarray | None = None


@dataclass
class CbufState:
    """CBUF bookkeeping of one ``Dla``: what the previous convolution left behind."""

    hw: HwConfig
    split: tuple[int, int] | None = None
    #: Label of the operation that last changed the state, for error messages.
    last_op: str = ""
    weights: _Weights = field(default_factory=_Weights)
    data: _Data = field(default_factory=_Data)

    # ---- start of an operation -------------------------------------------------------------------
    def begin(self, regs: Mapping[str, RegView], mem: Memory) -> ConvCbuf:
        """Apply the start-of-operation rules. Raises ConfigError for programs whose result hardware would
        not compute from this operation's own fetch (or from what an earlier one kept for reuse)."""
        cdma, csc = regs["CDMA"], regs["CSC"]
        entry = cbuf_geometry(self.hw)[0]
        split = (cdma.D_BANK.DATA_BANK, cdma.D_BANK.WEIGHT_BANK)
        if split != self.split:  # pending/flush handshake: both rings start empty
            self.split, self.weights, self.data = split, _Weights(), _Data()
        misc = cdma.D_MISC_CFG
        plan = ConvCbuf(
            skip_data=bool(misc.SKIP_DATA_RLS), skip_weight=bool(misc.SKIP_WEIGHT_RLS), mode=_mode(regs),
            slices=csc.D_DATAIN_SIZE_EXT_0.DATAIN_HEIGHT_EXT + 1, rls_slices=csc.D_RELEASE.RLS_SLICES + 1,
        )
        for unit in ("CSC",):
            m = regs[unit].D_MISC_CFG
            for name in ("DATA_REUSE", "WEIGHT_REUSE", "SKIP_DATA_RLS", "SKIP_WEIGHT_RLS"):
                if getattr(m, name) != getattr(misc, name):
                    raise m.fail(name, f"CSC says {getattr(m, name)}, CDMA {getattr(misc, name)}: the two would "
                                 "disagree on what stays in the CBUF")
        self._begin_weights(regs, plan, entry, mem)
        self._begin_data(regs, plan)
        return plan

    def _begin_weights(self, regs: Mapping[str, RegView], plan: ConvCbuf, entry: int, mem: Memory) -> None:
        cdma = regs["CDMA"]
        ring = self.weights
        used = (cdma.D_WEIGHT_SIZE_1.WEIGHT_KERNEL + 1) * (cdma.D_WEIGHT_SIZE_0.BYTE_PER_KERNEL + 1)
        compressed = bool(cdma.D_WEIGHT_FORMAT.WEIGHT_FORMAT)
        # CSC consumes the entries it reads: the kernels' bytes, or, compressed, the whole sparse stream (which
        # golden.engines.conv_wcomp requires WEIGHT_BYTES to span exactly)
        plan.consumed_entries = -(-used // entry) if not compressed else cdma.D_WEIGHT_BYTES.WEIGHT_BYTES // entry
        if cdma.D_MISC_CFG.WEIGHT_REUSE and ring.skip:  # CDMA fetches nothing; CSC reads what was kept
            if ring.content is None or compressed:
                raise UnsupportedError("CSC", "weight reuse of compressed weights is not modelled")
            if ring.held < plan.consumed_entries:
                raise cdma.D_MISC_CFG.fail(
                    "WEIGHT_REUSE", f"{plan.consumed_entries} weight entries needed but {self.last_op} kept "
                    f"{ring.held}: CSC would wait for weights no one fetches")
            plan.weights = ring.content[:used]
            return
        if ring.skip:  # kept weights not reused: CSC releases them as it starts
            ring.held -= ring.skipped
            ring.skip, ring.skipped, ring.content = False, 0, None
        if ring.held:
            raise cdma.D_BANK.fail(
                "WEIGHT_BANK", f"{ring.held} weight entries {self.last_op} fetched but did not consume (its "
                f"D_WEIGHT_BYTES exceeds its kernels' bytes rounded up to {entry}-byte entries) are still in "
                f"the weight banks; with the same bank split CSC would read them as this operation's first "
                f"weights; fetch exactly the entries the kernels span, or change D_BANK")
        plan.fetched_entries = cdma.D_WEIGHT_BYTES.WEIGHT_BYTES // entry
        if plan.skip_weight and not compressed:  # kept for reuse: remember what CDMA wrote
            space = ram_space(self.hw, mem, cdma.D_WEIGHT_RAM_TYPE, "WEIGHT_RAM_TYPE")
            plan.fetched = space.read(dma_address(self.hw, cdma, "D_WEIGHT_ADDR"), plan.fetched_entries * entry).tobytes()

    def _begin_data(self, regs: Mapping[str, RegView], plan: ConvCbuf) -> None:
        cdma, csc = regs["CDMA"], regs["CSC"]
        ring = self.data
        reuse = bool(cdma.D_MISC_CFG.DATA_REUSE) and plan.mode == ring.mode
        if reuse and plan.mode != "direct" and (ring.skip or ring.left):
            raise UnsupportedError("CDMA", f"data reuse in {plan.mode} mode is not modelled")
        size0, size1 = cdma.D_DATAIN_SIZE_0, cdma.D_DATAIN_SIZE_1
        plan.shape = (size1.DATAIN_CHANNEL + 1, size0.DATAIN_HEIGHT + 1, size0.DATAIN_WIDTH + 1,
                      cdma.D_ENTRY_PER_SLICE.ENTRIES + 1)
        if ring.left < 0:
            raise csc.D_RELEASE.fail(
                "RLS_SLICES", f"{self.last_op} released {-ring.left} more input slice(s) than it held "
                f"(CSC.D_RELEASE.RLS_SLICES + 1 > its height): with the same bank split CSC's data pointer "
                f"is ahead of CDMA's and this operation would read the wrong entries; write RLS_SLICES = "
                f"height - 1 there, or change D_BANK")
        if reuse and ring.skip:  # CDMA fetches nothing; CSC reads the resident slices
            if ring.cube is None or ring.shape is None:
                raise UnsupportedError("CDMA", f"data reuse of {self.last_op}'s input is not modelled for its mode")
            c, h, w, eps = plan.shape
            rc, rh, rw, reps = ring.shape
            if (c, w, eps) != (rc, rw, reps) or h > ring.left:
                raise cdma.D_MISC_CFG.fail(
                    "DATA_REUSE", f"reuses {self.last_op}'s {rw}x{rh}x{rc} input ({reps} entries per slice, "
                    f"{ring.left} slices held) as a {w}x{h}x{c} cube ({eps} entries per slice)")
            plan.data = ring.cube[:, :h]
            return
        if reuse and ring.left:
            raise cdma.D_MISC_CFG.fail(
                "DATA_REUSE", f"{ring.left} slice(s) {self.last_op} left without SKIP_DATA_RLS would be read "
                "before this operation's fetch; mixing resident and fetched slices is not modelled")
        self.data = _Data()

    # ---- end of an operation ----------------------------------------------------------------------
    def end(self, plan: ConvCbuf, label: str) -> None:
        """Apply the end-of-operation releases; ``plan.cube`` is the input the engine computed on."""
        ring = self.weights
        if plan.weights is None:  # fetched this time
            ring.held, ring.content = plan.fetched_entries, plan.fetched
        if plan.skip_weight:
            ring.skip, ring.skipped = True, plan.consumed_entries
        else:
            ring.held -= plan.consumed_entries
            ring.skip, ring.skipped, ring.content = False, 0, None
        data = self.data
        cube = plan.data if plan.data is not None else plan.cube
        if plan.data is None:
            data.cube, data.shape = cube, plan.shape
            data.left = plan.slices
        data.mode, data.skip = plan.mode, plan.skip_data
        if not plan.skip_data:
            data.left -= plan.rls_slices
            if data.left > 0 and data.cube is not None:
                data.cube = data.cube[:, data.cube.shape[1] - data.left:]
        self.last_op = label


def _mode(regs: Mapping[str, RegView]) -> str:
    """CDMA's data path: direct (feature) convolution, pixel input or Winograd; reuse needs the same one."""
    cdma = regs["CDMA"]
    if cdma.D_DATAIN_FORMAT.DATAIN_FORMAT:
        return "image"
    if cdma.D_MISC_CFG.CONV_MODE:
        return "winograd"
    if cdma.D_BATCH_NUMBER.BATCHES:
        return "batch"
    return "direct"
