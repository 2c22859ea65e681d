"""NVDLA flatbuffer loadables: descriptor layouts, the bounds-checked reader vs the writer, and how
bad files are refused."""
from __future__ import annotations

import random

import pytest

from runtime.nvdla import descriptors as d
from runtime.nvdla import fbs
from runtime.nvdla.run import NvdlaNetwork, NvdlaRunError
from runtime.nvdla.writer import LoadableBuilder


def test_descriptor_sizes_match_dla_interface_h():
    assert d.NetworkDesc.nbytes() == 40
    assert d.CommonOpDesc.nbytes() == 36
    assert d.LutParam.nbytes() == 700
    assert (d.DataCube.nbytes(), d.DataCube.nbytes(legacy=True)) == (32, 28)
    assert d.SdpOpDesc.nbytes() == d.OPERATION_CONTAINER_SIZE == 116
    assert d.BdmaSurfaceDesc.nbytes() == d.SURFACE_CONTAINER_SIZE == 644
    assert (d.ConvSurfaceDesc.nbytes(), d.ConvSurfaceDesc.nbytes(legacy=True)) == (172, 152)


def test_cube_offset_exists_only_in_the_current_layout():
    cube = d.DataCube(type=0, address=3, offset=0x40, size=512, width=8, height=8, channel=8, line_stride=64,
                      surf_stride=512)
    cur, old = cube.encode(), cube.encode(legacy=True)
    assert cur[4:8] == (0x40).to_bytes(4, "little") and cur[8:12] == (512).to_bytes(4, "little")
    assert old[4:8] == (512).to_bytes(4, "little")  # size follows address directly
    back = d.DataCube.decode(old, legacy=True)
    assert back.offset == 0 and back.size == 512 and back.surf_stride == 512
    assert d.DataCube.decode(cur) == cube


def test_decode_refuses_short_buffers():
    with pytest.raises(d.DescriptorError, match="needs 36 bytes"):
        d.CommonOpDesc.decode(bytes(30))
    with pytest.raises(d.DescriptorError, match="PdpOpDesc.padding_value"):
        d.PdpOpDesc(padding_value=[0] * 6).encode()


def _pdp_loadable(legacy: bool = False) -> bytes:
    b = LoadableBuilder(legacy=legacy)
    src = b.buffer("src", 512, bytes(range(256)) * 2)
    dst = b.buffer("dst", 128)
    cube = dict(width=8, height=8, channel=8, line_stride=64, surf_stride=512, size=512)
    b.op(d.OP_PDP, d.PdpOpDesc(split_num=1, pool_mode=1, pool_width=1, pool_height=1, stride_x=2, stride_y=2),
         d.PdpSurfaceDesc(src_data=d.DataCube(address=src, **cube),
                          dst_data=d.DataCube(address=dst, width=4, height=4, channel=8, line_stride=32,
                                              surf_stride=128, size=128)))
    b.output(dst, fbs.TensorDesc(name="out", id=0, mem_id=0, size=128, c=8, h=4, w=4,
                                 strides=[1, 32, 128, 0, 0, 0, 0, 0]))
    return b.build()


def test_writer_and_reader_round_trip():
    blob = _pdp_loadable()
    ld = fbs.parse(blob)
    assert fbs.parse(fbs.build(ld)) == ld
    assert (ld.version.major, ld.version.minor) == (0, 7)
    assert [m.flags & fbs.MEM_OUTPUT for m in ld.memories].count(fbs.MEM_OUTPUT) == 1
    net = d.NetworkDesc.decode(next(x for x in ld.blobs if x.sub_interface == fbs.SUB_NETWORK).data)
    assert net.num_operations == 1 and net.op_head[d.OP_PDP] == 0 and net.lut_data_index == -1
    assert not NvdlaNetwork(ld).legacy and NvdlaNetwork(fbs.parse(_pdp_loadable(legacy=True))).legacy


def test_every_truncation_is_a_clean_error():
    """No prefix of a valid file may crash the reader with anything but NvdlaLoadableError."""
    blob = _pdp_loadable()
    for cut in range(0, len(blob), 7):
        try:
            ld = fbs.parse(blob[:cut])
        except fbs.NvdlaLoadableError:
            continue
        NvdlaNetwork(ld)  # a prefix that still parses must at least pass or fail the checks cleanly


def test_random_corruption_is_a_clean_error():
    blob = bytearray(_pdp_loadable())
    rng = random.Random(5)
    for _ in range(300):
        bad = bytearray(blob)
        for _ in range(4):
            bad[rng.randrange(len(bad))] = rng.randrange(256)
        try:
            NvdlaNetwork(fbs.parse(bytes(bad)))
        except (fbs.NvdlaLoadableError, NvdlaRunError):
            pass


def test_wrong_version_is_refused():
    ld = fbs.parse(_pdp_loadable())
    ld.version = fbs.Version(1, 0, 0)
    with pytest.raises(fbs.NvdlaLoadableError, match=r"version 1\.0\.0, this reader supports 0\.7\.x"):
        fbs.parse(fbs.build(ld))


def test_dangling_references_are_named():
    ld = fbs.parse(_pdp_loadable())
    ld.tasks[0].address_list.append(99)
    with pytest.raises(NvdlaRunError, match=r"task 0: address_list\[7\] = 99 does not exist"):
        NvdlaNetwork(ld)
    ld = fbs.parse(_pdp_loadable())
    ld.addresses[5].mem_id = 42
    with pytest.raises(NvdlaRunError, match="address 5: memory 42 does not exist"):
        NvdlaNetwork(ld)
    ld = fbs.parse(_pdp_loadable())
    ld.memories[5].contents = ["nope"]
    with pytest.raises(NvdlaRunError, match="memory 5: content blob 'nope' does not exist"):
        NvdlaNetwork(ld)


def test_address_entries_past_their_memory_are_named():
    """An address entry of 2^40 bytes (or at an offset past its memory) is a corrupt loadable, refused before
    anything runs instead of being clamped to the memory."""
    ld = fbs.parse(_pdp_loadable())
    a = ld.addresses[5]
    a.size = 1 << 40
    with pytest.raises(NvdlaRunError, match=rf"address 5: {1 << 40} bytes at offset {a.offset} do not fit memory "
                                            rf"{a.mem_id} \("):
        NvdlaNetwork(ld)
    ld = fbs.parse(_pdp_loadable())
    ld.addresses[5].offset = 1 << 40
    with pytest.raises(NvdlaRunError, match=rf"address 5: offset {1 << 40} is past memory"):
        NvdlaNetwork(ld)
