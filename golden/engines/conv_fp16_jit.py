"""The fp16 CMAC + CACC of ``conv_fp16`` compiled with numba: the same integer steps, one output at a time.

Why compiled: the CMAC's products are not IEEE products but radix-4 Booth multiplications whose carry-save
sum and carry vectors are aligned (truncated) separately, so an aligned product is within 1 of the exact one
and no BLAS formulation gives the right bits. As numpy array operations each lane product costs ~80 passes
over memory (about 6 MMAC/s); here the CACC's FP48 add runs in the same loop, in the hardware's order
(slices outer, taps inner), and each (slice, tap) of an output is one 64-lane block:

* ``group`` (one vector block of LLVM IR when compiled: int8 levels, int32 products, two reductions) finds
  the block exponent ``emax`` (lanes' level = weight + data exponent high parts, ``ABSENT`` lanes never the
  maximum), sums the exact signed products of the lanes at ``emax`` (shift 0) and adds ``floor(p / 16)`` for
  the lanes one level below (shift 4): at shift 4 the Booth product *is* ``floor(p / 16)``, because the last
  four 3:2 stages of the carry-save tree leave the carry vector's low four bits zero, so truncating the two
  vectors separately loses no carry (checked for every pair of mantissas and both signs; the tests check
  samples against the array code). It returns a bit mask of the lanes two to seven levels below (shifts
  8..28); lanes eight or more below give 0.
* Those lanes' products go through ``booth``, the cmod's Booth tree (``cal_fp16_booth``), branch-free on a
  packed code of the weight's digits (``booth_code``), over a buffer of one output's lanes so it vectorizes.
* ``cacc_add`` is the FP48 add written without branches (its selects compile to conditional moves).

``conv_fp16.direct_conv_fp16`` calls ``conv`` when no input or weight is a NaN (NaN words follow their own
CMAC/CACC rules, kept in the array code only); ``tests/golden/test_conv_fp16_jit.py`` checks the two paths
bit for bit, and the plain-loop reference (``regressions/lib/reference/conv_fp16.py``) checks both. Until
``kernel`` compiles them, the functions below run as plain Python (``group``, ``_clz``, ``_ctz`` have numpy /
int versions there), which is slow but gives the same bits.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

_M40 = (1 << 40) - 1
#: Lanes per CMAC slice (fp16 PARALLEL_CHANNEL_NUM).
LANES = 64
#: The level (exponent high part) of a lane that takes no part (zero weight or data): with any other level
#: (0..7) its sum stays below -49 in int8, never the maximum and never within 7 levels of it.
ABSENT = -64
#: ``numba.prange`` once compiled (``kernel``); the plain functions below run as Python until then.
prange = range
#: Helpers the kernel inlines.
_INLINED = ("_csa", "_row", "booth", "_lead", "_sext40", "cacc_add")
_KERNEL: list[Callable] = []


def kernel() -> Callable:
    """``conv`` compiled (numba imported on first use: it costs a third of a second, and only fp16
    convolutions need it). Compiled code is cached on disk next to this module."""
    if not _KERNEL:
        import numba

        space = globals()
        space["prange"] = numba.prange
        space.update(_intrinsics())
        for name in _INLINED:
            space[name] = numba.njit(cache=True, inline="always")(space[name])
        _KERNEL.append(numba.njit(cache=True, parallel=True)(conv))
    return _KERNEL[0]


# ---- the 64-lane block ---------------------------------------------------------------------------------------
def group(wl, dl, ws, ds):
    """One (slice, tap) block of one output: weight and data levels ``wl``/``dl`` (int8, ``ABSENT`` for lanes
    that take no part) and signed pre-shifted mantissas ``ws``/``ds`` (int16). Returns (``emax``, negative if
    no lane takes part; the sum of the exact products at ``emax`` plus ``floor(p / 16)`` of those one level
    below; the bit mask (int64) of the lanes 2..7 levels below, which need the Booth tree)."""
    lv = (wl.astype(np.int64) + dl).astype(np.int8)
    e = int(lv.max())
    p = ws.astype(np.int64) * ds
    mm = int(p[lv == e].sum() + (p[lv == np.int8(e - 1)] >> 4).sum())
    gap = (e - lv.astype(np.int64)) & 0xFF
    mask = sum(1 << int(lane) for lane in np.flatnonzero((gap >= 2) & (gap <= 7)))
    return e, mm, mask - (1 << 64) if mask >> 63 else mask


#: ``group`` as plain Python, kept after ``kernel`` replaces ``group`` by its compiled form (tests compare them).
group_plain = group


def _clz(v):
    """Leading zeros of a non-negative int64 (64 for 0)."""
    return 64 - int(v).bit_length()


def _ctz(v):
    """Trailing zeros of a non-zero int64."""
    v = int(v)
    return (v & -v).bit_length() - 1


def _intrinsics() -> dict:
    """The compiled ``group``, ``_clz`` and ``_ctz``: LLVM IR written directly (``group``'s 64 lanes as
    <64 x i8>/<64 x i32> vectors, which LLVM lowers to AVX2 byte and dword operations; numba's own loops
    widen every integer to int64)."""
    from llvmlite import ir
    from numba import types
    from numba.core import cgutils
    from numba.core.errors import TypingError
    from numba.extending import intrinsic

    i1, i8, i32, i64 = ir.IntType(1), ir.IntType(8), ir.IntType(32), ir.IntType(64)
    v8, v16, v32 = (ir.VectorType(ir.IntType(n), LANES) for n in (8, 16, 32))

    def scalar(name):
        @intrinsic
        def count(typingctx, v):
            def codegen(context, builder, signature, args):
                return getattr(builder, name)(args[0], ir.Constant(i1, 0))

            return types.int64(types.int64), codegen

        return count

    @intrinsic
    def group_ir(typingctx, wl, dl, ws, ds):
        want = ((wl, types.int8), (dl, types.int8), (ws, types.int16), (ds, types.int16))
        for a, dtype in want:
            if not (isinstance(a, types.Array) and a.layout == "C" and a.ndim == 1 and a.dtype == dtype):
                raise TypingError(f"group: C-contiguous 1-d {dtype} arrays of {LANES} lanes expected, got {a}")

        def codegen(context, builder, signature, args):
            ptrs = [context.make_array(ty)(context, builder, v).data for ty, v in zip(signature.args, args)]
            mod = builder.module

            def load(ptr, vt):
                return builder.load(builder.bitcast(ptr, vt.as_pointer()), align=1)

            def splat(value, vt):
                undef = ir.Constant(vt, ir.Undefined)
                one = builder.insert_element(undef, value, ir.Constant(i32, 0))
                return builder.shuffle_vector(one, undef, ir.Constant(ir.VectorType(i32, LANES), [0] * LANES))

            def const(vt, value):
                return ir.Constant(vt, [value] * LANES)

            def reduce(op, v, et):
                fn = cgutils.get_or_insert_function(mod, ir.FunctionType(et, [v.type]),
                                                    f"llvm.vector.reduce.{op}.v{LANES}i{et.width}")
                return builder.call(fn, [v])

            lv = builder.add(load(ptrs[0], v8), load(ptrs[1], v8))
            e = reduce("smax", lv, i8)
            eb = splat(e, v8)
            top = builder.icmp_signed("==", lv, eb)
            below = builder.icmp_signed("==", lv, splat(builder.sub(e, ir.Constant(i8, 1)), v8))
            p = builder.mul(builder.sext(load(ptrs[2], v16), v32), builder.sext(load(ptrs[3], v16), v32))
            q = builder.ashr(p, const(v32, 4))
            zero = const(v32, 0)
            # |p| < 2^28: the sum of the top lanes' p >> 4 fits int32; the full sum (top p + lower p >> 4) is
            # taken mod 2^32 and differs from 16 * that by less than 2^31, which fixes its high bits.
            a = builder.shl(builder.sext(reduce("add", builder.select(top, q, zero), i32), i64), ir.Constant(i64, 4))
            s = reduce("add", builder.select(top, p, builder.select(below, q, zero)), i32)
            mm = builder.add(a, builder.sext(builder.sub(s, builder.trunc(a, i32)), i64))
            gap = builder.sub(builder.sub(eb, lv), const(v8, 2))
            mask = builder.bitcast(builder.icmp_unsigned("<", gap, const(v8, 6)), i64)
            return context.make_tuple(builder, signature.return_type, [builder.sext(e, i64), mm, mask])

        return types.UniTuple(types.int64, 3)(wl, dl, ws, ds), codegen

    return {"group": group_ir, "_clz": scalar("ctlz"), "_ctz": scalar("cttz")}


# ---- Booth -----------------------------------------------------------------------------------------------------
def booth_code(mag: np.ndarray, neg: np.ndarray, sign: np.ndarray) -> np.ndarray:
    """Per weight lane, its Booth digits (``mag``/``neg`` (8, ...) of ``conv_fp16.booth_digits``) packed for
    ``booth``: bits 2j..2j+1 the magnitude of digit j, bit 16 + 2j its inversion for a positive product (the
    weight's ``sign`` applied), bit 32 + 2j whether the digit is nonzero (the inversion flips with the data's
    sign)."""
    mag, neg = np.asarray(mag, dtype=np.int64), np.asarray(neg, dtype=np.int64)
    nz = (mag != 0).astype(np.int64)
    a = sum(mag[j] << (2 * j) for j in range(8))
    z = sum(nz[j] << (2 * j) for j in range(8))
    n = sum((neg[j] & nz[j]) << (2 * j) for j in range(8)) ^ (z * (np.asarray(sign, dtype=np.int64) & 1))
    return a | (n << 16) | (z << 32)


def _csa(a, b, c):
    """One 3:2 carry-save adder: (sum, carry shifted left)."""
    x = a ^ b
    return x ^ c, ((a & b) | (c & x)) << 1


def _row(dat, a, n, j):
    """Partial product j of ``booth`` at its place (2j): ``0x10000 + (mag_j * dat ^ -inv_j)``, shifted."""
    m = 0x3 << (2 * j)
    return (0x10000 << (2 * j)) + ((dat * (a & m)) ^ -(n & (m & 0x5555)))


def booth(dat, shift, a, n):
    """``cal_fp16_booth`` without branches: the data mantissa ``dat`` times the weight whose digit magnitudes
    are ``a`` (bits 2j..2j+1) and inversions ``n`` (bit 2j), the carry-save sum and carry aligned right by
    ``shift`` (4..28) separately, plus the sign compensation; int32 result.

    Partial product j is ``0xFFFF - x`` (inverted) or ``0x10000 + x`` with ``x = mag_j * dat``, i.e.
    ``0x10000 + (x ^ -n_j)``; row j holds it shifted by 2j with the previous digit's inversion bit below. The
    rows stay below 2^31 and the 3:2 adders only move bits up, so the two vectors are masked to 32 bits once."""
    r0 = _row(dat, a, n, 0)
    r1 = _row(dat, a, n, 1) + (n & 0x1)
    r2 = _row(dat, a, n, 2) + (n & 0x4)
    r3 = _row(dat, a, n, 3) + (n & 0x10)
    r5 = _row(dat, a, n, 4)
    r6 = _row(dat, a, n, 5) + (n & 0x100)
    r7 = _row(dat, a, n, 6) + (n & 0x400)
    r8 = _row(dat, a, n, 7) + (n & 0x1000)
    # rows 0..4 and 5..9 each through three 3:2 adders, then the two pairs through two more (cmod order)
    s, c = _csa(r0, r1, r2)
    s, c = _csa(s, c, r3)
    s, c = _csa(s, c, n & 0x40)
    t, m = _csa(r5, r6, r7)
    t, m = _csa(t, m, r8)
    t, m = _csa(t, m, n & 0x4000)
    u, v = _csa(s, c, t)
    u, v = _csa(u, v, m)
    # + the sign compensation -(0x55550000 >> shift) (``conv_fp16._SIGN_COMP``), as a signed 32-bit value
    out = (((u & 0xFFFFFFFF) >> shift) + ((v & 0xFFFFFFFF) >> shift) - (0x55550000 >> shift)) & 0xFFFFFFFF
    return (out ^ 0x80000000) - 0x80000000


# ---- CACC ------------------------------------------------------------------------------------------------------
def _lead(v):
    """Bit length of the magnitude part of a two's-complement value (``~v`` for negatives)."""
    return 64 - _clz(v ^ (v >> 63))


def _sext40(v):
    return ((v & _M40) ^ (1 << 39)) - (1 << 39)


def cacc_add(ae, am, me, mm):
    """``conv_fp16.cacc_add`` for one accumulator and one (non-NaN) CMAC word, every branch a select."""
    sh0 = 37 - _lead(mm)
    mac = (mm << sh0) << 2
    mac_e = (me - sh0 + 49) & 0xFF
    acc_e = ae * (am != 0)
    diff = mac_e - acc_e
    d = abs(diff)
    dcl = min(d, 40)
    big = max(mac_e, acc_e)
    acc_small = diff > 0
    small = am if acc_small else mac
    # align the smaller operand, keeping what is shifted out (beyond 40: operand 0, nothing kept)
    out_bits = (((small & ((1 << dcl) - 1)) << (40 - dcl)) & _M40) * (d <= 40)
    shifted = (small >> dcl) * (d <= 40)
    a = shifted if acc_small else am
    b = mac if acc_small else (shifted if diff < 0 else mac)
    total = a + b
    tmp = _sext40(total)
    ovf = ((a < 0) == (b < 0)) & ((tmp < 0) != (b < 0))
    # renormalize: right by one on overflow, else left, pulling the shifted-out bits back in
    sh1 = 39 - _lead(tmp)
    s_left = _sext40((tmp << sh1) | (out_bits >> (40 - sh1)))
    out_left = (out_bits << sh1) & _M40
    s = (total >> 1) if ovf else s_left
    e = (big + 1) if ovf else (big - sh1)
    guard = (total & 1) if ovf else (out_left >> 39)
    sticky = (out_bits != 0) if ovf else ((out_left & ((1 << 39) - 1)) != 0)
    # round: positive results on the guard bit, negative ones on guard and sticky
    up = (guard != 0) & (sticky | (s >= 0))
    r = _sext40(s + up)
    flip = (r < 0) != (s < 0)
    r = (((s >> 63) << 39) | ((r & _M40) >> 1)) if flip else r
    e = (e + flip) * (r != 0)
    keep = mm == 0  # a zero MAC word leaves the accumulator alone
    return (ae if keep else e & 0xFF), (am if keep else r)


# ---- the convolution -------------------------------------------------------------------------------------------
def conv(w_lv, w_sm, w_code, d_lv, d_sm, taps_r, taps_s, out_w, sy, sx, dy, dx, out_e, out_m):
    """Every output (kernel k, pixel): for each 64-channel slice and tap, the CMAC's block exponent and Booth
    product sum (``group``, then ``booth`` for the lanes it lists), added into the CACC's FP48 accumulator.

    Weights: levels ``w_lv`` (int8, ``ABSENT`` for lanes that take no part), signed pre-shifted mantissas
    ``w_sm`` (int16) and ``booth_code`` (int64), all (K, slices * R * S, 64) in (slice, r, s) order. Data:
    levels and signed mantissas (slices, H_span, W_span, 64), the padded cube. Outputs (K, OH * OW)."""
    kernels, taps, lanes = w_lv.shape
    pixels = out_e.shape[1]
    block = 16
    blocks = (pixels + block - 1) // block
    for job in prange(kernels * blocks):
        k = job // blocks
        # per output: the aligned lanes' (data mantissa | shift / 4 << 18 | data sign << 16 | tap << 32), their
        # weight codes and Booth products; per tap the exponent and the sum so far
        lane_dat = np.empty(taps * lanes, dtype=np.int64)
        lane_code = np.empty(taps * lanes, dtype=np.int64)
        lane_prod = np.empty(taps * lanes, dtype=np.int64)
        tap_e = np.empty(taps, dtype=np.int64)
        tap_m = np.empty(taps, dtype=np.int64)
        for p in range((job % blocks) * block, min(pixels, (job % blocks + 1) * block)):
            oy = p // out_w
            ox = p - oy * out_w
            t = 0
            n = 0
            for sl in range(d_lv.shape[0]):
                for r in range(taps_r):
                    y = oy * sy + r * dy
                    for s in range(taps_s):
                        x = ox * sx + s * dx
                        wl, dl, ds = w_lv[k, t], d_lv[sl, y, x], d_sm[sl, y, x]
                        e, mm, mask = group(wl, dl, w_sm[k, t], ds)
                        tap_e[t] = e
                        tap_m[t] = mm
                        while mask != 0:
                            lane = _ctz(mask)
                            mask &= mask - 1
                            dv = np.int64(ds[lane])
                            gap = e - np.int64(wl[lane]) - np.int64(dl[lane])
                            lane_dat[n] = abs(dv) | (gap << 18) | ((dv >> 63) & (1 << 16)) | (t << 32)
                            lane_code[n] = w_code[k, t, lane]
                            n += 1
                        t += 1
            for j in range(n):  # branch-free: vectorized
                v = lane_dat[j]
                c = lane_code[j]
                lane_prod[j] = booth(v & 0xFFFF, (v >> 16) & 0x1C, c & 0xFFFF,
                                     ((c >> 16) & 0xFFFF) ^ ((c >> 32) & -((v >> 16) & 1)))
            for j in range(n):
                tap_m[lane_dat[j] >> 32] += lane_prod[j]
            ae = 0
            am = 0
            for t in range(taps):
                if tap_e[t] >= 0:
                    ae, am = cacc_add(ae, am, tap_e[t] << 2, tap_m[t])
            out_e[k, p] = ae
            out_m[k, p] = am
