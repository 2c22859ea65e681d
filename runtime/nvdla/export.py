"""A compiled network (our loadable) as an NVDLA flatbuffer loadable (``.nvdla``) that NVDLA's runtime and kmd
firmware run: ``dla compile --format nvdla``.

Every DLA operation's register program, relocated as the executor places the regions, is mapped back onto
kmd descriptors by ``runtime.nvdla.inverse`` and checked forward (the firmware programmer must write what
the program writes); an operation the descriptors cannot say is refused naming it and the register. The
regions become memories (weights as SET contents, the others allocated), so every cube keeps its offset in
its region; the dependency graph comes from the tensors: an operation waits for the operations that wrote
what it reads, and for those that read or wrote memory it overwrites (the memory plan reuses bytes). The
network's inputs are INPUT memories (their content, when a sample is given, baked in as SET data, as the
firmware model runs a loadable's own memory) and its outputs OUTPUT memories with tensor descriptors.

A softmax over the channels of a 1x1 fp16 or int8 cube at the end of the network becomes an EMU task (NVDLA's
CPU emulator, ``runtime.nvdla.emulator``), as NVDLA's compiler emits it: it runs after the DLA task, reads the
logits where the DLA wrote them and writes its own output memory, bound as the network's output in the
logits' type (int8: ``saturate(half / (1/127))``, steps of 1/127). It computes in float and half precision, not
as our CPU task does, so its output is within fp16 rounding (int8: two steps) of our loadable's. Other CPU
operations have no equivalent and are refused naming the task. Multi-task networks are one DLA task, in
order.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

import numpy as np

from loadable import loadable_pb2 as pb
from loadable.format import feature_span
from runtime.executor import FEATURE_NUMPY, Network, pack_feature, to_feature
from runtime.nvdla import emulator as emu
from runtime.nvdla import fbs
from runtime.nvdla.inverse import NotExpressible, invert
from runtime.nvdla.writer import LoadableBuilder

__all__ = ["export", "NotExpressible"]

#: Our FEATURE dtypes as the loadable schema's tensor DataType (HALF 2, INT16 3, INT8 4).
_DATA_TYPE = {pb.Tensor.INT8: 4, pb.Tensor.INT16: 3, pb.Tensor.FP16: 2}


def _span(t: pb.Tensor) -> tuple[int, int, int]:
    """(region, first byte, end byte) of a FEATURE tensor's cube."""
    return t.region, t.offset, t.offset + feature_span(t)


def _overlap(a: tuple[int, int, int], b: tuple[int, int, int]) -> bool:
    return a[0] == b[0] and a[1] < b[2] and b[1] < a[2]


def _tensor_desc(t: pb.Tensor, name: str) -> fbs.TensorDesc:
    elem = FEATURE_NUMPY[t.dtype].itemsize
    size = feature_span(t)
    return fbs.TensorDesc(name=name, id=0, mem_id=0, size=size, data_type=_DATA_TYPE[t.dtype],
                          n=1, c=t.channels, h=t.height, w=t.width,
                          strides=[elem, t.atom * elem, t.line_stride, t.surface_stride, size, 0, 0, 0])


def _packed(t: pb.Tensor, x: np.ndarray, net: Network) -> bytes:
    """A float input as the bytes of its cube (quantized or narrowed as the tensor is)."""
    buf = np.zeros(feature_span(t), dtype=np.uint8)
    pack_feature(buf, t, to_feature(np.asarray(x, dtype=np.float32), t), net.offsets(t))
    return buf.tobytes()


@dataclass(frozen=True)
class _Softmax:
    """A CPU softmax as an EMU op: its logits tensor, output name, op and buffer geometry."""

    src: pb.Tensor
    out: str
    op: emu.EmuOp
    desc: dict
    size: int


#: EMU buffer formats of our FEATURE types (int8 by the config's atom: 32 or 8 channels).
_EMU_INT8 = {32: emu.FORMAT_INT8, 8: emu.FORMAT_INT8_8}


def _emu_softmax(msg: pb.Loadable, pos: int, tensors: Mapping[str, pb.Tensor], legacy: bool) -> _Softmax:
    """CPU task ``msg.tasks[pos]`` as NVDLA's EMU softmax, or NotExpressible naming it and why not."""
    task = msg.tasks[pos]
    where = f"task {task.id} {task.name!r}: CPU operation {task.cpu.op}"
    if task.cpu.op != "Softmax":
        raise NotExpressible(f"{where} (NVDLA loadables run only DLA tasks and the EMU's softmax; compile without "
                             "it, e.g. the logits)")
    last_dla = max((i for i, t in enumerate(msg.tasks) if t.WhichOneof("kind") == "dla"), default=-1)
    ins, outs = list(task.cpu.inputs), list(task.cpu.outputs)
    readers = {n for i, t in enumerate(msg.tasks) if i != pos
               for n in (t.cpu.inputs if t.WhichOneof("kind") != "dla" else [i for op in t.dla.ops for i in op.inputs])}
    if pos < last_dla or len(ins) != 1 or len(outs) != 1 or outs[0] not in msg.outputs \
            or outs[0] in readers:
        raise NotExpressible(f"{where}: NVDLA's EMU runs a softmax after the DLA task, on its output: only a "
                             "softmax ending the network can be exported")
    src = tensors[ins[0]]
    axis = task.cpu.attrs["axis"].i if "axis" in task.cpu.attrs else 1
    elem = FEATURE_NUMPY.get(src.dtype, np.dtype(np.float32)).itemsize
    if src.storage != pb.Tensor.FEATURE or (src.height, src.width) != (1, 1) or axis not in (1, -1) \
            or src.surface_stride != src.atom * elem:
        raise NotExpressible(f"{where}: the EMU's softmax reads contiguous channels of a 1x1 DLA cube, not "
                             f"{ins[0]!r} ({src.channels}x{src.height}x{src.width}, axis {axis})")
    if src.dtype == pb.Tensor.FP16:
        fmt, in_scale, out_scale = emu.LEGACY_FORMAT_FF16 if legacy else emu.FORMAT_FF16, 1.0, 1.0
    elif src.dtype == pb.Tensor.INT8 and not legacy and src.atom in _EMU_INT8:
        fmt, in_scale, out_scale = _EMU_INT8[src.atom], float(src.scale), 1.0 / 127
    else:
        raise NotExpressible(f"{where}: NVDLA's EMU takes fp16 or int8 cubes (the legacy layout fp16 only), not "
                             f"{pb.Tensor.DType.Name(src.dtype)}")
    size = feature_span(src)
    op = emu.EmuOp(emu.EMU_OP_SOFTMAX, axis=0, input_scale_factor=in_scale, output_scale_factor=out_scale)
    desc = dict(size=size, format=fmt, width=1, height=1, channel=src.channels, line_stride=src.line_stride,
                surf_stride=src.surface_stride)
    return _Softmax(src, outs[0], op, desc, size)


def export(msg: pb.Loadable, *, sample: Mapping[str, np.ndarray] | None = None, legacy: bool = False) -> bytes:
    """The NVDLA loadable of a compiled network; ``sample`` (input name -> float array in the model's shape,
    batch 1) is baked into the input memories. Raises NotExpressible naming the operation (or task) that has
    no descriptor equivalent."""
    net = Network(msg)
    tensors = net.tensors
    softmaxes = [_emu_softmax(msg, i, tensors, legacy) for i, t in enumerate(msg.tasks) if t.WhichOneof("kind") != "dla"]
    b = LoadableBuilder(legacy=legacy)
    # bytes of each region: weights, and the input sample where one is given
    contents: dict[int, bytearray] = {}
    for r in msg.regions:
        if r.content:
            contents[r.id] = bytearray(r.content.ljust(r.size, b"\0"))
    for name in msg.inputs:
        t = tensors[name]
        if sample is not None and name in sample and t.storage == pb.Tensor.FEATURE:
            data = contents.setdefault(t.region, bytearray(net.regions[t.region].size))
            data[t.offset:t.offset + feature_span(t)] = _packed(t, np.asarray(sample[name])[0], net)
    index: dict[int, int] = {}
    for r in msg.regions:
        data = bytes(contents[r.id]) if r.id in contents else None
        index[r.id] = b.buffer(r.name or f"region{r.id}", r.size, data, cvsram=r.ram_type == 0)
    placement = net.placement
    where = sorted((placement.address(r.id), placement.address(r.id) + r.size, r.id) for r in msg.regions)

    def locate(addr: int) -> tuple[int, int]:
        for lo, hi, rid in where:
            if lo <= addr < hi:
                return rid, addr - lo
        raise NotExpressible(f"address {addr:#x} is in no region")

    ops_of: list[tuple[set[tuple], set[tuple]]] = []  # per builder op: (spans read, spans written)
    first_of_dla: list[int] = []
    for task, i, op in net.dla_ops():
        prog = net.program(task, i)
        values: dict[tuple[str, str], int] = {}
        writes: list[tuple[str, str, int]] = []
        for addr, value, _ in prog.writes:
            reg = net.regmap.lookup(addr)
            if reg is None:
                continue
            values[(reg.unit, reg.name)] = value
            writes.append((reg.unit, reg.name, value))
        where_op = f"task {task.id} op {i} {op.name!r}"
        try:
            _, invs = invert(values, writes, net.regmap, net.hw)
        except NotExpressible as exc:
            raise NotExpressible(f"{where_op}: {exc}") from None
        reads = {_span(tensors[n]) for n in op.inputs if tensors[n].storage == pb.Tensor.FEATURE}
        wrote = {_span(tensors[n]) for n in op.outputs if tensors[n].storage == pb.Tensor.FEATURE}
        # an op waits for earlier ops that wrote what it reads (RAW) or read/wrote what it writes (WAR, WAW)
        after = sorted({j for j, (r0, w0) in enumerate(ops_of)
                        if any(_overlap(a, c) for a in reads for c in w0)
                        or any(_overlap(a, c) for a in wrote for c in (r0 | w0))})
        base = len(ops_of)
        first_of_dla.append(base)
        for k, inv in enumerate(invs):
            surface = inv.surface
            for name, addr in inv.cubes.items():
                rid, offset = locate(addr)
                cube = getattr(surface, name)
                if legacy:
                    cube.address = b.window(index[rid], offset, net.regions[rid].size - offset)
                else:
                    cube.address, cube.offset = index[rid], offset
            if inv.lut is not None:
                inv.op.lut_index = b.lut(inv.lut)
            fused = base + inv.fused_to if inv.fused_to is not None else None
            # the chain's head carries the dependencies; the fused ones follow it on the fly
            b.op(inv.op_type, inv.op, surface, after=after if k == 0 else [], fused_to=fused)
            ops_of.append((reads if k == 0 else set(), wrote if k == len(invs) - 1 else set()))
    emu_out: dict[str, tuple[int, pb.Tensor]] = {}
    for sm in softmaxes:
        src = sm.src
        dst = b.buffer(sm.out, sm.size, None)
        if legacy:
            src_desc = emu.EmuBufferDesc(b.window(index[src.region], src.offset, feature_span(src)), **sm.desc)
        else:
            src_desc = emu.EmuBufferDesc(index[src.region], address_offset=src.offset, **sm.desc)
        b.emu_task([(sm.op, src_desc, emu.EmuBufferDesc(dst, **sm.desc))])
        emu_out[sm.out] = (dst, src)
    for name in msg.outputs:
        if name in emu_out:
            dst, src = emu_out[name]
            b.output(dst, _tensor_desc(src, name))  # the logits' type and geometry
            continue
        t = tensors[name]
        if t.storage != pb.Tensor.FEATURE:
            raise NotExpressible(f"output {name!r} is not a DLA feature tensor")
        view = b.window(index[t.region], t.offset, feature_span(t)) if t.offset else index[t.region]
        b.output(view, _tensor_desc(t, name))
    bound = {tensors[n].region for n in msg.outputs}
    for name in msg.inputs:  # an input in a memory of its own is bound for NVDLA's runtime (--image)
        t = tensors[name]
        if t.storage == pb.Tensor.FEATURE and t.region not in bound and \
                sum(u.region == t.region for u in tensors.values() if u.storage == pb.Tensor.FEATURE) == 1:
            bound.add(t.region)
            view = b.window(index[t.region], t.offset, feature_span(t)) if t.offset else index[t.region]
            b.input(view, _tensor_desc(t, name))
    return b.build()
