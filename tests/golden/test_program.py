"""``golden.program.RegProgram``: the register program every emitter, firmware model and layer test builds.
Strict programs (the compiler's) refuse whole-register values that do not fit the register's fields, since the
hardware would keep only the field bits and run a different layer; relocated addresses keep their region."""
from __future__ import annotations

import pytest

from golden.config import get_config
from golden.errors import RegisterError
from golden.program import RegProgram, loc_add

HW = get_config("nv_small")


def test_loc_add_offsets_absolute_and_relocated_addresses() -> None:
    """An address is bytes, or (region, offset) placed by the runtime: adding moves the offset, never the
    region."""
    assert loc_add(0x8000_0000, 0x40) == 0x8000_0040
    assert loc_add((3, 0x100), 0x40) == (3, 0x140)
    assert loc_add((0, 0), 7) == (0, 7)


def test_relocated_address_write_keeps_region_and_offset() -> None:
    """A relocated ``*_LOW`` write carries value 0 and its (region, offset) for the runtime to resolve; an
    absolute one is the low 32 bits of the address."""
    p = RegProgram(HW)
    p.addr("PDP", "D_SRC_BASE_ADDR_LOW", (2, 0x1F40))
    p.addr("PDP", "D_DST_BASE_ADDR_LOW", 0x1_8000_0040)
    src, dst = p.writes
    assert (src.full_name, src.value, src.reloc) == ("NVDLA_PDP.D_SRC_BASE_ADDR_LOW_0", 0, (2, 0x1F40))
    assert (dst.value, dst.reloc) == (0x8000_0040, None)
    with pytest.raises(ValueError, match=r"NVDLA_PDP\.D_SRC_BASE_ADDR_LOW_0 is relocated against region 2"):
        p.absolute()


def test_strict_whole_values_must_fit_the_fields() -> None:
    """PDP.D_DATA_CUBE_IN_CHANNEL has one 13-bit field: 8191 fits, 8192 would run a 1-channel layer on the
    hardware (only bits [12:0] are kept), so a strict program refuses it naming the field."""
    p = RegProgram(HW, strict=True)
    p.reg("PDP", "D_DATA_CUBE_IN_CHANNEL", 8191)
    assert p.absolute() == [("NVDLA_PDP.D_DATA_CUBE_IN_CHANNEL_0", 8191)]
    with pytest.raises(RegisterError, match=r"8192 does not fit PDP\.D_DATA_CUBE_IN_CHANNEL \(CUBE_IN_CHANNEL\[12:0\]\)"):
        p.reg("PDP", "D_DATA_CUBE_IN_CHANNEL", 8192)
    # A multi-field register: any value inside the union of its fields is accepted, a bit outside is not.
    kernel = (1 << 16) | (1 << 8) | 2  # KERNEL_STRIDE_WIDTH=1, KERNEL_HEIGHT=1, KERNEL_WIDTH=2
    p.reg("PDP", "D_POOLING_KERNEL_CFG", kernel)
    assert p.writes[-1].value == kernel
    with pytest.raises(RegisterError, match="KERNEL_WIDTH"):
        p.reg("PDP", "D_POOLING_KERNEL_CFG", 1 << 31)
    # Non-strict programs (NVDLA's firmware writing descriptor words) pass undefined bits through.
    loose = RegProgram(HW)
    loose.reg("PDP", "D_DATA_CUBE_IN_CHANNEL", 8192)
    assert loose.writes[-1].value == 8192


def test_strict_negative_values_must_fit_the_one_signed_field() -> None:
    """A negative whole value is a signed operand (SDP's 16-bit BS_ALU_OPERAND): -1 and -32768 fit and are
    written as two's complement, -32769 does not fit 16 bits and is refused."""
    p = RegProgram(HW, strict=True)
    p.reg("SDP", "D_DP_BS_ALU_SRC_VALUE", -1)
    p.reg("SDP", "D_DP_BS_ALU_SRC_VALUE", -32768)
    operand = p.writes[0].register.field("BS_ALU_OPERAND")
    assert [operand.decode_signed(w.value) for w in p.writes] == [-1, -32768]
    with pytest.raises(RegisterError, match="BS_ALU_OPERAND"):
        p.reg("SDP", "D_DP_BS_ALU_SRC_VALUE", -32769)


def test_absolute_address_write_keeps_every_low_bit() -> None:
    """An absolute ``*_LOW`` word is the address's low 32 bits as they are, odd ones included: any alignment
    (nv_full's [31:5] fields) is applied by the DMA that reads the word, not by the program."""
    p = RegProgram(HW)
    p.addr("SDP", "D_DST_BASE_ADDR_LOW", 0x2_8000_0041)
    p.addr("PDP", "D_DST_BASE_ADDR_LOW", 0xFFFF_FFFF)
    assert p.absolute() == [("NVDLA_SDP.D_DST_BASE_ADDR_LOW_0", 0x8000_0041),
                            ("NVDLA_PDP.D_DST_BASE_ADDR_LOW_0", 0xFFFF_FFFF)]
