"""Fuzz examples <-> JSON, so a shrunk failure is saved, read back and replayed as an ``@example``.

Examples are dataclasses (``regressions.lib.programs`` layers, ``regressions.lib.reference`` parameters, the
fuzz strategies' own wrappers) holding ints, tuples and int numpy arrays. JSON keeps them readable:
a dataclass is an object with its class under ``"type"``, an array is ``{"array": nested lists}``,
a tuple or list is a JSON list (read back as a tuple: every sequence field of these classes is).
Fields left at their dataclass default are omitted (a bypassed stage or an unused LUT is one line).
"""
from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from golden.lut import LutRegisters
from regressions.lib import programs
from regressions.lib.reference import sdp as ref_sdp
from regressions.lib.strategies.pdp import PdpExample, PdpSplit

#: Every class an example may contain, by name.
TYPES: dict[str, type] = {
    cls.__name__: cls
    for cls in (
        programs.PoolLayer, programs.LrnLayer, programs.SdpLayer, programs.ConvLayer,
        PdpExample, PdpSplit,
        ref_sdp.SdpParams, ref_sdp.SdpXParams, ref_sdp.SdpYParams, ref_sdp.SdpOperandCvt, LutRegisters,
    )
}
#: Saved failures written before the LUT classes became ``LutRegisters`` (same fields) still read back.
TYPES.update(SdpLut=LutRegisters, CdpLut=LutRegisters, CdpFp16Lut=LutRegisters)


class SerializeError(ValueError):
    """A value or JSON document that is not an example."""


def to_json(value: Any) -> Any:
    """JSON-ready form of an example (or any part of one)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        name = type(value).__name__
        if TYPES.get(name) is not type(value):
            raise SerializeError(f"{name} is not a known example class (add it to serialize.TYPES)")
        out = {"type": name}
        for f in dataclasses.fields(value):
            encoded = to_json(getattr(value, f.name))
            if f.default is not dataclasses.MISSING:
                default = to_json(f.default)
            elif f.default_factory is not dataclasses.MISSING:
                default = to_json(f.default_factory())
            else:
                default = dataclasses.MISSING
            if encoded != default or type(encoded) is not type(default):
                out[f.name] = encoded
        return out
    if isinstance(value, np.ndarray):
        if value.dtype.kind not in "iub":
            raise SerializeError(f"only integer arrays are examples, not {value.dtype}")
        return {"array": value.astype(np.int64).tolist()}
    if isinstance(value, (np.integer, np.bool_)):
        return value.item()
    if isinstance(value, (list, tuple)):
        return [to_json(v) for v in value]
    if value is None or isinstance(value, (bool, int, str)):
        return value
    raise SerializeError(f"cannot write {type(value).__name__} {value!r} as JSON")


def from_json(data: Any) -> Any:
    """Inverse of ``to_json``."""
    if isinstance(data, dict):
        if "array" in data and len(data) == 1:
            return np.array(data["array"], dtype=np.int64)
        name = data.get("type")
        cls = TYPES.get(name) if isinstance(name, str) else None
        if cls is None:
            raise SerializeError(f"unknown example type {name!r}")
        known = {f.name for f in dataclasses.fields(cls)}
        fields = {k: v for k, v in data.items() if k != "type"}
        unknown = set(fields) - known
        if unknown:
            raise SerializeError(f"{name} has no field {', '.join(sorted(unknown))}")
        return cls(**{k: from_json(v) for k, v in fields.items()})
    if isinstance(data, list):
        return tuple(from_json(v) for v in data)
    return data


def same(a: Any, b: Any) -> bool:
    """Whether two examples are equal (numpy arrays compared by value): ``to_json`` of both."""
    return to_json(a) == to_json(b)
