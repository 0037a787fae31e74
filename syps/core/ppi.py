"""A judged rate corrected for the judge's errors by the people's labels of a sample:
prediction-powered inference (Angelopoulos, Bates, Fannjiang, Jordan and Zrnic, "Prediction-
powered inference", Science 382, 2023).

The judge labels every response (N of them decided); people label a sample of n of them. The
judge's rate over all N is precise but biased by the judge's errors; the people's rate over the
n is unbiased but wide. PPI keeps the precision and removes the bias:

    theta_PP = mean(judge over all N) + mean(person - judge over the n)

The second term, the *rectifier*, is the judge's average error as the people see it: it is 0
for a judge that errs both ways equally often, and it moves the rate the other way where the
judge leans. Its variance is var(judge over all)/N + var(person - judge)/n, and the interval is
normal: theta_PP +- z * sqrt(variance). A judge that agrees with people perfectly leaves only
the first term's variance (tiny); a judge that is noise leaves the rectifier's, which is no
better than the people's own rate. Pure and vectorised: arrays in, a record out.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from scipy.stats import norm


@dataclass(frozen=True)
class PPIResult:
    """One corrected rate. Undefined values are NaN: the estimate without a judged response or
    a labelled one (``N`` or ``n`` 0), the interval also with fewer than 2 of either."""

    estimate: float
    """theta_PP: the judged rate plus the rectifier."""
    ci_low: float
    ci_high: float
    se: float
    """The standard error behind the interval."""
    raw: float
    """The judge's rate over the N responses it decided."""
    n: int
    """Sample rows both the person and the judge decided: the rectifier's rows."""
    N: int
    """Responses the judge decided (its UNCLEAR excluded, counted in ``unclear``)."""
    unclear: int
    """Responses the judge called UNCLEAR, of all it labelled."""
    sample_unclear: int
    """Sample rows the person or the judge called UNCLEAR (left out of the rectifier)."""


def _labels(x: Any, name: str) -> np.ndarray:
    arr = np.asarray(x, dtype=float)
    if arr.ndim != 1 or not (np.isnan(arr) | np.isin(arr, (0.0, 1.0))).all():
        raise ValueError(f"{name}: expected a 1-d array of 1, 0 or NaN (UNCLEAR)")
    return arr


def ppi_mean(
    judge_all: Any,
    judge_sample: Any,
    human_sample: Any,
    weights: Any = None,
    level: float = 0.95,
) -> PPIResult:
    """The prediction-powered rate of 1s, with its normal interval at ``level``.

    ``judge_all``: the judge's label (1.0, 0.0, NaN for UNCLEAR) of every response;
    ``judge_sample`` and ``human_sample``: the judge's and the person's label of the sampled
    responses, row for row (the sample's responses are among ``judge_all``'s). A row either
    called UNCLEAR is left out of the rectifier and counted; the estimand is the rate people
    would give among the responses the judge decides, a person's UNCLEAR taken as missing at
    random.

    ``weights`` (one per sample row, positive; None: equal) make the rectifier a weighted
    (Hajek) mean, sum(w * d) / sum(w) with d = person - judge, for a sample whose rows were not
    drawn with equal probability: pass each row's inverse sampling fraction
    (:func:`stratum_weights`). Its variance is the with-replacement linearisation,
    n / (n - 1) * sum(w^2 * (d - mean_w)^2) / sum(w)^2, which is exactly var(d, ddof=1) / n for
    equal weights and, ignoring the gain of stratification, errs on the wide side otherwise.
    Both variances use ddof = 1. The interval is not clipped to [0, 1] (nor is the estimate):
    a bound outside says the data cannot place the rate more tightly.
    """
    if not 0 < level < 1:
        raise ValueError(f"level: expected a number in (0, 1), got {level}")
    j_all = _labels(judge_all, "judge_all")
    j, h = _labels(judge_sample, "judge_sample"), _labels(human_sample, "human_sample")
    if j.shape != h.shape:
        raise ValueError(f"judge_sample and human_sample differ in length: {len(j)} != {len(h)}")
    w = np.ones(len(j)) if weights is None else np.asarray(weights, dtype=float)
    if w.shape != j.shape or not (np.isfinite(w) & (w > 0)).all():
        raise ValueError(f"weights: expected {len(j)} positive finite numbers, one per sample row")
    decided = j_all[~np.isnan(j_all)]
    both = ~np.isnan(j) & ~np.isnan(h)
    d, w = h[both] - j[both], w[both]
    N, n = len(decided), len(d)
    raw = float(decided.mean()) if N else math.nan
    rect = float((w * d).sum() / w.sum()) if n else math.nan
    var_all = float(decided.var(ddof=1)) / N if N > 1 else math.nan
    var_rect = (
        float((w**2 * (d - rect) ** 2).sum() / w.sum() ** 2) * n / (n - 1) if n > 1 else math.nan
    )
    estimate = raw + rect
    se = math.sqrt(var_all + var_rect)
    z = float(norm.ppf(0.5 + level / 2))
    return PPIResult(
        estimate=estimate,
        ci_low=estimate - z * se,
        ci_high=estimate + z * se,
        se=se,
        raw=raw,
        n=n,
        N=N,
        unclear=int(len(j_all) - N),
        sample_unclear=int(len(j) - n),
    )


def stratum_weights(
    population: pd.DataFrame, sample: pd.DataFrame, strata: Sequence[str]
) -> np.ndarray:
    """Each sample row's inverse sampling fraction N_h / n_h: N_h the population's rows in the
    row's stratum (its values of the ``strata`` columns), n_h the sample's. A sample drawn
    evenly over strata of unequal size (``syps judge sample``) over-represents the small ones;
    weighting each row by how many population rows it stands for undoes that, so the rectifier
    is the population's average error, not the sample's. Post-stratified, the same weights also
    serve a sample nobody drew (people labelling traces they chose). A stratum with population
    rows but no sample row adds nothing: its error is taken to be the labelled strata's.
    Raises where a sample row's stratum has no population row (it cannot come from there)."""
    cols = list(strata)
    key_p = list(population[cols].astype(str).itertuples(index=False, name=None))
    key_s = list(sample[cols].astype(str).itertuples(index=False, name=None))
    big_n, small_n = Counter(key_p), Counter(key_s)
    for i, k in enumerate(key_s):
        if k not in big_n:
            where = dict(zip(cols, k, strict=True))
            raise ValueError(f"sample row {i}: its stratum {where} has no population row")
    return np.array([big_n[k] / small_n[k] for k in key_s], dtype=float)
