"""``dla run FILE.nvdla --config NAME [--dimg OUTDIR]``: an NVDLA flatbuffer loadable on a target,
outputs written as NVDLA DIMG files (o_000000.dimg, ...) whose md5 can be compared with NVDLA's
regression goldens.

In-process targets (golden) run the firmware model here; ``--target verilator|icarus`` runs it inside a
cocotb simulation of the DUT (``tb.nvdla_network``), after checking every op's engine against the DUT's
CFGROM, and gets the outputs' bytes and tensor descriptors back, so the DIMGs are written the same way.
Exit status: 2 for a user error (bad loadable or options, an op the DUT lacks the engine for, no
simulator), 1 when the DUT failed (build error, hang, AXI violation).
"""
from __future__ import annotations

import argparse
import hashlib
import sys
import time
from pathlib import Path
from typing import Callable

from app.errors import UserError
from golden.config import get_config
from runtime.nvdla.run import NvdlaNetwork, NvdlaRunError, RunResult

__all__ = ["run_nvdla", "NvdlaRunError"]

#: argparse destinations of the options that only apply to simulator targets.
_SIM_ONLY = ("dut", "axi_random", "rtl_filelist", "toplevel", "define", "sim_arg", "timeout_cycles", "reset_idle_cycles", "fallback")


def _target(name: str, hw):
    from runtime.suite import BATCH_TARGETS, TARGETS

    factory = TARGETS.get(name)
    if factory is None:
        raise NvdlaRunError(f"--target {name}: NVDLA loadables run on {', '.join([*TARGETS, *BATCH_TARGETS])}")
    return factory(hw)


#: The simulator options of ``dla run``'s arguments (``app.cli``); raises ValueError for bad ones.
SimOptions = Callable[[argparse.Namespace], dict]


def _on_simulator(args: argparse.Namespace, net: NvdlaNetwork, hw, sim_options: SimOptions) -> RunResult | int:
    """The RunResult of the DUT, or the exit status of a DUT that failed (its one line already printed)."""
    from runtime.executor import TargetRunError
    from runtime.suite import TargetSetupError
    from tb.nvdla_network import run_nvdla_networks

    try:
        options = sim_options(args)
    except ValueError as exc:
        raise UserError(str(exc)) from None
    try:
        (result,) = run_nvdla_networks([net], hw, simulator=args.target, options=options,
                                       fallback=getattr(args, "fallback", None))
    except TargetSetupError as exc:  # no simulator, no RTL: the user's setup
        raise UserError(str(exc)) from None
    except TargetRunError as exc:  # the DUT failed (build error, hang): a failure, not bad input
        print(f"dla: {exc}", file=sys.stderr)
        return 1
    return result


def _with_inputs(net: NvdlaNetwork, specs: list[str]) -> NvdlaNetwork:
    """``--input [NAME=]PATH``: .npy arrays (or a .npz keyed by tensor name) in the input tensors' own element
    type, replacing the input bytes the loadable carries (``runtime.nvdla.inputs``)."""
    from runtime.inputs import InputError, load_array
    from runtime.nvdla.inputs import NvdlaInputError, with_inputs

    arrays: dict = {}
    for spec in specs:
        name, sep, path = spec.partition("=")
        if not sep or Path(spec).exists():
            name, path = "", spec
        try:
            data = load_array(Path(path))
        except InputError as exc:
            raise NvdlaRunError(str(exc)) from None
        if isinstance(data, dict):
            arrays.update(data)
        else:
            arrays[name] = data
    try:
        return NvdlaNetwork(with_inputs(net.ld, arrays), path=net.path, layout="legacy" if net.legacy else "current")
    except NvdlaInputError as exc:
        raise NvdlaRunError(f"{net.name}: {exc}") from None


def run_nvdla(args: argparse.Namespace, sim_options: SimOptions) -> int:
    from runtime.suite import BATCH_TARGETS

    if not args.config:
        raise NvdlaRunError(f"{args.loadable}: an NVDLA loadable does not say which hardware it is for; "
                            "give --config (e.g. --config nv_small)")
    sim = args.target in BATCH_TARGETS
    sim_only = [f"--{o.replace('_', '-')}" for o in _SIM_ONLY if getattr(args, o, None) not in (None, [])]
    if sim_only and not sim:
        raise NvdlaRunError(f"{', '.join(sim_only)} only appl{'ies' if len(sim_only) == 1 else 'y'} to "
                            f"--target {'|'.join(BATCH_TARGETS)}")
    hw = get_config(args.config)
    net = NvdlaNetwork.load(args.loadable, layout=args.descriptor_layout)
    if args.input:
        net = _with_inputs(net, args.input)
    start = time.perf_counter()
    if sim:
        result = _on_simulator(args, net, hw, sim_options)
        if isinstance(result, int):
            return result
    else:
        result = net.run(_target(args.target, hw), hw=hw)
    seconds = time.perf_counter() - start
    ops = sum(sum(t.stats.ops.values()) for t in result.tasks)
    layout = "legacy (no dla_data_cube.offset)" if net.legacy else "current"
    cycles = f" ({result.cycles:,} simulated cycles)" if result.cycles is not None else ""
    print(f"Ran {args.loadable} on {args.target} ({hw.name}): {len(result.tasks)} task(s), {ops} operation(s), "
          f"{layout} descriptors, in {seconds:.2f} s{cycles}")
    if args.profile:
        for t in result.tasks:
            s = t.stats
            per = ", ".join(f"{k} {v} (max {s.max_in_flight.get(k, 0)} in flight)" for k, v in s.ops.items())
            print(f"  task {t.task}: {s.seconds * 1e3:.1f} ms, {per}; {s.writes} register writes, "
                  f"{s.reads} reads, {s.interrupts} interrupts")
        if result.dut_read is not None:
            print(f"  DUT AXI traffic: {result.dut_read:,} bytes read, {result.dut_written:,} bytes written")
    native = hw.atom_elements() if args.dimg_format == "native" else None
    dimgs = net.dimgs(result, native) if args.dimg else []
    for i, o in enumerate(result.outputs):
        t = o.tensor
        digest = f", dimg md5 {hashlib.md5(dimgs[i]).hexdigest()}" if dimgs else ""
        print(f"  output {i} {t.name!r}: {t.c}x{t.h}x{t.w}, {t.size} bytes{digest}")
    if args.dimg:
        paths = net.write_dimgs(dimgs, Path(args.dimg), inputs=[Path(args.loadable)])
        print(f"Wrote {len(paths)} DIMG file(s) to {args.dimg}")
    return 0
