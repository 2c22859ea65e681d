"""Int8 quantization: tensor scales from calibration, then each engine op's integer register parameters.

Activations are symmetric int8 (real = scale * q). Tensors that an op only moves (pooling, views, CPU
copies) share one scale, so those ops are exact; a union-find groups them and the group takes the largest
calibrated range. Weights are int8 per filter (``per-filter``) or per layer (``per-kernel``). The SDP then
does all requantization in integers, as NVDLA's compiler programs it:

- X1: ALU adds the bias (in accumulator units, 16-bit operand << shift), MUL rescales each channel to a
  common internal scale ``u`` (16-bit multiplier >> shift), optional ReLU;
- X2: the eltwise operand (another int8 tensor << shift, so ``u`` is a power-of-two fraction of its scale),
  or PReLU (slope << shift, negative side only), optional ReLU;
- Y: the LUT (sigmoid/tanh) where the config has one;
- CVT: ``u`` -> the output scale (16-bit scale >> shift), saturating to int8.
"""
from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from compiler.hwparams import (
    ALU_MAX, ALU_SUM, ConvParams, OperandCvt, PdpParams, SdpParams, TensorOperand, XStage, YStage,
)
from compiler.ir import Graph, Node
from compiler.passes import CompileContext
from compiler.postops import Affine, PostOp, PRelu, Relu, by_stage
from compiler.unionfind import UnionFind
from golden.engines.pdp import FIRMWARE_RECIP_KERNEL

#: Extra fraction bits of the internal SDP scale below the output scale (precision headroom).
HEADROOM_BITS = 10
I16 = 32767
I32 = 2**31 - 1
MAX_SHIFT = 63
MAX_ALU_SHIFT = 31
#: Range margin of average-pooling outputs (PDP wraps instead of saturating).
AVG_POOL_HEADROOM = 2.0
#: Range margin of network outputs and tensors the CPU reads.
OUTPUT_HEADROOM = 1.25
#: PDP RECIP_KERNEL_WIDTH/HEIGHT are unsigned 17-bit 0.16 fixed point.
MAX_RECIP = 0x1FFFF
#: The smallest calibrated range that gets a scale of its own: the loadable stores scales as float32, so
#: range / 127 must stay a normal float32. A deep chain of layers that each shrink their input (1000 convs of
#: gain 0.8) calibrates ranges below that by layer ~300, 0 even in float64 later: 0.0 scales in the loadable.
MIN_RANGE = 127.0 * float(np.finfo(np.float32).tiny)


#: The largest magnitude of each integer precision (symmetric: -QMAX .. QMAX).
QMAX = {"int8": 127, "int16": 32767}
#: Calibrated ranges are widened by this factor before scaling, so an input beyond what calibration saw
#: saturates less. int16 spends 2 of its 15 bits on it (a 4x range at 2^-13 resolution, still far finer than
#: int8's 2^-7: full-size Inception v1 calibrated on 4 random inputs went from cosine 0.9988 to 0.999997);
#: int8 has no bits to spare and saturates at the calibrated range as NVDLA's compiler does.
RANGE_HEADROOM = {"int8": 1, "int16": 4}


def tensor_scales(g: Graph, amax: dict[str, float], fixed: set[str] | frozenset[str] = frozenset(),
                  qmax: int = 127, headroom: float = 1.0, exact: set[str] | frozenset[str] = frozenset()
                  ) -> dict[str, float]:
    """Scale of every activation tensor: groups of same-scale tensors take their largest calibrated range
    (over ``qmax``: 127 for int8, 32767 for int16), widened by ``headroom`` unless the group holds a
    ``fixed`` (model) or ``exact`` (a ReLU6's, saturating at its cap) range."""
    uf = UnionFind()
    tensors = set(g.inputs) | {o for n in g.nodes for o in n.outputs} | {i for n in g.nodes for i in n.inputs}
    tensors -= set(g.consts)
    for t in tensors:
        uf.find(t)
    for n in g.nodes:
        # Max/min pooling, views and copies move values; average pooling rescales in its reciprocals.
        same = (n.op == "dla.pdp" and n.attrs["method"] != "avg") or n.op.startswith("view.") \
            or n.attrs.get("same_scale")
        if same:
            for t in n.inputs[1:] + n.outputs:
                uf.union(n.inputs[0], t)
    group_max: dict[str, float] = {}
    # A group holding a pre-quantized model's tensor takes the model's range: the calibrated ranges of the
    # IR tensors the frontend made around it (a flatten after a mean, a pre-activation) do not widen it.
    pinned = {uf.find(t) for t in fixed if t in tensors and t in amax}
    for t in tensors:
        if t in amax and (t in fixed or uf.find(t) not in pinned):
            r = uf.find(t)
            group_max[r] = max(group_max.get(r, 0.0), float(amax[t]))
    if headroom != 1.0:
        keep = {uf.find(t) for t in (set(fixed) | set(exact)) if t in tensors}
        for r in group_max:
            if r not in keep:
                group_max[r] *= headroom
    # Average pooling stores the low byte of its result without saturating: leave headroom above its
    # calibrated range so unseen inputs do not wrap. (Above the pooled values' own range: the other tensors of
    # its group, e.g. the other inputs of a concat it writes into, saturate and need none.)
    # A pre-quantized model's scales are kept as given, but for an average pool's output: the model's int8
    # saturates there, PDP's wraps, so it keeps the headroom (its grid is then coarser than the model's).
    # Where the model's output range is no narrower than its input's, no average can leave it: no headroom.
    widened: set[str] = set()
    for n in g.nodes:
        if n.op == "dla.pdp" and n.attrs["method"] == "avg" and n.outputs[0] in amax and not n.attrs.get("same_scale"):
            r = uf.find(n.outputs[0])
            ri = uf.find(n.inputs[0])
            if r in pinned and ri in pinned and group_max[r] >= group_max[ri]:
                continue
            if r in group_max and r not in widened:
                group_max[r] = max(group_max[r], float(amax[n.outputs[0]]) * AVG_POOL_HEADROOM)
                widened.add(r)
    # An average's two reciprocals apply at most ``max_pool_gain``: an output range narrower than the input's
    # by more than that (averaging cancels a lot) is widened to it rather than left under-scaled.
    for n in g.nodes:
        if n.op == "dla.pdp" and n.attrs["method"] == "avg":
            ri, ro = uf.find(n.inputs[0]), uf.find(n.outputs[0])
            if ri != ro and ri in group_max and ro in group_max:
                limit = max_pool_gain(*n.attrs["kernel"]) / float(n.attrs.get("gain", 1.0))
                group_max[ro] = max(group_max[ro], group_max[ri] / limit)
    # Network outputs and what feeds the CPU (logits before a softmax) keep headroom above the calibrated
    # range: clipping unseen inputs there would make the top classes tie.
    widened |= {uf.find(t) for t in fixed if t in tensors}
    for t in tensors:
        if t in g.outputs or any(c.op.startswith("cpu.") for c in g.consumers(t)):
            r = uf.find(t)
            if r in group_max and r not in widened:
                group_max[r] *= OUTPUT_HEADROOM
                widened.add(r)
    # A tensor that is zero on every calibration input (a dead ReLU, a conv reading only padding) says
    # nothing about its range. A vanishing scale there would put the next layer's bias beyond the 32-bit
    # SDP ALU and its requantization beyond a 16-bit multiplier, so it takes the network input's range.
    # So does a range below MIN_RANGE: its values are 0 in int8 at that scale, as in float32.
    inputs = [group_max[uf.find(t)] for t in g.inputs if group_max.get(uf.find(t), 0.0) >= MIN_RANGE]
    nonzero = [v for v in group_max.values() if v >= MIN_RANGE]
    reference = max(inputs) if inputs else (max(nonzero) if nonzero else 1.0)
    scales = {}
    for t in tensors:
        r = uf.find(t)
        if r not in group_max:
            raise ValueError(f"tensor {t!r} has no calibration range")
        scales[t] = (group_max[r] if group_max[r] >= MIN_RANGE else reference) / qmax
    return scales


# ---- fixed-point helpers ----------------------------------------------------------------------------------
def fixed(values: np.ndarray, limit: int = I16, max_shift: int = MAX_SHIFT) -> tuple[np.ndarray, int]:
    """Integers q and shift with q / 2^shift ~= values, |q| <= limit, shift as large as possible."""
    values = np.asarray(values, dtype=np.float64)
    peak = float(np.max(np.abs(values))) if values.size else 0.0
    if peak == 0.0:
        return np.zeros(values.shape, dtype=np.int64), 0
    shift = max_shift
    if peak * 2.0 ** shift > limit:
        shift = int(math.floor(math.log2(limit / peak)))
        while shift >= 0 and np.max(np.abs(np.rint(values * 2.0 ** shift))) > limit:
            shift -= 1
    if shift < 0:
        raise OverflowError(f"value {peak} does not fit a 16-bit multiplier")
    return np.rint(values * 2.0 ** shift).astype(np.int64), shift


def coarse(values: np.ndarray, limit: int = I16, max_shift: int = MAX_ALU_SHIFT) -> tuple[np.ndarray, int]:
    """Integers q and the smallest shift with q << shift ~= values and |q| <= limit (ALU operands).
    The shifted operand must stay inside the SDP ALU's 32-bit range, or the hardware saturates it."""
    values = np.asarray(values, dtype=np.float64)
    peak = float(np.max(np.abs(values), initial=0))
    if peak > I32:
        raise OverflowError(f"bias of {peak:.4g} accumulator steps exceeds the 32-bit SDP ALU")
    for shift in range(max_shift + 1):
        q = np.rint(values / 2.0 ** shift)
        if np.max(np.abs(q), initial=0) <= limit:
            return q.astype(np.int64), shift
    raise OverflowError("bias does not fit a 16-bit operand")


def _operand(q: np.ndarray):
    """A register operand when every channel has the same value, else the per-channel array."""
    q = np.asarray(q, dtype=np.int64)
    return int(q[0]) if q.size and np.all(q == q[0]) else q


# ---- SDP --------------------------------------------------------------------------------------------------
#: Fraction bits below the output step of a requantization split over X1 and X2 (``exact_requantization``).
EXACT_BITS = 20
#: The magnitude, in output steps, beyond which every value saturates the int8/int16 output anyway.
_SATURATED = 2 ** 16


def multiplier_pair(ratio: np.ndarray) -> tuple[np.ndarray, np.ndarray, int] | None:
    """Per channel 16-bit a, b and one shift S with a * b / 2^S ~= ratio: to about 2^-27 relative near the
    largest channel, 2^-22 at 1/45 of it (one 16-bit multiplier with a shared shift gets 2^-15 at best, less
    for channels below the peak). a runs over
    [2^14, 2^15) for each channel and b = round(target / a) is kept where it is closest; None if a ratio is
    not positive or the pair cannot hold it."""
    ratio = np.asarray(ratio, dtype=np.float64)
    if ratio.size == 0 or np.any(~np.isfinite(ratio)) or np.any(ratio <= 0):
        return None
    big = 2 ** 29  # the largest channel's target a * b (each factor ~2^14.5)
    shift = int(math.floor(math.log2(big / float(ratio.max()))))
    if shift < 0 or shift > 2 * MAX_SHIFT:
        return None
    target = ratio * 2.0 ** shift
    if float(target.min()) < 2 ** 14:  # the smallest channel's b would be below 1
        return None
    cand = np.arange(2 ** 14, 2 ** 15, dtype=np.float64)
    a_out = np.empty(ratio.size, dtype=np.int64)
    b_out = np.empty(ratio.size, dtype=np.int64)
    for i, t in enumerate(target):
        b = np.clip(np.rint(t / cand), 1, I16)
        j = int(np.argmin(np.abs(cand * b - t)))
        a_out[i], b_out[i] = int(cand[j]), int(b[j])
    return a_out, b_out, shift


def exact_requantization(prm: SdpParams, ratio: np.ndarray, bias_v: np.ndarray, relu1: bool, relu2: bool,
                         out_scale: float) -> bool:
    """X1 and X2 multiply by a pair (``multiplier_pair``) and the output converter rounds once at the end, so a
    pre-quantized model's requantization (TFLite's 31-bit multiplier, onnxruntime's float32 scale) is matched
    nearly always, not only within one step. ``ratio`` is per channel in output steps per accumulator step.
    False (nothing set) where the pair or the shifts do not fit."""
    pair = multiplier_pair(ratio * 2.0 ** EXACT_BITS)
    if pair is None:
        return False
    a, b, total = pair
    # X1's output grid is finer than X2's by b / 2^s2; X1 must still hold every unsaturated value in 31 bits:
    # |v1| = |v2| * 2^s2 / b with |v2| <= _SATURATED * 2^EXACT_BITS.
    s2 = int(math.floor(math.log2(2 ** 30 * float(b.min()) / (_SATURATED * 2 ** EXACT_BITS))))
    s2 = min(s2, total, MAX_SHIFT)
    s1 = total - s2
    if s2 < 0 or not 0 <= s1 <= MAX_SHIFT:
        return False
    try:
        bq, ash = coarse(bias_v)
    except OverflowError:
        return False
    x1 = XStage(bypass=False, relu_bypass=not relu1, mul_bypass=False, mul_operand=_operand(a), mul_shift=s1)
    if np.any(bq != 0):
        x1.alu_bypass, x1.alu_algo, x1.alu_operand, x1.alu_shift = False, ALU_SUM, _operand(bq), ash
    prm.x1 = x1
    prm.x2 = XStage(bypass=False, relu_bypass=not relu2, mul_bypass=False, mul_operand=_operand(b), mul_shift=s2)
    prm.cvt_scale, prm.cvt_shift = 1, EXACT_BITS
    return True


def sdp_params(post: list[PostOp], in_scale: np.ndarray, out_scale: float, scales: dict[str, float], hw,
               where: str, exact: bool = False, qmax: int = 127) -> SdpParams:
    """Integer SDP parameters for a post-op chain on an input whose channel k has real = in_scale[k] * v.
    ``exact``: the output scale is a pre-quantized model's, whose rounding the chain should reproduce.
    ``qmax``: the output type's largest value (int8 127, int16 32767), where a LUT's output saturates."""
    k = in_scale.size
    ch = by_stage(post)
    gamma = np.ones(k) if ch.scale is None else np.broadcast_to(ch.scale, (k,))
    beta = np.zeros(k) if ch.bias is None else np.broadcast_to(ch.bias, (k,))
    relu1, elt, act2, lut = ch.relu1, ch.eltwise, ch.act2, ch.lut
    gamma = np.where(gamma == 0, 1e-12, gamma)
    prm = SdpParams()
    if exact and elt is None and lut is None and (act2 is None or isinstance(act2, Relu)) \
            and exact_requantization(prm, gamma * in_scale / out_scale, beta / (gamma * in_scale), relu1,
                                     isinstance(act2, Relu), out_scale):
        return prm

    # The internal scale u of X1's output.
    if elt is not None and elt.kind in ("add", "max"):
        sb = scales[elt.tensor]
        s2 = int(min(MAX_ALU_SHIFT, max(0, math.ceil(math.log2(sb * 2 ** HEADROOM_BITS / out_scale)))))
        u = sb / 2 ** s2
    else:
        u = out_scale / 2 ** HEADROOM_BITS
    # X1: v1 = ((v + bias) * m) >> msh, real = u * v1.
    ratio = gamma * in_scale / u
    while True:
        try:
            m, msh = fixed(ratio)
            break
        except OverflowError:
            if u >= out_scale:
                raise
            u *= 2.0
            ratio = gamma * in_scale / u
    bias_v = beta / (gamma * in_scale)
    bq, ash = coarse(bias_v)
    x1 = XStage(bypass=False, relu_bypass=not relu1, mul_bypass=False, mul_operand=_operand(m), mul_shift=msh)
    if np.any(bq != 0):
        x1.alu_bypass, x1.alu_algo, x1.alu_operand, x1.alu_shift = False, ALU_SUM, _operand(bq), ash
    prm.x1 = x1
    # X2: eltwise and the activation after it.
    if elt is not None or act2 is not None:
        x2 = XStage(bypass=False)
        if elt is not None and elt.kind in ("add", "max"):
            x2.alu_bypass, x2.alu_algo = False, ALU_SUM if elt.kind == "add" else ALU_MAX
            x2.alu_operand, x2.alu_shift = TensorOperand(elt.tensor), s2
        elif elt is not None:  # mul: v2 = v1 * b >> s, real = u * sb * 2^s * v2
            sb = scales[elt.tensor]
            target = out_scale / 2 ** HEADROOM_BITS
            s = int(min(MAX_SHIFT, max(0, round(math.log2(target / (u * sb))))))
            x2.mul_bypass, x2.mul_operand, x2.mul_shift = False, TensorOperand(elt.tensor), s
            u = u * sb * 2 ** s
        if isinstance(act2, Relu):
            x2.relu_bypass = False
        elif isinstance(act2, PRelu):
            pq, psh = fixed(act2.slope)
            x2.mul_bypass, x2.mul_prelu, x2.mul_operand, x2.mul_shift = False, True, _operand(pq), psh
        prm.x2 = x2
    # Y: LUT, then the output converter.
    if lut is not None:
        from compiler.lut import sdp_activation

        y, table, off, scale, shift = sdp_activation(lut.fn, u, out_scale, qmax)
        prm.y, prm.lut = y, table
        prm.cvt_offset, prm.cvt_scale, prm.cvt_shift = off, scale, shift
    else:
        q, sh = fixed(np.array([u / out_scale]))
        prm.cvt_scale, prm.cvt_shift = int(q[0]), sh
    return prm


#: Weight elements quantized at once (their float64 temporaries: 128 MB).
QUANTIZE_BLOCK = 1 << 24
#: nv_small's RTL keeps the width multiply's result (window sum x RECIP_KERNEL_WIDTH / 2^16, rounded) in 11
#: signed bits (``golden.engines.pdp.RTL_HMULT``): |sum| x RECIP_KERNEL_WIDTH must stay below 2^26.
STAGE1_LIMIT = 1 << 26
#: The smallest RECIP_KERNEL_HEIGHT a gain is split to: its rounding then costs at most 1/8192 of the output.
MIN_RECIP_H = 1 << 12


def max_recip_w(kh: int, kw: int) -> int:
    """The largest RECIP_KERNEL_WIDTH whose first-stage result fits 11 bits for any int8 window sum."""
    return min(MAX_RECIP, (STAGE1_LIMIT - 1) // (128 * kh * kw))


def max_pool_gain(kh: int, kw: int) -> float:
    """The largest input/output scale ratio a kh x kw average can apply in its two reciprocals."""
    return max_recip_w(kh, kw) * MAX_RECIP / 2.0 ** 32 * kh * kw


def pool_reciprocals(kh: int, kw: int, gain: float) -> tuple[int, int]:
    """RECIP_KERNEL_WIDTH/HEIGHT for an average that also rescales by ``gain`` (input / output scale): their
    product / 2^32 is gain / (kh * kw). The width factor is as large as nv_small's 11-bit first stage allows,
    since that stage rounds to an integer and the height factor multiplies its rounding error; the height
    factor keeps at least 12 bits of its own precision."""
    gain = min(gain, max_pool_gain(kh, kw))
    product = 2.0 ** 32 * gain / (kh * kw)
    rh = min(MAX_RECIP, max(MIN_RECIP_H, int(round(product / max_recip_w(kh, kw)))))
    rw = min(max_recip_w(kh, kw), max(1, int(round(product / rh))))
    rh = min(MAX_RECIP, max(1, int(round(product / rw))))
    return rw, rh


#: CACC sums in 48 bits and hands SDP 32: CLIP_TRUNCATE drops up to 16 low bits (``conv_datapath``).
MAX_CLIP_TRUNCATE = 16


def clip_truncate(bound: float) -> int:
    """CACC's CLIP_TRUNCATE for accumulators up to ``bound`` in magnitude: the fewest low bits dropped so they
    fit its 32-bit output (int8 sums always do: 0; int16 products are 2^30 each)."""
    t = 0
    while bound / 2 ** t >= 2 ** 31 and t < MAX_CLIP_TRUNCATE:
        t += 1
    return t


# ---- the pass ---------------------------------------------------------------------------------------------
def quantize(g: Graph, ctx: CompileContext) -> Graph:
    scales = quantize_scales(g, ctx)
    ctx.scales = scales
    for n in g.nodes:
        quantize_node(g, n, scales, ctx)
    return g


def quantize_scales(g: Graph, ctx: CompileContext) -> dict[str, float]:
    """Every tensor's scale in ``ctx.precision`` (int8 or int16) from the calibrated ranges."""
    # a capped ReLU's output (ReLU6) saturates at its calibrated range: its group keeps that range exactly
    capped = {n.outputs[0] for n in g.nodes
              if n.attrs.get("post") and isinstance(n.attrs["post"][-1], Relu) and n.attrs["post"][-1].cap is not None}
    if ctx.firmware_pdp:  # the firmware's reciprocals rescale nothing: an average keeps its input's scale
        for n in g.nodes:
            if n.op == "dla.pdp" and n.attrs["method"] == "avg":
                n.attrs["same_scale"] = True
    return tensor_scales(g, ctx.amax, ctx.fixed_scales, QMAX[ctx.precision],
                         headroom=RANGE_HEADROOM[ctx.precision], exact=capped)


def quantize_node(g: Graph, n: Node, scales: dict[str, float], ctx: CompileContext) -> None:
    """One node's integer register parameters in ``ctx.precision``; a CompileError naming it when they cannot
    be built."""
    if why := _non_finite_parameters(n):
        raise g.error(n, f"cannot quantize: {why}")
    try:
        _quantize_node(g, n, scales, ctx)
    except (OverflowError, ValueError) as exc:
        raise g.error(n, f"cannot quantize: {exc}") from None


def _quantize_node(g: Graph, n: Node, scales: dict[str, float], ctx: CompileContext) -> None:
    hw, dtype = ctx.hw, ctx.precision
    qmax = QMAX[dtype]
    if n.op == "dla.conv" and n.attrs.get("winograd") is not None:
        _quantize_winograd(g, n, scales, ctx)
    elif n.op == "dla.conv":
        w = n.attrs["weight"]
        k = w.shape[0]
        model = n.attrs.get("weight_scale")
        if model is not None and np.size(model) == k and np.all(np.asarray(model) > 0):
            sw = np.asarray(model, dtype=np.float64)  # a pre-quantized model's: its int8 weights exactly
        elif ctx.quant == "per-kernel":
            sw = np.full(k, max(float(w.max()), -float(w.min()), 1e-12) / qmax)
        else:
            flat = w.reshape(k, -1)  # (max and -min: no |w| copy of the weights)
            peak = np.maximum(flat.max(axis=1), -flat.min(axis=1)).astype(np.float64)
            sw = np.maximum(peak, 1e-12) / qmax
        # Bias correction: the rounding error of each filter times the mean of its input is a constant
        # offset per output channel that pooling does not average away; fold its expectation into the bias.
        mean = ctx.channel_mean.get(n.inputs[0])
        first = n.attrs["post"][0]
        correct = mean is not None and np.size(mean) == w.shape[1] and isinstance(first, Affine) and model is None
        wq = np.empty(w.shape, dtype=np.int8 if dtype == "int8" else np.int16)
        corr = np.zeros(k)
        total = np.zeros(k)  # sum |q| per kernel: bounds the accumulator
        step = max(1, QUANTIZE_BLOCK // max(1, w[0].size))  # float64 temporaries of a block, not of VGG's FC6
        for k0 in range(0, k, step):
            blk = np.asarray(w[k0:k0 + step], dtype=np.float64)
            s_blk = sw[k0:k0 + step, None, None, None]
            q = np.clip(np.rint(blk / s_blk), -qmax, qmax)
            wq[k0:k0 + step] = q
            total[k0:k0 + step] = np.abs(q).reshape(len(q), -1).sum(axis=1)
            if correct:
                corr[k0:k0 + step] = np.einsum("kcrs,c->k", blk - q * s_blk, np.asarray(mean, dtype=np.float64))
        if correct:
            n.attrs["post"][0] = replace(first, bias=first.bias + corr * first.scale)
        pt, pl, _, _ = n.attrs["pads"]
        # int16: the worst-case sum decides (int8 keeps 0, as NVDLA's compiler does: its sums stay far below 2^31)
        truncate = clip_truncate(float(total.max(initial=0.0)) * (qmax + 1)) if dtype == "int16" else 0
        n.attrs["conv"] = ConvParams(weights=wq, stride=tuple(n.attrs["stride"]), dilation=tuple(n.attrs["dilation"]),
                                     pad=(pt, pl), clip_truncate=truncate, precision=dtype)
        in_scale = scales[n.inputs[0]] * sw * 2.0 ** truncate
        n.attrs["sdp"] = sdp_params(n.attrs["post"], in_scale, scales[n.outputs[0]], scales, hw, g.where(n),
                                    exact=n.outputs[0] in ctx.fixed_scales, qmax=qmax)
        n.attrs["sdp"].precision = dtype
    elif n.op == "dla.sdp":
        c = _channels(g.shapes[n.inputs[0]])
        in_scale = np.full(c, scales[n.inputs[0]])
        n.attrs["sdp"] = sdp_params(n.attrs["post"], in_scale, scales[n.outputs[0]], scales, hw, g.where(n),
                                    qmax=qmax)
        n.attrs["sdp"].precision = dtype
    elif n.op == "dla.pdp":
        gain = float(n.attrs.get("gain", 1.0))  # a padded multi-pass global average (lowering._global_pool)
        gain *= scales[n.inputs[0]] / scales[n.outputs[0]]

        if ctx.firmware_pdp and n.attrs["method"] == "avg" and (n.attrs.get("regions") or abs(gain - 1) > 1e-12):
            why = "its edge windows divide by fewer taps (one pass per region)" if n.attrs.get("regions") \
                else "it takes several passes (a kernel beyond 8) whose reciprocals share the divisor"
            raise ValueError(f"average pooling {list(n.attrs['kernel'])}: NVDLA's firmware programs reciprocals "
                             f"1/kernel only, but {why}; no --format nvdla for it")

        def params(kernel, stride, pads) -> PdpParams:
            if ctx.firmware_pdp:
                rw, rh = (FIRMWARE_RECIP_KERNEL[dtype == "fp16"][k - 1] for k in (kernel[1], kernel[0]))
            else:
                rw, rh = pool_reciprocals(*kernel, gain)
            return PdpParams(n.attrs["method"], tuple(kernel), tuple(stride), tuple(pads), recip_w=rw, recip_h=rh,
                             precision=dtype)

        n.attrs["pdp"] = params(n.attrs["kernel"], n.attrs["stride"], n.attrs["pads"])
        if n.attrs.get("regions"):  # an average whose edge windows divide by fewer taps: one pass per region
            n.attrs["pdp_regions"] = [(r, params(r.kernel, r.stride, r.pads)) for r in n.attrs["regions"]]
    elif n.op == "dla.cdp":
        from compiler.lut import lrn_params

        try:
            n.attrs["cdp"] = lrn_params(int(n.attrs["size"]), float(n.attrs["alpha"]), float(n.attrs["beta"]),
                                        float(n.attrs["bias"]), scales[n.inputs[0]], scales[n.outputs[0]])
        except ValueError as exc:  # the CDP LUT cannot reach int8 accuracy here: run it on the CPU
            ctx.log(f"  {n.name}: LRN on the CPU ({exc})")
            n.op = "cpu.LRN"


#: CSC D_PRA_CFG.PRA_TRUNCATE's largest value (RDL: 0..2).
MAX_PRA_TRUNCATE = 2
#: F(2x2, 3x3)'s weight transform: U = G g G^T.
WINOGRAD_G = np.array([[1, 0, 0], [0.5, 0.5, 0.5], [0.5, -0.5, 0.5], [0, 0, 1]])


def _quantize_winograd(g: Graph, n: Node, scales: dict[str, float], ctx: CompileContext) -> None:
    """A Winograd convolution: the float kernels transformed (U = G g G^T, channels padded to whole atoms) and
    quantized per kernel in that domain; the accumulator then counts input steps x U steps x 2^PRA_TRUNCATE."""
    dtype, qmax = ctx.precision, QMAX[ctx.precision]
    geo = n.attrs["winograd"]
    w = np.asarray(n.attrs["weight"], dtype=np.float64)
    k, c = w.shape[:2]
    u = np.zeros((k, geo.ce, 4, 4))
    u[:, :c] = np.einsum("ir,kcrs,js->kcij", WINOGRAD_G, w, WINOGRAD_G)
    peak = np.abs(u).reshape(k, -1).max(axis=1)
    su = np.maximum(peak, 1e-12) / qmax
    uq = np.clip(np.rint(u / su[:, None, None, None]), -qmax, qmax)
    total = np.abs(uq).reshape(k, -1).sum(axis=1)
    if dtype == "int8":
        pra = ctx.profile.winograd_int8_pra_truncate
    else:  # B^T d B adds 4 inputs: drop the bits the input's range headroom does not cover (a capped ReLU has none)
        amax = ctx.amax.get(n.inputs[0])
        headroom = qmax * scales[n.inputs[0]] / amax if amax else RANGE_HEADROOM[dtype]
        pra = min(MAX_PRA_TRUNCATE, max(0, math.ceil(math.log2(4 / headroom) - 1e-9)))
    # |A^T M A| <= sum |M| <= sum |U| * max |V|: the same bound as a direct convolution's
    truncate = clip_truncate(float(total.max(initial=0.0)) * (qmax + 1)) if dtype == "int16" else 0
    pt, pl = geo.pad[:2]
    n.attrs["conv"] = ConvParams(weights=uq.astype(np.int8 if dtype == "int8" else np.int16), pad=(pt, pl),
                                 clip_truncate=truncate, precision=dtype, winograd=geo, pra_truncate=pra)
    in_scale = scales[n.inputs[0]] * su * 2.0 ** (truncate + pra)
    n.attrs["sdp"] = sdp_params(n.attrs["post"], in_scale, scales[n.outputs[0]], scales, ctx.hw, g.where(n),
                                exact=n.outputs[0] in ctx.fixed_scales, qmax=qmax)
    n.attrs["sdp"].precision = dtype


def _non_finite_parameters(n: Node) -> str | None:
    """NaN/Inf in a layer's folded weights or affine terms (the frontends refuse them in the file, but folding
    can still overflow float32): named here rather than as a misleading bias or multiplier overflow."""
    arrays = {"weights": n.attrs.get("weight")}
    for i, p in enumerate(n.attrs.get("post") or []):
        if isinstance(p, Affine):
            arrays[f"scale of post-op {i}"], arrays[f"bias of post-op {i}"] = p.scale, p.bias
    for what, values in arrays.items():
        if values is not None and not np.isfinite(np.asarray(values)).all():  # (no float64 copy of the weights)
            return f"NaN or Inf in its {what} after folding (float32 overflow?)"
    return None


def _channels(shape) -> int:
    return int(shape[1]) if len(shape) >= 2 else int(shape[0])


__all__ = ["quantize", "tensor_scales", "sdp_params", "fixed", "coarse", "OperandCvt", "YStage"]
