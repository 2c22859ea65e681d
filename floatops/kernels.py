"""Float64 numpy kernels of the canonical ops: the float reference the int8 compiler is measured against and
what the runtime runs CPU tasks with.

Every canonical op of ``compiler.ir`` has one kernel in ``KERNELS`` (inputs in node order, constants passed as
arrays, plus the node's attrs), so neither ``compiler.float_exec.run_float`` nor ``runtime.cpu_ops`` grows an
if-chain. They live below both so the runtime computes a CPU task exactly as the compiler calibrated it.
The kernels are batch-polymorphic: the compiler calibrates int8 scales by running many samples at once, so
nothing here assumes N == 1 (only ``Reshape``'s concrete shape carries the batch, see ``_reshape``).

``ZeroInsert`` is an extra op the compiler emits for CPU fallbacks: it spreads an input over a zero grid so
that a transposed convolution becomes an ordinary convolution (the same identity ``_conv_transpose`` uses).
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from golden.registry import Registry

Kernel = Callable[[list[np.ndarray], dict[str, Any]], list[np.ndarray]]
KERNELS: Registry[Kernel] = Registry("float kernel")
#: Decorator registering a float kernel for one or more op names.
kernel = KERNELS.register


# ---- helpers ----------------------------------------------------------------------------------------------
def pad2d(x: np.ndarray, pads: tuple[int, int, int, int], value: float = 0.0) -> np.ndarray:
    """Pad (or, for negative amounts, crop) the two spatial axes of an NCHW tensor by (t, l, b, r)."""
    t, l, b, r = (int(p) for p in pads)
    h, w = x.shape[2], x.shape[3]
    x = x[:, :, max(0, -t) : h - max(0, -b), max(0, -l) : w - max(0, -r)]
    if max(t, l, b, r) <= 0:
        return x
    widths = ((0, 0), (0, 0), (max(0, t), max(0, b)), (max(0, l), max(0, r)))
    return np.pad(x, widths, mode="constant", constant_values=value)


def _windows(xp: np.ndarray, kernel_hw: tuple[int, int], strides: tuple[int, int],
             dilations: tuple[int, int] = (1, 1)) -> np.ndarray:
    """Strided (N, C, OH, OW, kh, kw) view of every window of a padded NCHW tensor (no copy)."""
    (kh, kw), (sy, sx), (dy, dx) = kernel_hw, strides, dilations
    eh, ew = (kh - 1) * dy + 1, (kw - 1) * dx + 1
    return sliding_window_view(xp, (eh, ew), axis=(2, 3))[:, :, ::sy, ::sx, ::dy, ::dx]


def _channel(v: np.ndarray, ndim: int) -> np.ndarray:
    """A (C,) or (1,) per-channel vector shaped to broadcast along axis 1 of an ``ndim``-D tensor."""
    v = np.asarray(v, dtype=np.float64).reshape(-1)
    return v.reshape((1, v.size) + (1,) * (ndim - 2)) if ndim >= 2 else v


def conv2d(x: np.ndarray, w: np.ndarray, b: np.ndarray | None, strides: tuple[int, int],
           pads: tuple[int, int, int, int], dilations: tuple[int, int], group: int) -> np.ndarray:
    """Grouped, dilated 2-D convolution as im2col + one batched matmul over the groups (in the input's dtype:
    float64 for the reference, float32 for calibration)."""
    k, cg, kh, kw = w.shape
    g = int(group)
    if (kh, kw, g) == (1, 1, 1) and tuple(strides) == (1, 1) and not any(pads):
        # A pointwise conv is one matmul over pixels: no im2col (a view when x is channels-last in memory, as
        # this function's own outputs are).
        n, c, h, wd = x.shape
        y = np.matmul(x.transpose(0, 2, 3, 1).reshape(n * h * wd, c), w.reshape(k, c).T.astype(x.dtype, copy=False))
        y = y.reshape(n, h, wd, k).transpose(0, 3, 1, 2)
        return y + _channel(b, 4).astype(y.dtype, copy=False) if b is not None else y
    if g == 1 and tuple(strides) == (1, 1) and min(pads) >= 0:
        y = _conv_shifted(x, pads, w, dilations)
        if y is not None:
            return y + _channel(b, 4).astype(y.dtype, copy=False) if b is not None else y
    xp = pad2d(x, pads)
    n, c = xp.shape[:2]
    win = _windows(xp, (kh, kw), strides, dilations)  # (N, C, OH, OW, R, S)
    oh, ow = win.shape[2], win.shape[3]
    cols = (win.reshape(n, g, cg, oh, ow, kh, kw)
            .transpose(1, 0, 3, 4, 2, 5, 6)
            .reshape(g, n * oh * ow, cg * kh * kw))
    wm = w.reshape(g, k // g, cg * kh * kw).transpose(0, 2, 1).astype(cols.dtype, copy=False)
    y = np.matmul(cols, wm)  # (G, N*OH*OW, K/G)
    y = y.reshape(g, n, oh, ow, k // g).transpose(1, 0, 4, 2, 3).reshape(n, k, oh, ow)
    if b is not None:
        y = y + _channel(b, 4).astype(y.dtype, copy=False)
    return y


def _conv_shifted(x: np.ndarray, pads: tuple[int, int, int, int], w: np.ndarray,
                  dilations: tuple[int, int]) -> np.ndarray | None:
    """A stride-1 convolution as one matmul per kernel tap over the padded input flattened channels-last: the
    tap (i, j) of output pixel p is input row p + i*dy*Wp + j*dx, so each tap is a shifted view and no im2col
    (R*S copies of the input) is built. Rows that wrap past a line end are computed and cropped, so it is used
    only while they are few. None: im2col is the better choice."""
    n, c, h, wd = x.shape
    t, l, b, r = (int(p) for p in pads)
    hp, wp = h + t + b, wd + l + r
    k, _, kh, kw = w.shape
    dy, dx = dilations
    oh, ow = hp - (kh - 1) * dy, wp - (kw - 1) * dx
    if oh <= 0 or ow <= 0 or c < 16 or 4 * hp * wp > 5 * oh * ow:  # (thin or small maps: im2col is faster)
        return None
    xp = np.zeros((n, hp, wp, c), dtype=x.dtype)  # padded, channels-last, in one copy
    xp[:, t:t + h, l:l + wd] = x.transpose(0, 2, 3, 1)
    xf = xp.reshape(n * hp * wp, c)
    rows = n * hp * wp - (kh - 1) * dy * wp - (kw - 1) * dx
    wt = w.transpose(2, 3, 1, 0).astype(xp.dtype)  # (R, S, C, K)
    y = np.empty((n * hp * wp, k), dtype=xp.dtype)
    tmp = np.empty((rows, k), dtype=xp.dtype)
    np.matmul(xf[:rows], wt[0, 0], out=y[:rows])
    for i in range(kh):
        for j in range(kw):
            if i or j:
                off = i * dy * wp + j * dx
                np.matmul(xf[off:off + rows], wt[i, j], out=tmp)
                y[:rows] += tmp
    return y.reshape(n, hp, wp, k)[:, :oh, :ow].transpose(0, 3, 1, 2)


def zero_insert(x: np.ndarray, strides: tuple[int, int], pads: tuple[int, int, int, int]) -> np.ndarray:
    """(N,C,H,W) -> zeros (N,C,(H-1)*sy+1+t+b,(W-1)*sx+1+l+r) holding x at [t::sy, l::sx]."""
    (sy, sx), (t, l, b, r) = strides, pads
    n, c, h, w = x.shape
    out = np.zeros((n, c, (h - 1) * sy + 1 + t + b, (w - 1) * sx + 1 + l + r), dtype=x.dtype)
    out[:, :, t : t + (h - 1) * sy + 1 : sy, l : l + (w - 1) * sx + 1 : sx] = x
    return out


# ---- convolution and fully connected ------------------------------------------------------------------------
@kernel("Conv")
def _conv(xs: list[np.ndarray], a: dict[str, Any]) -> list[np.ndarray]:
    b = xs[2] if len(xs) > 2 else None
    return [conv2d(xs[0], xs[1], b, a["strides"], a["pads"], a.get("dilations", (1, 1)), a.get("group", 1))]


@kernel("ConvTranspose")
def _conv_transpose(xs: list[np.ndarray], a: dict[str, Any]) -> list[np.ndarray]:
    """Transposed convolution = zero-insert by the stride, pad by the kernel extent, convolve with the
    spatially flipped kernel whose in/out channels are swapped per group."""
    x, w = xs[0], xs[1]
    b = xs[2] if len(xs) > 2 else None
    c, kg, kh, kw = w.shape
    g = int(a.get("group", 1))
    cg = c // g
    (dy, dx), (pt, pl, pb, pr) = a.get("dilations", (1, 1)), a["pads"]
    oph, opw = a.get("output_padding", (0, 0))
    eh, ew = (kh - 1) * dy + 1, (kw - 1) * dx + 1
    want = (eh - 1 - pt, ew - 1 - pl, eh - 1 - pb + oph, ew - 1 - pr + opw)
    z = zero_insert(x, a["strides"], tuple(max(0, p) for p in want))
    z = pad2d(z, tuple(min(0, p) for p in want))  # negative amounts crop
    wf = (w.reshape(g, cg, kg, kh, kw).transpose(0, 2, 1, 3, 4)[:, :, :, ::-1, ::-1]
          .reshape(g * kg, cg, kh, kw))
    return [conv2d(z, wf, b, (1, 1), (0, 0, 0, 0), (dy, dx), g)]


@kernel("ZeroInsert")
def _zero_insert(xs: list[np.ndarray], a: dict[str, Any]) -> list[np.ndarray]:
    return [zero_insert(xs[0], a["strides"], a["pads"])]


@kernel("Gemm")
def _gemm(xs: list[np.ndarray], a: dict[str, Any]) -> list[np.ndarray]:
    y = xs[0] @ xs[1].T
    return [y + xs[2].reshape(1, -1) if len(xs) > 2 else y]


# ---- pooling --------------------------------------------------------------------------------------------------
@kernel("MaxPool")
def _max_pool(xs: list[np.ndarray], a: dict[str, Any]) -> list[np.ndarray]:
    """A running maximum over the kernel's taps: one pass per tap over the output, instead of numpy reducing
    the tiny (kh, kw) axes of a strided window view (5x slower on ResNet's 112x112 pool)."""
    xp = pad2d(xs[0], a["pads"], -np.inf)
    win = _windows(xp, a["kernel"], a["strides"])
    out = win[..., 0, 0].copy()
    for i in range(win.shape[4]):
        for j in range(win.shape[5]):
            if i or j:
                np.maximum(out, win[..., i, j], out=out)
    return [out]


def average_divisor_pads(a: dict[str, Any]) -> tuple[int, int, int, int]:
    """The padding (t, l, b, r) an average's divisor counts: ``divisor_pads`` where a frontend set it (Caffe's
    and ONNX's ceil mode with padding count the explicit padding, not the ceil overhang), else all of ``pads``
    (count_include_pad) or none (the in-image elements only)."""
    if a.get("divisor_pads") is not None:
        return tuple(int(p) for p in a["divisor_pads"])  # type: ignore[return-value]
    if a.get("count_include_pad", False):
        return tuple(int(p) for p in a["pads"])  # type: ignore[return-value]
    return (0, 0, 0, 0)


def divisor_counts(size: int, kernel: int, stride: int, pad0: int, count0: int, count1: int,
                   out: int) -> np.ndarray:
    """Per output position along one axis: how many of the window's taps the divisor counts, the window
    clipped to the input plus its counted padding [-count0, size + count1). Averages are separable, so a
    window's divisor is the product of its two axes' counts."""
    start = np.arange(out) * stride - pad0
    return np.minimum(start + kernel, size + count1) - np.maximum(start, -count0)


@kernel("AveragePool")
def _average_pool(xs: list[np.ndarray], a: dict[str, Any]) -> list[np.ndarray]:
    """Window sums over zero padding divided by the taps ``average_divisor_pads`` counts: the whole kernel
    (count_include_pad, Caffe), the in-image elements, or Caffe's ceil-mode rule. ``gain`` (the compiler's
    split of a big global average: padded area / true area) multiplies the result."""
    x = xs[0]
    (kh, kw), (sy, sx), pads = a["kernel"], a["strides"], tuple(int(p) for p in a["pads"])
    total = _windows(pad2d(x, pads), (kh, kw), (sy, sx)).sum(axis=(4, 5))
    gain = float(a.get("gain", 1.0))
    counted = average_divisor_pads(a)
    if counted == pads:
        return [total * (gain / (kh * kw))]
    oh, ow = total.shape[2], total.shape[3]
    ch = divisor_counts(x.shape[2], kh, sy, pads[0], counted[0], counted[2], oh)
    cw = divisor_counts(x.shape[3], kw, sx, pads[1], counted[1], counted[3], ow)
    return [total * (gain / (ch[:, None] * cw[None, :]))]


@kernel("GlobalMaxPool")
def _global_max_pool(xs: list[np.ndarray], a: dict[str, Any]) -> list[np.ndarray]:
    return [xs[0].max(axis=(2, 3), keepdims=True)]


@kernel("GlobalAveragePool")
def _global_average_pool(xs: list[np.ndarray], a: dict[str, Any]) -> list[np.ndarray]:
    return [xs[0].mean(axis=(2, 3), keepdims=True)]


# ---- element-wise activations -----------------------------------------------------------------------------------
@kernel("Relu")
def _relu(xs: list[np.ndarray], a: dict[str, Any]) -> list[np.ndarray]:
    return [np.maximum(xs[0], 0.0)]


@kernel("Sigmoid")
def _sigmoid(xs: list[np.ndarray], a: dict[str, Any]) -> list[np.ndarray]:
    x = xs[0]
    e = np.exp(-np.abs(x))  # never overflows
    return [np.where(x >= 0, 1.0 / (1.0 + e), e / (1.0 + e))]


@kernel("Tanh")
def _tanh(xs: list[np.ndarray], a: dict[str, Any]) -> list[np.ndarray]:
    return [np.tanh(xs[0])]


@kernel("Clip")
def _clip(xs: list[np.ndarray], a: dict[str, Any]) -> list[np.ndarray]:
    lo, hi = a.get("min"), a.get("max")
    y = xs[0]
    if lo is not None:
        y = np.maximum(y, lo)
    if hi is not None:
        y = np.minimum(y, hi)
    return [y]


@kernel("PRelu")
def _prelu(xs: list[np.ndarray], a: dict[str, Any]) -> list[np.ndarray]:
    x = xs[0]
    return [np.where(x >= 0, x, x * _channel(xs[1], x.ndim).astype(x.dtype, copy=False))]


@kernel("LeakyRelu")
def _leaky_relu(xs: list[np.ndarray], a: dict[str, Any]) -> list[np.ndarray]:
    x = xs[0]
    return [np.where(x >= 0, x, x * float(a.get("alpha", 0.01)))]


@kernel("ChannelAffine")
def _channel_affine(xs: list[np.ndarray], a: dict[str, Any]) -> list[np.ndarray]:
    x = xs[0]
    dt = x.dtype
    return [x * _channel(xs[1], x.ndim).astype(dt, copy=False) + _channel(xs[2], x.ndim).astype(dt, copy=False)]


@kernel("Add")
def _add(xs: list[np.ndarray], a: dict[str, Any]) -> list[np.ndarray]:
    return [xs[0] + xs[1]]


@kernel("Mul")
def _mul(xs: list[np.ndarray], a: dict[str, Any]) -> list[np.ndarray]:
    return [xs[0] * xs[1]]


@kernel("Max")
def _max(xs: list[np.ndarray], a: dict[str, Any]) -> list[np.ndarray]:
    return [np.maximum(xs[0], xs[1])]


# ---- tensor plumbing ----------------------------------------------------------------------------------------------
@kernel("Concat")
def _concat(xs: list[np.ndarray], a: dict[str, Any]) -> list[np.ndarray]:
    return [np.concatenate(xs, axis=int(a.get("axis", 1)))]


@kernel("Split")
def _split(xs: list[np.ndarray], a: dict[str, Any]) -> list[np.ndarray]:
    return np.split(xs[0], np.cumsum(a["split"])[:-1], axis=int(a.get("axis", 1)))


@kernel("Slice")
def _slice(xs: list[np.ndarray], a: dict[str, Any]) -> list[np.ndarray]:
    x = xs[0]
    index = [slice(None)] * x.ndim
    index[int(a.get("axis", 1))] = slice(int(a["start"]), int(a["end"]))
    return [x[tuple(index)]]


@kernel("Flatten")
def _flatten(xs: list[np.ndarray], a: dict[str, Any]) -> list[np.ndarray]:
    x = xs[0]
    axis = int(a.get("axis", 1))
    return [x.reshape(int(np.prod(x.shape[:axis], dtype=np.int64)), -1)]


@kernel("Transpose")
def _transpose(xs: list[np.ndarray], a: dict[str, Any]) -> list[np.ndarray]:
    """Axis permutation; the batch axis stays first (``perm[0] == 0``), so a calibration batch transposes too."""
    return [np.transpose(xs[0], tuple(int(v) for v in a["perm"]))]


@kernel("Reshape")
def _reshape(xs: list[np.ndarray], a: dict[str, Any]) -> list[np.ndarray]:
    """The IR shape has batch 1 baked in; a calibration batch of N reshapes to (N, *shape[1:])."""
    x, shape = xs[0], tuple(int(v) for v in a["shape"])
    if x.size != int(np.prod(shape, dtype=np.int64)) and shape and shape[0] == 1 and x.ndim and x.shape[0] > 1:
        shape = (x.shape[0],) + shape[1:]
    return [x.reshape(shape)]


@kernel("Identity")
def _identity(xs: list[np.ndarray], a: dict[str, Any]) -> list[np.ndarray]:
    return [xs[0]]


# ---- normalization ------------------------------------------------------------------------------------------------
@kernel("LRN")
def _lrn(xs: list[np.ndarray], a: dict[str, Any]) -> list[np.ndarray]:
    """Across-channel LRN, ONNX's window: channels [c - (size-1)//2, c + ceil((size-1)/2)]."""
    x = xs[0]
    size = int(a["size"])
    alpha, beta, bias = float(a.get("alpha", 1e-4)), float(a.get("beta", 0.75)), float(a.get("bias", 1.0))
    lo = (size - 1) // 2
    sq = np.pad(x * x, ((0, 0), (lo, size - 1 - lo), (0, 0), (0, 0)))
    square_sum = sliding_window_view(sq, size, axis=1).sum(axis=-1)
    return [x / (bias + alpha / size * square_sum) ** beta]


@kernel("Softmax")
def _softmax(xs: list[np.ndarray], a: dict[str, Any]) -> list[np.ndarray]:
    axis = int(a.get("axis", -1))
    e = np.exp(xs[0] - xs[0].max(axis=axis, keepdims=True))
    return [e / e.sum(axis=axis, keepdims=True)]
