"""cocotb test module of ``tb.nvdla_network``: one cocotb test per NVDLA loadable of ``./jobs.json`` (an
``NvdlaJob``), each from reset with a fresh memory.

Each test runs ``NvdlaNetwork.run_async`` (the kmd firmware model) on ``RtlTarget`` under a watchdog of
the loadable's whole budget that also stops on an AXI protocol violation, then writes ``<n>.npz`` (each
output's raw bytes, ``output_<k>``) and ``<n>.json``: status (``ok``, ``fail`` for a DUT that hangs or
breaks the protocol, ``error`` for a testbench problem), per-task firmware stats, simulated cycles, the
bytes the DUT moved on its AXI ports, each output's name, memory id and tensor descriptor, and a timeline
(cycle, event) of the firmware's program/enable/done steps and of every rise of ``dla_intr``.
"""
from __future__ import annotations

import time
import traceback
from dataclasses import asdict
from pathlib import Path

import cocotb
import numpy as np
from cocotb.simtime import get_sim_time
from cocotb.triggers import RisingEdge, Timer, select

from golden.config import get_config
from runtime.nvdla import fbs
from runtime.nvdla.run import NvdlaNetwork, NvdlaRunError
from tb.bench import Testbench
from tb.nvdla_network import NvdlaJob, tensor_to_dict
from tb.results import ABORTED, write_json


async def run_loadable(dut, job: NvdlaJob, entry: dict) -> None:
    result: dict = {"status": "error", "detail": ABORTED}
    wall = time.perf_counter()
    try:
        hw = get_config(job.config)
        settings = job.bench_settings
        net = NvdlaNetwork(fbs.parse(Path(entry["path"]).read_bytes()), path=entry["name"], layout=entry["layout"])
        bench = Testbench(dut, hw, settings)
        target = await bench.start()
        target.name = job.simulator
        traffic = target.count_traffic(bench.dut_memory.rams)
        start = get_sim_time("ns")
        timeline: list[list] = []

        def cycle() -> int:
            return int((get_sim_time("ns") - start) // settings.clock_ns)

        async def watch_interrupt() -> None:
            while True:
                await RisingEdge(dut.dla_intr)
                timeline.append([cycle(), "dla_intr rises"])

        cocotb.start_soon(watch_interrupt())
        run = net.run_async(target, hw=hw, timeout_ns=entry["op_timeout_cycles"] * settings.clock_ns,
                            log=lambda line: timeline.append([cycle(), line]))
        try:
            which, outcome = await select(Timer(entry["total_timeout_cycles"] * settings.clock_ns, "ns"), run,
                                          *(e.wait() for e in bench.dut_memory.violation_events()))
        except NvdlaRunError as exc:  # a stalled task (InterruptTimeout), a group the DUT left busy, ...
            result = {"status": "fail", "detail": f"{exc} at sim time {get_sim_time('ns'):.0f} ns; "
                                                  f"last CSB transaction: {bench.last_csb()}"}
            return
        if which == 0:
            result = {"status": "fail", "detail": bench.hang_report(entry["total_timeout_cycles"])}
            return
        if which > 1:
            result = {"status": "fail", "detail": f"{bench.dut_memory.violations[0]}; "
                                                  f"last CSB transaction: {bench.last_csb()}"}
            return
        np.savez(entry["outputs"], **{f"output_{i}": np.frombuffer(o.data, dtype=np.uint8)
                                      for i, o in enumerate(outcome.outputs)})
        result = {"status": "ok",
                  "tasks": [{"task": t.task, "stats": asdict(t.stats)} for t in outcome.tasks],
                  "outputs": [{"name": o.name, "memory": o.memory, "tensor": tensor_to_dict(o.tensor)}
                              for o in outcome.outputs],
                  "cycles": cycle(), "timeline": timeline,
                  "dut_read": sum(traffic.read.values()), "dut_written": sum(traffic.written.values()),
                  "csb_reads": bench.csb.reads, "csb_writes": bench.csb.writes}
    except Exception as exc:  # a testbench, DUT-interface or loadable problem: reported, never a hang
        result = {"status": "error", "detail": f"{type(exc).__name__}: {exc}", "traceback": traceback.format_exc()}
    finally:
        result["seconds"] = time.perf_counter() - wall
        write_json(entry["result"], result)


def _make_test(job: NvdlaJob, entry: dict):
    async def nvdla_test(dut) -> None:
        await run_loadable(dut, job, entry)

    return nvdla_test


_path = Path("jobs.json")
if _path.is_file():
    _job = NvdlaJob.read(_path)
    for _i, _entry in enumerate(_job.loadables):
        globals()[f"nvdla_{_i:04d}"] = cocotb.test(name=f"nvdla_{_i:04d}")(_make_test(_job, _entry))
