"""int16 through the golden engines (nv_full): NVDLA's nvdlav1 ``input.txn`` acceptance traces, and int16
rules of each engine on small cubes against hand values.

The traces are replayed by a minimal reader of the ``input.txn`` commands (``load_mem``, ``write_reg``,
``read_reg``, ``wait``, ``dump_mem``) kept inside this test, so it does not depend on the runtime's player.
Expected bytes are read from the traces' ``output_feature_map.dat`` at run time.
"""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from golden.config import NV_FULL, NV_SMALL
from golden.dla import Dla
from golden.engines import sdp as sdp_engine
from golden.engines.conv_datapath import ConvGeometry, pack_weights, unpack_weights
from golden.errors import UnsupportedError
from golden.layout import CubeLayout, read_cube, write_cube

TRACES = Path("/work/shared/nvdla/traces/nv_full")
_BYTE = re.compile(r"0x[0-9a-fA-F]{1,2}")


def read_dat(path: Path) -> bytes:
    """Payload bytes of an NVDLA dump file: the lines made only of ``0xNN`` tokens (headers and trailers
    such as ``Data_type = 0x25`` mix in other words and are skipped)."""
    out = bytearray()
    for line in path.read_text().splitlines():
        tokens = line.split()
        if tokens and all(_BYTE.fullmatch(t) for t in tokens):
            out.extend(int(t, 16) for t in tokens)
    return bytes(out)


def replay_txn(trace: Path) -> list[tuple[int, bytes, bytes]]:
    """Run ``trace/input.txn`` on a golden nv_full DLA; returns (address, produced, expected) per dump_mem."""
    dla = Dla(NV_FULL)
    dumps = []
    for lineno, line in enumerate((trace / "input.txn").read_text().splitlines(), 1):
        words = line.split("#", 1)[0].split()
        if not words:
            continue
        cmd, args = words[0], words[1:]
        if cmd == "load_mem":
            data = read_dat(trace / args[2])
            dla.mem.write(int(args[0], 16), data[: int(args[1], 16)])
        elif cmd == "write_reg":
            dla.write_reg((int(args[0], 16) & 0xFFFF) << 2, int(args[1], 16))
        elif cmd == "read_reg":
            if "D_OP_ENABLE" in line or "S_INTR_STATUS" in line:
                # Timing: the synchronous model has already finished (OP_EN cleared, every done bit raised
                # at once, so the first write-1-to-clear drops them all); the player owns that protocol.
                continue
            addr, mask, exp = ((int(a, 16)) for a in args[:3])
            got = dla.read_reg((addr & 0xFFFF) << 2)
            assert got & mask == exp & mask, f"{trace.name}:{lineno}: read {got:#x}, expected {exp:#x} under {mask:#x}"
        elif cmd == "wait":
            continue  # the golden model runs engines synchronously
        elif cmd == "dump_mem":
            addr, size = int(args[0], 16), int(args[1], 16)
            expected = read_dat(trace / args[2])
            assert len(expected) == size, f"{args[2]} holds {len(expected)} bytes, dump_mem asks {size}"
            dumps.append((addr, dla.mem.read(addr, size).tobytes(), expected))
        else:
            raise AssertionError(f"{trace.name}:{lineno}: unknown txn command {cmd!r}")
    return dumps


@pytest.mark.parametrize("name", ["sdp_relu_int16", "conv_8x8_fc_int16"])
def test_nv_full_int16_trace(name: str) -> None:
    trace = TRACES / name
    if not (trace / "input.txn").exists():
        pytest.skip(f"{trace} is not available")
    dumps = replay_txn(trace)
    assert dumps
    for addr, got, expected in dumps:
        if got != expected:
            diff = [i for i in range(len(got)) if got[i] != expected[i]]
            pytest.fail(f"{name}: {len(diff)} bytes differ at {addr:#x}, first at +{diff[0]:#x}: "
                        f"{got[diff[0] & ~31: (diff[0] & ~31) + 32].hex()} vs {expected[diff[0] & ~31: (diff[0] & ~31) + 32].hex()}")


# ---- layout ---------------------------------------------------------------------------------------
def test_int16_cube_layout_is_two_bytes_little_endian() -> None:
    dla = Dla(NV_FULL)
    atom = NV_FULL.atom_elements("int16")
    assert atom == 16
    layout = CubeLayout(20, 2, 3, line_stride=3 * 32, surf_stride=2 * 3 * 32, atom=atom, bpe=2)
    data = np.arange(-500, -500 + 32 * 2 * 3, dtype=np.int64).reshape(32, 2, 3) * 37
    write_cube(dla.mem.space(1), 0x1000, layout, data)
    # element (c=17, h=1, w=2) at surface 1, line 1, pixel 2, lane 1
    off = 1 * layout.surf_stride + 1 * layout.line_stride + 2 * 32 + 1 * 2
    raw = dla.mem.read(0x1000 + off, 2).tobytes()
    assert int.from_bytes(raw, "little", signed=True) == data[17, 1, 2]
    np.testing.assert_array_equal(read_cube(dla.mem.space(1), 0x1000, layout), data)


# ---- SDP ------------------------------------------------------------------------------------------
def test_sdp_output_cvt_saturates_to_16_bits() -> None:
    cvt = sdp_engine.OutCvt(offset=0, scale=1, shift=0)
    x = np.array([-(1 << 20), -32769, -32768, -1, 0, 255, 32767, 32768, 1 << 20], dtype=np.int64)
    out, _ = sdp_engine.output_cvt(x, cvt, 16)
    np.testing.assert_array_equal(out, [-32768, -32768, -32768, -1, 0, 255, 32767, 32767, 32767])
    out8, _ = sdp_engine.output_cvt(x, cvt)
    np.testing.assert_array_equal(out8, [-128, -128, -128, -1, 0, 127, 127, 127, 127])


def _sdp_int16_program(dla: Dla, *, proc: int = 1, out: int = 1, rdma_in: int = 1) -> None:
    """SDP from memory, 2x1x20 int16 cube, X1 = ALU SUM with REG operand then MUL, ReLU bypassed."""
    w, h, c = 2, 1, 20
    words = {
        "SDP_RDMA.D_DATA_CUBE_WIDTH": w - 1, "SDP_RDMA.D_DATA_CUBE_HEIGHT": h - 1,
        "SDP_RDMA.D_DATA_CUBE_CHANNEL": c - 1, "SDP_RDMA.D_SRC_BASE_ADDR_LOW": 0x10000,
        "SDP_RDMA.D_SRC_LINE_STRIDE": w * 32, "SDP_RDMA.D_SRC_SURFACE_STRIDE": w * h * 32,
        "SDP_RDMA.D_BRDMA_CFG": 1, "SDP_RDMA.D_NRDMA_CFG": 1, "SDP_RDMA.D_ERDMA_CFG": 1,
        "SDP_RDMA.D_FEATURE_MODE_CFG": (rdma_in << 2) | (proc << 4) | (out << 6), "SDP_RDMA.D_SRC_DMA_CFG": 1,
        "SDP.D_DATA_CUBE_WIDTH": w - 1, "SDP.D_DATA_CUBE_HEIGHT": h - 1, "SDP.D_DATA_CUBE_CHANNEL": c - 1,
        "SDP.D_DST_BASE_ADDR_LOW": 0x20000, "SDP.D_DST_LINE_STRIDE": w * 32,
        "SDP.D_DST_SURFACE_STRIDE": w * h * 32, "SDP.D_DST_DMA_CFG": 1,
        # BS: ALU SUM (REG, shift 2), MUL (REG 3, shift 1), ReLU bypassed
        "SDP.D_DP_BS_CFG": (2 << 2) | (1 << 6), "SDP.D_DP_BS_ALU_CFG": 2 << 8, "SDP.D_DP_BS_ALU_SRC_VALUE": 0xFFFB,
        "SDP.D_DP_BS_MUL_CFG": 1 << 8, "SDP.D_DP_BS_MUL_SRC_VALUE": 3,
        "SDP.D_DP_BN_CFG": 1, "SDP.D_DP_EW_CFG": 1,
        "SDP.D_DATA_FORMAT": proc | (out << 2), "SDP.D_CVT_SCALE": 1,
    }
    for name, value in words.items():
        dla.write(name, value)
    dla.write("SDP_RDMA.D_OP_ENABLE", 1)
    dla.write("SDP.D_OP_ENABLE", 1)


def test_sdp_int16_x_stage_and_padding_lanes() -> None:
    dla = Dla(NV_FULL)
    layout = CubeLayout(20, 1, 2, 64, 64, 16, 2)
    rng = np.random.default_rng(5)
    x = rng.integers(-32768, 32768, size=(32, 1, 2), dtype=np.int64)
    x[0, 0, 0], x[1, 0, 0], x[2, 0, 0] = 32767, -32768, 7
    write_cube(dla.mem.space(1), 0x10000, layout, x)
    _sdp_int16_program(dla)
    got = read_cube(dla.mem.space(1), 0x20000, layout)
    op = -5 << 2

    def expect(v: int) -> int:
        p = (v + op) * 3
        q, r = divmod(abs(p), 2)
        q += r
        t = q if p >= 0 else -q
        return max(-32768, min(32767, t))

    want = np.vectorize(expect)(x)  # all 32 lanes, padding lanes included (NOTES §8.3)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("kw", [dict(out=0), dict(proc=0, out=0), dict(proc=0, out=2, rdma_in=0)])
def test_sdp_mixed_or_fp16_precision_is_unsupported(kw: dict[str, int]) -> None:
    dla = Dla(NV_FULL)
    with pytest.raises(UnsupportedError):
        _sdp_int16_program(dla, **kw)


def test_sdp_int16_needs_an_int16_config() -> None:
    dla = Dla(NV_SMALL)
    dla.write("SDP.D_DATA_FORMAT", 5)
    dla.write("SDP_RDMA.D_FEATURE_MODE_CFG", 0x54)
    dla.write("SDP.D_DP_BS_CFG", 1)
    dla.write("SDP.D_DP_BN_CFG", 1)
    dla.write("SDP.D_DP_EW_CFG", 1)
    dla.write("SDP.D_CVT_SCALE", 1)
    dla.write("SDP_RDMA.D_OP_ENABLE", 1)
    with pytest.raises(UnsupportedError):
        dla.write("SDP.D_OP_ENABLE", 1)


# ---- CONV weights ------------------------------------------------------------------------------------
def test_int16_weight_packing_round_trip_and_grouping() -> None:
    rng = np.random.default_rng(1)
    K, C, R, S = 20, 70, 2, 3
    w = rng.integers(-32768, 32768, size=(K, C, R, S), dtype=np.int64)
    raw = pack_weights(w, NV_FULL, "int16")
    assert len(raw) == 2 * w.size
    geom = ConvGeometry(channels=C, height=4, width=4, kernels=K, kernel_height=R, kernel_width=S,
                        out_height=3, out_width=2)
    np.testing.assert_array_equal(unpack_weights(np.frombuffer(raw, np.uint8), geom, NV_FULL, "int16"), w)
    # Kernel group of 16 (atomic K / 2), channel group of 64 (MAC atomic C): the first bytes are
    # w[0, 0, 0, 0] then w[0, 1, 0, 0], little-endian; after 64 channels comes kernel 1.
    first = np.frombuffer(raw[: 2 * 65], dtype="<i2")
    assert first[0] == w[0, 0, 0, 0] and first[1] == w[0, 1, 0, 0] and first[64] == w[1, 0, 0, 0]
    # The second kernel group starts after 16 whole kernels.
    assert int.from_bytes(raw[2 * 16 * C * R * S: 2 * 16 * C * R * S + 2], "little", signed=True) == w[16, 0, 0, 0]
