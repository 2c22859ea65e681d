"""Codegen to a loadable: register programs per engine op (relocated against regions), packed weights and
SDP operands in the WEIGHTS region, tensors, tasks and the memory plan."""
from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from compiler.codegen.cdp import emit_cdp
from compiler.codegen import wcomp
from compiler.codegen.conv import CbufReuse, CompressedPlacement, emit_conv
from compiler.codegen.winograd import emit_winograd, pack_winograd_weights, winograd_weight_bytes
from compiler.codegen.pack import pack_dc_weights, pack_operands
from compiler.codegen.pdp import emit_pdp
from compiler.codegen.wide import emit_cdp_wide, emit_pdp_wide
from compiler.passes.mixed import node_precision, tensor_dtype
from compiler.codegen.program import Cube, OperandPlacement
from golden.program import RegProgram
from compiler.codegen.sdp import STAGES, stage_mem_use
from compiler.hwparams import TensorOperand
from compiler.ir import Graph, Node
from compiler.passes import CompileContext
from compiler.passes.split_conv import cbuf_reuse
from compiler.passes.memplan import (
    ALIGN, REGION_INPUT, REGION_OUTPUT, REGION_SCRATCH, REGION_WEIGHTS, MemoryPlan, align,
)
from golden.errors import RegisterError
from golden.intr import done_bit
from golden.regs import register_map
from loadable import loadable_pb2 as pb

CONV_ENGINES = ["CDMA", "CSC", "CMAC_A", "CMAC_B", "CACC", "SDP"]


class _Weights:
    """The WEIGHTS region under construction."""

    def __init__(self) -> None:
        self.buf = bytearray()

    def add(self, data: bytes) -> tuple[int, int]:
        off = align(len(self.buf))
        self.buf += bytes(off - len(self.buf)) + data
        return (REGION_WEIGHTS, off)


def _cube(plan: MemoryPlan, t: str) -> Cube:
    p = plan.placements[t]
    return Cube((p.region, p.offset), p.channels, p.height, p.width, p.line_stride, p.surface_stride)


def _slice_operand(op, k0: int, k1: int):
    return op[k0:k1] if isinstance(op, np.ndarray) and op.ndim == 1 else op


def _sdp_slice(prm, k0: int, k1: int):
    """The SDP parameters of kernel group [k0, k1): per-channel operands sliced (new stage objects; the
    node's own parameters and the LUT are shared, never written)."""
    stages = {}
    for stage, _, _ in STAGES:
        st = getattr(prm, stage)
        stages[stage] = replace(st, alu_operand=_slice_operand(st.alu_operand, k0, k1),
                                mul_operand=_slice_operand(st.mul_operand, k0, k1))
    return replace(prm, **stages)


def _place_operands(prm, weights: _Weights, plan: MemoryPlan, dst: Cube, atom: int, rows: int,
                    k0: int, bpe: int = 1) -> dict[str, OperandPlacement]:
    """Memory operands of an SDP op: per-channel arrays packed into WEIGHTS (16-bit), per-element tensors
    read where they live (``bpe``-byte elements, the band/kernel group matching ``dst``)."""
    placed = {}
    for stage, _, _ in STAGES:
        st = getattr(prm, stage)
        alu_mem, mul_mem = stage_mem_use(st)
        if not (alu_mem or mul_mem):
            continue
        use = "both" if alu_mem and mul_mem else ("alu" if alu_mem else "mul")
        ops = ([st.alu_operand] if alu_mem else []) + ([st.mul_operand] if mul_mem else [])
        if any(isinstance(o, TensorOperand) for o in ops):
            t = plan.placements[ops[0].tensor]
            loc = (t.region, t.offset + rows * t.line_stride + k0 // atom * t.surface_stride)
            placed[stage] = OperandPlacement(loc, "element", bpe, use, t.line_stride, t.surface_stride)
        else:
            data, _, _ = pack_operands([np.asarray(o) for o in ops], dst.channels, 1, 1, atom, 2, "kernel")
            placed[stage] = OperandPlacement(weights.add(data), "kernel", 2, use)
    return placed


def _compressed_weights(name: str, hw, ctx: CompileContext, pieces, reuses, streams: dict, kernel: tuple[int, int],
                        weights: _Weights, dtype: str) -> dict | None:
    """The conv's weights compressed, per weight block (k0, k1, c0, c1): (stream location,
    ``CompressedPlacement``), given the plain ``streams`` of those blocks and the (R, S) ``kernel``, when the
    profile asks for it, the config has it, every piece can leave the last CBUF bank to the WMB and fetch its
    weights fresh (kept or reused weights stay plain), and it fetches fewer bytes; else None (plain)."""
    if not (ctx.profile.compress_weights and hw.weight_compression) or dtype == "fp16":
        return None  # (golden's fp16 direct conv fetches plain weights: compressed fp16 is refused there)
    if any(rs.keep_weights or rs.reuse_weights for rs in reuses):
        return None
    if any(pc.data_banks > hw.cbuf_bank_number - 2 for pc in pieces):
        return None
    r, s = kernel
    bpe, group = ctx.bpe, hw.mac_atomic_k_for(dtype)
    comps = {}
    for (k0, k1, c0, c1), raw in streams.items():
        per_kernel = (c1 - c0) * r * s
        if wcomp.group_wmb_entries(per_kernel, k1 - k0, group) > wcomp.MAX_GROUP_WMB_ENTRIES:
            return None
        comps[(k0, k1, c0, c1)] = wcomp.compress(raw[: (k1 - k0) * per_kernel * bpe], bpe=bpe, kernels=k1 - k0,
                                             kernel_group=group)
    if sum(cw.fetched for cw in comps.values()) >= sum(len(raw) for raw in streams.values()):
        return None
    placed = {}
    for key, cw in comps.items():
        loc = weights.add(cw.stream)
        placed[key] = (loc, CompressedPlacement(weights.add(cw.wmb), len(cw.wmb), weights.add(cw.wgs),
                                                len(cw.stream)))
    ctx.log(f"{name}: compressed weights, {sum(len(raw) for raw in streams.values())} -> "
            f"{sum(cw.fetched for cw in comps.values())} bytes fetched")
    return placed


def _with_flying_pdp(regs: RegProgram, fly, mid: Cube, pool_dst: Cube | None, op: pb.DlaOp) -> RegProgram:
    """``regs`` (a conv or SDP operation sending its result to PDP) preceded by the PDP operation that pools
    it on the fly (armed first, as NVDLA's firmware arms a consumer before its producer); the op then ends
    with SDP's and PDP's done interrupts. Unchanged without ``fly``."""
    if fly is None:
        return regs
    prm = fly[0]
    pdp = RegProgram(regs.hw, strict=True)
    if prm.precision == "int8":
        emit_pdp(pdp, mid, pool_dst, prm, flying=True)
    else:
        emit_pdp_wide(pdp, mid, pool_dst, prm, prm.precision, nan_to_zero=False, flying=True)
    pdp.writes.extend(regs.writes)
    op.engines.append("PDP")
    # SDP still raises its done bit: wait for (and clear) both, or the stale SDP bit would end the next
    # operation in that SDP group the moment it starts (seen on NVDLA's RTL; golden runs ops at enable time)
    op.interrupt_mask = (1 << done_bit("SDP")) | (1 << done_bit("PDP"))
    return pdp


def _winograd_op(g: Graph, n: Node, ctx: CompileContext, weights: _Weights, src: Cube, dst: Cube,
                 layer: str) -> list[pb.DlaOp]:
    """One Winograd convolution (``compiler.passes.winograd``) with its SDP stages on the fly."""
    conv, sdp, geo = n.attrs["conv"], n.attrs["sdp"], n.attrs["conv"].winograd
    hw = ctx.hw
    u = conv.weights
    k = u.shape[0]
    stream = pack_winograd_weights(u, hw, conv.precision)
    regs = RegProgram(hw, strict=True)
    spec = _WinogradSpec(conv.precision, geo.pad, geo.ext, conv.pra_truncate, conv.clip_truncate)
    emit_winograd(regs, src, weights.add(stream), winograd_weight_bytes(len(stream)), (k, geo.ce), dst, spec,
                  sdp=sdp, operands=_place_operands(sdp, weights, ctx.plan, dst, ctx.atom, 0, 0, ctx.bpe))
    _, c, r, s = n.attrs["weight"].shape
    op = pb.DlaOp(name=n.name, engines=CONV_ENGINES, layer=layer, interrupt_mask=1 << done_bit("SDP"),
                  macs=k * c * r * s * dst.height * dst.width)
    _to_pb_writes(hw, regs, op)
    op.inputs.extend([t for t in n.inputs if t])
    op.outputs.extend(n.outputs)
    return [op]


@dataclass(frozen=True)
class _WinogradSpec:
    """What ``emit_winograd`` asks of a Winograd convolution (stride 1: no channel extension)."""

    precision: str
    pad: tuple[int, int, int, int]
    ext: tuple[int, int]
    pra_truncate: int
    clip_truncate: int
    stride: tuple[int, int] = (1, 1)
    pad_value: int = 0
    out_cvt: tuple[int, int, int] = (0, 1, 0)

    def ext_hw(self) -> tuple[int, int]:
        return self.ext


def _to_pb_writes(hw, regs: RegProgram, op: pb.DlaOp) -> None:
    rmap = register_map(hw.address_map)
    base = rmap.bases
    add = op.writes.add
    for write in regs.writes:
        reg = write.register
        addr = base[reg.unit] + reg.offset if reg.unit in base else rmap.address(reg.unit, reg.name)  # (raises)
        w = add(addr=addr, value=write.value, name=reg.full_name)
        if write.reloc is not None:
            w.reloc.region, w.reloc.offset, w.reloc.shift = write.reloc[0], write.reloc[1], 0


#: SDP's and PDP's cube channel fields are 13 bits: a wider cube runs as several passes over channel groups.
MAX_ENGINE_CHANNELS = 1 << 13


def channel_groups(c: int, atom: int) -> list[tuple[int, int]]:
    """[c0, c1) groups of at most ``MAX_ENGINE_CHANNELS`` channels, each starting on a memory atom (an
    element-wise engine pass over each group computes the whole cube's result)."""
    width = MAX_ENGINE_CHANNELS // atom * atom
    return [(c0, min(c, c0 + width)) for c0 in range(0, c, width)]


#: The loadable's element type of each network precision.
FEATURE_DTYPES = {"int8": pb.Tensor.INT8, "int16": pb.Tensor.INT16, "fp16": pb.Tensor.FP16}


def _ops_for(g: Graph, n: Node, ctx: CompileContext, weights: _Weights) -> list[pb.DlaOp]:
    hw, plan = ctx.hw, ctx.plan
    atom, bpe, dtype = ctx.atom, ctx.bpe, node_precision(n, ctx)
    src, dst = _cube(plan, n.inputs[0]), _cube(plan, n.outputs[0])
    layer = ",".join(n.attrs.get("layers", [n.name]))
    fly = n.attrs.get("flying_pdp")  # (PDP parameters, the intermediate's shape): SDP -> PDP on the fly
    pool_dst = None
    if fly is not None:
        pool_dst = dst
        _, mc, mh, mw = fly[1]
        dst = Cube(pool_dst.loc, mc, mh, mw, mw * atom * bpe, mh * mw * atom * bpe)  # never written: a shape
    ops = []
    if n.op == "dla.conv":
        conv, sdp = n.attrs["conv"], n.attrs["sdp"]
        if conv.winograd is not None:
            return _winograd_op(g, n, ctx, weights, src, dst, layer)
        wq = conv.weights
        k, c, r, s = wq.shape
        pieces = n.attrs["pieces"]
        reuses = [cbuf_reuse(hw, pieces, i, (pc.channels[1] - pc.channels[0] if pc.channels else c) * r * s * bpe)
                  if ctx.profile.cbuf_reuse else CbufReuse() for i, pc in enumerate(pieces)]
        streams = {}  # (k0, k1, c0, c1) -> the plain weight stream of each block the pieces read
        for pc in pieces:
            block = (*pc.kernels, *(pc.channels or (0, c)))
            if block not in streams:
                streams[block] = pack_dc_weights(wq[block[0]:block[1], block[2]:block[3]], hw, dtype)
        packed = _compressed_weights(n.name, hw, ctx, pieces, reuses, streams, (r, s), weights, dtype)
        if packed is not None:
            wlocs = {key: loc for key, (loc, _) in packed.items()}
        else:
            wlocs = {key: weights.add(raw) for key, raw in streams.items()}
        for i, pc in enumerate(pieces):
            reuse = reuses[i]
            (o0, o1), (i0, i1), (k0, k1) = pc.out_rows, pc.in_rows, pc.kernels
            c0, c1 = pc.channels or (0, c)
            band = src.rows(i0, i1 - i0)
            if pc.channels is not None:
                band = band.surfaces_from(c0, c1 - c0, atom)
            out = dst.rows(o0, o1 - o0)
            out = out.surfaces_from(k0, k1 - k0, atom) if (k0, k1) != (0, k) else out
            prm = _sdp_slice(sdp, k0, k1)
            operands = _place_operands(prm, weights, plan, out, atom, o0, k0, bpe)
            piece_conv = replace(conv, weights=wq[k0:k1, c0:c1], pad=(pc.pad_top, conv.pad[1]))
            regs = RegProgram(hw, strict=True)
            block = (k0, k1, c0, c1)
            emit_conv(regs, band, wlocs[block], (k1 - k0, c1 - c0, r, s), out, piece_conv, prm, operands,
                      data_banks=pc.data_banks, reuse=reuse,
                      compressed=packed[block][1] if packed is not None else None, to_pdp=fly is not None)
            op = pb.DlaOp(name=n.name if len(pieces) == 1 else f"{n.name}#{i}", engines=CONV_ENGINES, layer=layer,
                          interrupt_mask=1 << done_bit("SDP"),
                          macs=(k1 - k0) * (c1 - c0) * r * s * (o1 - o0) * dst.width)
            _to_pb_writes(hw, _with_flying_pdp(regs, fly, dst, pool_dst, op), op)
            ops.append(op)
    elif n.op == "dla.sdp":
        from compiler.codegen.sdp import emit_sdp

        prm = n.attrs["sdp"]
        if prm.lut is not None and not hw.sdp_lut:
            raise g.error(n, f"{hw.name} has no SDP LUT")
        groups = channel_groups(src.channels, atom)
        for i, (k0, k1) in enumerate(groups):
            part = _sdp_slice(prm, k0, k1) if len(groups) > 1 else prm
            s_cube, d_cube = src.surfaces_from(k0, k1 - k0, atom), dst.surfaces_from(k0, k1 - k0, atom)
            regs = RegProgram(hw, strict=True)
            emit_sdp(regs, s_cube, d_cube, part, _place_operands(part, weights, plan, d_cube, atom, 0, k0, bpe),
                     to_pdp=fly is not None)
            op = pb.DlaOp(name=n.name if len(groups) == 1 else f"{n.name}#{i}", engines=["SDP"], layer=layer,
                          interrupt_mask=1 << done_bit("SDP"))
            _to_pb_writes(hw, _with_flying_pdp(regs, fly, d_cube, pool_dst, op), op)
            ops.append(op)
    elif n.op == "dla.pdp":
        regions = n.attrs.get("pdp_regions")
        passes = [(src, dst, n.attrs["pdp"])] if not regions else \
            [(src.window(r.in_rows, r.in_cols, atom * bpe), dst.window(r.out_rows, r.out_cols, atom * bpe), prm)
             for r, prm in regions]
        passes = [(s_cube.surfaces_from(k0, k1 - k0, atom), d_cube.surfaces_from(k0, k1 - k0, atom), prm)
                  for s_cube, d_cube, prm in passes for k0, k1 in channel_groups(src.channels, atom)]
        for i, (s_cube, d_cube, prm) in enumerate(passes):
            regs = RegProgram(hw, strict=True)
            if prm.precision == "int8":
                emit_pdp(regs, s_cube, d_cube, prm)
            else:
                emit_pdp_wide(regs, s_cube, d_cube, prm, prm.precision, nan_to_zero=False)
            op = pb.DlaOp(name=n.name if len(passes) == 1 else f"{n.name}#{i}", engines=["PDP"], layer=layer,
                          interrupt_mask=1 << done_bit("PDP"))
            _to_pb_writes(hw, regs, op)
            ops.append(op)
    elif n.op == "dla.cdp":
        regs = RegProgram(hw, strict=True)
        prm = n.attrs["cdp"]
        if prm.precision == "int8":
            emit_cdp(regs, src, dst, prm)
        else:
            emit_cdp_wide(regs, src, dst, prm, prm.precision, nan_to_zero=False)
        op = pb.DlaOp(name=n.name, engines=["CDP"], layer=layer, interrupt_mask=1 << done_bit("CDP"))
        _to_pb_writes(hw, regs, op)
        ops.append(op)
    else:
        raise g.error(n, "no code generator")
    for op in ops:
        op.inputs.extend([t for t in n.inputs if t])
        op.outputs.extend(n.outputs)
    return ops


def _attr(a: pb.Attr, v) -> bool:
    if isinstance(v, (bool, np.bool_, int, np.integer)):
        a.i = int(v)
    elif isinstance(v, (float, np.floating)):
        a.f = float(v)
    elif isinstance(v, str):
        a.s = v
    elif isinstance(v, (list, tuple, np.ndarray)) and all(isinstance(x, (int, np.integer)) for x in v):
        a.ints.v.extend(int(x) for x in v)
    elif isinstance(v, (list, tuple, np.ndarray)):
        a.floats.v.extend(float(x) for x in v)
    else:
        return False
    return True


def emit_loadable(g: Graph, ctx: CompileContext, *, source: str = "") -> pb.Loadable:
    hw, plan = ctx.hw, ctx.plan
    atom = ctx.atom
    # ping-pong groups are the runtime's (runtime.groups): S_POINTER writes and done bits mean "this op's group"
    ld = pb.Loadable(hw_config=hw.name, model_name=g.name, source=source,
                     quantization=ctx.quant if ctx.precision != "fp16" or ctx.overrides else "",
                     pingpong=pb.Loadable.RUNTIME)
    weights = _Weights()
    tasks: list[pb.Task] = []
    task_of: dict[str, int] = {}  # tensor -> producing task id
    for n in g.nodes:
        tid = n.attrs.get("task")
        if tid is None:  # a view: its outputs come from the producers of its inputs
            for o in n.outputs:
                task_of[o] = max((task_of[t] for t in n.inputs if t in task_of), default=-1)
            continue
        if tid == len(tasks):
            task = pb.Task(id=tid, name=n.name)
            if n.op.startswith("dla."):
                task.dla.SetInParent()
            tasks.append(task)
        task = tasks[tid]
        deps = {task_of[t] for t in n.inputs if t in task_of and task_of[t] != tid and task_of[t] >= 0}
        for d in sorted(deps - set(task.deps)):
            task.deps.append(d)
        if n.op.startswith("dla."):
            try:
                task.dla.ops.extend(_ops_for(g, n, ctx, weights))
            except RegisterError as exc:  # a value beyond its register field: the layer is too big for it
                raise g.error(n, f"does not fit the hardware: {exc}") from None
        else:
            if any(t in g.consts for t in n.inputs):
                raise g.error(n, "this op on the CPU with constant inputs is not supported")
            cpu = task.cpu
            cpu.op = n.op[4:]
            cpu.inputs.extend(n.inputs)
            cpu.outputs.extend(n.outputs)
            for key, v in n.attrs.items():
                if key in ("layers", "same_scale", "task") or key.startswith("_") or v is None:
                    continue
                _attr(cpu.attrs[key], v)
        for o in n.outputs:
            task_of[o] = tid
    ld.tasks.extend(tasks)
    # Regions.
    ld.regions.add(id=REGION_WEIGHTS, name="weights", kind=pb.Region.WEIGHTS, size=max(len(weights.buf), ALIGN),
                   alignment=4096, content=bytes(weights.buf), ram_type=1)
    for rid, name, kind in ((REGION_INPUT, "input", pb.Region.INPUT), (REGION_OUTPUT, "output", pb.Region.OUTPUT),
                            (REGION_SCRATCH, "scratch", pb.Region.SCRATCH)):
        ld.regions.add(id=rid, name=name, kind=kind, size=plan.region_sizes.get(rid, ALIGN), alignment=4096, ram_type=1)
    # Tensors.
    names = list(dict.fromkeys(list(g.inputs) + [o for n in g.nodes for o in n.outputs]))
    for t in names:
        tp = ld.tensors.add(name=t, shape=list(g.shapes[t]), scale=float(ctx.scales.get(t, 1.0)))
        if t in plan.host:
            tp.storage, tp.dtype = pb.Tensor.HOST, pb.Tensor.FLOAT32
            continue
        p = plan.placements[t]
        tp.storage, tp.dtype = pb.Tensor.FEATURE, FEATURE_DTYPES[tensor_dtype(t, ctx)]
        tp.region, tp.offset = p.region, p.offset
        tp.channels, tp.height, tp.width = p.channels, p.height, p.width
        tp.line_stride, tp.surface_stride, tp.atom = p.line_stride, p.surface_stride, atom
    ld.inputs.extend(g.inputs)
    ld.outputs.extend(g.outputs)
    ld.plan.peak_bytes, ld.plan.unshared_bytes, ld.plan.weight_bytes = plan.peak, plan.unshared, len(weights.buf)
    return ld
