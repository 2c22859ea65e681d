"""Writes NVDLA flatbuffer loadables from hand-built descriptor sets: the other half of the round trip
(``LoadableBuilder`` -> ``.nvdla`` -> ``NvdlaNetwork`` -> firmware -> target), and a way for users to
turn one layer of their own into a loadable NVDLA's runtime can also run.

The builder lays memories out the way NVDLA's compiler does (one memory per descriptor list and per
data buffer, each with one address-list entry, the network descriptor at address index 0) and derives
the dependency graph from what each op needs:

- ops of one engine form a chain through the consumer slot of their own type (the firmware's dequeue
  follows it); the successor is released when its predecessor is *programmed*, so two ops of an engine
  can be in flight (one per ping-pong group), or when it *completes* if the successor also reads its
  output;
- ``after=[i]``: op i's output is an input; released when op i completes. A producer has one consumer
  slot per engine type, so when that slot is taken the dependency is carried by the engine chain
  instead (the earlier consumer completes only after the producer did);
- ``fused_to=i``: this op consumes op i on the fly (conv -> SDP, SDP -> PDP); the pair is enabled
  consumer first: the consumer waits for the producer being programmed, the producer for the
  consumer being enabled.

``emu_task`` adds EMU1 (CPU emulator: softmax, power) tasks before or after the DLA task, one submit each.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from runtime.nvdla import descriptors as d
from runtime.nvdla import emulator as emu
from runtime.nvdla import fbs

__all__ = ["LoadableBuilder", "FIRMWARE_INTERFACE"]

#: the firmware interface version blobs are stamped with (the current dla_interface.h layout)
FIRMWARE_INTERFACE = (0, 12, 5)
LEGACY_INTERFACE = (0, 10, 0)


@dataclass
class _Op:
    op_type: int
    op: d.Struct
    surface: d.Struct
    after: list[int]
    fused_to: int | None
    common: d.Struct = field(default_factory=d.CommonOpDesc)


class LoadableBuilder:
    def __init__(self, *, legacy: bool = False) -> None:
        self.legacy = legacy
        self.ld = fbs.NvdlaLoadable()
        self.ops: list[_Op] = []
        self.luts: list[d.Struct] = []
        #: EMU1 tasks: (ops, their network/op/buffer-list address ids, submitted before the DLA task?)
        self.emu_tasks: list[tuple[list[tuple[emu.EmuOp, emu.EmuBufferDesc, emu.EmuBufferDesc]], list[int], bool]] = []
        self._version = fbs.Version(*(LEGACY_INTERFACE if legacy else FIRMWARE_INTERFACE))
        # address-list slots 0..4 are the network, op, surface, dependency and LUT lists
        self._addresses: list[int] = []
        for name in ("NetworkDesc", "OpList", "SurfList", "DEPGraph", "LUTList"):
            self._addresses.append(self._memory_entry(name, 0, None, fbs.MEM_ALLOC | fbs.MEM_SET))

    # ---- memory --------------------------------------------------------------------------------
    def _memory_entry(self, name: str, size: int, data: bytes | None, flags: int, domain: int = 0) -> int:
        mid = len(self.ld.memories)
        contents, offsets = [], []
        if data is not None or flags & fbs.MEM_SET:
            blob = f"m{mid}_{name}_i{mid}"
            self.ld.blobs.append(fbs.Blob(blob, data or b"", version=fbs.Version(0, 0, 0)))
            contents, offsets = [blob], [0]
        self.ld.memories.append(fbs.MemoryEntry(id=mid, size=size, domain=domain, flags=flags, alignment=4096,
                                                contents=contents, offsets=offsets))
        aid = len(self.ld.addresses)
        self.ld.addresses.append(fbs.AddressEntry(id=aid, mem_id=mid, offset=0, size=size))
        return aid

    def buffer(self, name: str, size: int, data: bytes | None = None, *, cvsram: bool = False) -> int:
        """A data buffer (zero-filled unless ``data``); returns its address-list index."""
        if data is not None and len(data) > size:
            raise ValueError(f"buffer {name!r}: {len(data)} bytes of data for a {size}-byte buffer")
        flags = fbs.MEM_ALLOC | (fbs.MEM_SET if data is not None else 0)
        aid = self._memory_entry(name, size, data, flags, domain=int(cvsram))
        self._addresses.append(aid)
        return len(self._addresses) - 1

    def window(self, index: int, offset: int, size: int) -> int:
        """Another address-list entry into buffer ``index`` starting at ``offset`` (how cubes inside a
        buffer are addressed in the legacy layout, which has no cube offset)."""
        entry = self.ld.addresses[self._addresses[index]]
        aid = len(self.ld.addresses)
        self.ld.addresses.append(fbs.AddressEntry(id=aid, mem_id=entry.mem_id, offset=entry.offset + offset, size=size))
        self._addresses.append(aid)
        return len(self._addresses) - 1

    def output(self, index: int, tensor: fbs.TensorDesc) -> None:
        """Mark buffer ``index`` as a network output described by ``tensor`` (mem_id is filled in)."""
        self._bind(index, tensor, fbs.MEM_OUTPUT)

    def input(self, index: int, tensor: fbs.TensorDesc) -> None:
        """Mark buffer ``index`` as a network input described by ``tensor``: NVDLA's runtime binds the
        user's data there (its SET contents, if any, are the sample the loadable carries)."""
        self._bind(index, tensor, fbs.MEM_INPUT)

    def _bind(self, index: int, tensor: fbs.TensorDesc, flag: int) -> None:
        entry = self.ld.addresses[self._addresses[index]]
        mem = self.ld.memories[entry.mem_id]
        if mem.flags & (fbs.MEM_INPUT | fbs.MEM_OUTPUT):
            raise ValueError(f"memory {mem.id} is already bound (one tensor per input/output memory)")
        mem.flags |= flag
        tensor.id = len(self.ld.tensors)
        tensor.mem_id = mem.id
        tensor.offset = entry.offset
        mem.tensor_desc_id = tensor.id
        mem.bind_id = sum(1 for m in self.ld.memories if m.flags & flag) - 1
        self.ld.tensors.append(tensor)

    # ---- ops -------------------------------------------------------------------------------------
    def lut(self, param: d.Struct) -> int:
        self.luts.append(param)
        return len(self.luts) - 1

    def op(self, op_type: int, op: d.Struct, surface: d.Struct, *, after: list[int] = (),
           fused_to: int | None = None) -> int:
        for i in (*after, *([fused_to] if fused_to is not None else [])):
            if not 0 <= i < len(self.ops):
                raise ValueError(f"op {len(self.ops)}: depends on op {i}, which is not defined before it")
        self.ops.append(_Op(op_type, op, surface, list(after), fused_to))
        return len(self.ops) - 1

    def emu_task(self, ops: list[tuple[emu.EmuOp, emu.EmuBufferDesc, emu.EmuBufferDesc]], *,
                 before_dla: bool = False) -> None:
        """An EMU1 (CPU emulator) task running ``ops`` (op, src, dst; the buffer descriptors' address_index
        are this builder's buffer indices), submitted after the DLA task, or before it. Its address list is
        the DLA task's with entry 0 its own network descriptor and its op and buffer lists appended, as
        NVDLA's compiler lays EMU tasks out."""
        ids = [self._memory_entry(f"emu{len(self.emu_tasks)}_{n}", 0, None, fbs.MEM_ALLOC | fbs.MEM_SET)
               for n in ("addr0", "op_list", "op_buf_list")]
        self.emu_tasks.append((list(ops), ids, before_dla))

    def _emu_entry(self, ops: list, ids: list[int], task_id: int) -> fbs.TaskEntry:
        addresses = [ids[0], *self._addresses[1:], ids[1], ids[2]]
        net = emu.EmuNetworkDesc(len(addresses) - 2, len(addresses) - 1, len(ops))
        op_list = b"".join(o.encode(self.legacy) for o, _, _ in ops)
        buf_list = b"".join(s.encode(self.legacy) + t.encode(self.legacy) for _, s, t in ops)
        for aid, data, sub in zip(ids, (net.encode(), op_list, buf_list), (1, 3, 4)):  # EMU1 ADDR0, OPS, SURFS
            entry = self.ld.addresses[aid]
            mem = self.ld.memories[entry.mem_id]
            mem.size = entry.size = max(len(data), 4)
            blob = self.ld.blob(mem.contents[0])
            blob.data, blob.size = data, len(data)
            blob.interface, blob.sub_interface, blob.version = fbs.IF_EMU1, sub, fbs.Version(0, 0, 1)
        return fbs.TaskEntry(id=task_id, interface=fbs.IF_EMU1, instance=-1, address_list=addresses)

    def _graph(self) -> list[d.Struct]:
        commons = [d.CommonOpDesc(index=i, roi_index=0, op_type=o.op_type) for i, o in enumerate(self.ops)]
        for c in commons:
            for slot in (*c.consumers, c.fused_parent):
                slot.index, slot.event = -1, d.EVENT_OP_COMPLETED
        later = {d.EVENT_OP_PROGRAMMED: 0, d.EVENT_OP_ENABLED: 1, d.EVENT_OP_COMPLETED: 2}

        def link(producer: int, consumer: int, event: int) -> bool:
            slot = commons[producer].consumers[self.ops[consumer].op_type]
            if slot.index == -1:
                commons[consumer].dependency_count += 1
                slot.index, slot.event = consumer, event
                return True
            if slot.index == consumer:  # one slot, one event: keep the later one
                slot.event = max(slot.event, event, key=later.__getitem__)
                return True
            return False

        last: dict[int, int] = {}
        for i, o in enumerate(self.ops):
            prev = last.get(o.op_type)
            if prev is not None:
                link(prev, i, d.EVENT_OP_PROGRAMMED)
            for p in o.after:
                if not link(p, i, d.EVENT_OP_COMPLETED):
                    # p's slot for this engine is taken by an earlier op of the engine, which completes
                    # only after p did: the chain link carries the dependency
                    link(prev, i, d.EVENT_OP_COMPLETED)
            if o.fused_to is not None:
                parent = o.fused_to
                if not link(parent, i, d.EVENT_OP_PROGRAMMED):
                    raise ValueError(f"op {i}: op {parent} already feeds another "
                                     f"{d.OP_NAMES[o.op_type]} op on the fly")
                commons[i].fused_parent.index = parent
                commons[i].fused_parent.event = d.EVENT_OP_ENABLED
                commons[parent].dependency_count += 1
            last[o.op_type] = i
        return commons

    # ---- output --------------------------------------------------------------------------------
    def build(self) -> bytes:
        commons = self._graph()
        legacy = self.legacy
        ops = b"".join(o.op.encode(legacy).ljust(d.OPERATION_CONTAINER_SIZE, b"\0") for o in self.ops)
        surfs = b"".join(o.surface.encode(legacy).ljust(d.SURFACE_CONTAINER_SIZE, b"\0") for o in self.ops)
        deps = b"".join(c.encode() for c in commons)
        luts = b"".join(p.encode() for p in self.luts)
        heads = [-1] * 6
        for i, o in reversed(list(enumerate(self.ops))):
            heads[o.op_type] = i
        net = d.NetworkDesc(operation_desc_index=1, surface_desc_index=2, dependency_graph_index=3,
                            lut_data_index=4 if self.luts else -1, roi_array_index=-1, surface_index=-1,
                            stat_list_index=-1, reserved1=-1, op_head=heads, num_rois=1, num_operations=len(self.ops),
                            num_luts=len(self.luts), num_addresses=len(self._addresses), input_layer=0)
        for slot, (data, sub) in enumerate(((net.encode(), fbs.SUB_NETWORK), (ops, fbs.SUB_OPS),
                                           (surfs, fbs.SUB_SURFS), (deps, fbs.SUB_DEPGRAPH),
                                           (luts, fbs.SUB_LUTS))):
            mem = self.ld.memories[slot]
            mem.size = max(len(data), 4)
            self.ld.addresses[slot].size = mem.size
            blob = self.ld.blob(mem.contents[0])
            blob.data, blob.size = data, len(data)
            blob.interface, blob.sub_interface, blob.version = fbs.IF_DLA1, sub, self._version
        dla = [None] if self.ops or not self.emu_tasks else []  # None: the DLA task
        order = [t for t in self.emu_tasks if t[2]] + dla + [t for t in self.emu_tasks if not t[2]]
        self.ld.tasks = [fbs.TaskEntry(id=i, interface=fbs.IF_DLA1, instance=-1, address_list=list(self._addresses))
                         if t is None else self._emu_entry(t[0], t[1], i) for i, t in enumerate(order)]
        self.ld.submits = [fbs.SubmitEntry(id=i, task_id=[i]) for i in range(len(order))]
        return fbs.build(self.ld)
