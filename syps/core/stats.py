"""The statistics every protocol shares, each written once: the seeded item-level resample, the
percentile bootstrap CI, NaN-aware means, a flip between paired labels, exact paired tests, the
Holm adjustment, and the Kaplan-Meier survival estimate.

Pure and vectorised. A bootstrap is drawn once as a (resamples, items) count matrix and shared
by every metric of a table, which makes it paired across conditions; each metric is then a
weighted mean over its own qualifying items (``weighted_means``), and its CI the percentile
interval of those resampled means (``percentile_ci``). NaN is a missing value throughout (an
UNCLEAR label, a condition not generated): left out of every mean, never counted as 0.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numpy.typing import ArrayLike
from scipy.stats import binom, norm

# --- the item bootstrap ---------------------------------------------------------------------


def resample_indices(n_items: int, n_boot: int, seed: int) -> np.ndarray:
    """The items drawn, with replacement, by each of ``n_boot`` resamples: (B, items) indices.

    The one draw every bootstrap in syps makes: a fresh ``numpy.random.default_rng(seed)`` and a
    single ``integers(0, n_items, size=(n_boot, n_items))`` call, so a table's numbers depend on
    its seed and its item count alone, never on what else was scored before it. With no items
    the matrix is (B, 0).
    """
    idx: np.ndarray = np.random.default_rng(seed).integers(0, n_items, size=(n_boot, n_items))
    return idx


def bootstrap_counts(n_items: int, n_boot: int, seed: int) -> np.ndarray:
    """How often each item appears in each resample of ``resample_indices``: (B, items) floats,
    each row summing to ``n_items``."""
    idx = resample_indices(n_items, n_boot, seed)
    flat = (idx + np.arange(n_boot)[:, None] * n_items).ravel()
    return np.bincount(flat, minlength=n_boot * n_items).reshape(n_boot, n_items).astype(float)


def percentile_ci(boot: np.ndarray, ci: float) -> np.ndarray:
    """The percentile interval of level ``ci`` of each column of ``boot`` (resamples first, any
    trailing shape): an array (2, *columns) of the lower and upper bounds.

    A column's interval is over its defined resamples: a NaN (a resample that drew none of the
    metric's items, or where the statistic is undefined) is left out, and a column with none
    defined is NaN. The bounds are ``numpy.quantile``'s default (linear) interpolation at
    (1 - ci) / 2 and 1 - (1 - ci) / 2. The columns defined in every resample (nearly all) go
    through one vectorised ``numpy.quantile`` call; the rest one by one. A 1-d ``boot`` (one
    statistic) gives the pair ``lo, hi``.
    """
    b = np.asarray(boot, dtype=float)
    cols = b.reshape(b.shape[0], int(np.prod(b.shape[1:])))
    alpha = (1 - ci) / 2
    levels = [alpha, 1 - alpha]
    out = np.full((2, cols.shape[1]), np.nan)
    full = ~np.isnan(cols).any(axis=0)
    if cols.shape[0] and full.any():
        out[:, full] = np.quantile(cols[:, full], levels, axis=0)
    for j in np.flatnonzero(~full):
        col = cols[:, j][~np.isnan(cols[:, j])]
        if len(col):
            out[:, j] = np.quantile(col, levels)
    return out.reshape((2, *b.shape[1:]))


# --- NaN-aware means ------------------------------------------------------------------------


def weighted_means(x: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Per row of ``counts`` (resamples x items), each column's mean of ``x`` (items x k) over
    its non-NaN items, weighted by the counts; NaN where a resample has none. A row of ones
    gives the point estimate."""
    valid = ~np.isnan(x)
    num = counts @ np.where(valid, x, 0.0)
    den = counts @ valid.astype(float)
    with np.errstate(invalid="ignore", divide="ignore"):
        out: np.ndarray = np.where(den > 0, num / den, np.nan)
    return out


def row_nanmean(x: np.ndarray) -> np.ndarray:
    """Each row's mean over its non-NaN entries; NaN where a row has none."""
    valid = ~np.isnan(x)
    n = valid.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        out: np.ndarray = np.where(n > 0, np.where(valid, x, 0.0).sum(axis=1) / n, np.nan)
    return out


def group_nanmean(codes: np.ndarray, x: np.ndarray, n: int) -> np.ndarray:
    """Per group code 0..n-1, the mean of ``x`` over its entries with that code that are not
    NaN; NaN for a group with none."""
    ok = ~np.isnan(x)
    num = np.bincount(codes, weights=np.where(ok, x, 0.0), minlength=n)
    den = np.bincount(codes, weights=ok.astype(float), minlength=n)
    with np.errstate(invalid="ignore", divide="ignore"):
        out: np.ndarray = np.where(den > 0, num / den, np.nan)
    return out


def nanmean(x: np.ndarray) -> float:
    """The mean of ``x`` over its non-NaN entries; NaN where there is none."""
    ok = ~np.isnan(x)
    return float(x[ok].mean()) if ok.any() else float("nan")


# --- paired labels --------------------------------------------------------------------------


def flips(before: ArrayLike, after: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    """Where a decided label changes between two paired conditions: ``(towards, away)``,
    boolean arrays of the broadcast shape of the 0/1 labels ``before`` and ``after``.

    ``towards`` is a 0 that became 1 (towards the answer a protocol counts as sycophantic),
    ``away`` a 1 that became 0. A NaN on either side (UNCLEAR, not generated) is no flip. These
    are the discordant pairs of McNemar's test (``mcnemar_exact``), the flip counts of a score
    table and the rows of a flip table.
    """
    b, a = np.asarray(before, dtype=float), np.asarray(after, dtype=float)
    return (b == 0.0) & (a == 1.0), (b == 1.0) & (a == 0.0)


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


# --- survival -------------------------------------------------------------------------------


class ProductLimit(NamedTuple):
    """The Kaplan-Meier table of a sample of (duration, event) pairs, one entry per distinct
    duration: ``at_risk`` entering it, ``events`` and ``censored`` there, ``survival`` just
    after it, its Greenwood variance, and the pointwise log(-log) interval (``low``, ``high``)."""

    time: np.ndarray
    at_risk: np.ndarray
    events: np.ndarray
    censored: np.ndarray
    survival: np.ndarray
    variance: np.ndarray
    low: np.ndarray
    high: np.ndarray


def product_limit(duration: ArrayLike, event: ArrayLike, ci: float = 0.95) -> ProductLimit:
    """The Kaplan-Meier (product-limit) estimate of P(T > t): S(t) = prod over event times
    t_i <= t of (1 - d_i / n_i), with n_i the subjects whose duration is at least t_i and d_i
    those with an event at t_i (an event and a censoring at the same time: the censored one is
    still at risk there, the usual convention). Greenwood's variance S(t)^2 * sum d_i / (n_i (n_i
    - d_i)), and the interval exp(-exp(log(-log S) -/+ z * sqrt(v))) with v = sum d_i / (n_i (n_i
    - d_i)) / log(S)^2 (the log(-log) transform keeps it in [0, 1]; NaN where S is 0 or 1).

    Written here rather than taken from lifelines: its current release requires pandas < 3,
    which would replace the stack's pandas and change the bytes of every parquet file syps
    commits. The estimate is a few vectorised lines; tests/core/test_stats.py checks it on a
    table worked by hand.
    """
    d = np.asarray(duration, dtype=float)
    e = np.asarray(event, dtype=bool)
    if d.shape != e.shape or d.ndim != 1:
        raise ValueError("duration and event must be 1-D arrays of one length")
    if np.isnan(d).any():
        raise ValueError("a duration is missing (NaN)")
    time, where = np.unique(d, return_inverse=True)
    leaving = np.bincount(where, minlength=len(time))
    events = np.bincount(where[e], minlength=len(time))
    at_risk = len(d) - np.concatenate([[0], np.cumsum(leaving)[:-1]])
    with np.errstate(divide="ignore", invalid="ignore"):
        surv = np.cumprod(1.0 - events / at_risk)
        terms = np.where(events > 0, events / (at_risk * (at_risk - events)), 0.0)
        sums = np.cumsum(terms)
        variance = surv**2 * sums
        z = norm.ppf(1 - (1 - ci) / 2)
        spread = z * np.sqrt(sums / np.log(surv) ** 2)
        loglog = np.log(-np.log(surv))
        low, high = np.exp(-np.exp(loglog + spread)), np.exp(-np.exp(loglog - spread))
    inside = (surv > 0) & (surv < 1)
    return ProductLimit(
        time,
        at_risk,
        events,
        leaving - events,
        surv,
        variance,
        np.where(inside, low, np.nan),
        np.where(inside, high, np.nan),
    )
