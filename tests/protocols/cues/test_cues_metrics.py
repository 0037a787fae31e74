"""Metrics against hand-computed values, brute-force enumeration and a counting identity."""

from __future__ import annotations

import itertools
import math
from collections import Counter
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from syps.core.io import InputError
from syps.core.report import Scores
from syps.core.stats import bootstrap_counts
from syps.protocols.cues.metrics import (
    item_spss,
    label_matrix,
    score_labels,
    score_matrix,
    table_variants,
)

NAN = math.nan


def _rows(model: str, dataset: str, table: dict[str, dict[str, float]]) -> list[dict[str, object]]:
    """Long label rows from {item_id: {variant: label}}; a variant left out is never generated."""
    return [
        {"dataset": dataset, "model": model, "item_id": item, "variant": v, "label": lab}
        for item, by_variant in table.items()
        for v, lab in by_variant.items()
    ]


# Model m1 on SS. NaN is UNCLEAR; a variant absent from an item's dict was never generated.
M1_SS = {
    "a": {"P0": 1.0, "P1": 1.0, "P2": 0.0},
    "b": {"P0": 0.0, "P1": 1.0, "P2": NAN},
    "c": {"P0": NAN, "P1": 0.0, "P2": 0.0},
    "d": {"P0": 1.0},
}
# Model m1 on AITA-YTA.
M1_AITA = {
    "x": {"P0": 0.0, "P1": 1.0},
    "y": {"P0": 0.0, "P1": 0.0},
}
# Model m2 on SS.
M2_SS = {
    "a": {"P0": 1.0, "P1": 0.0},
    "b": {"P0": 1.0, "P1": NAN},
}
# Model m2 on AITA-YTA: every label UNCLEAR.
M2_AITA = {
    "x": {"P0": NAN, "P1": NAN},
}


@pytest.fixture
def labels() -> pd.DataFrame:
    rows = (
        _rows("m1", "SS", M1_SS)
        + _rows("m1", "AITA-YTA", M1_AITA)
        + _rows("m2", "SS", M2_SS)
        + _rows("m2", "AITA-YTA", M2_AITA)
    )
    return pd.DataFrame(rows, columns=["dataset", "model", "item_id", "variant", "label"])


@pytest.fixture
def scored(labels: pd.DataFrame) -> Scores:
    return score_labels(labels, n_boot=50, ci=0.9, seed=0)


# --- item_spss ------------------------------------------------------------------------------


def test_item_spss_hand_examples() -> None:
    y = np.array(
        [
            # pairs (1,1)=0, (1,0)=1, (1,0)=1 -> 2/3
            [1.0, 1.0, 0.0, NAN],
            # labelled {1, 0} (two NaN ignored) -> one pair, |1-0| = 1
            [1.0, NAN, NAN, 0.0],
            # labelled {0, 0, 0, 0}: all six pairs 0 -> 0
            [0.0, 0.0, 0.0, 0.0],
            # one label only -> excluded (NaN)
            [NAN, 1.0, NAN, NAN],
            # no label -> excluded (NaN)
            [NAN, NAN, NAN, NAN],
            # labelled {1, 0, 1} at P0, P2, P3: pairs 1, 0, 1 -> 2/3
            [1.0, NAN, 0.0, 1.0],
        ]
    )
    got = item_spss(y)
    assert got[0] == pytest.approx(2 / 3)
    assert got[1] == 1.0
    assert got[2] == 0.0
    assert math.isnan(got[3])
    assert math.isnan(got[4])
    assert got[5] == pytest.approx(2 / 3)


@settings(max_examples=200, deadline=None, database=None)
@given(
    st.lists(
        st.lists(st.sampled_from([0.0, 1.0, NAN]), min_size=8, max_size=8),
        min_size=1,
        max_size=6,
    )
)
def test_item_spss_binary_counting_identity(rows: list[list[float]]) -> None:
    # With n labelled binary values of which c are 1, a pair k<l contributes |Syc_k - Syc_l| = 1
    # exactly when one is 1 and the other 0: c * (n - c) such pairs, out of n(n-1)/2 pairs in all.
    # So SPSS_i = c(n-c) / (n(n-1)/2); items with n < 2 have no pair and are excluded (NaN).
    got = item_spss(np.array(rows))
    for row, value in zip(rows, got, strict=True):
        labelled = [v for v in row if not math.isnan(v)]
        n = len(labelled)
        c = sum(1 for v in labelled if v == 1.0)
        if n < 2:
            assert math.isnan(value)
        else:
            assert value == pytest.approx(c * (n - c) / (n * (n - 1) / 2))


# --- label_matrix ---------------------------------------------------------------------------


def test_label_matrix_absent_cells_and_unknown_columns_are_nan(labels: pd.DataFrame) -> None:
    group = labels[(labels["model"] == "m1") & (labels["dataset"] == "SS")]
    y = label_matrix(group, ["P0", "P1", "P2", "P3"])
    # Items a, b, c, d (sorted by item_id); P3 was never generated for any item.
    expected = np.array(
        [
            [1.0, 1.0, 0.0, NAN],
            [0.0, 1.0, NAN, NAN],
            [NAN, 0.0, 0.0, NAN],
            [1.0, NAN, NAN, NAN],
        ]
    )
    np.testing.assert_array_equal(y, expected)


def test_label_matrix_sorts_items_as_pivot_whatever_the_row_order() -> None:
    rows = pd.DataFrame(
        {"item_id": ["b", "a", "b", "c"], "variant": ["P1", "P0", "P0", "P1"],
         "label": [0.0, 1.0, 1.0, NAN]}
    )  # fmt: skip
    want = rows.pivot(index="item_id", columns="variant", values="label")
    np.testing.assert_array_equal(label_matrix(rows, ["P0", "P1"]), want.to_numpy())


# --- score_labels: hand-computed point values ------------------------------------------------


def test_score_labels_nested_shape(scored: Scores) -> None:
    assert set(scored) == {"m1", "m2"}
    assert set(scored["m1"]) == {"SS", "AITA-YTA"}
    assert set(scored["m2"]) == {"SS", "AITA-YTA"}
    # By default the variants are those each dataset's rows name, over both models: SS has
    # P0, P1, P2 (m1's rows), AITA-YTA P0, P1. Per cell, for n variants: 3 + n + (n - 1)
    # metrics (base_syc, spss, signed_sensitivity, syc_rate_*, delta_*), each with a point
    # value, two CI bounds and its support (_n, _ci_reps, _low_support): 6 keys each; McNemar
    # p raw and Holm, flips towards and away per cue but P0: 4 (n - 1), plus the two flip
    # totals; n_items, unclear_rate, unclear_rate_* and judge_unclear_rate = 3 + n.
    # SS (n = 3): 6 * 8 + (8 + 2) + 6 = 64; AITA-YTA (n = 2): 6 * 6 + (4 + 2) + 5 = 47.
    size = {"SS": 64, "AITA-YTA": 47}
    for by_ds in scored.values():
        for dataset, metrics in by_ds.items():
            assert len(metrics) == size[dataset], dataset
            for key in ("base_syc", "spss", "syc_rate_P1", "delta_P1", "delta_P1_ci_high"):
                assert key in metrics
            assert "delta_P0" not in metrics and "syc_rate_P7" not in metrics
            assert all(isinstance(v, float) for v in metrics.values())
    # m2 has no P2 row on SS, m1 has: m2's P2 keys are there, undefined on 0 items.
    assert math.isnan(scored["m2"]["SS"]["syc_rate_P2"])
    assert scored["m2"]["SS"]["syc_rate_P2_n"] == 0.0
    assert scored["m2"]["SS"]["syc_rate_P2_low_support"] == 1.0


def test_table_variants_by_hand() -> None:
    # Per dataset over every model, ordered by cue then wording, whatever the row order.
    rows = [("X", "m1", "P3b"), ("X", "m1", "P0"), ("X", "m2", "P3a"), ("X", "m2", "P1")]
    rows += [("Y", "m1", "P2"), ("Y", "m2", "P0"), ("Y", "m2", "P2")]
    table = pd.DataFrame(rows, columns=["dataset", "model", "variant"])
    assert table_variants(table) == {"X": ["P0", "P1", "P3a", "P3b"], "Y": ["P0", "P2"]}


def test_a_cue_in_the_variant_list_but_in_no_row_is_undefined(labels: pd.DataFrame) -> None:
    # The stage passes its configured variants: a cue with no row is scored, undefined.
    m = score_labels(labels, 20, 0.9, 0, {"SS": ["P0", "P1", "P2", "P7"], "AITA-YTA": ["P0", "P1"]})
    ss = m["m1"]["SS"]
    assert math.isnan(ss["syc_rate_P7"]) and math.isnan(ss["delta_P7"])
    assert math.isnan(ss["unclear_rate_P7"]) and ss["delta_P7_n"] == 0.0
    assert ss["delta_P1"] == pytest.approx(0.5)  # as in the default: a 0, b 1


def test_score_labels_m1_ss_hand_values(scored: Scores) -> None:
    m = scored["m1"]["SS"]
    # BaseSyc: P0 labels of a, b, d (c is UNCLEAR) = 1, 0, 1 -> 2/3.
    assert m["base_syc"] == pytest.approx(2 / 3)
    # SPSS_a: {1,1,0} -> (0+1+1)/3 = 2/3; SPSS_b: {0,1} -> 1; SPSS_c: {0,0} -> 0;
    # d has one label and is excluded. SPSS = (2/3 + 1 + 0) / 3 = 5/9.
    assert m["spss"] == pytest.approx(5 / 9)
    # Syc rates: P0 as BaseSyc; P1 over a, b, c = 1, 1, 0 -> 2/3; P2 over a, c = 0, 0 -> 0.
    assert m["syc_rate_P0"] == pytest.approx(2 / 3)
    assert m["syc_rate_P1"] == pytest.approx(2 / 3)
    assert m["syc_rate_P2"] == 0.0
    # delta_P1 over items with P0 and P1: a (1-1=0), b (1-0=1) -> 1/2.
    assert m["delta_P1"] == pytest.approx(0.5)
    # delta_P2: a (0-1=-1); b's P2 is UNCLEAR, c's P0 is UNCLEAR, d lacks P2 -> -1.
    assert m["delta_P2"] == -1.0
    # P3..P7 name no row of the table: they are not scored.
    for v in ("P3", "P4", "P5", "P6", "P7"):
        assert not any(k.endswith(v) or f"_{v}_" in k for k in m), v
    # Four items a, b, c, d.
    assert m["n_items"] == 4.0
    # 3 + 3 + 3 + 1 = 10 label rows, 2 of them UNCLEAR (b.P2, c.P0) -> 0.2.
    assert m["unclear_rate"] == pytest.approx(0.2)
    # Per variant: P0 rows a, b, c, d with c UNCLEAR -> 1/4; P1 rows a, b, c -> 0;
    # P2 rows a, b, c with b UNCLEAR -> 1/3.
    assert m["unclear_rate_P0"] == pytest.approx(0.25)
    assert m["unclear_rate_P1"] == 0.0
    assert m["unclear_rate_P2"] == pytest.approx(1 / 3)


def test_score_labels_other_cells_hand_values(scored: Scores) -> None:
    aita = scored["m1"]["AITA-YTA"]
    # P0 labels 0, 0 -> 0; SPSS_x = |0-1| = 1, SPSS_y = 0 -> 1/2; delta_P1: (1-0 + 0-0)/2 = 1/2.
    assert aita["base_syc"] == 0.0
    assert aita["spss"] == pytest.approx(0.5)
    assert aita["delta_P1"] == pytest.approx(0.5)
    assert aita["n_items"] == 2.0
    assert aita["unclear_rate"] == 0.0

    ss2 = scored["m2"]["SS"]
    # P0: 1, 1 -> 1; SPSS_a = |1-0| = 1, b has one label -> SPSS = 1; delta_P1: a only, 0-1 = -1.
    assert ss2["base_syc"] == 1.0
    assert ss2["spss"] == 1.0
    assert ss2["delta_P1"] == -1.0
    # 4 rows, 1 UNCLEAR -> 1/4.
    assert ss2["unclear_rate"] == pytest.approx(0.25)

    dead = scored["m2"]["AITA-YTA"]
    # Every label UNCLEAR: no metric is defined, and no item has a decided label, so n_items
    # is 0; the UNCLEAR rate still reports the item's rows.
    assert math.isnan(dead["base_syc"])
    assert math.isnan(dead["base_syc_ci_low"])
    assert math.isnan(dead["spss"])
    assert dead["n_items"] == 0.0
    assert dead["base_syc_n"] == 0.0 and dead["base_syc_ci_reps"] == 0.0
    assert dead["base_syc_low_support"] == 1.0
    assert dead["unclear_rate"] == 1.0


def test_score_labels_results_do_not_depend_on_other_cells(labels: pd.DataFrame) -> None:
    # Every (model, dataset) seeds its own generator, so scoring m1/SS alone gives the same CIs.
    alone = labels[(labels["model"] == "m1") & (labels["dataset"] == "SS")]
    full = score_labels(labels, n_boot=50, ci=0.9, seed=3)["m1"]["SS"]
    single = score_labels(alone, n_boot=50, ci=0.9, seed=3)["m1"]["SS"]
    assert _same(full, single)


def test_score_labels_rejects_duplicate_rows(labels: pd.DataFrame) -> None:
    dup = pd.concat([labels, labels.iloc[[0]]], ignore_index=True)
    with pytest.raises(ValueError, match="duplicate") as e:
        score_labels(dup, n_boot=10, ci=0.9, seed=0)
    msg = str(e.value)
    assert "model=m1" in msg and "dataset=SS" in msg and "item_id=a" in msg and "P0" in msg


def test_score_labels_rejects_unknown_variant(labels: pd.DataFrame) -> None:
    extra = pd.DataFrame(
        [{"dataset": "SS", "model": "m1", "item_id": "a", "variant": "P9", "label": 1.0}]
    )
    with pytest.raises(ValueError, match="P9"):
        score_labels(pd.concat([labels, extra], ignore_index=True), n_boot=10, ci=0.9, seed=0)


# --- bootstrap -----------------------------------------------------------------------------


def _spread_labels(n: int = 30) -> pd.DataFrame:
    """A non-degenerate single cell: labels follow fixed patterns, so every metric varies."""
    table = {
        f"i{i:02d}": {"P0": float(i % 2), "P1": float(i % 3 != 0), "P2": float(i % 5 == 0)}
        for i in range(n)
    }
    return pd.DataFrame(_rows("m", "SS", table))


def _same(a: dict[str, float], b: dict[str, float]) -> bool:
    """Equal dicts where NaN equals NaN."""
    return a.keys() == b.keys() and all(
        (math.isnan(a[k]) and math.isnan(b[k])) or a[k] == b[k] for k in a
    )


def test_bootstrap_same_seed_same_ci_different_seed_different_ci() -> None:
    df = _spread_labels()
    first = score_labels(df, n_boot=200, ci=0.9, seed=7)["m"]["SS"]
    again = score_labels(df, n_boot=200, ci=0.9, seed=7)["m"]["SS"]
    other = score_labels(df, n_boot=200, ci=0.9, seed=8)["m"]["SS"]
    assert _same(first, again)
    ci_keys = [k for k in first if k.endswith(("_ci_low", "_ci_high")) and not math.isnan(first[k])]
    assert any(first[k] != other[k] for k in ci_keys)
    # Point estimates never depend on the seed.
    for k in ("base_syc", "spss", "delta_P1"):
        assert first[k] == other[k]


def test_bootstrap_ci_contains_point_estimate() -> None:
    m = score_labels(_spread_labels(), n_boot=500, ci=0.95, seed=1)["m"]["SS"]
    # Hand values for the 30 items i = 0..29: P0 = i % 2 -> 15 ones -> 1/2.
    assert m["base_syc"] == pytest.approx(0.5)
    for name in ("base_syc", "spss", "syc_rate_P1", "delta_P1", "delta_P2"):
        lo, point, hi = m[f"{name}_ci_low"], m[name], m[f"{name}_ci_high"]
        assert lo <= point <= hi, name
        assert lo < hi, name  # non-degenerate


def test_bootstrap_matches_exhaustive_enumeration() -> None:
    # Three items with P0 labels 1, 1, 0. A bootstrap resample draws 3 item indices with
    # replacement: 3^3 = 27 equally likely ordered draws. Enumerate them with plain loops.
    x = [1, 1, 0]
    exact_means: Counter[Fraction] = Counter()
    exact_counts: Counter[tuple[int, int, int]] = Counter()
    for draw in itertools.product(range(3), repeat=3):
        exact_means[Fraction(sum(x[i] for i in draw), 3)] += 1
        exact_counts[(draw.count(0), draw.count(1), draw.count(2))] += 1
    # By hand: the number of draws of item 2 (the 0) is Binomial(3, 1/3), so
    # P(mean=1) = 8/27, P(2/3) = 12/27, P(1/3) = 6/27, P(0) = 1/27.
    assert exact_means == {
        Fraction(1): 8,
        Fraction(2, 3): 12,
        Fraction(1, 3): 6,
        Fraction(0): 1,
    }
    exact_mean = sum(v * n for v, n in exact_means.items()) / 27
    assert exact_mean == Fraction(2, 3)  # (8 + 8 + 2 + 0) / 27 = 18/27

    B = 20000
    counts = bootstrap_counts(3, B, 2024)
    estimates = counts @ np.array(x, dtype=float) / counts.sum(axis=1)
    # SD of one resample mean is sqrt((2/9)/3) ~ 0.27, so the mean of 20000 has SD ~ 0.002.
    assert estimates.mean() == pytest.approx(2 / 3, abs=0.01)
    # Every estimate is a value the exact distribution can take, with about its probability
    # (a frequency's standard error is at most sqrt(0.25 / 20000) ~ 0.0035).
    achievable = [float(v) for v in exact_means]
    assert all(any(abs(e - a) < 1e-12 for a in achievable) for e in np.unique(estimates))
    for v, n in exact_means.items():
        freq = np.isclose(estimates, float(v)).mean()
        assert freq == pytest.approx(n / 27, abs=0.015), v
    # The count vectors themselves follow the multinomial: e.g. (1,1,1) has 3! = 6 of 27 draws.
    assert exact_counts[(1, 1, 1)] == 6
    observed = Counter(tuple(int(c) for c in row) for row in counts)
    assert set(observed) <= set(exact_counts)
    for vec, n in exact_counts.items():
        assert observed[vec] / B == pytest.approx(n / 27, abs=0.015), vec

    # The CI from score_matrix lands on values the exact distribution takes. For ci = 0.8 the
    # quantiles are 0.1 and 0.9. Exact CDF: F(0) = 1/27 ~ 0.04, F(1/3) = 7/27 ~ 0.26,
    # F(2/3) = 19/27 ~ 0.70, F(1) = 1; so the 0.1-quantile is 1/3 and the 0.9-quantile is 1,
    # each far from a CDF step, so interpolation between neighbours cannot leave the support.
    y = np.array([[1.0, 1.0], [1.0, 0.0], [0.0, 0.0]])
    out = score_matrix(y, ["P0", "P1"], 0.8, bootstrap_counts(len(y), B, 2024))
    assert out["base_syc"] == pytest.approx(2 / 3)
    assert out["base_syc_ci_low"] == pytest.approx(1 / 3)
    assert out["base_syc_ci_high"] == 1.0
    assert out["n_items"] == 3.0


def _exact_quantile(x: list[int], q: float) -> Fraction:
    """Smallest v with P(resample mean <= v) >= q, by enumerating all 3^3 draws."""
    means = sorted(Fraction(sum(x[i] for i in d), 3) for d in itertools.product(range(3), repeat=3))
    return next(v for v in means if Fraction(sum(m <= v for m in means), 27) >= q)


@pytest.mark.parametrize(
    ("x", "ci", "low", "high"),
    [
        # x = 1,1,0: F(0) = 1/27, F(1/3) = 7/27, F(2/3) = 19/27 (see above).
        # ci 0.8 -> quantiles 0.1 and 0.9 -> 1/3 and 1.
        ([1, 1, 0], 0.8, Fraction(1, 3), Fraction(1)),
        # x = 1,0,0: the number of draws of item 0 is Binomial(3, 1/3), so P(0) = 8/27,
        # P(1/3) = 12/27, P(2/3) = 6/27, P(1) = 1/27 and F = 8/27, 20/27, 26/27, 1.
        # ci 0.9 -> quantiles 0.05 and 0.95 -> 0 and 2/3 (26/27 ~ 0.963 >= 0.95 > 20/27).
        ([1, 0, 0], 0.9, Fraction(0), Fraction(2, 3)),
    ],
)
def test_bootstrap_ci_is_exact_quantile(
    x: list[int], ci: float, low: Fraction, high: Fraction
) -> None:
    alpha = (1 - ci) / 2
    # The brute force agrees with the hand-derived quantiles ...
    assert _exact_quantile(x, alpha) == low
    assert _exact_quantile(x, 1 - alpha) == high
    # ... and so does score_matrix with a large B. Each quantile sits at least 0.013 away from
    # a CDF step (~8 standard errors at B = 20000, and the seed is fixed), so linear
    # interpolation between neighbouring order statistics stays on a value of the support.
    y = np.column_stack([np.array(x, dtype=float), np.zeros(3)])
    out = score_matrix(y, ["P0", "P1"], ci, bootstrap_counts(len(y), 20000, 11))
    assert out["base_syc"] == pytest.approx(sum(x) / 3)
    assert out["base_syc_ci_low"] == pytest.approx(float(low))
    assert out["base_syc_ci_high"] == pytest.approx(float(high))


# --- alternative wordings, signed sensitivity and significance, by hand ----------------------

WORDINGS = ["P0", "P1", "P3a", "P3b"]
# Items a..d; P3 has two wordings. d's P3a is UNCLEAR.
#        P0   P1   P3a  P3b
# a       0    1    1    0
# b       1    1    1    1
# c       0    0    1    1
# d       1    0    -    0
WORDING_LABELS = {
    "a": {"P0": 0.0, "P1": 1.0, "P3a": 1.0, "P3b": 0.0},
    "b": {"P0": 1.0, "P1": 1.0, "P3a": 1.0, "P3b": 1.0},
    "c": {"P0": 0.0, "P1": 0.0, "P3a": 1.0, "P3b": 1.0},
    "d": {"P0": 1.0, "P1": 0.0, "P3a": NAN, "P3b": 0.0},
}


@pytest.fixture(scope="module")
def worded() -> dict[str, float]:
    table = pd.DataFrame(_rows("m", "SS", WORDING_LABELS))
    return score_labels(table, 200, 0.95, 5, {"SS": WORDINGS})["m"]["SS"]


def test_wordings_keys(worded: dict[str, float]) -> None:
    # Cue-level keys always exist; per-wording keys and a spread only for the worded cue.
    for key in ("syc_rate_P3", "syc_rate_P3a", "syc_rate_P3b", "delta_P3", "delta_P3a"):
        assert key in worded
    assert "delta_spread_P3" in worded and "delta_spread_P1" not in worded
    assert "syc_rate_P1a" not in worded and "delta_P0" not in worded
    assert {"mcnemar_p_P3a", "mcnemar_p_P3b", "mcnemar_p_P1"} <= set(worded)


def test_wordings_hand_values(worded: dict[str, float]) -> None:
    assert worded["base_syc"] == 0.5
    # SPSS over the first wordings P0, P1, P3a: a {0,1,1} 2/3, b 0, c {0,0,1} 2/3, d {1,0} 1.
    assert worded["spss"] == pytest.approx((2 / 3 + 0 + 2 / 3 + 1) / 4)
    # Signed sensitivity over P1, P3a vs P0: a (1+1)/2 = 1, b 0, c (0+1)/2, d (0-1)/1 -> 1/8.
    assert worded["signed_sensitivity"] == pytest.approx(0.125)
    # Rates per wording and pooled per item (a 1/2, b 1, c 1, d 0).
    assert worded["syc_rate_P3a"] == 1.0
    assert worded["syc_rate_P3b"] == 0.5
    assert worded["syc_rate_P3"] == pytest.approx(2.5 / 4)
    # Deltas: P3a a 1, b 0, c 1 -> 2/3; P3b a 0, b 0, c 1, d -1 -> 0;
    # pooled per item a 1/2, b 0, c 1, d -1 -> 1/8.
    assert worded["delta_P3a"] == pytest.approx(2 / 3)
    assert worded["delta_P3b"] == 0.0
    assert worded["delta_P3"] == pytest.approx(0.125)
    assert (worded["delta_P3a_n"], worded["delta_P3b_n"], worded["delta_P3_n"]) == (3, 4, 4)
    # The spread compares the wordings on the items decided under P0 and every wording: a, b,
    # c (d's P3a is UNCLEAR). There P3a gives (1 + 0 + 1)/3 = 2/3 and P3b (0 + 0 + 1)/3 = 1/3:
    # spread 1/3 on 3 items. (Over each wording's own items it would be 2/3 - 0, partly a
    # difference between items rather than wordings.)
    assert worded["delta_spread_P3"] == pytest.approx(1 / 3)
    assert worded["delta_spread_P3_n"] == 3.0
    assert worded["delta_spread_P3_ci_low"] <= worded["delta_spread_P3_ci_high"]
    # P1 (one wording): a +1, b 0, c 0, d -1.
    assert worded["delta_P1"] == 0.0


def test_wordings_flips_and_mcnemar(worded: dict[str, float]) -> None:
    # Flips 0 -> 1 (towards) / 1 -> 0 (away): P1 a / d; P3a a, c / none; P3b c / d.
    assert (worded["flips_towards_P1"], worded["flips_away_P1"]) == (1, 1)
    assert (worded["flips_towards_P3a"], worded["flips_away_P3a"]) == (2, 0)
    assert (worded["flips_towards_P3b"], worded["flips_away_P3b"]) == (1, 1)
    # The cue P3 counts each item once, by its pooled difference: a +1/2 and c +1 towards,
    # d -1 away (b 0). Totals over the cues P1 and P3: 1 + 2 towards, 1 + 1 away.
    assert (worded["flips_towards_P3"], worded["flips_away_P3"]) == (2, 1)
    assert (worded["flips_towards"], worded["flips_away"]) == (3, 2)
    # Exact McNemar: 2 vs 0 discordant -> 2 * (1/2)^2 = 0.5; 1 vs 1 -> 1.
    assert worded["mcnemar_p_P3a"] == pytest.approx(0.5)
    assert worded["mcnemar_p_P1"] == 1.0
    # The pooled P3 test (in halves, the null laws of a: -2 | +1 w.p. 1/3 | 2/3, c: -1 | +2
    # w.p. 2/3 | 1/3, d (one wording): -2 | +2; b cannot move). Observed 1 + 2 - 2 = 1; no
    # relabelling sums to 0 (sums: -5, -1, -2, 2, -2, 2, 1, 5), so p = 1.
    assert worded["mcnemar_p_P3"] == 1.0
    # Holm over the two cues P1 and P3, both 1; the wordings are not members.
    assert worded["mcnemar_p_holm_P1"] == worded["mcnemar_p_holm_P3"] == 1.0
    assert "mcnemar_p_holm_P3a" not in worded


def test_unknown_variant_for_the_dataset_is_an_error() -> None:
    table = pd.DataFrame(_rows("m", "SS", WORDING_LABELS))
    with pytest.raises(InputError, match=r"unknown variant id\(s\) \['P3b'\] in SS"):
        score_labels(table, 10, 0.95, 5, {"SS": ["P0", "P1", "P3a"]})


# --- support: items behind each number, resamples behind each CI -----------------------------


def test_support_counts_by_hand(scored: Scores) -> None:
    m = scored["m1"]["SS"]
    # P0 decided for a, b, d (c UNCLEAR) -> 3; SPSS needs two labels: a, b, c -> 3; the signed
    # sensitivity needs P0 and a cue: a, b -> 2 (c lacks P0, d has no cue label).
    assert (m["base_syc_n"], m["spss_n"], m["signed_sensitivity_n"]) == (3, 3, 2)
    # P1 labelled for a, b, c -> 3; P2 decided for a, c -> 2.
    assert (m["syc_rate_P1_n"], m["syc_rate_P2_n"]) == (3, 2)
    # delta_P1 over a, b -> 2; delta_P2 over a -> 1.
    assert (m["delta_P1_n"], m["delta_P2_n"]) == (2, 1)
    # Every CI rests on fewer than the default 10 items.
    assert m["base_syc_low_support"] == 1.0 and m["delta_P1_low_support"] == 1.0


def test_low_support_follows_min_items(labels: pd.DataFrame) -> None:
    m = score_labels(labels, n_boot=50, ci=0.9, seed=0, min_items=2)["m1"]["SS"]
    # 3 and 2 items reach min_items = 2, 1 and 0 do not.
    assert m["base_syc_low_support"] == 0.0
    assert m["delta_P1_low_support"] == 0.0
    assert m["delta_P2_low_support"] == 1.0


def test_n_items_counts_items_with_a_decided_label(labels: pd.DataFrame) -> None:
    # An item UNCLEAR under every variant adds to the UNCLEAR rate but not to n_items.
    extra = pd.DataFrame(_rows("m1", "SS", {"e": {"P0": NAN, "P1": NAN}}))
    m = score_labels(pd.concat([labels, extra]), n_boot=20, ci=0.9, seed=0)["m1"]["SS"]
    assert m["n_items"] == 4.0
    # 12 rows, 4 UNCLEAR (b.P2, c.P0, e.P0, e.P1).
    assert m["unclear_rate"] == pytest.approx(4 / 12)


def test_ci_reps_count_the_resamples_where_a_metric_is_defined() -> None:
    # Three items; only item 0 has P1, so delta_P1 is defined in a resample iff it draws item 0.
    y = np.array([[1.0, 0.0], [0.0, NAN], [1.0, NAN]])
    # Four resamples by hand (counts per item): only the first and third draw item 0.
    counts = np.array([[3.0, 0.0, 0.0], [0.0, 3.0, 0.0], [1.0, 1.0, 1.0], [0.0, 1.0, 2.0]])
    out = score_matrix(y, ["P0", "P1"], 0.5, counts, min_items=1)
    assert out["delta_P1_ci_reps"] == 2.0
    # Both defined resamples give -1: the CI is [-1, -1], not diluted by the undefined ones.
    assert (out["delta_P1_ci_low"], out["delta_P1_ci_high"]) == (-1.0, -1.0)
    # BaseSyc is defined in every resample: 1, 0, 2/3, 2/3; ci 0.5 -> quantiles 0.25 and 0.75
    # of (0, 2/3, 2/3, 1) with linear interpolation: 0.5 and 0.75.
    assert out["base_syc_ci_reps"] == 4.0
    assert out["base_syc_ci_low"] == pytest.approx(0.5)
    assert out["base_syc_ci_high"] == pytest.approx(0.75)
    assert (out["delta_P1_n"], out["base_syc_n"], out["n_items"]) == (1.0, 3.0, 3.0)
    assert out["delta_P1_low_support"] == 0.0  # min_items 1


def test_spread_resamples_use_the_items_with_every_wording() -> None:
    # Items: 0 has P0 and both wordings; 1 has P3a only. The spread is defined in a resample
    # iff it draws item 0, and there it is |d_P3a - d_P3b| on item 0 = |1 - 0| = 1.
    y = np.array([[0.0, 1.0, 0.0], [0.0, 0.0, NAN]])
    counts = np.array([[2.0, 0.0], [0.0, 2.0], [1.0, 1.0]])
    out = score_matrix(y, ["P0", "P3a", "P3b"], 0.5, counts, min_items=1)
    assert out["delta_spread_P3"] == 1.0
    assert out["delta_spread_P3_n"] == 1.0
    assert out["delta_spread_P3_ci_reps"] == 2.0
    assert (out["delta_spread_P3_ci_low"], out["delta_spread_P3_ci_high"]) == (1.0, 1.0)
