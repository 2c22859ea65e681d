"""Real material the attacks start from, built once per sweep in its temp root (never in the repo).

Zoo models saved as ONNX and Caffe, poolnet and lenet compiled for nv_small by `dla compile` itself (with the
traces it emits), an NVDLA flatbuffer loadable from ``runtime/nvdla/writer.py``, and NVDLA's own traces
(``/work/shared/nvdla/traces``), which attacks read in place or symlink and only copy into their temp dir.
"""
from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DLA = REPO / ".venv" / "bin" / "dla"
NVDLA_TRACES = Path(os.environ.get("NVDLA_TRACES", "/work/shared/nvdla/traces"))

#: The nv_small trace most attacks edit: small (one PDP layer, one data file) and quick to play.
PDP_TRACE = "pdp_12x9x19_8x3_ave_int8_0"
#: An nvdlav1 trace (input.txn + plusargs.txt + a data file) for the txn and poll attacks.
TXN_TRACE = ("nv_full", "sanity2")


def pdp_nvdla_loadable(*, legacy: bool = False, src_size: int = 512, address_size: int | None = None,
                       tensor_size: int = 128) -> bytes:
    """A one-PDP NVDLA flatbuffer loadable (as tests/runtime/test_nvdla_loadable.py builds it); the sizes
    are knobs so the bomb attacks can declare absurd ones."""
    from runtime.nvdla import descriptors as d
    from runtime.nvdla import fbs
    from runtime.nvdla.writer import LoadableBuilder

    b = LoadableBuilder(legacy=legacy)
    src = b.buffer("src", src_size, bytes(range(256)) * 2 if src_size >= 512 else None)
    dst = b.buffer("dst", 128)
    if address_size is not None:
        b.ld.addresses[b._addresses[src]].size = address_size
    cube = dict(width=8, height=8, channel=8, line_stride=64, surf_stride=512, size=512)
    b.op(d.OP_PDP, d.PdpOpDesc(split_num=1, pool_mode=1, pool_width=1, pool_height=1, stride_x=2, stride_y=2),
         d.PdpSurfaceDesc(src_data=d.DataCube(address=src, **cube),
                          dst_data=d.DataCube(address=dst, width=4, height=4, channel=8, line_stride=32,
                                              surf_stride=128, size=128)))
    b.output(dst, fbs.TensorDesc(name="out", id=0, mem_id=0, size=tensor_size, c=8, h=4, w=4,
                                 strides=[1, 32, 128, 0, 0, 0, 0, 0]))
    return b.build()


@dataclass
class Material:
    root: Path

    @classmethod
    def build(cls, root: Path) -> Material:
        """Everything the attacks copy from; one `dla compile` (a couple of seconds)."""
        import numpy as np
        import onnx

        from regressions.lib.zoo.models import lenet, poolnet
        from regressions.lib.zoo.to_caffe import to_caffe

        root.mkdir(parents=True, exist_ok=True)
        onnx.save(poolnet(0), root / "poolnet.onnx")
        onnx.save(lenet(0), root / "lenet.onnx")
        np.save(root / "x.npy", np.random.default_rng(5).normal(0, 1, (1, 16, 16, 16)).astype(np.float32))
        for name, model in (("poolnet", poolnet(0)), ("lenet", lenet(0))):
            text, weights = to_caffe(model)
            (root / f"{name}.prototxt").write_text(text)
            (root / f"{name}.caffemodel").write_bytes(weights)
        (root / "pdp.nvdla").write_bytes(pdp_nvdla_loadable())
        (root / "pdp_legacy.nvdla").write_bytes(pdp_nvdla_loadable(legacy=True))
        done = subprocess.run([str(DLA), "compile", "poolnet.onnx", "--config", "nv_small", "-o", "poolnet.dla",
                               "--calib-random", "2", "--emit-trace", "traces", "--input", "x.npy"],
                              cwd=root, capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"cannot build the sweep's loadable: {done.stderr.strip()}")
        done = subprocess.run([str(DLA), "compile", "lenet.onnx", "--config", "nv_small", "-o", "lenet.dla",
                               "--calib-random", "2"], cwd=root, capture_output=True, text=True)
        if done.returncode != 0:  # lenet takes one grayscale channel: the loadable the image attacks feed
            raise RuntimeError(f"cannot build the sweep's lenet loadable: {done.stderr.strip()}")
        return cls(root)

    def copy(self, name: str, workdir: Path, as_name: str | None = None) -> Path:
        """A private copy of a built file in the attack's temp dir (an attack may try to clobber it)."""
        dst = workdir / (as_name or name)
        src = self.root / name
        if src.is_dir():
            shutil.copytree(src, dst)
        else:
            shutil.copy(src, dst)
        return dst

    def nvdla_trace(self, name: str = PDP_TRACE, config: str = "nv_small") -> Path:
        return NVDLA_TRACES / config / name
