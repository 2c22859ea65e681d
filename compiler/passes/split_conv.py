"""CBUF-aware splitting of convolutions: by output rows (input bands) and by kernel groups.

Direct convolution holds its whole input (band) in the CBUF data banks and its kernels in the weight
banks (NOTES §3). A conv that does not fit runs as several hardware operations, each on a band of input
rows producing a band of output rows, and/or on a group of kernels producing a group of output surfaces.
The plan minimizes the number of pieces over every data/weight bank split.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from compiler.codegen.conv import CbufReuse
from compiler.ir import Graph
from compiler.passes import CompileContext
from compiler.passes.mixed import node_precision
from golden.config import BYTES_PER_ELEMENT
from golden.engines.conv_datapath import cbuf_geometry, entries_per_slice


@dataclass(frozen=True)
class Piece:
    out_rows: tuple[int, int]  # [o0, o1)
    in_rows: tuple[int, int]  # [i0, i1) of the input cube
    pad_top: int
    kernels: tuple[int, int]  # [k0, k1)
    data_banks: int
    channels: tuple[int, int] | None = None  # [c0, c1) of the input for channel-diagonal convs


def plan_pieces(hw, c: int, h: int, w: int, k: int, r: int, s: int, stride: tuple[int, int],
                dilation: tuple[int, int], pad_top: int, out_h: int, dtype: str = "int8") -> list[Piece]:
    """Pieces of a conv in ``dtype`` (16-bit elements take twice the CBUF of int8 ones)."""
    sy, dy = stride[0], dilation[0]
    bpe = BYTES_PER_ELEMENT[dtype]
    eps = entries_per_slice(hw, c, w, bpe)
    depth = cbuf_geometry(hw)[1]  # entries per bank as CDMA/CSC count them
    bank_bytes = hw.cbuf_bank_depth * hw.cbuf_bank_width
    kernel_bytes = c * r * s * bpe
    unit = kernel_unit(hw, dtype)
    best = None
    for d in range(1, hw.cbuf_bank_number):
        rows_in = d * depth // eps
        span = (r - 1) * dy + 1
        # Output rows whose input rows fit ``rows_in`` lines (the band includes the top padding rows).
        if rows_in >= h:
            rows_out = out_h
        else:
            rows_out = (rows_in - span) // sy + 1
        if rows_out < 1:
            continue
        wbytes = (hw.cbuf_bank_number - d) * bank_bytes
        kg = wbytes // kernel_bytes
        if kg >= k:
            kg = k
        else:
            kg = kg // unit * unit
        if kg < 1:
            continue
        n = math.ceil(out_h / min(rows_out, out_h)) * math.ceil(k / kg)
        if best is None or n < best[0]:
            best = (n, d, min(rows_out, out_h), kg)
    if best is None:
        raise ValueError(f"a {w}-pixel line of {c} channels or one group of {unit} {r}x{s}x{c} kernels does not fit "
                         f"the {hw.cbuf_bank_number}-bank CBUF")
    _, d, rows_out, kg = best
    pieces = []
    for o0 in range(0, out_h, rows_out):
        o1 = min(out_h, o0 + rows_out)
        first = o0 * sy - pad_top
        last = (o1 - 1) * sy - pad_top + (r - 1) * dy
        i0, i1 = max(0, first), min(h, last + 1)
        if i1 <= i0:  # the band lies entirely in padding: read one real row and pad the rest
            i0, i1 = (0, 1) if first < 0 else (h - 1, h)
        needed = -(-(i1 - i0) * eps // depth)
        for k0 in range(0, k, kg):
            pieces.append(Piece((o0, o1), (i0, i1), i0 - first, (k0, min(k, k0 + kg)), max(needed, 1)))
    return pieces


def cbuf_reuse(hw, pieces: list[Piece], i: int, kernel_bytes: int) -> CbufReuse:
    """What piece ``i`` shares with its neighbours through the CBUF, as NVDLA's compiler does: consecutive
    kernel groups of one input band keep the band (fetched once), consecutive bands of one kernel group keep
    the weights (when they fit the weight banks whole: kept weights cannot stream). Neighbours must have the
    same bank split, or CDMA/CSC flush the CBUF between them."""
    def same_data(a: Piece, b: Piece) -> bool:
        return (a.in_rows, a.channels, a.data_banks) == (b.in_rows, b.channels, b.data_banks)

    def same_weights(a: Piece, b: Piece) -> bool:
        fits = (a.kernels[1] - a.kernels[0]) * kernel_bytes <= \
            (hw.cbuf_bank_number - a.data_banks - 1) * hw.cbuf_bank_depth * hw.cbuf_bank_width
        return fits and (a.kernels, a.channels, a.data_banks) == (b.kernels, b.channels, b.data_banks)

    pc = pieces[i]
    prev = pieces[i - 1] if i > 0 else None
    nxt = pieces[i + 1] if i + 1 < len(pieces) else None
    return CbufReuse(keep_data=nxt is not None and same_data(pc, nxt),
                     reuse_data=prev is not None and same_data(prev, pc),
                     keep_weights=nxt is not None and same_weights(pc, nxt),
                     reuse_weights=prev is not None and same_weights(prev, pc))


def diagonal_chunk(w, unit: int) -> bool:
    """True when output channels [k0, k0+unit) read only input channels [k0, k0+unit) (depthwise convs,
    global average pooling): such a conv runs one channel atom at a time with a unit x unit kernel."""
    k, c = w.shape[:2]
    if k != c or k <= unit:
        return False
    mask = np.any(w != 0, axis=(2, 3))
    chunk = np.arange(k) // unit
    return not np.any(mask & (chunk[:, None] != chunk[None, :]))


def kernel_unit(hw, dtype: str = "int8") -> int:
    """Kernels a kernel group is a multiple of: whole output atoms and whole MAC kernel groups."""
    return math.lcm(hw.atom_elements(dtype), hw.mac_atomic_k_for(dtype))


def split_conv(g: Graph, ctx: CompileContext) -> Graph:
    hw = ctx.hw
    for n in g.nodes:
        if n.op != "dla.conv":
            continue
        dtype = node_precision(n, ctx)
        unit = kernel_unit(hw, dtype)
        _, c, h, w = _cube4(g.shapes[n.inputs[0]])
        k, _, r, s = n.attrs["weight"].shape
        out_h = _cube4(g.shapes[n.outputs[0]])[2]
        args = (tuple(n.attrs["stride"]), tuple(n.attrs["dilation"]), int(n.attrs["pads"][0]), out_h, dtype)
        geo = n.attrs.get("winograd")
        if geo is not None:  # one operation: the Winograd pass checked that input and weights fit whole
            n.attrs["pieces"] = [Piece((0, out_h), (0, h), geo.pad[0], (0, k), geo.data_banks)]
            continue
        try:
            if diagonal_chunk(n.attrs["weight"], unit):
                pieces = []
                for c0 in range(0, c, unit):
                    c1 = min(c, c0 + unit)
                    for pc in plan_pieces(hw, c1 - c0, h, w, c1 - c0, r, s, *args):
                        pieces.append(Piece(pc.out_rows, pc.in_rows, pc.pad_top, (c0 + pc.kernels[0], c0 + pc.kernels[1]),
                                            pc.data_banks, (c0, c1)))
                n.attrs["pieces"] = pieces
            else:
                n.attrs["pieces"] = plan_pieces(hw, c, h, w, k, r, s, *args)
        except ValueError as exc:
            raise g.error(n, str(exc)) from None
        if len(n.attrs["pieces"]) > 1:
            ctx.log(f"  {n.name}: split into {len(n.attrs['pieces'])} CBUF pieces")
    return g


def _cube4(shape) -> tuple[int, int, int, int]:
    return (1, shape[1], 1, 1) if len(shape) == 2 else tuple(shape)
