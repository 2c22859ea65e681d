"""The ONNX frontend's op table, apart from the importer so that converter modules (``onnx_quant``) register
into it without importing the importer (no import cycle)."""
from __future__ import annotations

from typing import Any, Callable

import onnx
from onnx import helper

from golden.registry import Registry

#: converter(importer, node, IR name of the node)
Converter = Callable[[Any, onnx.NodeProto, str], None]
CONVERTERS: Registry[Converter] = Registry("ONNX op")
converts = CONVERTERS.register


def attrs(node: onnx.NodeProto) -> dict[str, Any]:
    """A node's attributes as Python values (bytes decoded)."""
    out: dict[str, Any] = {}
    for a in node.attribute:
        v = helper.get_attribute_value(a)
        out[a.name] = v.decode() if isinstance(v, bytes) else v
    return out
