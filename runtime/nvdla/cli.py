"""``dla run FILE.nvdla --config NAME [--dimg OUTDIR]``: an NVDLA flatbuffer loadable on a target,
outputs written as NVDLA DIMG files (o_000000.dimg, ...) whose md5 can be compared with NVDLA's
regression goldens."""
from __future__ import annotations

import argparse
import hashlib
import time
from pathlib import Path

from golden.config import get_config
from runtime.nvdla.run import NvdlaNetwork, NvdlaRunError

__all__ = ["run_nvdla", "NvdlaRunError"]


def _target(name: str, hw):
    from runtime.suite import TARGETS

    factory = TARGETS.get(name)
    if factory is None:
        raise NvdlaRunError(f"--target {name}: NVDLA loadables run on in-process targets ({', '.join(TARGETS)})")
    return factory(hw)


def run_nvdla(args: argparse.Namespace) -> int:
    if not args.config:
        raise NvdlaRunError(f"{args.loadable}: an NVDLA loadable does not say which hardware it is for; "
                            "give --config (e.g. --config nv_small)")
    if args.input:
        raise NvdlaRunError(f"{args.loadable}: --input is not supported for NVDLA loadables (their inputs are "
                            "the memory contents they carry)")
    hw = get_config(args.config)
    net = NvdlaNetwork.load(args.loadable, layout=args.descriptor_layout)
    target = _target(args.target, hw)
    start = time.perf_counter()
    result = net.run(target, hw=hw)
    seconds = time.perf_counter() - start
    ops = sum(sum(t.stats.ops.values()) for t in result.tasks)
    layout = "legacy (no dla_data_cube.offset)" if net.legacy else "current"
    print(f"Ran {args.loadable} on {args.target} ({hw.name}): {len(result.tasks)} task(s), {ops} operation(s), "
          f"{layout} descriptors, in {seconds:.2f} s")
    if args.profile:
        for t in result.tasks:
            s = t.stats
            per = ", ".join(f"{k} {v} (max {s.max_in_flight.get(k, 0)} in flight)" for k, v in s.ops.items())
            print(f"  task {t.task}: {s.seconds * 1e3:.1f} ms, {per}; {s.writes} register writes, "
                  f"{s.reads} reads, {s.interrupts} interrupts")
    native = hw.atom_elements() if args.dimg_format == "native" else None
    dimgs = net.dimgs(result, native) if args.dimg else []
    for i, o in enumerate(result.outputs):
        t = o.tensor
        digest = f", dimg md5 {hashlib.md5(dimgs[i]).hexdigest()}" if dimgs else ""
        print(f"  output {i} {t.name!r}: {t.c}x{t.h}x{t.w}, {t.size} bytes{digest}")
    if args.dimg:
        paths = net.write_dimgs(dimgs, Path(args.dimg))
        print(f"Wrote {len(paths)} DIMG file(s) to {args.dimg}")
    return 0
