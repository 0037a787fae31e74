"""The shared exact tests (``syps.core.stats``): McNemar's exact test and Holm's adjustment,
against hand-derived values and the textbook definitions."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import binomtest

from syps.core.stats import holm, mcnemar_exact

NAN = math.nan

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
