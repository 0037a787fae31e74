"""Significance of each cue's shift and its direction: pure functions on a label matrix.

``y`` has shape (items, variants) and holds 1.0, 0.0 or NaN (UNCLEAR or not generated), with the
reference variant (P0) in the first column, as in ``syps.protocols.cues.metrics``. A cue Pk is
compared with P0 over the items where both labels exist: the discordant pairs are the flips towards
affirmation (P0 = 0, Pk = 1) and away from it (P0 = 1, Pk = 0), and McNemar's exact test asks
whether the two are equally likely. The signed sensitivity keeps the direction that SPSS discards.

A cue with several wordings (``P3a``, ``P3b``) is one hypothesis, not one per wording: its per-item
difference from P0 is pooled over the wordings, and its test is an exact permutation test of the sum
of those pooled differences (``pooled_permutation_p``). For a cue with one wording that test is
McNemar's exact test itself, so both kinds of cue enter one Holm family on equal terms. (A sign test
on the pooled differences would not be valid: with two wordings and a base rate q, an item moves
"towards" with probability (1-q)(1-(1-q)^2) and "away" with q(1-q^2) under no effect at all, equal
only at q = 1/2.)
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from syps.core.stats import flips, holm, mcnemar_exact, row_nanmean
from syps.protocols.cues.params import cue_of


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
    """Per non-reference column, the flips (``syps.core.stats.flips``) ``(towards, away)``
    against the reference column.

    ``towards`` counts items with reference 0 and cue 1, ``away`` items with reference 1 and cue
    0; an item missing either label counts in neither. Both arrays have ``variants - 1`` ints.
    """
    _check(y)
    towards, away = flips(y[:, :1], y[:, 1:])
    return towards.sum(axis=0), away.sum(axis=0)


def item_signed_sensitivity(y: np.ndarray) -> np.ndarray:
    """Per item, the mean of Syc_k - Syc_P0 over the cues k where both labels exist.

    Positive means the cues push the item towards affirmation, negative away from it; NaN for
    items with no such cue (including those whose reference label is missing).
    """
    _check(y)
    return row_nanmean(y[:, 1:] - y[:, :1])  # NaN wherever either label is missing


def by_cue(variants: Sequence[str]) -> dict[str, list[str]]:
    """Variant ids grouped by their cue, in the order given: ``P3a, P3b`` -> ``{"P3": [...]}``."""
    out: dict[str, list[str]] = {}
    for v in variants:
        out.setdefault(cue_of(v), []).append(v)
    return out


def pooled_differences(y: np.ndarray, variants: Sequence[str]) -> np.ndarray:
    """Per item and cue P1..P7 present in ``variants``: the mean of Syc_w - Syc_P0 over the cue's
    wordings w where both labels exist, NaN where none does. Shape (items, cues), in cue order.
    """
    _check(y)
    col = {v: j for j, v in enumerate(variants)}
    groups = list(by_cue(variants[1:]).values())
    out = np.full((y.shape[0], len(groups)), np.nan)
    for k, ids in enumerate(groups):
        out[:, k] = row_nanmean(y[:, [col[v] for v in ids]] - y[:, :1])
    return out


def pooled_permutation_p(ref: np.ndarray, words: np.ndarray) -> float:
    """Two-sided exact p-value that a cue's wordings shift the labels from the reference P0.

    ``ref`` has shape (items,), ``words`` (items, wordings), both 1.0, 0.0 or NaN. The statistic
    is T, the sum over items of the pooled difference d = mean(decided wordings) - P0 (items
    with P0 and at least one decided wording). Under the null the prompt has no effect, so
    within an item the decided labels are exchangeable: which of its m + 1 labels is P0's is
    uniform. An item with j ones then has d = j/m with probability (m+1-j)/(m+1) (P0's label
    is a 0) and (j-1-m)/m otherwise, mean 0; the items are independent, so the exact null
    distribution of T is the convolution of these two-point laws, and p = P(|T| >= |t|).
    With one wording this is McNemar's exact test. NaN when no item qualifies.

    Written by hand because scipy's ``permutation_test`` enumerates (or samples) the (m+1)^n
    relabellings; the convolution is exact, deterministic and linear in the items.
    """
    decided = ~np.isnan(words)
    m = decided.sum(axis=1)
    keep = ~np.isnan(ref) & (m > 0)
    if not keep.any():
        return math.nan
    m = m[keep]
    j = ref[keep] + np.where(decided, words, 0.0)[keep].sum(axis=1)
    scale = math.lcm(*(int(x) for x in np.unique(m)))  # every d * scale is an integer
    per = scale // m
    high = (j * per).astype(np.int64)  # P0's label is a 0
    low = ((j - 1 - m) * per).astype(np.int64)  # P0's label is a 1
    p_low = j / (m + 1)
    observed = int(np.where(ref[keep] == 1.0, low, high).sum())
    # An item whose labels all agree (j = 0 or m + 1) has d = 0 under every relabelling; each
    # other item adds low or high. dist[k] = P(T = sum(low) + k), built item by item.
    moving = (p_low > 0) & (p_low < 1)
    dist = np.ones(1)
    for step, q in zip((high - low)[moving], p_low[moving], strict=True):
        grown = np.zeros(len(dist) + step)
        grown[: len(dist)] += dist * q
        grown[step:] += dist * (1 - q)
        dist = grown
    totals = int(low[moving].sum()) + np.arange(len(dist))
    return float(min(1.0, dist[np.abs(totals) >= abs(observed)].sum()))


def significance_names(variants: Sequence[str]) -> list[str]:
    """The keys ``significance`` returns, in reporting order.

    Raw p-values and flip counts exist per cue (pooled) and, for a cue with several wordings,
    per wording too; the Holm-adjusted p-values exist per cue only, the members of the family.
    """
    groups = by_cue(variants[1:])
    ids = [x for cue, ws in groups.items() for x in ([cue, *ws] if len(ws) > 1 else ws)]
    names = [f"mcnemar_p_{v}" for v in ids] + [f"mcnemar_p_holm_{c}" for c in groups]
    names += [f"flips_towards_{v}" for v in ids] + [f"flips_away_{v}" for v in ids]
    return [*names, "flips_towards", "flips_away"]


def significance(y: np.ndarray, variants: Sequence[str]) -> dict[str, float]:
    """Paired tests of each cue against P0 (raw and Holm-adjusted over the cues) and flip counts
    of one cell.

    Per cue, ``flips_towards_<cue>`` / ``flips_away_<cue>`` count the items whose pooled
    difference (see ``pooled_differences``) is positive / negative (P0 0 and some wording 1, or
    P0 1 and some wording 0), and ``mcnemar_p_<cue>`` is ``pooled_permutation_p``: McNemar's
    test for a one-wording cue. A cue with several wordings also reports each wording's McNemar
    p and flips, unadjusted and outside the family: they say whether the phrase matters, not
    whether the cue does. One Holm family per cell, one member per cue, so adding a wording
    never changes another cue's adjusted p. A cue with no item labelled at both it and the
    reference has a NaN p-value, left out of the family; its flip counts are 0.
    ``flips_towards`` and ``flips_away`` sum the per-cue counts: an item moved by two wordings
    of one cue counts once.
    """
    _check(y)
    if len(variants) != y.shape[1]:
        raise ValueError(f"{len(variants)} variant names for {y.shape[1]} label columns")
    groups = by_cue(variants[1:])
    d = pooled_differences(y, variants)
    cue_towards: np.ndarray = (d > 0).sum(axis=0)
    cue_away: np.ndarray = (d < 0).sum(axis=0)
    towards, away = discordant_counts(y)
    untested_w = paired_counts(y) == 0
    word_p = mcnemar_exact(
        np.where(untested_w, np.nan, towards), np.where(untested_w, np.nan, away)
    )
    col = {v: j for j, v in enumerate(variants)}
    cue_p = np.full(len(groups), np.nan)
    p: dict[str, float] = {}
    up: dict[str, float] = {}
    down: dict[str, float] = {}
    for k, (cue, ws) in enumerate(groups.items()):
        if len(ws) > 1:
            cue_p[k] = pooled_permutation_p(y[:, 0], y[:, [col[w] for w in ws]])
            p[cue], up[cue], down[cue] = cue_p[k], cue_towards[k], cue_away[k]
        else:
            cue_p[k] = word_p[col[ws[0]] - 1]
        for w in ws:
            # A one-wording cue's own counts equal its pooled ones (see the module docstring).
            p[w], up[w], down[w] = word_p[col[w] - 1], towards[col[w] - 1], away[col[w] - 1]
    adjusted = dict(zip(groups, holm(cue_p), strict=True))
    values = {f"mcnemar_p_{v}": x for v, x in p.items()}
    values |= {f"mcnemar_p_holm_{c}": x for c, x in adjusted.items()}
    values |= {f"flips_towards_{v}": x for v, x in up.items()}
    values |= {f"flips_away_{v}": x for v, x in down.items()}
    values |= {"flips_towards": cue_towards.sum(), "flips_away": cue_away.sum()}
    return {k: float(values[k]) for k in significance_names(variants)}
