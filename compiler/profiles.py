"""``dla compile --profile``: which optional hardware optimisations the compiler uses (NVDLA's compiler names).

Every optimisation here is one the golden model checks bit for bit, so a profile changes speed and DMA
traffic, never the meaning of a register program:

* ``cbuf_reuse``: consecutive pieces of a split convolution keep their input band or weights in the CBUF
  (``compiler.passes.split_conv.cbuf_reuse``);
* ``compress_weights``: conv weights go compressed (WMB + sparse stream + WGS) where the config has weight
  compression and that fetches fewer bytes (sparse kernels: depthwise chunks, pruned networks);
* ``winograd``: eligible 3x3 convolutions run in Winograd mode on configs that have it
  (``compiler.passes.winograd``): in int16 for ``performance``, in int8 too for ``fast-math``, which accepts
  the int8 PRA's dropped input bit (measured on the zoo: cosine vs float drops from 0.9996 to about 0.99);
* ``fuse_pdp``: a pooling reads its producer's SDP output on the fly instead of from memory
  (``compiler.passes.fuse_pdp``).

A new profile or optimisation is one entry here and one ``ctx.profile.<flag>`` test where it applies.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Profile:
    name: str
    cbuf_reuse: bool = True
    compress_weights: bool = False
    winograd: bool = False
    #: poolings take their input from SDP on the fly (``compiler.passes.fuse_pdp``)
    fuse_pdp: bool = False
    #: Winograd in int8 too: B^T d B quadruples the input range, which int8 has no headroom for, so the PRA
    #: drops ``winograd_int8_pra_truncate`` low bits of every transformed input (an accuracy cost)
    winograd_int8: bool = False
    winograd_int8_pra_truncate: int = 1


PROFILES: dict[str, Profile] = {p.name: p for p in (
    Profile("basic", cbuf_reuse=False),
    Profile("default"),
    Profile("performance", compress_weights=True, winograd=True, fuse_pdp=True),
    Profile("fast-math", compress_weights=True, winograd=True, fuse_pdp=True, winograd_int8=True),
)}
DEFAULT_PROFILE = "default"


def get_profile(name: str | None) -> Profile:
    from compiler.errors import CompileError

    if name is None:
        return PROFILES[DEFAULT_PROFILE]
    if name not in PROFILES:
        raise CompileError("", f"--profile must be one of {', '.join(PROFILES)}, not {name!r}")
    return PROFILES[name]


def optimised_ops(msg) -> dict[str, int]:
    """How many of a loadable's DLA operations use each optimisation, read from their register writes (what
    the hardware will do, not what the compiler meant to): compressed weights, Winograd, CBUF reuse, SDP->PDP."""
    from golden.regs import UNITS

    misc, fmt = UNITS["CDMA"].register("D_MISC_CFG"), UNITS["CDMA"].register("D_WEIGHT_FORMAT")
    counts = {"compressed weights": 0, "Winograd": 0, "CBUF reuse": 0, "SDP->PDP on the fly": 0}
    sdp_mode = UNITS["SDP"].register("D_FEATURE_MODE_CFG")
    for task in msg.tasks:
        for op in task.dla.ops if task.WhichOneof("kind") == "dla" else ():
            writes = {w.name: w.value for w in op.writes}
            cfg = writes.get(misc.full_name)
            if writes.get(fmt.full_name) and fmt.field("WEIGHT_FORMAT").decode(writes[fmt.full_name]):
                counts["compressed weights"] += 1
            if cfg is not None and misc.field("CONV_MODE").decode(cfg):
                counts["Winograd"] += 1
            if cfg is not None and (misc.field("DATA_REUSE").decode(cfg) or misc.field("WEIGHT_REUSE").decode(cfg)):
                counts["CBUF reuse"] += 1
            mode = writes.get(sdp_mode.full_name)
            if mode is not None and sdp_mode.field("OUTPUT_DST").decode(mode):
                counts["SDP->PDP on the fly"] += 1
    return counts


__all__ = ["DEFAULT_PROFILE", "PROFILES", "Profile", "get_profile", "optimised_ops"]
