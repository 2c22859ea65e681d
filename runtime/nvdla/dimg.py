"""NVDLA's DIMG image files (nvdla/sw ``umd/apps/runtime/DlaImage.cpp``), byte-compatible, so their md5
can be compared with NVDLA's regression goldens (``golden/<test>/dla/lead.md5``).

A DIMG is ``"DIMG"``, a u32 version (0), seven u32 (surface format, width, height, channel, line
stride, surface stride, buffer size) and then every element, channel-major, then rows, then columns,
each read from the output buffer at the format's address. NVDLA's runtime names every int8 FEATURE
tensor ``D_F8_CxHWx_x32_I`` (32-channel atoms) whatever the hardware's atom is, so nv_small outputs
(8-channel atoms) are dumped with a 32-channel interleave: we reproduce that, since the goldens do.
"""
from __future__ import annotations

import struct

import numpy as np

__all__ = ["DimgError", "SURFACE_FORMATS", "GOLDEN_ERA_VALUES", "surface_format", "encode_dimg", "decode_dimg"]

DIMG_VERSION = 0
#: NvDlaImage::PixelFormat values we write: name -> (value, bytes per element, atom channels or 0 for CHW)
SURFACE_FORMATS = {
    "D_F8_CHW_I": (37, 1, 0), "D_F16_CHW_I": (38, 2, 0), "D_F16_CHW_F": (39, 2, 0),
    "D_F8_CxHWx_x32_I": (40, 1, 32), "D_F8_CxHWx_x8_I": (41, 1, 8), "D_F16_CxHWx_x16_I": (42, 2, 16),
    "D_F16_CxHWx_x16_F": (43, 2, 16),
}
#: The same enum in the runtime that produced NVDLA's regression goldens (2017-2018,
#: ``umd/tests/runtime/DlaImage.h``): it had no D_F8_CxHWx_x8_I yet (added with nv_small int8 support in
#: 2019), so the 16-bit feature formats were one lower. Every nv_full int16/fp16 golden header carries these
#: (CONV_D_L0_0 and CDP_L0_0: 41, NN_L0_0: 42); the other values did not move.
GOLDEN_ERA_VALUES = {"D_F16_CxHWx_x16_I": 41, "D_F16_CxHWx_x16_F": 42}
_PIXEL_FEATURE, _PIXEL_FEATURE_X8 = 36, 37
_INT8, _INT16, _HALF = 4, 3, 2


class DimgError(ValueError):
    pass


def surface_format(pixel_format: int, data_type: int) -> str:
    """The DIMG format NVDLA's runtime (Tensor2DIMG) picks for an output tensor descriptor."""
    if pixel_format in (_PIXEL_FEATURE, _PIXEL_FEATURE_X8):
        if data_type == _HALF:
            return "D_F16_CxHWx_x16_F"
        if data_type == _INT16:
            return "D_F16_CxHWx_x16_I"
        if data_type == _INT8:
            return "D_F8_CxHWx_x32_I" if pixel_format == _PIXEL_FEATURE else "D_F8_CxHWx_x8_I"
        raise DimgError(f"feature tensors of data type {data_type} have no DIMG format")
    # NVDLA's runtime reports this and falls back to fp16 features
    return "D_F16_CxHWx_x16_F"


def _offsets(fmt: str, c: int, h: int, w: int, line: int, surf: int) -> np.ndarray:
    _, bpe, atom = SURFACE_FORMATS[fmt]
    cc, yy, xx = np.meshgrid(np.arange(c), np.arange(h), np.arange(w), indexing="ij")
    if atom:
        return (cc // atom) * surf + yy * line + xx * (atom * bpe) + (cc % atom) * bpe
    return cc * surf + yy * line + xx * bpe


def encode_dimg(buffer: bytes, fmt: str, c: int, h: int, w: int, line_stride: int, surface_stride: int,
                size: int | None = None, golden_era: bool = False) -> bytes:
    """A DIMG file of ``buffer`` (the output tensor's bytes) as NVDLA's runtime serializes it (stable
    hash: fp16 -0 becomes +0 and every NaN 0x7C00). ``golden_era`` writes the format value of the runtime
    that produced NVDLA's regression goldens (``GOLDEN_ERA_VALUES``)."""
    value, bpe, _ = SURFACE_FORMATS[fmt]
    if golden_era:
        value = GOLDEN_ERA_VALUES.get(fmt, value)
    size = len(buffer) if size is None else size
    if len(buffer) < size:
        raise DimgError(f"output buffer has {len(buffer)} bytes, the tensor says {size}")
    off = _offsets(fmt, c, h, w, line_stride, surface_stride).reshape(-1)
    if off.size and int(off.max()) + bpe > size:
        worst = int(off.max())
        raise DimgError(f"{fmt} {c}x{h}x{w} with line stride {line_stride} and surface stride {surface_stride} "
                        f"addresses byte {worst}, past the {size}-byte buffer (NVDLA's runtime refuses this too)")
    raw = np.frombuffer(buffer, dtype=np.uint8, count=size)
    if bpe == 1:
        data = raw[off].tobytes()
    else:
        words = (raw[off].astype(np.uint16) | (raw[off + 1].astype(np.uint16) << 8))
        if fmt.endswith("_F"):
            words = np.where(words == 0x8000, 0, words)
            nan = ((words & 0x7C00) == 0x7C00) & ((words & 0x03FF) != 0)
            words = np.where(nan, 0x7C00, words)
        data = words.astype("<u2").tobytes()
    return b"DIMG" + struct.pack("<8I", DIMG_VERSION, value, w, h, c, line_stride, surface_stride, size) + data


def decode_dimg(blob: bytes) -> dict:
    """Header fields and the element bytes of a DIMG (for tests and `dla inspect`)."""
    if len(blob) < 36 or blob[:4] != b"DIMG":
        raise DimgError("not a DIMG file (no 'DIMG' header)")
    version, fmt, w, h, c, line, surf, size = struct.unpack_from("<8I", blob, 4)
    if version != DIMG_VERSION:
        raise DimgError(f"DIMG version {version}, expected {DIMG_VERSION}")
    return {"format": fmt, "width": w, "height": h, "channel": c, "line_stride": line, "surface_stride": surf,
            "size": size, "data": blob[36:]}
