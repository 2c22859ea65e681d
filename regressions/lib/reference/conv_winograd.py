"""Reference math for Winograd convolution F(2x2, 3x3) as NVDLA's conv pipeline runs it (plain loops).

Written from the transform definitions and the hardware's integer steps (hw:nvdlav1 cmod: CDMA
``WinoConvDataResponseSequencerCommon``, CSC ``SendDataToMacSequencerWinoConvCommon`` and the PRA cell
``hls/csc_libs/csc_cvt.cpp``, CMAC ``calculation_int8/int16``, CACC assembly and delivery):

1. CDMA: pad the cube (all lanes of its atoms, padding lanes included) with the pad value to
   ``(pad_top + H + pad_bottom) x (pad_left + W + pad_right)``, then extend channels for the stride:
   extended channel ``(py * Sx + px) * Cp + c`` at (Y, X) is padded pixel ``(Y*Sy + py, X*Sx + px)`` of c.
2. CSC: for output tile (ty, tx) the 4x4 input tile d at extended rows/columns ``2*ty.., 2*tx..``;
   PRA ``V = B^T d B`` exactly, then ``sat_n(rha(V, pra_truncate))`` (n = 8 or 16).
3. CMAC, per block of 4 channels: ``M[i][j] = sum_c U[k,c,i,j] * V[c,i,j]`` (22-bit int8 / 44-bit int16
   registers), ``Y = A^T M A``; CACC: ``acc = sat48(acc + Y)`` block after block (int16 MAC words are
   reassembled at 38 bits), then ``sat32(rha(acc, clip_truncate))``.

``exact=True`` drops every rounding step (no PRA shift/saturation, no register widths, no CACC clip) and
works in Fractions, so that with ``U = G g G^T`` of 3x3 kernels g it must equal the plain convolution.

Weight writer: the compiler (sw ``WeightTranslationUnit::translateWtsForWG``) pads channels with zeros to a
whole 32-byte atom, extends channels for the stride as above, computes ``G g G^T`` in float and converts each
value to the weight type (a C cast: toward zero). ``scale=2`` uses ``2G`` instead, ``(2G) g (2G)^T =
4 G g G^T``, which is integral; the result is then 4 times the convolution, undone exactly by
``clip_truncate=2``. Its byte layout follows the CSC's read order (kernel group, block of 4 channels, kernel,
position, channel).
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from .arith import check_range, check_signed, check_unsigned, rha, sat, sign_extend

B_T = ((1, 0, -1, 0), (0, 1, 1, 0), (0, -1, 1, 0), (0, 1, 0, -1))
A_T = ((1, 1, 1, 0), (0, 1, -1, -1))
G = ((Fraction(1), Fraction(0), Fraction(0)),
     (Fraction(1, 2), Fraction(1, 2), Fraction(1, 2)),
     (Fraction(1, 2), Fraction(-1, 2), Fraction(1, 2)),
     (Fraction(0), Fraction(0), Fraction(1)))

_BITS = {"int8": 8, "int16": 16}
#: CMAC result register widths per precision, then CACC's view of one MAC word.
_MAC_BITS = {"int8": 22, "int16": 44}
_CACC_MAC_BITS = {"int8": 22, "int16": 38}


def _matmul(a, b):
    """Plain nested-list matrix product."""
    return [[sum(a[i][k] * b[k][j] for k in range(len(b))) for j in range(len(b[0]))] for i in range(len(a))]


def _transpose(a):
    return [list(r) for r in zip(*a)]


def input_transform(tile, truncate: int = 0, bits: int = 8, exact: bool = False):
    """PRA of one 4x4 tile: ``sat_bits(rha(B^T d B, truncate))`` (or exactly ``B^T d B``)."""
    v = _matmul(_matmul([list(r) for r in B_T], [[int(x) for x in row] for row in tile]), _transpose(B_T))
    if exact:
        return v
    return [[sat(rha(x, truncate), bits) for x in row] for row in v]


def output_transform(m):
    """``A^T M A`` of a 4x4 matrix -> 2x2."""
    return _matmul(_matmul([list(r) for r in A_T], m), _transpose(A_T))


def pad_and_extend(x, *, stride: tuple[int, int], pad: tuple[int, int, int, int], pad_value: int):
    """CDMA: the padded, channel-extended input as nested lists [c][Y][X] (``pad`` = top, left, bottom, right)."""
    data = np.asarray(x)
    cp, h, w = data.shape
    sy, sx = stride
    top, left, bottom, right = pad
    hp, wp = top + h + bottom, left + w + right
    if hp % (4 * sy) or wp % (4 * sx):
        raise ValueError(f"padded size {hp}x{wp} is not a multiple of 4*stride")
    out = []
    for py in range(sy):
        for px in range(sx):
            for c in range(cp):
                plane = []
                for yy in range(hp // sy):
                    row = []
                    for xx in range(wp // sx):
                        iy, ix = yy * sy + py - top, xx * sx + px - left
                        row.append(int(data[c, iy, ix]) if 0 <= iy < h and 0 <= ix < w else pad_value)
                    plane.append(row)
                out.append(plane)
    return out


def winograd_conv(
    x,
    u,
    *,
    out_hw: tuple[int, int],
    stride: tuple[int, int] = (1, 1),
    pad: tuple[int, int, int, int] = (0, 0, 0, 0),
    pad_value: int = 0,
    pra_truncate: int = 0,
    clip_truncate: int = 0,
    precision: str = "int8",
    exact: bool = False,
):
    """Winograd convolution as the conv pipeline computes it: (K, OH, OW) int64 (Fractions when ``exact``).

    ``x`` is the (Cp, H, W) cube with every lane of its atoms (Cp a whole number of atoms), ``u`` the
    pre-transformed weights (K, Cp*Sy*Sx, 4, 4). ``pad`` = (top, left, bottom, right) is the CDMA's padding
    and ``pad_value`` its pad value (an int8 or int16, given signed or raw).
    """
    if precision not in _BITS:
        raise ValueError(f"precision must be int8 or int16, not {precision!r}")
    bits = _BITS[precision]
    oh, ow = (check_range("out_hw", o, 4, 1 << 13) for o in out_hw)
    if oh % 4 or ow % 4:
        raise ValueError(f"output {oh}x{ow} is not made of 4x4 blocks")
    pra_truncate = check_range("pra_truncate", pra_truncate, 0, 3)
    clip_truncate = check_unsigned("clip_truncate", clip_truncate, 5)
    sy, sx = (check_range("stride", s, 1, 8) for s in stride)
    pad_value = sign_extend(pad_value, bits)
    xe = pad_and_extend(x, stride=(sy, sx), pad=pad, pad_value=pad_value)
    weights = np.asarray(u)
    kernels, channels = weights.shape[:2]
    if weights.shape[2:] != (4, 4) or channels != len(xe):
        raise ValueError(f"weights {weights.shape} do not match {len(xe)} extended channels")
    if channels % 4:
        raise ValueError("extended channels must come in blocks of 4")
    if oh + 2 > len(xe[0]) or ow + 2 > len(xe[0][0]):
        raise ValueError("the extended input does not cover the output tiles")

    # PRA once per channel and tile.
    v = {}
    for c in range(channels):
        for ty in range(oh // 2):
            for tx in range(ow // 2):
                tile = [[xe[c][2 * ty + i][2 * tx + j] for j in range(4)] for i in range(4)]
                v[c, ty, tx] = input_transform(tile, pra_truncate, bits, exact)

    out = np.zeros((kernels, oh, ow), dtype=object if exact else np.int64)
    for k in range(kernels):
        for ty in range(oh // 2):
            for tx in range(ow // 2):
                acc = [[0, 0], [0, 0]]
                for block in range(channels // 4):
                    m = [[0] * 4 for _ in range(4)]
                    for i in range(4):
                        for j in range(4):
                            for c in range(4 * block, 4 * block + 4):
                                wv = weights[k, c, i, j]
                                wv = Fraction(wv) if exact else check_signed("u", int(wv), bits)
                                m[i][j] += wv * v[c, ty, tx][i][j]
                            if not exact:
                                m[i][j] = sign_extend(m[i][j], _MAC_BITS[precision])
                    y = output_transform(m)
                    for a in range(2):
                        for b in range(2):
                            if exact:
                                acc[a][b] += y[a][b]
                            else:
                                word = sign_extend(sign_extend(y[a][b], _MAC_BITS[precision]),
                                                   _CACC_MAC_BITS[precision])
                                acc[a][b] = sat(acc[a][b] + word, 48)
                for a in range(2):
                    for b in range(2):
                        value = acc[a][b] if exact else sat(rha(acc[a][b], clip_truncate), 32)
                        out[k, 2 * ty + a, 2 * tx + b] = value
    return out


# ---- test data: pre-transformed weights ----------------------------------------------------------------------
def weight_transform(g, scale: int = 1, exact: bool = False):
    """``(sG) g (sG)^T`` of a 3x3 kernel: Fractions when ``exact``; otherwise each value converted to an integer
    as C does (toward zero), which is what the compiler's float -> weight-type conversion does."""
    sg = [[scale * e for e in row] for row in G]
    gg = [[Fraction(int(e)) for e in row] for row in g]
    t = _matmul(_matmul(sg, gg), _transpose(sg))
    if exact:
        return t
    return [[int(e) for e in row] for row in t]  # int(Fraction) truncates toward zero


def extend_kernel(w, stride: tuple[int, int], padded_channels: int):
    """The compiler's channel extension of (K, C, R, S) kernels (R <= 3*Sy, S <= 3*Sx) for stride (Sy, Sx):
    (K, Cp*Sy*Sx, 3, 3) with Cp = ``padded_channels``; missing taps and channels are 0."""
    data = np.asarray(w)
    kernels, c_in, r_in, s_in = data.shape
    sy, sx = stride
    if r_in > 3 * sy or s_in > 3 * sx:
        raise ValueError(f"a {r_in}x{s_in} kernel does not fit 3x3 after a {sy}x{sx} stride extension")
    out = np.zeros((kernels, padded_channels * sy * sx, 3, 3), dtype=np.int64)
    for k in range(kernels):
        for ce in range(padded_channels * sy * sx):
            py, rest = divmod(ce, padded_channels * sx)
            px, c = divmod(rest, padded_channels)
            for r in range(3):
                for s in range(3):
                    rr, ss = r * sy + py, s * sx + px
                    if c < c_in and rr < r_in and ss < s_in:
                        out[k, ce, r, s] = int(data[k, c, rr, ss])
    return out


def winograd_weights(w, *, stride: tuple[int, int] = (1, 1), atom: int = 32, scale: int = 1,
                     precision: str = "int8", exact: bool = False):
    """Kernels (K, C, R, S) -> the pre-transformed (K, Cp*Sy*Sx, 4, 4) the hardware reads, Cp = C rounded up to
    ``atom`` channels. Integer values must fit the weight type (ValueError otherwise)."""
    data = np.asarray(w)
    padded = -(-data.shape[1] // atom) * atom
    ext = extend_kernel(data, stride, padded)
    kernels, channels = ext.shape[:2]
    out = np.zeros((kernels, channels, 4, 4), dtype=object if exact else np.int64)
    for k in range(kernels):
        for c in range(channels):
            t = weight_transform(ext[k, c], scale, exact)
            for i in range(4):
                for j in range(4):
                    out[k, c, i, j] = t[i][j] if exact else check_signed("transformed weight", t[i][j],
                                                                          _BITS[precision])
    return out


def pack_weights(u, *, kernel_group: int, precision: str = "int8") -> bytes:
    """U (K, C, 4, 4) -> weight bytes in the CSC's Winograd read order, little-endian elements."""
    data = np.asarray(u)
    kernels, channels = data.shape[:2]
    size = 1 if precision == "int8" else 2
    out = bytearray()
    for k0 in range(0, kernels, kernel_group):
        group = range(k0, min(k0 + kernel_group, kernels))
        for c0 in range(0, channels, 4):
            for k in group:
                for i in range(4):
                    for j in range(4):
                        for c in range(c0, c0 + 4):
                            value = check_signed("weight", int(data[k, c, i, j]), 8 * size)
                            out += (value & ((1 << (8 * size)) - 1)).to_bytes(size, "little")
    return bytes(out)
