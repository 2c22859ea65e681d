"""Golden model vs the plain-loop reference math on random int16 operations (nv_full).

Register programs are written here by name (the compiler's codegen emits int8 only); the memory image is
packed with plain numpy from the layout rule of NVDLA_NOTES §3 (2-byte little-endian elements, 16 channels
per 32-byte atom), independently of ``golden.layout``.
"""
from __future__ import annotations

import numpy as np
import pytest

from golden.config import NV_FULL
from golden.dla import Dla
from regressions.lib.reference.conv import cdma_input_cvt, direct_conv
from regressions.lib.reference.sdp import SdpParams, SdpXParams, sdp

ATOM = 16  # int16 channels per 32-byte atom
SRC, WEIGHTS, DST = 0x8000_0000, 0x8100_0000, 0x8200_0000


def pack_int16(x: np.ndarray) -> bytes:
    """(C, H, W) int16 cube, line- and surface-packed, padding lanes zero."""
    c, h, w = x.shape
    surfaces = -(-c // ATOM)
    out = np.zeros((surfaces, h, w, ATOM), dtype="<i2")
    for ch in range(c):
        out[ch // ATOM, :, :, ch % ATOM] = x[ch]
    return out.tobytes()


def unpack_int16(raw: bytes, c: int, h: int, w: int) -> np.ndarray:
    """All padded lanes of a packed int16 cube as (C_pad, H, W)."""
    surfaces = -(-c // ATOM)
    cube = np.frombuffer(raw, dtype="<i2").reshape(surfaces, h, w, ATOM)
    return cube.transpose(0, 3, 1, 2).reshape(surfaces * ATOM, h, w).astype(np.int64)


def pack_weights_int16(w: np.ndarray) -> bytes:
    """Direct-conv weight order (NOTES §3): kernel groups of 16, channel groups of 64, r, s, k, c."""
    k_n, c_n, r_n, s_n = w.shape
    out = []
    for kg in range(0, k_n, 16):
        ks = range(kg, min(kg + 16, k_n))
        for cg in range(0, c_n, 64):
            cs = range(cg, min(cg + 64, c_n))
            for r in range(r_n):
                for s in range(s_n):
                    for k in ks:
                        for c in cs:
                            out.append(int(w[k, c, r, s]))
    return np.array(out, dtype="<i2").tobytes()


def entries_per_slice(c: int, w: int) -> int:
    """CBUF entries of one line, nvdlav1 cmod rule: 4 atoms of 32 B per 128 B entry."""
    atoms = -(-c * 2 // 32)
    eps = (atoms // 4) * w
    eps += {0: 0, 1: (w + 3) // 4, 2: (w + 1) // 2, 3: w}[atoms % 4]
    return eps


# ---- SDP ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("seed", range(6))
def test_sdp_int16_x1_x2_cvt(seed: int) -> None:
    rng = np.random.default_rng(seed)
    c, h, w = int(rng.integers(1, 40)), int(rng.integers(1, 4)), int(rng.integers(1, 5))
    x = rng.integers(-32768, 32768, size=(c, h, w))

    def stage() -> SdpXParams:
        return SdpXParams(
            bypass=bool(rng.integers(0, 4) == 0), alu_bypass=bool(rng.integers(0, 2)),
            alu_algo=int(rng.integers(0, 3)), alu_operand=int(rng.integers(-32768, 32768)),
            alu_shift=int(rng.integers(0, 8)), mul_bypass=bool(rng.integers(0, 2)),
            mul_prelu=bool(rng.integers(0, 2)), mul_operand=int(rng.integers(-32768, 32768)),
            mul_shift=int(rng.integers(0, 20)), relu_bypass=bool(rng.integers(0, 2)),
        )

    prm = SdpParams(x1=stage(), x2=stage(), cvt_offset=int(rng.integers(-1000, 1000)),
                    cvt_scale=int(rng.integers(-300, 300)), cvt_shift=int(rng.integers(0, 12)))
    want = sdp(x, prm, out_bits=16)

    dla = Dla(NV_FULL)
    dla.mem.write(SRC, pack_int16(x))
    line, surf = w * 32, h * w * 32
    for unit in ("SDP_RDMA", "SDP"):
        dla.write(f"{unit}.D_DATA_CUBE_WIDTH", w - 1)
        dla.write(f"{unit}.D_DATA_CUBE_HEIGHT", h - 1)
        dla.write(f"{unit}.D_DATA_CUBE_CHANNEL", c - 1)
    dla.write("SDP_RDMA.D_SRC_BASE_ADDR_LOW", SRC)
    dla.write("SDP_RDMA.D_SRC_LINE_STRIDE", line)
    dla.write("SDP_RDMA.D_SRC_SURFACE_STRIDE", surf)
    dla.write("SDP_RDMA.D_SRC_DMA_CFG", 1)
    dla.write("SDP_RDMA.D_FEATURE_MODE_CFG", IN_PRECISION="INT16", PROC_PRECISION="INT16", OUT_PRECISION="INT16")
    for p in ("B", "N", "E"):
        dla.write(f"SDP_RDMA.D_{p}RDMA_CFG", 1)
    dla.write("SDP.D_DST_BASE_ADDR_LOW", DST)
    dla.write("SDP.D_DST_LINE_STRIDE", line)
    dla.write("SDP.D_DST_SURFACE_STRIDE", surf)
    dla.write("SDP.D_DST_DMA_CFG", 1)
    for name, st in (("BS", prm.x1), ("BN", prm.x2)):
        dla.write(f"SDP.D_DP_{name}_CFG", int(st.bypass) | int(st.alu_bypass) << 1 | st.alu_algo << 2
                  | int(st.mul_bypass) << 4 | int(st.mul_prelu) << 5 | int(st.relu_bypass) << 6)
        dla.write(f"SDP.D_DP_{name}_ALU_CFG", st.alu_shift << 8)
        dla.write(f"SDP.D_DP_{name}_ALU_SRC_VALUE", st.alu_operand & 0xFFFF)
        dla.write(f"SDP.D_DP_{name}_MUL_CFG", st.mul_shift << 8)
        dla.write(f"SDP.D_DP_{name}_MUL_SRC_VALUE", st.mul_operand & 0xFFFF)
    dla.write("SDP.D_DP_EW_CFG", 1)
    dla.write("SDP.D_DATA_FORMAT", PROC_PRECISION="INT16", OUT_PRECISION="INT16")
    dla.write("SDP.D_CVT_OFFSET", prm.cvt_offset & 0xFFFFFFFF)
    dla.write("SDP.D_CVT_SCALE", prm.cvt_scale & 0xFFFF)
    dla.write("SDP.D_CVT_SHIFT", prm.cvt_shift)
    dla.write("SDP_RDMA.D_OP_ENABLE", 1)
    dla.write("SDP.D_OP_ENABLE", 1)

    got = unpack_int16(dla.mem.read(DST, -(-c // ATOM) * surf).tobytes(), c, h, w)
    np.testing.assert_array_equal(got[:c], want)
    # Padding lanes are computed from the zero lanes SDP_RDMA reads (NOTES §8.3).
    pad = sdp(np.zeros((1, 1, 1), dtype=np.int64), prm, out_bits=16)[0, 0, 0]
    assert (got[c:] == pad).all()


# ---- CONV ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("seed", range(6))
def test_conv_int16(seed: int) -> None:
    rng = np.random.default_rng(100 + seed)
    c, h, w = int(rng.integers(1, 80)), int(rng.integers(1, 6)), int(rng.integers(1, 6))
    k, r, s = int(rng.integers(1, 40)), int(rng.integers(1, min(h, 3) + 1)), int(rng.integers(1, min(w, 3) + 1))
    sy, sx = int(rng.integers(1, 3)), int(rng.integers(1, 3))
    pt, pl = int(rng.integers(0, r)), int(rng.integers(0, s))
    oh, ow = (h + 2 * pt - r) // sy + 1, (w + 2 * pl - s) // sx + 1
    pad_value = int(rng.integers(-32768, 32768))
    x = rng.integers(-32768, 32768, size=(c, h, w))
    wt = rng.integers(-32768, 32768, size=(k, c, r, s))
    clip = int(rng.integers(8, 17))
    cvt = (int(rng.integers(-100, 100)), int(rng.integers(1, 50)), int(rng.integers(0, 10))) if seed % 2 else None
    off, scale, shift = int(rng.integers(-5000, 5000)), int(rng.integers(1, 4)), int(rng.integers(4, 10))

    xin = cdma_input_cvt(x, *cvt, out_bits=16) if cvt else x
    acc = direct_conv(xin, wt, stride=(sy, sx), pad=(pt, pl), pad_value=pad_value & 0xFFFF, out_hw=(oh, ow),
                      clip_truncate=clip, precision="int16")
    want = sdp(acc, SdpParams(cvt_offset=off, cvt_scale=scale, cvt_shift=shift), out_bits=16)

    dla = Dla(NV_FULL)
    dla.mem.write(SRC, pack_int16(x))
    wbytes = pack_weights_int16(wt)
    dla.mem.write(WEIGHTS, wbytes)
    wsize = -(-len(wbytes) // 128) * 128
    eps = entries_per_slice(c, w)
    banks = -(-h * eps // 256)
    for unit in ("CDMA", "CSC"):
        dla.write(f"{unit}.D_MISC_CFG", IN_PRECISION="INT16", PROC_PRECISION="INT16")
        dla.write(f"{unit}.D_ENTRY_PER_SLICE", eps - 1)
        dla.write(f"{unit}.D_BANK", DATA_BANK=banks - 1, WEIGHT_BANK=15 - banks)
        dla.write(f"{unit}.D_WEIGHT_BYTES", wsize)
    for unit in ("CMAC_A", "CMAC_B", "CACC"):
        dla.write(f"{unit}.D_MISC_CFG", PROC_PRECISION="INT16")
    dla.write("CDMA.D_DATAIN_SIZE_0", DATAIN_WIDTH=w - 1, DATAIN_HEIGHT=h - 1)
    dla.write("CDMA.D_DATAIN_SIZE_1", DATAIN_CHANNEL=c - 1)
    dla.write("CDMA.D_DAIN_RAM_TYPE", 1)
    dla.write("CDMA.D_DAIN_ADDR_LOW_0", SRC)
    dla.write("CDMA.D_LINE_STRIDE", w * 32)
    dla.write("CDMA.D_SURF_STRIDE", h * w * 32)
    dla.write("CDMA.D_DAIN_MAP", LINE_PACKED=1, SURF_PACKED=1)
    dla.write("CDMA.D_WEIGHT_SIZE_0", BYTE_PER_KERNEL=r * s * c * 2 - 1)
    dla.write("CDMA.D_WEIGHT_SIZE_1", WEIGHT_KERNEL=k - 1)
    dla.write("CDMA.D_WEIGHT_RAM_TYPE", 1)
    dla.write("CDMA.D_WEIGHT_ADDR_LOW", WEIGHTS)
    if cvt:
        dla.write("CDMA.D_CVT_CFG", CVT_EN=1, CVT_TRUNCATE=cvt[2])
        dla.write("CDMA.D_CVT_OFFSET", cvt[0] & 0xFFFF)
        dla.write("CDMA.D_CVT_SCALE", cvt[1] & 0xFFFF)
    dla.write("CSC.D_DATAIN_SIZE_EXT_0", DATAIN_WIDTH_EXT=w - 1, DATAIN_HEIGHT_EXT=h - 1)
    dla.write("CSC.D_DATAIN_SIZE_EXT_1", DATAIN_CHANNEL_EXT=c - 1)
    dla.write("CSC.D_WEIGHT_SIZE_EXT_0", WEIGHT_WIDTH_EXT=s - 1, WEIGHT_HEIGHT_EXT=r - 1)
    dla.write("CSC.D_WEIGHT_SIZE_EXT_1", WEIGHT_CHANNEL_EXT=c - 1, WEIGHT_KERNEL=k - 1)
    dla.write("CSC.D_DATAOUT_SIZE_0", DATAOUT_WIDTH=ow - 1, DATAOUT_HEIGHT=oh - 1)
    dla.write("CSC.D_DATAOUT_SIZE_1", DATAOUT_CHANNEL=k - 1)
    dla.write("CSC.D_ATOMICS", oh * ow - 1)
    dla.write("CSC.D_CONV_STRIDE_EXT", CONV_X_STRIDE_EXT=sx - 1, CONV_Y_STRIDE_EXT=sy - 1)
    dla.write("CSC.D_ZERO_PADDING", PAD_LEFT=pl, PAD_TOP=pt)
    dla.write("CSC.D_ZERO_PADDING_VALUE", pad_value & 0xFFFF)
    dla.write("CDMA.D_CONV_STRIDE", CONV_X_STRIDE=sx - 1, CONV_Y_STRIDE=sy - 1)
    dla.write("CDMA.D_ZERO_PADDING", PAD_LEFT=pl, PAD_TOP=pt)
    dla.write("CACC.D_DATAOUT_SIZE_0", DATAOUT_WIDTH=ow - 1, DATAOUT_HEIGHT=oh - 1)
    dla.write("CACC.D_DATAOUT_SIZE_1", DATAOUT_CHANNEL=k - 1)
    dla.write("CACC.D_CLIP_CFG", CLIP_TRUNCATE=clip)
    dla.write("SDP.D_DATA_CUBE_WIDTH", ow - 1)
    dla.write("SDP.D_DATA_CUBE_HEIGHT", oh - 1)
    dla.write("SDP.D_DATA_CUBE_CHANNEL", k - 1)
    dla.write("SDP.D_DST_BASE_ADDR_LOW", DST)
    dla.write("SDP.D_DST_LINE_STRIDE", ow * 32)
    dla.write("SDP.D_DST_SURFACE_STRIDE", oh * ow * 32)
    dla.write("SDP.D_DST_DMA_CFG", 1)
    dla.write("SDP.D_DP_BS_CFG", 1)
    dla.write("SDP.D_DP_BN_CFG", 1)
    dla.write("SDP.D_DP_EW_CFG", 1)
    dla.write("SDP.D_FEATURE_MODE_CFG", FLYING_MODE=1)
    dla.write("SDP.D_DATA_FORMAT", PROC_PRECISION="INT16", OUT_PRECISION="INT16")
    dla.write("SDP.D_CVT_OFFSET", off & 0xFFFFFFFF)
    dla.write("SDP.D_CVT_SCALE", scale)
    dla.write("SDP.D_CVT_SHIFT", shift)
    for unit in ("SDP", "CACC", "CMAC_A", "CMAC_B", "CSC", "CDMA"):
        dla.write(f"{unit}.D_OP_ENABLE", 1)

    got = unpack_int16(dla.mem.read(DST, -(-k // ATOM) * oh * ow * 32).tobytes(), k, oh, ow)
    np.testing.assert_array_equal(got[:k], want)
