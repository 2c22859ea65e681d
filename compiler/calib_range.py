"""Activation ranges from calibration data, TensorRT-style: ``minmax`` (the largest |value| seen), ``percentile``
(the 99.99th percentile of |value|) and ``entropy`` (the clipping threshold whose 128-level int8 histogram
diverges least, in KL, from the float one).

Calibration streams (``passes.calibrate``), so each tensor keeps a fixed-size histogram of |value| whose range
doubles (merging bin pairs) whenever a batch exceeds it: memory is ``BINS`` counts per tensor whatever the
number of samples, and no second pass over the data is needed.
"""
from __future__ import annotations

import numpy as np

METHODS = ("minmax", "percentile", "entropy")
BINS = 2048
PERCENTILE = 99.99
LEVELS = 128  # int8 magnitudes 0..127
#: Entropy thresholds tried: every STEP-th bin from LEVELS on (TensorRT tries every bin; 16x fewer keeps it
#: well under a millisecond per tensor).
STEP = 16


class AbsHistogram:
    """Counts of nonzero |value| in ``BINS`` bins over [0, top) (``top`` doubles as larger values arrive), and
    of exact zeros apart: a ReLU output is half zeros, which int8 holds exactly at any scale, and whose spike
    would otherwise dominate the entropy search."""

    def __init__(self) -> None:
        self.counts = np.zeros(BINS, dtype=np.int64)
        self.zeros = 0
        self.top = 0.0

    def add(self, values: np.ndarray) -> float:
        """Count ``values``; returns their largest |value| (calibration's minmax range needs no second pass)."""
        a = np.abs(values).ravel(order="K")  # a fresh array in memory order (no copy of an NHWC-laid view)
        peak = float(a.max(initial=0.0))
        if peak == 0.0:
            self.zeros += a.size
            return peak
        zeros = a.size - int(np.count_nonzero(a))
        self.zeros += zeros
        if self.top == 0.0:
            self.top = peak * 1.0001
        while peak >= self.top:
            self.counts = self.counts.reshape(-1, 2).sum(axis=1)
            self.counts = np.concatenate([self.counts, np.zeros(BINS // 2, dtype=np.int64)])
            self.top *= 2.0
        scale = BINS / self.top
        if a.dtype == np.float32 and scale < 1e37:  # in float32 in place: one pass, no float64 copy
            np.multiply(a, np.float32(scale), out=a)
            idx = a.astype(np.intp)
        else:  # a range that underflowed float32 (1e-40): as a ratio in float64, so BINS / top is never inf
            idx = (np.asarray(a, dtype=np.float64) / self.top * BINS).astype(np.intp)
        np.minimum(idx, BINS - 1, out=idx)
        counts = np.bincount(idx, minlength=BINS)
        counts[0] -= zeros  # exact zeros are counted apart
        self.counts += counts
        return peak

    def edge(self, i: int) -> float:
        return self.top * i / BINS

    def percentile(self, q: float) -> float:
        total = int(self.counts.sum()) + self.zeros
        if total == self.zeros or self.top == 0.0:
            return 0.0
        cum = np.cumsum(self.counts) + self.zeros
        i = int(np.searchsorted(cum, total * q / 100.0))
        return self.edge(min(BINS, i + 1))

    def entropy(self) -> float:
        """The threshold (a bin edge) minimising KL(P || Q), P the histogram clipped at it (outliers into the
        last bin), Q its quantization to ``LEVELS`` levels spread back over the non-empty bins."""
        counts = self.counts.astype(np.float64)
        last = int(np.flatnonzero(counts)[-1]) + 1 if counts.any() else 0
        if last <= LEVELS:
            return self.edge(max(last, 1))
        best, best_kl = last, np.inf
        for i in range(LEVELS, last + 1, STEP):
            kept = counts[:i]
            p = kept.copy()
            p[i - 1] += counts[i:].sum()  # the reference: clipped values land in the last bin
            nonzero = kept != 0
            level = np.arange(i) * LEVELS // i  # which int8 level each bin falls in
            mass = np.bincount(level, weights=kept, minlength=LEVELS)  # Q: the kept values only
            used = np.bincount(level, weights=nonzero, minlength=LEVELS)
            q = np.where(nonzero, mass[level] / np.maximum(used[level], 1), 0.0)
            nonzero = p != 0
            ps, qs = p[nonzero] / p.sum(), q[nonzero] / max(q.sum(), 1e-300)
            kl = float(np.sum(ps * np.log(ps / np.maximum(qs, 1e-12))))
            if kl < best_kl:
                best, best_kl = i, kl
        return self.edge(best)


def choose(method: str, hist: AbsHistogram, amax: float) -> float:
    """The range ``method`` picks for a tensor (never above the largest |value| seen)."""
    if method == "minmax" or hist.top == 0.0:
        return amax
    if method == "percentile":
        return min(amax, hist.percentile(PERCENTILE))
    return min(amax, hist.entropy())
