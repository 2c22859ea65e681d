"""NVDLA memory layouts of feature cubes (NVDLA_NOTES §3).

Channels are split into surfaces of ``atom`` elements. Element (c, h, w) lives at
``(c // atom) * surf_stride + h * line_stride + w * atom * bpe + (c % atom) * bpe``. The last surface is
padded to ``atom`` lanes; engines read and write all lanes, so cubes here always carry
``surfaces * atom`` channels.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from golden.budget import check_size
from golden.memory import AddressSpace


@dataclass(frozen=True)
class CubeLayout:
    """Geometry of one feature cube in memory."""

    channels: int
    height: int
    width: int
    line_stride: int
    surf_stride: int
    atom: int  # elements per surface
    bpe: int = 1  # bytes per element

    @property
    def surfaces(self) -> int:
        return -(-self.channels // self.atom)

    @property
    def padded_channels(self) -> int:
        return self.surfaces * self.atom

    def byte_offsets(self) -> np.ndarray:
        """Offsets of every byte, shape (padded C, H, W, bpe), little-endian bytes last. Registers declare
        the cube, so its int64 offsets and values are checked against the memory budget first: a trace
        programming a 8192x8192x8192 cube ends in one line, not in the OOM killer."""
        elements = self.padded_channels * self.height * self.width
        check_size(f"feature cube {self.padded_channels}x{self.height}x{self.width} as int64 offsets and values",
                   elements * (self.bpe + 1) * 8)
        c = np.arange(self.padded_channels, dtype=np.int64)
        h = np.arange(self.height, dtype=np.int64)
        w = np.arange(self.width, dtype=np.int64)
        b = np.arange(self.bpe, dtype=np.int64)
        return (
            ((c // self.atom) * self.surf_stride + (c % self.atom) * self.bpe)[:, None, None, None]
            + (h * self.line_stride)[None, :, None, None]
            + (w * self.atom * self.bpe)[None, None, :, None]
            + b[None, None, None, :]
        )

    def span(self) -> int:
        """Bytes from the base address to one past the last byte of the cube."""
        if self.channels == 0 or self.height == 0 or self.width == 0:
            return 0
        return (
            (self.surfaces - 1) * self.surf_stride
            + (self.height - 1) * self.line_stride
            + self.width * self.atom * self.bpe
        )


#: Widest cube (bytes from base to its end) moved through one contiguous span and a strided view of it.
_VIEW_SPAN_LIMIT = 64 << 20


def _span_view(layout: CubeLayout, span: np.ndarray) -> np.ndarray | None:
    """The cube's bytes as a strided (padded C, H, W, bpe) view of ``span`` (its bytes from the base address),
    or None when elements could overlap (strides shorter than what they step over), where only the offset
    arrays define which write lands last."""
    L = layout
    pixel = L.atom * L.bpe
    if (L.height > 1 and L.line_stride < L.width * pixel) or \
            (L.surfaces > 1 and L.surf_stride < (L.height - 1) * L.line_stride + L.width * pixel) or \
            L.line_stride < 0 or L.surf_stride < 0:
        return None
    view = np.lib.stride_tricks.as_strided(
        span, shape=(L.surfaces, L.atom, L.height, L.width, L.bpe),
        strides=(L.surf_stride, L.bpe, L.line_stride, pixel, 1))
    return view


def cube_bytes(space: AddressSpace, base: int, layout: CubeLayout) -> np.ndarray:
    """(padded C, H, W, bpe) bytes of the cube: one contiguous read and a strided view when the layout allows
    (an op's cube is a handful of numpy calls, not an int64 offset per byte), else a gather."""
    span = layout.span()
    if 0 < span <= _VIEW_SPAN_LIMIT and type(space) is AddressSpace:  # (a counting space counts cube bytes)
        buf = space.read(base, span)
        view = _span_view(layout, buf)
        if view is not None:
            return view.reshape(layout.padded_channels, layout.height, layout.width, layout.bpe)
    return space.gather(base, layout.byte_offsets())


def read_cube(space: AddressSpace, base: int, layout: CubeLayout, signed: bool = True) -> np.ndarray:
    """The cube as int64 (padded C, H, W), including the padding lanes of the last surface."""
    raw = cube_bytes(space, base, layout)
    if layout.bpe == 1:
        vals = raw[..., 0].view(np.int8) if signed else raw[..., 0]
        return vals.astype(np.int64)
    dt = {2: "<i2", 4: "<i4"}[layout.bpe] if signed else {2: "<u2", 4: "<u4"}[layout.bpe]
    return np.ascontiguousarray(raw).view(dt)[..., 0].astype(np.int64)


def write_cube(space: AddressSpace, base: int, layout: CubeLayout, data: np.ndarray) -> None:
    """Write (padded C, H, W) values, truncated to ``bpe`` bytes each (two's complement)."""
    if data.shape != (layout.padded_channels, layout.height, layout.width):
        raise ValueError(f"cube shape {data.shape} does not match layout {layout}")
    dt = {1: "<i1", 2: "<i2", 4: "<i4"}[layout.bpe]
    raw = np.ascontiguousarray(data.astype(np.int64).astype(dt)).view(np.uint8).reshape(data.shape + (layout.bpe,))
    span = layout.span()
    if 0 < span <= _VIEW_SPAN_LIMIT and type(space) is AddressSpace:
        buf = space.read(base, span)  # (what ``scatter`` does: the bytes between lines are written back as read)
        view = _span_view(layout, buf)
        if view is not None:
            view[...] = raw.reshape(view.shape)
            space.write(base, buf)
            return
    space.scatter(base, layout.byte_offsets(), raw)
