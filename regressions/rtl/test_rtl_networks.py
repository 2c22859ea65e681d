"""Whole compiled networks on our RTL (``dla run --target verilator|icarus``), byte for byte against the
golden model, on both simulators:

- ``poolnet`` (zoo; only SDP X1/X2 and PDP operations, 16x16x16) runs entirely on the DUT, two samples in
  one simulation (the second re-bases the DUT's ping-pong groups), and its int8 output bytes equal the
  golden target's; the profile has simulated cycles per task and the DUT's AXI traffic per engine;
- LeNet needs the convolution pipeline, which ``rtl/`` lacks: it is refused before any network
  simulation, naming task, op and engine, in one line with exit 2;
- with ``--fallback golden`` LeNet's convolutions run on the golden model and its pooling on the DUT,
  and the outputs equal the golden target's bit for bit.
"""
from __future__ import annotations

import functools
import re

import numpy as np
import pytest

from app.cli import main
from compiler.driver import compile_graph
from compiler.frontend import onnx as onnx_frontend
from loadable.format import write_loadable
from regressions.lib.zoo.models import lenet, poolnet
from runtime.executor import Network
from runtime.profile import Profile
from tb.duts import BUILTIN_DUT, dut_from_env
from tb.engines import CFGROM_TYPE_BITS, DutCapabilities
from tb.network import MissingEngineError, describe_missing, plan_split
from tb.runner import SimulatorUnavailable, simulator_version

pytestmark = pytest.mark.rtl
CONFIG = "nv_small"
#: The DUT (``$DLA_DUT``): our rtl/ by default. Tests about what rtl/ lacks only run on rtl/.
DUT = dut_from_env()
rtl_only = pytest.mark.skipif(DUT != BUILTIN_DUT, reason=f"about rtl/'s missing engines (DLA_DUT={DUT})")
#: What rtl/'s CFGROM says (checked against the probe in test_probe_reads_rtl_cfgrom).
RTL_UNITS = frozenset({"GLB", "CIF", "SDP_RDMA", "SDP", "PDP_RDMA", "PDP"})


def available(simulator: str) -> bool:
    try:
        simulator_version(simulator)
        return True
    except SimulatorUnavailable:
        return False


@pytest.fixture(params=["verilator", "icarus"])
def simulator(request) -> str:
    if not available(request.param):
        pytest.skip(f"{request.param} is not installed")
    return request.param


@functools.lru_cache(maxsize=None)
def compiled(name: str) -> Network:
    model = {"poolnet": poolnet, "lenet": lenet}[name](0)
    msg, _, _ = compile_graph(onnx_frontend.load(model), CONFIG)
    return Network(msg)


def inputs(net: Network, n: int, seed: int = 5) -> np.ndarray:
    shape = net.input_shapes()[net.inputs[0]]
    return np.random.default_rng(seed).standard_normal((n, *shape[1:])).astype(np.float32)


def op_engines(net: Network) -> set[str]:
    return {e for _, _, op in net.dla_ops() for e in net.op_engines(op)}


# ---- no simulator needed: the split decided from a CFGROM ------------------------------------------------
def test_poolnet_lowers_to_sdp_and_pdp_only():
    net = compiled("poolnet")
    assert op_engines(net) == {"SDP", "PDP"}
    assert all(t.WhichOneof("kind") == "dla" for t in net.msg.tasks)


def test_split_from_cfgrom_names_task_op_and_engine():
    net = compiled("lenet")
    caps = DutCapabilities(RTL_UNITS, frozenset({"SDP_BS", "SDP_BN"}))
    with pytest.raises(MissingEngineError) as err:
        plan_split(net, caps, None, "rtl/")
    msg = str(err.value)
    assert msg.startswith("task 0 'conv1' op 'conv1': CONV (CDMA/CSC/CMAC_A/CMAC_B/CACC) not in DUT "
                          "(rtl/ has PDP, SDP (X1, X2))")
    assert "--fallback golden" in msg and "\n" not in msg
    split = plan_split(net, caps, "golden", "rtl/")
    names = {net.msg.tasks[0].dla.ops[i].name for _, i in split.on_fallback}
    assert names == {"conv1", "conv2", "fc1#0", "fc1#1", "fc1#2", "fc1#3", "fc2"}
    assert describe_missing(["SDP_EW", "SDP_LUT", "PDP_RDMA"]) == "SDP Y (EW), SDP LUT, PDP (PDP_RDMA)"
    # a DUT with every engine runs everything
    full = DutCapabilities(RTL_UNITS | {"CDMA", "CSC", "CMAC_A", "CMAC_B", "CACC"}, frozenset({"SDP_BS", "SDP_BN"}))
    assert plan_split(net, full, None, "x").on_fallback == {}


@pytest.mark.parametrize("precision", ["fp16", "int16"])
def test_a_16_bit_network_is_refused_by_the_cfgrom_check_naming_its_data_type(precision):
    """rtl/ has PDP and SDP in int8 only: a 16-bit network's pooling and SDP operations name the type they
    need (``dla run --target`` then exits 2 before simulating, as for a missing engine)."""
    msg, _, _ = compile_graph(onnx_frontend.load(poolnet(0)), "nv_full", precision=precision)
    net = Network(msg)
    int8 = CFGROM_TYPE_BITS["int8"]  # what rtl/'s FEATURE_TYPES words say (the probe's answer, as dla run reads it)
    caps = DutCapabilities(RTL_UNITS, frozenset({"SDP_BS", "SDP_BN"}),
                           {f"CFGROM_{u}_BASE_FEATURE_TYPES": int8 for u in ("SDP", "PDP", "SDP_RDMA", "PDP_RDMA")})
    with pytest.raises(MissingEngineError) as err:
        plan_split(net, caps, None, "rtl/")
    assert f":{precision} not in DUT" in str(err.value)
    split = plan_split(net, caps, "golden", "rtl/")
    assert len(split.on_fallback) == sum(1 for _ in net.dla_ops())  # every op needs the 16-bit datapath


# ---- on the simulators -------------------------------------------------------------------------------------
def test_sdp_pdp_network_output_bytes_equal_golden(simulator):
    net = compiled("poolnet")
    x = inputs(net, 2)
    golden_prof, rtl_prof = Profile(), Profile()
    want = net.run(x, raw=True, profile=golden_prof)
    got = net.run(x, target=simulator, raw=True, profile=rtl_prof, rtl_options={"dut_name": DUT})
    out = net.outputs[0]
    assert got[out].dtype == np.int8 and got[out].shape == (2, 16, 4, 4)
    assert got[out].tobytes() == want[out].tobytes()
    floats = net.run(x, target=simulator, rtl_options={"dut_name": DUT})
    np.testing.assert_array_equal(floats[out], net.run(x)[out])
    (task,) = rtl_prof.tasks()
    assert task.targets == [simulator] and task.samples == 2 and task.cycles > 0
    assert task.ops == {"SDP": 4, "PDP": 4}
    (gold,) = golden_prof.tasks()
    assert task.written == gold.written  # the DUT wrote exactly the cubes' bytes, engine by engine
    assert all(task.read[e] >= gold.read[e] for e in gold.read)


@rtl_only
def test_probe_reads_rtl_cfgrom(simulator, tmp_path):
    """The split comes from the DUT's CFGROM: rtl/ has PDP and SDP X1/X2, nothing else (cached per build)."""
    from tb.network import dut_capabilities
    from tb.runner import build
    from tb.suite import RtlOptions, dut_for, settings_for

    opts = RtlOptions()
    built = build(dut_for(CONFIG, opts), simulator)
    caps = dut_capabilities(built, compiled("poolnet").hw, settings_for(opts), tmp_path, refresh=True)
    assert not list(tmp_path.iterdir())  # the probe's run directory is gone
    assert {"SDP", "SDP_RDMA", "PDP", "PDP_RDMA"} <= caps.units
    assert not caps.units & {"CDMA", "CSC", "CMAC_A", "CACC", "CDP"}
    assert caps.sdp_features == {"SDP_BS", "SDP_BN"}
    assert dut_capabilities(built, compiled("poolnet").hw, settings_for(opts), tmp_path) == caps  # cached


@rtl_only
def test_conv_network_is_refused_before_simulation(simulator, tmp_path, capsys):
    net = compiled("lenet")
    path = tmp_path / "lenet.dla"
    write_loadable(path, net.msg)
    x = tmp_path / "x.npy"
    np.save(x, inputs(net, 1))
    assert main(["run", str(path), "--input", str(x), "--target", simulator]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert err[0].startswith("dla: task 0 'conv1' op 'conv1': CONV (CDMA/CSC/CMAC_A/CMAC_B/CACC) not in DUT "
                             "(rtl/ has PDP, SDP (X1, X2))")
    runs = tmp_path / "runs"
    with pytest.raises(MissingEngineError):
        net.run(inputs(net, 1), target=simulator, rtl_options={"runs_root": str(runs)})
    assert not runs.exists() or not list(runs.glob("net-*"))  # no network simulation was started


@rtl_only
def test_conv_network_with_golden_fallback_equals_golden(simulator, tmp_path, capsys):
    net = compiled("lenet")
    path = tmp_path / "lenet.dla"
    write_loadable(path, net.msg)
    x = inputs(net, 2)
    np.save(tmp_path / "x.npy", x)
    y = tmp_path / "y.npy"
    rc = main(["run", str(path), "--input", str(tmp_path / "x.npy"), "--target", simulator, "--fallback", "golden",
               "--output", str(y), "--profile"])
    out = capsys.readouterr().out
    assert rc == 0, out
    assert "split: 2 DLA operations on " + simulator + ", 7 on golden" in out
    assert f"  task 0 'conv1': {simulator}: pool1, pool2; golden (needs CONV (CDMA/CSC/CMAC_A/CMAC_B/CACC)): " \
           "conv1, conv2, fc1#0, fc1#1, fc1#2, fc1#3, fc2" in out
    assert out.index("split:") < out.index("Ran ")
    got = np.load(y)
    want = net.run(x)[net.outputs[0]]
    assert got.dtype == np.float32 and got.tobytes() == want.tobytes()
    row = next(line.split() for line in out.splitlines() if line.split()[:2] == ["0", "conv1"])
    assert row[2] == f"golden+{simulator}" and int(row[4].replace(",", "")) > 0  # simulated cycles


def test_dut_that_hangs_fails_naming_the_op_and_keeps_the_log(tmp_path, monkeypatch, capsys):
    """The fixture DUT (regressions/lib/fixture_dut) advertises the conv units but only stubs them (an operation's
    done bit never comes): exit 1, one line naming task, op and the awaited interrupt; the run directory
    is kept."""
    if not available("icarus"):
        pytest.skip("icarus is not installed")
    from regressions.lib.fixture_dut import FIXTURE_DIR, fixture_header

    monkeypatch.setenv("DLA_SIM_BUILD", str(tmp_path / "sim"))
    inc = tmp_path / "inc"
    inc.mkdir()
    (inc / "fixture_regs.vh").write_text(fixture_header())
    flist = tmp_path / "fixture.f"
    flist.write_text(f"+incdir+inc\n{FIXTURE_DIR / 'NV_nvdla.v'}\n")
    net = compiled("lenet")
    path = tmp_path / "lenet.dla"
    write_loadable(path, net.msg)
    np.save(tmp_path / "x.npy", inputs(net, 1))
    rc = main(["run", str(path), "--input", str(tmp_path / "x.npy"), "--target", "icarus", "--rtl-filelist",
               str(flist), "--timeout-cycles", "3000", "--reset-idle-cycles", "8"])
    err = [line for line in capsys.readouterr().err.strip().splitlines() if not line.startswith("dla: building ")]
    assert rc == 1
    assert len(err) == 1 and re.match(r"dla: icarus: task 0 \('conv1'\) op '\w+': InterruptTimeout: GLB.S_INTR_STATUS "
                                      r"bits 0x\w+ not set within 30000 ns", err[0]), err
    kept = list((tmp_path / "sim" / "runs").glob("net-*"))
    assert len(kept) == 1 and (kept[0] / "sim.log").is_file() and str(kept[0] / "sim.log") in err[0]
