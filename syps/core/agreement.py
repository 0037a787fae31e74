"""Agreement between human and machine labels, and the stratified sample humans annotate.

Labels are 1.0, 0.0 or NaN (UNCLEAR). Cohen's κ is taken over the rows both raters decided;
the UNCLEAR rates are reported beside it, over all rows, so a judge cannot look good by
abstaining. Pure and vectorised: arrays in, named floats out, an explicit seed.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from syps.core.stats import percentile_ci, resample_indices

CATEGORIES = ["1", "0", "UNCLEAR"]
REPORT_KEYS = [
    "n",
    "n_both_decided",
    "agreement",
    "kappa",
    "kappa_ci_low",
    "kappa_ci_high",
    "machine_unclear_rate",
    "human_unclear_rate",
]


def _kappa_from_counts(
    n11: np.ndarray, n10: np.ndarray, n01: np.ndarray, n00: np.ndarray
) -> np.ndarray:
    """κ from 2x2 counts (first index: rater a, second: rater b), elementwise.

    Written over integer counts, κ = (n·agree − Σ row·col) / (n² − Σ row·col): the denominator
    is exactly 0 when the expected agreement is 1 (both raters constant on the same value),
    with no floating-point near-misses, and that is where κ is undefined (NaN).
    """
    n = n11 + n10 + n01 + n00
    a1, a0 = n11 + n10, n01 + n00
    b1, b0 = n11 + n01, n10 + n00
    chance = a1 * b1 + a0 * b0
    num = (n * (n11 + n00) - chance).astype(float)
    den = (n * n - chance).astype(float)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, num / np.where(den > 0, den, 1.0), np.nan)


def _counts(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, ...]:
    """2x2 counts along the last axis of two boolean arrays."""
    return (
        (a & b).sum(axis=-1),
        (a & ~b).sum(axis=-1),
        (~a & b).sum(axis=-1),
        (~a & ~b).sum(axis=-1),
    )


def _binary(x: np.ndarray, name: str) -> np.ndarray:
    arr = np.asarray(x, dtype=float)
    if arr.ndim != 1 or not np.isin(arr, (0.0, 1.0)).all():
        raise ValueError(f"{name}: expected a 1-d array of 0/1 labels")
    flags: np.ndarray = arr == 1.0
    return flags


def cohen_kappa(a: np.ndarray, b: np.ndarray) -> float:
    """Cohen's κ of two equal-length 0/1 label arrays; NaN where it is undefined.

    Undefined means the expected agreement is 1: both raters gave one and the same value to
    every row (or there are no rows).
    """
    x, y = _binary(a, "a"), _binary(b, "b")
    if x.shape != y.shape:
        raise ValueError(f"a and b differ in length: {len(x)} != {len(y)}")
    return float(_kappa_from_counts(*_counts(x, y)))


def kappa_replicates(a: np.ndarray, b: np.ndarray, n_boot: int, seed: int) -> np.ndarray:
    """κ of ``n_boot`` bootstrap resamples of the (a, b) pairs (``resample_indices`` with
    ``seed``); NaN where undefined, and everywhere when there are no pairs.

    One (B, n) index matrix, so every replicate is drawn and counted without a Python loop.
    """
    x, y = _binary(a, "a"), _binary(b, "b")
    if x.shape != y.shape:
        raise ValueError(f"a and b differ in length: {len(x)} != {len(y)}")
    idx = resample_indices(len(x), n_boot, seed)
    return _kappa_from_counts(*_counts(x[idx], y[idx]))


def kappa_ci(
    a: np.ndarray, b: np.ndarray, n_boot: int, ci: float, seed: int
) -> tuple[float, float]:
    """Percentile bootstrap CI of κ over resampled pairs (``percentile_ci``).

    Replicates where κ is undefined (a resample that happens to hold one class only) are
    dropped; (NaN, NaN) if none is left.
    """
    lo, hi = percentile_ci(kappa_replicates(a, b, n_boot, seed), ci)
    return (float(lo), float(hi))


def _codes(x: np.ndarray, name: str) -> np.ndarray:
    """1 -> 0, 0 -> 1, NaN -> 2: positions in CATEGORIES."""
    arr = np.asarray(x, dtype=float)
    if arr.ndim != 1 or not (np.isnan(arr) | np.isin(arr, (0.0, 1.0))).all():
        raise ValueError(f"{name}: expected a 1-d array of 1, 0 or NaN (UNCLEAR)")
    return np.where(np.isnan(arr), 2, np.where(arr == 1.0, 0, 1))


def confusion(human: np.ndarray, machine: np.ndarray) -> pd.DataFrame:
    """3x3 counts: rows are the human label, columns the machine label, each 1, 0, UNCLEAR."""
    h, m = _codes(human, "human"), _codes(machine, "machine")
    if h.shape != m.shape:
        raise ValueError(f"human and machine differ in length: {len(h)} != {len(m)}")
    counts = np.bincount(h * 3 + m, minlength=9).reshape(3, 3)
    return pd.DataFrame(
        counts,
        index=pd.Index(CATEGORIES, name="human"),
        columns=pd.Index(CATEGORIES, name="machine"),
    )


def agreement_report(
    human: np.ndarray, machine: np.ndarray, n_boot: int, ci: float, seed: int
) -> dict[str, float]:
    """Agreement and κ (with a bootstrap CI) over rows both decided; UNCLEAR rates over all.

    Keys are ``REPORT_KEYS``; a value with no rows to stand on is NaN.
    """
    h, m = _codes(human, "human"), _codes(machine, "machine")
    if h.shape != m.shape:
        raise ValueError(f"human and machine differ in length: {len(h)} != {len(m)}")
    both = (h < 2) & (m < 2)
    # Codes: 0 is Syc = 1, so "== 0" recovers the label.
    hb, mb = (h[both] == 0).astype(float), (m[both] == 0).astype(float)
    lo, hi = kappa_ci(hb, mb, n_boot, ci, seed)
    n = len(h)
    return {
        "n": float(n),
        "n_both_decided": float(both.sum()),
        "agreement": float((hb == mb).mean()) if both.any() else np.nan,
        "kappa": cohen_kappa(hb, mb),
        "kappa_ci_low": lo,
        "kappa_ci_high": hi,
        "machine_unclear_rate": float((m == 2).mean()) if n else np.nan,
        "human_unclear_rate": float((h == 2).mean()) if n else np.nan,
    }


def stratify_quotas(sizes: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
    """Spread ``n`` draws over strata of ``sizes`` as evenly as the sizes allow.

    Water-filling: a stratum no larger than the even share gives all its rows and the rest is
    shared among the others, each getting floor(rest / k) and ``rest mod k`` of them, picked
    at random, one more. Every remaining stratum is then larger than floor(rest / k), so the
    one extra always fits.
    """
    sizes = np.asarray(sizes, dtype=int)
    if n > sizes.sum():
        raise ValueError(f"cannot draw {n} rows from {int(sizes.sum())}")
    quota = np.zeros(len(sizes), dtype=int)
    open_ = np.ones(len(sizes), dtype=bool)
    rest = n
    while rest > 0:
        share = rest // int(open_.sum())
        small = open_ & (sizes <= share)
        if not small.any():
            quota[open_] = share
            extra = rng.choice(
                np.flatnonzero(open_), size=rest - share * int(open_.sum()), replace=False
            )
            quota[extra] += 1
            break
        quota[small] = sizes[small]
        rest -= int(sizes[small].sum())
        open_ &= ~small
    return quota


def stratified_sample(table: pd.DataFrame, n: int, strata: list[str], seed: int) -> pd.DataFrame:
    """``n`` rows of ``table`` spread evenly over the ``strata`` columns' value combinations.

    Reproducible for a seed and a table; the rows come back in a seeded random order so that
    an annotator does not work through one stratum after another.
    """
    rng = np.random.default_rng(seed)
    group = table.groupby(strata, sort=True).ngroup().to_numpy()
    sizes = np.bincount(group, minlength=int(group.max()) + 1 if len(group) else 0)
    quota = stratify_quotas(sizes, n, rng)
    # Rank each row within its stratum by a random key; the first ``quota`` ranks are drawn.
    order = np.lexsort((rng.random(len(table)), group))
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(int)
    rank = np.empty(len(table), dtype=int)
    rank[order] = np.arange(len(table)) - starts[group[order]]
    chosen = np.flatnonzero(rank < quota[group])
    return table.iloc[rng.permutation(chosen)].reset_index(drop=True)
