"""Cross-model tests: does a matched contrast's effect differ between two models on the same items?

The audit of SycEval reports that moving the format instruction from the objection into the
question moves two models in opposite directions on the same items. Each model's own effect is
``effect/<kind>`` (or ``contrast/<name>/diff``); this module tests that two models' effects
differ. For one test (a declared contrast, or a pooled effect kind) and two models A and B scored
on one dataset, per item with a paired difference for both (labelled in both cells by both):

- ``d_A`` is A's paired difference: ``followed`` in cell b minus cell a, each averaged over the
  repetitions (for an effect kind, the mean over the contrasts of that kind, as
  ``effect/<kind>`` takes it); ``d_B`` likewise, and ``x = d_A - d_B``;
- the statistic is the mean of ``x`` over those items (A's effect minus B's on the items both
  answered);
- its p-value is a two-sided sign-flip test (``scipy.stats.permutation_test``, one sample,
  ``permutation_type="samples"``): under the null that, item by item, the two models'
  differences are exchangeable (which model is which changes nothing), each ``x`` is symmetric
  about 0, and every vector of signs is equally likely. The p-value is the share of sign vectors
  whose mean is at least as far from 0 as the observed one. With at most ``EXACT_MAX`` nonzero
  items every one of the 2^n vectors is enumerated (exact); beyond that, ``n_resamples`` random
  vectors are drawn from a generator seeded with ``seed`` (one fresh generator per test, so a
  test's p does not depend on which other tests run), p = (hits + 1) / (n_resamples + 1) per
  side, doubled. Items with ``x = 0`` carry no sign and do not change p.

Holm's adjustment (``syps.core.stats.holm``) runs over every (pair of models, test) of one
dataset, in two families: the declared contrasts, and the pooled effect kinds (each a mean of
contrasts of the first family, so pooling both would count the same evidence twice).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from itertools import combinations

import numpy as np
import pandas as pd
from scipy.stats import permutation_test

from syps.core.report import Scores
from syps.core.stats import holm

PREFIX = "xmodel"
# scipy enumerates 2^n sign vectors in Python batches: 0.1 s at 14 items, 9 s at 20.
EXACT_MAX = 14
FAMILIES = ("contrast", "effect")


@dataclass(frozen=True)
class CrossTest:
    """One test: ``model`` minus ``other`` on ``test`` (``contrast/<name>`` or
    ``effect/<kind>``) over ``n_items`` shared items; ``p`` NaN where none is shared."""

    model: str
    other: str
    test: str
    diff: float
    n_items: int
    p: float


def _mean(x: np.ndarray, axis: int) -> np.ndarray:
    out: np.ndarray = np.mean(x, axis=axis)
    return out


def sign_flip_p(x: np.ndarray, n_resamples: int, seed: int) -> float:
    """Two-sided sign-flip p-value of ``mean(x) = 0`` (``x``: per-item differences, no NaN):
    exact over the 2^n sign vectors of the n nonzero items when n <= ``EXACT_MAX``, else
    ``n_resamples`` random vectors from ``numpy.random.default_rng(seed)``. 1 with fewer than
    two nonzero items: none gives 1 vector, 0, as observed; one gives two, +x and -x, both as
    far from 0 (scipy wants two observations)."""
    x = np.asarray(x, dtype=float)
    if np.isnan(x).any():
        raise ValueError("sign_flip_p: x holds NaN; pass the items with a difference only")
    x = x[x != 0]
    if len(x) < 2:
        return 1.0
    res = permutation_test(
        (x,),
        _mean,
        permutation_type="samples",
        vectorized=True,
        n_resamples=np.inf if len(x) <= EXACT_MAX else n_resamples,
        alternative="two-sided",
        # random_state, not rng: rng arrived in scipy 1.15, and pyproject allows 1.12.
        random_state=np.random.default_rng(seed),
    )
    return float(res.pvalue)


def pair_test(
    model: str, other: str, test: str, a: pd.Series, b: pd.Series, n_resamples: int, seed: int
) -> CrossTest:
    """``model``'s per-item differences ``a`` against ``other``'s ``b`` (indexed by item, NaN
    where an item has none) over the items where both have one."""
    x = (a - b.reindex(a.index)).dropna().to_numpy(dtype=float)
    if len(x) == 0:
        return CrossTest(model, other, test, float("nan"), 0, float("nan"))
    return CrossTest(model, other, test, float(x.mean()), len(x), sign_flip_p(x, n_resamples, seed))


def cross_model(
    diffs: Mapping[str, Mapping[str, pd.Series]],
    n_resamples: int,
    seed: int,
    alpha: float,
    confounded: Mapping[str, float],
) -> dict[str, dict[str, float]]:
    """The cross-model keys of one dataset, per model.

    ``diffs[model][test]``: the model's per-item paired differences of ``test``
    (``contrast/<name>`` or ``effect/<kind>``), indexed by item. Every pair of models is tested
    once on every test both have; model A's dict gets, under ``xmodel/<B>/<test>/``: ``diff``
    (mean of d_A - d_B; B's dict has its negative), ``diff_n`` (shared items), ``p``, ``p_holm``
    (Holm over the dataset's family), ``significant`` (1 when ``p_holm`` < ``alpha``) and
    ``confounded`` (``confounded[test]``, the lint's flag). Fewer than two models: nothing."""
    tests = [
        pair_test(a, b, t, diffs[a][t], diffs[b][t], n_resamples, seed)
        for a, b in combinations(sorted(diffs), 2)
        for t in sorted(set(diffs[a]) & set(diffs[b]))
    ]
    p_holm = np.full(len(tests), np.nan)
    for family in FAMILIES:
        ks = [k for k, t in enumerate(tests) if t.test.split("/", 1)[0] == family]
        if ks:
            p_holm[ks] = holm(np.array([tests[k].p for k in ks]))
    out: dict[str, dict[str, float]] = {}
    for t, ph in zip(tests, p_holm, strict=True):
        shared = {
            "diff_n": float(t.n_items),
            "p": t.p,
            "p_holm": float(ph),
            "significant": float("nan") if np.isnan(ph) else float(ph < alpha),
            "confounded": float(confounded.get(t.test, 0.0)),
        }
        for me, you, sign in ((t.model, t.other, 1.0), (t.other, t.model, -1.0)):
            key = f"{PREFIX}/{you}/{t.test}"
            mine = out.setdefault(me, {})
            mine[f"{key}/diff"] = sign * t.diff + 0.0  # + 0.0: B's 0 is 0, not -0
            mine.update({f"{key}/{stat}": v for stat, v in shared.items()})
    return out


def significant_lines(scores: Scores) -> list[str] | None:
    """The cross-model differences of ``scores`` that are significant after Holm, each pair of
    models once, as a table's lines; None when ``scores`` holds no cross-model test (one
    model per dataset)."""
    rows, n_tests, found = [], 0, False
    for model in sorted(scores):
        for dataset, ms in sorted(scores[model].items()):
            for key in sorted(ms):
                parts = key.split("/", 2)
                if parts[0] != PREFIX or not key.endswith("/significant"):
                    continue
                found = True
                other, test = parts[1], parts[2].removesuffix("/significant")
                if other < model or np.isnan(ms[f"{PREFIX}/{other}/{test}/p"]):
                    continue  # each pair once; a test with no shared item is not counted
                n_tests += 1
                if ms[key] == 1.0:
                    k = f"{PREFIX}/{other}/{test}"
                    mark = " (confounded)" if ms[f"{k}/confounded"] == 1.0 else ""
                    rows.append(
                        [model, other, dataset, test + mark, f"{ms[f'{k}/diff']:+.3f}"]
                        + [f"{ms[f'{k}/{s}']:.4f}" for s in ("p", "p_holm")]
                        + [f"{ms[f'{k}/diff_n']:.0f}"]
                    )
    if not found:
        return None
    title = [
        f"Cross-model differences significant after Holm: {len(rows)} of {n_tests} test(s)",
        "(a sign-flip test over the items both models answered; diff: A's effect minus B's)",
    ]
    if not rows:
        return title
    header = ["model A", "model B", "dataset", "test", "diff", "p", "p_holm", "items"]
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths)
    table = [header, ["-" * w for w in widths], *rows]
    return [*title, *(fmt.format(*r).rstrip() for r in table)]


def summary(scores: Scores, ci: float) -> str | None:
    """What the score stage and ``syps summary`` print: the cross-model differences significant
    after Holm (:func:`significant_lines`); None with one model per dataset, as in the default
    study."""
    lines = significant_lines(scores)
    return None if lines is None else "\n".join(lines)
