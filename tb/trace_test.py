"""cocotb test module: one cocotb test per trace of the simulation's job file.

The job file is ``$DLA_TB_JOBS`` or ``jobs.json`` in the simulation's directory (where ``tb.runner``
puts it). Each test only composes ``tb.bench``; results go to the per-trace result files, so a test
"passes" for cocotb even when its trace FAILs: cocotb marks a test failed only when the testbench itself
broke (the caller then reports that test's error from results.xml).
"""
from __future__ import annotations

import os
import re
from pathlib import Path

import cocotb

from tb.bench import run_job
from tb.results import JOBS_ENV, BenchSettings, JobFile, TraceJob


def _job_file() -> JobFile | None:
    path = Path(os.environ.get(JOBS_ENV) or "jobs.json")
    return JobFile.read(path) if path.is_file() else None


def _make_test(job: TraceJob, settings: BenchSettings, target: str):
    async def trace_test(dut) -> None:
        await run_job(dut, job, settings, target)

    return trace_test


_jobs = _job_file()
if _jobs is not None:
    for _job in _jobs.traces:
        _name = f"trace_{_job.index:04d}_{re.sub(r'[^0-9A-Za-z_]', '_', _job.name)}"
        globals()[f"trace_{_job.index:04d}"] = cocotb.test(name=_name)(_make_test(_job, _jobs.settings, _jobs.target))
