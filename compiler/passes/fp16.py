"""fp16 networks: every engine op's register parameters in half precision, with no calibration.

The float graph maps onto the fp16 datapath directly (NVDLA's compiler builds nv_full networks this way):

- conv: the affine chain's per-filter scale is folded into the fp16 weights (BatchNorm costs nothing, as
  in int8) and its bias is SDP X1's ALU operand; CMAC multiplies fp16, CACC accumulates FP32, SDP adds in
  FP32 and narrows to fp16 once, at its output;
- standalone SDP: X1 ALU (bias / scale) then MUL (scale), the order the stage computes in;
- eltwise add/max on X2's ALU, mul on X2's MUL (the other fp16 cube read element by element); PReLU on
  X2's MUL; ReLU where the chain has it;
- ReLU6 (Clip(0, cap)): min(x, cap) on Y's ALU, its REG operand an fp32 word (lowering fuses nothing
  after it);
- average pooling: FP17 reciprocals 1/kw and gain/kh (``gain``: the share of a multi-pass global average),
  zero pad values.

- sigmoid/tanh: Y's LUT in fp16 mode (``compiler.lut.sdp_activation_fp16``).

- LRN: CDP in fp16, its LUT over the fp32 square sums (``compiler.lut.lrn_fp16``: LO linear where
  the function bends, LE's octaves past it).

A value fp16 cannot hold (a weight or bias beyond 65504
after folding) is refused naming the layer.
"""
from __future__ import annotations

import numpy as np

from compiler.hwparams import ALU_MAX, ALU_MIN, ALU_SUM, ConvParams, PdpParams, SdpParams, TensorOperand, XStage, YStage
from compiler.ir import Graph, Node
from compiler.passes import CompileContext
from compiler.lut import lrn_fp16, sdp_activation_fp16
from compiler.postops import Eltwise, Lut, PRelu, Relu, by_stage
from golden import fp
from golden.lut import LutRegisters

#: FP16 bit pattern of 1.0.
ONE = 0x3C00


def f16_bits(values, what: str) -> np.ndarray:
    """fp16 bit patterns (int64) of float values, round to nearest even; raises naming ``what`` when a value
    is beyond fp16's range."""
    v = np.asarray(values, dtype=np.float64)
    h = v.astype(np.float16)
    if not np.all(np.isfinite(h)):
        worst = float(np.max(np.abs(v)))
        raise OverflowError(f"{what} reaches {worst:g}, beyond fp16's 65504")
    return h.view(np.uint16).astype(np.int64)


def fp17_bits(value: float) -> int:
    """The FP17 pattern (sign, 6-bit exponent, 10-bit mantissa) PDP's reciprocal registers take."""
    f32 = np.array([value], dtype=np.float32).view(np.uint32).astype(np.int64)
    return int(fp.fp32_to_fp17(f32)[0])


def _operand(bits: np.ndarray):
    """A register operand when every channel has the same pattern, else the per-channel array."""
    return int(bits[0]) if bits.size and np.all(bits == bits[0]) else bits


#: fp16 1.0 and -0.0: a MUL by the one and an ALU sum with the other change no value (x + -0.0 keeps -0.0).
F16_ONE, F16_MINUS_ZERO = 0x3C00, 0x8000


def _whole_beats(st: XStage) -> XStage:
    """A stage reading one per-channel operand from memory reads an identity partner with it (DATA_USE BOTH).

    Measured on NVDLA's nv_full RTL (2026-12-07, a 1x1 fp16 conv with a per-channel bias, X1 ALU only): with
    one 2-byte component per channel, K = 48, 80, 112, 144 and every even number of 16-channel groups
    finish, but 11, 13, 15, 17, 19, 21, 25 and 31 groups (K = 176 ... 496) never do: SDP's done bit never
    comes, at any cube size, and without the bias they finish; so do a standalone SDP's bias (X1) and PReLU
    slopes (X2, NRDMA) at 11 atoms. The operand then ends in half a 64-byte read beat. Read as ALU and MUL pairs (4 bytes a channel, what int16 networks read) every group is one whole
    beat, and the results are unchanged."""
    alu = not st.bypass and not st.alu_bypass and isinstance(st.alu_operand, np.ndarray)
    mul = not st.bypass and not st.mul_bypass and isinstance(st.mul_operand, np.ndarray)
    if alu and st.mul_bypass:
        st.mul_bypass, st.mul_operand = False, np.full(np.size(st.alu_operand), F16_ONE, dtype=np.int64)
    elif mul and st.alu_bypass:
        st.alu_bypass, st.alu_algo = False, ALU_SUM
        st.alu_operand = np.full(np.size(st.mul_operand), F16_MINUS_ZERO, dtype=np.int64)
    return st


def _chain(post) -> tuple[np.ndarray | None, np.ndarray | None, bool, Eltwise | None, Relu | PRelu | None]:
    """(scale, bias, ReLU in X1, eltwise, activation in X2) of a post-op chain; scale/bias None without an
    affine."""
    ch = by_stage(post)
    return ch.scale, ch.bias, ch.relu1, ch.eltwise, ch.act2


def _x2(elt: Eltwise | None, act2, c: int) -> XStage:
    x2 = XStage()
    if elt is None and act2 is None:
        return x2
    x2.bypass = False
    if elt is not None and elt.kind in ("add", "max"):
        x2.alu_bypass, x2.alu_algo, x2.alu_operand = False, ALU_SUM if elt.kind == "add" else ALU_MAX, \
            TensorOperand(elt.tensor)
    elif elt is not None:
        x2.mul_bypass, x2.mul_operand = False, TensorOperand(elt.tensor)
    if isinstance(act2, Relu):
        x2.relu_bypass = False
    elif isinstance(act2, PRelu):
        slope = np.broadcast_to(np.asarray(act2.slope, dtype=np.float64), (c,))
        x2.mul_bypass, x2.mul_prelu, x2.mul_operand = False, True, _operand(f16_bits(slope, "the PReLU slope"))
    return x2


def _y(post) -> tuple[YStage, LutRegisters | None]:
    """Y's ALU as MIN with the smallest ReLU cap of the chain (or bypassed), then its LUT for a sigmoid or
    tanh (``compiler.lut.sdp_activation_fp16``)."""
    caps = [p.cap for p in post if isinstance(p, Relu) and p.cap is not None]
    luts = [p for p in post if isinstance(p, Lut)]
    y, table = YStage(), None
    if luts:
        y, table = sdp_activation_fp16(luts[0].fn)
    if caps:
        word = int(np.array([min(caps)], dtype=np.float32).view(np.uint32)[0])
        y.bypass, y.alu_bypass, y.alu_algo, y.alu_operand = False, False, ALU_MIN, word
    return y, table


def conv_params(n: Node) -> tuple[ConvParams, SdpParams]:
    """fp16 weights (the chain's scale folded in) and the on-the-fly SDP that adds the bias."""
    w = n.attrs["weight"]
    k = w.shape[0]
    gamma, beta, relu1, elt, act2 = _chain(n.attrs["post"])
    gamma = np.ones(k) if gamma is None else gamma
    bits = np.empty(w.shape, dtype=np.int64)
    for k0 in range(0, k, 256):  # float64 temporaries of a block of kernels
        blk = np.asarray(w[k0:k0 + 256], dtype=np.float64) * gamma[k0:k0 + 256, None, None, None]
        bits[k0:k0 + 256] = f16_bits(blk, "a weight (times its BatchNorm/scale factor)")
    pt, pl, _, _ = n.attrs["pads"]
    conv = ConvParams(weights=bits, stride=tuple(n.attrs["stride"]), dilation=tuple(n.attrs["dilation"]),
                      pad=(pt, pl), precision="fp16")
    x1 = XStage(bypass=not relu1, relu_bypass=not relu1)
    if beta is not None and np.any(beta != 0):
        x1.bypass, x1.alu_bypass, x1.alu_algo = False, False, ALU_SUM
        x1.alu_operand = _operand(f16_bits(beta, "the bias"))
    y, lut = _y(n.attrs["post"])
    return conv, SdpParams(x1=_whole_beats(x1), x2=_whole_beats(_x2(elt, act2, k)), y=y, lut=lut,
                           precision="fp16")


def sdp_params(n: Node, c: int) -> SdpParams:
    """A standalone SDP: X1 ALU (bias / scale) then X1 MUL (scale), so y = x * scale + bias."""
    gamma, beta, relu1, elt, act2 = _chain(n.attrs["post"])
    x1 = XStage(bypass=not relu1, relu_bypass=not relu1)
    if gamma is not None:
        gamma, beta = np.broadcast_to(gamma, (c,)), np.broadcast_to(beta, (c,))
        zero = gamma == 0  # channels padded in (pad_channels) have scale and bias 0: output 0
        if np.any(zero & (beta != 0)):
            raise ValueError("a channel with scale 0 and a bias: fp16 SDP computes (x + bias / scale) * scale")
        x1.bypass = False
        if np.any(gamma != 1):
            x1.mul_bypass, x1.mul_operand = False, _operand(f16_bits(gamma, "the scale"))
        if np.any(beta != 0):
            x1.alu_bypass, x1.alu_algo = False, ALU_SUM
            ratio = np.divide(beta, gamma, out=np.zeros(c), where=~zero)
            x1.alu_operand = _operand(f16_bits(ratio, "bias / scale"))
    y, lut = _y(n.attrs["post"])
    return SdpParams(x1=_whole_beats(x1), x2=_whole_beats(_x2(elt, act2, c)), y=y, lut=lut, precision="fp16")


def pdp_params(n: Node, kernel, stride, pads) -> PdpParams:
    """FP17 reciprocals of an fp16 average (max/min pooling ignores them)."""
    kh, kw = kernel
    gain = float(n.attrs.get("gain", 1.0))
    return PdpParams(n.attrs["method"], tuple(kernel), tuple(stride), tuple(pads),
                     recip_w=fp17_bits(1.0 / kw), recip_h=fp17_bits(gain / kh), precision="fp16")


def _lrn(n: Node, ctx: CompileContext) -> None:
    """CDP's fp16 LRN program, its predicted accuracy logged; on the CPU when the constants do not fit."""
    try:
        design = lrn_fp16(int(n.attrs["size"]), float(n.attrs["alpha"]), float(n.attrs["beta"]),
                          float(n.attrs["bias"]))
    except ValueError as exc:
        ctx.log(f"  {n.name}: LRN on the CPU ({exc})")
        n.op = "cpu.LRN"
        return
    n.attrs["cdp"] = design.params
    ctx.log(f"  {n.name}: LRN on CDP (fp16 LUT: within {design.lo_error:.1e} of the function up to "
            f"a*S/bias = {design.lo_reach:.1f}, {design.le_error:.1e} past it)")


def fp16_params(g: Graph, ctx: CompileContext) -> Graph:
    """The fp16 counterpart of ``quantize``: register parameters of every engine op, every scale 1."""
    ctx.scales = {}
    for n in g.nodes:
        fp16_node(g, n, ctx)
    return g


def fp16_node(g: Graph, n: Node, ctx: CompileContext) -> None:
    """One node's fp16 register parameters; a CompileError naming it when they cannot be built."""
    try:
        if n.op == "dla.conv":
            n.attrs["conv"], n.attrs["sdp"] = conv_params(n)
        elif n.op == "dla.sdp":
            shape = g.shapes[n.inputs[0]]
            n.attrs["sdp"] = sdp_params(n, int(shape[1]) if len(shape) >= 2 else int(shape[0]))
        elif n.op == "dla.pdp":
            if ctx.firmware_pdp and n.attrs["method"] == "avg" and (n.attrs.get("regions")
                                                                     or float(n.attrs.get("gain", 1.0)) != 1.0):
                raise ValueError(f"average pooling {list(n.attrs['kernel'])}: NVDLA's firmware programs "
                                 "reciprocals 1/kernel only, but it takes several passes or regions; no "
                                 "--format nvdla for it")
            n.attrs["pdp"] = pdp_params(n, n.attrs["kernel"], n.attrs["stride"], n.attrs["pads"])
            if n.attrs.get("regions"):
                n.attrs["pdp_regions"] = [(r, pdp_params(n, r.kernel, r.stride, r.pads))
                                          for r in n.attrs["regions"]]
        elif n.op == "dla.cdp":
            _lrn(n, ctx)
        elif n.op.startswith("dla."):
            raise ValueError(f"{n.op} has no fp16 program")
    except (OverflowError, ValueError) as exc:
        raise g.error(n, f"cannot build fp16 parameters: {exc}") from None
