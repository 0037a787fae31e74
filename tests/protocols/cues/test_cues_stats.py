"""SyPS's significance and signed sensitivity (``syps.protocols.cues.stats``) against
hand-derived values and plain-loop brute force; the exact tests themselves are in
tests/core/test_stats.py."""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from syps.core.stats import mcnemar_exact
from syps.protocols.cues.stats import (
    discordant_counts,
    item_signed_sensitivity,
    paired_counts,
    pooled_permutation_p,
    significance,
    significance_names,
)

NAN = math.nan

# --- discordant counts, signed sensitivity, significance -------------------------------------

# Columns P0..P4; P4 was never labelled. Each pattern repeated n times.
PATTERNS = [
    (9, [0.0, 1.0, 0.0, 0.0, NAN]),  # A: P1 flips towards; P2, P3 stay 0
    (1, [1.0, 0.0, 1.0, 0.0, NAN]),  # B: P1 and P3 flip away; P2 stays 1
    (4, [1.0, 1.0, 1.0, 0.0, NAN]),  # C: P3 flips away; P1, P2 stay 1
    (2, [NAN, 1.0, 1.0, 1.0, NAN]),  # D: P0 UNCLEAR, so never paired
]
VARIANTS5 = ["P0", "P1", "P2", "P3", "P4"]


def _matrix() -> np.ndarray:
    return np.array([row for n, row in PATTERNS for _ in range(n)])


def test_discordant_and_paired_counts_by_hand() -> None:
    towards, away = discordant_counts(_matrix())
    # P1: A towards (9), B away (1). P2: none. P3: B and C away (1 + 4). P4: nothing paired.
    np.testing.assert_array_equal(towards, [9, 0, 0, 0])
    np.testing.assert_array_equal(away, [1, 0, 5, 0])
    # A, B, C (14 items) are labelled at P0..P3; D lacks P0, nobody has P4.
    np.testing.assert_array_equal(paired_counts(_matrix()), [14, 14, 14, 0])


def test_item_signed_sensitivity_by_hand() -> None:
    got = item_signed_sensitivity(_matrix())
    # A: (1 + 0 + 0) / 3; B: (-1 + 0 - 1) / 3; C: (0 + 0 - 1) / 3; D: no reference -> NaN.
    expected = [1 / 3] * 9 + [-2 / 3] + [-1 / 3] * 4 + [NAN] * 2
    np.testing.assert_allclose(got, expected)


def test_item_signed_sensitivity_skips_unlabelled_cues() -> None:
    y = np.array(
        [
            [0.0, 1.0, NAN, 1.0],  # two cues labelled, both +1 -> 1
            [1.0, NAN, 0.0, NAN],  # one cue labelled, -1 -> -1
            [1.0, NAN, NAN, NAN],  # reference only -> NaN
            [1.0, 1.0, 0.0, 1.0],  # 0, -1, 0 -> -1/3
        ]
    )
    np.testing.assert_allclose(item_signed_sensitivity(y), [1.0, -1.0, NAN, -1 / 3])


def test_significance_by_hand() -> None:
    out = significance(_matrix(), VARIANTS5)
    assert list(out) == significance_names(VARIANTS5)
    assert all(isinstance(v, float) for v in out.values())
    # P1: b = 9, c = 1 -> 22/1024 (see above). P2: no discordant pair -> 1.
    # P3: b = 0, c = 5 -> 2 / 2^5 = 64/1024. P4: nothing paired -> NaN.
    assert out["mcnemar_p_P1"] == pytest.approx(22 / 1024, rel=1e-12)
    assert out["mcnemar_p_P2"] == 1.0
    assert out["mcnemar_p_P3"] == pytest.approx(64 / 1024, rel=1e-12)
    assert math.isnan(out["mcnemar_p_P4"])
    # Holm over the m = 3 tested cues. Sorted: P1 22/1024 * 3 = 66/1024; P3 64/1024 * 2 =
    # 128/1024; P2 1 * 1 = 1. Already increasing, so the running maximum changes nothing.
    assert out["mcnemar_p_holm_P1"] == pytest.approx(66 / 1024, rel=1e-12)
    assert out["mcnemar_p_holm_P2"] == 1.0
    assert out["mcnemar_p_holm_P3"] == pytest.approx(128 / 1024, rel=1e-12)
    assert math.isnan(out["mcnemar_p_holm_P4"])
    flips = {k: v for k, v in out.items() if k.startswith("flips")}
    assert flips == {
        "flips_towards_P1": 9.0,
        "flips_towards_P2": 0.0,
        "flips_towards_P3": 0.0,
        "flips_towards_P4": 0.0,
        "flips_away_P1": 1.0,
        "flips_away_P2": 0.0,
        "flips_away_P3": 5.0,
        "flips_away_P4": 0.0,
        "flips_towards": 9.0,
        "flips_away": 6.0,
    }


def test_significance_reference_only_and_mismatched_names() -> None:
    # No cue: no p-values, and zero flips in total.
    assert significance(np.array([[1.0], [0.0]]), ["P0"]) == {
        "flips_towards": 0.0,
        "flips_away": 0.0,
    }
    with pytest.raises(ValueError, match="3 variant names for 2 label columns"):
        significance(np.zeros((2, 2)), ["P0", "P1", "P2"])
    with pytest.raises(ValueError, match="items, variants"):
        discordant_counts(np.zeros(3))


def test_significance_names_for_eight_variants() -> None:
    names = significance_names(["P0", "P1", "P2", "P3", "P4", "P5", "P6", "P7"])
    # 7 cues x 4 per-cue keys + 2 totals.
    assert len(names) == 30
    assert names[0] == "mcnemar_p_P1" and names[7] == "mcnemar_p_holm_P1"
    assert names[-2:] == ["flips_towards", "flips_away"]


@settings(max_examples=200, deadline=None, database=None)
@given(
    st.lists(
        st.lists(st.sampled_from([0.0, 1.0, NAN]), min_size=4, max_size=4),
        min_size=1,
        max_size=8,
    )
)
@pytest.mark.slow
def test_counts_and_signed_sensitivity_match_plain_loops(rows: list[list[float]]) -> None:
    towards, away = discordant_counts(np.array(rows))
    signed = item_signed_sensitivity(np.array(rows))
    for k in range(1, 4):
        assert towards[k - 1] == sum(1 for r in rows if r[0] == 0.0 and r[k] == 1.0)
        assert away[k - 1] == sum(1 for r in rows if r[0] == 1.0 and r[k] == 0.0)
    for r, s in zip(rows, signed, strict=True):
        diffs = [r[k] - r[0] for k in range(1, 4) if not (math.isnan(r[k]) or math.isnan(r[0]))]
        if diffs:
            assert s == pytest.approx(sum(diffs) / len(diffs))
        else:
            assert math.isnan(s)


# --- a cue with several wordings: one test, one Holm member, flips counted once --------------

# Columns P0, P1, P3a, P3b. Each pattern repeated n times.
WORDED = [
    (6, [0.0, 1.0, 0.0, 0.0]),  # P1 flips towards; P3 does not move
    (6, [0.0, 0.0, 1.0, 0.0]),  # P3a flips towards, P3b does not: pooled difference +1/2
    (2, [1.0, 1.0, 0.0, 0.0]),  # both P3 wordings flip away: pooled difference -1
]


def _worded() -> np.ndarray:
    return np.array([row for n, row in WORDED for _ in range(n)])


def test_pooled_permutation_p_by_hand() -> None:
    y = _worded()
    # Only the 8 items of the last two patterns move under P3; each has m = 2 decided wordings
    # and j = 1 one among its 3 labels. P0's label is the one with probability 1/3: d = -1,
    # else d = +1/2. In halves: X = -2 w.p. 1/3, +1 w.p. 2/3, and T = 8 - 3K with
    # K ~ Binomial(8, 1/3). Observed: 6 * 1 + 2 * (-2) = 2. |T| >= 2 fails only at K = 3
    # (T = -1): p = 1 - C(8,3) 2^5 / 3^8 = 1 - 1792/6561 = 4769/6561.
    assert pooled_permutation_p(y[:, 0], y[:, 2:]) == pytest.approx(4769 / 6561, rel=1e-12)
    # Without the two "away" items: t = 6, T = 6 - 3K, K ~ Binomial(6, 1/3); |T| >= 6 at
    # K = 0 or K >= 4: (64 + 15*4 + 6*2 + 1) / 729 = 137/729.
    assert pooled_permutation_p(y[:12, 0], y[:12, 2:]) == pytest.approx(137 / 729, rel=1e-12)
    # No item with P0 and a wording: undefined.
    assert math.isnan(pooled_permutation_p(np.array([NAN, 1.0]), np.array([[1.0], [NAN]])))


def _brute_force_p(ref: list[float], words: list[list[float]]) -> Fraction:
    """Enumerate every choice of which decided label of each item is P0's."""
    items = []
    for r, ws in zip(ref, words, strict=True):
        decided = [w for w in ws if not math.isnan(w)]
        if not math.isnan(r) and decided:
            items.append([r, *decided])

    def t(labels: tuple[list[float], ...]) -> Fraction:
        return sum(
            (Fraction(sum(map(int, x[1:])), len(x) - 1) - int(x[0]) for x in labels), Fraction(0)
        )

    observed = abs(t(tuple(items)))
    hits = total = 0
    for choice in itertools.product(*(range(len(x)) for x in items)):
        relabelled = tuple(
            [x[k], *(x[:k] + x[k + 1 :])] for x, k in zip(items, choice, strict=True)
        )
        total += 1
        hits += abs(t(relabelled)) >= observed
    return Fraction(hits, total)


@settings(max_examples=60, deadline=None, database=None)
@given(
    st.lists(
        st.lists(st.sampled_from([0.0, 1.0, NAN]), min_size=4, max_size=4),
        min_size=1,
        max_size=6,
    )
)
def test_pooled_permutation_p_matches_enumeration(rows: list[list[float]]) -> None:
    # Three wordings per item, so items have 1, 2 or 3 decided wordings (lcm 6).
    ref = [r[0] for r in rows]
    words = [r[1:] for r in rows]
    got = pooled_permutation_p(np.array(ref), np.array(words))
    if not any(not math.isnan(r[0]) and any(not math.isnan(w) for w in r[1:]) for r in rows):
        assert math.isnan(got)
    else:
        assert got == pytest.approx(float(_brute_force_p(ref, words)), rel=1e-9)


@settings(max_examples=100, deadline=None, database=None)
@given(st.lists(st.tuples(*[st.sampled_from([0.0, 1.0, NAN])] * 2), min_size=1, max_size=30))
def test_pooled_permutation_p_with_one_wording_is_mcnemar(rows: list[tuple[float, float]]) -> None:
    y = np.array(rows)
    got = pooled_permutation_p(y[:, 0], y[:, 1:])
    if not (~np.isnan(y).any(axis=1)).any():
        assert math.isnan(got)
        return
    towards, away = discordant_counts(y)
    assert got == pytest.approx(mcnemar_exact(towards, away)[0], rel=1e-9)


def test_significance_one_holm_member_per_cue() -> None:
    out = significance(_worded(), ["P0", "P1", "P3a", "P3b"])
    # Raw p: P1 6 towards, 0 away -> 2 / 2^6 = 1/32. P3 pooled: 4769/6561 (see above).
    # P3a: 6 towards, 2 away -> 2 * (1 + 8 + 28) / 256 = 74/256; P3b: 0 towards, 2 away -> 1/2.
    assert out["mcnemar_p_P1"] == pytest.approx(1 / 32, rel=1e-12)
    assert out["mcnemar_p_P3"] == pytest.approx(4769 / 6561, rel=1e-12)
    assert out["mcnemar_p_P3a"] == pytest.approx(74 / 256, rel=1e-12)
    assert out["mcnemar_p_P3b"] == pytest.approx(0.5, rel=1e-12)
    # Holm over the cues P1, P3 (m = 2): P1 1/32 * 2 = 1/16; P3 4769/6561 * 1. The wordings are
    # not members (with them, m = 3 and P1 would get 3/32).
    assert out["mcnemar_p_holm_P1"] == pytest.approx(1 / 16, rel=1e-12)
    assert out["mcnemar_p_holm_P3"] == pytest.approx(4769 / 6561, rel=1e-12)
    assert "mcnemar_p_holm_P3a" not in out and "mcnemar_p_holm_P3b" not in out
    # Flips: P3a 6 towards / 2 away, P3b 0 / 2; the cue moves 6 items towards and 2 away (the
    # 2 items both wordings move count once). Totals over the cues P1 and P3: 12 and 2.
    assert (out["flips_towards_P3a"], out["flips_away_P3a"]) == (6.0, 2.0)
    assert (out["flips_towards_P3b"], out["flips_away_P3b"]) == (0.0, 2.0)
    assert (out["flips_towards_P3"], out["flips_away_P3"]) == (6.0, 2.0)
    assert (out["flips_towards"], out["flips_away"]) == (12.0, 2.0)
    assert list(out) == significance_names(["P0", "P1", "P3a", "P3b"])


def test_adding_a_wording_leaves_other_cues_adjusted_p() -> None:
    # P3 with one wording (the P3a column): Holm over P1 1/32 and P3 74/256 -> P1 1/16, the
    # same as with two wordings above.
    one = significance(_worded()[:, :3], ["P0", "P1", "P3"])
    assert one["mcnemar_p_holm_P1"] == pytest.approx(1 / 16, rel=1e-12)
    two = significance(_worded(), ["P0", "P1", "P3a", "P3b"])
    assert two["mcnemar_p_holm_P1"] == one["mcnemar_p_holm_P1"]
