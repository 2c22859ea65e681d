"""cocotb test module of ``tb.network``: one test that reads ``./jobs.json`` (a ``NetworkJob``).

- ``mode="probe"``: reset the DUT, read its CFGROM, write it to the result file (``tb.network`` caches it
  next to the build).
- ``mode="run"``: reset the DUT and run the loadable on the inputs through ``RtlTarget`` with
  ``Network.run_async``; the operations listed in ``on_fallback`` run on a golden ``Dla`` whose memory
  is the testbench's (the one the DUT's AXI ports are served from). Outputs go to ``outputs.npz`` as int8
  (what the DUT wrote), the result file holds the status and the per-operation profile (simulated
  cycles from sim time, bytes at the AXI ports and inside the golden model).

The cocotb test itself passes whenever the result file could be written; a DUT that hangs or breaks the
AXI protocol is a result with status ``fail`` and a detail naming what the testbench waited for.
"""
from __future__ import annotations

import time
import traceback
from pathlib import Path

import cocotb
import numpy as np
from cocotb.simtime import get_sim_time
from cocotb.triggers import Timer, select

from golden.config import get_config
from golden.dla import Dla
from loadable.format import read_loadable
from runtime.errors import ExecutionError
from runtime.executor import Network
from runtime.golden_target import GoldenTarget
from runtime.profile import Profile
from tb.bench import Testbench
from tb.network import NetworkJob, capabilities_to_dict
from tb.results import ABORTED, write_json


@cocotb.test()
async def network(dut) -> None:
    job = NetworkJob.read(Path("jobs.json"))
    result: dict = {"status": "error", "detail": ABORTED}
    wall = time.perf_counter()
    bench: Testbench | None = None
    try:
        hw = get_config(job.config)
        settings = job.bench_settings
        bench = Testbench(dut, hw, settings)
        target = await bench.start()
        if job.mode == "probe":
            caps = await bench.capabilities()
            if isinstance(caps, str):
                result = {"status": "fail", "detail": caps}
            else:
                result = {"status": "ok", "capabilities": capabilities_to_dict(caps)}
            return
        target.name = job.simulator
        net = Network(read_loadable(job.loadable))
        with np.load(job.inputs, allow_pickle=False) as data:
            inputs = {name: data[f"input_{i}"] for i, name in enumerate(job.input_names)}
        on_fallback = [(int(t), int(i)) for t, i in job.on_fallback]
        fallback = GoldenTarget(hw, Dla(hw, mem=target.memory)) if on_fallback else None
        target.count_traffic(bench.dut_memory.rams)
        profile = Profile()
        profile.clock = lambda: int(get_sim_time("ns") // settings.clock_ns)
        op_ns = job.op_timeout_cycles * settings.clock_ns
        start = get_sim_time("ns")
        run = net.run_async(inputs, target=target, profile=None if job.pipeline else profile, raw=True,
                            timeout_ns=op_ns, fallback=fallback, on_fallback=on_fallback, pipeline=job.pipeline)
        try:
            which, outs = await select(Timer(job.total_timeout_cycles * settings.clock_ns, "ns"), run,
                                       *(e.wait() for e in bench.dut_memory.violation_events()))
        except ExecutionError as exc:
            result = {"status": "fail", "detail": f"{exc} at sim time {get_sim_time('ns'):.0f} ns; "
                                                  f"last CSB transaction: {bench.last_csb()}"}
            return
        if which == 0:
            result = {"status": "fail", "detail": bench.hang_report(job.total_timeout_cycles)}
            return
        if which > 1:
            result = {"status": "fail", "detail": f"{bench.dut_memory.violations[0]}; "
                                                  f"last CSB transaction: {bench.last_csb()}"}
            return
        np.savez(job.outputs, **{f"output_{i}": outs[name] for i, name in enumerate(net.outputs)})
        result = {"status": "ok", "profile": profile.to_dict(),
                  "cycles": int((get_sim_time("ns") - start) // settings.clock_ns),
                  "csb_reads": bench.csb.reads, "csb_writes": bench.csb.writes,
                  "concurrency": dict(net.concurrency)}
    except Exception as exc:  # a testbench, DUT-interface or loadable problem: reported, never a hang
        result = {"status": "error", "detail": f"{type(exc).__name__}: {exc}", "traceback": traceback.format_exc()}
    finally:
        result["seconds"] = time.perf_counter() - wall
        write_json(job.result, result)
