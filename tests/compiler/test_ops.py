"""compiler.ops: one table entry per canonical op, and the typed SDP post-ops lowering fuses."""
from __future__ import annotations

import numpy as np
import pytest

from compiler import lowering, shapes
from compiler.ir import Graph, Node
from compiler.ops import OPS, OpDef
from compiler.postops import Affine, Eltwise, Relu
from floatops.kernels import KERNELS
from golden.registry import DuplicateNameError


def test_every_op_has_its_shape_kernel_and_rule_in_one_entry() -> None:
    for name, op in OPS.items():
        assert isinstance(op, OpDef) and op.name == name
        assert op.float_kernel is KERNELS[name]
        assert callable(op.shape)
    assert OPS["Conv"].shape is shapes.conv and OPS["Conv"].lower is lowering.lower_conv
    assert OPS["Softmax"].lower is None  # CPU only


def test_an_op_is_defined_once() -> None:
    with pytest.raises(DuplicateNameError, match="IR op 'Conv' registered twice"):
        OPS.add("Conv", OPS["Conv"])


def test_unsupported_op_is_named_by_shape_inference() -> None:
    from compiler.ops import infer_shapes

    g = Graph(inputs=["x"], shapes={"x": (1, 2, 3, 3)}, nodes=[Node("r", "Resize", ["x"], ["y"])])
    with pytest.raises(Exception, match="unsupported op Resize"):
        infer_shapes(g)


def test_post_ops_dump_as_the_dicts_they_replaced() -> None:
    """--dump-passes text is unchanged: op name first, fields in order, the slot hidden."""
    g = Graph(inputs=["x"], shapes={"x": (1, 2, 1, 1), "y": (1, 2, 1, 1)})
    g.nodes.append(Node("s", "dla.sdp", ["x", "z"], ["y"], {"post": [
        Affine(np.ones(2), np.zeros(2), slot=0), Relu(slot=1), Eltwise("add", "z", slot=2)]}))
    assert g.dump().splitlines()[-1] == (
        "  s: dla.sdp(x, z) -> y[1, 2, 1, 1] {'post': [{'op': 'affine', 'scale': '<float64[2]>', "
        "'bias': '<float64[2]>'}, {'op': 'relu'}, {'op': 'eltwise', 'kind': 'add', 'tensor': 'z'}]}")
