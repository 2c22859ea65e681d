"""Typed SDP post-ops: what lowering fuses behind a conv (or runs as a standalone ``dla.sdp``), in order.

The SDP datapath has fixed stages, so each post-op, once lowering fits it, records the stage it occupies in
``slot`` (``lower.SLOTS``: 0 X1 ALU+MUL, 1 X1 ReLU, 2 X2 ALU/MUL, 3 X2 ReLU/PReLU, 4 Y LUT; -1 not fitted
yet). ``quantize.sdp_params`` turns a chain into register values. ``dump_form`` keeps ``--dump-passes``
text as it was when post-ops were ``{"op": ...}`` dicts (slot hidden, as a private key was).
"""
from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, ClassVar, Literal

import numpy as np


@dataclass(frozen=True, eq=False)
class PostOp:
    """One stage of an SDP chain; ``eq=False`` because the per-channel fields are numpy arrays."""

    op: ClassVar[str]
    slot: int = field(default=-1, kw_only=True)

    def dump_form(self) -> dict[str, Any]:
        """The dump text's form: the op name, then the fields other than ``slot``."""
        return {"op": self.op, **{f.name: getattr(self, f.name) for f in fields(self) if f.name != "slot"}}


@dataclass(frozen=True, eq=False)
class Affine(PostOp):
    """y = x * scale[c] + bias[c] (conv bias, BatchNorm, Scale): X1 MUL and ALU."""

    op: ClassVar[str] = "affine"
    scale: np.ndarray
    bias: np.ndarray


@dataclass(frozen=True, eq=False)
class Relu(PostOp):
    """max(x, 0): X1 ReLU, or X2 ReLU after an eltwise. ``cap`` (ReLU6, Clip(0, cap)): min(x, cap) after
    it, on Y's ALU in fp16; int8/int16 networks take it from calibration (the tensor's range saturates there)."""

    op: ClassVar[str] = "relu"
    cap: float | None = None

    def dump_form(self) -> dict[str, Any]:
        form = super().dump_form()
        if self.cap is None:
            del form["cap"]  # dumps of uncapped ReLUs read as they always have
        return form


@dataclass(frozen=True, eq=False)
class Identity(PostOp):
    """An unbounded Clip: nothing to program, absorbed so the chain continues."""

    op: ClassVar[str] = "identity"


@dataclass(frozen=True, eq=False)
class PRelu(PostOp):
    """x < 0 ? x * slope[c] : x (PRelu, LeakyRelu): X2 MUL in PReLU mode."""

    op: ClassVar[str] = "prelu"
    slope: np.ndarray


@dataclass(frozen=True, eq=False)
class Eltwise(PostOp):
    """Element-wise with another int8 cube ``tensor``: add/max on X2 ALU, mul on X2 MUL."""

    op: ClassVar[str] = "eltwise"
    kind: Literal["add", "max", "mul"]
    tensor: str


@dataclass(frozen=True, eq=False)
class Lut(PostOp):
    """sigmoid or tanh through the SDP Y LUT (configs with one)."""

    op: ClassVar[str] = "lut"
    fn: Literal["sigmoid", "tanh"]


@dataclass
class Chain:
    """A post-op chain by datapath stage: the composed affine (None without one), X1's ReLU, X2's eltwise and
    activation, Y's LUT. What every precision's parameter builder reads."""

    scale: np.ndarray | None = None
    bias: np.ndarray | None = None
    relu1: bool = False
    eltwise: Eltwise | None = None
    act2: Relu | PRelu | None = None
    lut: Lut | None = None


def by_stage(post: list[PostOp]) -> Chain:
    """Decompose a fitted chain (affines compose: y = (x * g1 + b1) * g2 + b2)."""
    ch = Chain()
    for p in post:
        match p:
            case Affine(scale=scale, bias=bias):
                g, b = np.asarray(scale, dtype=np.float64), np.asarray(bias, dtype=np.float64)
                ch.scale, ch.bias = (g, b) if ch.scale is None else (ch.scale * g, ch.bias * g + b)
            case Relu(slot=1):
                ch.relu1 = True
            case Relu() | PRelu():
                ch.act2 = p
            case Eltwise():
                ch.eltwise = p
            case Lut():
                ch.lut = p
    return ch
