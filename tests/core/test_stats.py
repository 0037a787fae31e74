"""The shared statistics (``syps.core.stats``) against hand-derived values and the textbook
definitions: the seeded resample and its counts, the percentile CI, the NaN-aware means, the flip,
McNemar's exact test and Holm's adjustment."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import binomtest

from syps.core.stats import (
    bootstrap_counts,
    flips,
    group_nanmean,
    holm,
    mcnemar_exact,
    nanmean,
    percentile_ci,
    product_limit,
    resample_indices,
    row_nanmean,
    weighted_means,
)

NAN = math.nan

# --- resample_indices, bootstrap_counts -----------------------------------------------------


def test_resample_indices_are_the_seeds_first_integers_draw() -> None:
    # What numpy's default_rng(0).integers(0, 5, size=(3, 5)) gives (numpy 2.4.6, PCG64): every
    # bootstrap in syps draws exactly this for 5 items, 3 resamples and seed 0.
    want = np.array([[4, 3, 2, 1, 1], [0, 0, 0, 0, 4], [3, 4, 2, 3, 4]])
    np.testing.assert_array_equal(resample_indices(5, 3, 0), want)
    np.testing.assert_array_equal(
        resample_indices(5, 3, 0), np.random.default_rng(0).integers(0, 5, size=(3, 5))
    )
    # Another seed: default_rng(42).integers(0, 4, size=(2, 4)) is [[0, 3, 2, 1], [1, 3, 0, 2]].
    np.testing.assert_array_equal(resample_indices(4, 2, 42), [[0, 3, 2, 1], [1, 3, 0, 2]])


def test_bootstrap_counts_count_the_drawn_indices() -> None:
    # The draws above, counted per item 0..4: [4, 3, 2, 1, 1] holds item 1 twice and items 2, 3,
    # 4 once; [0, 0, 0, 0, 4] item 0 four times and item 4 once; [3, 4, 2, 3, 4] item 2 once and
    # items 3 and 4 twice.
    want = [[0, 2, 1, 1, 1], [4, 0, 0, 0, 1], [0, 0, 1, 2, 2]]
    counts = bootstrap_counts(5, 3, 0)
    assert counts.dtype == np.float64
    np.testing.assert_array_equal(counts, np.array(want, dtype=float))


def test_bootstrap_counts_rows_sum_to_n_items() -> None:
    counts = bootstrap_counts(7, 300, 0)
    assert counts.shape == (300, 7)
    np.testing.assert_array_equal(counts.sum(axis=1), np.full(300, 7.0))
    assert (counts >= 0).all()
    np.testing.assert_array_equal(counts, np.round(counts))


def test_no_items_draw_an_empty_matrix() -> None:
    assert resample_indices(0, 4, 1).shape == (4, 0)
    assert bootstrap_counts(0, 4, 1).shape == (4, 0)


# --- percentile_ci --------------------------------------------------------------------------


def test_percentile_ci_whole_and_nan_columns() -> None:
    # Column 0: 0, 1, 2, 3 -> at ci 0.5 the 25th and 75th percentiles, 0.75 and 2.25 (linear:
    # position 0.25 * 3 = 0.75 and 0.75 * 3 = 2.25). Column 1: NaN, 4, 8, NaN -> over 4 and 8:
    # 4 + 0.25 * 4 = 5 and 4 + 0.75 * 4 = 7. Column 2: never defined -> NaN.
    boot = np.array([[0, NAN, NAN], [1, 4, NAN], [2, 8, NAN], [3, NAN, NAN]], dtype=float)
    got = percentile_ci(boot, 0.5)
    np.testing.assert_array_equal(got, np.array([[0.75, 5.0, NAN], [2.25, 7.0, NAN]]))


def test_percentile_ci_of_one_statistic() -> None:
    # 1, 2, 3, 4, 5 at ci 0.9: positions 0.05 * 4 = 0.2 and 0.95 * 4 = 3.8, so 1.2 and 4.8.
    lo, hi = percentile_ci(np.array([5.0, 1.0, 4.0, 2.0, 3.0]), 0.9)
    assert (lo, hi) == (pytest.approx(1.2), pytest.approx(4.8))
    # A NaN resample is left out: 0, 10 at ci 0.5 -> 2.5 and 7.5.
    np.testing.assert_array_equal(percentile_ci(np.array([NAN, 0.0, 10.0]), 0.5), [2.5, 7.5])


def test_percentile_ci_with_nothing_defined_is_nan() -> None:
    np.testing.assert_array_equal(percentile_ci(np.full(3, NAN), 0.95), [NAN, NAN])
    np.testing.assert_array_equal(percentile_ci(np.zeros((0, 2)), 0.95), np.full((2, 2), NAN))


def test_percentile_ci_keeps_trailing_shape() -> None:
    # Resamples 0..4 of a (2, 3) statistic, entry (i, j) offset by 10 * (3 i + j): at ci 0.5
    # every entry's bounds are its offset + 1 and + 3 (positions 0.25 * 4 and 0.75 * 4).
    offset = 10.0 * np.arange(6).reshape(2, 3)
    boot = np.arange(5.0)[:, None, None] + offset
    got = percentile_ci(boot, 0.5)
    assert got.shape == (2, 2, 3)
    np.testing.assert_array_equal(got, np.stack([offset + 1, offset + 3]))


def test_percentile_ci_vectorised_columns_equal_numpy_column_by_column() -> None:
    # The fast path (one quantile call over the fully defined columns) must give the bits of
    # np.quantile on each column alone, which the per-column path and every caller used.
    rng = np.random.default_rng(5)
    boot = rng.random((997, 6))
    boot[rng.random(997) < 0.1, 4] = NAN
    got = percentile_ci(boot, 0.95)
    for j in range(6):
        col = boot[:, j][~np.isnan(boot[:, j])]
        want = np.quantile(col, [0.025000000000000022, 0.975])  # (1 - 0.95) / 2 in float64
        np.testing.assert_array_equal(got[:, j], want)


# --- NaN-aware means ------------------------------------------------------------------------


def test_weighted_means_hand_example() -> None:
    # Items x: column 0 = 1, 0, NaN; column 1 all NaN. Resample counts (2, 1, 0): column 0 is
    # (2 * 1 + 1 * 0) / (2 + 1) = 2/3; counts (0, 0, 3) draw only the NaN item: NaN. Column 1: NaN.
    x = np.array([[1.0, NAN], [0.0, NAN], [NAN, NAN]])
    got = weighted_means(x, np.array([[2.0, 1.0, 0.0], [0.0, 0.0, 3.0]]))
    np.testing.assert_array_equal(got, [[2 / 3, NAN], [NAN, NAN]])


def test_row_nanmean_hand_example() -> None:
    # Rows: (1, NaN, 0) -> 1/2; (NaN, NaN, NaN) -> NaN; (1, 1, 0) -> 2/3.
    x = np.array([[1.0, NAN, 0.0], [NAN, NAN, NAN], [1.0, 1.0, 0.0]])
    np.testing.assert_array_equal(row_nanmean(x), [0.5, NAN, 2 / 3])


def test_group_nanmean_hand_example() -> None:
    # Group 0: 1, 0 -> 1/2; group 1: NaN only -> NaN; group 2: 4 (the NaN left out); group 3
    # has no entry -> NaN.
    codes = np.array([0, 0, 1, 2, 2])
    x = np.array([1.0, 0.0, NAN, 4.0, NAN])
    np.testing.assert_array_equal(group_nanmean(codes, x, 4), [0.5, NAN, 4.0, NAN])


def test_nanmean_hand_example() -> None:
    assert nanmean(np.array([1.0, NAN, 2.0])) == 1.5
    assert math.isnan(nanmean(np.array([NAN, NAN])))
    assert math.isnan(nanmean(np.array([])))


# --- flips ----------------------------------------------------------------------------------


def test_flips_hand_example() -> None:
    # Pairs (before, after): (0, 1) towards; (1, 0) away; (1, 1) and (0, 0) no change; a NaN
    # on either side is no flip.
    before = np.array([0.0, 1.0, 1.0, 0.0, NAN, 0.0])
    after = np.array([1.0, 0.0, 1.0, 0.0, 1.0, NAN])
    towards, away = flips(before, after)
    np.testing.assert_array_equal(towards, [True, False, False, False, False, False])
    np.testing.assert_array_equal(away, [False, True, False, False, False, False])


def test_flips_broadcast_a_reference_column() -> None:
    # One reference column against two variants: item 0 (ref 0) flips towards under the first
    # variant only; item 1 (ref 1) flips away under both.
    ref = np.array([[0.0], [1.0]])
    variants = np.array([[1.0, 0.0], [0.0, 0.0]])
    towards, away = flips(ref, variants)
    np.testing.assert_array_equal(towards, [[True, False], [False, False]])
    np.testing.assert_array_equal(away, [[False, False], [True, True]])


# --- mcnemar_exact --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("b", "c", "expected"),
    [
        # n = 10, min = 1: 2 * (C(10,0) + C(10,1)) / 2^10 = 2 * 11 / 1024 = 22/1024.
        (1, 9, 22 / 1024),
        # Two-sided, so the direction does not matter.
        (9, 1, 22 / 1024),
        # n = 10, min = 2: 2 * (1 + 10 + 45) / 1024 = 112/1024.
        (2, 8, 112 / 1024),
        # n = 5, min = 0: 2 * 1/32 = 1/16.
        (0, 5, 1 / 16),
        # n = 1: 2 * 1/2 = 1.
        (1, 0, 1.0),
        # A tie: the doubled tail 2 * (1 + 6 + 15 + 20) / 64 = 84/64 exceeds 1, so p = 1.
        (3, 3, 1.0),
        # No discordant pair: no evidence of a shift.
        (0, 0, 1.0),
    ],
)
def test_mcnemar_exact_hand_values(b: int, c: int, expected: float) -> None:
    got = mcnemar_exact(np.array([b]), np.array([c]))
    assert got.shape == (1,)
    assert got[0] == pytest.approx(expected, rel=1e-12)


def test_mcnemar_exact_is_elementwise_and_nan_aware() -> None:
    got = mcnemar_exact(np.array([1.0, NAN, 0.0]), np.array([9.0, 3.0, 0.0]))
    assert got[0] == pytest.approx(22 / 1024, rel=1e-12)
    assert math.isnan(got[1])  # no paired items: the test is undefined
    assert got[2] == 1.0


@pytest.mark.parametrize(("b", "c"), [(-1, 3), (1.5, 2)])
def test_mcnemar_exact_rejects_non_counts(b: float, c: float) -> None:
    with pytest.raises(ValueError, match="non-negative integers"):
        mcnemar_exact(np.array([b]), np.array([c]))


def test_mcnemar_exact_matches_binomial_tail_sum() -> None:
    # Brute force: with n = b + c discordant pairs, p = min(1, 2 * P(X <= min(b, c))) for
    # X ~ Binomial(n, 1/2), the tail summed exactly with integer binomial coefficients.
    bs, cs = np.meshgrid(np.arange(16), np.arange(16))
    got = mcnemar_exact(bs.ravel(), cs.ravel())
    for b, c, p in zip(bs.ravel(), cs.ravel(), got, strict=True):
        n, k = int(b + c), int(min(b, c))
        tail = sum(math.comb(n, j) for j in range(k + 1)) / 2**n
        assert p == pytest.approx(min(1.0, 2 * tail), rel=1e-12), (b, c)


def test_mcnemar_exact_is_binomtest_bit_for_bit() -> None:
    # The vectorised tails must give exactly scipy's binomtest p-values (the committed metrics
    # were written with binomtest per pair): every (b, c) up to 120 pairs, and large counts.
    bs, cs = np.meshgrid(np.arange(61), np.arange(61))
    big = np.array([[400, 433], [1000, 1100], [2500, 2400], [7000, 7000], [0, 5000]])
    b = np.concatenate([bs.ravel(), big[:, 0]])
    c = np.concatenate([cs.ravel(), big[:, 1]])
    got = mcnemar_exact(b, c)
    pairs = zip(b.tolist(), c.tolist(), strict=True)
    want = [binomtest(min(x, y), x + y, 0.5).pvalue if x + y else 1.0 for x, y in pairs]
    assert got.tolist() == want


# --- holm -----------------------------------------------------------------------------------


def test_holm_hand_example() -> None:
    # m = 3. Sorted: 0.01 (P1), 0.03 (P3), 0.04 (P2), multiplied by 3, 2, 1:
    # 0.03, 0.06, 0.04. The running maximum lifts the last to 0.06 so that a larger raw
    # p-value never gets a smaller adjusted one. Back in input order: [0.03, 0.06, 0.06].
    np.testing.assert_allclose(holm(np.array([0.01, 0.04, 0.03])), [0.03, 0.06, 0.06])


def test_holm_leaves_nan_out_of_the_family() -> None:
    # The NaN is not a hypothesis: m stays 3, so the values are those of the example above.
    got = holm(np.array([0.01, NAN, 0.04, 0.03]))
    np.testing.assert_allclose(got[[0, 2, 3]], [0.03, 0.06, 0.06])
    assert math.isnan(got[1])
    assert np.isnan(holm(np.array([NAN, NAN]))).all()
    assert holm(np.array([])).shape == (0,)


def test_holm_caps_at_one_and_keeps_a_single_value() -> None:
    # Sorted 0.6, 0.7 times 2, 1: 1.2 -> 1, then max(1.2, 0.7) -> 1.
    np.testing.assert_array_equal(holm(np.array([0.7, 0.6])), [1.0, 1.0])
    # m = 1: no correction.
    np.testing.assert_array_equal(holm(np.array([0.2])), [0.2])


def test_holm_rejects_non_vector() -> None:
    with pytest.raises(ValueError, match="1-D"):
        holm(np.zeros((2, 2)))


@settings(max_examples=200, deadline=None, database=None)
@given(st.lists(st.one_of(st.floats(0.0, 1.0), st.just(NAN)), max_size=9))
@pytest.mark.slow
def test_holm_matches_textbook_definition(raw: list[float]) -> None:
    # Textbook Holm with plain loops: for the j-th smallest of the m known p-values (from 1),
    # adjusted = min(1, max over i <= j of (m - i + 1) * p_(i)).
    known = sorted((p, i) for i, p in enumerate(raw) if not math.isnan(p))
    m = len(known)
    expected = [NAN] * len(raw)
    for j in range(m):
        expected[known[j][1]] = min(1.0, max((m - i) * known[i][0] for i in range(j + 1)))
    got = holm(np.array(raw, dtype=float))
    for e, g, p in zip(expected, got, raw, strict=True):
        if math.isnan(p):
            assert math.isnan(g)
        else:
            assert g == pytest.approx(e, abs=1e-15)
            assert p <= g <= 1.0


# --- survival -------------------------------------------------------------------------------


def test_product_limit_hand_example() -> None:
    # Durations 3, 1, 1, 4 with events 1, 0, 1, 0. Turn 1: 4 at risk, one event, one censored
    # (still at risk there): S = 1 - 1/4 = 3/4. Turn 3: 2 at risk, one event: S = 3/4 * 1/2 =
    # 3/8. Turn 4: 1 at risk, censored: S stays 3/8. Greenwood sums: 1/(4*3) = 1/12, then
    # 1/12 + 1/(2*1) = 7/12; variances (3/4)^2/12 = 3/64 and (3/8)^2 * 7/12 = 21/256.
    km = product_limit([3, 1, 1, 4], [1, 0, 1, 0])
    assert km.time.tolist() == [1, 3, 4]
    assert km.at_risk.tolist() == [4, 2, 1]
    assert km.events.tolist() == [1, 1, 0] and km.censored.tolist() == [1, 0, 1]
    assert km.survival.tolist() == pytest.approx([0.75, 0.375, 0.375])
    assert km.variance.tolist() == pytest.approx([3 / 64, 21 / 256, 21 / 256])
    # log(-log) interval at turn 1, by hand: log(-log 0.75) = -1.24590, v = (1/12) /
    # (log 0.75)^2 = 1.00691, z sqrt(v) = 1.96673; exp(-exp(-1.24590 +- 1.96673)) = 0.12795,
    # 0.96055. At turn 3: v = (7/12) / (log 0.375)^2, giving 0.01097 and 0.80800.
    assert km.low.tolist() == pytest.approx([0.12795, 0.01097, 0.01097], abs=1e-5)
    assert km.high.tolist() == pytest.approx([0.96055, 0.80800, 0.80800], abs=1e-5)


def test_product_limit_all_events_reaches_zero_and_refuses_bad_input() -> None:
    # Two subjects, events at 1 and 2: S = 1/2, then 0; at 0 the interval is undefined.
    km = product_limit([2, 1], [1, 1])
    assert km.survival.tolist() == [0.5, 0.0]
    assert math.isnan(km.low[1]) and math.isnan(km.high[1])
    with pytest.raises(ValueError, match="one length"):
        product_limit([1, 2], [1])
    with pytest.raises(ValueError, match="missing"):
        product_limit([1, float("nan")], [1, 0])
