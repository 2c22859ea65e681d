"""``make bench`` section ``imagenet``: compile time and peak memory of the classic ImageNet networks, and the
golden model's seconds per ResNet-50 input (issue 17), also compiled in fp16 for nv_full (issue 18: reported,
no target).

Each measurement runs in a child process (``python -m regressions.bench_imagenet compile|run ...``) so its
peak RSS is its own (the bench process's high-water mark only grows) and it includes loading the ONNX file but
not building it. Compiles calibrate on 16 random inputs, as a user's ``dla compile --calib-random 16`` does.
"""
from __future__ import annotations

import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

#: key -> (comparison, value), merged into ``regressions.bench.TARGETS``.
TARGETS: dict[str, tuple[str, float]] = {
    "compile_resnet50_16cal_seconds": ("<", 5.0),  # the slowest of nv_small, nv_large, nv_full
    "compile_peak_rss_mb_resnet50": ("<", 1000.0),
    "compile_peak_rss_mb_squeezenet": ("<", 500.0),
    "golden_resnet50_seconds_per_input_nv_full": ("<", 1.0),
    "golden_resnet50_seconds_per_input_nv_small": ("<", 2.0),
}
CALIBRATION = 16
CONFIGS = ("nv_small", "nv_large", "nv_full")
CHILD_TIMEOUT = 3600


def _peak_mb() -> float:
    """This process's own peak RSS: Linux's VmHWM, which exec resets (``ru_maxrss`` keeps the high-water mark
    of the forked parent's copy, so every child reported the bench's own 1.2 GB)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def child_compile(model: Path, config: str, out: Path | None, precision: str = "int8") -> dict:
    from compiler.driver import compile_graph, random_inputs
    from compiler.frontend import onnx as onnx_frontend
    from loadable.format import write_loadable

    t0 = time.perf_counter()
    g = onnx_frontend.load(model)
    calib = random_inputs(g, CALIBRATION) if precision != "fp16" else None
    ld, _, _ = compile_graph(g, config, calib_inputs=calib, precision=precision)
    seconds = time.perf_counter() - t0
    if out is not None:
        write_loadable(out, ld)
    return {"seconds": seconds, "peak_rss_mb": _peak_mb()}


def child_run(loadable: Path, inputs: int) -> dict:
    """Seconds per input of a golden run, after one warm-up input (decoded weights cached, as for every
    sample after the first of a batch)."""
    import numpy as np

    from runtime.executor import load

    net = load(loadable)
    name = net.inputs[0]
    shape = net.input_shapes()[name]
    x = np.random.default_rng(0).standard_normal((inputs + 1, *shape[1:])).astype(np.float32)
    net.run({name: x[:1]})
    t0 = time.perf_counter()
    net.run({name: x[1:]})
    return {"seconds_per_input": (time.perf_counter() - t0) / inputs, "peak_rss_mb": _peak_mb()}


def _child(args: list[str]) -> dict:
    done = subprocess.run([sys.executable, "-m", "regressions.bench_imagenet", *args], capture_output=True,
                          text=True, timeout=CHILD_TIMEOUT)
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
        raise RuntimeError(f"bench_imagenet {' '.join(args)}: exit {done.returncode}: {tail[0]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def measure(names: list[str], configs: tuple[str, ...], width: float, run_inputs: int,
            say=print) -> dict:
    """Compile every network for every config (seconds, peak RSS) and time golden runs of ResNet-50."""
    import onnx

    from regressions.lib.zoo.imagenet import IMAGENET

    results: dict = {"imagenet_compile": {}}
    with tempfile.TemporaryDirectory(prefix="dla-bench-imagenet-") as tmp:
        for name in names:
            path = Path(tmp) / f"{name}.onnx"
            onnx.save(IMAGENET[name](0, 224, width), path)
            row = results["imagenet_compile"].setdefault(name, {})
            for cfg in configs:
                out = Path(tmp) / f"{name}.{cfg}.dla"
                row[cfg] = _child(["compile", str(path), cfg, str(out)])
                say(f"  {name} {cfg}: compile {row[cfg]['seconds']:.2f} s, peak {row[cfg]['peak_rss_mb']:.0f} MB")
                if name == "resnet50" and run_inputs:
                    r = _child(["run", str(out), str(run_inputs)])
                    results[f"golden_resnet50_seconds_per_input_{cfg}"] = r["seconds_per_input"]
                    say(f"  resnet50 {cfg}: golden {r['seconds_per_input']:.2f} s per input")
            if name == "resnet50" and run_inputs and "nv_full" in configs:
                out = Path(tmp) / f"{name}.nv_full.fp16.dla"
                c = _child(["compile", str(path), "nv_full", str(out), "fp16"])
                r = _child(["run", str(out), str(run_inputs)])
                results["compile_resnet50_fp16_seconds_nv_full"] = c["seconds"]
                results["golden_resnet50_fp16_seconds_per_input_nv_full"] = r["seconds_per_input"]
                say(f"  resnet50 nv_full fp16: compile {c['seconds']:.2f} s, golden {r['seconds_per_input']:.2f} s "
                    f"per input")
            if name in ("resnet50", "squeezenet"):
                results[f"compile_peak_rss_mb_{name}"] = max(v["peak_rss_mb"] for v in row.values())
            if name == "resnet50":
                results["compile_resnet50_16cal_seconds"] = max(v["seconds"] for v in row.values())
    return results


def main(argv: list[str]) -> int:
    if argv[0] == "compile":
        out = json.dumps(child_compile(Path(argv[1]), argv[2], Path(argv[3]) if len(argv) > 3 else None,
                                       argv[4] if len(argv) > 4 else "int8"))
    elif argv[0] == "run":
        out = json.dumps(child_run(Path(argv[1]), int(argv[2])))
    else:
        raise SystemExit(f"bench_imagenet: unknown command {argv[0]!r}")
    print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
