"""Benchmarks (``make bench``): speed targets live here, never in timed tests.

Writes ``build/bench/results.json`` with
- ``gemm_mac_per_s``: this machine's float64 GEMM rate in MAC/s (FLOP/2), measured in the same run;
- ``golden_conv_mac_per_s`` and ``golden_conv_gemm_ratio``: the golden conv on a 56x56x256 -> 256 3x3
  layer, run through the register-level model, divided by the GEMM rate (target >= 0.3);
- ``nv_small_suite_seconds``: wall time of ``dla trace <traces>/nv_small -j 2`` (target < 10 s);
- ``compile_resnet50_seconds``: compiling a generated ResNet-50-sized ONNX graph (224x224, 25.5 M
  parameters) for nv_small, from the in-memory model to the loadable, calibrating on one random input
  (target < 10 s); ``compile_resnet50_seconds_by_config`` for nv_large and nv_full too.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]


def best_of(fn, repeat: int = 3) -> float:
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def gemm_mac_per_s(n: int = 2048) -> float:
    """float64 GEMM rate in multiply-accumulates per second (FLOP/2)."""
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((n, n)), rng.standard_normal((n, n))
    a @ b  # warm up BLAS threads
    return n**3 / best_of(lambda: a @ b)


def golden_conv_mac_per_s(height: int = 56, width: int = 56, channels: int = 256, kernels: int = 256,
                          k: int = 3) -> float:
    """MAC/s of one conv layer through the register-level model (memory in, SDP writes memory out)."""
    from golden import Dla, get_config
    from regressions.programs import ConvLayer, program_conv

    # Direct conv holds its whole input in CBUF; no preset's CBUF holds 56x56x256 (the compiler splits
    # such layers by rows), so the engine is measured on nv_small with a CBUF deep enough for one pass.
    hw = get_config("nv_small").derive(cbuf_bank_depth=1 << 16)
    rng = np.random.default_rng(1)
    layer = ConvLayer(
        x=rng.integers(-128, 128, (channels, height, width)),
        w=rng.integers(-128, 128, (kernels, channels, k, k)),
        pad=(k // 2, k // 2),
        clip_truncate=8,
    )

    def run() -> None:
        dla = Dla(hw)
        program_conv(dla, layer)
        assert dla.intr_status & 1, "the conv layer did not complete"

    run()
    macs = kernels * channels * k * k * height * width
    return macs / best_of(run)


def nv_small_suite_seconds(traces: Path) -> tuple[float, str]:
    cmd = [str(REPO / ".venv" / "bin" / "dla"), "trace", str(traces / "nv_small"), "-j", "2", "-q"]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    seconds = time.perf_counter() - t0
    last = proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else proc.stderr.strip()
    return seconds, last


def rtl_trace_rates(traces: Path, simulator: str) -> dict[str, float]:
    """Simulated cycles per second and wall seconds per trace of our RTL on NVDLA's nv_small PDP/SDP traces
    (the DUT build is made, and cached, before timing)."""
    from runtime.trace import find_traces
    from tb.suite import run_traces

    cfgs = [(c, "nv_small") for c in find_traces(traces / "nv_small") if c.parent.name.startswith(("pdp_", "sdp_"))]
    run_traces(cfgs[:1], simulator)  # build (or reuse) the DUT outside the timing
    t0 = time.perf_counter()
    outs = run_traces(cfgs, simulator, workers=1)
    seconds = time.perf_counter() - t0
    ran = [o for o in outs if o.status == "PASS"]
    cycles = sum(int(o.metrics.get("cycles", 0)) for o in ran)
    return {"cycles_per_s": cycles / seconds, "seconds_per_trace": seconds / max(len(outs), 1),
            "traces": len(outs), "passed": len(ran)}


def compile_resnet50_seconds(config: str) -> tuple[float, int]:
    """Seconds to compile the generated ResNet-50 (frontend + passes + codegen), and its DLA op count."""
    from compiler.driver import compile_graph, random_inputs
    from compiler.frontend import onnx as onnx_frontend
    from regressions.zoo.resnet50 import build_resnet50

    model = build_resnet50()
    t0 = time.perf_counter()
    g = onnx_frontend.load(model)
    ld, _, _ = compile_graph(g, config, calib_inputs=random_inputs(g, 1))
    secs = time.perf_counter() - t0
    return secs, sum(len(t.dla.ops) for t in ld.tasks if t.WhichOneof("kind") == "dla")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=REPO / "build" / "bench" / "results.json")
    ap.add_argument("--traces", type=Path, default=Path(os.environ.get("NVDLA_TRACES", REPO.parent / "shared" / "nvdla" / "traces")))
    args = ap.parse_args(argv)
    results: dict[str, object] = {
        "machine": {"python": sys.version.split()[0], "numpy": np.__version__, "cpus": os.cpu_count(),
                    "platform": platform.platform()},
    }
    print("float64 GEMM ...", flush=True)
    gemm = gemm_mac_per_s()
    results["gemm_mac_per_s"] = gemm
    print(f"  {gemm / 1e9:.2f} GMAC/s")
    print("golden conv 56x56x256 -> 256, 3x3 ...", flush=True)
    conv = golden_conv_mac_per_s()
    results["golden_conv_mac_per_s"] = conv
    results["golden_conv_gemm_ratio"] = conv / gemm
    print(f"  {conv / 1e9:.2f} GMAC/s, ratio {conv / gemm:.3f} (target >= 0.3)")
    print("compile a ResNet-50-sized ONNX graph ...", flush=True)
    by_config = {}
    for cfg in ("nv_small", "nv_large", "nv_full"):
        secs, ops = compile_resnet50_seconds(cfg)
        by_config[cfg] = secs
        print(f"  {cfg}: {secs:.2f} s, {ops} DLA operations")
    results["compile_resnet50_seconds"] = by_config["nv_small"]
    results["compile_resnet50_seconds_by_config"] = by_config
    if (args.traces / "nv_small").is_dir():
        print("nv_small suite (dla trace -j 2) ...", flush=True)
        secs, summary = nv_small_suite_seconds(args.traces)
        results["nv_small_suite_seconds"] = secs
        results["nv_small_suite_summary"] = summary
        print(f"  {secs:.2f} s: {summary} (target < 10 s)")
        for sim in ("verilator", "icarus"):
            print(f"our RTL on nv_small PDP/SDP traces, {sim} ...", flush=True)
            rates = rtl_trace_rates(args.traces, sim)
            results[f"rtl_{sim}_cycles_per_s"] = rates["cycles_per_s"]
            results[f"rtl_{sim}_seconds_per_trace"] = rates["seconds_per_trace"]
            print(f"  {rates['cycles_per_s']:.0f} cycles/s, {rates['seconds_per_trace']:.2f} s/trace "
                  f"({rates['passed']}/{rates['traces']} passed)")
    else:
        print(f"  no nv_small traces under {args.traces}; suite and RTL times not measured")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
