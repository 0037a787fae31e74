"""The statistics every protocol shares: the item-level bootstrap and exact paired tests.

Pure and vectorised. A bootstrap is drawn once as a (resamples, items) count matrix and shared
by every metric of a table, which makes it paired across conditions; each metric is then a
weighted mean over its own qualifying items (``weighted_means``).
"""

from __future__ import annotations

import numpy as np
from scipy.stats import binom


def bootstrap_counts(n_items: int, n_boot: int, rng: np.random.Generator) -> np.ndarray:
    """How often each item appears in each of ``n_boot`` resamples with replacement: (B, items)."""
    idx = rng.integers(0, n_items, size=(n_boot, n_items))
    flat = (idx + np.arange(n_boot)[:, None] * n_items).ravel()
    return np.bincount(flat, minlength=n_boot * n_items).reshape(n_boot, n_items).astype(float)


def weighted_means(x: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Per row of ``counts`` (resamples x items), each column's mean of ``x`` (items x k) over
    its non-NaN items, weighted by the counts; NaN where a resample has none."""
    valid = ~np.isnan(x)
    num = counts @ np.where(valid, x, 0.0)
    den = counts @ valid.astype(float)
    with np.errstate(invalid="ignore", divide="ignore"):
        out: np.ndarray = np.where(den > 0, num / den, np.nan)
    return out


def mcnemar_exact(b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """Exact two-sided McNemar p-values from discordant counts ``b`` and ``c`` (same shape).

    Under the null each discordant pair is equally likely to go either way, so k = min(b, c) is
    Binomial(n = b + c, 1/2); the p-value is the two-sided one of scipy's ``binomtest``, which
    for p = 1/2 is P(X <= k) + P(X >= n - k) (the outcomes no likelier than k, by symmetry),
    capped at 1, and 1 where k = n/2. It is computed here for every count at once with
    ``binom.cdf`` and ``binom.sf``, the terms ``binomtest`` adds, one scipy call per array
    instead of one ``binomtest`` per pair (tests/core/test_stats.py checks the two agree bit for
    bit). No discordant pair is no evidence of a shift: p = 1. A NaN count (no paired items)
    gives a NaN p-value.
    """
    b_arr, c_arr = np.broadcast_arrays(np.asarray(b, dtype=float), np.asarray(c, dtype=float))
    known = ~np.isnan(b_arr) & ~np.isnan(c_arr)
    bad = known & ((b_arr < 0) | (c_arr < 0) | (b_arr % 1 != 0) | (c_arr % 1 != 0))
    if bad.any():
        raise ValueError("discordant counts must be non-negative integers")
    n = np.where(known, b_arr + c_arr, 0.0)
    k = np.where(known, np.minimum(b_arr, c_arr), 0.0)
    tails = binom.cdf(k, n, 0.5) + binom.sf(n - k - 1, n, 0.5)
    p = np.where(2 * k == n, 1.0, np.minimum(1.0, tails))  # n = 0 (no discordance) too
    out: np.ndarray = np.where(known, p, np.nan)
    return out


def holm(p: np.ndarray) -> np.ndarray:
    """Holm step-down adjusted p-values of a 1-D family; NaN entries stay NaN and are not counted.

    With the m non-NaN p-values sorted ascending, the i-th (from 0) is multiplied by m - i; a
    running maximum keeps the adjusted values in the same order as the raw ones, and each is
    capped at 1.
    """
    p = np.asarray(p, dtype=float)
    if p.ndim != 1:
        raise ValueError(f"holm expects a 1-D array of p-values, got shape {p.shape}")
    out = np.full(p.shape, np.nan)
    known = np.flatnonzero(~np.isnan(p))
    order = known[np.argsort(p[known], kind="stable")]
    m = len(order)
    scaled = (m - np.arange(m)) * p[order]
    out[order] = np.minimum(np.maximum.accumulate(scaled), 1.0)
    return out
