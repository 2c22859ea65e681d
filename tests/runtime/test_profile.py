"""``Network.run(..., profile=Profile())`` and ``dla run --profile`` on hand-built loadables whose DMA
traffic is checkable by hand (nv_small, 8-channel atoms, 12 channels = 2 surfaces, padding lanes moved too).

pool loadable: x (12x8x8) -[PDP max 2x2/2]-> p1 (12x4x4) -[PDP]-> y (12x2x2) -[CPU softmax]-> prob
sdp loadable:  data (12x4x4) -[SDP X1: x * mul[c] >> 2, ReLU; mul is a per-channel MEM operand]-> out
"""
from __future__ import annotations

import json

import numpy as np
import pytest

from app.cli import main
from golden.dma import CountedMemory, Traffic
from golden.memory import Memory
from loadable.format import write_loadable
from runtime.executor import Network, load
from runtime.golden_target import GoldenTarget
from runtime.profile import Profile
from tests.runtime.test_executor import ATOM, C, H, HW, STUB_KERNELS, W, pool_loadable, sdp_loadable


def cube(c: int, h: int, w: int) -> int:
    """Bytes of a cube as the DMA moves it: every lane of every atom (channels rounded up to the atom)."""
    return -(-c // ATOM) * ATOM * h * w


def test_pdp_bytes_are_input_cube_read_plus_output_cube_written_per_sample():
    net = Network(pool_loadable(), kernels=STUB_KERNELS)
    prof = Profile()
    net.run(np.zeros((2, C, H, W), dtype=np.float32), profile=prof)
    tasks = {t.name: t for t in prof.tasks()}
    assert list(tasks) == ["pool1", "pool2", "softmax"]
    pool1, pool2, soft = tasks["pool1"], tasks["pool2"], tasks["softmax"]
    assert pool1.samples == 2 and pool1.targets == ["golden"] and pool1.kind == "dla"
    assert pool1.ops == {"PDP": 2}
    assert pool1.read == {"PDP": 2 * cube(C, H, W)} == {"PDP": 2 * 1024}
    assert pool1.written == {"PDP": 2 * cube(C, 4, 4)} == {"PDP": 2 * 256}
    assert pool2.read == {"PDP": 2 * cube(C, 4, 4)} and pool2.written == {"PDP": 2 * cube(C, 2, 2)}
    assert soft.kind == "cpu" and soft.ops == {"CPU": 2} and soft.targets == ["cpu"]
    assert pool1.cycles is None  # no simulated clock on the golden model
    assert all(t.seconds > 0 for t in tasks.values())
    total = prof.totals()
    assert total["read"] == {"PDP": 2 * (1024 + 256)} and total["written"] == {"PDP": 2 * (256 + 64)}
    assert total["ops"] == {"PDP": 4, "CPU": 2}


def test_sdp_bytes_include_its_memory_operand():
    """SDP_RDMA reads the input cube and the per-channel operand (16 lanes x 2 bytes); SDP writes the cube."""
    net = Network(sdp_loadable())
    prof = Profile()
    net.run(np.zeros((1, C, 4, 4), dtype=np.float32), profile=prof)
    (task,) = prof.tasks()
    assert task.ops == {"SDP": 1}
    assert task.read == {"SDP": cube(C, 4, 4) + 16 * 2}
    assert task.written == {"SDP": cube(C, 4, 4)}


def test_counters_are_off_unless_profiling():
    net = Network(pool_loadable(), kernels=STUB_KERNELS)
    target = GoldenTarget(HW)
    net.run(np.zeros((1, C, H, W), dtype=np.float32), target=target)
    assert target.dla.traffic is None
    prof = Profile()
    net.run(np.zeros((1, C, H, W), dtype=np.float32), target=target, profile=prof)
    assert target.dla.traffic is not None and target.dla.traffic.read == {"PDP": 1024 + 256}


def test_counted_memory_counts_engine_accesses_and_passes_data_through():
    mem = Memory()
    traffic = Traffic()
    counted = CountedMemory(mem, traffic, "PDP").space(1)
    counted.write(0x8000_0000, bytes(range(10)))
    assert counted.read_bytes(0x8000_0000, 4) == bytes(range(4))
    assert counted.gather(0x8000_0000, np.array([[1, 3], [5, 7]])).tolist() == [[1, 3], [5, 7]]
    counted.scatter(0x8000_0000, np.arange(3), np.array([9, 9, 9], dtype=np.uint8))
    assert mem.read(0x8000_0000, 4).tolist() == [9, 9, 9, 3]
    assert traffic.read == {"PDP": 4 + 4} and traffic.written == {"PDP": 10 + 3}
    before = traffic.snapshot()
    counted.read(0x8000_0000, 100)
    assert traffic.since(before) == ({"PDP": 100}, {})


def test_profile_round_trips_through_json_and_prints_a_table():
    net = Network(pool_loadable(), kernels=STUB_KERNELS)
    prof = Profile()
    net.run(np.zeros((1, C, H, W), dtype=np.float32), profile=prof)
    doc = json.loads(json.dumps(prof.to_dict()))
    assert [t["name"] for t in doc["tasks"]] == ["pool1", "pool2", "softmax"]
    again = Profile.from_dict(doc)
    assert [t.to_dict() for t in again.tasks()] == [t.to_dict() for t in prof.tasks()]
    lines = prof.table().splitlines()
    assert lines[1].split() == ["task", "name", "target", "wall", "ms", "cycles", "engine", "ops", "read", "B",
                                "written", "B"]
    row = lines[2].split()
    assert row[:2] == ["0", "pool1"] and row[2] == "golden" and row[-4:] == ["PDP", "1", "1,024", "256"]
    assert lines[-1].split()[0] == "total" and lines[-1].split()[-3:] == ["3", "1,280", "320"]


def test_cli_profile_prints_the_table(tmp_path, capsys):
    path = tmp_path / "pools.dla"
    write_loadable(path, pool_loadable())
    x = tmp_path / "x.npy"
    np.save(x, np.zeros((1, C, H, W), dtype=np.float32))
    assert main(["run", str(path), "--input", str(x), "--profile"]) == 0
    out = capsys.readouterr().out
    assert "profile (1 sample" in out
    row = next(line for line in out.splitlines() if line.split()[:2] == ["1", "pool2"])
    assert row.split()[-4:] == ["PDP", "1", "256", "64"]


@pytest.mark.parametrize("extra, bad", [(["--fallback", "golden"], "--fallback"),
                                        (["--timeout-cycles", "5", "--define", "A=1"], "--define, --timeout-cycles")])
def test_simulator_options_need_a_simulator_target(tmp_path, capsys, extra, bad):
    path = tmp_path / "pools.dla"
    write_loadable(path, pool_loadable())
    x = tmp_path / "x.npy"
    np.save(x, np.zeros((1, C, H, W), dtype=np.float32))
    assert main(["run", str(path), "--input", str(x), *extra]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"dla: {bad} only appl") and "--target icarus|verilator" in err[0]


def test_fallback_is_refused_on_in_process_targets(tmp_path):
    net = load_pool(tmp_path)
    with pytest.raises(Exception, match="only simulator targets"):
        net.run(np.zeros((1, C, H, W), dtype=np.float32), fallback="golden")


def load_pool(tmp_path) -> Network:
    path = tmp_path / "pools.dla"
    write_loadable(path, pool_loadable())
    return load(path, kernels=STUB_KERNELS)
