"""The kmd firmware's task descriptors (nvdla/sw ``kmd/firmware/include/dla_interface.h``) as Python
structs that decode from and encode to the exact bytes a loadable carries.

Every struct is packed little-endian (``__packed __aligned(4)``: no padding between members, sizes that
are multiples of 4). One layout difference exists in the wild: NVDLA's published regression loadables
were written before ``dla_data_cube`` gained its ``offset`` member (28 B instead of 32 B), so every
struct that holds a cube has two layouts; ``legacy=True`` selects the older one (NOTES §6).
"""
from __future__ import annotations

import struct
from dataclasses import dataclass, field, fields, make_dataclass
from typing import Any, ClassVar, Iterable

__all__ = [
    "DescriptorError", "Struct", "NetworkDesc", "Consumer", "CommonOpDesc", "DataCube", "CvtParam",
    "ConvSurfaceDesc", "ConvOpDesc", "SdpOp", "SdpSurfaceDesc", "SdpOpDesc", "PdpSurfaceDesc", "PdpOpDesc",
    "CdpSurfaceDesc", "CdpOpDesc", "BdmaTransferDesc", "BdmaSurfaceDesc", "BdmaOpDesc", "RubikSurfaceDesc",
    "RubikOpDesc", "LutParam", "OP_BDMA", "OP_CONV", "OP_SDP", "OP_PDP", "OP_CDP", "OP_RUBIK", "OP_NAMES",
    "OPERATION_CONTAINER_SIZE", "SURFACE_CONTAINER_SIZE", "MEM_MC", "MEM_CV", "MEM_HW",
    "EVENT_OP_COMPLETED", "EVENT_OP_PROGRAMMED", "EVENT_OP_ENABLED", "EVENT_CDMA_WT_DONE", "EVENT_CDMA_DT_DONE",
]

OP_BDMA, OP_CONV, OP_SDP, OP_PDP, OP_CDP, OP_RUBIK = range(6)
OP_NAMES = ("BDMA", "CONV", "SDP", "PDP", "CDP", "RUBIK")
NUM_OPS = 6
MEM_MC, MEM_CV, MEM_HW = 0, 1, 2
EVENT_OP_COMPLETED, EVENT_OP_PROGRAMMED, EVENT_OP_ENABLED, EVENT_CDMA_WT_DONE, EVENT_CDMA_DT_DONE = 1, 2, 3, 4, 5

#: Sizes of the unions the op and surface arrays are made of (the same in both cube layouts: the BDMA
#: surface, which holds no cube, is the largest surface member).
OPERATION_CONTAINER_SIZE = 116
SURFACE_CONTAINER_SIZE = 644


class DescriptorError(ValueError):
    """Descriptor bytes that cannot be decoded (too short, out of range)."""


_SCALAR = {"b", "B", "h", "H", "i", "I", "q", "Q"}


@dataclass(frozen=True)
class _Member:
    name: str
    kind: Any  # a struct format letter or a Struct subclass
    count: int | None = None  # None: a single value; n: a list of n
    modern_only: bool = False  # absent from the legacy (pre-offset) layout


class Struct:
    """Base of the generated descriptor dataclasses."""

    MEMBERS: ClassVar[tuple[_Member, ...]] = ()

    @classmethod
    def nbytes(cls, legacy: bool = False) -> int:
        total = 0
        for m in cls._members(legacy):
            one = struct.calcsize("<" + m.kind) if isinstance(m.kind, str) else m.kind.nbytes(legacy)
            total += one * (m.count or 1)
        return total

    @classmethod
    def _members(cls, legacy: bool) -> Iterable[_Member]:
        return (m for m in cls.MEMBERS if not (legacy and m.modern_only))

    @classmethod
    def decode(cls, buf: bytes | memoryview, offset: int = 0, legacy: bool = False) -> "Struct":
        need = cls.nbytes(legacy)
        if offset < 0 or offset + need > len(buf):
            raise DescriptorError(f"{cls.__name__} at byte {offset} needs {need} bytes, the blob has {len(buf)}")
        values, at = {}, offset
        for m in cls._members(legacy):
            items = []
            for _ in range(m.count or 1):
                if isinstance(m.kind, str):
                    (v,) = struct.unpack_from("<" + m.kind, buf, at)
                    at += struct.calcsize("<" + m.kind)
                else:
                    v = m.kind.decode(buf, at, legacy)
                    at += m.kind.nbytes(legacy)
                items.append(v)
            values[m.name] = items if m.count else items[0]
        return cls(**values)

    def encode(self, legacy: bool = False) -> bytes:
        out = bytearray()
        for m in self._members(legacy):
            value = getattr(self, m.name)
            items = value if m.count else [value]
            if m.count and len(items) != m.count:
                raise DescriptorError(f"{type(self).__name__}.{m.name}: needs {m.count} values, got {len(items)}")
            for v in items:
                if isinstance(m.kind, str):
                    try:
                        out += struct.pack("<" + m.kind, int(v))
                    except struct.error as exc:
                        raise DescriptorError(f"{type(self).__name__}.{m.name} = {v}: {exc}") from None
                else:
                    out += v.encode(legacy)
        return bytes(out)

    def replace(self, **changes: Any) -> "Struct":
        values = {f.name: getattr(self, f.name) for f in fields(self)}  # type: ignore[arg-type]
        values.update(changes)
        return type(self)(**values)


def _struct(name: str, members: list[tuple]) -> type[Struct]:
    """A dataclass subclass of Struct whose members default to 0 (lists of 0, nested defaults)."""
    ms = tuple(_Member(*m) for m in members)
    specs = []
    for m in ms:
        if m.count:
            make = (lambda k=m.kind, n=m.count: [k() for _ in range(n)]) if isinstance(m.kind, type) \
                else (lambda n=m.count: [0] * n)
            specs.append((m.name, list, field(default_factory=make)))
        elif isinstance(m.kind, type):
            specs.append((m.name, m.kind, field(default_factory=m.kind)))
        else:
            assert m.kind in _SCALAR, m.kind
            specs.append((m.name, int, field(default=0)))
    cls = make_dataclass(name, specs, bases=(Struct,))
    cls.MEMBERS = ms
    cls.__module__ = __name__
    return cls


# ---- network and dependency graph ------------------------------------------------------------------------
NetworkDesc = _struct("NetworkDesc", [
    ("operation_desc_index", "h"), ("surface_desc_index", "h"), ("dependency_graph_index", "h"),
    ("lut_data_index", "h"), ("roi_array_index", "h"), ("surface_index", "h"), ("stat_list_index", "h"),
    ("reserved1", "h"), ("op_head", "h", NUM_OPS), ("num_rois", "H"), ("num_operations", "H"), ("num_luts", "H"),
    ("num_addresses", "H"), ("input_layer", "h"), ("dynamic_roi", "B"), ("reserved0", "B"),
])
Consumer = _struct("Consumer", [("index", "h"), ("event", "B"), ("res", "B")])
CommonOpDesc = _struct("CommonOpDesc", [
    ("index", "h"), ("roi_index", "b"), ("op_type", "B"), ("dependency_count", "B"), ("reserved0", "B", 3),
    ("consumers", Consumer, NUM_OPS), ("fused_parent", Consumer),
])

# ---- surfaces --------------------------------------------------------------------------------------------
DataCube = _struct("DataCube", [
    ("type", "H"), ("address", "h"), ("offset", "I", None, True), ("size", "I"), ("width", "H"),
    ("height", "H"), ("channel", "H"), ("reserved0", "H"), ("line_stride", "I"), ("surf_stride", "I"),
    ("plane_stride", "I"),
])
CvtParam = _struct("CvtParam", [("scale", "h"), ("truncate", "B"), ("enable", "B"), ("offset", "i")])

ConvSurfaceDesc = _struct("ConvSurfaceDesc", [
    ("weight_data", DataCube), ("wmb_data", DataCube), ("wgs_data", DataCube), ("src_data", DataCube),
    ("dst_data", DataCube), ("offset_u", "q"), ("in_line_uv_stride", "I"),
])
ConvOpDesc = _struct("ConvOpDesc", [
    ("conv_mode", "B"), ("data_reuse", "B"), ("weight_reuse", "B"), ("skip_data_rls", "B"),
    ("skip_weight_rls", "B"), ("reserved0", "B"), ("entry_per_slice", "H"), ("data_format", "B"),
    ("pixel_mapping", "B"), ("fetch_grain", "H"), ("reserved_b", "B", 8), ("batch", "B"), ("weight_format", "B"),
    ("data_bank", "B"), ("weight_bank", "B"), ("batch_stride", "I"), ("post_extension", "B"),
    ("pixel_override", "B"), ("release", "H"), ("input_width_csc", "H"), ("input_height_csc", "H"),
    ("input_channel_csc", "H"), ("kernel_width_csc", "H"), ("kernel_height_csc", "H"),
    ("kernel_channel_csc", "H"), ("input_width_cmac", "H"), ("input_height_cmac", "H"),
    ("bytes_per_kernel", "I"), ("mean_ry", "h"), ("mean_gu", "h"), ("mean_bv", "h"), ("mean_ax", "h"),
    ("mean_format", "B"), ("conv_stride_x", "B"), ("conv_stride_y", "B"), ("pad_x_left", "B"),
    ("pad_x_right", "B"), ("pad_y_top", "B"), ("pad_y_bottom", "B"), ("dilation_x", "B"), ("dilation_y", "B"),
    ("reserved2", "B", 2), ("pra_truncate", "B"), ("in_precision", "B"), ("out_precision", "B"),
    ("pad_val", "h"), ("in_cvt", CvtParam), ("out_cvt", CvtParam),
])

SdpSurfaceDesc = _struct("SdpSurfaceDesc", [
    ("src_data", DataCube), ("x1_data", DataCube), ("x2_data", DataCube), ("y_data", DataCube),
    ("dst_data", DataCube),
])
SdpOp = _struct("SdpOp", [
    ("enable", "B"), ("alu_type", "B"), ("type", "B"), ("mode", "B"), ("act", "B"), ("shift_value", "B"),
    ("truncate", "B"), ("precision", "B"), ("alu_operand", "i"), ("mul_operand", "i"),
    ("alu_cvt", CvtParam), ("mul_cvt", CvtParam),
])
SdpOpDesc = _struct("SdpOpDesc", [
    ("src_precision", "B"), ("dst_precision", "B"), ("lut_index", "h"), ("out_cvt", CvtParam),
    ("conv_mode", "B"), ("batch_num", "B"), ("reserved0", "H"), ("batch_stride", "I"),
    ("x1_op", SdpOp), ("x2_op", SdpOp), ("y_op", SdpOp),
])

PdpSurfaceDesc = _struct("PdpSurfaceDesc", [("src_data", DataCube), ("dst_data", DataCube)])
PdpOpDesc = _struct("PdpOpDesc", [
    ("partial_in_width_first", "H"), ("partial_in_width_mid", "H"), ("partial_in_width_last", "H"),
    ("partial_width_first", "H"), ("partial_width_mid", "H"), ("partial_width_last", "H"),
    ("split_num", "B"), ("pool_mode", "B"), ("pool_width", "B"), ("pool_height", "B"), ("stride_x", "B"),
    ("stride_y", "B"), ("pad_left", "B"), ("pad_right", "B"), ("pad_top", "B"), ("pad_bottom", "B"),
    ("precision", "B"), ("reserved0", "B"), ("padding_value", "i", 7),
])

CdpSurfaceDesc = _struct("CdpSurfaceDesc", [("src_data", DataCube), ("dst_data", DataCube)])
CdpOpDesc = _struct("CdpOpDesc", [
    ("in_precision", "B"), ("out_precision", "B"), ("lut_index", "h"), ("in_cvt", CvtParam),
    ("out_cvt", CvtParam), ("local_size", "B"), ("bypass_sqsum", "B"), ("bypass_out_mul", "B"),
    ("reserved0", "B"),
])

BdmaTransferDesc = _struct("BdmaTransferDesc", [
    ("source_address", "h"), ("destination_address", "h"), ("line_size", "I"), ("line_repeat", "I"),
    ("source_line", "I"), ("destination_line", "I"), ("surface_repeat", "I"), ("source_surface", "I"),
    ("destination_surface", "I"),
])
BdmaSurfaceDesc = _struct("BdmaSurfaceDesc", [
    ("source_type", "B"), ("destination_type", "B"), ("num_transfers", "H"), ("transfers", BdmaTransferDesc, 20),
])
BdmaOpDesc = _struct("BdmaOpDesc", [("num_transfers", "H"), ("reserved0", "H")])

RubikSurfaceDesc = _struct("RubikSurfaceDesc", [("src_data", DataCube), ("dst_data", DataCube)])
RubikOpDesc = _struct("RubikOpDesc", [("mode", "B"), ("precision", "B"), ("stride_x", "B"), ("stride_y", "B")])

# ---- LUTs ------------------------------------------------------------------------------------------------
# dla_lut_offset and dla_slope are unions; they are kept as their raw members (exp_offset/frac_bits
# are the low byte of a 16-bit slot; a slope is scale:int16 + shifter:int8 or an fp16 word).
LutOffset = _struct("LutOffset", [("value", "b"), ("pad", "B")])
LutSlope = _struct("LutSlope", [("scale", "h"), ("shifter", "b"), ("reserved0", "B")])
LutParam = _struct("LutParam", [
    ("linear_exp_table", "h", 65), ("linear_only_table", "h", 257),
    ("linear_exp_offset", LutOffset), ("linear_only_offset", LutOffset),
    ("linear_exp_start", "Q"), ("linear_exp_end", "Q"), ("linear_only_start", "Q"), ("linear_only_end", "Q"),
    ("linear_exp_underflow_slope", LutSlope), ("linear_exp_overflow_slope", LutSlope),
    ("linear_only_underflow_slope", LutSlope), ("linear_only_overflow_slope", LutSlope),
    ("hybrid_priority", "B"), ("underflow_priority", "B"), ("overflow_priority", "B"), ("method", "B"),
])

#: Per op type: (operation desc, surface desc) classes inside the containers.
OP_STRUCTS: dict[int, tuple[type[Struct], type[Struct]]] = {
    OP_BDMA: (BdmaOpDesc, BdmaSurfaceDesc), OP_CONV: (ConvOpDesc, ConvSurfaceDesc),
    OP_SDP: (SdpOpDesc, SdpSurfaceDesc), OP_PDP: (PdpOpDesc, PdpSurfaceDesc),
    OP_CDP: (CdpOpDesc, CdpSurfaceDesc), OP_RUBIK: (RubikOpDesc, RubikSurfaceDesc),
}


def _check_sizes() -> None:
    assert NetworkDesc.nbytes() == 40 and CommonOpDesc.nbytes() == 36 and LutParam.nbytes() == 700
    assert DataCube.nbytes() == 32 and DataCube.nbytes(legacy=True) == 28
    for legacy in (False, True):
        assert max(o.nbytes(legacy) for o, _ in OP_STRUCTS.values()) == OPERATION_CONTAINER_SIZE
        assert max(s.nbytes(legacy) for _, s in OP_STRUCTS.values()) == SURFACE_CONTAINER_SIZE


_check_sizes()
