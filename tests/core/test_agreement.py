"""Agreement statistics and the stratified sample, against hand-worked values and enumeration."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pandas as pd
import pytest

from syps.core.agreement import (
    agreement_report,
    cohen_kappa,
    confusion,
    kappa_ci,
    kappa_replicates,
    stratified_sample,
    stratify_quotas,
)

NAN = math.nan


def _pairs(n11: int, n10: int, n01: int, n00: int) -> tuple[np.ndarray, np.ndarray]:
    """Two label arrays with the given 2x2 counts (first index: a, second: b)."""
    a = np.array([1] * n11 + [1] * n10 + [0] * n01 + [0] * n00, dtype=float)
    b = np.array([1] * n11 + [0] * n10 + [1] * n01 + [0] * n00, dtype=float)
    return a, b


# --- cohen_kappa ----------------------------------------------------------------------------


def test_kappa_hand_worked_2x2() -> None:
    # a=20 (both 1), b=5 (a 1, b 0), c=10 (a 0, b 1), d=15 (both 0); n = 50.
    # po = (20 + 15) / 50 = 0.7
    # a says 1 on 25/50 = 0.5, b says 1 on 30/50 = 0.6
    # pe = 0.5 * 0.6 + 0.5 * 0.4 = 0.5
    # kappa = (0.7 - 0.5) / (1 - 0.5) = 0.4
    assert cohen_kappa(*_pairs(20, 5, 10, 15)) == pytest.approx(0.4)


def test_kappa_perfect_agreement_is_one() -> None:
    # po = 1; pe = 0.4^2 + 0.6^2 = 0.52; (1 - 0.52) / (1 - 0.52) = 1.
    a = np.array([1, 0, 1, 0, 0], dtype=float)
    assert cohen_kappa(a, a.copy()) == pytest.approx(1.0)


def test_kappa_chance_level_is_zero() -> None:
    # po = 2/4 = 0.5; both say 1 half the time: pe = 0.25 + 0.25 = 0.5; kappa = 0.
    assert cohen_kappa(np.array([1, 1, 0, 0.0]), np.array([1, 0, 1, 0.0])) == pytest.approx(0.0)
    # b constant, a not: po = 0.5, pe = 0.5 * 1 + 0.5 * 0 = 0.5; kappa = 0, defined.
    assert cohen_kappa(np.array([1, 1, 0, 0.0]), np.ones(4)) == pytest.approx(0.0)


def test_kappa_perfect_disagreement_is_minus_one() -> None:
    # po = 0; pe = 0.5 * 0.5 + 0.5 * 0.5 = 0.5; kappa = (0 - 0.5) / 0.5 = -1.
    assert cohen_kappa(np.array([1, 0.0]), np.array([0, 1.0])) == pytest.approx(-1.0)


@pytest.mark.parametrize(
    ("a", "b"),
    [([1, 1, 1], [1, 1, 1]), ([0, 0], [0, 0]), ([], [])],
    ids=["all-one", "all-zero", "empty"],
)
def test_kappa_undefined_is_nan(a: list[int], b: list[int]) -> None:
    # Both raters constant on the same value: pe = 1, kappa = 0/0.
    assert math.isnan(cohen_kappa(np.array(a, dtype=float), np.array(b, dtype=float)))


@pytest.mark.parametrize(
    ("a", "b"),
    [([1, 2], [1, 0]), ([1, NAN], [1, 0]), ([1, 0, 1], [1, 0])],
    ids=["not-binary", "unclear", "lengths"],
)
def test_kappa_rejects_bad_input(a: list[float], b: list[float]) -> None:
    with pytest.raises(ValueError):
        cohen_kappa(np.array(a), np.array(b))


def test_kappa_matches_scikit_learn() -> None:
    # scikit-learn is a dev dependency (pyproject.toml), so this comparison always runs.
    import sklearn.metrics as sklearn_metrics

    rng = np.random.default_rng(3)
    for _ in range(20):
        a = rng.integers(0, 2, 37).astype(float)
        b = np.where(rng.random(37) < 0.7, a, 1 - a)
        assert cohen_kappa(a, b) == pytest.approx(sklearn_metrics.cohen_kappa_score(a, b))


# --- bootstrap ------------------------------------------------------------------------------


def test_replicates_match_exhaustive_enumeration() -> None:
    # Three pairs: every one of the 3^3 = 27 resamples is equally likely. Enumerated by hand
    # over index tuples, kappa is undefined whenever a resample holds one class for both raters.
    a, b = np.array([1, 1, 0.0]), np.array([1, 0, 0.0])
    exact = np.array(
        [cohen_kappa(a[list(t)], b[list(t)]) for t in itertools.product(range(3), repeat=3)]
    )
    reps = kappa_replicates(a, b, 60_000, 0)
    assert np.isnan(reps).mean() == pytest.approx(np.isnan(exact).mean(), abs=0.01)
    values, counts = np.unique(exact[~np.isnan(exact)], return_counts=True)
    defined = reps[~np.isnan(reps)]
    for v, c in zip(values, counts, strict=True):
        share = np.isclose(defined, v).mean()
        assert share == pytest.approx(c / counts.sum(), abs=0.01), v


def test_ci_brackets_the_estimate_and_is_seeded() -> None:
    a, b = _pairs(20, 5, 10, 15)
    lo, hi = kappa_ci(a, b, 2000, 0.95, 1)
    assert -1.0 <= lo < 0.4 < hi <= 1.0
    assert kappa_ci(a, b, 2000, 0.95, 1) == (lo, hi)
    assert kappa_ci(a, b, 2000, 0.95, 2) != (lo, hi)


def test_ci_narrows_with_n_and_widens_with_level() -> None:
    # Ten copies of every pair keep po, pe and so kappa = 0.4, but shrink the sampling spread.
    a, b = _pairs(20, 5, 10, 15)
    lo1, hi1 = kappa_ci(a, b, 2000, 0.95, 1)
    lo10, hi10 = kappa_ci(np.tile(a, 10), np.tile(b, 10), 2000, 0.95, 1)
    assert cohen_kappa(np.tile(a, 10), np.tile(b, 10)) == pytest.approx(0.4)
    assert lo10 < 0.4 < hi10
    assert hi10 - lo10 < (hi1 - lo1) / 2
    lo80, hi80 = kappa_ci(a, b, 2000, 0.80, 1)
    assert hi80 - lo80 < hi1 - lo1


def test_ci_of_perfect_agreement_is_one_one() -> None:
    # Every resample agrees perfectly: kappa is 1, or undefined (dropped) if it holds one class.
    a = np.array([1, 1, 0, 0.0])
    assert kappa_ci(a, a.copy(), 500, 0.95, 0) == (1.0, 1.0)


def test_ci_with_every_replicate_undefined_is_nan() -> None:
    lo, hi = kappa_ci(np.ones(5), np.ones(5), 100, 0.95, 0)
    assert math.isnan(lo) and math.isnan(hi)


# --- confusion and the report ---------------------------------------------------------------


def test_confusion_counts_with_unclear() -> None:
    human = np.array([1, 1, 0, NAN, 0, NAN, 1])
    machine = np.array([1, 0, NAN, NAN, 0, 1, 1])
    table = confusion(human, machine)
    assert table.index.name == "human"
    assert table.columns.name == "machine"
    assert list(table.index) == ["1", "0", "UNCLEAR"]
    assert list(table.columns) == ["1", "0", "UNCLEAR"]
    # (1,1) twice; (1,0); (0,U); (U,U); (0,0); (U,1).
    assert table.to_numpy().tolist() == [[2, 1, 0], [0, 1, 1], [1, 0, 1]]


def test_report_hand_values() -> None:
    human = np.array([1, 1, 0, 0, NAN, 1])
    machine = np.array([1, 0, 0, NAN, 1, 1])
    r = agreement_report(human, machine, 500, 0.95, seed=7)
    # Both decided: rows 0, 1, 2, 5 -> pairs (1,1), (1,0), (0,0), (1,1).
    # po = 3/4; human 1 on 3/4, machine 1 on 2/4: pe = 3/4*2/4 + 1/4*2/4 = 1/2.
    # kappa = (3/4 - 1/2) / (1/2) = 1/2.
    assert r["n"] == 6
    assert r["n_both_decided"] == 4
    assert r["agreement"] == pytest.approx(0.75)
    assert r["kappa"] == pytest.approx(0.5)
    assert r["kappa_ci_low"] <= 0.5 <= r["kappa_ci_high"]
    # UNCLEAR over all six rows: machine row 3, human row 4.
    assert r["machine_unclear_rate"] == pytest.approx(1 / 6)
    assert r["human_unclear_rate"] == pytest.approx(1 / 6)
    assert agreement_report(human, machine, 500, 0.95, seed=7) == r


def test_report_with_nothing_both_decided() -> None:
    r = agreement_report(np.array([1, NAN]), np.array([NAN, 0]), 100, 0.95, seed=0)
    assert (r["n"], r["n_both_decided"]) == (2, 0)
    for key in ("agreement", "kappa", "kappa_ci_low", "kappa_ci_high"):
        assert math.isnan(r[key]), key
    assert r["machine_unclear_rate"] == 0.5
    assert r["human_unclear_rate"] == 0.5


# --- stratified sample ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("sizes", "n", "expected"),
    [
        # 9 over 3: 3 each, but the third holds 1; the 2 left go one each to the others.
        ([10, 10, 1], 9, [4, 4, 1]),
        # 20 over 3: 6 each, the first holds 2; 18 left over two: 9 each.
        ([2, 10, 10], 20, [2, 9, 9]),
        ([3, 3], 6, [3, 3]),
        ([4, 5], 0, [0, 0]),
        # 7 over 2: 3 each; the second holds 3 exactly and cannot take the extra one.
        ([9, 3], 7, [4, 3]),
    ],
)
def test_quotas_hand_values(sizes: list[int], n: int, expected: list[int]) -> None:
    for seed in range(5):
        quota = stratify_quotas(np.array(sizes), n, np.random.default_rng(seed))
        assert quota.tolist() == expected


def test_quotas_spread_the_remainder_at_random() -> None:
    # 7 over three strata of 5: 2 each and one extra; the seed picks which stratum gets it.
    got = {
        tuple(stratify_quotas(np.array([5, 5, 5]), 7, np.random.default_rng(s))) for s in range(30)
    }
    assert got == {(3, 2, 2), (2, 3, 2), (2, 2, 3)}


def test_quotas_give_each_extra_to_a_different_stratum() -> None:
    # 60 over 16 strata of 10: 3 each, and the 12 left over one each to 12 distinct strata.
    for seed in range(10):
        quota = stratify_quotas(np.full(16, 10), 60, np.random.default_rng(seed))
        assert sorted(quota.tolist()) == [3] * 4 + [4] * 12


def test_quotas_are_as_even_as_the_sizes_allow() -> None:
    # Random cases: quotas sum to n, fit the strata, and no stratum with rows to spare gets
    # fewer than any other stratum's quota minus one.
    rng = np.random.default_rng(11)
    for _ in range(300):
        sizes = rng.integers(0, 12, size=rng.integers(1, 9))
        n = int(rng.integers(0, sizes.sum() + 1))
        quota = stratify_quotas(sizes, n, rng)
        assert quota.sum() == n
        assert (quota >= 0).all() and (quota <= sizes).all()
        spare = quota < sizes
        if spare.any():
            assert quota.max() <= quota[spare].min() + 1


def test_quotas_refuse_more_than_there_is() -> None:
    with pytest.raises(ValueError, match="cannot draw 4 rows from 3"):
        stratify_quotas(np.array([1, 2]), 4, np.random.default_rng(0))


def _table() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "s": ["a"] * 10 + ["b"] * 10 + ["c"],
            "t": ["x", "y"] * 10 + ["x"],
            "row": range(21),
        }
    )


def test_sample_quotas_per_stratum() -> None:
    sample = stratified_sample(_table(), 9, ["s"], seed=4)
    assert sample["s"].value_counts().to_dict() == {"a": 4, "b": 4, "c": 1}
    assert sample["row"].is_unique
    assert list(sample.columns) == ["s", "t", "row"]
    assert list(sample.index) == list(range(9))


def test_sample_over_two_columns() -> None:
    # Strata (a,x) 5, (a,y) 5, (b,x) 5, (b,y) 5, (c,x) 1; 11 over 5: 2 each, (c,x) holds 1,
    # 10 left over four: 2 each plus 2 extras.
    sample = stratified_sample(_table(), 11, ["s", "t"], seed=0)
    counts = sample.groupby(["s", "t"]).size()
    assert counts[("c", "x")] == 1
    assert sorted(counts.drop(("c", "x")).tolist()) == [2, 2, 3, 3]


def test_sample_is_reproducible_and_seeded() -> None:
    first = stratified_sample(_table(), 9, ["s"], seed=4)
    pd.testing.assert_frame_equal(first, stratified_sample(_table(), 9, ["s"], seed=4))
    assert first["row"].tolist() != stratified_sample(_table(), 9, ["s"], seed=5)["row"].tolist()


def test_sample_rows_are_shuffled_across_strata() -> None:
    # A sample in stratum blocks (aaaabbbbc in some block order) is 6 of the 630 orders of
    # 4 a's, 4 b's and a c; a shuffled sample almost never comes out that way.
    def in_blocks(strata: list[str]) -> bool:
        return sum(x != y for x, y in itertools.pairwise(strata)) == 2

    blocks = [
        in_blocks(stratified_sample(_table(), 9, ["s"], seed=s)["s"].tolist()) for s in range(20)
    ]
    assert sum(blocks) <= 2


def test_sample_draws_every_row_of_a_stratum_sometime() -> None:
    # Within a stratum the rows are drawn at random, not the first ``quota`` of them.
    seen = set()
    for seed in range(40):
        seen |= set(stratified_sample(_table(), 9, ["s"], seed=seed)["row"])
    assert seen == set(range(21))
