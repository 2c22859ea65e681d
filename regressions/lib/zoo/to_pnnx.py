"""ONNX -> PNNX (``.pnnx.param`` + ``.pnnx.bin``): the zoo's networks written as PyTorch's pnnx exporter writes
them (nn.Conv2d, nn.BatchNorm2d, nn.ReLU/ReLU6, pooling, pnnx.Expression add, torch.flatten, nn.Linear,
F.softmax), so the PNNX frontend can be checked against onnxruntime on the very same network and weights. Only
what those networks use is converted; anything else is a ValueError naming the node.
"""
from __future__ import annotations

import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import numpy_helper, shape_inference


def _value(v: Any) -> str:
    if isinstance(v, bool):
        return "True" if v else "False"
    if isinstance(v, (tuple, list)):
        return "(" + ",".join(_value(e) for e in v) + ")"
    if isinstance(v, float):
        return f"{v:e}"
    return str(v)


def _shape(shape, dtype: str = "f32") -> str:
    return "(" + ",".join(str(int(d)) for d in shape) + ")" + dtype


def to_pnnx(model: onnx.ModelProto, param: Path, weights: Path) -> None:
    model = shape_inference.infer_shapes(model)
    g = model.graph
    inits = {i.name: numpy_helper.to_array(i) for i in g.initializer}
    shapes = {vi.name: [d.dim_value for d in vi.type.tensor_type.shape.dim]
              for vi in list(g.input) + list(g.value_info) + list(g.output)}
    lines: list[str] = []
    blobs: dict[str, bytes] = {}

    def emit(kind: str, name: str, ins: list[str], outs: list[str], params: dict | None = None,
             attrs: dict[str, np.ndarray] | None = None) -> None:
        fields = [f"{kind:<24s}", f"{name:<24s}", str(len(ins)), str(len(outs)), *ins, *outs]
        fields += [f"{k}={_value(v)}" for k, v in sorted((params or {}).items())]
        for k, a in (attrs or {}).items():
            a = np.ascontiguousarray(a, dtype="<f4")
            fields.append(f"@{k}={_shape(a.shape)}")
            blobs[f"{name}.{k}"] = a.tobytes()
        fields += [f"#{t}={_shape(shapes[t])}" for t in ins + outs if shapes.get(t)]
        lines.append(" ".join(fields))

    for vi in g.input:
        if vi.name not in inits:
            emit("pnnx.Input", f"pnnx_input_{len(lines)}", [], [vi.name])
    for i, n in enumerate(g.node):
        a = {x.name: onnx.helper.get_attribute_value(x) for x in n.attribute}
        name = n.name or f"{n.op_type.lower()}_{i}"
        x, y = n.input[0] if n.input else "", n.output[0]
        if n.op_type == "Conv":
            w = inits[n.input[1]]
            pads = list(a.get("pads", [0, 0, 0, 0]))
            if pads[:2] != pads[2:]:
                raise ValueError(f"Conv {name!r}: asymmetric pads {pads} (PyTorch pads both sides alike)")
            bias = len(n.input) > 2 and n.input[2] in inits
            attrs = {"weight": w, **({"bias": inits[n.input[2]]} if bias else {})}
            emit("nn.Conv2d", name, [x], [y], dict(
                bias=bias, dilation=tuple(a.get("dilations", [1, 1])), groups=int(a.get("group", 1)),
                in_channels=int(w.shape[1]) * int(a.get("group", 1)), kernel_size=tuple(w.shape[2:]),
                out_channels=int(w.shape[0]), padding=tuple(pads[:2]), padding_mode="zeros",
                stride=tuple(a.get("strides", [1, 1]))), attrs)
        elif n.op_type == "BatchNormalization":
            gamma, beta, mean, var = (inits[t] for t in n.input[1:5])
            emit("nn.BatchNorm2d", name, [x], [y], dict(affine=True, eps=float(a.get("epsilon", 1e-5)),
                                                         num_features=int(gamma.size)),
                 {"running_mean": mean, "running_var": var, "weight": gamma, "bias": beta})
        elif n.op_type == "Relu":
            emit("nn.ReLU", name, [x], [y])
        elif n.op_type == "Clip":
            lo = float(inits[n.input[1]]) if len(n.input) > 1 and n.input[1] else a.get("min")
            hi = float(inits[n.input[2]]) if len(n.input) > 2 and n.input[2] else a.get("max")
            if (lo, hi) != (0.0, 6.0):
                raise ValueError(f"Clip {name!r}: only ReLU6 (0, 6) is converted")
            emit("nn.ReLU6", name, [x], [y])
        elif n.op_type in ("MaxPool", "AveragePool"):
            pads = list(a.get("pads", [0, 0, 0, 0]))
            if pads[:2] != pads[2:]:
                raise ValueError(f"{n.op_type} {name!r}: asymmetric pads {pads}")
            params = dict(ceil_mode=bool(a.get("ceil_mode", 0)), kernel_size=tuple(a["kernel_shape"]),
                          padding=tuple(pads[:2]), stride=tuple(a.get("strides", [1, 1])))
            if n.op_type == "MaxPool":
                emit("nn.MaxPool2d", name, [x], [y], dict(params, dilation=(1, 1), return_indices=False))
            else:
                emit("nn.AvgPool2d", name, [x], [y],
                     dict(params, count_include_pad=bool(a.get("count_include_pad", 0)), divisor_override=None))
        elif n.op_type == "GlobalAveragePool":
            emit("nn.AdaptiveAvgPool2d", name, [x], [y], dict(output_size=(1, 1)))
        elif n.op_type == "Add":
            emit("pnnx.Expression", name, list(n.input), [y], dict(expr="add(@0,@1)"))
        elif n.op_type == "Flatten":
            emit("torch.flatten", name, [x], [y], dict(start_dim=int(a.get("axis", 1)), end_dim=-1))
        elif n.op_type == "Gemm":
            if not a.get("transB", 0) or a.get("alpha", 1.0) != 1.0 or a.get("beta", 1.0) != 1.0:
                raise ValueError(f"Gemm {name!r}: only transB=1, alpha=beta=1 is nn.Linear")
            w = inits[n.input[1]]
            attrs = {"weight": w, **({"bias": inits[n.input[2]]} if len(n.input) > 2 else {})}
            emit("nn.Linear", name, [x], [y], dict(bias=len(n.input) > 2, in_features=int(w.shape[1]),
                                                   out_features=int(w.shape[0])), attrs)
        elif n.op_type == "Softmax":
            emit("F.softmax", name, [x], [y], dict(dim=int(a.get("axis", -1))))
        elif n.op_type == "Concat":
            emit("torch.cat", name, list(n.input), [y], dict(dim=int(a.get("axis", 1))))
        else:
            raise ValueError(f"{n.op_type} {name!r}: no PNNX form here")
    for i, vi in enumerate(g.output):
        emit("pnnx.Output", f"pnnx_output_{i}", [vi.name], [])
    operands = {t for line in lines for t in line.split()[4:4 + int(line.split()[2]) + int(line.split()[3])]}
    param.write_text(f"7767517\n{len(lines)} {len(operands)}\n" + "\n".join(lines) + "\n")
    with zipfile.ZipFile(weights, "w", zipfile.ZIP_STORED) as z:
        for key, data in blobs.items():
            z.writestr(key, data)
