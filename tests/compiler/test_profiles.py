"""``dla compile --profile``: compressed weights and Winograd convolutions change traffic, not results.

Compressed weights are lossless, so a profile that compresses must write exactly the default loadable's bytes
on golden; Winograd changes the arithmetic (transformed, requantized weights), so its networks are held to the
float reference and each Winograd layer replays equal to the plain-loop Winograd reference
(``regressions.lib.reference.conv_winograd``). The compressor and the Winograd weight packer are checked
against the reference writers, and the compressed blocks against golden's decompression.
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest

from compiler.codegen import wcomp
from compiler.codegen.winograd import pack_winograd_weights
from compiler.driver import compile_graph
from compiler.frontend import onnx as onnx_frontend
from compiler.profiles import PROFILES, optimised_ops
from golden.config import get_config
from golden.engines.conv_wcomp import decompress
from regressions.lib.layer_replay import replay_all
from regressions.lib.reference import conv_winograd as ref_wg
from regressions.lib.reference import wcomp as ref_wcomp
from regressions.lib.zoo import models
from runtime.executor import Network
from runtime.profile import Profile

ROOT = Path(__file__).resolve().parents[2]


def _cos(a: np.ndarray, b: np.ndarray) -> float:
    a, b = a.ravel().astype(np.float64), b.ravel().astype(np.float64)
    return float(a @ b / np.linalg.norm(a) / np.linalg.norm(b))


@pytest.mark.parametrize("bpe", [1, 2])
@pytest.mark.parametrize("kernels", [1, 16, 40])
def test_compressor_writes_the_reference_blocks_and_golden_decompresses_them(bpe: int, kernels: int) -> None:
    rng = np.random.default_rng(kernels * bpe)
    per_kernel = 3 * 3 * 24
    values = rng.integers(-(1 << (8 * bpe - 1)), 1 << (8 * bpe - 1), size=kernels * per_kernel)
    values[rng.random(values.size) < 0.7] = 0
    raw = (values & ((1 << (8 * bpe)) - 1)).astype(np.uint8 if bpe == 1 else "<u2").tobytes()
    group = 32 if bpe == 1 else 16
    got = wcomp.compress(raw, bpe=bpe, kernels=kernels, kernel_group=group)
    want = ref_wcomp.compress(raw, size=bpe, kernel_group=group, elements_per_kernel=per_kernel)
    assert (got.wmb, got.stream, got.wgs) == (want.wmb, want.stream, want.wgs)
    back = decompress(np.frombuffer(got.wmb, np.uint8), np.frombuffer(got.stream, np.uint8), values.size, bpe)
    assert back.tobytes() == raw
    # 70% zeros pay for the mask once the 128-byte entry padding is amortized; a dense stream never does
    if kernels == 40:
        assert wcomp.worth_it(got, len(raw))
    dense = np.where(values == 0, 1, values)
    raw_dense = (dense & ((1 << (8 * bpe)) - 1)).astype(np.uint8 if bpe == 1 else "<u2").tobytes()
    assert not wcomp.worth_it(wcomp.compress(raw_dense, bpe=bpe, kernels=kernels, kernel_group=group), len(raw))


def test_an_all_zero_stream_keeps_one_element() -> None:
    got = wcomp.compress(bytes(64), bpe=1, kernels=2, kernel_group=32)
    assert got.wmb[0] == 1 and len(got.stream) == 128 and int.from_bytes(got.wgs[:4], "little") == 1


@pytest.mark.parametrize("precision", ["int8", "int16"])
@pytest.mark.parametrize("kernels", [16, 40])
def test_winograd_weight_packer_matches_the_reference_layout(precision: str, kernels: int) -> None:
    hw = get_config("nv_full")
    bits = 8 if precision == "int8" else 16
    u = np.random.default_rng(kernels).integers(-(1 << (bits - 1)), 1 << (bits - 1), size=(kernels, 32, 4, 4))
    want = ref_wg.pack_weights(u, kernel_group=hw.mac_atomic_k_for(precision), precision=precision)
    got = pack_winograd_weights(u, hw, precision)
    assert got[: len(want)] == want and not any(got[len(want):]) and len(got) % 128 == 0


def _compile(model: onnx.ModelProto, config: str, precision: str, profile: str):
    msg, lowered, _ = compile_graph(onnx_frontend.load(model), config, precision=precision, profile=profile)
    return msg, lowered


def _input(model: onnx.ModelProto, n: int = 2) -> np.ndarray:
    shape = [d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim]
    return np.random.default_rng(1).standard_normal((n, *shape[1:])).astype(np.float32)


def test_compressed_weights_fetch_fewer_bytes_and_change_no_output_byte() -> None:
    model = models.mobilenet(0)
    x = _input(model)
    runs = {}
    for profile in ("default", "performance"):
        msg, _ = _compile(model, "nv_full", "int8", profile)
        prof = Profile()
        runs[profile] = (optimised_ops(msg), Network(msg).run(x, raw=True, profile=prof), prof.totals()["read"]["CONV"])
    (ops_d, out_d, read_d), (ops_p, out_p, read_p) = runs["default"], runs["performance"]
    assert ops_d["compressed weights"] == 0 and ops_p["compressed weights"] >= 3  # the depthwise chunks at least
    assert ops_p["Winograd"] == 0  # int8: Winograd is fast-math's
    assert read_p < 0.85 * read_d
    assert all(out_p[k].tobytes() == out_d[k].tobytes() for k in out_d)


@pytest.mark.parametrize("name", ["lenet", "poolnet", "resnet", "mobilenet", "inception"])
def test_poolings_on_the_fly_write_the_default_bytes_and_replay(name: str) -> None:
    """nv_small has neither compression nor Winograd: ``performance`` there only feeds poolings from SDP on the
    fly; outputs byte-equal to ``default``, the fused operations replay equal to the reference math (the
    producer's, then the pooling's), and the intermediate cube is no longer a tensor of the loadable."""
    model = models.__dict__[name](0)
    x = _input(model)
    default, _ = _compile(model, "nv_small", "int8", "default")
    fused, lowered = _compile(model, "nv_small", "int8", "performance")
    used = optimised_ops(fused)
    assert used["SDP->PDP on the fly"] >= 1 and used["compressed weights"] == used["Winograd"] == 0
    assert len(fused.tensors) == len(default.tensors) - used["SDP->PDP on the fly"]
    a, b = Network(default).run(x, raw=True), Network(fused).run(x, raw=True)
    assert all(a[k].tobytes() == b[k].tobytes() for k in a)
    nodes = {n.name for n in lowered.nodes if n.attrs.get("flying_pdp") is not None}
    results = [r for r in replay_all(fused, lowered, get_config("nv_small"), seed=2) if r.name in nodes]
    assert len(results) == len(nodes) and all(r.ok for r in results), results


def test_format_nvdla_fuses_poolings_too() -> None:
    """NVDLA's firmware takes fused SDP/PDP descriptors (``tests/runtime/test_nvdla_export.py`` runs them)."""
    msg, _, _ = compile_graph(onnx_frontend.load(models.lenet(0)), "nv_small", profile="performance",
                              firmware_pdp=True)
    assert optimised_ops(msg)["SDP->PDP on the fly"] == 2


def test_basic_profile_keeps_nothing_in_the_cbuf_between_pieces() -> None:
    model = models.lenet(0)
    x = _input(model)
    default, _ = _compile(model, "nv_small", "int8", "default")
    basic, _ = _compile(model, "nv_small", "int8", "basic")
    assert optimised_ops(default)["CBUF reuse"] > 0 and optimised_ops(basic)["CBUF reuse"] == 0
    a, b = Network(default).run(x, raw=True), Network(basic).run(x, raw=True)
    assert all(a[k].tobytes() == b[k].tobytes() for k in a)


@pytest.mark.parametrize("name,precision,profile,floor", [
    ("resnet", "int16", "performance", 0.9999),
    ("mobilenet", "int16", "performance", 0.9999),  # its Winograd input is a ReLU6 (no range headroom)
    ("inception", "int16", "performance", 0.9999),
    ("mobilenet", "int8", "fast-math", 0.99),
    ("inception", "int8", "fast-math", 0.99),
])
def test_winograd_networks_match_float_and_replay_layer_by_layer(name: str, precision: str, profile: str,
                                                                  floor: float) -> None:
    model = getattr(models, name)(0)
    x = _input(model)
    msg, lowered = _compile(model, "nv_full", precision, profile)
    assert optimised_ops(msg)["Winograd"] >= 1
    sess = ort.InferenceSession(model.SerializeToString())
    ref = np.concatenate([sess.run(None, {model.graph.input[0].name: x[i:i + 1]})[0] for i in range(len(x))])
    got = next(iter(Network(msg).run(x).values()))
    assert _cos(got, ref) >= floor
    wino = [n for n in lowered.nodes if n.op == "dla.conv" and n.attrs["conv"].winograd is not None]
    assert wino
    results = replay_all(msg, lowered, get_config("nv_full"), seed=3)
    by_name = {r.name: r for r in results}
    for n in wino:
        assert by_name[n.name].ok, by_name[n.name]
    assert all(r.ok for r in results), [r for r in results if not r.ok]


def test_int8_winograd_is_only_fast_math() -> None:
    assert not PROFILES["performance"].winograd_int8 and PROFILES["fast-math"].winograd_int8
    msg, _ = _compile(models.resnet(0), "nv_full", "int8", "fast-math")
    assert optimised_ops(msg)["Winograd"] == 1


def test_cli_profile_option_and_summary(tmp_path: Path) -> None:
    onnx.save(models.mobilenet(0), tmp_path / "m.onnx")
    cmd = [sys.executable, "-m", "app.cli", "compile", str(tmp_path / "m.onnx"), "--config", "nv_full",
           "-o", str(tmp_path / "m.dla")]
    ok = subprocess.run(cmd + ["--profile", "performance"], capture_output=True, text=True, cwd=ROOT)
    assert ok.returncode == 0, ok.stderr
    assert "with compressed weights" in " ".join(ok.stdout.split())
    bad = subprocess.run(cmd + ["--profile", "fastest"], capture_output=True, text=True, cwd=ROOT)
    assert bad.returncode == 2 and "--profile" in bad.stderr and "Traceback" not in bad.stderr
