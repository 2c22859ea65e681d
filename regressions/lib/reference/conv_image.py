"""Reference math for image (pixel) input of the convolution pipe: pixel unpacking, mean/CVT, then the
plain 2-D convolution over the padded image.

Rules: NVDLA_NOTES.md section 3 "Image (pixel) input" and the public cmod (CDMA image sequencer and
``process_one_element_{8,16}``; CSC image data sequencer). Written from the format *names* rather than a
table: a packed name lists its fields from the most significant bit of a little-endian word (``A8B8G8R8``:
A in bits 31..24, R in bits 7..0), a semi-planar name ``Y8___U8V8_N444`` is a luma plane and a plane of
interleaved chroma pairs at full resolution. Lanes leave the CDMA in the order R, G, B, A (Y, U, V, A;
X counts as A), so the mean registers RY, GU, BV, AX apply to lanes 0..3.

The convolution here is the 2-D one in pixel space (kernel (K, lanes, R, S)); the hardware's channel
extension, which turns the kernel width into channels, is not used, so the golden model's extension is
checked against it.
"""

from __future__ import annotations

import re

import numpy as np

from .arith import check_range, check_signed, check_unsigned, rha, sat, sign_extend

#: PIXEL_FORMAT code -> name (NVDLA_CDMA.rdl, D_DATAIN_FORMAT.PIXEL_FORMAT).
FORMAT_NAMES = (
    "R8", "R10", "R12", "R16", "R16_I", "R16_F",
    "A16B16G16R16", "X16B16G16R16", "A16B16G16R16_F", "A16Y16U16V16", "V16U16Y16A16", "A16Y16U16V16_F",
    "A8B8G8R8", "A8R8G8B8", "B8G8R8A8", "R8G8B8A8", "X8B8G8R8", "X8R8G8B8", "B8G8R8X8", "R8G8B8X8",
    "A2B10G10R10", "A2R10G10B10", "B10G10R10A2", "R10G10B10A2", "A2Y10U10V10", "V10U10Y10A2",
    "A8Y8U8V8", "V8U8Y8A8",
    "Y8___U8V8_N444", "Y8___V8U8_N444", "Y10___U10V10_N444", "Y10___V10U10_N444",
    "Y12___U12V12_N444", "Y12___V12U12_N444", "Y16___U16V16_N444", "Y16___V16U16_N444",
)
#: Lane of each component letter.
LANE = {"R": 0, "G": 1, "B": 2, "A": 3, "X": 3, "Y": 0, "U": 1, "V": 2}


def _components(text: str) -> list[tuple[str, int]]:
    """``"A8B8G8R8"`` -> [("A", 8), ("B", 8), ("G", 8), ("R", 8)] (most significant first)."""
    return [(letter, int(bits)) for letter, bits in re.findall(r"([RGBAXYUV])(\d+)", text)]


def layout(code: int) -> dict:
    """How format ``code`` sits in memory, derived from its name.

    Returns ``planes``: a list of planes, each a list of (lane, lsb, width, container_bits) for one pixel
    word of ``container`` bits (little-endian); ``bytes``: bytes per pixel of each plane; ``lanes``; ``fp16``;
    ``lane_bits`` (bits of a lane before conversion); ``packed`` (fields narrower than 16 bits inside one
    32-bit word, left-aligned to 16 bits by the CDMA).
    """
    name = FORMAT_NAMES[check_range("code", code, 0, len(FORMAT_NAMES) - 1)]
    fp16 = name.endswith("_F")
    base = name.split("_")[0] if not name.startswith("Y") else name
    if "___" in name:
        luma, chroma = name.split("___")
        chroma = chroma.replace("_N444", "")
        plane_texts = [luma, chroma]
    else:
        plane_texts = [base]
    planes, sizes = [], []
    packed = False
    for text in plane_texts:
        comps = _components(text)
        total = sum(w for _, w in comps)
        if total == 32 and any(w == 10 for _, w in comps):
            packed = True  # one 32-bit word holding 10/10/10/2-bit fields
            fields, lsb = [], 32
            for letter, w in comps:
                lsb -= w
                fields.append((LANE[letter], lsb, w, 32))
            planes.append(fields)
            sizes.append(4)
            continue
        # Otherwise every component sits in its own 8- or 16-bit container (10/12-bit values in 16 bits).
        container = 8 if all(w == 8 for _, w in comps) else 16
        fields, lsb = [], container * len(comps)
        for letter, _ in comps:
            lsb -= container
            fields.append((LANE[letter], lsb, container, container * len(comps)))
        planes.append(fields)
        sizes.append(container * len(comps) // 8)
    lanes = sum(len(p) for p in planes)
    lane_bits = 16 if packed or any(f[2] == 16 for p in planes for f in p) else 8
    return {"name": name, "planes": planes, "bytes": sizes, "lanes": lanes, "fp16": fp16,
            "lane_bits": lane_bits, "packed": packed}


def unpack_pixels(code: int, plane0, plane1, width: int, x_offset: int, atom_bytes: int) -> np.ndarray:
    """Raw unsigned lanes (lanes, H, W) of the ``width`` pixels from ``x_offset`` on.

    ``plane0`` (and ``plane1`` for semi-planar formats) are (H, bytes) arrays of each line's bytes from the
    line start. Chroma: the plane's base is the atom holding pixel ``x_offset``'s pair, so pixel j's pair is
    pair ``x_offset mod (atom_bytes / pair bytes) + j`` of the line.
    """
    info = layout(code)
    if info["fp16"]:
        raise ValueError(f"{info['name']} is an fp16 format")
    rows0 = np.asarray(plane0)
    height = rows0.shape[0]
    out = np.zeros((info["lanes"], height, width), dtype=np.int64)
    for p, fields in enumerate(info["planes"]):
        rows = rows0 if p == 0 else np.asarray(plane1)
        size = info["bytes"][p]
        first = x_offset if p == 0 else x_offset % (atom_bytes // size)
        for h in range(height):
            for j in range(width):
                start = (first + j) * size
                word = 0
                for i in range(size):
                    word |= int(rows[h, start + i]) << (8 * i)
                for lane, lsb, w, _ in fields:
                    value = (word >> lsb) & ((1 << w) - 1)
                    if info["packed"]:
                        value <<= 16 - w
                    out[lane, h, j] = value
    return out


def convert_pixels(raw, lane_bits: int, *, signed: bool, cvt: tuple[int, int, int] | None,
                   means: tuple[int, int, int, int] | None, out_bits: int) -> np.ndarray:
    """CDMA pixel conversion, elementwise over (lanes, H, W).

    ``cvt`` None: the raw lane bits pass (seen as a signed ``out_bits`` number; the lane width equals the
    datapath width then). Otherwise ``sat_out(sat17(rha((p - m) * scale, truncate)))`` with p the lane
    zero-extended (sign-extended when ``signed``, PIXEL_SIGN_OVERRIDE) and m the lane's mean when ``means``
    is given (MEAN_FORMAT=ENABLE), else the CVT offset.
    """
    src = np.asarray(raw)
    out = np.zeros(src.shape, dtype=np.int64)
    if cvt is not None:
        offset, scale, truncate = cvt
        check_signed("offset", offset, 16)
        check_signed("scale", scale, 16)
        check_unsigned("truncate", truncate, 6)
    for idx in np.ndindex(src.shape):
        value = check_unsigned("lane", int(src[idx]), lane_bits)
        if cvt is None:
            out[idx] = sign_extend(value, out_bits)
            continue
        p = sign_extend(value, lane_bits) if signed else value
        m = check_signed("mean", means[idx[0]], 16) if means is not None else cvt[0]
        out[idx] = sat(sat(rha((p - m) * cvt[1], cvt[2]), 17), out_bits)
    return out


def image_conv(
    x,
    w,
    *,
    stride: tuple[int, int],
    pad_top: int,
    pad_left: int,
    pad_right: int,
    cdma_pad: int,
    csc_pad: int,
    out_hw: tuple[int, int],
    clip_truncate: int = 0,
    precision: str = "int8",
) -> np.ndarray:
    """CSC + CMAC + CACC on image input; returns int64 (K, OH, OW).

    ``x`` is the converted image (lanes, H, W), ``w`` the kernel (K, lanes, R, S). Tap (r, s) of output
    (oy, ox) reads pixel (iy, ix) = (oy*Sy + r - pad_top, ox*Sx + s - pad_left): a row outside the image
    gives the CSC pad value in every lane, else a column in the CDMA's left/right padding gives the CDMA
    pad value, else the pixel. Pad values are raw register values; their low 8 (int8) or 16 bits count.
    Output ``sat32(rha(acc, CLIP_TRUNCATE))``; the sum is exact (int16 sums stay below 2**47 here, which
    is all the golden model accepts).
    """
    bits = {"int8": 8, "int16": 16}[precision]
    data, weights = np.asarray(x), np.asarray(w)
    lanes, height, width = data.shape
    kernels, w_lanes, kh, kw = weights.shape
    if w_lanes != lanes:
        raise ValueError(f"weight lanes {w_lanes} != image lanes {lanes}")
    sy, sx = (check_range("stride", s, 1, 1 << 16) for s in stride)
    oh, ow = out_hw
    if (ow - 1) * sx + kw > pad_left + width + pad_right:
        raise ValueError("a window reaches past the padded line")
    clip_truncate = check_unsigned("clip_truncate", clip_truncate, 5)
    row_pad, col_pad = sign_extend(csc_pad, bits), sign_extend(cdma_pad, bits)
    out = np.zeros((kernels, oh, ow), dtype=np.int64)
    for k in range(kernels):
        for oy in range(oh):
            for ox in range(ow):
                acc = 0
                for r in range(kh):
                    iy = oy * sy + r - pad_top
                    for s in range(kw):
                        ix = ox * sx + s - pad_left
                        for c in range(lanes):
                            if not 0 <= iy < height:
                                value = row_pad
                            elif not 0 <= ix < width:
                                value = col_pad
                            else:
                                value = int(data[c, iy, ix])
                            acc += check_signed("w", int(weights[k, c, r, s]), bits) * value
                out[k, oy, ox] = sat(rha(sat(acc, 48), clip_truncate), 32)
    return out
