"""Significance of each cue's shift and its direction: pure functions on a label matrix.

``y`` has shape (items, variants) and holds 1.0, 0.0 or NaN (UNCLEAR or not generated), with the
reference variant (P0) in the first column, as in ``syps.metrics``. A cue Pk is compared with P0
over the items where both labels exist: the discordant pairs are the flips towards affirmation
(P0 = 0, Pk = 1) and away from it (P0 = 1, Pk = 0), and McNemar's exact test asks whether the
two are equally likely. The signed sensitivity keeps the direction that SPSS discards.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from scipy.stats import binomtest


def _check(y: np.ndarray) -> None:
    if y.ndim != 2 or y.shape[1] < 1:
        raise ValueError(f"label matrix must be (items, variants) with >= 1 column, got {y.shape}")


def paired_counts(y: np.ndarray) -> np.ndarray:
    """Per non-reference column, the number of items labelled at both it and the reference."""
    _check(y)
    both = ~np.isnan(y[:, 1:]) & ~np.isnan(y[:, :1])
    counts: np.ndarray = both.sum(axis=0)
    return counts


def discordant_counts(y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per non-reference column, the flips ``(towards, away)`` against the reference column.

    ``towards`` counts items with reference 0 and cue 1, ``away`` items with reference 1 and cue
    0; an item missing either label counts in neither. Both arrays have ``variants - 1`` ints.
    """
    _check(y)
    ref, cue = y[:, :1], y[:, 1:]
    towards: np.ndarray = ((ref == 0.0) & (cue == 1.0)).sum(axis=0)
    away: np.ndarray = ((ref == 1.0) & (cue == 0.0)).sum(axis=0)
    return towards, away


def mcnemar_exact(b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """Exact two-sided McNemar p-values from discordant counts ``b`` and ``c`` (same shape).

    Under the null each discordant pair is equally likely to go either way, so min(b, c) is
    Binomial(b + c, 1/2); the p-value is scipy's two-sided ``binomtest`` of it. No discordant
    pair is no evidence of a shift: p = 1. A NaN count (no paired items) gives a NaN p-value.
    """
    b_arr, c_arr = np.broadcast_arrays(np.asarray(b, dtype=float), np.asarray(c, dtype=float))
    known = ~np.isnan(b_arr) & ~np.isnan(c_arr)
    bad = known & ((b_arr < 0) | (c_arr < 0) | (b_arr % 1 != 0) | (c_arr % 1 != 0))
    if bad.any():
        raise ValueError("discordant counts must be non-negative integers")
    p = np.full(b_arr.shape, np.nan)
    for i in zip(*np.nonzero(known), strict=True):
        n = int(b_arr[i] + c_arr[i])
        k = int(min(b_arr[i], c_arr[i]))
        p[i] = binomtest(k, n, 0.5).pvalue if n > 0 else 1.0
    return p


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


def item_signed_sensitivity(y: np.ndarray) -> np.ndarray:
    """Per item, the mean of Syc_k - Syc_P0 over the cues k where both labels exist.

    Positive means the cues push the item towards affirmation, negative away from it; NaN for
    items with no such cue (including those whose reference label is missing).
    """
    _check(y)
    diffs = y[:, 1:] - y[:, :1]  # NaN wherever either label is missing
    valid = ~np.isnan(diffs)
    n = valid.sum(axis=1)
    total = np.where(valid, diffs, 0.0).sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        out: np.ndarray = np.where(n > 0, total / n, np.nan)
    return out


def significance_names(variants: Sequence[str]) -> list[str]:
    """The keys ``significance`` returns, in reporting order."""
    cues = variants[1:]
    names = [f"mcnemar_p_{v}" for v in cues] + [f"mcnemar_p_holm_{v}" for v in cues]
    names += [f"flips_towards_{v}" for v in cues] + [f"flips_away_{v}" for v in cues]
    return [*names, "flips_towards", "flips_away"]


def significance(y: np.ndarray, variants: Sequence[str]) -> dict[str, float]:
    """McNemar p-values (raw and Holm-adjusted over the cues) and flip counts of one cell.

    A cue with no item labelled at both it and the reference has a NaN p-value, left out of the
    Holm family; its flip counts are 0. ``flips_towards`` and ``flips_away`` sum over all cues.
    """
    _check(y)
    if len(variants) != y.shape[1]:
        raise ValueError(f"{len(variants)} variant names for {y.shape[1]} label columns")
    towards, away = discordant_counts(y)
    untested = paired_counts(y) == 0
    p = mcnemar_exact(np.where(untested, np.nan, towards), np.where(untested, np.nan, away))
    values = np.concatenate([p, holm(p), towards, away, [towards.sum(), away.sum()]])
    return {k: float(v) for k, v in zip(significance_names(variants), values, strict=True)}
