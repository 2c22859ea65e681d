"""Inputs for NVDLA loadables (``dla run X.nvdla --input``): arrays packed into their INPUT memories.

An NVDLA loadable carries its input bytes (a ``SET`` input memory) and no input scale, so an input here is
given in the tensor's own element type: int8/int16 tensors take integer arrays in their range (the values
the DLA reads; a float array would need a scale the loadable does not have), fp16 tensors take any float
array (rounded to fp16). The array is (C, H, W) or (1, C, H, W) as the tensor descriptor says, packed as a
FEATURE cube with the descriptor's atom (``strides[1]``), line and surface strides. The new bytes become one
more ``SET`` content of the input memory, written after the loadable's own, so every target (golden, RTL
simulators) runs them without knowing about inputs.
"""
from __future__ import annotations

import copy
from typing import Mapping

import numpy as np

from runtime.nvdla import fbs

#: Descriptor data types (the schema's DataType) -> element type.
_ELEMENTS = {4: np.dtype(np.int8), 3: np.dtype("<i2"), 2: np.dtype("<f2")}
_FEATURE = 36  # PixelFormat FEATURE


class NvdlaInputError(ValueError):
    """An input that does not fit the loadable's input tensor (one line naming it)."""


def input_tensors(ld: fbs.NvdlaLoadable) -> dict[str, tuple[fbs.MemoryEntry, fbs.TensorDesc]]:
    """The bound INPUT memories by tensor name."""
    tensors = {t.id: t for t in ld.tensors}
    out = {}
    for m in ld.memories:
        if m.flags & fbs.MEM_INPUT and m.tensor_desc_id in tensors:
            t = tensors[m.tensor_desc_id]
            out[t.name] = (m, t)
    return out


def pack_input(t: fbs.TensorDesc, x: np.ndarray) -> bytes:
    """``x`` as the ``t.size`` bytes of tensor ``t``'s cube (padding lanes and gaps zero)."""
    elem = _ELEMENTS.get(t.data_type)
    if elem is None or t.pixel_format != _FEATURE:
        raise NvdlaInputError(f"input {t.name!r}: data type {t.data_type} / pixel format {t.pixel_format} is not "
                              f"a FEATURE cube of int8, int16 or fp16")
    a = np.asarray(x)
    if a.ndim == 4 and a.shape[0] == 1:
        a = a[0]
    if a.shape != (t.c, t.h, t.w):
        raise NvdlaInputError(f"input {t.name!r}: shape {tuple(np.asarray(x).shape)}, the tensor is "
                              f"{t.n}x{t.c}x{t.h}x{t.w} (NCHW)")
    if elem.kind == "i":
        info = np.iinfo(elem)
        if not np.issubdtype(a.dtype, np.integer) and not (np.isfinite(a).all() and np.array_equal(a, np.rint(a))):
            raise NvdlaInputError(f"input {t.name!r}: the tensor holds {elem.name} values and the loadable carries "
                                  f"no input scale: give integers")
        if a.size and (a.min() < info.min or a.max() > info.max):
            raise NvdlaInputError(f"input {t.name!r}: values {a.min()}..{a.max()} are outside {elem.name}'s "
                                  f"{info.min}..{info.max}")
    bpe = elem.itemsize
    atom = t.strides[1] // bpe
    line, surf = t.strides[2], t.strides[3]
    if atom < 1 or line < t.w * atom * bpe or surf < t.h * line:
        raise NvdlaInputError(f"input {t.name!r}: strides {t.strides[:4]} do not describe a feature cube")
    surfaces = -(-t.c // atom)
    lanes = np.zeros((surfaces * atom, t.h, t.w), dtype=elem)
    lanes[: t.c] = a.astype(elem)
    buf = np.zeros(t.size, dtype=np.uint8)
    cube = lanes.reshape(surfaces, atom, t.h, t.w).transpose(0, 2, 3, 1)  # (surface, y, x, lane)
    raw = np.ascontiguousarray(cube).view(np.uint8).reshape(surfaces, t.h, t.w * atom * bpe)
    for s in range(surfaces):
        for y in range(t.h):
            start = s * surf + y * line
            if start + raw.shape[2] > t.size:
                raise NvdlaInputError(f"input {t.name!r}: its cube runs past the tensor's {t.size} bytes")
            buf[start:start + raw.shape[2]] = raw[s, y]
    return buf.tobytes()


def with_inputs(ld: fbs.NvdlaLoadable, arrays: Mapping[str, np.ndarray]) -> fbs.NvdlaLoadable:
    """A copy of ``ld`` whose input memories hold ``arrays`` (tensor name -> array; a single input may be
    named ``""``)."""
    bound = input_tensors(ld)
    if not bound:
        raise NvdlaInputError("the loadable binds no input tensor (no INPUT memory with a tensor descriptor)")
    if set(arrays) == {""}:
        if len(bound) != 1:
            raise NvdlaInputError(f"the loadable has {len(bound)} inputs ({', '.join(bound)}): name each, "
                                  f"NAME=PATH")
        arrays = {next(iter(bound)): arrays[""]}
    unknown = sorted(set(arrays) - set(bound))
    if unknown:
        raise NvdlaInputError(f"no input tensor named {unknown[0]!r} (inputs: {', '.join(bound)})")
    out = copy.deepcopy(ld)
    mems = {m.id: m for m in out.memories}
    for name, x in arrays.items():
        m, t = bound[name]
        blob = fbs.Blob(name=f"input:{name}", data=pack_input(t, x))
        out.blobs.append(blob)
        mem = mems[m.id]
        mem.contents.append(blob.name)
        mem.offsets.append(t.offset)
        mem.flags |= fbs.MEM_SET
    return out


__all__ = ["NvdlaInputError", "input_tensors", "pack_input", "with_inputs"]
